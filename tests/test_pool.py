"""The grading pool (autograder/pool.py, `autograder grade --gpus`) on CPU: workers given GPU ids, CPU-gradable
submissions, so nothing waits for a GPU.

One batch of four students of the synthetic cohort (autograder/cohort.py) on three lanes "0,1,2" in CPU mode, with
the pool's test hooks: lane 2's GPU is wedged (it grades nobody), `tamper`'s first attempt dies (SIGKILL: handed
back once, graded by the other lane), `malformed`'s every attempt dies (handed back once, then "not graded, retry").
What must hold: each worker's processes see their own CUDA_VISIBLE_DEVICES; the class's gradebook has every grade of
every graded student exactly once (one writer), with the scores the cohort expects on CPU; the report names the
lane that graded each student and every lane's state; merging a result again changes nothing.
"""
from __future__ import annotations

import csv
import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autograder.cohort import build
from autograder.batch import _assignment_key, assignment_release, assignment_template, class_assignment, make_template
from autograder.handin import expected_notebooks, hand_in_work, part_notebooks, week_notebooks
from autograder.merge import gradebook_rows, merge_result
from autograder.plan import PART_SHARE, Lane, _Queue, expected_seconds, lanes_for, longest_first, plan_jobs
from autograder.record import export_week
from autograder.release import ROOT
from autograder.task import RESULT, _atomic_json, read_result

WEEK = "week1"
COHORT = ["good", "blank", "malformed", "tamper", "naive_loads-scalar_loads"]


def _grade_cells(con) -> int:
    """The week's grade cells, as generate_assignment recorded them."""
    return con.execute("select count(*) from grade_cells gc join base_cell bc on gc.id = bc.id join notebook n on "
                       "bc.notebook_id = n.id join assignment a on n.assignment_id = a.id where a.name = ?",
                       (WEEK,)).fetchone()[0]


