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
import base64
import csv
import html
import io
import json
import math
import os
import re
import statistics
import sys
import time
import urllib.parse
from collections import Counter
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from kernels.paths import write_whole

from .release import ROOT, grading_dir
from .students import class_roster, mapped_note

UNITS = {"tbps": "TB/s", "tflops": "TFLOPS"}
MAX_MESSAGE = 300
STALE_SLACK_S = 60.0  # clock and file-system slack when telling an earlier run's verdicts


# --------------------------------------------------------------------------------------------------- what we read
@dataclass
class ExerciseInfo:
    """One graded exercise of the week, as the spec describes it (or as the verdicts show it, without a spec)."""
    key: str  # "<notebook stem>.<exercise>"
    notebook: str  # notebook stem, e.g. day1_naive_loads
    name: str  # exercise name, e.g. row_bias
    grade_ids: tuple[str, ...] = ()
    max_points: float | None = None
    metric: str | None = None
    bar: float | None = None  # the median of the bars the batch applied (a fraction of each run's baseline)
    roofline: dict | None = None  # GPU kind -> datasheet peak (the spec's)
    peak: float | None = None  # the datasheet peak of the GPUs that graded the batch (the highest, if several)

    @property
    def unit(self) -> str:
        return UNITS.get(self.metric or "", self.metric or "")


@dataclass
class Result:
    """One student's figures for one exercise."""
    points: float = 0.0
    max_points: float = 0.0
    graded: bool = False  # a verdict exists
    status: str = ""
    correct: bool | None = None  # None: correctness not graded (no GPU)
    value: float | None = None  # measured throughput, in the exercise's metric
    output_ok: bool = True
    bar: float | None = None  # the bar this student was graded against (its run's baseline x the GPU's fraction)
    roofline: float | None = None  # the datasheet peak of the GPU that timed it


@dataclass
class Student:
    name: str
    submitted: bool = False
    verdicts: dict[str, dict] = field(default_factory=dict)  # notebook stem -> verdict
    gradebook: dict | None = None  # the row of nbgrader's export
    book: dict | None = None  # the class gradebook's figures (_read_gradebook_db), where it has a submission
    batch: dict | None = None  # the batch's entry for this student
    results: dict[str, Result] = field(default_factory=dict)  # exercise key -> result
    notes: list[str] = field(default_factory=list)

    @property
    def verdict_points(self) -> float:
        return sum(_num(v.get("points")) for v in self.verdicts.values())

    @property
    def total(self) -> float:
        """The gradebook's total (nbgrader's: the notebooks' points less a late penalty), else its export's, else the
        verdicts'. With a gradebook it is made of the very figures notebook_points shows, manual scores included."""
        if self.book is not None:
            return max(0.0, sum(p for p, _ in self.book["notebooks"].values()) - self.penalty)
        if self.gradebook is not None and _num(self.gradebook.get("score"), None) is not None:
            return _num(self.gradebook.get("score"))
        return self.verdict_points

    @property
    def penalty(self) -> float:
        """The late-submission penalty nbgrader took off the total (0 without a gradebook)."""
        return _num((self.book or {}).get("penalty"))

    def notebook_points(self, nb: str) -> tuple[float, float] | None:
        """(points, max) of one notebook: the gradebook's where it has the student, else the verdict's, else None."""
        if self.book is not None:
            return self.book["notebooks"].get(nb)
        v = self.verdicts.get(nb)
        return (_num(v.get("points")), _num(v.get("max_points"))) if v is not None else None

    def exercise_points(self, ex: "ExerciseInfo") -> tuple[float, float] | None:
        """(points, max) of one exercise: the sum of its parts' (part_points), None where no part has a figure."""
        got = [p for g in ex.grade_ids if (p := self.part_points(ex.notebook, g)) is not None]
        return (sum(p for p, _ in got), sum(m for _, m in got)) if got else None

    def part_points(self, nb: str, grade_id: str) -> tuple[float, float] | None:
        """(points, max) of one graded part (a grade cell), from the same source as notebook_points."""
        if self.book is not None:
            return self.book["grades"].get((nb, grade_id))
        sc = ((self.verdicts.get(nb) or {}).get("scores") or {}).get(grade_id)
        return (_num(sc.get("points")), _num(sc.get("max_points"))) if isinstance(sc, dict) else None

    @property
    def flags(self) -> list[tuple[str, str]]:
        return [(nb, str(f)) for nb, v in sorted(self.verdicts.items()) for f in v.get("flags") or []]

    @property
    def malformed(self) -> set[str]:
        """Stems of the notebooks the grading command set aside as malformed (its batch entry's "malformed": a
        list of "<name>.ipynb: why" or a {name: why} mapping)."""
        m = (self.batch or {}).get("malformed") or []
        names = m.keys() if isinstance(m, dict) else [str(x).split(":", 1)[0] for x in m if isinstance(x, str)]
        return {Path(n.strip()).stem for n in names}

    @property
    def wall_s(self) -> float | None:
        return _num((self.batch or {}).get("wall_s"), None)

    @property
    def lane(self) -> str:
        """Where the student was graded: a GPU lane of `autograder grade` ("GPU 1"), a Slurm task, or ""."""
        return str((self.batch or {}).get("lane") or "")

    @property
    def retry(self) -> bool:
        """The batch could not grade this student (its grading crashed twice, or its Slurm task did not finish)."""
        return bool((self.batch or {}).get("not_graded")) and not (self.batch or {}).get("permanent")

    @property
    def on_cpu(self) -> bool:
        """Graded on CPU (no GPU in the lane that graded them): no correctness on the GPU, no throughput."""
        return bool((self.batch or {}).get("cpu")) and not (self.batch or {}).get("not_graded")


