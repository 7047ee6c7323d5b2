"""Grading a class: one task per student, each into a gradebook of its own; one writer merges.

    grade_task(week, student, out, submitted=..., template=...)   one student in its own folder (a pool worker's
                                                                  task, and a Slurm array task's: autograder.task)
    merge_result(out, grading)                                    the single writer: that folder's gradebook rows,
                                                                  autograded notebooks and verdicts into the class's
                                                                  (autograder.merge)
    run_pool(week, students, lanes, ...)                          one worker per GPU lane, on this host (this module)

A pool worker owns one GPU (CUDA_VISIBLE_DEVICES of its own), measures that GPU's ceilings and the course
references before its first student (`prepare_lane`, in a process that loads no student code), and grades its
students one after another. A task that fails — its process crashed, nbgrader failed, the GPU stopped answering —
is handed back once, to another worker where there is one; a second failure is reported as "not graded, retry".
A worker whose GPU fails a health check, or whose grading process died for two students in a row, stops taking
students.

`python -m autograder.pool task|prepare|spare` is the process a lane starts: one student's task, a lane's trusted
baseline, or a task started ahead that waits for its student (main).
"""

from __future__ import annotations

import argparse
import json
import os
import queue as queue_mod
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from .batch import _prepare_here, gpu_healthy, lane_figures, prepare_lane
from .children import STOP, _CHILDREN, _CHILDREN_LOCK, Interrupted, _kill_group, stop_children
from .merge import merge_result
from .plan import Job, Lane, _Queue, plan_jobs
from .release import ROOT
from .task import drop_copies, grade_task, read_result, task_folder


def run_pool(week: str, students: list[str], lanes: list[Lane], *, grading: Path, batch: Path, template: Path,
             task_timeout: float | None = None, progress=None, prepare=None, after_merge=None) -> tuple[dict, dict]:
    """Grade `students` with one worker per lane, the longest expected first, a long hand-in in parts on several
    lanes (plan_jobs); merge each finished task into `grading` (this thread is the only writer). A student is graded
    once every part of their hand-in is merged (one entry, its parts listed); a part that fails twice leaves the
    student not graded, like a whole hand-in. Returns (per_student, lanes_summary) for the batch record.

    What a run pays once, not per lane, and overlapped with what it can be: `prepare()` (the class gradebook's
    assignment and the batch's `template`, which must exist when it returns) runs in this thread while every lane
    checks its GPU and measures its trusted baseline — per lane by necessity, since each lane's bars are fractions
    of its own GPU's ceilings; so does the plan (plan_jobs reads every hand-in); no student is handed out before
    both are done. `after_merge(entries, alone)` (the
    feedback pages) runs in this thread with the entries of the students merged since its last call, while the
    lanes grade on (alone=False: other threads are running), or, for those merged last, once every lane's thread
    has stopped (alone=True)."""
    events: queue_mod.Queue = queue_mod.Queue()
    parts = _Parts()
    todo = _Queue([], lanes, gated=True)  # filled below, while the lanes measure their GPUs
    per_student: dict[str, dict] = {}
    STOP.clear()
    threads = [threading.Thread(target=_work, args=(lane, week, todo, events),
                                kwargs={"grading": grading, "batch": batch, "template": template,
                                        "task_timeout": task_timeout}, daemon=True) for lane in lanes]
    for t in threads:
        t.start()
    show = progress or (lambda *a: None)
    try:
        try:
            # the plan reads every hand-in (hand_in_work): seconds for a large class, paid while the lanes measure
            todo.fill(plan_jobs(grading, week, students, len(lanes)))
            if prepare is not None:
                prepare()
            todo.open()
        except Exception:
            STOP.set()
            stop_children()
            raise
        _merge_events(threads, events, grading, per_student, show, after_merge, parts)
    except KeyboardInterrupt:
        STOP.set()
        stop_children()
        for t in threads:
            t.join(timeout=10)
        while not events.empty():  # results that finished before the interrupt are kept
            kind, lane, job, data = events.get()
            if kind == "done":
                merge_result(data[0], grading, move=True)
                if (whole := parts.add(job, lane, data[1])) is not None:
                    per_student[job.student] = whole
        raise Interrupted(per_student, lanes) from None
    for job in todo.left():  # every lane stopped before these were graded
        job.attempts.append({"label": "—", "why": "no working GPU lane was left"})
        per_student[job.student] = _not_graded(job, "no working lane left")
        show("failed", None, job, per_student[job.student])
    return per_student, _lanes_summary(lanes)


