"""The grader against known-good and known-bad answers, and its rules (no GPU needed)."""

import copy
import random
import tomllib

import pytest

from autograder import answers, quizzes, score, spec
from autograder.harness import run_exercise
from autograder.known import check_known, table

SPEC = spec.load("naive_loads")
EX = SPEC.exercises["row_bias"]


@pytest.mark.slow
def test_known_answers_score_as_expected_on_cpu():
    results = check_known("naive_loads", gpu=False)
    print(table(results))
    assert all(r.ok for r in results), table(results)
    by = {r.answer.name: r for r in results}
    # what a CPU can grade, it grades: the stub, the quiz; the path is not graded here, its static verdict is reported
    for name, static in (("correct", 2), ("scalar_loads", 0), ("off_by_one", 2)):
        part = by[name].grade.scores["row_bias_path"]
        assert part.points == 0 and not part.graded and part.feedback.startswith("not graded here"), name
        assert by[name].grade.exercises["row_bias"].facts["path"]["static_points"] == static, name
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
    assert answers.read_answer('X = "a" + "b"\n', "X").value == "ab"  # a + of strings is read, not run
    computed = answers.read_answer('X = open("k.cu").read()\n', "X")
    assert computed.value is None and "is a call" in computed.problem and "never runs it" in computed.problem
    assert not answers.read_literal("# YOUR CODE HERE\nraise NotImplementedError()", "X").attempted


def test_quiz_cell_as_released_and_answered_above_its_stub():
    """The release gives `QUIZ = {}` above nbgrader's stub: left empty it is not attempted; answered in that line
    with the stub forgotten below, the answers are graded (the cell fails in the notebook, the literal is data)."""
    stub = "# YOUR CODE HERE\nraise NotImplementedError()"
    blank = answers.read_literal("QUIZ = {}  # your answers\n" + stub, "QUIZ")
    assert not blank.attempted
    given = {f"q{i}": random.choice("abcd") for i in range(1, random.randint(2, 6))}
    kept = answers.read_literal(f"QUIZ = {given!r}\n" + stub, "QUIZ")
    assert kept.attempted and kept.value == given and not kept.flags
    assert answers.read_literal(f"QUIZ = {given!r}\n", "QUIZ").value == given


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
    assert quizzes.quiz_key(cell, "QUIZ", "q1") == "c"
    assert quizzes.quiz_key('assert QUIZ["q1"] == "c"', "QUIZ", "q1") is None
    # the key is still read when the assert carries its reason as the message
    why = 'assert QUIZ["q1"] == "c", "Why (c): because."'
    with_reason = cell.replace('assert QUIZ["q1"] == "c"', why)
    assert quizzes.quiz_key(with_reason, "QUIZ", "q1") == "c"
    assert quizzes.quiz_reason(with_reason, "QUIZ", "q1") == "Why (c): because."
    assert quizzes.quiz_reason(cell, "QUIZ", "q1") is None
    assert quizzes.quiz_reason(why, "QUIZ", "q1") is None  # outside the hidden tests: not read
    assert quizzes.quiz_reason(with_reason, "QUIZ", "q2") is None


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
        key = quizzes.quiz_key(src, "QUIZ", question)
        reason = quizzes.quiz_reason(src, "QUIZ", question)
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
    key = quizzes.quiz_key(_source(src_cells[q1.grade_id]), SPEC.quiz.answer_var, "q1")
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


def _facts(value, baseline, gpu="h100", output_ok=True):
    student = {"value": value, "ms": 1.0, "p20_ms": 0.9, "p80_ms": 1.1, "ceilings": {"copy_tbps": baseline},
               "output_ok": output_ok}
    # a correct kernel on a Hopper GPU whose profiled launch carried the work by 16-byte loads and stores: full path,
    # so the throughput part is graded on its bar alone (throughput counts only through the mechanism)
    path = {"ok": True, "summary": "", "executed": {
        "measured": True, "bytes": {"global_load_128": 100.0, "global_store_128": 100.0}, "read_bytes": 100.0,
        "written_bytes": 100.0, "output_ok": True, "executed": []}}
    return {"status": "ok", "flags": [], "compile": {"ok": True}, "path": path, "gpu": True,
            "correctness": {"graded": True, "ok": True, "shapes": [{"ok": True}]},
            "throughput": {"graded": True, "student": student, "reference": {"value": value},
                           "baseline": {"kind": "copy", "what": "D2D copy", "value": baseline}, "gpu": gpu,
                           "device": {"h100": "NVIDIA H100 80GB HBM3", "h200": "NVIDIA H200"}.get(gpu, gpu)}}


