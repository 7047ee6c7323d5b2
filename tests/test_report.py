"""The class report (autograder/report.py) from a synthetic grading folder: no GPU, no nbgrader run.

Three students: `alice` earns every point with measured throughput, `bob` is correct but slow and carries flags
(one figure above the roofline), `mallory` handed in a malformed notebook, has no verdict at all, and her batch
record holds a traceback of the trusted code, a hidden-test block and the secret seed — none may reach the page.
`make_grading(path)` is shared with tests/test_browser.py, which screenshots the page.
"""
from __future__ import annotations

import base64
import csv
import html as html_lib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from autograder.release import ROOT
from autograder.report import write_report
from autograder.spec import all_specs

WEEK = "week1"
SECRET = "918273645"
TRACEBACK = ('Traceback (most recent call last):\n  File "/course/autograder/grading.py", line 97, in grade_notebook\n'
             '    facts = run_exercise(spec.slug, ex.name, ans.value, seed=derive_seed(seed, student, ex.name))\n'
             f"RuntimeError: harness died (seed {SECRET})\n")
HIDDEN = "### BEGIN HIDDEN TESTS\nassert QUIZ['q1'] == 'b'\n### END HIDDEN TESTS\n"


def _specs():
    return [s for s in all_specs() if s.assignment == WEEK and (ROOT / "weeks" / WEEK / s.notebook).exists()]


def _h100_bar(tp) -> float:
    """The bar of an H100 run: its calibration's, or — for an exercise not calibrated yet (redesigned since its
    topic's record) — the spec's fraction of the synthetic verdicts' baseline (3.0)."""
    cal = tp.calibration_for("h100")
    return cal.bar if cal is not None else tp.bar_on("h100", 3.0)


def _verdict(spec, *, correct: bool, value: float | None, path_ok: bool = True, quiz_right: int | None = None,
             flags: tuple[str, ...] = ()) -> dict:
    """A verdict in autograder.grading.NotebookGrade.as_dict()'s format."""
    scores, facts = {}, {}
    for ex in spec.exercises.values():
        p = ex.parts
        bar = _h100_bar(p["throughput"])
        fast = value is not None and value >= bar and value <= ex.roofline_for("h100")
        got = {"correctness": p["correctness"].points if correct else 0.0,
               "path": p["path"].points if path_ok else 0.0,
               "throughput": p["throughput"].points if (correct and fast) else 0.0}
        for part, pts in got.items():
            scores[p[part].grade_id] = {"points": pts, "max_points": p[part].points, "part": part, "graded": True,
                                        "feedback": f"{part}: synthetic verdict"}
        tp = ({"graded": True, "student": {"value": value, "ms": 0.2, "p20_ms": 0.19, "p80_ms": 0.21,
                                           "output_ok": True, "ceilings": {"copy_tbps": 3.0}},
               "reference": {"value": 2.9}, "gpu": "h100", "bar": bar,
               "baseline": {"kind": "copy", "what": "D2D copy", "value": 3.0}} if (correct and value is not None)
              else {"graded": False, "reason": "a kernel that is not correct is not timed"})
        facts[ex.name] = {"status": "ok", "device": "NVIDIA H100 80GB HBM3", "compile": {"ok": True},
                          "path": {"ok": path_ok, "summary": "LDG.E.128 x2"},
                          "correctness": {"graded": True, "ok": correct, "shapes": []}, "throughput": tp,
                          # what _public_facts might let through: the report must not show it
                          "stderr_tail": TRACEBACK, "flags": list(flags)}
    if spec.quiz:
        n_right = len(spec.quiz.questions) if quiz_right is None else quiz_right
        for i, q in enumerate(spec.quiz.questions.values()):
            pts = q.points if i < n_right else 0.0
            scores[q.grade_id] = {"points": pts, "max_points": q.points, "part": q.name, "graded": True,
                                  "feedback": f"{q.name}: correct" if pts else f"{q.name}: answered 'a'"}
    pts = sum(s["points"] for s in scores.values())
    mx = sum(s["max_points"] for s in scores.values())
    return {"slug": spec.slug, "points": pts, "max_points": mx,
            "flags": [f"{ex}: {f}" for ex in spec.exercises for f in flags], "problems": [], "scores": scores,
            "facts": facts}


