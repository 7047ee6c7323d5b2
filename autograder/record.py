"""What a grading folder keeps of its batches: the batch record (batch_<week>.json, one entry per student, merged run
after run), the week's CSV export, the feedback pages' additions (the grader's flags, a page for each notebook
nbgrader has none for), and a student's grades taken out again (forget, withdraw).
"""

from __future__ import annotations

import html
import json
import os
import shutil
import sys
import warnings
from pathlib import Path

from .release import nbgrader
from .students import shown_name, student_id
from .task import _atomic_json
from .report_data import _clean, _secrets
from .report import write_report


def update_batch_record(grading: Path, week: str, run: dict, per_student: dict) -> dict:
    """Merge one run into <grading>/batch_<week>.json: its students' entries replace theirs, every other student's
    entry is kept (a re-grade of one student leaves the class as it was). A student this run could not grade keeps
    an earlier run's result, with a note. `run` ("id", "where", "lanes", "wall_s", "seed_source", ...) replaces a
    run of the same id. The report reads the newest verdict per student and notebook from it."""
    f = Path(grading) / f"batch_{week}.json"
    try:
        old = json.loads(f.read_text())
    except (OSError, ValueError):
        old = {}
    runs = [r for r in old.get("runs") or [] if isinstance(r, dict) and r.get("id") != run["id"]]
    per = dict(old.get("per_student") or {})
    if old and not old.get("runs"):  # a record of one run, written before runs were kept
        start = f.stat().st_mtime - float(old.get("wall_s") or 0) - 60
        runs.append({"id": "earlier", "where": old.get("where"), "lanes": old.get("lanes") or {},
                     "wall_s": old.get("wall_s"), "started_at": start})
        per = {k: dict(v, run="earlier", started_at=v.get("started_at") or start) for k, v in per.items()
               if isinstance(v, dict)}
    for student, e in per_student.items():
        e = dict(e, run=run["id"])
        if not e.get("started_at"):
            e["started_at"] = run.get("started_at")
        prev = per.get(student)
        if e.get("not_graded") and prev and not prev.get("not_graded"):
            what = "is queued" if e.get("queued") else "failed"
            e = dict(prev, later_failure=f"a later grading ({run['id']}) {what}: {e['not_graded'][:300]}")
        per[student] = e
    runs.append(run)
    lanes = {}
    for r in runs:
        latest = r is run
        for label, lane in (r.get("lanes") or {}).items():
            mine = [s for s in lane.get("students") or [] if (per.get(s) or {}).get("run") == r["id"]]
            if mine or latest:
                lanes[label if latest else f"{label} ({r['id']})"] = dict(lane, students=mine, run=r["id"])
    record = {"week": week, "students": len(per), "wall_s": run.get("wall_s"), "where": run.get("where"),
              "started_at": run.get("started_at"), "seed_source": run.get("seed_source"),
              "runs": runs[-50:], "lanes": lanes, "per_student": dict(sorted(per.items()))}
    f.parent.mkdir(parents=True, exist_ok=True)
    _atomic_json(f, record)
    return record


def prune_batches(grading: Path, keep: int) -> list[Path]:
    """Keep the newest `keep` batch folders (<grading>/batch/<yyyymmdd-hhmmss>/: templates, task folders,
    baselines, only read to debug a run); remove the others. Returns what was removed."""
    folders = sorted(p for p in (Path(grading) / "batch").glob("*") if p.is_dir())
    gone = folders[:-keep] if keep > 0 else folders
    for p in gone:
        shutil.rmtree(p, ignore_errors=True)
    return gone


