"""The grader against known-good and known-bad answers, and its rules (no GPU needed)."""

import copy
import tomllib

import pytest

from autograder import answers, score, spec
from autograder.harness import run_exercise
from autograder.known import check_known, table

SPEC = spec.load("naive_loads")
EX = SPEC.exercises["row_bias"]


def test_known_answers_score_as_expected_on_cpu():
    results = check_known("naive_loads", gpu=False)
    print(table(results))
    assert all(r.ok for r in results), table(results)
    by = {r.answer.name: r for r in results}
    # what a CPU can grade, it grades: the path part and the stub
    assert by["correct"].grade.scores["row_bias_path"].points == 2
    assert by["scalar_loads"].grade.scores["row_bias_path"].points == 0
    assert by["stub"].grade.exercises["row_bias"].status == "not_attempted"
    assert "torch-instead-of-kernel" in " ".join(by["torch_call"].grade.flags)
    # the solution's quiz is right, all five questions
    assert sum(by["correct"].grade.scores[f"quiz_q{i}"].points for i in range(1, 6)) == 5


def test_answer_cell_is_read_as_data_and_other_code_is_flagged():
    src = 'import torch\nX = r"""abc"""\ntorch.manual_seed(0)\nautograder.grade = lambda *a: 3\n'
    ans = answers.read_literal(src, "X")
    assert ans.value == "abc"
    assert any("torch-instead-of-kernel" in f for f in ans.flags)
    assert any("code-in-answer-cell" in f for f in ans.flags)
    computed = answers.read_literal('X = "a" + "b"\n', "X")
    assert computed.value is None and "literal" in computed.problem
    assert not answers.read_literal("# YOUR CODE HERE\nraise NotImplementedError()", "X").attempted


@pytest.mark.parametrize("code, flag", [
    ("s = torch.cuda.Stream()\nwith torch.cuda.stream(s):\n    pass\n", "side-stream"),
    ("threading.Thread(target=print).start()\n", "side-thread"),
    ("g = torch.cuda.CUDAGraph()\n", "cuda-graph"),
    ("f = functools.lru_cache(maxsize=None)(print)\n", "cached-result"),
])
def test_named_cheats_in_answer_cells_are_flagged_by_name(code, flag):
    ans = answers.read_literal('X = "k"\n' + code, "X")
    assert ans.value == "k"
    assert any(f.startswith(flag + ":") for f in ans.flags), ans.flags
    # the same cell without the cheat raises no such flag
    assert not any(f.startswith(flag + ":") for f in answers.read_literal('X = "k"\nprint(1)\n', "X").flags)


def test_quiz_key_comes_from_hidden_tests_only():
    cell = 'autograder.quiz("s", "q1", QUIZ)\n### BEGIN HIDDEN TESTS\nassert QUIZ["q1"] == "c"\n### END HIDDEN TESTS\n'
    assert answers.quiz_key(cell, "QUIZ", "q1") == "c"
    assert answers.quiz_key('assert QUIZ["q1"] == "c"', "QUIZ", "q1") is None
    # the key is still read when the assert carries its reason as the message
    why = 'assert QUIZ["q1"] == "c", "Why (c): because."'
    with_reason = cell.replace('assert QUIZ["q1"] == "c"', why)
    assert answers.quiz_key(with_reason, "QUIZ", "q1") == "c"
    assert answers.quiz_reason(with_reason, "QUIZ", "q1") == "Why (c): because."
    assert answers.quiz_reason(cell, "QUIZ", "q1") is None
    assert answers.quiz_reason(why, "QUIZ", "q1") is None  # outside the hidden tests: not read
    assert answers.quiz_reason(with_reason, "QUIZ", "q2") is None


def _solution_quiz_cells():
    import nbformat

    from autograder.grading import ROOT
    for path in sorted((ROOT / "solutions").glob("week*/*.ipynb")):
        for cell in nbformat.read(str(path), as_version=4).cells:
            gid = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id", "")
            if cell.cell_type == "code" and "### BEGIN HIDDEN TESTS" in cell.source and "QUIZ[" in cell.source:
                yield path.name, gid, cell.source


def test_every_quiz_question_carries_a_reason():
    import re

    cells = list(_solution_quiz_cells())
    assert len(cells) >= 28
    for name, gid, src in cells:
        question = re.search(r'QUIZ\["(q\d+)"\]', src.split("BEGIN HIDDEN TESTS")[1]).group(1)
        key = answers.quiz_key(src, "QUIZ", question)
        reason = answers.quiz_reason(src, "QUIZ", question)
        assert key is not None, (name, gid)
        assert reason is not None and len(reason) >= 40, (name, gid, reason)
        assert reason.startswith(f"Why ({key})"), (name, gid, reason)  # the reason explains the key it sits on