class _Parts:
    """The parts of each student's hand-in merged so far: a student's entry once all of them are (run_pool)."""

    def __init__(self):
        self.done: dict[str, list] = {}
        self.failed: set[str] = set()

    def add(self, job: Job, lane, res: dict) -> dict | None:
        """The student's entry when this was their last part (None before, and for a student with a failed part)."""
        got = self.done.setdefault(job.student, [])
        got.append(_entry(res, lane, job))
        if len(got) < job.parts or job.student in self.failed:
            return None
        return got[0] if job.parts == 1 else _whole_entry(got)


def _whole_entry(parts: list[dict]) -> dict:
    """One student's entry from their parts' entries: the time is the sum (what grading them cost, the next run's
    expectation), the notes said once, each part's lane and time kept."""
    first = min(parts, key=lambda e: e.get("started_at") or 0)
    once = lambda key: list(dict.fromkeys(x for e in parts for x in e.get(key) or []))  # noqa: E731
    base = {k: v for k, v in first.items() if k not in ("part", "notebooks")}
    return {**base, "wall_s": sum(e.get("wall_s") or 0.0 for e in parts),
            "lane": ", ".join(dict.fromkeys(str(e.get("lane")) for e in parts)),
            "finished_at": max(e.get("finished_at") or 0 for e in parts),
            "malformed": once("malformed"), "ungraded": once("ungraded"), "notes": once("notes"),
            "attempts": [a for e in parts for a in e.get("attempts") or []],
            "parts": [{k: e.get(k) for k in ("notebooks", "lane", "gpu", "wall_s", "started_at", "finished_at")}
                      for e in sorted(parts, key=lambda e: e.get("part") or [0])]}


def _merge_events(threads: list, events, grading: Path, per_student: dict, show, after_merge=None,
                  parts: _Parts | None = None) -> None:
    """The single writer: merge each finished task as its worker reports it, until every worker has stopped; hand
    the students merged in full to `after_merge` whenever no event waits (run_pool)."""
    parts = parts if parts is not None else _Parts()
    fresh: dict[str, dict] = {}
    while any(t.is_alive() for t in threads) or not events.empty():
        try:
            kind, lane, job, data = events.get(timeout=0.2)
        except queue_mod.Empty:
            continue
        if kind == "done":
            out, res = data
            merge_result(out, grading, move=True)  # the single writer; the task keeps digests, not the notebooks
            whole = parts.add(job, lane, res)
            if whole is None:
                kind = "part"
            else:
                per_student[job.student] = fresh[job.student] = whole
        elif kind == "failed":
            parts.failed.add(job.student)
            fresh.pop(job.student, None)
            per_student[job.student] = _not_graded(job, "failed twice")
        show(kind, lane, job, per_student.get(job.student) if job else None)
        if after_merge is not None and fresh and events.empty() and any(t.is_alive() for t in threads):
            after_merge(dict(fresh), False)
            fresh.clear()
    if after_merge is not None and fresh:
        after_merge(dict(fresh), True)