def _num(x, default: float | None = 0.0) -> float | None:
    try:
        v = float(x)
    except (TypeError, ValueError):
        return default
    return v if math.isfinite(v) else default


def _natural(s: str):
    return [int(t) if t.isdigit() else t.lower() for t in re.split(r"(\d+)", s)]


def _read_json(path: Path) -> tuple[dict | None, str | None]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        return None, f"{path.name}: unreadable ({type(exc).__name__})"
    if not isinstance(data, dict):
        return None, f"{path.name}: not a verdict object"
    return data, None


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
    import warnings

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


def _secrets() -> list[str]:
    """The grading secret, if this process can see it: scrubbed from every message the report shows."""
    out = []
    if os.environ.get("COURSE_SECRET_SEED"):
        out.append(os.environ["COURSE_SECRET_SEED"].strip())
    f = os.environ.get("COURSE_SECRET_SEED_FILE")
    if f:
        try:
            out.append(Path(f).expanduser().read_text().strip())
        except OSError:
            pass
    return [s for s in out if s]


def _clean(text, secrets: list[str] = ()) -> str:
    """One message fit for the report: no traceback, no hidden-test block, no secret, one short paragraph."""
    text = str(text or "")
    text = re.sub(r"#+\s*BEGIN HIDDEN TESTS.*?(#+\s*END HIDDEN TESTS|$)", "[hidden tests removed]", text, flags=re.S)
    text = text.replace("HIDDEN TESTS", "hidden tests")
    kept = []
    in_tb = False
    for line in text.splitlines():
        if line.startswith("Traceback (most recent call last)") or re.match(r"\s*File \"", line):
            in_tb = True
            continue
        if in_tb:
            # a traceback ends with an unindented "Type: message" line: keep that line only
            if line and not line[0].isspace():
                in_tb = False
                kept.append(line)
            continue
        kept.append(line)
    text = " ".join(s.strip() for s in kept if s.strip())
    text = text.replace("Traceback", "traceback")
    for s in secrets:
        text = text.replace(s, "[secret]")
    return text if len(text) <= MAX_MESSAGE else text[:MAX_MESSAGE - 3] + "..."


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
    from .spec import all_specs

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


def understanding_of(meta: dict, student: str) -> tuple[float, float] | None:
    """(score, max) of a student's understanding check, None where none was imported for them."""
    got = ((meta.get("understanding") or {}).get("students") or {}).get(student)
    return (_num(got.get("score")), _num(got.get("max"))) if isinstance(got, dict) else None


def status_of(s: Student, notebooks: list[str]) -> str:
    if not s.submitted:
        return "no submission"
    if (s.batch or {}).get("queued"):
        return "queued (Slurm)"
    if s.retry:
        return "not graded, retry"
    if (s.batch or {}).get("not_graded"):
        return "not graded"
    rc = (s.batch or {}).get("returncode")
    if not s.verdicts:
        return "not graded"
    if rc not in (None, 0) or any(nb not in s.verdicts for nb in notebooks):
        return "partly graded"
    return "graded"


