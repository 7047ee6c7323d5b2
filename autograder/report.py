"""The class report of one graded week: an HTML page with plots and a CSV, one row per student.

    python -m autograder.report week1 [--grading DIR]      # after `autograder grade week1`
    write_report("week1") -> build/grading/report_week1.html (+ report_week1.csv beside it)

It reads what grading left in the grading folder (default: autograder.release.grading_dir()):

    submitted/<student>/<week>/                 the roster: every student here gets a row, graded or not
    verdicts/<student>/<week>/<notebook>.json   the trusted verdicts (autograder.grading.NotebookGrade.as_dict)
    gradebook.db                                the class gradebook (nbgrader's): where it has the student, their
                                                points per part, per notebook and in total (a manual score given in
                                                the formgrader included), so the total is the sum of the columns
    grades_<week>.csv                           the gradebook export (write_grades_csv), if present (the total,
                                                without a gradebook.db)
    batch_<week>.json                           the batch record (autograder.record.update_batch_record): every
                                                run, and per student the newest run's entry (return code, notes,
                                                start time, which GPU lane or Slurm task graded them, CPU or GPU),
                                                each lane's ceilings, where the seed came from (never the seed)
    understanding_<week>.json                   the understanding checks' scores (autograder understanding import),
                                                if present: a column beside the total, with the weight given

The page (self-contained: CSS inline, plots inline as base64 PNG drawn with matplotlib's Agg canvas) has a summary,
per exercise a score histogram, a throughput distribution against the spec's bar and a leaderboard (correct
submissions only, fastest first), a table of flags, a table of every student (points per notebook linked to the
student's feedback page, feedback/<student>/<week>/<notebook>.html; each note once, with its count) and their points
per part (correctness / path / throughput of each exercise, a quiz as one). What it shows is chosen field by
field from the verdicts, never dumped: no hidden-test source, no secret seed, no traceback of the trusted code
(messages are passed through `_clean`, which cuts them).
"""

from __future__ import annotations

import argparse
import csv
import re
import statistics
import sys
import warnings
from pathlib import Path

from kernels.paths import write_whole

from .release import ROOT, grading_dir
from .report_data import (ExerciseInfo, Result, Student, _clean, _natural, _num, _read_json, _secrets, max_total,
                          status_of, understanding_of)
from .report_html import render_html
from .students import class_roster, mapped_note
from .spec import all_specs

STALE_SLACK_S = 60.0  # clock and file-system slack when telling an earlier run's verdicts


GRADES_COLUMNS = ["assignment", "duedate", "timestamp", "student_id", "last_name", "first_name", "email", "raw_score",
                  "late_submission_penalty", "score", "max_score"]


def write_grades_csv(path: Path, gradebook, assignments=(), students=()) -> Path:
    """grades_<week>.csv with the columns, rows and values of nbgrader's CsvExportPlugin (a student with no submission
    of an assignment: 0), written by csv.writer (a field is quoted where it needs it) and whole or not at all
    (kernels.paths.write_whole). nbgrader 0.9.6's own plugin joins the fields with "," unquoted: an id "smith,john"
    shifted every later column and the report read a student "smith". Called by the course's export plugin
    (autograder/nbgrader_config.py: GradesCsvExport, `nbgrader export` in `autograder grade`)."""
    from nbgrader.api import MissingEntry

    def make(tmp: Path) -> None:
        with tmp.open("w", newline="", encoding="utf-8") as f:
            w = csv.writer(f)
            w.writerow(GRADES_COLUMNS)
            for a in gradebook.assignments:
                if assignments and a.name not in assignments:
                    continue
                for st in gradebook.students:
                    if students and st.id not in students:
                        continue
                    try:
                        sub = gradebook.find_submission(a.name, st.id)
                    except MissingEntry:
                        got = ["", 0.0, 0.0, 0.0]
                    else:
                        penalty = sub.late_submission_penalty
                        got = [sub.timestamp, sub.score, penalty, max(0.0, sub.score - penalty)]
                    row = [a.name, a.duedate, got[0], st.id, st.last_name, st.first_name, st.email, *got[1:],
                           a.max_score]
                    w.writerow(["" if v is None else str(v) for v in row])

    return write_whole(path, make)


def _read_gradebook_csv(path: Path, week: str) -> dict[str, dict]:
    """The gradebook export (`write_grades_csv`), read by csv.DictReader: one row per student and assignment; this
    week's rows, by student id."""
    if not path.exists():
        return {}
    rows = {}
    with path.open(newline="", encoding="utf-8") as f:
        for row in csv.DictReader(f):
            if row.get("assignment", week) == week and row.get("student_id"):
                rows[row["student_id"]] = row
    return rows