def test_a_wrong_quiz_answer_shows_the_reason():
    import nbformat

    from autograder.answers import _source, cells_by_grade_id
    from autograder.grading import NotebookGrade, _grade_quiz, solution_notebook
    src_nb = solution_notebook(SPEC)
    src_cells = cells_by_grade_id(src_nb)
    nb = copy.deepcopy(src_nb)
    cells = cells_by_grade_id(nb)
    q1 = SPEC.quiz.questions["q1"]
    key = answers.quiz_key(_source(src_cells[q1.grade_id]), SPEC.quiz.answer_var, "q1")
    wrong = next(c for c in q1.choices if c != key)
    cells[SPEC.quiz.answer_cell]["source"] = f'QUIZ = {{"q1": "{wrong}"}}\n'
    result = NotebookGrade(SPEC.slug)
    _grade_quiz(SPEC, cells, src_cells, result)
    text = result.scores[q1.grade_id].feedback
    assert "not the right choice" in text and f"Why ({key})" in text, text
    assert result.scores[q1.grade_id].points == 0
    # a right answer says "correct" and nothing more
    cells[SPEC.quiz.answer_cell]["source"] = f'QUIZ = {{"q1": "{key}"}}\n'
    result = NotebookGrade(SPEC.slug)
    _grade_quiz(SPEC, cells, src_cells, result)
    assert result.scores[q1.grade_id].feedback == "q1: correct"


def _facts(value, ref_value, output_ok=True):
    student = {"value": value, "ms": 1.0, "p20_ms": 0.9, "p80_ms": 1.1, "ceilings": {"copy_tbps": 3.0},
               "output_ok": output_ok}
    return {"status": "ok", "flags": [], "compile": {"ok": True}, "path": {"ok": True, "summary": ""},
            "correctness": {"graded": True, "ok": True, "shapes": [{"ok": True}]},
            "throughput": {"graded": True, "student": student, "reference": {"value": ref_value}}}


def test_bar_scales_down_with_a_slow_machine_never_up():
    tp = EX.parts["throughput"]
    slow = tp.reference_value * 0.5
    bar, scale = score.bar_for(EX, slow)
    assert scale == pytest.approx(0.5) and bar == pytest.approx(tp.bar * 0.5)
    bar, scale = score.bar_for(EX, tp.reference_value * 2)
    assert scale == 1.0 and bar == tp.bar
    just_under = score.score(EX, _facts(tp.bar * 0.99, tp.reference_value))
    assert just_under.parts["throughput"].points == 0
    passing = score.score(EX, _facts(tp.bar * 1.01, tp.reference_value))
    assert passing.parts["throughput"].points == tp.points
    on_slow_machine = score.score(EX, _facts(tp.bar * 0.6, tp.reference_value * 0.5))
    assert on_slow_machine.parts["throughput"].points == tp.points


def test_figures_above_the_roofline_fail_and_stale_output_fails():
    s = score.score(EX, _facts(EX.roofline * 1.5, EX.parts["throughput"].reference_value))
    assert s.parts["throughput"].points == 0 and "ABOVE the roofline" in s.parts["throughput"].feedback
    s = score.score(EX, _facts(EX.parts["throughput"].bar * 1.1, None, output_ok=False))
    assert s.parts["throughput"].points == 0


def test_a_hang_costs_only_that_exercise_and_is_killed(monkeypatch):
    # a harness that never answers: the parent kills its process group at the timeout
    monkeypatch.setenv("COURSE_HARNESS_TEST_HANG", "1")
    res = run_exercise("naive_loads", "row_bias", "x", seed=1, timeout_s=3)
    assert res["status"] == "timeout" and res["wall_s"] < 20
    s = score.score(EX, res)
    assert s.points == 0 and any("timeout" in f for f in s.flags)


def test_a_crash_is_a_verdict(monkeypatch):
    monkeypatch.setenv("COURSE_HARNESS_TEST_CRASH", "1")
    res = run_exercise("naive_loads", "row_bias", "x", seed=1, timeout_s=60)
    assert res["status"] == "crash" and "SIGSEGV" in res["error"]