def max_total(exercises: list[ExerciseInfo], roster: list[Student]) -> float:
    """The week's maximum: the gradebook's, else the specs', else the verdicts'."""
    for s in roster:
        if s.book and s.book["max_score"]:
            return s.book["max_score"]
        if s.gradebook and _num(s.gradebook.get("max_score"), None):
            return _num(s.gradebook["max_score"])
    m = sum(e.max_points or 0 for e in exercises)
    if m:
        return m
    return max((sum(_num(v.get("max_points")) for v in s.verdicts.values()) for s in roster), default=0.0)


def leaderboard(ex: ExerciseInfo, roster: list[Student]) -> list[tuple[Student, Result]]:
    """Correct submissions with a measured throughput, fastest first (impossible or stale figures left out)."""
    rows = []
    for s in roster:
        r = s.results.get(ex.key)
        if r is None or r.value is None or r.correct is not True or not r.output_ok:
            continue
        if r.roofline and r.value > r.roofline:
            continue
        rows.append((s, r))
    return sorted(rows, key=lambda sr: (-sr[1].value, _natural(sr[0].name)))


# -------------------------------------------------------------------------------------------------------- plots
def _png(fig) -> str:
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(fig)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100)
    return base64.b64encode(buf.getvalue()).decode("ascii")


def _mpl_at_least(*version: int) -> bool:
    import matplotlib

    have = tuple(int(x) for x in re.findall(r"\d+", matplotlib.__version__)[:len(version)])
    return have >= version


def _figure():
    from matplotlib.figure import Figure

    fig = Figure(figsize=(5.2, 2.8), layout="constrained")
    return fig, fig.add_subplot()


def _drawn_once(draw, *inputs) -> str:
    """draw(*inputs) (a base64 PNG), kept under $COURSE_CACHE_DIR/plots by what it is drawn from: the inputs, this
    file's text (the drawing code) and matplotlib's version. A class graded again (one student re-graded, a Slurm
    collect after a resubmit) draws only the plots whose data changed; matplotlib takes about 0.1 s a plot."""
    import hashlib

    import matplotlib

    from kernels.paths import cache_dir, made_once

    key = hashlib.sha256("\0".join([draw.__name__, repr(inputs), matplotlib.__version__,
                                     _drawing_code()]).encode()).hexdigest()[:24]
    return made_once(cache_dir("plots") / f"{key}.b64", lambda tmp: tmp.write_text(draw(*inputs))).read_text()


@lru_cache(maxsize=1)
def _drawing_code() -> str:
    return Path(__file__).read_text()


def score_histogram(points: list[float], max_points: float, title: str) -> str:
    return _drawn_once(_draw_histogram, list(points), max_points, title)


def throughput_plot(ex: ExerciseInfo, good: list[float], bad: list[float] = ()) -> str:
    """One dot per timed submission (jittered): the leaderboard's in green, impossible or stale figures as red
    crosses; the spec's bar and the roofline drawn where known."""
    return _drawn_once(_draw_throughput, ex, list(good), list(bad))


def _draw_histogram(points: list[float], max_points: float, title: str) -> str:
    fig, ax = _figure()
    hi = max([max_points, *points, 1.0])
    step = 1.0 if hi <= 20 else hi / 20
    edges = [i * step - step / 2 for i in range(int(math.ceil(hi / step)) + 2)]
    ax.hist(points, bins=edges, color="#4c72b0", edgecolor="white")
    ax.set_xlim(-step, hi + step)
    ax.set_xlabel(f"points (of {max_points:g})")
    ax.set_ylabel("students")
    ax.yaxis.get_major_locator().set_params(integer=True)
    ax.set_title(title, fontsize=10)
    return _png(fig)