def make_grading(grading: Path) -> dict:
    """A graded week-1 cohort of three as `autograder grade` + the plugin leave it; returns what to expect."""
    specs = _specs()
    expected = {"students": ["alice", "bob", "mallory"], "flags": [], "leaderboard": {}}
    for student in expected["students"]:
        d = grading / "submitted" / student / WEEK
        d.mkdir(parents=True)
        for s in specs:
            (d / s.notebook).write_text("{ this is not a notebook" if student == "mallory" else "{}")
    totals = {}
    for s in specs:
        bar = _h100_bar(next(iter(s.exercises.values())).parts["throughput"])
        ex = next(iter(s.exercises))
        per = {"alice": _verdict(s, correct=True, value=round(bar * 1.12, 3))}
        if s.slug == "smem_tiling":  # bob's figure is impossible: flagged, never on the leaderboard
            flag = "above-roofline: 9.000 tbps > 3.35 — impossible for work actually done"
            per["bob"] = _verdict(s, correct=True, value=9.0, quiz_right=2, flags=(flag,))
            expected["flags"].append(("bob", Path(s.notebook).stem, f"{ex}: {flag}"))
            expected["leaderboard"][f"{Path(s.notebook).stem}.{ex}"] = ["alice"]
        else:
            flag = f"path-elsewhere: LDG.E.128 appear only in ['helper'], not in {ex}, the kernel that does the work"
            per["bob"] = _verdict(s, correct=True, value=round(bar * 0.5, 3), path_ok=False, quiz_right=2,
                                  flags=(flag,))
            expected["flags"].append(("bob", Path(s.notebook).stem, f"{ex}: {flag}"))
            expected["leaderboard"][f"{Path(s.notebook).stem}.{ex}"] = ["alice", "bob"]
        for student, v in per.items():
            out = grading / "verdicts" / student / WEEK / f"{Path(s.notebook).stem}.json"
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(json.dumps(v, indent=1))
            totals[student] = totals.get(student, 0.0) + v["points"]
    max_score = sum(_verdict(s, correct=True, value=None)["max_points"] for s in specs)
    expected["totals"] = {**totals, "mallory": 0.0}
    expected["max_score"] = max_score
    # nbgrader's export (the columns of nbgrader/plugins/export.py)
    with (grading / f"grades_{WEEK}.csv").open("w") as f:
        f.write("assignment,duedate,timestamp,student_id,last_name,first_name,email,raw_score,"
                "late_submission_penalty,score,max_score\n")
        for st in ("alice", "bob"):
            f.write(f"{WEEK},,2026-11-30 10:00:00,{st},,,,{totals[st]},0.0,{totals[st]},{max_score}\n")
        f.write(f"{WEEK},,,mallory,,,,0.0,0.0,0.0,{max_score}\n")
    batch = {"week": WEEK, "students": 3, "wall_s": 123.4, "per_student": {
        "alice": {"returncode": 0, "wall_s": 41.0, "log_tail": ""},
        "bob": {"returncode": 0, "wall_s": 40.0, "log_tail": ""},
        "mallory": {"returncode": 1, "wall_s": 2.5,
                    # as autograder.cli.set_aside_malformed reports them
                    "malformed": [f"{s.notebook}: NotJSONError: Notebook does not appear to be JSON" for s in specs],
                    "log_tail": HIDDEN + TRACEBACK + "[AutogradeApp | ERROR] There was an error processing "
                                "assignment: week1 for student: mallory\n"}}}
    (grading / f"batch_{WEEK}.json").write_text(json.dumps(batch, indent=1))
    return expected


@pytest.fixture()
def graded(tmp_path, monkeypatch):
    monkeypatch.setenv("COURSE_SECRET_SEED", SECRET)
    grading = tmp_path / "grading"
    expected = make_grading(grading)
    return grading, expected


def _section(html: str, start: str, end: str | None = None) -> str:
    a = html.index(start)
    b = html.find(end, a + len(start)) if end else -1
    return html[a:b if b >= 0 else len(html)]


def test_report_has_every_student_plots_leaderboards_and_flags(graded):
    grading, expected = graded
    out = write_report(WEEK, grading)
    assert out == grading / f"report_{WEEK}.html"
    html = out.read_text()

    students = _section(html, "id='students'")
    for name in expected["students"]:
        assert f"<td>{name}</td>" in students, f"{name} missing from the students table"
    # mallory: malformed, no verdict, still a row, with a readable reason
    row = re.search(r"<tr><td>mallory</td>.*?</tr>", students, re.S).group(0)
    assert "not graded" in row and "NotJSONError" in row and "exited with 1" in row
    assert row.count("<span class='bad'>malformed</span>") == len(_specs())

    # leaderboards: fastest correct first; an above-roofline figure is not on the board
    for key, order in expected["leaderboard"].items():
        nb, ex = key.split(".")
        board = _section(html, f"id='ex-{key}'", "<h3")
        board = _section(board, f"Leaderboard — {ex}")
        found = re.findall(r"<td>(alice|bob|mallory)</td>", board)
        assert found == order, f"{key}: leaderboard {found}, expected {order}"

    flags = _section(html, "id='flags'", "<h2")
    for student, nb, flag in expected["flags"]:
        assert re.search(rf"<td>{student}</td><td>{nb}</td><td><span class='flag'>{re.escape(html_lib.escape(flag))}</span>", flags)

    imgs = re.findall(r'<img alt="[^"]*" src="data:image/png;base64,([A-Za-z0-9+/=]+)"', html)
    assert len(imgs) >= 1 + 2 * len(expected["leaderboard"]), "score histograms and throughput plots expected"
    assert all(base64.b64decode(b)[:8] == b"\x89PNG\r\n\x1a\n" for b in imgs)
    from autograder.spec import load

    day1_bar = load("naive_loads").exercises["row_bias"].parts["throughput"].calibration_for("h100").bar
    assert f"bar {day1_bar:.4g} TB/s (median of the bars applied" in html  # the bar the verdicts were graded with

    # nothing the trusted side keeps to itself
    for secret_text in ("HIDDEN TESTS", "Traceback", 'File "/course', "derive_seed", SECRET):
        assert secret_text not in html, f"{secret_text!r} leaked into the report"
    assert "http://" not in html and "https://" not in html, "the page must be self-contained"


