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
from conftest import sigint_default
from hypothesis import assume, given, settings
from hypothesis import strategies as st

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
                          capture_output=True, text=True, errors="backslashreplace", timeout=timeout)


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
    from autograder.children import grading_lock

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
    from autograder.plan import _gpu_count, lanes_for

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
                         cwd=ROOT, env=_env(grading), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         preexec_fn=sigint_default)
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
    from autograder.merge import gradebook_rows

    assert not [k for k in gradebook_rows(grading, WEEK) if k[0] == "nested"]


def test_the_cohort_goes_to_a_grading_folder_of_its_own():
    from autograder.cohort import cohort_grading_dir
    from autograder.release import grading_dir

    assert cohort_grading_dir() != grading_dir()
    assert grading_dir() not in cohort_grading_dir().parents


def test_feedback_scope_leaves_out_only_students_not_graded_now(tmp_path):
    """generate_feedback's exclusion after a run: every student with autograded work of the week but the run's; an id
    with a comma (nbgrader splits the list on commas) is never left out by mistake, only written again."""
    from autograder.grade_run import feedback_scope

    for s in ("ann", "bo", "c,d", "zoë ø"):
        (tmp_path / "autograded" / s / WEEK).mkdir(parents=True)
    (tmp_path / "autograded" / "old" / "week0").mkdir(parents=True)
    assert feedback_scope(tmp_path, WEEK, ["ann", "bo", "c,d", "zoë ø"]) == []
    (opt,) = feedback_scope(tmp_path, WEEK, ["ann"])
    excluded = set(opt.split("=", 1)[1].split(","))  # what nbgrader's converters do with it
    assert {"bo", "zoë ø"} <= excluded and "ann" not in excluded and "c,d" not in excluded and "old" not in excluded


# ------------------------------------------------------------------------------- 9. odd folder names, disk, crashes
CAFE = os.fsdecode(b"caf\xe9")  # a folder name that is not UTF-8 (made on a Latin-1 machine), as Python lists it
CAFE_ID = "caf\\xe9"  # the id it grades under: the byte at fault written \xe9-style (autograder.students.student_id)
BIG = 4 << 20  # bytes of text in CAFE's day-1 notebook


def _tree_bytes(root: Path) -> float:
    """The disk a folder takes, a file with several hard links counted once over all of them."""
    return sum(os.lstat(p).st_blocks * 512 / os.lstat(p).st_nlink for p in root.rglob("*") if p.is_file())


