"""What an instructor meets grading a real class (`autograder grade` on CPU, `--gpus none`): re-grading one
student, the week's CSV export, a GPU that is not there, hand-in mistakes, the seed, interrupts, trials.

One class is graded once for the whole test run (conftest.graded_class; these tests work on a copy): the cohort's
`blank`, `malformed` and `tamper`, plus `renamed` (tamper's day-1 notebook saved by a browser as
`day1_naive_loads (1).ipynb`), `nested` (the same notebook in a sub-folder: an unzipped hand-in) and `solution` (the
week's solutions notebooks). The gradebook also knows week 2 (as after `make release`).
"""
from __future__ import annotations

import csv
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from autograder.cohort import build
from autograder.release import ROOT

WEEK = "week1"
DAY1 = "day1_naive_loads.ipynb"


def _env(grading: Path, **kw) -> dict:
    env = dict(os.environ, COURSE_GRADING_DIR=str(grading), PYTHONPATH=str(ROOT), COURSE_FORCE_CPU="1",
               MPLCONFIGDIR=str(grading.parent / "mpl"))
    for k in ("COURSE_SECRET_SEED", "COURSE_SECRET_SEED_FILE"):
        env.pop(k, None)
    env.update(kw)
    return env


def _cli(grading: Path, *args, timeout=600, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "autograder.cli", *args], cwd=ROOT, env=_env(grading, **kw),
                          capture_output=True, text=True, timeout=timeout)


def _report(grading: Path) -> dict:
    return {r["student"]: r for r in csv.DictReader((grading / f"report_{WEEK}.csv").open())}


@pytest.fixture(scope="module")
def cls(graded_class, tmp_path_factory):
    """A copy of the class graded once for the test run (conftest.graded_class), which this module's tests change:
    they re-grade a student, forget one, prune batch folders."""
    root = tmp_path_factory.mktemp("class")
    shutil.copytree(graded_class["grading"], root / "grading")
    return {**graded_class, "grading": root / "grading", "root": root}


# ------------------------------------------------------------------------------------------------ 1. re-grades
@pytest.mark.slow
def test_regrading_one_student_keeps_everyone_else(cls):
    """A re-grade the next day of one student: every other student keeps their verdicts and status."""
    grading = cls["grading"]
    before = _report(grading)
    assert before["blank"]["status"] == "graded" and before["blank"]["day1_naive_loads"] == "0"
    # the first grading ran yesterday: its verdicts, and the times its record keeps, a day earlier
    rec_f = grading / f"batch_{WEEK}.json"
    rec = json.loads(rec_f.read_text())
    for e in [*(rec.get("per_student") or {}).values(), *(rec.get("runs") or [])]:
        for k in ("started_at", "finished_at"):
            if e.get(k):
                e[k] -= 86400
    rec_f.write_text(json.dumps(rec))
    yesterday = time.time() - 86400
    for f in [*grading.glob("verdicts/*/*/*.json"), *grading.glob("feedback/*/*/*.html"), rec_f]:
        os.utime(f, (yesterday, yesterday))
    for i in range(7):  # batch folders of earlier runs pile up: a retention rule keeps the newest
        (grading / "batch" / f"20200101-00000{i}").mkdir(parents=True)
    r = _cli(grading, "grade", WEEK, "--seed-file", str(cls["seed_file"]), "--gpus", "none", "--students", "tamper")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    after = _report(grading)
    for name in ("blank", "renamed", "nested", "tamper"):
        assert after[name]["status"] == before[name]["status"], (name, after[name])
        assert after[name]["day1_naive_loads"] == before[name]["day1_naive_loads"], (name, after[name])
        assert "earlier grading run" not in after[name]["notes"]
    rec = json.loads((grading / f"batch_{WEEK}.json").read_text())
    assert set(rec["per_student"]) == {"blank", "malformed", "tamper", "renamed", "nested", "solution"}
    # feedback: the re-graded student's pages written again, everyone else's left as they were (flags included)
    pages = {p: p.stat().st_mtime for p in grading.glob("feedback/*/*/*.html")}
    assert all(t > yesterday + 3600 for p, t in pages.items() if p.parts[-3] == "tamper")
    assert [p for p in pages if p.parts[-3] == "tamper"] and [p for p in pages if p.parts[-3] == "solution"]
    assert all(abs(t - yesterday) < 1 for p, t in pages.items() if p.parts[-3] != "tamper"), pages
    assert "id='course-flags'" in (grading / "feedback" / "tamper" / WEEK / "day1_naive_loads.html").read_text()


