"""Collecting what a Slurm array graded (autograder.slurm): every finished result merged into the class's gradebook
once (merge_result, keyed by student, notebook and cell, so running it twice changes nothing), who is still queued,
who has no result and what Slurm says became of their task; and a new array for the students with no result
(resubmit).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from .children import grading_lock
from .merge import merge_result
from .record import export_week, flag_feedback, problem_feedback, update_batch_record, withdraw
from .release import grading_dir, nbgrader
from .slurm import (DEFAULTS, _load_state, _save_json, best_result, finished_state, handin_digest, queued,
                    results_of, shared_dir, submit)
from .task import STARTED, read_result, result_digest
from .report import write_report


def _owners(state: dict) -> dict[str, tuple[str, int]]:
    """student -> (job, array index) of the latest submission that included them."""
    out = {}
    for sub in state["submissions"]:
        for i, group in enumerate(sub["students"]):
            for s in group:
                out[s] = (sub["job"], i)
    return out


def collect(week: str, out=print) -> dict:
    """Merge every finished result into the class's gradebook (once: a result already merged is skipped), say per
    student which array task its result came from, list who is still queued (not an error) and who has no result
    with its task's Slurm state; regenerate feedback, the CSV export and the report when something changed.
    Returns {"merged": [...], "missing": {student: why}, "queued": {student: why}, "changed": bool,
    "per_student": {student: entry}} (the entries name hand-in mistakes: grade_run.hand_in_mistakes)."""
    with grading_lock(grading_dir(), f"autograder slurm collect {week}"):
        return _collect(week, out)


def _collect(week: str, out=print) -> dict:
    sdir = shared_dir(week)
    state = _load_state(sdir)
    if not state["submissions"]:
        raise SystemExit(f"nothing submitted for {week} (no {sdir / 'jobs.json'}): autograder slurm submit {week}")
    owners = _owners(state)
    merged_f = sdir / "merged.json"
    merged = json.loads(merged_f.read_text()) if merged_f.exists() else {}
    q = queued(sorted({j for j, _ in owners.values()}))
    per_student, lanes, missing, waiting, new, lines, withdrawn = {}, {}, {}, {}, [], [], []
    for student in sorted(owners):
        job, idx = owners[student]
        rdir, res = best_result(sdir, student, handin_digest(week, student))
        if res is not None:
            digest = result_digest(rdir)
            if merged.get(student) != digest:
                merge_result(rdir, grading_dir())
                merged[student] = digest
                new.append(student)
            per_student[student], line = _graded_entry(student, res, job, idx, q, lanes)
            lines.append(line)
            continue
        old = best_result(sdir, student)[1]  # a result of an earlier hand-in: its grade no longer counts
        if merged.pop(student, None) is not None:
            _withdraw(grading_dir(), week, student)
            withdrawn.append(student)
        earlier = "" if old is None else (f"the hand-in changed after array task {_task_of(old)} graded it (that "
                                          "grade no longer counts)")
        queued_now, why, per_student[student] = _ungraded_entry(sdir, student, job, idx, q, earlier)
        (waiting if queued_now else missing)[student] = why
    _save_json(merged_f, merged)
    grading = grading_dir()
    first = state.get("first_submitted_at") or min(s["submitted_at"] for s in state["submissions"])
    changed = _record_changed(grading, week, new, per_student) or bool(withdrawn)
    if changed or not (grading / f"grades_{week}.csv").exists():
        _write_week(grading, week, first, state, lanes, per_student)
    graded = len(owners) - len(missing) - len(waiting)
    out(f"{week}: {graded} of {len(owners)} student(s) graded"
        + (f", {len(new)} merged now" if new else ", nothing new to merge")
        + (f", {len(withdrawn)} grade(s) of an earlier hand-in withdrawn" if withdrawn else "")
        + (f", {len(waiting)} still queued" if waiting else "") + f"; report: {grading / f'report_{week}.html'}")
    for line in lines:
        out(line)
    for student, why in sorted(waiting.items()):
        out(f"  queued {student}: {why} (collect again later)")
    for student, why in sorted(missing.items()):
        out(f"  NOT GRADED {student}: {why}")
    if missing:
        out(f"  then: autograder slurm resubmit {week}")
    return {"merged": new, "missing": missing, "queued": waiting, "changed": changed, "per_student": per_student}


def _task_of(res: dict) -> str:
    """The array task ("<array job>_<index>") that wrote a result."""
    slurm = res.get("slurm") or {}
    return f"{slurm.get('array_job', '?')}_{slurm.get('array_task', '?')}" if slurm else "a task outside Slurm"


def _withdraw(grading: Path, week: str, student: str) -> None:
    """Take back a grade merged from a result of an earlier hand-in (record.withdraw: the gradebook's submission of
    `week`, with it the CSV export's row, the autograded notebooks, verdicts and feedback of the week, the batch-record
    entry that would otherwise stand in for the missing grade). The hand-in and the result folder stay."""
    withdraw(grading, student, week, set())


def _graded_entry(student: str, res: dict, job: str, idx: int, q: dict, lanes: dict) -> tuple[dict, str]:
    """(per-student entry, line to print) of a student with a finished result; counts it in its task's lane."""
    tid = f"{job}_{idx}"
    src = _task_of(res)
    label = f"{res.get('host')} task {src}" + (f" GPU {res['gpu']}" if res.get("gpu") else "")
    lane = lanes.setdefault(label, {"gpu": res.get("gpu"), "host": res.get("host"), "state": "done",
                                    "students": [], "device": (res.get("figures") or {}).get("device"),
                                    "ceilings": (res.get("figures") or {}).get("ceilings"),
                                    "wall_s": 0.0})
    lane["students"].append(student)
    lane["wall_s"] += res.get("wall_s") or 0.0
    device = (res.get("figures") or {}).get("device")
    note = []
    if src != tid:  # a later array includes the student: say what became of it
        later = f"Slurm task {tid} (submitted later) is {q[tid]}" if tid in q else \
            f"Slurm task {tid} (submitted later): {(finished_state(job, idx, None) or ('no record', ''))[0]}"
        note.append(f"result from array task {src}; {later}")
    entry = {"returncode": 0, "wall_s": res.get("wall_s"), "gpu": res.get("gpu"),
             "lane": label, "host": res.get("host"), "device": device, "cpu": not device,
             "started_at": res.get("started_at"), "finished_at": res.get("finished_at"),
             "malformed": res.get("malformed") or [], "ungraded": res.get("ungraded") or [],
             "notes": (res.get("notes") or []) + note,
             "log_tail": res.get("log_tail", ""), "slurm": src}
    return entry, f"  {student}: graded by array task {src}" + (f" ({note[0].split('; ', 1)[1]})" if note else "")


