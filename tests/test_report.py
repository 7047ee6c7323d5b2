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

    from autograder import report_plots
    from autograder.report_data import ExerciseInfo

    monkeypatch.setenv("COURSE_CACHE_DIR", str(tmp_path / "cache"))
    drawn = []
    real = report_plots._draw_histogram
    monkeypatch.setattr(report_plots, "_draw_histogram", lambda *a: drawn.append(a) or real(*a))
    rng = random.Random()
    pts = [float(rng.randint(0, 5)) for _ in range(rng.randint(3, 30))]
    first = report_plots.score_histogram(pts, 5.0, "day1: points")
    assert base64.b64decode(first).startswith(b"\x89PNG") and len(drawn) == 1
    assert report_plots.score_histogram(list(pts), 5.0, "day1: points") == first and len(drawn) == 1
    other = [*pts, 0.0]
    assert report_plots.score_histogram(other, 5.0, "day1: points") != first and len(drawn) == 2
    report_plots.score_histogram(pts, 5.0, "day2: points")
    assert len(drawn) == 3
    ex = ExerciseInfo(key="day1.x", notebook="day1", name="x", metric="tbps", bar=2.0, peak=3.35)
    good = [rng.uniform(1, 3) for _ in range(6)]
    plot = report_plots.throughput_plot(ex, good)
    assert report_plots.throughput_plot(ex, list(good)) == plot
    assert report_plots.throughput_plot(ExerciseInfo(key="day1.x", notebook="day1", name="x", metric="tbps",
                                                     bar=2.5, peak=3.35), good) != plot


# ------------------------------------------------------------------------------- acting on the report (issue item 8)
def _student_row(html: str, name: str) -> str:
    """The row of `name` in the Students table (the first table after id='students')."""
    table = _section(html, "id='students'", "</table>")
    return re.search(rf"<tr><td>{re.escape(html_lib.escape(name))}</td>.*?</tr>", table, re.S).group(0)


def _numbers(cell: str) -> tuple[float, float]:
    """'12 / 17' (inside a link or not) -> (12.0, 17.0)."""
    a, b = re.search(r"([\d.]+) / ([\d.]+)", cell).groups()
    return float(a), float(b)


def test_each_note_of_a_student_once_with_its_count(graded):
    """A note made several times is shown once with "×n"; every student gets their own notes (they once went to the
    last student only, once per exercise: "no submission this week" ten times)."""
    grading, _ = graded
    f = grading / "verdicts" / "bob" / WEEK / "day1_naive_loads.json"
    v = json.loads(f.read_text())
    v["problems"] = ["your kernel printed 3 lines"] * 3
    f.write_text(json.dumps(v))
    with (grading / f"grades_{WEEK}.csv").open("a") as out:  # in the gradebook, never handed in
        out.write(f"{WEEK},,,zoe,,,,0.0,0.0,0.0,1\n")
    html = write_report(WEEK, grading).read_text()
    zoe, bob = _student_row(html, "zoe"), _student_row(html, "bob")
    assert zoe.count("no submission this week") == 1 and "×" not in zoe, zoe
    assert bob.count("your kernel printed 3 lines") == 1 and "day1_naive_loads: your kernel printed 3 lines ×3" in bob
    for name in ("alice", "bob", "mallory", "zoe"):
        notes = _student_row(html, name).rsplit("<td>", 1)[1].split("</td>")[0].split("<br>")
        assert len(notes) == len(set(notes)), (name, notes)


ODD = "Zoë O'Brien, #1 \"x\" & y"  # '#' and '&' in a link; (a '?' or '%' maps to a safe id: autograder.students)


def test_each_students_points_link_to_their_feedback_pages(graded):
    """Relative links from the report to feedback/<student>/<week>/<notebook>.html, percent-encoded so that any id
    works; only to pages that were written."""
    from urllib.parse import unquote, urlsplit

    grading, _ = graded
    (grading / "submitted" / ODD / WEEK).mkdir(parents=True)
    pages = {}
    for student in ("alice", ODD):
        p = grading / "feedback" / student / WEEK / "day1_naive_loads.html"
        p.parent.mkdir(parents=True)
        p.write_text(f"<h1>{html_lib.escape(student)}</h1>")
        pages[student] = p
    out = write_report(WEEK, grading)
    html = out.read_text()
    for student, page in pages.items():
        row = _student_row(html, student)
        hrefs = [html_lib.unescape(h) for h in re.findall(r'<a href="([^"]+)">', row)]
        assert len(hrefs) == 1, (student, row)
        split = urlsplit(hrefs[0])
        assert not split.scheme and not split.query and not split.fragment, hrefs  # '#' and '?' are encoded
        assert (out.parent / unquote(split.path)).resolve() == page.resolve(), hrefs
    assert "<a href" not in _student_row(html, "bob")  # no page written: no dead link


def _class_gradebook(grading: Path) -> None:
    """The class gradebook of the synthetic cohort, as autograding leaves it: nbgrader's assignment of the week
    (batch.class_assignment), each student's grades the points of their verdicts (mallory's: none, malformed)."""
    import warnings

    from nbgrader.api import Gradebook

    from autograder import batch

    batch.class_assignment(WEEK, grading)
    with warnings.catch_warnings(), Gradebook(f"sqlite:///{grading / 'gradebook.db'}") as gb:
        warnings.simplefilter("ignore")
        for student in ("alice", "bob", "mallory"):
            gb.update_or_create_student(student)
            sub = gb.add_submission(WEEK, student)
            for nb in sub.notebooks:
                f = grading / "verdicts" / student / WEEK / f"{nb.name}.json"
                scores = json.loads(f.read_text())["scores"] if f.exists() else {}
                for g in nb.grades:
                    g.auto_score = scores[g.name]["points"] if g.name in scores else 0.0
        gb.db.commit()