def _read_gradebook_db(grading: Path, week: str) -> tuple[dict[str, dict], str | None]:
    """The class gradebook's figures of `week` (nbgrader's Gradebook API: what the formgrader shows and changes), per
    student with a submission there: {"notebooks": {stem: (points, max)}, "grades": {(stem, grade id): (points, max)},
    "penalty", "max_score"}. A grade's points are nbgrader's score: the manual score where one was given, else the
    autograder's. ({}, None) without a gradebook or without the week in it; ({}, why) where it cannot be read."""
    db = grading / "gradebook.db"
    if not db.exists():
        return {}, None

    from nbgrader.api import Gradebook, MissingEntry

    out = {}
    try:
        with warnings.catch_warnings(), Gradebook(f"sqlite:///{db}") as gb:
            warnings.simplefilter("ignore")  # sqlalchemy warns about nbgrader's models
            try:
                max_score = _num(gb.find_assignment(week).max_score)
            except MissingEntry:
                return {}, None
            for sub in gb.assignment_submissions(week):
                out[sub.student.id] = {
                    "notebooks": {nb.name: (_num(nb.score), _num(nb.max_score)) for nb in sub.notebooks},
                    "grades": {(nb.name, g.name): (_num(g.score), _num(g.max_score))
                               for nb in sub.notebooks for g in nb.grades},
                    "penalty": _num(sub.late_submission_penalty), "max_score": max_score}
    except Exception as exc:  # noqa: BLE001 - an unreadable gradebook is said on the page, not a lost report
        return {}, f"gradebook.db: unreadable ({type(exc).__name__}: {exc})"
    return out, None


def _batch_notes(entry: dict, secrets: list[str]) -> list[str]:
    """Notes the grading command left for a student (malformed notebooks, errors), under whatever key it used."""
    notes = []
    if entry.get("not_graded"):
        notes.append(_clean(entry["not_graded"], secrets))
    elif entry.get("attempts"):
        notes += [f"handed back once: not graded on {a.get('lane')}: {_clean(a.get('why'), secrets)}"
                  for a in entry["attempts"] if isinstance(a, dict)]
    if entry.get("later_failure"):
        notes.append(_clean(entry["later_failure"], secrets))
    for key in ("malformed", "notes", "note", "problems", "errors", "error", "message"):
        if key not in entry or entry[key] in (None, "", [], {}, False):
            continue
        val = entry[key]
        if val is True:
            notes.append(key.replace("_", " "))
        elif isinstance(val, dict):
            notes += [f"{key}: {k}: {_clean(v, secrets)}" for k, v in val.items()]
        elif isinstance(val, (list, tuple)):
            notes += [f"{key}: {_clean(v, secrets)}" for v in val]
        else:
            notes.append(f"{key}: {_clean(val, secrets)}")
    rc = entry.get("returncode")
    if rc not in (None, 0):
        why = ""
        for line in reversed(str(entry.get("log_tail") or "").splitlines()):
            if re.search(r"ERROR|Error\b|error:", line) and not re.match(r"\s", line):
                why = _clean(line, secrets)
                break
        notes.append(f"nbgrader autograde exited with {rc}" + (f": {why}" if why else ""))
    return notes


def _exercises(week: str, stems: set[str], verdicts: list[dict]) -> tuple[list[str], list[ExerciseInfo]]:
    """The week's notebooks and exercises: from the grader specs, plus whatever verdicts name that no spec does."""
    notebooks = set(stems)
    infos: dict[str, ExerciseInfo] = {}
    try:
        specs = [s for s in all_specs() if s.assignment == week]
    except Exception:  # noqa: BLE001 - a broken spec must not cost the report
        specs = []
    released = {p.name for d in ("weeks", "solutions") for p in (ROOT / d / week).glob("*.ipynb")}
    for s in specs:
        stem = Path(s.notebook).stem
        if s.notebook not in released and stem not in stems:
            continue  # a spec for a day not yet written
        notebooks.add(stem)
        for ex in s.exercises.values():
            infos[f"{stem}.{ex.name}"] = ExerciseInfo(
                key=f"{stem}.{ex.name}", notebook=stem, name=ex.name,
                grade_ids=tuple(p.grade_id for p in ex.parts.values()),
                max_points=sum(p.points for p in ex.parts.values()), metric=ex.metric,
                roofline=ex.roofline)
        if s.quiz:
            infos[f"{stem}.quiz"] = ExerciseInfo(
                key=f"{stem}.quiz", notebook=stem, name="quiz",
                grade_ids=tuple(q.grade_id for q in s.quiz.questions.values()),
                max_points=sum(q.points for q in s.quiz.questions.values()))
    for v in verdicts:
        stem = v["_notebook"]
        for name in v.get("facts") or {}:
            key = f"{stem}.{name}"
            if key not in infos:
                gids = tuple(g for g in (v.get("scores") or {}) if g.startswith(f"{name}_"))
                infos[key] = ExerciseInfo(key=key, notebook=stem, name=name, grade_ids=gids)
    order = sorted(notebooks, key=_natural)
    ex = sorted(infos.values(), key=lambda e: (order.index(e.notebook), e.name == "quiz", e.name))
    return order, ex