def export_week(week: str, grading: Path) -> Path:
    """grades_<week>.csv: `nbgrader export` of this week only (the gradebook holds every released week), through the
    course's export plugin (autograder/nbgrader_config.py: quoted by csv.writer, written whole). An export that
    fails leaves the previous CSV as it was and says so on stderr."""
    out = Path(grading) / f"grades_{week}.csv"
    r = nbgrader("export", f"--to={out}", f"--assignment={week}", check=False,
                 env=dict(os.environ, COURSE_GRADING_DIR=str(grading)), here=True)
    if r.returncode != 0:
        last = (r.stderr or "").strip().splitlines()[-1:] or [f"exit {r.returncode}"]
        print(f"the gradebook CSV {out} was not written again (nbgrader export: {last[0][:300]})", file=sys.stderr)
    return out


def flag_feedback(grading: Path, week: str, students) -> int:
    """Put the flags of each trusted verdict (deleted-cell, torch-instead-of-kernel, ...) at the top of the student's
    feedback page for that notebook (nbgrader's page shows the grade cells only). Returns how many pages."""
    secrets, n = _secrets(), 0
    for student in students:
        for v in sorted((Path(grading) / "verdicts" / student / week).glob("*.json")):
            page = Path(grading) / "feedback" / student / week / f"{v.stem}.html"
            try:
                flags = json.loads(v.read_text()).get("flags") or []
                text = page.read_text()
            except (OSError, ValueError):
                continue
            if not flags or "id='course-flags'" in text:
                continue
            box = ("<div id='course-flags' style='margin:1em auto;max-width:60em;padding:.6em 1em;border:1px solid "
                   "#e0c36a;background:#fff3cd'><strong>What the grader noticed in this notebook</strong><ul>"
                   + "".join(f"<li><code>{html.escape(_clean(f, secrets))}</code></li>" for f in flags)
                   + "</ul></div>")
            at = text.find("<body")
            at = text.find(">", at) + 1 if at >= 0 else 0
            page.write_text(text[:at] + box + text[at:])
            n += 1
    return n


def problem_feedback(grading: Path, week: str, per_student: dict) -> list[Path]:
    """Feedback for what nbgrader has none for: a notebook set aside as malformed, one handed in but not graded as
    placed (several copies and none under its name, found in another week's folder), with the hand-in's notes. One
    small HTML page per such notebook, beside nbgrader's, in feedback/<student>/<week>/ — for every student, a
    student with nothing graded included. A page already saying the same is left as it is (a re-grade of another
    student touches nobody else's); one saying something else (nbgrader's, from a run that graded it) is replaced."""
    written = []
    for student, e in per_student.items():
        if not isinstance(e, dict):
            continue
        d = Path(grading) / "feedback" / student / week
        notes = "".join(f"<li>{html.escape(str(n))}</li>" for n in e.get("notes") or [])
        pages = [(m, "The file you handed in is not a notebook that can be read: {why}</p><p>Open it in JupyterLab, "
                     "save it again, and hand it in.") for m in e.get("malformed") or []]
        pages += [(m, "It was handed in, but not where the grader takes it from: {why}.</p><p>Nothing of it was "
                      "graded; put it in place and hand it in again.") for m in e.get("ungraded") or []]
        for m, says in pages:
            name, _, why = str(m).partition(":")
            stem = Path(name.strip()).stem
            page = d / f"{stem}.html"
            text = (f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(stem)}</title></head>"
                    f"<body><h1>{html.escape(name.strip())}: not graded (0 points)</h1><p>"
                    + says.format(why=html.escape(why.strip())) + "</p>"
                    + (f"<ul>{notes}</ul>" if notes else "") + "</body></html>\n")
            if page.exists() and page.read_text() == text:
                continue
            d.mkdir(parents=True, exist_ok=True)
            page.write_text(text)
            written.append(page)
    return written


def forget_target(grading: Path, name: str) -> tuple[str, str | None]:
    """(id, folder name under submitted/ or None) of the student `forget` is given: an id (`student_id`: what the
    report and the gradebook show), or the name of the student's folder, whatever its bytes (a name that is not UTF-8
    arrives surrogate-escaped from the command line). An id wins over a folder of the same name."""
    sub = Path(grading) / "submitted"
    folders = {sid: d.name for d in (sub.iterdir() if sub.is_dir() else []) if (sid := student_id(d.name))}
    if name in folders:
        return name, folders[name]
    sid = student_id(name)
    if sid is not None and folders.get(sid) == name:
        return sid, name
    return name, None