def test_old_batch_folders_are_pruned(cls):
    """After the re-grade above (default --keep-batches 5): the newest five batch folders, the run's among them."""
    folders = sorted(p.name for p in (cls["grading"] / "batch").iterdir() if p.is_dir())
    assert len(folders) == 5 and not folders[-1].startswith("2020"), folders


def test_a_second_grading_run_at_once_is_refused(cls):
    from autograder.pool import grading_lock

    grading = cls["grading"]
    with grading_lock(grading, "autograder grade week1 (the test holds it)"):
        r = _cli(grading, "grade", WEEK, "--seed", "7", "--gpus", "none", "--students", "blank", timeout=300)
    assert r.returncode != 0
    assert "busy" in r.stderr and "the test holds it" in r.stderr and "Traceback" not in r.stderr


# -------------------------------------------------------------------------------------------- 2. one week a file
def test_the_weeks_csv_holds_that_week_only(cls):
    rows = list(csv.DictReader((cls["grading"] / f"grades_{WEEK}.csv").open()))
    assert rows and {r["assignment"] for r in rows} == {WEEK}
    assert sorted(r["student_id"] for r in rows) == ["blank", "malformed", "nested", "renamed", "solution", "tamper"]


# ----------------------------------------------------------------------------------------------- 3. CPU, on purpose
def test_gpus_all_without_a_gpu_is_an_error_that_says_what_was_found():
    from autograder.pool import _gpu_count, lanes_for

    if _gpu_count():
        pytest.skip("a GPU is visible here")
    with pytest.raises(SystemExit) as e:
        lanes_for("all", {})
    msg = str(e.value)
    assert "no GPU" in msg and "torch" in msg and "--gpus none" in msg


def test_the_report_says_when_grading_ran_on_cpu(cls):
    html = (cls["grading"] / f"report_{WEEK}.html").read_text()
    assert "Graded on CPU" in html and "throughput" in html.split("Graded on CPU", 1)[1][:600]


# ------------------------------------------------------------------------------------------- 4. hand-in mistakes
def test_a_renamed_or_nested_notebook_is_found_and_named(cls):
    grading = cls["grading"]
    rep = _report(grading)
    tamper_day1 = rep["tamper"]["day1_naive_loads"]
    for name, says in (("renamed", "found 'week1/day1_naive_loads (1).ipynb'"),
                       ("nested", "found it under week1/course-week1/day1_naive_loads.ipynb")):
        assert rep[name]["day1_naive_loads"] == tamper_day1 != "", rep[name]
        assert says in rep[name]["notes"] and "retry" not in rep[name]["status"], rep[name]
    # the student's files are never renamed: a malformed notebook keeps its name and its parse error next time
    assert (grading / "submitted" / "renamed" / WEEK / "day1_naive_loads (1).ipynb").exists()
    assert (grading / "submitted" / "malformed" / WEEK / "day3_ldgsts.ipynb").exists()
    assert not list((grading / "submitted").rglob("*.malformed"))
    assert "NotJSONError" in rep["malformed"]["notes"]


def test_a_malformed_only_student_gets_feedback(cls):
    page = cls["grading"] / "feedback" / "malformed" / WEEK / "day3_ldgsts.html"
    assert page.exists() and "not graded" in page.read_text() and "NotJSONError" in page.read_text()


def test_a_students_markup_does_not_run_in_the_feedback_page(cls):
    """`nested` handed in a markdown cell with a script, an event handler and a javascript: link: the feedback page
    (which an instructor opens too) keeps the cell's text but none of what would run; template syntax stays text."""
    import re

    page = (cls["grading"] / "feedback" / "nested" / WEEK / "day1_naive_loads.html").read_text()
    assert "notes" in page and "{{ 7 * 7 }}" in page
    assert '<script>document.title = "owned"' not in page  # shown as text at most
    assert not re.search(r"<[a-z]+[^<>]*\sonerror=", page, re.I) and 'href="javascript:' not in page