def _result(ex: ExerciseInfo, verdict: dict | None) -> Result:
    r = Result(max_points=ex.max_points or 0.0)
    if verdict is None:
        return r
    scores = verdict.get("scores") or {}
    mine = [scores[g] for g in ex.grade_ids if isinstance(scores.get(g), dict)]
    r.graded = True
    r.points = sum(_num(s.get("points")) for s in mine)
    if not ex.max_points:
        r.max_points = sum(_num(s.get("max_points")) for s in mine)
    facts = (verdict.get("facts") or {}).get(ex.name)
    if not isinstance(facts, dict):
        return r
    r.status = str(facts.get("status", ""))
    corr = facts.get("correctness") or {}
    if isinstance(corr, dict) and corr.get("graded"):
        r.correct = bool(corr.get("ok"))
    tp = facts.get("throughput") or {}
    if isinstance(tp, dict) and tp.get("graded"):
        st = tp.get("student") or {}
        r.value = _num(st.get("value"), None)
        r.output_ok = bool(st.get("output_ok", True))
        r.bar = _num(tp.get("bar"), None)
        if ex.roofline:
            r.roofline = ex.roofline.get(tp.get("gpu") or "", max(ex.roofline.values()))
    return r


def collect(week: str, grading: Path) -> tuple[dict, list[str], list[ExerciseInfo], list[Student]]:
    """Everything the report shows, read from the grading folder."""
    secrets = _secrets()
    students: dict[str, Student] = {}

    def get(name: str) -> Student:
        return students.setdefault(name, Student(name))

    folders, folder_notes = class_roster(grading / "submitted", week)
    for sid, folder in folders.items():  # ids decided once (students.student_id)
        get(sid).submitted = True
        if sid != folder:  # the folder's own name, shown beside the id it grades under
            get(sid).notes.append(mapped_note(folder, sid))
    batch_file = grading / f"batch_{week}.json"
    batch, err = _read_json(batch_file) if batch_file.exists() else ({}, None)
    batch = batch or {}
    # The newest verdict per student and notebook, whichever run wrote it. A verdict older than the start of the run
    # that last graded its student (batch_<week>.json's per-student "started_at") is left over from an earlier run
    # (its notebook was since removed or broke before the plugin ran): showing it would credit work not graded.
    # A record of one run, written before per-student times were kept: its start stands for every student.
    per = batch.get("per_student") if isinstance(batch.get("per_student"), dict) else {}
    started = None
    if _num(batch.get("wall_s"), None) is not None and not batch.get("runs"):
        started = batch_file.stat().st_mtime - _num(batch["wall_s"]) - STALE_SLACK_S
    verdicts = []
    for f in sorted((grading / "verdicts").glob(f"*/{week}/*.json")):
        name = f.parent.parent.name
        st = get(name)
        entry = per.get(name) if isinstance(per.get(name), dict) else {}
        since = _num(entry.get("started_at"), None)
        since = since - STALE_SLACK_S if since is not None else started
        if since is not None and f.stat().st_mtime < since:
            st.notes.append(f"{f.stem}: verdict left over from an earlier grading run, ignored")
            continue
        data, err_v = _read_json(f)
        if data is None:
            st.notes.append(_clean(err_v, secrets))
            continue
        data["_notebook"] = f.stem
        st.verdicts[f.stem] = data
        verdicts.append(data)
    gradebook = _read_gradebook_csv(grading / f"grades_{week}.csv", week)
    for name, row in gradebook.items():  # a gradebook student without a submission gets a row too
        get(name).gradebook = row
    book, book_err = _read_gradebook_db(grading, week)  # points and totals, manual scores included
    for name, figures in book.items():
        get(name).book = figures
    for name, entry in (batch.get("per_student") or {}).items():
        if isinstance(entry, dict):
            s = get(name)
            s.batch = entry
            s.notes += _batch_notes(entry, secrets)

    notebooks, exercises = _exercises(week, {v["_notebook"] for v in verdicts}, verdicts)
    for s in students.values():
        for ex in exercises:
            s.results[ex.key] = _result(ex, s.verdicts.get(ex.notebook))
    for ex in exercises:  # the bar the instructor reads: the one the batch applied (each lane's baseline x fraction)
        bars = [s.results[ex.key].bar for s in students.values() if s.results[ex.key].bar]
        ex.bar = statistics.median(bars) if bars else None
        peaks = [s.results[ex.key].roofline for s in students.values() if s.results[ex.key].value is not None]
        ex.peak = max(peaks) if peaks and all(peaks) else None
    for s in students.values():  # each student's notes (this loop had merged into the one above: the last only)
        if not s.submitted:
            s.notes.insert(0, "no submission this week")
        missing = [nb for nb in notebooks if nb not in s.verdicts and nb not in s.malformed]
        if s.submitted and missing:
            s.notes.append("no verdict for " + ", ".join(missing) + " (notebook missing or malformed, or its "
                           "grading failed)")
        for nb, v in sorted(s.verdicts.items()):
            s.notes += [f"{nb}: {_clean(p, secrets)}" for p in v.get("problems") or []]
    roster = sorted(students.values(), key=lambda s: _natural(s.name))
    lanes = batch.get("lanes") if isinstance(batch.get("lanes"), dict) else {}
    meta = {"week": week, "grading": str(grading), "batch_wall_s": _num(batch.get("wall_s"), None),
            # a folder of the week that is no student's (hidden): named here, so no folder goes without a word
            "left_out": [n for n in folder_notes if n not in {mapped_note(f, i) for i, f in folders.items()}],
            "batch_error": err, "has_gradebook": bool(gradebook), "has_book": bool(book), "book_error": book_err,
            "secrets": secrets, "lanes": lanes, "understanding": _understanding(grading, week),
            "where": batch.get("where"), "seed_source": batch.get("seed_source")}
    return meta, notebooks, exercises, roster