def test_the_bar_is_the_gpus_fraction_of_the_baseline_of_the_same_run():
    """bar = the calibrated fraction of the GPU kind that graded x the baseline that run measured: a slower or
    faster machine moves the bar with its own baseline; the feedback names the fraction, the baseline and the
    calibration."""
    import random

    tp = EX.parts["throughput"]
    frac = tp.calibration_for("h100").fraction
    for base in (random.uniform(2.0, 3.2), random.uniform(2.0, 3.2)):
        bar = frac * base
        under = score.score(EX, _facts(bar * 0.99, base))
        over = score.score(EX, _facts(bar * 1.01, base))
        assert under.parts["throughput"].points == 0 and over.parts["throughput"].points == tp.points
        assert f"bar {bar:.3f} TB/s = {frac:.3f} x D2D copy in this run ({base:.3f} TB/s; calibrated on NVIDIA H100" \
            in over.parts["throughput"].feedback, over.parts["throughput"].feedback
        assert over.facts["throughput"]["bar"] == pytest.approx(bar)


def test_a_hopper_gpu_with_no_calibration_of_its_own_gets_the_h100_fraction_and_is_told():
    tp = EX.parts["throughput"]
    assert tp.calibration_for("gh200") is None
    frac = tp.calibration_for("h100").fraction
    s = score.score(EX, _facts(frac * 4.0 * 1.01, 4.0, gpu="gh200"))
    fb = s.parts["throughput"].feedback
    assert s.parts["throughput"].points == tp.points and s.parts["throughput"].graded, fb
    assert "no calibration for this GPU (gh200): the H100's fraction" in fb, fb
    assert score.score(EX, _facts(frac * 4.0 * 0.99, 4.0, gpu="gh200")).parts["throughput"].points == 0


def test_no_baseline_measured_means_not_graded_never_a_guess():
    f = _facts(2.9, 3.0)
    f["throughput"]["baseline"] = None
    s = score.score(EX, f)
    assert s.parts["throughput"].points == 0 and not s.parts["throughput"].graded
    assert "no baseline" in s.parts["throughput"].feedback


def test_figures_above_this_gpus_roofline_fail_and_stale_output_fails():
    """The roofline is the datasheet peak of the GPU kind that timed it: 3.6 TB/s is impossible on an H100 (HBM3
    3.35) and possible on an H200 (HBM3e 4.8)."""
    assert EX.roofline_for("h100") < 3.6 < EX.roofline_for("h200")
    s = score.score(EX, _facts(3.6, 3.0))
    assert s.parts["throughput"].points == 0 and "ABOVE the roofline" in s.parts["throughput"].feedback
    s = score.score(EX, _facts(3.6, 4.2, gpu="h200"))
    assert s.parts["throughput"].points == EX.parts["throughput"].points, s.parts["throughput"].feedback
    s = score.score(EX, _facts(2.9, 3.0, output_ok=False))
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


