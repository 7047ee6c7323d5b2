"""weeks/ is generated, solution notebooks run top to bottom in CPU mode, nbgrader round trip (no GPU)."""

import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from conftest import run_notebook

from autograder.release import ROOT, weeks

SOLUTIONS = sorted((ROOT / "solutions").glob("week*/*.ipynb"))


def _cells(nb):
    return [(c.cell_type, c.source, c.metadata.get("nbgrader", {}).get("grade_id")) for c in nb.cells]


def test_solutions_are_committed_without_outputs():
    for path in SOLUTIONS:
        nb = nbformat.read(str(path), as_version=4)
        nbformat.validate(nb)
        with_out = [i for i, c in enumerate(nb.cells) if c.cell_type == "code" and (c.outputs or c.execution_count)]
        assert not with_out, f"{path.name}: cells {with_out} have outputs"


@pytest.mark.slow
def test_weeks_is_the_current_release():
    from autograder.batch import assignment_release

    for week in weeks():
        # nbgrader's generate_assignment of the current sources (made once per content of the week's sources)
        fresh = sorted(assignment_release(week).glob("*.ipynb"))
        assert fresh, f"generate_assignment released no notebook for {week}"
        committed = sorted((ROOT / "weeks" / week).glob("*.ipynb"))
        assert [p.name for p in fresh] == [p.name for p in committed], "weeks/ is stale: run `make weeks`"
        for f, c in zip(fresh, committed):
            a, b = nbformat.read(str(f), 4), nbformat.read(str(c), 4)
            assert _cells(a) == _cells(b), f"weeks/{week}/{c.name} is stale: run `make weeks`"
            text = c.read_text()
            assert "BEGIN SOLUTION" not in text and "HIDDEN TESTS" not in text


@pytest.fixture(scope="module")
def student_releases(tmp_path_factory):
    """The folder a student is handed, per week (autograder.release.student_release), built once."""
    from autograder.release import student_release

    base = tmp_path_factory.mktemp("student")
    return {week: student_release(week, base / f"course-{week}", archive=False) for week in weeks()}


@pytest.mark.slow
@pytest.mark.parametrize("path", SOLUTIONS, ids=[p.name for p in SOLUTIONS])
def test_solution_notebook_runs_top_to_bottom_in_cpu_mode(path, student_releases):
    """The student's notebook, run where a student runs it — inside the student release, which lacks every
    instructor-only file — with each answer cell holding the course solution: every cell runs in CPU mode. (A cell
    that reads a file the release leaves out fails here, as it would for the student.)"""

    week = path.parent.name
    out = student_releases[week]
    nb = nbformat.read(str(out / week / path.name), as_version=4)
    solutions = {c.metadata["nbgrader"]["grade_id"]: c.source for c in nbformat.read(str(path), as_version=4).cells
                 if c.metadata.get("nbgrader", {}).get("solution")}
    answered = 0
    for c in nb.cells:
        gid = c.metadata.get("nbgrader", {}).get("grade_id")
        if c.metadata.get("nbgrader", {}).get("solution") and gid in solutions:
            c.source = solutions[gid]
            answered += 1
    assert answered == len(solutions), f"{path.name}: {len(solutions) - answered} answer cell(s) not in the release"
    run_notebook(nb, out / week, out)  # the release alone: not the course repository
    text = "\n".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.outputs)
    assert "CPU mode" in text or "sm_90" in text


@pytest.mark.slow
def test_nbgrader_autograde_round_trip_on_cpu(graded_class):
    """The solution earns every CPU-gradable point (SASS path, quiz); the blank release earns 0; a tampered
    notebook earns only what its kernel is worth and is flagged; a malformed notebook is reported and graded 0
    while the rest of the batch is graded. (The class of conftest.graded_class, graded by `autograder grade`.)"""
    import json

    from nbgrader.api import Gradebook

    grading, week, r = graded_class["grading"], graded_class["week"], graded_class["run"]
    # 2: the malformed hand-in was not graded (every other student was; the summary line names it)
    assert r.returncode == 2, r.stdout[-3000:] + r.stderr[-3000:]
    assert "1 hand-in not readable: malformed/week1/" in r.stdout
    from autograder.spec import all_specs

    cpu_points = 0.0  # no GPU: only the quiz is graded (correctness, path and throughput need a Hopper GPU)
    for s in all_specs():
        if s.assignment == week and (ROOT / "solutions" / week / s.notebook).exists():
            cpu_points += sum(q.points for q in s.quiz.questions.values())
    day1_quiz = 5.0
    with Gradebook(f"sqlite:///{grading / 'gradebook.db'}") as gb:
        assert gb.find_submission(week, "solution").score == pytest.approx(cpu_points)
        assert gb.find_submission(week, "blank").score == 0
        # scalar loads: no path points; the rewritten grade cell and the patched checker change nothing;
        # the deleted quiz cell earns nothing
        assert gb.find_submission(week, "tamper").score == pytest.approx(day1_quiz - 1)
        assert gb.find_submission(week, "malformed").score == 0
    verdict = json.loads((grading / "verdicts" / "tamper" / week / "day1_naive_loads.json").read_text())
    flags = " ".join(verdict["flags"])
    assert "deleted-cell" in flags and "code-in-answer-cell" in flags
    batch = json.loads((grading / f"batch_{week}.json").read_text())
    assert batch["per_student"]["malformed"]["malformed"]
    assert (grading / f"grades_{week}.csv").exists()
    fb = list((grading / "feedback" / "solution" / week).glob("*.html"))
    assert fb, "no feedback written"
    html = "".join(p.read_text() for p in fb)
    assert "HIDDEN TESTS" not in html and 'QUIZ["q1"] ==' not in html


@pytest.mark.slow
@pytest.mark.skipif(not (ROOT / "solutions" / "week2").is_dir(), reason="week 2 has no notebooks yet")
def test_nbgrader_autograde_round_trip_week2_on_cpu(tmp_path):
    """Week 2 through nbgrader: the solutions earn every CPU-gradable point (SASS path, quiz), the blank release 0."""
    from nbgrader.api import Gradebook

    from autograder.spec import all_specs

    grading, week = tmp_path / "grading", "week2"
    for student, src in (("solution", ROOT / "solutions" / week), ("blank", ROOT / "weeks" / week)):
        d = grading / "submitted" / student / week
        d.mkdir(parents=True)
        for nb in src.glob("*.ipynb"):
            (d / nb.name).write_bytes(nb.read_bytes())
    env = dict(os.environ, COURSE_GRADING_DIR=str(grading), PYTHONPATH=str(ROOT), COURSE_FORCE_CPU="1")
    r = subprocess.run([sys.executable, "-m", "autograder.cli", "grade", week, "--seed", "11", "--gpus", "none"],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=1500)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    specs = [s for s in all_specs() if s.assignment == week and (ROOT / "solutions" / week / s.notebook).exists()]
    assert specs, "week 2 notebooks without grader specs"
    cpu_points = sum(sum(q.points for q in s.quiz.questions.values()) for s in specs)  # no GPU: the quiz only
    with Gradebook(f"sqlite:///{grading / 'gradebook.db'}") as gb:
        assert gb.find_submission(week, "solution").score == pytest.approx(cpu_points)
        assert gb.find_submission(week, "blank").score == 0