def _draw_throughput(ex: ExerciseInfo, good: list[float], bad: list[float]) -> str:
    fig, ax = _figure()
    jitter = lambda n: [(i % 7 - 3) * 0.08 for i in range(n)]  # noqa: E731
    if len(good) >= 5:  # a box says something from five figures on
        horizontal = {"orientation": "horizontal"} if _mpl_at_least(3, 10) else {"vert": False}
        ax.boxplot(good, positions=[0], widths=0.7, showfliers=False, zorder=2, **horizontal)
    if good:
        ax.scatter(good, jitter(len(good)), s=28, color="#55a868", zorder=3, label="correct")
    if bad:
        ax.scatter(bad, jitter(len(bad)), s=40, marker="x", color="#c44e52", zorder=3, label="flagged")
    known = list(good) + list(bad) + ([ex.bar] if ex.bar else [])
    lo, hi = min(known), max(known)
    if ex.bar:
        ax.axvline(ex.bar, color="#c44e52", linestyle="--", label=f"bar {ex.bar:.4g} {ex.unit}")
    roof = ex.peak
    if roof and roof < 1.6 * hi:
        ax.axvline(roof, color="#555555", linestyle=":", label=f"roofline {roof:g}")
        hi = max(hi, roof)
    pad = 0.08 * (hi - lo) if hi > lo else 0.1 * (hi or 1)
    ax.set_xlim(max(0.0, lo - pad), hi + pad)
    ax.set_ylim(-0.6, 0.6)
    ax.set_yticks([])
    ax.set_xlabel(f"measured throughput ({ex.unit})" if ex.unit else "measured throughput")
    ax.set_title(f"{ex.name}: throughput of {len(good) + len(bad)} timed submission(s)", fontsize=10)
    ax.legend(loc="upper left", fontsize=8, frameon=False)
    return _png(fig)


# --------------------------------------------------------------------------------------------------------- HTML
CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif;margin:2em auto;max-width:72em;
     padding:0 1em;color:#222}