@pytest.fixture(scope="module")
def odd(tmp_path_factory):
    """A class with the ids that broke it: `caf\\xe9` (not UTF-8; its day-1 notebook carries 4 MB of text), `smith,john`
    (a comma), `scalar` (a plain id), and a hidden `.ipynb_checkpoints/week1/` (not a student). Graded once."""
    import nbformat

    root = tmp_path_factory.mktemp("odd")
    grading = root / "grading"
    sub = grading / "submitted"
    build(sub, WEEK, ["tamper", "naive_loads-scalar_loads"])
    (sub / "naive-loads-scalar-loads").rename(sub / "scalar")
    (sub / "tamper").rename(sub / "smith,john")
    shutil.copytree(sub / "scalar", sub / CAFE)
    page = sub / CAFE / WEEK / DAY1
    nb = nbformat.read(str(page), as_version=4)
    nb.cells.insert(0, nbformat.v4.new_markdown_cell("".join(f"{i:07d} " for i in range(BIG // 8))))
    nbformat.write(nb, str(page))
    shutil.copytree(sub / "scalar", sub / ".ipynb_checkpoints")
    r = _cli(grading, "grade", WEEK, "--seed", "7", "--gpus", "none")
    return {"grading": grading, "run": r, "root": root}


@pytest.mark.slow
def test_a_folder_name_that_is_not_utf8_grades_under_a_safe_id(odd):
    grading, r = odd["grading"], odd["run"]
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "ignored" in r.stdout and ".ipynb_checkpoints" in r.stdout  # a hidden folder is not a student
    html = (grading / f"report_{WEEK}.html").read_text()
    assert CAFE_ID in html and "submitted folder &#x27;caf\\xe9&#x27;" in html.replace("&#39;", "&#x27;")
    rows = list(csv.DictReader((grading / f"report_{WEEK}.csv").open(encoding="utf-8")))
    assert sorted(row["student"] for row in rows) == sorted([CAFE_ID, "scalar", "smith,john"])  # each once
    status = {row["student"]: row["status"] for row in rows}
    assert status[CAFE_ID] == status["scalar"] == "partly graded"  # day 1 only, as the cohort's member
    assert (grading / "verdicts" / CAFE_ID / WEEK / "day1_naive_loads.json").exists()
    assert (grading / "submitted" / CAFE).is_dir()  # never renamed


@pytest.mark.slow
def test_an_id_with_a_comma_exports_a_csv_that_reads_back(odd):
    """grades_week1.csv quoted where needed: csv.reader reads each id with its own scores; no phantom "smith"."""
    with (odd["grading"] / f"grades_{WEEK}.csv").open(newline="", encoding="utf-8") as f:
        head, *rows = list(csv.reader(f))
    assert all(len(row) == len(head) for row in rows), rows
    by_id = {row[head.index("student_id")]: row for row in rows}
    assert set(by_id) == {CAFE_ID, "scalar", "smith,john"}
    score = {s: float(row[head.index("score")]) for s, row in by_id.items()}
    assert score == {CAFE_ID: 5.0, "scalar": 5.0, "smith,john": 4.0}  # the cohort's CPU scores
    rep = _report(odd["grading"])
    assert "smith" not in rep and rep["smith,john"]["total"] == "4"


@pytest.mark.slow
def test_student_flag_regrades_only_that_student(odd):
    grading = odd["grading"]
    before = json.loads((grading / f"batch_{WEEK}.json").read_text())["per_student"]
    r = _cli(grading, "grade", WEEK, "--seed", "7", "--gpus", "none", "--student", "smith,john")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    after = json.loads((grading / f"batch_{WEEK}.json").read_text())["per_student"]
    assert after["smith,john"]["run"] != before["smith,john"]["run"]
    assert {s: e["run"] for s, e in after.items() if s != "smith,john"} == \
        {s: e["run"] for s, e in before.items() if s != "smith,john"}
    # the folder's own name (bytes that are not UTF-8) in a --students-file, then its id: CAFE graded twice more
    names = odd["root"] / "names.txt"
    names.write_bytes(b"caf\xe9\n")
    for how in (["--students-file", str(names)], ["--student", CAFE_ID]):
        r = _cli(grading, "grade", WEEK, "--seed", "7", "--gpus", "none", *how)
        assert r.returncode == 0, (how, r.stdout[-3000:] + r.stderr[-3000:])
        assert "graded 1 of 1" in r.stdout, r.stdout[-2000:]
    assert _report(grading)[CAFE_ID]["day1_naive_loads"] == "5"


@pytest.mark.slow
def test_kept_batch_folders_hold_no_copy_of_a_hand_in(odd):
    """CAFE's 4 MB notebook graded in three runs (above): the batch folders hold digests, not copies (the old ones
    held two copies a run: the staged hand-in and the autograded notebook)."""
    grading = odd["grading"]
    assert len([p for p in (grading / "batch").iterdir() if p.is_dir()]) == 4
    assert _tree_bytes(grading / "batch") < BIG, _tree_bytes(grading / "batch")
    staged = list((grading / "batch").glob("*/tasks/*/submitted.json"))
    assert staged and all("sha256" in f for s in staged for f in json.loads(s.read_text())["files"].values())
    assert (grading / "autograded" / CAFE_ID / WEEK / DAY1).stat().st_size > BIG  # the class keeps its one copy


@pytest.mark.slow
def test_forget_takes_a_folder_name_that_is_not_utf8(odd):
    grading = odd["grading"]
    sdir = grading / "slurm" / WEEK  # a Slurm submission that held CAFE, its result merged
    from autograder.slurm import results_dir

    (results_dir(sdir, CAFE_ID) / "7_0").mkdir(parents=True)
    (sdir / "merged.json").write_text(json.dumps({CAFE_ID: "d1", "scalar": "d2"}))
    (sdir / "jobs.json").write_text(json.dumps({"submissions": [{"job": "7", "students": [[CAFE_ID], ["scalar"]]}]}))
    r = subprocess.run([sys.executable, "-m", "autograder.cli", "forget", b"caf\xe9"], cwd=ROOT, env=_env(grading),
                       capture_output=True, text=True, errors="backslashreplace", timeout=300)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert not (grading / "submitted" / CAFE).exists() and not (grading / "verdicts" / CAFE_ID).exists()
    assert CAFE_ID not in _report(grading) and CAFE_ID not in (grading / f"grades_{WEEK}.csv").read_text()
    assert (grading / f"report_{WEEK}.html").stat().st_size > 0
    assert not results_dir(sdir, CAFE_ID).exists() and json.loads((sdir / "merged.json").read_text()) == \
        {"scalar": "d2"}
    assert json.loads((sdir / "jobs.json").read_text())["submissions"][0]["students"] == [[], ["scalar"]]
    from autograder.merge import gradebook_rows

    assert not [k for k in gradebook_rows(grading, WEEK) if k[0] == CAFE_ID]


@settings(max_examples=200, deadline=None)
@given(folders=st.lists(st.one_of(
    st.lists(st.sampled_from([b"-", b"a", b"B", b",", b" ", b"'", b'"', b"\xe9", b"\xc3\xa9", b"%", b".", b"\\", b"*",
                              b"=", b"?", b"\t", b"$"]), min_size=1, max_size=6).map(b"".join),
    st.binary(min_size=1, max_size=8).filter(lambda b: b"/" not in b and b"\0" not in b)), min_size=1, max_size=5))
def test_the_retry_command_names_each_student_in_a_form_that_works(folders):
    """The printed retry / interrupt command, split as a shell splits it and parsed by the course's own command line,
    names the same ids: whatever the folders are called (a comma, a space, a quote, a byte that is not UTF-8, a name
    that starts with "-", which argparse would take for an option)."""
    import shlex

    from autograder import cli
    from autograder.grade_run import students_option
    from autograder.students import student_id

    ids = sorted({i for f in folders if (i := student_id(os.fsdecode(f))) is not None})
    assume(ids)
    opt = students_option(ids)
    args = cli.parser().parse_args(["grade", WEEK, *shlex.split(opt)])
    assert sorted(cli._named(args)) == ids, opt
    assert students_option(["ann", "bo"]) == "--students ann,bo"


def test_a_lanes_task_takes_a_student_whose_id_starts_with_a_dash(tmp_path, monkeypatch):
    """The task command a lane hands its process (pool._task_cmd) parses back to the same student: a folder named
    "-%" grades as -\\x25, which argparse took for an option (found by the class property test: the task process
    exited 2 with a usage line, twice, and its lane stopped grading)."""
    from autograder import plan, pool

    seen = {}

    def fake_grade_task(week, student, out, **kw):
        seen.update(week=week, student=student)
        return {"state": "done"}

    monkeypatch.setattr(pool, "grade_task", fake_grade_task)
    monkeypatch.setattr(pool, "lane_figures", lambda d: {})
    lane = plan.Lane(id="0", env={}, label="gpu0")
    for sid in ["-\\x25", "--help", "-", "ann"]:
        cmd = pool._task_cmd(WEEK, lane, plan.Job(sid), tmp_path / "out", grading=tmp_path, template=tmp_path / "t.db",
                             lane_dir=tmp_path / "lane")
        assert cmd[3] == "task"
        assert pool.main(cmd[3:]) == 0 and seen == {"week": WEEK, "student": sid}, cmd


def test_reports_and_csvs_are_written_whole_or_not_at_all(tmp_path, monkeypatch):
    """A writer that fails half-way (an exception, Ctrl-C; a kill leaves only a temporary file) leaves the previous
    report, report CSV and grades CSV as they were: never empty, never partial."""
    from autograder import report
    from tests.test_report import make_grading

    grading = tmp_path / "grading"
    make_grading(grading)
    report.write_report(WEEK, grading)
    files = [grading / f"report_{WEEK}.html", grading / f"report_{WEEK}.csv", grading / f"grades_{WEEK}.csv"]
    before = {f: f.read_bytes() for f in files}
    calls = []

    def status_then_crash(s, notebooks):
        calls.append(s.name)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return "graded"

    monkeypatch.setattr(report, "status_of", status_then_crash)
    monkeypatch.setattr(report, "render_html", lambda *a: "<html>" + "x" * 100000 + "\udcff</html>")
    with pytest.raises(KeyboardInterrupt):
        report.write_report(WEEK, grading)
    # the page with a byte that is not UTF-8 (a file name's) is written whole, its escape shown; the CSV kept
    assert (grading / f"report_{WEEK}.html").read_text().endswith("\\udcff</html>")
    assert (grading / f"report_{WEEK}.csv").read_bytes() == before[grading / f"report_{WEEK}.csv"]

    class Gradebook:  # what nbgrader's export hands the plugin; its database fails at the second student
        assignments = [type("A", (), {"name": WEEK, "duedate": None, "max_score": 7.0})()]
        students = [type("S", (), {"id": s, "last_name": None, "first_name": None, "email": None})()
                    for s in ("alice", "bob")]

        def find_submission(self, week, student):
            if student == "bob":
                raise OSError("database is locked")
            return type("Sub", (), {"timestamp": None, "score": 3.0, "late_submission_penalty": 0.0})()

    with pytest.raises(OSError):
        report.write_grades_csv(grading / f"grades_{WEEK}.csv", Gradebook())
    assert (grading / f"grades_{WEEK}.csv").read_bytes() == before[grading / f"grades_{WEEK}.csv"]
    assert not [p for p in grading.iterdir() if p.name.endswith(".tmp")]


def test_each_student_gets_their_own_notes(cls):
    """Every student handing in day 1 only is told which notebooks have no verdict (the report's collect gave its
    per-student notes to the last student of the roster alone)."""
    rep = _report(cls["grading"])
    for name in ("renamed", "tamper"):
        assert "no verdict for day2_smem_tiling" in rep[name]["notes"], rep[name]
    assert "no verdict for" not in rep["solution"]["notes"]