def forget(grading: Path, students: list[str], week: str | None = None, keep_submission: bool = False) -> list[str]:
    """Remove students from a grading folder (a trial cohort graded in the class's folder, a student who left):
    `withdraw` each, then each affected week's CSV export and report are written again. A student is named by id or
    by folder name (`forget_target`). Their Slurm state is slurm.forget's (`autograder forget` calls both: slurm
    imports this module)."""
    grading = Path(grading)
    said, weeks = [], set()
    for name in students:
        student, folder = forget_target(grading, name)
        said += withdraw(grading, student, week, weeks, folder=None if keep_submission else folder)

    for w in sorted(weeks):
        if (grading / f"grades_{w}.csv").exists():
            export_week(w, grading)
        write_report(w, grading)
        said.append(f"{w}: gradebook CSV and report written again")
    return said


def withdraw(grading: Path, student: str, week: str | None, weeks: set, folder: str | None = None) -> list[str]:
    """One student's grades out of a grading folder, the CSV export and report left to the caller (`forget`, and
    Slurm's collect for a grade of an earlier hand-in): their gradebook rows (nbgrader's remove_submission /
    remove_student), autograded/, feedback/, verdicts/ (of `week`, or all), submitted/<folder> when a folder is
    named, their entries in batch_<week>.json. Adds the weeks touched to `weeks`; returns what was done."""
    said = _forget_grades(grading, student, week, weeks)
    kinds = [("autograded", student), ("feedback", student), ("verdicts", student)]
    if folder is not None:
        kinds.append(("submitted", folder))
    for kind, sub in kinds:
        d = grading / kind / sub
        target = d / week if week else d
        if target.exists():
            shutil.rmtree(target)
            said.append(f"{student}: {kind}/{shown_name(str(target.relative_to(grading / kind)))} removed")
            if week and d.exists() and not any(d.iterdir()):
                d.rmdir()
    for bf in grading.glob(f"batch_{week or '*'}.json"):
        # ...and under the folder's own name, which a record written before ids were mapped may hold
        if any([_forget_in_record(bf, s) for s in {student, folder or student}]):
            weeks.add(bf.stem[len("batch_"):])
    if not any(x.startswith(f"{student}:") for x in said):
        said.append(f"{student}: nothing to forget in {grading}")
    return said


def _forget_grades(grading: Path, student: str, week: str | None, weeks: set) -> list[str]:
    """The student's submissions (of `week`, or every week and then the student) out of the class's gradebook."""
    from nbgrader.api import Gradebook, MissingEntry
    from sqlalchemy.exc import SAWarning

    db, said = Path(grading) / "gradebook.db", []
    if not db.exists():
        return said
    with warnings.catch_warnings(), Gradebook(f"sqlite:///{db}") as gb:
        warnings.simplefilter("ignore", SAWarning)
        try:
            subs = [sb.assignment.name for sb in gb.find_student(student).submissions]
        except MissingEntry:
            return said
        for w in subs:
            if week is None or w == week:
                gb.remove_submission(w, student)
                weeks.add(w)
                said.append(f"{student}: {w} removed from the gradebook")
        if week is None:
            gb.remove_student(student)
    return said


def _forget_in_record(bf: Path, student: str) -> bool:
    """The student out of one batch record (per-student entry, lanes' lists). Returns whether it held them."""
    try:
        rec = json.loads(bf.read_text())
    except (OSError, ValueError):
        return False
    if student not in (rec.get("per_student") or {}):
        return False
    del rec["per_student"][student]
    for lane in (rec.get("lanes") or {}).values():
        if isinstance(lane, dict) and student in (lane.get("students") or []):
            lane["students"] = [x for x in lane["students"] if x != student]
    rec["students"] = len(rec["per_student"])
    _atomic_json(bf, rec)
    return True