def _lanes_summary(lanes: list[Lane]) -> dict:
    return {lane.label: {"gpu": lane.id, "cuda_visible_devices": lane.env.get("CUDA_VISIBLE_DEVICES"),
                         "state": lane.state, "why": lane.why, "students": lane.students,
                         "device": lane.figures.get("device"), "ceilings": lane.figures.get("ceilings"),
                         "wall_s": lane.wall_s, "ready_s": round(lane.ready_s, 1),
                         "ready_phases_s": {k: round(v, 1) for k, v in lane.phases.items()}} for lane in lanes}


def _work(lane: Lane, week: str, todo: _Queue, events, *, grading: Path, batch: Path, template: Path,
          task_timeout: float | None) -> None:
    """One worker: ready its lane, then grade the students it takes one after another until none is left for it,
    its lane fails, or the pool stops."""
    t0 = time.perf_counter()
    lane_dir = batch / (f"gpu{lane.id}" if lane.id is not None else "lane")
    ok, why = _lane_ready(week, lane, lane_dir)
    lane.ready_s = time.perf_counter() - t0
    if not ok:
        _end_spare(lane)
        lane.state, lane.why = "wedged", why
        todo.retire(lane)
        events.put(("lane", lane, None, None))
        return
    lane.state = "grading"
    events.put(("lane", lane, None, None))
    while True:
        job = todo.take(lane)
        if job is None:
            break
        events.put(("start", lane, job, None))
        part = f".p{job.part + 1}of{job.parts}" if job.parts > 1 else ""
        out = batch / "tasks" / f"{task_folder(job.student)}{part}.{len(job.attempts)}"
        cmd = _task_cmd(week, lane, job, out, grading=grading, template=template, lane_dir=lane_dir)
        code, tail = _run_task(cmd, lane, task_timeout, ahead=todo.waiting() > 0)
        if STOP.is_set():
            break
        res = read_result(out)
        if res is not None and res.get("state") == "done":
            lane.died_for = []
            if job.student not in lane.students:
                lane.students.append(job.student)
            events.put(("done", lane, job, (out, res)))
            todo.finish()
            continue
        if not _failed_attempt(lane, job, out, res, code, tail, todo, events):
            break
    _end_spare(lane)
    if STOP.is_set():
        lane.state, lane.why = "interrupted", "interrupted"
    if lane.state == "grading":
        lane.state = "done"
    lane.wall_s = time.perf_counter() - t0
    events.put(("lane", lane, None, None))


def _lane_ready(week: str, lane: Lane, lane_dir: Path) -> tuple[bool, str]:
    """(ok, why): the lane's GPU answers and its ceilings and the course references were measured. The lane's first
    task process is started first (_spare_task: its imports overlap the measurement, as a spare's do a student's
    grading); the seconds of each step go to `lane.phases`."""
    t0 = time.perf_counter()
    if lane.spare is None and not STOP.is_set():
        lane.spare = _spare_task(lane)
    ok, why = gpu_healthy(lane.id, lane.env)
    lane.phases["gpu_check"] = time.perf_counter() - t0
    if ok:
        t1 = time.perf_counter()
        try:
            lane.figures = prepare_lane(week, lane_dir / "baseline", lane.env)
        except Exception as exc:  # noqa: BLE001 - a lane that cannot measure its GPU grades nobody
            ok, why = False, str(exc)[:500]
        lane.phases["baselines"] = time.perf_counter() - t1
    return ok, why


def _task_cmd(week: str, lane: Lane, job: Job, out: Path, *, grading: Path, template: Path,
              lane_dir: Path) -> list[str]:
    cmd = [sys.executable, "-m", "autograder.pool", "task", "--out", str(out),
           "--submitted", str(grading / "submitted"), "--template", str(template),
           "--batch-dir", str(lane_dir / "baseline")]
    if lane.id is not None:
        cmd += ["--lane", lane.id]
    # the positionals after "--": a student id may start with "-" (a folder named "-%" grades as -\x25)
    if job.parts > 1:
        cmd += ["--part", json.dumps({"part": job.part, "split": job.split})]
    return cmd + ["--attempt", str(len(job.attempts)), "--", week, job.student]


