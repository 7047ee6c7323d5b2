"""Known answers written as a base kernel plus named changes (expected.toml: `base` + `mutate`, autograder/known.py).

Each change's old text occurs exactly once where it is applied, a change that is missing, repeated or changes nothing
is an error that names the answer, and every mutated answer compiles to SASS that differs from its base's where the
change says it should (a deleted wait really removes a wait instruction).
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from autograder import known  # known answers: the data and their grading
from autograder.known import (MutationError, answer_text, apply_mutations, base_path, base_text, kernel_source,
                              known_answers)
from autograder.spec import all_specs, load
from kernels.compile import CompileError, compile_cuda
from kernels.sass import disassemble, opcodes

SLUGS = [s.slug for s in all_specs()]  # every topic with a grader spec
MUTATED = [(slug, ka.name) for slug in SLUGS for ka in known_answers(slug) if ka.base is not None]


def _ka(slug, name):
    return next(ka for ka in known_answers(slug) if ka.name == name)


def _kernel(slug):
    return next(iter(load(slug).exercises.values())).kernel


def _texts(cub, kernel):
    return [i.text for i in disassemble(cub)[kernel]]


def _count(ops, prefix):
    return sum(o == prefix or o.startswith(prefix + ".") for o in ops)


def test_every_topic_has_mutated_answers():
    assert {slug for slug, _ in MUTATED} == set(SLUGS)


@pytest.mark.parametrize("slug, name", MUTATED)
def test_each_old_text_occurs_exactly_once(slug, name):
    ka = _ka(slug, name)
    text = base_text(slug, ka)
    for i, (old, new) in enumerate(ka.mutate, 1):
        assert text.count(old) == 1, f"{slug}/{name}: change {i} old text occurs {text.count(old)} times"
        assert old != new
        text = text.replace(old, new)
    assert text != base_text(slug, ka)


@pytest.mark.parametrize("slug, name", MUTATED)
def test_mutated_answer_says_what_it_is(slug, name):
    ka = _ka(slug, name)
    src = answer_text(slug, ka)
    first = src.splitlines()[0]
    assert first.startswith(f'// Known answer "{name}" = ') and "change" in first
    header = src[:src.index("\n", src.index("// Expected: "))]
    assert ka.about[:40].split()[0] in header
    assert src.endswith(apply_mutations(base_text(slug, ka), ka.mutate))
    # the answer has no file of its own any more: one kernel, one place
    assert not (known.known_dir(slug) / f"{name}.cu").exists()
    assert base_path(slug, ka.base).is_file() or ka.base == "solution"


def test_base_paths():
    assert base_path("tma", "plain_loads.cu") == known.known_dir("tma") / "plain_loads.cu"
    assert base_path("pipeline", "kernels/pipeline/grading/known/rungs/block_scope.cu") == \
        known.known_dir("pipeline") / "rungs" / "block_scope.cu"


def test_apply_mutations_is_strict():
    base = "a();\nb();\nb();\n"
    assert apply_mutations(base, [("a();", "c();")]) == "c();\nb();\nb();\n"
    with pytest.raises(MutationError, match=r"demo: change 1's old text occurs 0 times in base\.cu.*'x\(\);'"):
        apply_mutations(base, [("x();", "y();")], who="demo", base="base.cu")
    with pytest.raises(MutationError, match=r"change 1's old text occurs 2 times"):
        apply_mutations(base, [("b();", "y();")])
    with pytest.raises(MutationError, match=r"change 2's old text occurs 0 times .*after changes 1\.\.1"):
        apply_mutations(base, [("a();", "c();"), ("a();", "d();")])  # applied in order: a() is gone
    with pytest.raises(MutationError, match="changes nothing"):
        apply_mutations(base, [("a();", "a();")])
    with pytest.raises(MutationError, match="leave"):
        apply_mutations(base, [("a();", "z();"), ("z();", "a();")])  # changes that cancel out
    with pytest.raises(MutationError, match="empty old text"):
        apply_mutations(base, [("", "z();")])
    with pytest.raises(MutationError, match="no changes"):
        apply_mutations(base, [])


def _topic(tmp_path, monkeypatch, entry: str):
    (d := tmp_path / "demo" / "grading" / "known").mkdir(parents=True)
    (d / "k.cu").write_text("// the base's header\n#include <x>\nint f() { return 1; }\n")
    (d / "expected.toml").write_text(entry)
    monkeypatch.setattr(known, "KERNELS", tmp_path)
    return known_answers("demo")


def test_a_mutation_that_no_longer_applies_names_the_answer(tmp_path, monkeypatch):
    [ka] = _topic(tmp_path, monkeypatch, '[bad]\nabout = "x"\nbase = "k.cu"\nmutate = [["return 2;", "return 3;"]]\n'
                                         'correctness = 0\n')
    assert ka.source == "k.cu + 1 change"
    with pytest.raises(MutationError, match=r"demo/bad: change 1's old text occurs 0 times in k\.cu.*return 2;"):
        answer_text("demo", ka)


def test_a_mutated_answer_replaces_its_base_header(tmp_path, monkeypatch):
    [ka] = _topic(tmp_path, monkeypatch, '[good]\nabout = "returns 2"\nbase = "k.cu"\n'
                                         'mutate = [["return 1;", "return 2;"]]\ncorrectness = 0\n')
    assert answer_text("demo", ka) == (
        '// Known answer "good" = k.cu with 1 change (kernels/demo/grading/known/expected.toml): returns 2.\n'
        "// Expected: correctness 0.\n#include <x>\nint f() { return 2; }\n")


def test_a_base_may_name_another_known_answer(tmp_path, monkeypatch):
    # base = "two": the kernel of the known answer "two" (itself k.cu with a change), changed again
    kas = _topic(tmp_path, monkeypatch, '[two]\nbase = "k.cu"\nmutate = [["return 1;", "return 2;"]]\n'
                                        '[three]\nabout = "returns 3"\nbase = "two"\n'
                                        'mutate = [["return 2;", "return 3;"]]\n')
    three = next(ka for ka in kas if ka.name == "three")
    assert base_path("demo", "two") == tmp_path / "demo" / "grading" / "known" / "expected.toml"
    assert answer_text("demo", three) == (
        '// Known answer "three" = two with 1 change (kernels/demo/grading/known/expected.toml): returns 3.\n'
        "#include <x>\nint f() { return 3; }\n")
    with pytest.raises(MutationError, match=r"demo/three: change 1's old text occurs 0 times in two"):
        answer_text("demo", replace(three, mutate=(("return 1;", "return 3;"),)))


@pytest.mark.parametrize("entries, match", [
    ('[a]\nbase = "b"\nmutate = [["1", "2"]]\n[b]\nbase = "a"\nmutate = [["2", "1"]]\n', "circle: a -> b -> a"),
    ('[a]\nbase = "gone"\nmutate = [["1", "2"]]\n', "'gone' is no known answer"),
    ('[a]\nbase = "b"\nmutate = [["1", "2"]]\n[b]\nsource = "b.py"\n', "'b' is not a kernel"),
])
def test_a_base_naming_an_answer_must_be_a_kernel_and_no_circle(tmp_path, monkeypatch, entries, match):
    [a, *_] = _topic(tmp_path, monkeypatch, entries)
    with pytest.raises(MutationError, match=match):
        answer_text("demo", a)


def test_a_rung_given_as_base_and_mutate(tmp_path, monkeypatch):
    _topic(tmp_path, monkeypatch, "")
    (here := tmp_path / "demo" / "grading" / "known" / "rungs").mkdir()
    (here / "old.cu").write_text("// old\nint g();\n")
    (here / "rungs.toml").write_text(
        '[earlier]\nabout = "returns 0"\nbase = "k.cu"\nmutate = [["return 1;", "return 0;"]]\n')
    assert [r.name for r in known.rungs("demo")] == ["earlier"]
    assert known.rung_source("demo", "earlier") == (
        '// Measured rung "earlier" = k.cu with 1 change (kernels/demo/grading/known/rungs/rungs.toml): returns 0.\n'
        "#include <x>\nint f() { return 0; }\n")
    assert known.rung_source("demo", "old") == "// old\nint g();\n"  # a rung of its own file
    with pytest.raises(KeyError, match="no rung 'gone'"):
        known.rung_source("demo", "gone")
    (here / "rungs.toml").write_text(
        '[scored]\nbase = "k.cu"\nmutate = [["1", "0"]]\ncorrectness = 3\n')
    with pytest.raises(MutationError, match="no scores"):
        known.rungs("demo")


@pytest.mark.parametrize("entry, match", [
    ('base = "k.cu"\n', "go together"),
    ('mutate = [["a", "b"]]\nsource = "k.cu"\n', "go together"),
    ('base = "k.cu"\nsource = "k.cu"\nmutate = [["a", "b"]]\n', "not both"),
    ('base = "k.cu"\nmutate = []\n', "non-empty list"),
    ('base = "k.cu"\nmutate = [["only old"]]\n', "non-empty list"),
])
def test_malformed_entries_are_refused(tmp_path, monkeypatch, entry, match):
    with pytest.raises(MutationError, match=match):
        _topic(tmp_path, monkeypatch, '[bad]\nabout = "x"\n' + entry)


def test_a_missing_base_is_an_error(tmp_path, monkeypatch):
    [ka] = _topic(tmp_path, monkeypatch, '[bad]\nbase = "gone.cu"\nmutate = [["a", "b"]]\n')
    with pytest.raises(MutationError, match="not a file"):
        answer_text("demo", ka)


# ---------------------------------------------------------------------------------------------- the SASS they change
def _base_cubin(slug, ka):
    ex = next(iter(load(slug).exercises.values()))
    return compile_cuda(base_text(slug, ka), name=ex.answer_var)


def _cubin(slug, name):
    ex = next(iter(load(slug).exercises.values()))
    return compile_cuda(kernel_source(slug, name), name=ex.answer_var)


# The same SASS as the base, by design: the primitives twin of the course solution (the course solution says so), and the
# course solution with diagnostics that forge a ptxas advisory (its SASS is the solution's: only the log differs).
SAME_SASS = {("pipeline", "correct_primitives"), ("gemm", "forged_advisory")}
# Does not compile, by design: ptxas rejects an 8-byte cp.async.cg; a header outside the course's is refused before
# the compiler reads a file.
NO_SASS = {("ldgsts", "cg_8_bytes"): "expected to be 16", ("fp8_gemm", "include_environ"): "absolute path '/proc/self/environ'"}


@pytest.mark.parametrize("slug, name", MUTATED)
def test_mutated_answer_compiles_and_its_sass_differs_from_the_base(slug, name):
    ka = _ka(slug, name)
    if (slug, name) in NO_SASS:
        with pytest.raises(CompileError, match=NO_SASS[slug, name]):
            _cubin(slug, name)
        return
    k = _kernel(slug)
    mine, base = _texts(_cubin(slug, name), k), _texts(_base_cubin(slug, ka), k)
    assert (mine == base) == ((slug, name) in SAME_SASS), (slug, name)


def _ops(slug, name):
    return opcodes(_cubin(slug, name), _kernel(slug))


def _base_ops(slug, name):
    return opcodes(_base_cubin(slug, _ka(slug, name)), _kernel(slug))


def test_pipeline_missing_wait_removes_a_phase_wait():
    # block scope: consumer_wait and producer_acquire each wait on an mbarrier phase; one of them is gone
    base, mine = _base_ops("pipeline", "missing_wait"), _ops("pipeline", "missing_wait")
    assert _count(mine, "SYNCS.PHASECHK") < _count(base, "SYNCS.PHASECHK")
    assert "DEPBAR" not in " ".join(base) and _count(mine, "DEPBAR") >= 1  # the drain (cp.async.wait_all)


def test_ldgsts_races_lose_their_wait_or_their_commit():
    base = _base_ops("ldgsts", "race_no_wait")
    assert _count(base, "DEPBAR") == 1 and _count(base, "LDGDEPBAR") == 1
    mine = _ops("ldgsts", "race_no_wait")
    assert _count(mine, "DEPBAR") == 0 and _count(mine, "LDGDEPBAR") == 1
    mine = _ops("ldgsts", "no_commit")
    assert _count(mine, "DEPBAR") == 1 and _count(mine, "LDGDEPBAR") == 0
    assert not any("BYPASS" in o for o in _ops("ldgsts", "ca_16") if o.startswith("LDGSTS"))


def test_tma_mutations():
    base = _base_ops("tma", "missing_fence")
    assert _count(base, "MEMBAR.ALL.CTA") == 1 and _count(_ops("tma", "missing_fence"), "MEMBAR.ALL.CTA") == 0
    assert _count(_ops("tma", "seed_barrier_count"), "SYNCS.ARRIVE") > _count(base, "SYNCS.ARRIVE")
    for name in ("wrong_parity", "wrong_expect_tx"):  # the change is in a value: the path stays whole
        assert {"UTMALDG.2D", "UTMASTG.2D", "MEMBAR.ALL.CTA"} <= set(_ops("tma", name))


def test_smem_tiling_no_sync_removes_the_barrier():
    assert _count(_base_ops("smem_tiling", "no_sync"), "BAR.SYNC") == 1
    assert _count(_ops("smem_tiling", "no_sync"), "BAR.SYNC") == 0


def test_naive_loads_mutations_build_on_the_notebook_solution():
    ka = _ka("naive_loads", "off_by_one")
    assert ka.base == "solution" and "### BEGIN SOLUTION" not in base_text("naive_loads", ka)
    ops = _ops("naive_loads", "off_by_one")
    assert _count(ops, "LDG.E.128") and _count(ops, "STG.E.128")
    cached = kernel_source("naive_loads", "cached_result")
    assert "__device__ int computed_once = 0;" in cached and "if (computed_once) return;" in cached


def test_the_solution_answer_is_a_kernel_source_too():
    """A known answer whose source is the solutions notebook's cell is compiled and timed by the benches like any
    other (the H200 run of day 1's bench found kernel_source refusing it)."""
    from autograder.known import kernel_source, known_answers, solution_literal
    from autograder.spec import all_specs

    for spec in all_specs():
        for ka in known_answers(spec.slug):
            if ka.source == "solution" and ka.base is None:
                ex = spec.exercises[ka.exercise] if ka.exercise else next(iter(spec.exercises.values()))
                src = kernel_source(spec.slug, ka.name)
                cell = solution_literal(spec, ex.answer_cell, ex.answer_var)
                assert ex.kernel in src and "### BEGIN SOLUTION" in cell
                if ka.name == "solution":  # the cell as the notebook has it (the lines the understanding checks number)
                    assert src == cell
                else:  # CUDA: the cell with its nbgrader markers gone
                    assert src == "".join(ln for ln in cell.splitlines(keepends=True) if not ln.startswith("### "))