@pytest.fixture(scope="module")
def batch(tmp_path_factory):
    grading = tmp_path_factory.mktemp("pool") / "grading"
    made = {m.student: m for m in build(grading / "submitted", WEEK, COHORT)}
    env = dict(os.environ, COURSE_GRADING_DIR=str(grading), PYTHONPATH=str(ROOT), COURSE_FORCE_CPU="1",
               COURSE_POOL_TEST_CRASH="first:tamper,always:malformed", COURSE_POOL_TEST_WEDGED="2")
    r = subprocess.run([sys.executable, "-m", "autograder.cli", "grade", WEEK, "--seed", "7", "--gpus", "0,1,2"],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    summary = json.loads((grading / f"batch_{WEEK}.json").read_text())
    return {"grading": grading, "made": made, "run": r, "batch": summary}


def test_gpu_ids_become_lanes():
    lanes = lanes_for("0,1", {"COURSE_FORCE_CPU": "1"})
    assert [(lane.id, lane.env["CUDA_VISIBLE_DEVICES"], lane.label) for lane in lanes] == \
        [("0", "0", "GPU 0"), ("1", "1", "GPU 1")]
    # ids index the GPUs this process sees: an inherited CUDA_VISIBLE_DEVICES=4,5 makes lane 1 physical GPU 5
    lanes = lanes_for("0,1", {"COURSE_FORCE_CPU": "1", "CUDA_VISIBLE_DEVICES": "4,5"})
    assert [lane.env["CUDA_VISIBLE_DEVICES"] for lane in lanes] == ["4", "5"]
    (cpu,) = lanes_for("none", {})
    assert cpu.id is None and cpu.label == "cpu"
    with pytest.raises(SystemExit):
        lanes_for("0,0", {"COURSE_FORCE_CPU": "1"})
    with pytest.raises(SystemExit, match="not visible"):
        lanes_for("0,7", {})  # no GPU on this machine: a GPU id that is not there is refused


def test_a_handed_back_student_avoids_the_lane_it_failed_on():
    a, b = Lane("0", {}, "GPU 0"), Lane("1", {}, "GPU 1")
    q = _Queue(["s"], [a, b])
    job = q.take(a)
    job.attempts.append({"lane": id(a), "why": "crash"})
    q.finish(job, requeue=True)
    q.retire(a)  # lane a is gone: b takes it
    assert q.take(b) is job
    q.finish()
    assert q.take(b) is None


@pytest.mark.slow
def test_the_batch_finishes_and_names_who_to_retry(batch):
    r = batch["run"]
    assert r.returncode == 2, r.stdout[-3000:] + r.stderr[-3000:]
    assert f"NOT GRADED (1), retry: autograder grade {WEEK} --students malformed" in r.stdout
    assert "[GPU 2] wedged" in r.stdout


def test_each_worker_runs_on_its_own_gpu(batch):
    tasks = sorted((batch["grading"] / "batch").glob("*/tasks/*"))
    assert tasks, "no task folders"
    seen = {}
    for t in tasks:
        started = json.loads((t / "started.json").read_text())
        assert started["gpu"] == started["lane"], f"{t.name}: lane {started['lane']} saw GPU {started['gpu']}"
        seen.setdefault(started["lane"], []).append(started["student"])
    assert set(seen) == {"0", "1"}, f"both working lanes take students (lane 2 is wedged): {seen}"


def test_a_crashed_worker_hands_its_student_back_once(batch):
    e = batch["batch"]["per_student"]["tamper"]
    assert not e.get("not_graded")
    assert len(e["attempts"]) == 1 and "SIGKILL" in e["attempts"][0]["why"]
    assert e["lane"] != e["attempts"][0]["lane"], "the second attempt runs on another lane"


def test_a_student_that_crashes_twice_is_flagged_not_graded(batch):
    e = batch["batch"]["per_student"]["malformed"]
    assert e["not_graded"].startswith("not graded, retry")
    assert len({a["lane"] for a in e["attempts"]}) == 2, e["attempts"]
    rows = {r["student"]: r for r in csv.DictReader((batch["grading"] / f"report_{WEEK}.csv").open())}
    assert rows["malformed"]["status"] == "not graded, retry"
    assert all(s != "malformed" for s, _, _ in gradebook_rows(batch["grading"], WEEK)), "no grade invented"


def test_a_wedged_gpu_grades_nobody(batch):
    lane = batch["batch"]["lanes"]["GPU 2"]
    assert lane["state"] == "wedged" and lane["students"] == []


def test_one_writer_no_grade_lost_or_doubled(batch):
    grading, made = batch["grading"], batch["made"]
    graded = sorted(s for s in made if s != "malformed")
    con = sqlite3.connect(grading / "gradebook.db")
    n, distinct = con.execute(
        "select count(*), count(distinct sa.student_id || '/' || n.name || '/' || gc.name) from grade g "
        "join submitted_notebook sn on g.notebook_id = sn.id join submitted_assignment sa on sn.assignment_id = sa.id "
        "join notebook n on sn.notebook_id = n.id join base_cell gc on g.cell_id = gc.id").fetchone()
    cells = _grade_cells(con)
    con.close()
    assert cells > 0 and n == distinct == len(graded) * cells
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{grading / 'gradebook.db'}") as gb:
        for s in graded:
            assert gb.find_submission(WEEK, s).score == pytest.approx(made[s].expected_cpu), s
    lanes = batch["batch"]["lanes"]
    per = batch["batch"]["per_student"]
    for s in graded:  # a whole hand-in on one lane; one graded in parts on each lane that graded a part
        on = sorted(label for label, lane in lanes.items() if s in lane["students"])
        assert on == sorted({p["lane"] for p in per[s].get("parts") or [per[s]]}), (s, on, per[s])
    # the solutions (five attempted exercises, the longest expected on three lanes) were graded in parts that cover
    # the week's notebooks once each; their grades above are whole; the blank release (nothing attempted) was not
    assert "parts" not in per["blank"]
    parts = per["good"]["parts"]
    assert len(parts) > 1 and sorted(n for p in parts for n in p["notebooks"]) == week_notebooks(WEEK), parts


def test_a_part_merges_only_its_own_notebooks(batch, tmp_path):
    """A part's task holds the whole submission (nbgrader made every notebook's rows), but merging it writes only its
    notebooks' grades and files: a figure put on another notebook stays, one put on its own is replaced."""
    import shutil

    from nbgrader.api import Gradebook

    grading = tmp_path / "grading"
    shutil.copytree(batch["grading"], grading)
    task = next(t for t in sorted((grading / "batch").glob("*/tasks/good.p*")) if read_result(t)["state"] == "done")
    mine = {n[:-len(".ipynb")] for n in read_result(task)["notebooks"]}
    (verdicts := grading / "verdicts" / "good" / WEEK).mkdir(parents=True, exist_ok=True)
    with Gradebook(f"sqlite:///{grading / 'gradebook.db'}") as gb:
        nbs = gb.find_submission(WEEK, "good").notebooks
        other = next(nb for nb in nbs if nb.name not in mine and nb.grades)
        own = next(nb for nb in nbs if nb.name in mine and nb.grades)
        keys = {"other": (other.name, other.grades[0].name), "own": (own.name, own.grades[0].name)}
        marks = {(nb.name, nb.grades[0].name): nb.grades[0].auto_score for nb in (other, own)}
        for nb in (other, own):
            nb.grades[0].auto_score = 0.25
            (verdicts / f"{nb.name}.json").write_text('{"poisoned": true}')
        gb.db.commit()
    merge_result(task, grading)
    with Gradebook(f"sqlite:///{grading / 'gradebook.db'}") as gb:
        got = {(nb.name, nb.grades[0].name): nb.grades[0].auto_score
               for nb in gb.find_submission(WEEK, "good").notebooks}
    assert got[keys["other"]] == 0.25, "another part's grade was overwritten"
    assert got[keys["own"]] == marks[keys["own"]] != 0.25
    assert (verdicts / f"{keys['other'][0]}.json").read_text() == '{"poisoned": true}'
    assert (verdicts / f"{keys['own'][0]}.json").read_text() != '{"poisoned": true}'


def test_merging_a_result_again_changes_nothing(batch):
    grading = batch["grading"]
    before = gradebook_rows(grading, WEEK)
    done = [t for t in (grading / "batch").glob("*/tasks/*") if (read_result(t) or {}).get("state") == "done"]
    assert done
    for t in done:
        merge_result(t, grading)
    assert gradebook_rows(grading, WEEK) == before


def test_report_shows_lanes_and_who_graded_whom(batch):
    html = (batch["grading"] / f"report_{WEEK}.html").read_text()
    assert "id='lanes'>GPU lanes" in html and "wedged" in html
    rows = {r["student"]: r for r in csv.DictReader((batch["grading"] / f"report_{WEEK}.csv").open())}
    for s, e in batch["batch"]["per_student"].items():
        assert rows[s]["graded_on"] == (e.get("lane") or "")
    assert "handed back once" in rows["tamper"]["notes"]


def test_report_shows_each_gpus_ceilings(tmp_path):
    """Two GPUs with their own ceilings (as a GPU batch records them): both appear, beside whom they graded."""
    from autograder.report import write_report
    from tests.test_report import make_grading

    grading = tmp_path / "grading"
    make_grading(grading)
    f = grading / f"batch_{WEEK}.json"
    b = json.loads(f.read_text())
    b["lanes"] = {"GPU 0": {"gpu": "0", "device": "NVIDIA H100 80GB HBM3", "state": "done", "students": ["alice"],
                            "ceilings": {"copy_tbps": 2.9871, "cublas_bf16_tflops": 701.2}, "wall_s": 40},
                  "GPU 1": {"gpu": "1", "device": "NVIDIA H100 80GB HBM3", "state": "done", "students": ["bob"],
                            "ceilings": {"copy_tbps": 2.8123, "cublas_bf16_tflops": 688.4}, "wall_s": 41}}
    b["per_student"]["alice"]["lane"], b["per_student"]["bob"]["lane"] = "GPU 0", "GPU 1"
    f.write_text(json.dumps(b))
    html = write_report(WEEK, grading).read_text()
    lanes = html[html.index("id='lanes'"):html.index("id='exercises'")]
    assert "2.987" in lanes and "2.812" in lanes and "701.2" in lanes and "688.4" in lanes
    assert "<td>GPU 0</td>" in lanes and "alice" in lanes and "bob" in lanes


def _count_nbgrader(monkeypatch) -> list[str]:
    """The nbgrader steps autograder.batch runs from now on (each still runs), in order."""
    from autograder.release import nbgrader as real

    calls = []
    monkeypatch.setattr("autograder.batch.nbgrader", lambda *a, **k: (calls.append(a[0]), real(*a, **k))[1])
    return calls


def test_one_generate_assignment_serves_every_batch_of_the_same_sources(tmp_path, monkeypatch):
    """The template gradebook is generate_assignment's output, made once per content of what it reads (this test run's
    cache may hold it already); the class gradebook starts as its copy, is left alone while its stamp matches, and is
    generated again when the week's sources change (here: a different key)."""
    calls = _count_nbgrader(monkeypatch)
    t1 = make_template(WEEK, tmp_path / "b1")
    first = list(calls)
    assert first in ([], ["generate_assignment"])
    t2 = make_template(WEEK, tmp_path / "b2")
    assert calls == first, "the second batch reuses the first's template"
    assert t1.read_bytes() == t2.read_bytes() and expected_notebooks(t1, WEEK) == sorted(
        p.name for p in (ROOT / "solutions" / WEEK).glob("*.ipynb"))
    assert sorted(p.name for p in assignment_release(WEEK).glob("*.ipynb")) == expected_notebooks(t1, WEEK)
    with sqlite3.connect(t1) as con:
        assert _grade_cells(con) > 0 and con.execute("select count(*) from student").fetchone()[0] == 0

    grading = tmp_path / "grading"
    monkeypatch.setenv("COURSE_GRADING_DIR", str(grading))
    class_assignment(WEEK, grading)  # absent: a copy of the template, no nbgrader run
    assert calls == first and (grading / "gradebook.db").read_bytes() == t1.read_bytes()
    class_assignment(WEEK, grading)  # up to date: nothing to do
    assert calls == first
    key = _assignment_key(WEEK)
    monkeypatch.setattr("autograder.batch._assignment_key", lambda week: "sources-changed")
    class_assignment(WEEK, grading)
    assert calls == first + ["generate_assignment"], "changed sources: nbgrader updates the class gradebook"
    assert (grading / f".assignment_{WEEK}").read_text() == "sources-changed" != key
    assert expected_notebooks(grading / "gradebook.db", WEEK) == expected_notebooks(t1, WEEK)


def test_the_template_key_follows_the_weeks_sources(tmp_path, monkeypatch):
    import shutil

    shutil.copytree(ROOT / "solutions" / WEEK, tmp_path / "solutions" / WEEK)
    (tmp_path / "autograder").mkdir()
    shutil.copy(ROOT / "autograder" / "__init__.py", tmp_path / "autograder")
    monkeypatch.setattr("autograder.batch.ROOT", tmp_path)
    before = _assignment_key(WEEK)
    assert _assignment_key(WEEK) == before
    nb = sorted((tmp_path / "solutions" / WEEK).glob("*.ipynb"))[-1]
    nb.write_text(nb.read_text().replace('"cells": [', '"cells": [ ', 1))
    edited = _assignment_key(WEEK)
    assert edited != before, "an edited notebook makes a new template"
    (tmp_path / "solutions" / WEEK / "extra.txt").write_text("a file the release carries")
    assert _assignment_key(WEEK) not in (before, edited)


def test_nbgrader_steps_in_this_process_read_each_calls_own_class(tmp_path, monkeypatch):
    """The grading command's export (and feedback) run nbgrader in its own process: two classes exported one after
    the other get their own gradebooks (the config is read again per call), a step that ran returns 0 (a Jupyter
    application ends its subcommand with NoStart, which the command line reads as success) and a failing step a
    return code with nbgrader's log, as from the command line."""
    import warnings

    from nbgrader.api import Gradebook

    from autograder.release import nbgrader

    a, b = tmp_path / "a", tmp_path / "b"
    for g in (a, b):
        monkeypatch.setenv("COURSE_GRADING_DIR", str(g))
        class_assignment(WEEK, g)
    with warnings.catch_warnings(), Gradebook(f"sqlite:///{a / 'gradebook.db'}") as gb:
        warnings.simplefilter("ignore")
        gb.update_or_create_student("ann")
        gb.add_submission(WEEK, "ann")
    env_before = dict(os.environ)
    rows = {g.name: list(csv.DictReader(export_week(WEEK, g).open())) for g in (a, b)}
    assert [r["student_id"] for r in rows["a"]] == ["ann"] and rows["b"] == []
    assert dict(os.environ) == env_before, "the call's environment is put back"
    ok = nbgrader("export", f"--to={tmp_path / 'ok.csv'}", f"--assignment={WEEK}", here=True)  # a step that ran: 0
    assert ok.returncode == 0 and (tmp_path / "ok.csv").exists(), ok
    args = ("export", "--to=/nonexistent-dir/x.csv", f"--assignment={WEEK}")
    bad = nbgrader(*args, check=False, here=True)
    # (the export writes a temporary file beside the CSV first: kernels.paths.write_whole)
    assert bad.returncode == 1 and "No such file or directory: '/nonexistent-dir/" in bad.stderr, bad
    with pytest.raises(RuntimeError, match=r"nbgrader export failed \(1\)"):
        nbgrader(*args, here=True)


def test_parallel_batches_wait_for_one_template(tmp_path, monkeypatch):
    """Three grading runs asking for the same week's template at once (a fresh cache): one generate_assignment, the
    same file for all. (Threads: the lock is on an open file, so they exclude each other as processes would.)"""
    import threading

    monkeypatch.setenv("COURSE_CACHE_DIR", str(tmp_path / "cache"))
    calls = _count_nbgrader(monkeypatch)
    got = []
    threads = [threading.Thread(target=lambda: got.append(assignment_template(WEEK))) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    assert calls == ["generate_assignment"] and len(got) == 3 and len(set(got)) == 1 and got[0].exists()
    assert [p.name for p in (tmp_path / "cache" / "nbgrader").iterdir() if p.is_dir()] == [got[0].parent.name]


def test_a_notebook_that_would_kill_its_grader_never_runs(tmp_path):
    """nbgrader's autograde runs in the task's own process now: a hand-in whose cell kills its parent process and
    writes out the seed it finds in the environment, slipped in as an extra grade cell so that the notebook would be
    executed, is refused by nbgrader's cell check before anything runs: the cell never ran, the student is reported
    not graded (permanently, with nbgrader's reason), the batch ends normally."""
    import shutil

    import nbformat

    grading = tmp_path / "grading"
    sub = grading / "submitted"
    build(sub, WEEK, ["blank"])
    shutil.move(sub / "blank", sub / "evil")
    page = sub / "evil" / WEEK / "day1_naive_loads.ipynb"
    nb = nbformat.read(str(page), as_version=4)
    leak = tmp_path / "leak.txt"
    cell = nbformat.v4.new_code_cell(
        f"import os, signal, pathlib\npathlib.Path({str(leak)!r}).write_text(repr(dict(os.environ)))\n"
        "os.kill(os.getppid(), signal.SIGKILL)\n")
    cell.metadata["nbgrader"] = {"grade": True, "grade_id": "extra_points", "points": 5, "solution": False,
                                 "locked": False, "schema_version": 3}
    nb.cells.insert(1, cell)
    nbformat.write(nb, str(page))
    env = dict(os.environ, COURSE_GRADING_DIR=str(grading), PYTHONPATH=str(ROOT), COURSE_FORCE_CPU="1")
    r = subprocess.run([sys.executable, "-m", "autograder.cli", "grade", WEEK, "--seed", "7", "--gpus", "none"],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 2, r.stdout[-2000:] + r.stderr[-2000:]
    assert "NOT GRADED evil: not graded (nbgrader failed on this hand-in twice" in r.stdout, r.stdout[-2000:]
    assert "checkcellmetadata" in r.stdout.lower() and not leak.exists()
    entry = json.loads((grading / f"batch_{WEEK}.json").read_text())["per_student"]["evil"]
    assert entry["permanent"] and entry["not_graded"]


# ------------------------------------------------------------------------------------- the order, the fixed costs
def _fake_pool(monkeypatch, grading, *, task_s: dict, ready_s: float = 0.0):
    """run_pool with fake lanes and tasks (no process, no nbgrader): a lane is ready after `ready_s`, a student's task
    takes task_s[student] seconds and writes a finished result; merging records, never writes a gradebook. Returns
    the log of (event, student or lane, monotonic time) the fakes append to."""
    import threading
    import time

    from autograder import pool

    log, lock = [], threading.Lock()

    def note(*what):
        with lock:
            log.append((*what, time.monotonic()))

    def ready(week, lane, lane_dir):
        note("ready-start", lane.label)
        time.sleep(ready_s)
        note("ready", lane.label)
        return True, ""

    def task(cmd, lane, timeout, ahead=True):
        student, out = cmd[-1], Path(cmd[cmd.index("--out") + 1])
        note("start", student)
        time.sleep(task_s[student])
        out.mkdir(parents=True, exist_ok=True)
        _atomic_json(out / RESULT, {"student": student, "week": WEEK, "state": "done", "wall_s": 0.0})
        note("end", student)
        return 0, ""

    monkeypatch.setattr(pool, "_lane_ready", ready)
    monkeypatch.setattr(pool, "_run_task", task)
    monkeypatch.setattr(pool, "merge_result", lambda out, grading=None, **kw: note("merge", out.name.split(".")[0]))
    for s in task_s:
        (grading / "submitted" / s / WEEK).mkdir(parents=True, exist_ok=True)
    return log


def test_the_pool_hands_out_the_longest_expected_hand_in_first(tmp_path, monkeypatch):
    """One lane: the order it grades in is the order handed out. Recorded wall times (the last run's, in the batch
    record) come first; a student with none is expected at the recorded seconds per unit of work: the exercises
    their hand-in attempted (a solution notebook: one), plus NOTEBOOK_WORK per notebook (the release's stubs: that
    alone)."""
    import random
    import shutil

    from autograder import pool

    grading = tmp_path / "grading"
    task_s = {s: 0.0 for s in ("ann", "bo", "cy", "di", "ed")}
    log = _fake_pool(monkeypatch, grading, task_s=task_s)
    week = week_notebooks(WEEK)
    names = {"ann": week[:1], "bo": week[1:2], "cy": week[2:3], "di": random.sample(week, 3), "ed": week[:2]}
    for s, nbs in names.items():  # ed hands in the release, untouched: nothing attempted
        for nb in nbs:
            shutil.copy(ROOT / ("weeks" if s == "ed" else "solutions") / WEEK / nb, grading / "submitted" / s / WEEK)
    work = {s: hand_in_work(grading / "submitted" / s / WEEK, WEEK) for s in names}
    assert all(sum(work[s].values()) == len(names[s]) for s in ("ann", "bo", "cy", "di")) and \
        sum(work["ed"].values()) == 0, work
    record = {"per_student": {"ann": {"wall_s": 5.0}, "bo": {"wall_s": 75.0}, "cy": {"wall_s": 20.0},
                              "ed": {"not_graded": "not graded, retry", "wall_s": None}}}
    (grading / f"batch_{WEEK}.json").write_text(json.dumps(record))
    # the median rate is cy's, 20 s per 1.1 units: di (3.3 units) -> 60 s; ed (0.2 units) -> 3.6 s, after ann
    exp = expected_seconds(grading, WEEK, list(task_s))
    assert exp["di"][0] == pytest.approx(60.0) and exp["ed"][0] == pytest.approx(20 / 1.1 * 0.2)
    assert longest_first(grading, WEEK, list(task_s)) == ["bo", "di", "cy", "ann", "ed"]
    lanes = lanes_for("0", {"COURSE_FORCE_CPU": "1"})
    per, _ = pool.run_pool(WEEK, list(task_s), lanes, grading=grading, batch=tmp_path / "batch",
                           template=tmp_path / "template.db")
    assert [s for kind, s, _ in log if kind == "start"] == ["bo", "di", "cy", "ann", "ed"]
    assert sorted(per) == sorted(task_s)
    # no record at all: the most attempted work first (di's three exercises, before ed's two untouched notebooks)
    (grading / f"batch_{WEEK}.json").unlink()
    assert longest_first(grading, WEEK, ["ann", "ed", "di", "bo"])[0] == "di"
    assert longest_first(grading, WEEK, ["ed", "ann"]) == ["ann", "ed"]


def test_a_runs_fixed_costs_are_paid_once_and_overlap_the_grading(tmp_path, monkeypatch):
    """Three fake lanes: the batch's set-up (class gradebook, template) runs once, in the main thread, while the lanes
    measure their GPUs (the only fixed cost paid per lane); no student starts before it is done. The feedback of
    each merged student is written once, while other students are still grading, with the lanes' threads running
    (alone=False) until the last call. Prints the fake run's wall time beside the serial sum of its parts."""
    import threading
    import time

    from autograder import pool

    grading = tmp_path / "grading"
    task_s = {"long": 1.2, "a": 0.4, "b": 0.4, "c": 0.4, "d": 0.4, "e": 0.4}
    log = _fake_pool(monkeypatch, grading, task_s=task_s, ready_s=0.5)
    (grading / f"batch_{WEEK}.json").write_text(json.dumps({"per_student": {"long": {"wall_s": 60.0}}}))
    prepared, fed = [], []

    def prepare():
        prepared.append((threading.current_thread() is threading.main_thread(), time.monotonic()))
        time.sleep(0.5)

    def after_merge(entries, alone):
        fed.append((sorted(entries), alone, threading.current_thread() is threading.main_thread(), time.monotonic()))
        time.sleep(0.2)  # converting a student's notebooks

    lanes = lanes_for("0,1,2", {"COURSE_FORCE_CPU": "1"})
    t0 = time.monotonic()
    per, _ = pool.run_pool(WEEK, list(task_s), lanes, grading=grading, batch=tmp_path / "batch",
                           template=tmp_path / "template.db", prepare=prepare, after_merge=after_merge)
    wall = time.monotonic() - t0
    assert len(prepared) == 1 and prepared[0][0], "the set-up runs once per run, in the writer's thread"
    ready_start = [t for kind, _, t in log if kind == "ready-start"]
    assert len(ready_start) == 3 and prepared[0][1] < max(t for kind, _, t in log if kind == "ready"), \
        "the set-up overlaps the lanes' baselines"
    done_prep = prepared[0][1] + 0.5
    assert all(t >= done_prep - 0.05 for kind, _, t in log if kind == "start"), "no student before the set-up"
    assert sorted(s for names, *_ in fed for s in names) == sorted(task_s), "every merged student fed once"
    last_end = max(t for kind, _, t in log if kind == "end")
    assert all(main for _, _, main, _ in fed) and not any(alone for _, alone, _, t in fed if t < last_end), \
        "nbgrader in this process only once the lanes' threads have stopped"
    assert fed[0][3] < last_end, "feedback is written while students are still grading"
    assert [s for kind, s, _ in log if kind == "start"][0] == "long"
    serial = 0.5 + 0.5 + 1.2 + 0.2 * len(task_s)  # set-up, then baselines, the long student, then the feedback
    print(f"3 fake lanes: {wall:.2f} s (set-up, baselines and feedback in sequence around the grading: >= {serial} s)")
    assert wall < serial, (wall, serial)


def test_a_long_hand_in_is_graded_in_parts_on_several_lanes(tmp_path, monkeypatch):
    """Four fake lanes, one hand-in of five notebooks recorded at 2 s beside eight one-notebook hand-ins of 0.3 s:
    whole, the long one is the batch's critical path (2 s of a 2.6 s total / 4 lanes). plan_jobs splits it into
    parts (each at most a share of the class's time, none smaller than a notebook) that cover the week's notebooks
    once, run on several lanes at once; the student gets one entry and one feedback call, once every part is merged,
    with each part's lane. One lane: never split."""
    import time

    from autograder import pool

    grading = tmp_path / "grading"
    task_s = {"long": 2.0, **{f"s{i}": 0.3 for i in range(8)}}
    log = _fake_pool(monkeypatch, grading, task_s=task_s)
    week = week_notebooks(WEEK)
    for s in task_s:
        for nb in week if s == "long" else week[:1]:
            (grading / "submitted" / s / WEEK / nb).write_text("{}")
    (grading / f"batch_{WEEK}.json").write_text(json.dumps({"per_student": {s: {"wall_s": t} for s, t in
                                                                              task_s.items()}}))
    assert [j.parts for j in plan_jobs(grading, WEEK, list(task_s), 1)] == [1] * len(task_s)
    jobs = plan_jobs(grading, WEEK, list(task_s), 4)
    long_parts = [j for j in jobs if j.student == "long"]
    share = PART_SHARE * sum(task_s.values()) / 4
    assert len(long_parts) == min(len(week), -(-2.0 // share)) > 1
    assert jobs[:len(long_parts)] == long_parts, "the parts of the longest hand-in first"
    assert sorted(n for j in long_parts for n in part_notebooks(week, (j.part, j.split))) == week

    def task(cmd, lane, timeout, ahead=True):  # a part takes its share of the student's time
        student, out = cmd[-1], Path(cmd[cmd.index("--out") + 1])
        part = pool._part_arg(cmd[cmd.index("--part") + 1]) if "--part" in cmd else None
        log.append(("start", student, lane.label, time.monotonic()))
        time.sleep(task_s[student] / (len(part[1]) if part else 1))
        out.mkdir(parents=True, exist_ok=True)
        _atomic_json(out / RESULT, {"student": student, "week": WEEK, "state": "done", "wall_s": 0.1,
                                    "part": [part[0], len(part[1])] if part else None,
                                    "notebooks": part_notebooks(week, part) if part else None})
        return 0, ""

    monkeypatch.setattr(pool, "_run_task", task)
    fed = []
    lanes = lanes_for("0,1,2,3", {"COURSE_FORCE_CPU": "1"})
    t0 = time.monotonic()
    per, summary = pool.run_pool(WEEK, list(task_s), lanes, grading=grading, batch=tmp_path / "batch",
                                 template=tmp_path / "template.db", after_merge=lambda e, alone: fed.extend(e))
    wall = time.monotonic() - t0
    assert sorted(fed) == sorted(task_s), "each student fed once, the long one after its last part"
    e = per["long"]
    assert len(e["parts"]) == len(long_parts) and e["wall_s"] == pytest.approx(0.1 * len(long_parts))
    assert sorted(n for p in e["parts"] for n in p["notebooks"]) == week
    on = {lab for kind, s, lab, _ in [x for x in log if len(x) == 4] if kind == "start" and s == "long"}
    assert len(on) > 1 and set(e["lane"].split(", ")) == on, (on, e["lane"])
    assert sorted(s for lane in summary.values() if "long" in lane["students"] for s in ["long"]) == ["long"] * len(on)
    print(f"4 fake lanes: {wall:.2f} s with the long hand-in in {len(long_parts)} parts (2.0 s whole)")
    assert wall < 1.9, wall


# --------------------------------------------------------------------------------------------------- student ids
_names = __import__("hypothesis").strategies.binary(min_size=1, max_size=12).filter(
    lambda b: b"/" not in b and b"\0" not in b and b not in (b".", b".."))


@__import__("hypothesis").given(_names, _names)
def test_a_folder_name_maps_to_one_safe_id(a, b):
    """Every folder name but a hidden one gets an id nbgrader takes as it is (UTF-8, no glob, control or format
    character, no % that a sqlite URL would decode, no white space at an end); a plain name is its own id; two
    folders never share one."""
    import os
    import unicodedata

    from autograder.students import student_id

    na, nb = os.fsdecode(a), os.fsdecode(b)
    sa = student_id(na)
    if na.startswith("."):
        assert sa is None
        return
    sa.encode("utf-8")  # no surrogate left
    assert sa == sa.strip() and not set("*?[]%") & set(sa)
    assert not any(unicodedata.category(c)[0] == "C" for c in sa)
    if "\\" not in sa:
        assert sa == na  # a plain name is kept
    if not nb.startswith(".") and na != nb:
        assert student_id(nb) != sa


def test_ids_and_folders_both_ways(tmp_path):
    """The roster maps each folder to its id (a hidden one left out, with a note); a task finds the folder back."""
    import os

    from autograder.task import task_folder
    from autograder.students import class_roster, submission_folder

    for name in (b"caf\xe9", b"smith,john", b"ann", b".ipynb_checkpoints", b"a[1]"):
        os.makedirs(os.fsencode(tmp_path) + b"/" + name + b"/" + WEEK.encode())
    roster, notes = class_roster(tmp_path, WEEK)
    assert roster == {"a\\x5b1\\x5d": "a[1]", "ann": "ann", "caf\\xe9": os.fsdecode(b"caf\xe9"),
                      "smith,john": "smith,john"}
    assert any(".ipynb_checkpoints" in n and "ignored" in n for n in notes)
    assert any("'caf\\xe9'" in n and "caf\\xe9" in n for n in notes)
    for sid, folder in roster.items():
        assert submission_folder(tmp_path, sid, WEEK) == tmp_path / folder / WEEK
        assert all(c.isalnum() or c in "_.,@=-" for c in task_folder(sid))  # nbgrader's unescaped path regex


@pytest.mark.slow
def test_a_lanes_next_task_process_is_started_while_the_last_student_grades(tmp_path):
    """One student per process still, but the lane's next task process is started ahead (pool._spare_task): it does
    its imports while the student before it is graded, so the next student's process is older than the end of the
    previous student's grading. Every student is graded as before; no spare outlives the run."""
    import shutil
    from pathlib import Path

    grading = tmp_path / "grading"
    build(grading / "submitted", WEEK, ["malformed"])  # not JSON: graded 0 without nbgrader (fast)
    students = ["s1", "s2", "s3"]
    for s in students:
        shutil.copytree(grading / "submitted" / "malformed", grading / "submitted" / s)
    shutil.rmtree(grading / "submitted" / "malformed")
    env = dict(os.environ, COURSE_GRADING_DIR=str(grading), PYTHONPATH=str(ROOT), MPLCONFIGDIR=str(tmp_path / "mpl"))
    env.pop("COURSE_FORCE_CPU", None)
    r = subprocess.run([sys.executable, "-m", "autograder.cli", "grade", WEEK, "--seed", "5", "--gpus", "none"],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 2 and "graded 0 of 3" in r.stdout, r.stdout[-3000:] + r.stderr[-3000:]  # 3 not readable
    per = json.loads((grading / f"batch_{WEEK}.json").read_text())["per_student"]
    runs = sorted((per[s]["started_at"], per[s]["process_born"], per[s]["finished_at"]) for s in students)
    for (_, _, end), (_, born, _) in zip(runs, runs[1:]):
        assert born < end, f"the next student's process started at {born}, after the last one ended at {end}"
    mine = f"COURSE_GRADING_DIR={grading}".encode()
    left = []
    for proc in Path("/proc").glob("[0-9]*"):  # this run's spares only (other tests may be grading at the same time)
        try:
            if b"autograder.pool\0spare" in (proc / "cmdline").read_bytes() and mine in (proc / "environ").read_bytes():
                left.append(proc.name)
        except OSError:
            continue
    assert not left, f"spare task processes outlived the run: {left}"


def test_the_gpu_check_says_why_a_gpu_does_not_answer():
    """The lane's GPU check (a 4 MB fill through the driver API in a fresh process) on a machine with no GPU driver:
    not healthy, and the reason is the driver's, in one line. A CPU lane needs no check."""
    import shutil

    from autograder.batch import gpu_healthy

    if shutil.which("nvidia-smi"):
        pytest.skip("a GPU driver is here: the check is run by make gpu-test's class scale")
    ok, why = gpu_healthy("0", dict(os.environ))
    assert not ok and why and "\n" not in why and ("driver" in why.lower() or "cuda" in why.lower()), why
    assert gpu_healthy(None, {}) == (True, "")


_json_shapes = st.recursive(st.none() | st.integers() | st.text(max_size=8),
                            lambda kids: st.lists(kids, max_size=3) | st.dictionaries(
                                st.sampled_from(["cells", "metadata", "nbgrader", "grade_id", "source"]), kids,
                                max_size=3), max_leaves=10)


@given(st.binary(max_size=64) | _json_shapes.map(lambda v: json.dumps(v).encode()))
@settings(max_examples=40, deadline=None)
def test_the_plan_reads_any_file_handed_in_as_a_notebook(tmp_path_factory, data):
    """hand_in_work reads every hand-in before the class is graded: any bytes under a notebook's name (not JSON, JSON
    of any shape) count as no work, never an error; a solution notebook beside them still counts its exercise."""
    import shutil

    folder = tmp_path_factory.mktemp("handin") / WEEK
    folder.mkdir()
    week = week_notebooks(WEEK)
    (folder / week[0]).write_bytes(data)
    shutil.copy(ROOT / "solutions" / WEEK / week[1], folder / week[1])
    work = hand_in_work(folder, WEEK)
    assert work[week[0]] == 0.0 and work[week[1]] == 1.0, work


def test_a_process_is_born_when_it_starts_not_when_it_imports_the_pool():
    """children._BORN is the process's start (the kernel's record of it), not the moment its imports reach the pool: a
    process that works half a second before importing it is still that much older."""
    code = ("import time; t0 = time.time(); time.sleep(0.5); from autograder.children import _BORN; "
            "print(t0 - _BORN, time.time() - _BORN)")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120,
                         env=dict(os.environ, PYTHONPATH=str(ROOT)))
    before_main, age = map(float, out.stdout.split())
    assert -0.05 <= before_main < 5 and age >= 0.5, out.stdout + out.stderr


@pytest.mark.parametrize("waiting", [0, 1, 3])
def test_a_lane_starts_its_next_task_process_only_while_students_wait(monkeypatch, waiting):
    """A spare task process costs its imports (seconds of CPU): a lane starts the next one while a student is handed
    out only where students still wait; its last student's lane starts none (a student handed back starts its own)."""
    from autograder import pool

    started = []

    class Fake:
        returncode = 0

        def poll(self):
            return None

        def communicate(self, input=None, timeout=None):
            return "", ""

    def spare(lane):
        started.append(lane.label)
        return Fake()

    monkeypatch.setattr(pool, "_spare_task", spare)
    todo = _Queue([f"s{i}" for i in range(waiting + 1)], [])
    lane = Lane(id=None, env={}, label="cpu", spare=Fake())
    todo.take(lane)
    code, _ = pool._run_task(["python", "-m", "autograder.pool", "task", "x"], lane, None,
                             ahead=todo.waiting() > 0)
    assert code == 0 and todo.waiting() == waiting
    assert started == (["cpu"] if waiting else []) and (lane.spare is not None) == bool(waiting)