def _understanding(grading: Path, week: str) -> dict | None:
    """<grading>/understanding_<week>.json (`autograder understanding import`: each student's score on their
    understanding check and the weight the instructor gave it), when present and readable; else None."""
    f = grading / f"understanding_{week}.json"
    data, _ = _read_json(f) if f.is_file() else (None, None)
    return data if data is not None and isinstance(data.get("students"), dict) else None


def write_csv(path: Path, meta: dict, notebooks: list[str], exercises: list[ExerciseInfo],
              roster: list[Student]) -> None:
    """One row per student: status, total, (the understanding check's score, max and weight, where imported),
    points per notebook (empty: no verdict), flags, wall time, notes."""
    secrets = meta["secrets"]
    top = max_total(exercises, roster)
    und = ["understanding", "understanding_max", "understanding_weight"] if meta.get("understanding") else []

    def make(tmp: Path) -> None:
        with tmp.open("w", newline="", encoding="utf-8", errors="backslashreplace") as f:
            w = csv.writer(f)
            w.writerow(["student", "status", "total", "max_total", *und, *notebooks, "flags", "wall_s", "graded_on",
                        "notes"])
            for s in roster:
                row = [s.name, status_of(s, notebooks), f"{s.total:g}", f"{top:g}"]
                if und:  # empty where no answer sheet of the student was imported
                    u = understanding_of(meta, s.name)
                    row += [f"{u[0]:g}", f"{u[1]:g}"] if u else ["", ""]
                    row.append(f"{_num(meta['understanding'].get('weight')):g}")
                row += ["" if (p := s.notebook_points(nb)) is None or nb not in s.verdicts and nb in s.malformed
                        else f"{p[0]:g}" for nb in notebooks]  # the total's source (Student.notebook_points)
                row += [len(s.flags), "" if s.wall_s is None else f"{s.wall_s:.1f}", s.lane,
                        " | ".join(_clean(n, secrets) for n in s.notes)]
                w.writerow(row)

    write_whole(path, make)  # whole or not at all: a crash half-way keeps the previous CSV


def write_report(week: str, grading: Path | None = None) -> Path:
    """Write <grading>/report_<week>.html and report_<week>.csv, each whole or not at all (kernels.paths.write_whole:
    a crash or Ctrl-C keeps the previous file, never an empty or partial one); return the HTML's path."""
    grading = Path(grading) if grading is not None else grading_dir()
    meta, notebooks, exercises, roster = collect(week, grading)
    out = grading / f"report_{week}.html"
    out.parent.mkdir(parents=True, exist_ok=True)
    write_whole(out, render_html(meta, notebooks, exercises, roster))
    write_csv(grading / f"report_{week}.csv", meta, notebooks, exercises, roster)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m autograder.report", description=__doc__.split("\n\n")[0])
    ap.add_argument("week", help="the assignment, e.g. week1")
    ap.add_argument("--grading", type=Path, default=None,
                    help="the grading folder (default: $COURSE_GRADING_DIR or build/grading)")
    args = ap.parse_args(argv)
    grading = args.grading if args.grading is not None else grading_dir()
    if not grading.is_dir():
        print(f"no grading folder at {grading}", file=sys.stderr)
        return 1
    out = write_report(args.week, grading)
    print(f"class report: {out}\ngradebook CSV: {out.with_suffix('.csv')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