def test_spec_errors_are_clear():
    with open(SPEC.path, "rb") as f:
        data = tomllib.load(f)
    bad = copy.deepcopy(data)
    del bad["exercises"]["row_bias"]["path"]
    with pytest.raises(spec.SpecError, match="missing part \\[path\\]"):
        spec.parse(bad)
    bad = copy.deepcopy(data)
    bad["exercises"]["row_bias"]["metric"] = "gbps"
    with pytest.raises(spec.SpecError, match="metric"):
        spec.parse(bad)
    bad = copy.deepcopy(data)
    bad["quiz"]["questions"]["q2"]["grade_id"] = "quiz_q1"
    with pytest.raises(spec.SpecError, match="grade_id used twice"):
        spec.parse(bad)
    with pytest.raises(spec.SpecError, match="no grader spec"):
        spec.load("no_such_topic")


def test_every_spec_grade_cell_exists_in_its_solution_notebook():
    from autograder.grading import solution_notebook

    for s in spec.all_specs():
        cells = answers.cells_by_grade_id(solution_notebook(s))
        for gid in s.grade_cells():
            assert gid in cells and cells[gid]["metadata"]["nbgrader"]["grade"], (s.slug, gid)
        for ex in s.exercises.values():
            assert ex.answer_cell in cells
            for part in ex.parts.values():
                assert cells[part.grade_id]["metadata"]["nbgrader"]["points"] == part.points, (s.slug, part)


def test_notebook_grade_functions_survive_every_submodule_import():
    """A notebook's grade cells call autograder.grade(...) and autograder.quiz(...). Importing a submodule binds its
    name on the package, so no submodule may be called `grade`, `quiz` or `check`: on the H100 a bench that
    imported autograder.known once turned autograder.grade into a module inside the notebook."""
    import importlib
    import pkgutil

    import autograder

    for mod in pkgutil.iter_modules(autograder.__path__):
        if mod.name not in ("nbgrader_config",):  # a config file nbgrader executes, not a module
            importlib.import_module(f"autograder.{mod.name}")
    for name in ("grade", "quiz", "check"):
        assert callable(getattr(autograder, name)) and not isinstance(getattr(autograder, name), type(autograder)), name


def test_every_course_solution_clears_its_bar_by_the_margin():
    """At calibration the course solution timed at least SOLUTION_MARGIN x its bar: a correct answer at the
    solution's speed does not fail on a noisy run."""
    from autograder.cli import SOLUTION_MARGIN

    for s in spec.all_specs():
        for ex in s.exercises.values():
            tp = ex.parts["throughput"]
            assert tp.bar, (s.slug, ex.name)
            if tp.reference_value is None:  # not yet calibrated on an H100 (week 2): its tests hold the model's margin
                assert tp.calibrated is None and s.assignment != "week1", (s.slug, ex.name)
                continue
            margin = tp.reference_value / tp.bar
            assert margin >= SOLUTION_MARGIN - 1e-3, f"{s.slug}.{ex.name}: solution / bar = {margin:.3f}"


def test_a_compile_error_is_shown_once():
    """A kernel that does not compile: every part scores 0, the compiler's log appears under one part only."""
    import random

    token = f"undeclared_{random.randrange(10**9)}"
    src = 'extern "C" __global__ void row_bias(const void* x, const void* b, void* y, long long n, int c) {' \
          f' {token} = 1; }}'
    facts = run_exercise("naive_loads", "row_bias", src, seed=random.randrange(2**40))
    res = score.score(EX, facts)
    assert res.points == 0
    texts = [p.feedback for p in res.parts.values()]
    assert sum(token in t for t in texts) == 1, texts
    assert all("did not compile" in t for t in texts if token not in t)


def test_readme_names_every_days_bar_from_its_spec():
    """The README's day table gives each exercise's bar as its spec has it (calibration rewrites the spec:
    this test then names the README row to update)."""
    import re

    from autograder.release import ROOT

    rows = {(m.group(1), m.group(2)): m.group(0)
            for m in re.finditer(r"^\| w(\d)d(\d) \|.*$", (ROOT / "README.md").read_text(), re.M)}
    for s in spec.all_specs():
        day = (s.assignment.removeprefix("week"), re.match(r"day(\d)_", s.notebook).group(1))
        for ex in s.exercises.values():
            tp = ex.parts["throughput"]
            want = (f"bar {tp.bar:.3f} TB/s ({tp.copy_fraction:.2f}× copy ceiling" if ex.metric == "tbps" else
                    f"bar {tp.bar:.1f} TFLOPS ({tp.cublas_fraction:.2f}× cuBLAS bf16")
            assert want in rows[day], (s.slug, want, rows[day])