def test_every_course_solution_clears_its_bar_by_the_margin_on_every_calibrated_gpu():
    """Each calibration leaves the course solution at least SOLUTION_MARGIN above the bar of its GPU kind, and every
    exercise is calibrated for every GPU kind whose record timed its course solution (exercise_margins: the input
    `autograder calibrate` needs); an exercise no record has timed yet (a redesigned one: its topic's records
    predate it) has no calibration until a GPU run records it — and every other exercise is calibrated for the H100."""
    from kernels import record
    from autograder.spec import SOLUTION_MARGIN

    for s in spec.all_specs():
        docs = record.load_all(s.slug)
        for ex in s.exercises.values():
            tp = ex.parts["throughput"]
            assert 0 < tp.fraction < 1, (s.slug, ex.name)
            cals = {c.gpu: c for c in tp.calibration}
            timed = {tag for tag, doc in docs.items() if (doc.get("exercise_margins") or {}).get(ex.name)}
            assert timed <= set(cals), (s.slug, ex.name, sorted(cals), sorted(timed))
            assert "h100" in cals or (not timed and ex.name in UNTIMED) or (ex.name in H200_ONLY and "h100" not in docs), \
                (s.slug, ex.name, sorted(cals))
            for c in cals.values():
                assert c.fraction <= tp.fraction, (s.slug, ex.name, c.gpu)
                assert c.margin >= SOLUTION_MARGIN - 1e-6, f"{s.slug}.{ex.name} on {c.gpu}: {c.margin:.4f}"


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
    """The README's day table gives each exercise's bar as its spec's calibration has it — per calibrated GPU kind,
    the fraction of the baseline and the bar it came to at calibration (calibration rewrites the spec: this test then
    names the README row to update) — and no other fraction: the spec's own fraction (the one calibration lowers) is
    stated only where no GPU is calibrated."""
    import re

    from autograder.release import ROOT

    rows = {(m.group(1), m.group(2)): m.group(0)
            for m in re.finditer(r"^\| w(\d)d(\d) \|.*$", (ROOT / "README.md").read_text(), re.M)}
    for s in spec.all_specs():
        day = (s.assignment.removeprefix("week"), re.match(r"day(\d)_", s.notebook).group(1))
        for ex in s.exercises.values():
            want = readme_bar(ex)
            assert want in rows[day], (s.slug, want, rows[day])
            assert bar_fractions_off_spec(rows[day], ex) == [], (s.slug, rows[day])
    # the row as it stood: the spec's 0.9 stated as the bar, beside the H100's calibrated 0.8507
    tma = spec.load("tma").exercises["tma_add"]
    old = ("bar 0.9× the copy ceiling of the grading run (calibrated: H100 0.8507×, 2.555 TB/s at calibration)")
    assert tma.parts["throughput"].fraction == 0.9 and bar_fractions_off_spec(old, tma) == ["0.9"]


def readme_bar(ex) -> str:
    """The day table's bar text of one exercise, from its spec: per calibrated GPU kind its fraction and the bar at
    calibration; the spec's fraction only where no GPU is calibrated."""
    tp = ex.parts["throughput"]
    unit, fmt = ("TB/s", ".3f") if ex.metric == "tbps" else ("TFLOPS", ".1f")
    base = "copy ceiling" if tp.baseline_kind == "copy" else ex.workload().VENDOR
    cals = sorted(tp.calibration, key=lambda c: c.gpu)
    if not cals:
        return f"bar {tp.fraction:g}× the {base} of the grading run (the spec's fraction: not calibrated yet)"
    per = "; ".join(f"{c.device.removeprefix('NVIDIA ').split(' ')[0]} {c.fraction:g}× ({c.bar:{fmt}} {unit} at "
                    "calibration)" for c in cals)
    return f"bar against the {base} of the grading run, calibrated: {per}"


def bar_fractions_off_spec(text: str, ex) -> list[str]:
    """The fractions written `0.85×` in `text` that are no bar the spec grades with: a calibrated GPU kind's fraction
    (or, with none calibrated, the spec's own)."""
    import re

    tp = ex.parts["throughput"]
    allowed = {c.fraction for c in tp.calibration} or {tp.fraction}
    return [m for m in re.findall(r"(\d+\.\d+)×", text) if not any(abs(float(m) - f) < 1e-9 for f in allowed)]


# Exercises redesigned since their topic's records were taken, or new (fp8_promote: week 3 day 1 has no record yet):
# no record has timed their course solution, so no GPU kind is calibrated for them yet (the next `make gpu-test` records and calibrates them). Graded meanwhile with the
# spec's fraction of the run's baseline (autograder.spec.Part.fraction_for says so in the feedback).
UNTIMED = {"gemm_epilogue"}
# Exercises no H100 has timed yet: their day was built while only H200s were lent. The exception holds only while the
# day has no H100 record: an H100 run that records the day without calibrating it fails the test above.
H200_ONLY = {"fp8_promote"}
