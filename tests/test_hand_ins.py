"""Hand-in mistakes an ordinary student makes, named where the instructor and the student look
(autograder/handin.py: stage_submission, misplaced_hand_ins; autograder/record.py: problem_feedback;
autograder/grade_run.py and autograder/cli.py: the summary line and the exit status of `autograder grade`).

- a notebook of another week in a week's folder: named with where it belongs, when either week is graded;
- a notebook that is not JSON: not counted as graded in the summary line, exit status 2;
- two copies of a notebook and none under its name: none graded, a feedback page says which files were found.
"""
from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys

from autograder import handin, record
from autograder.release import ROOT

DAY1 = "day1_naive_loads.ipynb"
W1 = sorted(p.name for p in (ROOT / "solutions" / "week1").glob("*.ipynb"))
W2 = sorted(p.name for p in (ROOT / "solutions" / "week2").glob("*.ipynb"))


def _hand_in(folder, *names, src=ROOT / "weeks" / "week1"):
    folder.mkdir(parents=True, exist_ok=True)
    for name in names:
        shutil.copy(src / DAY1, folder / name)


def test_a_week1_notebook_in_week2_is_named_with_where_it_belongs_when_week2_is_graded(tmp_path):
    _hand_in(tmp_path / "sub" / "ann" / "week2", DAY1)
    notes, malformed, ungraded = handin.stage_submission(tmp_path / "sub" / "ann" / "week2", tmp_path / "dest", W2,
                                                       "week2")
    assert f"{DAY1} is a week1 notebook, found in week2/: move it to ann/week1/" in notes, notes
    assert not any("ignored" in n for n in notes) and not malformed and not ungraded
    assert not (tmp_path / "dest" / DAY1).exists(), "another week's notebook is not graded with this week"


def test_a_week1_notebook_in_week2_is_named_when_week1_is_graded(tmp_path):
    """ann handed in day 2 in week1/ and day 1 in week2/: week 1 grades day 2 and names where day 1 is."""
    sub = tmp_path / "sub"
    _hand_in(sub / "ann" / "week2", DAY1)
    (sub / "ann" / "week1").mkdir(parents=True)
    shutil.copy(ROOT / "weeks" / "week1" / "day2_smem_tiling.ipynb", sub / "ann" / "week1")
    notes, _, ungraded = handin.stage_submission(sub / "ann" / "week1", tmp_path / "dest", W1, "week1")
    assert any(n.startswith(f"no {DAY1}; found {DAY1} in week2/") and "move it to ann/week1/" in n for n in notes), notes
    assert [u.split(":")[0] for u in ungraded] == [DAY1]
    assert sorted(p.name for p in (tmp_path / "dest").iterdir()) == ["day2_smem_tiling.ipynb"]
    # a student with no week1/ folder at all: the week-1 run says where their week-1 notebook is
    _hand_in(sub / "bob" / "week2", DAY1)
    got = handin.misplaced_hand_ins(sub, "week1", skip=["ann"])
    assert list(got) == ["bob"]
    assert got["bob"]["notes"][0].startswith(f"no submission; found {DAY1} in week2/"), got
    assert "move it to bob/week1/" in got["bob"]["notes"][0] and got["bob"]["ungraded"]
    assert handin.misplaced_hand_ins(sub, "week2", skip=[]) == {}, "a week-1 notebook is nothing week 2 misses"


def test_two_copies_and_no_canonical_name_get_a_feedback_page(tmp_path):
    folder = tmp_path / "sub" / "cy" / "week1"
    _hand_in(folder, "day1_naive_loads (1).ipynb", "day1_naive_loads-Copy1.ipynb")
    notes, malformed, ungraded = handin.stage_submission(folder, tmp_path / "dest", W1, "week1")
    assert not list((tmp_path / "dest").glob("*.ipynb")) and not malformed
    (u,) = ungraded
    assert u.startswith(f"{DAY1}:") and "day1_naive_loads (1).ipynb" in u and "day1_naive_loads-Copy1.ipynb" in u
    grading = tmp_path / "grading"
    (page,) = record.problem_feedback(grading, "week1", {"cy": {"notes": notes, "ungraded": ungraded}})
    text = page.read_text()
    assert page == grading / "feedback" / "cy" / "week1" / "day1_naive_loads.html"
    assert "not graded" in text and "none graded" in text
    assert "day1_naive_loads (1).ipynb" in text and "day1_naive_loads-Copy1.ipynb" in text
    mtime = page.stat().st_mtime_ns
    assert record.problem_feedback(grading, "week1", {"cy": {"notes": notes, "ungraded": ungraded}}) == []
    assert page.stat().st_mtime_ns == mtime, "the same page is not written again"
    # a page nbgrader wrote in a run that graded the notebook is replaced: it is not graded now
    page.write_text("<html>nbgrader's page: 5 of 7 points</html>")
    assert record.problem_feedback(grading, "week1", {"cy": {"notes": notes, "ungraded": ungraded}}) == [page]
    assert "none graded" in page.read_text()