def test_feedback_names_each_part_and_shows_the_flags(cls):
    page = (cls["grading"] / "feedback" / "tamper" / WEEK / "day1_naive_loads.html").read_text()
    assert "Test cell" not in page and "row bias" in page
    assert "id='course-flags'" in page and "deleted-cell" in page


# ----------------------------------------------------------------------------------------------------- 5. seed
@pytest.mark.parametrize("content", ["", "  \n\t\n", None])
def test_an_empty_or_missing_seed_file_is_refused_in_one_line(tmp_path, content):
    grading = tmp_path / "grading"
    (grading / "submitted" / "ann" / WEEK).mkdir(parents=True)
    f = tmp_path / "seed"
    if content is not None:
        f.write_text(content)
    r = _cli(grading, "grade", WEEK, "--seed-file", str(f), "--gpus", "none", timeout=120)
    assert r.returncode not in (0, None)
    assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert str(f) in r.stderr and ("empty" in r.stderr or "cannot be read" in r.stderr)
    assert not (grading / f"batch_{WEEK}.json").exists()


def test_the_batch_record_says_where_the_seed_came_from_never_the_seed(cls):
    text = (cls["grading"] / f"batch_{WEEK}.json").read_text()
    rec = json.loads(text)
    assert rec["runs"][0]["seed_source"] == f"--seed-file {cls['seed_file']}"
    assert cls["seed"] not in text


# ----------------------------------------------------------------------------------------------- 7. interrupts
@pytest.mark.slow
def test_an_interrupt_stops_the_children_and_says_what_to_run(tmp_path):
    grading = tmp_path / "grading"
    build(grading / "submitted", WEEK, ["blank"])
    for i in range(3):
        shutil.copytree(grading / "submitted" / "blank", grading / "submitted" / f"b{i}")
    p = subprocess.Popen([sys.executable, "-m", "autograder.cli", "grade", WEEK, "--seed", "7", "--gpus", "none"],
                         cwd=ROOT, env=_env(grading), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    t0 = time.time()
    started = []
    while time.time() - t0 < 180 and not started:
        started = list(grading.glob("batch/*/tasks/*/started.json"))
        time.sleep(0.1)
    assert started, "no task started"
    pid = json.loads(started[0].read_text())["pid"]
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 130, out[-2000:] + err[-2000:]
    assert "interrupted:" in out and "run the same command to finish" in out.lower()
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err[-2000:]
    time.sleep(0.5)
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


# -------------------------------------------------------------------------------------------------- 8. trials
def test_forget_removes_a_student_from_gradebook_csv_and_report(cls):
    grading = cls["grading"]
    r = _cli(grading, "forget", "nested", timeout=300)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert "nested" not in _report(grading)
    assert "nested" not in (grading / f"grades_{WEEK}.csv").read_text()
    assert not (grading / "submitted" / "nested").exists() and not (grading / "verdicts" / "nested").exists()
    from autograder.pool import gradebook_rows

    assert not [k for k in gradebook_rows(grading, WEEK) if k[0] == "nested"]


def test_the_cohort_goes_to_a_grading_folder_of_its_own():
    from autograder.cohort import cohort_grading_dir
    from autograder.release import grading_dir

    assert cohort_grading_dir() != grading_dir()
    assert grading_dir() not in cohort_grading_dir().parents


def test_feedback_scope_leaves_out_only_students_not_graded_now(tmp_path):
    """generate_feedback's exclusion after a run: every student with autograded work of the week but the run's; an id
    with a comma (nbgrader splits the list on commas) is never left out by mistake, only written again."""
    from autograder.cli import feedback_scope

    for s in ("ann", "bo", "c,d", "zoë ø"):
        (tmp_path / "autograded" / s / WEEK).mkdir(parents=True)
    (tmp_path / "autograded" / "old" / "week0").mkdir(parents=True)
    assert feedback_scope(tmp_path, WEEK, ["ann", "bo", "c,d", "zoë ø"]) == []
    (opt,) = feedback_scope(tmp_path, WEEK, ["ann"])
    excluded = set(opt.split("=", 1)[1].split(","))  # what nbgrader's converters do with it
    assert {"bo", "zoë ø"} <= excluded and "ann" not in excluded and "c,d" not in excluded and "old" not in excluded