h1{margin-bottom:.2em} h2{border-bottom:1px solid #ccc;padding-bottom:.2em;margin-top:1.6em}
table{border-collapse:collapse;margin:.6em 0 1.2em 0;font-size:.92em}
th,td{border:1px solid #ddd;padding:.25em .6em;text-align:left;vertical-align:top}
th{background:#f3f3f3} td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
.plots{display:flex;flex-wrap:wrap;gap:1em} .plots img{border:1px solid #eee}
.muted{color:#777} .bad{color:#b00020} .ok{color:#1b7f3b} .flag{color:#b00020;font-family:monospace}
.wide{overflow-x:auto;max-width:100%} .wide td:last-child{min-width:18em;max-width:40em;overflow-wrap:anywhere}
.banner{background:#fff3cd;border:1px solid #e0c36a;padding:.6em 1em}
dl.summary{display:grid;grid-template-columns:max-content auto;gap:.2em 1.2em} dl.summary dt{font-weight:600}
"""


def _e(x) -> str:
    return html.escape(str(x), quote=True)


def _fmt(x: float | None, digits: int = 3) -> str:
    return "—" if x is None else f"{x:.{digits}g}"


def _img(b64: str, alt: str) -> str:
    return f'<img alt="{_e(alt)}" src="data:image/png;base64,{b64}">'


def _table(head: list[str], rows: list[list[str]], num: set[int] = frozenset()) -> str:
    out = ["<table><thead><tr>" + "".join(f"<th>{_e(h)}</th>" for h in head) + "</tr></thead><tbody>"]
    for r in rows:
        out.append("<tr>" + "".join(f'<td class="num">{c}</td>' if i in num else f"<td>{c}</td>"
                                    for i, c in enumerate(r)) + "</tr>")
    out.append("</tbody></table>")
    return "\n".join(out)


def render_html(meta: dict, notebooks: list[str], exercises: list[ExerciseInfo], roster: list[Student]) -> str:
    week = meta["week"]
    secrets = meta["secrets"]
    top = max_total(exercises, roster)
    totals = [s.total for s in roster if s.submitted]
    source = ("the class gradebook (manual scores given in the formgrader included)" if meta.get("has_book")
              else "nbgrader's gradebook export where it has the student, else the trusted verdicts"
              if meta["has_gradebook"] else "the trusted verdicts")
    parts = [f"<!doctype html>\n<html lang='en'><head><meta charset='utf-8'>"
             f"<title>Class report — {_e(week)}</title><style>{CSS}</style></head><body>",
             f"<h1>Class report — {_e(week)}</h1>",
             f"<p class='muted'>Generated {_e(time.strftime('%Y-%m-%d %H:%M'))} from the grading folder's verdicts"
             f"{', gradebook' if meta.get('has_book') or meta['has_gradebook'] else ''} and batch record. Points "
             f"and totals are {_e(source)}; a student's points link to their feedback pages.</p>"]

    cpu = [s.name for s in roster if s.on_cpu]
    if cpu:
        parts.append(_cpu_banner_html(cpu, roster))

    # --- summary
    parts += _summary_html(meta, notebooks, roster, totals, top)

    # --- per exercise
    parts.append("<h2 id='exercises'>Exercises</h2>")
    for ex in exercises:
        parts += _exercise_html(ex, roster)

    # --- flags
    parts.append("<h2 id='flags'>Flags</h2>")
    parts.append(_flags_html(roster, secrets))

    # --- every student
    parts.append("<h2 id='students'>Students</h2>")
    parts.append(_students_html(meta, notebooks, roster, top))
    parts.append("<h2 id='parts'>Points by part</h2>")
    parts.append(_parts_html(meta, exercises, roster))
    parts.append("</body></html>\n")
    return "\n".join(parts)


def _cpu_banner_html(cpu: list[str], roster: list[Student]) -> str:
    """The warning that some students were graded without a GPU, so their totals are not comparable; what CPU
    grading awards in the words of autograder.score.CPU_GRADING."""
    from .score import CPU_GRADING

    return ("<p class='banner'><strong>Graded on CPU</strong>: "
            f"{len(cpu)} of {sum(s.submitted for s in roster)} students ({_e(', '.join(cpu[:20]))}"
            f"{', ...' if len(cpu) > 20 else ''}) were graded without a GPU (<code>--gpus none</code>). "
            f"{_e(CPU_GRADING)}. Their totals are not comparable with a GPU grading: grade them again on a "
            "Hopper GPU for the real score.</p>")


def _summary_html(meta: dict, notebooks: list[str], roster: list[Student], totals: list[float],
                  top: float) -> list[str]:
    """The summary section: the figures of the batch, the histogram of totals (if any), the lanes (if recorded)."""
    week = meta["week"]
    secrets = meta["secrets"]
    wall = meta["batch_wall_s"]
    n_flags = sum(len(s.flags) for s in roster)
    mean = statistics.fmean(totals) if totals else None
    median = statistics.median(totals) if totals else None
    status = [status_of(s, notebooks) for s in roster]
    counts = ", ".join(f"{status.count(k)} {k}" for k in ("graded", "partly graded", "not graded",
                                                          "not graded, retry", "queued (Slurm)", "no submission")
                       if status.count(k))
    summary = [("students", f"{sum(s.submitted for s in roster)} submitted ({counts})"),
               ("notebooks", ", ".join(notebooks) or "—"),
               ("mean score", f"{_fmt(mean)} / {top:g}" if mean is not None else "—"),
               ("median score", f"{_fmt(median)} / {top:g}" if median is not None else "—"),
               ("flags", str(n_flags)),
               ("batch wall time", f"{wall:.1f} s" + (f" ({wall / max(1, len(totals)):.1f} s per student)"
                                                      if totals else "") if wall is not None else "—")]
    if meta.get("seed_source"):
        summary.append(("secret seed from", str(meta["seed_source"])))
    if meta.get("batch_error"):
        summary.append(("batch record", _clean(meta["batch_error"], secrets)))
    if meta.get("book_error"):
        summary.append(("gradebook", _clean(meta["book_error"], secrets)))
    for note in meta.get("left_out", []):
        summary.append(("folder left out", note))
    parts = ["<h2 id='summary'>Summary</h2><dl class='summary'>"
             + "".join(f"<dt>{_e(k)}</dt><dd>{_e(v)}</dd>" for k, v in summary) + "</dl>"]
    if totals:
        parts.append("<div class='plots'>" + _img(score_histogram(totals, top, f"{week}: total score"),
                                                  "histogram of total scores") + "</div>")
    if meta.get("lanes"):
        parts.append(lanes_html(meta["lanes"], meta.get("where")))
    return parts


def _exercise_html(ex: ExerciseInfo, roster: list[Student]) -> list[str]:
    """One exercise's section: its figures, its plots, and (for a timed exercise) its leaderboard or why none."""
    parts = []
    res = [(s, s.results[ex.key]) for s in roster if s.submitted]
    pts = [p for s, r in res for p, _ in [s.exercise_points(ex) or (r.points, r.max_points)]]
    mx = ex.max_points or max((r.max_points for _, r in res), default=0.0)
    parts.append(f"<h3 id='ex-{_e(ex.key)}'>{_e(ex.notebook)} · {_e(ex.name)}</h3>")
    info = [f"max {mx:g} points", f"mean {_fmt(statistics.fmean(pts)) if pts else '—'}"]
    if ex.metric:
        info.append(f"metric {ex.unit}")
        info.append(f"bar {ex.bar:.4g} {ex.unit} (median of the bars applied: a fraction of each run's baseline)"
                    if ex.bar else "no bar applied (nothing timed)")
    parts.append(f"<p class='muted'>{_e('; '.join(info))}</p>")
    plots = []
    if pts:
        plots.append(_img(score_histogram(pts, mx, f"{ex.name}: points"), f"{ex.name} score histogram"))
    board = leaderboard(ex, roster) if ex.metric else []
    on_board = {s.name for s, _ in board}
    timed_bad = [r.value for s, r in res if r.value is not None and s.name not in on_board]
    if board or timed_bad:
        plots.append(_img(throughput_plot(ex, [r.value for _, r in board], timed_bad),
                          f"{ex.name} throughput distribution"))
    parts.append("<div class='plots'>" + "".join(plots) + "</div>")
    if ex.metric:
        if board:
            rows = [[str(i), _e(s.name), _fmt(r.value, 4),
                     _fmt(r.value / (r.bar or ex.bar), 3) + "×" if (r.bar or ex.bar) else "—",
                     "{:g} / {:g}".format(*(s.exercise_points(ex) or (r.points, r.max_points)))]
                    for i, (s, r) in enumerate(board, 1)]
            parts.append(f"<h4>Leaderboard — {_e(ex.name)}</h4>"
                         + _table(["rank", "student", f"throughput ({ex.unit})", "of the bar", "points"], rows,
                                  {0, 2, 3, 4}))
        else:
            parts.append("<p class='muted'>No leaderboard: no correct submission was timed (throughput is "
                         "measured on a Hopper GPU only).</p>")
    return parts


def _flags_html(roster: list[Student], secrets: list[str]) -> str:
    """The table of every flag raised, or a line saying there is none."""
    frows = [[_e(s.name), _e(nb), f"<span class='flag'>{_e(_clean(f, secrets))}</span>"]
             for s in roster for nb, f in s.flags]
    return _table(["student", "notebook", "flag"], frows) if frows else "<p class='muted'>No flags.</p>"


def _students_html(meta: dict, notebooks: list[str], roster: list[Student], top: float) -> str:
    """The table of every student: status, total, points per notebook (linked to the student's feedback page for it;
    or malformed, or none), flags, lane, notes (each once, with its count). The points per notebook and the total
    come from one source (Student.notebook_points, Student.total): with a gradebook, they add up."""
    und = meta.get("understanding")  # beside the kernel's points, when imported (autograder understanding import)
    k = 1 if und else 0
    head = (["student", "status", "total"] + ([f"understanding (weight {_num(und.get('weight')):g})"] if und else [])
            + notebooks + ["flags", "wall (s)", "graded on", "notes"])
    srows = []
    for s in roster:
        st = status_of(s, notebooks)
        cls = "ok" if st == "graded" else "bad"
        late = f" <span class='muted'>(late: −{s.penalty:g})</span>" if s.penalty else ""
        cells = [_e(s.name), f"<span class='{cls}'>{_e(st)}</span>", f"{s.total:g} / {top:g}{late}"]
        if und:
            u = understanding_of(meta, s.name)
            cells.append(f"{u[0]:g} / {u[1]:g}" if u else "—")
        bad = s.malformed
        for nb in notebooks:
            pts = s.notebook_points(nb)
            text = (f"{pts[0]:g} / {pts[1]:g}" if pts is not None and (nb in s.verdicts or nb not in bad)
                    else "<span class='bad'>malformed</span>" if nb in bad else "—")
            href = _feedback_href(meta, s.name, nb)
            cells.append(f"<a href=\"{_e(href)}\">{text}</a>" if href else text)
        cells += [str(len(s.flags)), _fmt(s.wall_s, 3), _e(s.lane) or "—",
                  "<br>".join(_e(n) for n in _counted(_clean(n, meta["secrets"]) for n in s.notes))]
        srows.append(cells)
    n = k + len(notebooks)
    return "<div class='wide'>" + _table(head, srows, {2, *range(3, 3 + n), 3 + n, 4 + n}) + "</div>"


def _feedback_href(meta: dict, student: str, nb: str) -> str | None:
    """The link from the report (<grading>/report_<week>.html) to nbgrader's feedback page of a student's notebook
    (<grading>/feedback/<student>/<week>/<nb>.html), if it was written: relative (the folder can move, or be opened
    through file://), each part percent-encoded so that any id works (spaces, commas, quotes, accents, '#', '?')."""
    parts = ["feedback", student, meta["week"], f"{nb}.html"]
    if not (Path(meta["grading"]).joinpath(*parts)).is_file():
        return None
    return "/".join(urllib.parse.quote(p, safe="") for p in parts)


def _counted(notes) -> list[str]:
    """Each note once, in the order first seen, with how many times it was made ("... ×3")."""
    n = Counter(notes := list(notes))
    return [f"{x} ×{n[x]}" if n[x] > 1 else x for x in dict.fromkeys(notes)]


def _parts_html(meta: dict, exercises: list[ExerciseInfo], roster: list[Student]) -> str:
    """Per student, the points of each part of each exercise (correctness / path / throughput; a quiz as one), from
    the same source as the totals (the gradebook's, manual scores included, else the verdicts'); a part that earned
    nothing of what it could is marked. The student's name links to their first feedback page."""
    cols: list[tuple[ExerciseInfo, str, tuple[str, ...]]] = []  # (exercise, part label, its grade ids)
    for ex in exercises:
        if ex.name == "quiz" or not ex.grade_ids:
            cols.append((ex, "points", ex.grade_ids))
        else:
            cols += [(ex, g[len(ex.name) + 1:] if g.startswith(f"{ex.name}_") else g, (g,)) for g in ex.grade_ids]
    top = ["<th rowspan='2'>student</th>"] + [
        f"<th colspan='{sum(c[0] is ex for c in cols)}'>{_e(ex.notebook)} · {_e(ex.name)}</th>" for ex in exercises]
    sub = [f"<th>{_e(label)}</th>" for _, label, _ in cols]
    rows = []
    for s in roster:
        cells = []
        for ex, _, gids in cols:
            got = [p for g in gids if (p := s.part_points(ex.notebook, g)) is not None]
            if not got:
                cells.append("<td class='num muted'>—</td>")
                continue
            pts, mx = sum(p for p, _ in got), sum(m for _, m in got)
            cls = " bad" if mx and not pts else ""
            cells.append(f"<td class='num{cls}' title='{pts:g} of {mx:g}'>{pts:g}</td>")
        first = next((h for nb in dict.fromkeys(e.notebook for e in exercises)
                      if (h := _feedback_href(meta, s.name, nb))), None)
        name = f"<a href=\"{_e(first)}\">{_e(s.name)}</a>" if first else _e(s.name)
        rows.append(f"<tr><td>{name}</td>" + "".join(cells) + "</tr>")
    return ("<div class='wide'><table><thead><tr>" + "".join(top) + "</tr><tr>" + "".join(sub)
            + "</tr></thead><tbody>" + "\n".join(rows) + "</tbody></table></div>")


def lanes_html(lanes: dict, where: str | None = None) -> str:
    """Which GPU lane (or Slurm task) graded whom, and the ceilings that lane measured before its first student:
    each student's throughput bar was scaled by the ceilings of the GPU that graded them."""
    rows = []
    for label in sorted(lanes, key=_natural):
        lane = lanes[label] if isinstance(lanes[label], dict) else {}
        c = lane.get("ceilings") if isinstance(lane.get("ceilings"), dict) else {}
        state = str(lane.get("state") or "")
        why = _clean(lane.get("why") or "")
        students = [str(x) for x in lane.get("students") or []]
        rows.append([_e(label), _e(lane.get("device") or "—"),
                     _fmt(_num(c.get("copy_tbps"), None), 4), _fmt(_num(c.get("cublas_bf16_tflops"), None), 4),
                     str(len(students)), _e(", ".join(students)) or "—", _fmt(_num(lane.get("wall_s"), None), 3),
                     f"<span class='{'ok' if state in ('done', 'grading') else 'bad'}'>{_e(state)}</span>"
                     + (f" — {_e(why)}" if why else "")])
    what = "Slurm tasks" if where == "slurm" else "GPU lanes"
    return (f"<h2 id='lanes'>{what}</h2><p class='muted'>Each lane measured its GPU's ceilings and the course "
            "references before its first student (— : graded on CPU, nothing timed).</p>"
            + _table(["lane", "device", "copy ceiling (TB/s)", "cuBLAS bf16 (TFLOPS)", "students", "graded",
                      "wall (s)", "state"], rows, {2, 3, 4, 6}))


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