@pytest.mark.slow
def test_after_a_manual_score_the_total_is_the_sum_of_the_columns(graded):
    """An instructor gives bob the path points of day 1 in the formgrader (a manual score in the gradebook) and
    exports the week's CSV again: his total, his day-1 column and his day-1 path column all show it, and the total is
    the sum of the notebook columns (it was the export's total beside the verdicts' columns: 31 against 28)."""
    import warnings

    from nbgrader.api import Gradebook

    from autograder.record import export_week

    grading, expected = graded
    _class_gradebook(grading)
    with warnings.catch_warnings(), Gradebook(f"sqlite:///{grading / 'gradebook.db'}") as gb:
        warnings.simplefilter("ignore")
        grade = gb.find_grade("row_bias_path", "day1_naive_loads", WEEK, "bob")
        assert grade.auto_score == 0.0 and grade.max_score == 2.0  # bob's path was elsewhere
        grade.manual_score = 2.0
        gb.db.commit()
    export_week(WEEK, grading)
    html = write_report(WEEK, grading).read_text()
    notebooks = [Path(s.notebook).stem for s in sorted(_specs(), key=lambda s: s.notebook)]
    for name in ("alice", "bob", "mallory"):
        cells = re.findall(r"<td(?: class=\"num\")?>(.*?)</td>", _student_row(html, name))
        total = _numbers(cells[2])[0]
        columns = [_numbers(c)[0] if re.search(r"\d / \d", c) else 0.0 for c in cells[3:3 + len(notebooks)]]
        assert total == pytest.approx(sum(columns)), (name, total, columns)
    for row in csv.DictReader((grading / f"report_{WEEK}.csv").open()):  # the CSV beside the page: the same sums
        assert float(row["total"]) == pytest.approx(sum(float(row[nb] or 0) for nb in notebooks)), row
    bob = re.findall(r"<td(?: class=\"num\")?>(.*?)</td>", _student_row(html, "bob"))
    assert _numbers(bob[2])[0] == pytest.approx(expected["totals"]["bob"] + 2.0)
    day1 = notebooks.index("day1_naive_loads")
    verdict = json.loads((grading / "verdicts" / "bob" / WEEK / "day1_naive_loads.json").read_text())["points"]
    assert _numbers(bob[3 + day1])[0] == pytest.approx(verdict + 2.0)
    # the part table: bob's day-1 path, 2 (manual); alice's, 2 (auto); columns correctness / path / throughput
    parts = _section(html, "id='parts'", "</table>")
    assert ">day1_naive_loads · row_bias</th>" in parts
    assert re.search(r"<th>correctness</th><th>path</th><th>throughput</th>", parts)
    row = re.search(r"<tr><td>bob</td>(.*?)</tr>", parts, re.S).group(1)
    first = re.findall(r"<td class='num[^']*' title='([\d.]+) of ([\d.]+)'>", row)[:3]  # day 1's exercise comes first
    assert [tuple(map(float, t)) for t in first] == [(3.0, 3.0), (2.0, 2.0), (0.0, 2.0)], first


def test_the_understanding_checks_show_beside_the_total_once_imported(graded, tmp_path):
    """`autograder understanding import` writes understanding_<week>.json; the report then shows each student's score
    on their check (and its weight) beside the kernel's points, in the page and the CSV; without it, no column."""
    from autograder.understanding import import_answers

    grading, expected = graded
    html = write_report(WEEK, grading).read_text()
    assert "understanding" not in _section(html, "id='students'", "<h2")
    key, answers = tmp_path / "key.csv", tmp_path / "answers.csv"
    key.write_text("student,question_id,type,key,tolerance,points,slug,mutant,line\n"
                   "alice,tma.a#1,multichoice,b,,1,tma,a#1,3\nalice,tma.a#1.pct,numerical,40,5,1,tma,a#1,3\n"
                   "bob,tma.c#1,multichoice,d,,1,tma,c#1,8\n")
    answers.write_text("alice,tma.a#1,B\nalice,tma.a#1.pct,52%\nbob,tma.c#1,d\n")
    import_answers(WEEK, answers, key, 0.25, grading)
    html = write_report(WEEK, grading).read_text()
    assert "<th>understanding (weight 0.25)</th>" in _section(html, "id='students'", "<h2")
    assert re.search(r"<td>alice</td><td><span class='ok'>graded</span></td><td class=\"num\">[^<]*</td>"
                     r"<td class=\"num\">1 / 2</td>", _student_row(html, "alice")), _student_row(html, "alice")
    assert "<td class=\"num\">1 / 1</td>" in _student_row(html, "bob")
    assert "<td class=\"num\">—</td>" in _student_row(html, "mallory")
    rows = {r["student"]: r for r in csv.DictReader((grading / f"report_{WEEK}.csv").open())}
    assert (rows["alice"]["understanding"], rows["alice"]["understanding_max"]) == ("1", "2")
    assert rows["mallory"]["understanding"] == "" and rows["bob"]["understanding_weight"] == "0.25"
    assert float(rows["alice"]["total"]) == pytest.approx(expected["totals"]["alice"])  # the kernel's points apart