def test_report_csv_one_row_per_student(graded):
    grading, expected = graded
    write_report(WEEK, grading)
    rows = list(csv.DictReader((grading / f"report_{WEEK}.csv").open()))
    assert [r["student"] for r in rows] == expected["students"]
    by = {r["student"]: r for r in rows}
    for st, total in expected["totals"].items():
        assert float(by[st]["total"]) == pytest.approx(total)
        assert float(by[st]["max_total"]) == pytest.approx(expected["max_score"])
    assert by["alice"]["status"] == "graded" and by["alice"]["flags"] == "0"
    assert int(by["bob"]["flags"]) == len(expected["flags"])
    assert by["mallory"]["status"] == "not graded" and by["mallory"]["day1_naive_loads"] == ""
    assert float(by["alice"]["wall_s"]) == pytest.approx(41.0)
    assert float(by["alice"]["day1_naive_loads"]) == pytest.approx(12.0)
    text = (grading / f"report_{WEEK}.csv").read_text()
    assert "Traceback" not in text and SECRET not in text and "HIDDEN TESTS" not in text


def test_report_from_the_roster_alone(tmp_path):
    """A batch that crashed before any verdict, gradebook or batch record: every submitter still has a row."""
    grading = tmp_path / "grading"
    for st in ("zed", "amy", "student10", "student9"):
        (grading / "submitted" / st / WEEK).mkdir(parents=True)
    html = write_report(WEEK, grading).read_text()
    rows = re.findall(r"<tr><td>(\w+)</td><td><span class='bad'>not graded</span>", html)
    assert rows == ["amy", "student9", "student10", "zed"]
    assert "No flags." in html


def test_report_command_line(graded):
    grading, _ = graded
    env = dict(os.environ, PYTHONPATH=str(ROOT), MPLCONFIGDIR=str(grading / "mpl"))
    r = subprocess.run([sys.executable, "-m", "autograder.report", WEEK, "--grading", str(grading)], cwd=ROOT,
                       env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert (grading / f"report_{WEEK}.html").exists() and (grading / f"report_{WEEK}.csv").exists()
    assert str(grading / f"report_{WEEK}.html") in r.stdout


def test_a_verdict_from_an_earlier_run_is_not_credited(graded):
    """mallory's notebook broke before the plugin ran; a verdict an earlier batch left behind must not count."""
    grading, _ = graded
    old = grading / "verdicts" / "mallory" / WEEK / "day1_naive_loads.json"
    old.parent.mkdir(parents=True)
    spec = next(s for s in _specs() if s.slug == "naive_loads")
    old.write_text(json.dumps(_verdict(spec, correct=True, value=2.9)))
    t = (grading / f"batch_{WEEK}.json").stat().st_mtime - 3600
    os.utime(old, (t, t))
    write_report(WEEK, grading)
    by = {r["student"]: r for r in csv.DictReader((grading / f"report_{WEEK}.csv").open())}
    assert by["mallory"]["status"] == "not graded" and by["mallory"]["day1_naive_loads"] == ""
    assert "earlier grading run" in by["mallory"]["notes"]


def test_a_plot_is_drawn_once_per_what_it_shows(tmp_path, monkeypatch):
    """A report written again (a re-grade) draws only plots whose data changed: the same scores give the same picture
    without matplotlib; other scores, another title or another exercise draw again."""
    import random

    from autograder import report

    monkeypatch.setenv("COURSE_CACHE_DIR", str(tmp_path / "cache"))
    drawn = []
    real = report._draw_histogram
    monkeypatch.setattr(report, "_draw_histogram", lambda *a: drawn.append(a) or real(*a))
    rng = random.Random()
    pts = [float(rng.randint(0, 5)) for _ in range(rng.randint(3, 30))]
    first = report.score_histogram(pts, 5.0, "day1: points")
    assert base64.b64decode(first).startswith(b"\x89PNG") and len(drawn) == 1
    assert report.score_histogram(list(pts), 5.0, "day1: points") == first and len(drawn) == 1
    other = [*pts, 0.0]
    assert report.score_histogram(other, 5.0, "day1: points") != first and len(drawn) == 2
    report.score_histogram(pts, 5.0, "day2: points")
    assert len(drawn) == 3
    ex = report.ExerciseInfo(key="day1.x", notebook="day1", name="x", metric="tbps", bar=2.0, peak=3.35)
    good = [rng.uniform(1, 3) for _ in range(6)]
    plot = report.throughput_plot(ex, good)
    assert report.throughput_plot(ex, list(good)) == plot
    assert report.throughput_plot(report.ExerciseInfo(key="day1.x", notebook="day1", name="x", metric="tbps",
                                                      bar=2.5, peak=3.35), good) != plot