def _ungraded_entry(sdir: Path, student: str, job: str, idx: int, q: dict, changed: str = "") \
        -> tuple[bool, str, dict]:
    """(still queued, why, per-student entry) of a student with no finished result (of their hand-in as it is:
    `changed` says when an earlier one was graded): its task is queued, or what Slurm and the task's own files say
    became of it."""
    tid = f"{job}_{idx}"
    started, failed = {}, None
    for p in results_of(sdir, student):
        try:
            st = json.loads((p / STARTED).read_text())
        except (OSError, ValueError):
            continue
        if (st.get("slurm") or {}).get("array_job") == job:
            started, failed = st, read_result(p)
    st_info = started.get("slurm") or {}
    raw = st_info.get("job") if st_info.get("array_job") == job else None
    if tid in q:
        why = f"Slurm task {tid} is {q[tid]} (squeue)" + (f"; {changed}" if changed else "")
        return True, why, {"returncode": None, "not_graded": f"queued: {why}", "queued": True, "slurm": tid}
    fin = finished_state(job, idx, raw)
    why = f"Slurm task {tid}: {fin[0]} ({fin[1]})" if fin else \
        f"Slurm task {tid} never started, or left no record (not in squeue, sacct or scontrol)"
    if failed is not None and failed.get("why"):  # the task refused to grade (refuse_task)
        why += f"; {failed['why']}"
    elif failed is not None:  # the task ran and nbgrader failed
        why += f"; nbgrader autograde exited {failed.get('returncode')}: {str(failed.get('log_tail'))[-300:]}"
    elif started:
        why += f"; it started on {started.get('host')} and wrote no result (killed, timed out or crashed)"
    why = f"{changed}; {why}" if changed else why
    return False, why, {"returncode": None, "not_graded": f"not graded, resubmit: {why}", "slurm": tid}


def _record_changed(grading: Path, week: str, new: list, per_student: dict) -> bool:
    """Whether something was merged now or a student's entry differs from the batch record's."""
    batch_f = grading / f"batch_{week}.json"
    try:
        old = json.loads(batch_f.read_text())
    except (OSError, ValueError):
        old = {}
    strip = lambda d: {k: v for k, v in (d or {}).items() if k not in ("run", "started_at")}  # noqa: E731
    return bool(new) or any(strip((old.get("per_student") or {}).get(s)) != strip(e)
                            for s, e in per_student.items())


def _write_week(grading: Path, week: str, first: float, state: dict, lanes: dict, per_student: dict) -> None:
    """The batch record, feedback, the CSV export and the report, written again."""
    run = {"id": "slurm", "where": "slurm", "started_at": first, "wall_s": time.time() - first,
           "jobs": [s["job"] for s in state["submissions"]], "lanes": lanes,
           "cpu": all(not e.get("device") for e in per_student.values() if not e.get("not_graded"))}
    record = update_batch_record(grading, week, run, per_student)
    nbgrader("generate_feedback", week, "--force", check=False, here=True)
    problem_feedback(grading, week, record["per_student"])
    flag_feedback(grading, week, record["per_student"])
    export_week(week, grading)

    write_report(week, grading)


def resubmit(week: str, opts: dict | None, *, secret: str | None, seed_file: str | None = None,
             dry_run: bool = False, out=print) -> str | None:
    """A new array for every student with no finished result whose task is not still queued or running."""
    sdir = shared_dir(week)
    state = _load_state(sdir)
    if not state["submissions"]:
        raise SystemExit(f"nothing submitted for {week}: autograder slurm submit {week}")
    owners = _owners(state)
    q = queued(sorted({j for j, _ in owners.values()}))
    todo = []
    for student, (job, idx) in sorted(owners.items()):
        if best_result(sdir, student, handin_digest(week, student))[1] is None and f"{job}_{idx}" not in q:
            todo.append(student)
    if not todo:
        out(f"{week}: every student has a result or a task in the queue: nothing to resubmit")
        return None
    merged_opts = {**DEFAULTS, **state["submissions"][-1].get("options", {}), **(opts or {})}
    return submit(week, todo, merged_opts, secret=secret, seed_file=seed_file, dry_run=dry_run, out=out)