def test_the_summary_line_and_exit_status_name_every_hand_in_mistake(tmp_path):
    """One class on CPU: `blank` (day 1 of the release: graded), `malformed` (a notebook that is not JSON), `cy`
    (two copies, none under its name), `bob` (no week1/ folder; his week-1 notebook in week2/). Exit status 2, the
    summary line counts one submission graded of three and names each mistake, and each student gets a page."""
    grading = tmp_path / "grading"
    sub = grading / "submitted"
    _hand_in(sub / "blank" / "week1", DAY1)
    (sub / "malformed" / "week1").mkdir(parents=True)
    (sub / "malformed" / "week1" / "day3_ldgsts.ipynb").write_text('{"cells": [ this is not a notebook')
    _hand_in(sub / "cy" / "week1", "day1_naive_loads (1).ipynb", "day1_naive_loads-Copy1.ipynb")
    _hand_in(sub / "bob" / "week2", DAY1)
    env = dict(os.environ, COURSE_GRADING_DIR=str(grading), PYTHONPATH=str(ROOT), COURSE_FORCE_CPU="1",
               MPLCONFIGDIR=str(tmp_path / "mpl"))
    r = subprocess.run([sys.executable, "-m", "autograder.cli", "grade", "week1", "--seed", "7", "--gpus", "none"],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    out = r.stdout
    assert r.returncode == 2, out[-3000:] + r.stderr[-3000:]
    (summary,) = [line for line in out.splitlines() if line.startswith("graded ")]
    assert summary.startswith("graded 1 of 3 submissions"), summary
    assert "1 hand-in not readable: malformed/week1/day3_ldgsts.ipynb" in summary, summary
    assert "2 hand-ins not graded as placed" in summary and f"cy/week1/{DAY1}" in summary, summary
    assert f"bob/week1/{DAY1}" in summary, summary
    assert "NOT READABLE malformed: day3_ldgsts.ipynb: NotJSONError" in out
    assert f"HAND-IN bob: no submission; found {DAY1} in week2/" in out
    assert "autograder grade week1 --students bob,cy,malformed" in out, out[-2000:]
    assert "ignored" not in out, "a copy named among the candidates is not also called a stranger"
    fb = grading / "feedback"
    assert "NotJSONError" in (fb / "malformed" / "week1" / "day3_ldgsts.html").read_text()
    assert "none graded" in (fb / "cy" / "week1" / "day1_naive_loads.html").read_text()
    assert "move it to bob/week1/" in (fb / "bob" / "week1" / "day1_naive_loads.html").read_text()
    rows = {row["student"]: row for row in csv.DictReader((grading / "report_week1.csv").open())}
    assert rows["bob"]["status"] == "no submission" and f"found {DAY1} in week2/" in rows["bob"]["notes"], rows["bob"]
    rec = json.loads((grading / "batch_week1.json").read_text())["per_student"]
    assert rec["cy"]["ungraded"] and rec["malformed"]["malformed"] and rec["bob"]["no_submission"]


def test_hand_in_mistakes_of_a_folder_that_is_not_utf8_are_said_in_utf8(tmp_path):
    """A week-1 notebook in week2/ of a folder whose name is not UTF-8 (a Latin-1 zip), and a week-2 notebook in
    week1/ of another: every line the command prints is UTF-8 (the folder as \\xe9, never a raw byte), the batch record
    keys them by their student id, and the retry command names the student in a form the shell and --student take."""
    from autograder.students import student_id

    sub = os.path.join(os.fsencode(tmp_path / "grading"), b"submitted")
    for folder, week, src in ((b"y\xe9", b"week2", ROOT / "weeks" / "week1" / "day1_naive_loads.ipynb"),
                              (b"z\xe9", b"week1", ROOT / "weeks" / "week2" / "day1_swizzle.ipynb")):
        os.makedirs(os.path.join(sub, folder, week))
        shutil.copy(src, os.path.join(sub, folder, week, os.fsencode(src.name)))
    env = dict(os.environ, COURSE_GRADING_DIR=str(tmp_path / "grading"), PYTHONPATH=str(ROOT),
               MPLCONFIGDIR=str(tmp_path / "mpl"))
    env.pop("COURSE_FORCE_CPU", None)
    r = subprocess.run([sys.executable, "-m", "autograder.cli", "grade", "week1", "--seed", "7", "--gpus", "none"],
                       cwd=ROOT, env=env, capture_output=True, timeout=600)
    out = r.stdout.decode("utf-8")  # strict: a raw byte of a folder name fails here
    assert r.returncode == 2, out + r.stderr.decode("utf-8", "replace")
    y, z = student_id(os.fsdecode(b"y\xe9")), student_id(os.fsdecode(b"z\xe9"))
    assert "move it to y\\xe9/week1/" in out and "move it to z\\xe9/week2/" in out, out
    assert f"--student 'y\\xe9'" in out and f"--students {y}" not in out, out
    per = json.loads((tmp_path / "grading" / "batch_week1.json").read_text())["per_student"]
    assert y in per and z in per and per[y].get("no_submission"), sorted(per)