def _run_task(cmd: list[str], lane: Lane, task_timeout: float | None, ahead: bool = True) -> tuple[int, str]:
    """(exit code, stderr tail) of one task process; 124 when it ran out of time.

    Still one process per student, but started ahead: the lane's spare (_spare_task) has done its imports (nbgrader,
    the grader, torch: seconds a student) while the previous student was graded; it is handed this student's arguments
    and the next spare starts at once where `ahead` (students still wait to be handed out; the last student's lane
    starts none: a task handed back later starts its own). Measured on one H200, the gap between two students of a
    lane was about 4 s."""
    p = lane.spare if lane.spare is not None and lane.spare.poll() is None else _spare_task(lane)
    lane.spare = None if STOP.is_set() or not ahead else _spare_task(lane)
    try:
        _, err = p.communicate(input=json.dumps(cmd[4:]) + "\n", timeout=task_timeout)
        code, tail = p.returncode, (err or "")[-1500:]
    except subprocess.TimeoutExpired:
        _kill_group(p)
        p.communicate()
        code, tail = 124, f"the task did not finish in {task_timeout:.0f} s: killed"
    finally:
        with _CHILDREN_LOCK:
            _CHILDREN.discard(p)
    return code, tail


def _spare_task(lane: Lane) -> subprocess.Popen:
    """A task process of the lane (its environment, a session of its own, known to stop_children) that imports what
    grading needs, then waits for one student's `task` arguments on its standard input (`python -m autograder.pool
    spare`); end of input, and it exits having graded nobody."""
    env = dict(lane.env)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, env.get("PYTHONPATH", "").split(os.pathsep))])
    p = subprocess.Popen([sys.executable, "-m", "autograder.pool", "spare"], env=env, cwd=ROOT, stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    with _CHILDREN_LOCK:
        _CHILDREN.add(p)
    return p


def _end_spare(lane: Lane) -> None:
    """The lane's spare, no longer needed: its input closed (it exits at once), killed if it does not."""
    p, lane.spare = lane.spare, None
    if p is None:
        return
    try:
        p.communicate(input="", timeout=30)
    except (subprocess.TimeoutExpired, OSError, ValueError):
        _kill_group(p)
    with _CHILDREN_LOCK:
        _CHILDREN.discard(p)


def _failed_attempt(lane: Lane, job: Job, out: Path, res: dict | None, code: int, tail: str, todo: _Queue,
                    events) -> bool:
    """Record a failed attempt, hand the student back (once) or give up on them, and judge the lane. Returns
    whether the lane goes on grading."""
    # A failed attempt: the task process died (no result) or nbgrader failed.
    if res is None:
        sig = -code if code < 0 else None
        why = (f"the grading process died ({signal.Signals(sig).name})" if sig else
               f"the grading process exited {code} without a result") + (f": {tail}" if tail.strip() else "")
    else:
        why = f"nbgrader autograde exited {res.get('returncode')}: {res.get('log_tail', '')[-600:]}"
    job.attempts.append({"lane": id(lane), "label": lane.label, "why": why[-800:], "out": str(out)})
    drop_copies(out / "autograded", out / "autograded.json")  # what nbgrader wrote, by digest (the log says why)
    # A process that died or ran out of time for two different students in a row says something about the lane;
    # nbgrader failing on a student's notebook does not, nor one student's task dying twice (that student is given
    # up on, the lane goes on with the others).
    if res is None:
        lane.died_for.append(job.student)
    healthy, hwhy = gpu_healthy(lane.id, lane.env)
    if not healthy:
        lane.state, lane.why = "wedged", hwhy
    elif len(set(lane.died_for)) >= 2:
        lane.state, lane.why = "retired", "its grading process died for two students in a row"
    if lane.state != "grading":
        todo.retire(lane)
    if len(job.attempts) < 2:
        events.put(("handback", lane, job, None))
        todo.finish(job, requeue=True)
    else:
        events.put(("failed", lane, job, None))
        todo.finish()
    return lane.state == "grading"


def _entry(res: dict, lane: Lane | None, job: Job) -> dict:
    device = (res.get("figures") or {}).get("device") or (lane.figures.get("device") if lane else None)
    entry = {"returncode": res.get("returncode"), "wall_s": res.get("wall_s"), "gpu": lane.id if lane else None,
             "lane": lane.label if lane else res.get("lane"), "host": res.get("host"), "device": device,
             "cpu": not device, "started_at": res.get("started_at"), "finished_at": res.get("finished_at"),
             "process_born": res.get("process_born"), "malformed": res.get("malformed") or [],
             "ungraded": res.get("ungraded") or [], "notes": res.get("notes") or [],
             "log_tail": res.get("log_tail", ""),
             "attempts": [{"lane": a.get("label"), "why": a.get("why")} for a in job.attempts]}
    if res.get("part"):  # one part of a hand-in graded in parts (_whole_entry folds them)
        entry.update(part=res["part"], notebooks=res.get("notebooks"))
    return entry


def _not_graded(job: Job, what: str) -> dict:
    last = job.attempts[-1]["why"] if job.attempts else ""
    # nbgrader failing on the same hand-in twice (no process died): retrying the same files will fail the same way
    permanent = len(job.attempts) >= 2 and all(a.get("why", "").startswith("nbgrader autograde exited")
                                                for a in job.attempts)
    text = (f"not graded (nbgrader failed on this hand-in twice; retrying as is will fail again — look at the "
            f"notebook): {last[:300]}" if permanent else f"not graded, retry ({what}): {last[:300]}")
    return {"returncode": None, "gpu": None, "lane": None, "not_graded": text, "permanent": permanent,
            "attempts": [{"lane": a.get("label"), "why": a.get("why")} for a in job.attempts]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m autograder.pool")
    sub = ap.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("task", help="grade one student into a folder of its own")
    t.add_argument("week")
    t.add_argument("student")
    t.add_argument("--out", required=True, type=Path)
    t.add_argument("--submitted", required=True, type=Path)
    t.add_argument("--template", required=True, type=Path)
    t.add_argument("--batch-dir", type=Path)
    t.add_argument("--lane")
    t.add_argument("--timeout", type=float)
    t.add_argument("--attempt", type=int, default=0)
    t.add_argument("--part", help='{"part": i, "split": [[notebooks], ...]}: grade only part i of the hand-in')
    p = sub.add_parser("prepare", help="measure this GPU's trusted baseline into $COURSE_BATCH_DIR")
    p.add_argument("week")
    sub.add_parser("spare", help="import what grading needs, then grade the task whose arguments come on stdin")
    args = ap.parse_args(argv)
    if args.cmd == "spare":  # a lane's next task, started ahead (_spare_task): its imports done before its student
        import nbgrader.api  # noqa: F401
        import nbgrader.apps  # noqa: F401

        from . import grading, harness  # noqa: F401
        line = sys.stdin.readline()
        return main(["task", *json.loads(line)]) if line.strip() else 0
    if args.cmd == "prepare":
        _prepare_here(args.week)
        return 0
    res = grade_task(args.week, args.student, args.out, submitted=args.submitted, template=args.template,
                     lane=args.lane, batch_dir=args.batch_dir, timeout=args.timeout, attempt=args.attempt,
                     figures=lane_figures(args.batch_dir) if args.batch_dir else None, here=True,
                     part=_part_arg(args.part))
    return 0 if res["state"] == "done" else 1


def _part_arg(text: str | None) -> tuple[int, list] | None:
    if not text:
        return None
    d = json.loads(text)
    return int(d["part"]), [list(p) for p in d["split"]]


if __name__ == "__main__":
    sys.exit(main())
