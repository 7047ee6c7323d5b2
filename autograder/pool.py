"""Grading a class: one task per student, each into a gradebook of its own; one writer merges.

    grade_task(week, student, out, submitted=..., template=...)   one student in its own folder (a pool worker's
                                                                  task, and a Slurm array task's: autograder.slurm)
    merge_result(out, grading)                                    the single writer: that folder's gradebook rows,
                                                                  autograded notebooks and verdicts into the class's
    run_pool(week, students, lanes, ...)                          one worker per GPU lane, on this host

A task is `nbgrader autograde --student=<id>` with COURSE_GRADING_DIR pointing at the task's folder (the course's
nbgrader_config.py puts the gradebook, the autograded notebooks and the plugin's verdicts there) and the class's
submitted folder passed as `--CourseDirectory.submitted_directory`. Its gradebook starts as a copy of a template
that `nbgrader generate_assignment` wrote for the batch (the assignment, its notebooks and cells, no student), so
nothing but the task writes it, and no task waits on another's lock. The task's last act is `result.json`
("state": "done" or "failed"); a task that died before writing it left no result, and its folder is ignored.

A pool worker owns one GPU (CUDA_VISIBLE_DEVICES of its own), measures that GPU's ceilings and the course
references before its first student (`prepare_lane`, in a process that loads no student code), and grades its
students one after another. A task that fails — its process crashed, nbgrader failed, the GPU stopped answering —
is handed back once, to another worker where there is one; a second failure is reported as "not graded, retry".
A worker whose GPU fails a health check, or whose grading process died twice in a row, stops taking students.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from .release import ROOT, grading_dir, nbgrader

RESULT = "result.json"
STARTED = "started.json"
# Test hooks of the pool's own tests (tests/test_pool.py). COURSE_POOL_TEST_CRASH: comma-separated "lane:<id>"
# (every task on that lane), "first:<student>" (that student's first attempt), "always:<student>": the task process
# dies (SIGKILL) before it grades. COURSE_POOL_TEST_WEDGED: comma-separated lane ids whose GPU "does not answer".
TEST_CRASH = "COURSE_POOL_TEST_CRASH"
TEST_WEDGED = "COURSE_POOL_TEST_WEDGED"


# ------------------------------------------------------------------------------------------------ one student
def _atomic_json(path: Path, data: dict) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, indent=1, default=str))
    os.replace(tmp, path)


def _slurm_ids() -> dict:
    keys = {"job": "SLURM_JOB_ID", "array_job": "SLURM_ARRAY_JOB_ID", "array_task": "SLURM_ARRAY_TASK_ID"}
    return {k: os.environ[v] for k, v in keys.items() if os.environ.get(v)}


def _hook_items(var: str) -> set[str]:
    return {x.strip() for x in os.environ.get(var, "").split(",") if x.strip()}


def _in_hook(var: str, lane: str | None) -> bool:
    return lane is not None and lane in _hook_items(var)


def _crash_hook(lane: str | None, student: str, attempt: int) -> bool:
    items = _hook_items(TEST_CRASH)
    return (lane is not None and f"lane:{lane}" in items) or f"always:{student}" in items \
        or (attempt == 0 and f"first:{student}" in items)


def set_aside_malformed(folder: Path) -> list[str]:
    """Notebooks that are not valid nbformat JSON are renamed <name>.ipynb.malformed (nbgrader skips them, so the
    student's other notebooks are graded) and reported; the notebook scores 0."""
    import nbformat

    problems = []
    for nb in sorted(folder.glob("*.ipynb")):
        try:
            nbformat.validate(nbformat.read(str(nb), as_version=4))
        except Exception as exc:  # noqa: BLE001 - any reading error is the student's malformed file
            problems.append(f"{nb.name}: {type(exc).__name__}: {str(exc).splitlines()[0][:200]}")
            nb.rename(nb.with_name(nb.name + ".malformed"))
    return problems


def malformed_notebooks(folder: Path) -> list[str]:
    """Set aside what is not a notebook (set_aside_malformed) and list every notebook of the folder set aside, now
    or by an earlier attempt, that no valid notebook of the same name replaced."""
    found = set_aside_malformed(folder)
    named = {p.split(":", 1)[0] for p in found}
    for p in sorted(folder.glob("*.ipynb.malformed")):
        name = p.name[: -len(".malformed")]
        if name not in named and not (folder / name).exists():
            found.append(f"{name}: set aside earlier as malformed (not a notebook)")
    return found


def grade_task(week: str, student: str, out: Path, *, submitted: Path, template: Path, lane: str | None = None,
               batch_dir: Path | None = None, timeout: float | None = None, attempt: int = 0,
               figures: dict | None = None) -> dict:
    """Grade one student into `out` (emptied first): gradebook.db (a copy of `template`), autograded/, verdicts/,
    result.json. The secret seed comes from COURSE_SECRET_SEED in the environment."""
    from nbgrader.api import Gradebook, MissingEntry

    t0 = time.perf_counter()
    out = Path(out)
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    info = {"student": student, "week": week, "lane": lane, "host": socket.gethostname(), "pid": os.getpid(),
            "gpu": os.environ.get("CUDA_VISIBLE_DEVICES"), "slurm": _slurm_ids(), "attempt": attempt,
            "figures": figures or {}, "started_at": time.time()}
    _atomic_json(out / STARTED, info)
    if _crash_hook(lane, student, attempt):
        os.kill(os.getpid(), signal.SIGKILL)
    folder = Path(submitted) / student / week
    malformed = malformed_notebooks(folder) if folder.is_dir() else []
    shutil.copy(template, out / "gradebook.db")
    url = f"sqlite:///{out / 'gradebook.db'}"
    log = ""
    if _in_hook(TEST_WEDGED, lane):
        rc, log = 1, "CUDA error: the GPU does not answer (test hook: wedged lane)"
    elif not folder.is_dir():
        rc, log = 1, f"no submission folder {folder}"
    elif not any(folder.glob("*.ipynb")):  # every notebook malformed: an honest 0, without starting nbgrader
        import warnings

        from sqlalchemy.exc import SAWarning

        with warnings.catch_warnings(), Gradebook(url) as gb:
            warnings.simplefilter("ignore", SAWarning)
            gb.update_or_create_student(student)
            gb.add_submission(week, student)
        rc, log = 0, "no notebook left to grade (every one malformed): scored 0"
    else:
        env = dict(os.environ, COURSE_GRADING_DIR=str(out), COURSE_BATCH_DIR=str(batch_dir or out / "batch"))
        try:
            res = nbgrader("autograde", week, f"--student={student}", "--force",
                           f"--CourseDirectory.submitted_directory={Path(submitted).resolve()}", env=env,
                           check=False, timeout=timeout)
            rc, log = res.returncode, (res.stderr or "")[-4000:]
        except subprocess.TimeoutExpired:
            rc, log = 124, f"nbgrader autograde did not finish in {timeout:.0f} s: killed"
    if rc == 0:
        with Gradebook(url) as gb:
            try:
                gb.find_submission(week, student)
            except MissingEntry:
                rc, log = 1, log + "\nnbgrader exited 0 but wrote no submission for the student"
    result = {**info, "state": "done" if rc == 0 else "failed", "returncode": rc,
              "wall_s": time.perf_counter() - t0, "finished_at": time.time(), "malformed": malformed,
              "log_tail": log[-1500:]}
    _atomic_json(out / RESULT, result)
    return result


def read_result(out: Path) -> dict | None:
    """The task's result, or None when it wrote none (it crashed, was killed, or never ran)."""
    try:
        data = json.loads((Path(out) / RESULT).read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def result_digest(out: Path) -> str:
    """What identifies one task's result: its result.json and gradebook bytes."""
    h = hashlib.sha256()
    for name in (RESULT, "gradebook.db"):
        p = Path(out) / name
        h.update(p.read_bytes() if p.exists() else b"")
    return h.hexdigest()[:20]


# ------------------------------------------------------------------------------------------ the single writer
def merge_result(out: Path, grading: Path | None = None) -> dict:
    """Write one finished task into the class's grading folder — the only writer of its gradebook. Replaces, never
    adds: the student's submission row is found or created, and each grade and comment of each notebook (keyed by
    assignment, student, notebook and cell) takes the task's value; a manual score already given is kept. The
    task's autograded notebooks and verdicts replace the student's. Running it twice changes nothing."""
    from nbgrader.api import Gradebook, MissingEntry

    import warnings

    from sqlalchemy.exc import SAWarning

    grading = Path(grading or grading_dir())
    res = read_result(out)
    if res is None or res.get("state") != "done":
        raise ValueError(f"{out}: no finished result to merge")
    week, student = res["week"], res["student"]
    # nbgrader's add_submission warns under SQLAlchemy 2 about its own relationship cascade; the rows are right.
    with warnings.catch_warnings(), Gradebook(f"sqlite:///{Path(out) / 'gradebook.db'}") as src, \
            Gradebook(f"sqlite:///{grading / 'gradebook.db'}") as dst:
        warnings.simplefilter("ignore", SAWarning)
        s = src.find_submission(week, student)
        dst.update_or_create_student(student)
        try:
            d = dst.find_submission(week, student)
        except MissingEntry:
            d = dst.add_submission(week, student)
        d.timestamp, d.extension = s.timestamp, s.extension
        for nb in s.notebooks:
            dnb = dst.find_submission_notebook(nb.name, week, student)
            dnb.flagged, dnb.late_submission_penalty = nb.flagged, nb.late_submission_penalty
            for g in nb.grades:
                dg = dst.find_grade(g.name, nb.name, week, student)
                dg.auto_score, dg.needs_manual_grade = g.auto_score, g.needs_manual_grade
                if g.manual_score is not None:
                    dg.manual_score = g.manual_score
            for c in nb.comments:
                dst.find_comment(c.name, nb.name, week, student).auto_comment = c.auto_comment
        dst.db.commit()
    for kind in ("autograded", "verdicts"):
        src_dir = Path(out) / kind / student / week
        dst_dir = grading / kind / student / week
        tmp = dst_dir.with_name(f".{week}.merging")
        if tmp.exists():
            shutil.rmtree(tmp)
        if src_dir.is_dir():
            shutil.copytree(src_dir, tmp)
        if dst_dir.exists():
            shutil.rmtree(dst_dir)
        if tmp.exists():
            tmp.rename(dst_dir)
    return res


def gradebook_rows(grading: Path, week: str) -> dict[tuple[str, str, str], float | None]:
    """Every grade of a week in the class's gradebook: (student, notebook, cell) -> score (for tests and checks)."""
    from nbgrader.api import Gradebook

    rows = {}
    with Gradebook(f"sqlite:///{Path(grading) / 'gradebook.db'}") as gb:
        for sub in gb.assignment_submissions(week):
            for nb in sub.notebooks:
                for g in nb.grades:
                    rows[(sub.student.id, nb.name, g.name)] = g.score
    return rows


# ------------------------------------------------------------------------------------------------ batch set-up
def make_template(week: str, batch: Path) -> Path:
    """A gradebook holding the assignment (notebooks, cells, checksums) and no student: every task starts from a
    copy. Written by nbgrader itself (generate_assignment into the batch folder)."""
    batch.mkdir(parents=True, exist_ok=True)
    db = batch / "template.db"
    if db.exists():
        db.unlink()
    nbgrader("generate_assignment", week, "--force", f"--CourseDirectory.db_url=sqlite:///{db}",
             f"--CourseDirectory.release_directory={batch / 'release'}")
    return db


def prepare_lane(week: str, batch_dir: Path, env: dict | None = None) -> dict:
    """The trusted figures of one GPU for the batch, measured in a process of their own that loads no student code
    (autograder.harness.prepare_batch with this lane's CUDA_VISIBLE_DEVICES and COURSE_BATCH_DIR). Returns
    {"device", "ceilings"} ({} on a machine that grades on CPU)."""
    e = dict(os.environ if env is None else env, COURSE_BATCH_DIR=str(batch_dir))
    e["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, e.get("PYTHONPATH", "").split(os.pathsep))])
    r = subprocess.run([sys.executable, "-m", "autograder.pool", "prepare", week], env=e, cwd=ROOT,
                       capture_output=True, text=True, timeout=1800)
    if r.returncode != 0:
        raise RuntimeError(f"the trusted baseline failed: {(r.stderr or r.stdout)[-1500:]}")
    return lane_figures(batch_dir)


def lane_figures(batch_dir: Path) -> dict:
    """The device and ceilings a lane's baseline files hold (the same for every exercise of the batch)."""
    for f in sorted(Path(batch_dir).glob("baseline_*.json")):
        try:
            b = json.loads(f.read_text())
        except (OSError, ValueError):
            continue
        return {"device": b.get("device"), "ceilings": b.get("ceilings")}
    return {}


def _prepare_here(week: str) -> None:
    from .grading import reference_sources
    from .harness import _wants_gpu, prepare_batch
    from .spec import all_specs

    if not _wants_gpu(None):
        print("no Hopper GPU here: no baseline to measure (grading on CPU)")
        return
    items = [(s.slug, name, src) for s in all_specs() if s.assignment == week
             for name, src in reference_sources(s).items()]
    prepare_batch(items, progress=lambda what: print(f"trusted {what}", flush=True))


def gpu_healthy(lane: str | None, env: dict, timeout: float = 120.0) -> tuple[bool, str]:
    """Does this lane's GPU still answer? A small allocation, a kernel and a synchronize in a fresh process. A CPU
    lane (no GPU, or COURSE_FORCE_CPU) is always healthy."""
    if _in_hook(TEST_WEDGED, lane):
        return False, "the GPU does not answer (test hook)"
    if lane is None or env.get("COURSE_FORCE_CPU"):
        return True, ""
    code = ("import torch; x = torch.ones(1 << 20, device='cuda'); torch.cuda.synchronize(); "
            "assert float(x.sum()) == float(1 << 20)")
    try:
        r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return False, f"a 4 MB kernel did not finish in {timeout:.0f} s"
    if r.returncode != 0:
        return False, (r.stderr or "").strip().splitlines()[-1:][0] if r.stderr.strip() else f"exit {r.returncode}"
    return True, ""


# ------------------------------------------------------------------------------------------------ the pool
@dataclass
class Job:
    student: str
    attempts: list[dict] = field(default_factory=list)  # {"lane", "why"} of each failed attempt

    @property
    def avoid(self) -> set:
        return {a["lane"] for a in self.attempts}


@dataclass
class Lane:
    id: str | None  # the GPU id as this process sees it ("0", "1"), or None: one lane on CPU / the visible GPU
    env: dict
    label: str
    state: str = "starting"  # starting, grading, done, wedged, retired
    why: str = ""
    students: list[str] = field(default_factory=list)
    figures: dict = field(default_factory=dict)
    wall_s: float = 0.0
    failures_in_a_row: int = 0


def lanes_for(gpus: str, env: dict | None = None) -> list[Lane]:
    """--gpus all | none | 0,1,... -> one lane per GPU, each with the CUDA_VISIBLE_DEVICES its processes see. Ids
    index the GPUs this process sees (an inherited CUDA_VISIBLE_DEVICES=4,5 makes "0" physical GPU 4). With
    COURSE_FORCE_CPU (CPU mode, the tests) the ids are lanes only and need no GPU."""
    env = dict(os.environ if env is None else env)
    visible = [v.strip() for v in env.get("CUDA_VISIBLE_DEVICES", "").split(",") if v.strip()]
    count = _gpu_count() if not env.get("COURSE_FORCE_CPU") else 0
    if gpus == "none" or (gpus == "all" and count == 0):
        return [Lane(None, dict(env), "cpu" if gpus == "none" or not count else "gpu")]
    ids = [str(i) for i in range(count)] if gpus == "all" else [g.strip() for g in gpus.split(",") if g.strip()]
    if not ids or len(set(ids)) != len(ids):
        raise SystemExit(f"--gpus {gpus!r}: give all, none, or distinct GPU ids like 0,1")
    if not env.get("COURSE_FORCE_CPU"):
        bad = [i for i in ids if not i.isdigit() or int(i) >= count]
        if bad:
            raise SystemExit(f"--gpus {gpus}: GPU {', '.join(bad)} not visible here ({count} GPU(s) visible)")
    lanes = []
    for i in ids:
        phys = visible[int(i)] if visible and i.isdigit() and int(i) < len(visible) else i
        lanes.append(Lane(i, dict(env, CUDA_VISIBLE_DEVICES=phys, COURSE_POOL_LANE=i), f"GPU {i}"))
    return lanes


def _gpu_count() -> int:
    try:
        import torch

        return torch.cuda.device_count() if torch.cuda.is_available() else 0
    except Exception:  # noqa: BLE001
        return 0


class _Queue:
    """The students still to grade, handed to workers: a student handed back avoids the lane it failed on while
    another lane is working."""

    def __init__(self, students: list[str], lanes: list[Lane]):
        self.pending = [Job(s) for s in students]
        self.in_flight = 0
        self.live = {id(lane) for lane in lanes}
        self.cond = threading.Condition()

    def take(self, lane: Lane) -> Job | None:
        with self.cond:
            while True:
                others_live = self.live - {id(lane)}
                for j in self.pending:
                    if id(lane) not in j.avoid or not others_live:
                        self.pending.remove(j)
                        self.in_flight += 1
                        return j
                if not self.pending and not self.in_flight:
                    return None
                self.cond.wait(timeout=1.0)

    def finish(self, job: Job | None = None, requeue: bool = False) -> None:
        with self.cond:
            self.in_flight -= 1
            if requeue and job is not None:
                self.pending.insert(0, job)
            self.cond.notify_all()

    def retire(self, lane: Lane) -> None:
        with self.cond:
            self.live.discard(id(lane))
            self.cond.notify_all()

    def left(self) -> list[Job]:
        with self.cond:
            out, self.pending = self.pending, []
            return out


def run_pool(week: str, students: list[str], lanes: list[Lane], *, grading: Path, batch: Path, template: Path,
             task_timeout: float | None = None, progress=None) -> tuple[dict, dict]:
    """Grade `students` with one worker per lane; merge each finished task into `grading` (this thread is the only
    writer). Returns (per_student, lanes_summary) for the batch record."""
    import queue as queue_mod

    events: queue_mod.Queue = queue_mod.Queue()
    todo = _Queue(students, lanes)  # a job remembers the lanes it failed on by identity (Job.avoid: id(lane))

    def work(lane: Lane) -> None:
        t0 = time.perf_counter()
        lane_dir = batch / (f"gpu{lane.id}" if lane.id is not None else "lane")
        ok, why = gpu_healthy(lane.id, lane.env)
        if ok:
            try:
                lane.figures = prepare_lane(week, lane_dir / "baseline", lane.env)
            except Exception as exc:  # noqa: BLE001 - a lane that cannot measure its GPU grades nobody
                ok, why = False, str(exc)[:500]
        if not ok:
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
            out = batch / "tasks" / f"{job.student}.{len(job.attempts)}"
            cmd = [sys.executable, "-m", "autograder.pool", "task", week, job.student, "--out", str(out),
                   "--submitted", str(grading / "submitted"), "--template", str(template),
                   "--batch-dir", str(lane_dir / "baseline")]
            if lane.id is not None:
                cmd += ["--lane", lane.id]
            cmd += ["--attempt", str(len(job.attempts))]
            env = dict(lane.env)
            env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, env.get("PYTHONPATH", "").split(os.pathsep))])
            try:
                r = subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True, timeout=task_timeout)
                code, tail = r.returncode, (r.stderr or "")[-1500:]
            except subprocess.TimeoutExpired:
                code, tail = 124, f"the task did not finish in {task_timeout:.0f} s: killed"
            res = read_result(out)
            if res is not None and res.get("state") == "done":
                lane.failures_in_a_row = 0
                lane.students.append(job.student)
                events.put(("done", lane, job, (out, res)))
                todo.finish()
                continue
            # A failed attempt: the task process died (no result) or nbgrader failed.
            if res is None:
                sig = -code if code < 0 else None
                why = (f"the grading process died ({signal.Signals(sig).name})" if sig else
                       f"the grading process exited {code} without a result") + (f": {tail}" if tail.strip() else "")
            else:
                why = f"nbgrader autograde exited {res.get('returncode')}: {res.get('log_tail', '')[-600:]}"
            job.attempts.append({"lane": id(lane), "label": lane.label, "why": why[-800:], "out": str(out)})
            # A process that died or ran out of time says something about the lane; nbgrader failing on a student's
            # notebook does not (that student is handed back, the lane goes on).
            if res is None:
                lane.failures_in_a_row += 1
            healthy, hwhy = gpu_healthy(lane.id, lane.env)
            if not healthy:
                lane.state, lane.why = "wedged", hwhy
            elif lane.failures_in_a_row >= 2:
                lane.state, lane.why = "retired", "its grading process died twice in a row"
            if lane.state != "grading":
                todo.retire(lane)
            if len(job.attempts) < 2:
                events.put(("handback", lane, job, None))
                todo.finish(job, requeue=True)
            else:
                events.put(("failed", lane, job, None))
                todo.finish()
            if lane.state != "grading":
                break
        if lane.state == "grading":
            lane.state = "done"
        lane.wall_s = time.perf_counter() - t0
        events.put(("lane", lane, None, None))

    per_student: dict[str, dict] = {}
    threads = [threading.Thread(target=work, args=(lane,), daemon=True) for lane in lanes]
    for t in threads:
        t.start()
    show = progress or (lambda *a: None)
    while any(t.is_alive() for t in threads) or not events.empty():
        try:
            kind, lane, job, data = events.get(timeout=0.2)
        except queue_mod.Empty:
            continue
        if kind == "done":
            out, res = data
            merge_result(out, grading)  # the single writer
            per_student[job.student] = _entry(res, lane, job)
        elif kind == "failed":
            per_student[job.student] = _not_graded(job, "failed twice")
        show(kind, lane, job, per_student.get(job.student) if job else None)
    for job in todo.left():  # every lane stopped before these were graded
        job.attempts.append({"label": "—", "why": "no working GPU lane was left"})
        per_student[job.student] = _not_graded(job, "no working lane left")
        show("failed", None, job, per_student[job.student])
    summary = {lane.label: {"gpu": lane.id, "cuda_visible_devices": lane.env.get("CUDA_VISIBLE_DEVICES"),
                            "state": lane.state, "why": lane.why, "students": lane.students,
                            "device": lane.figures.get("device"), "ceilings": lane.figures.get("ceilings"),
                            "wall_s": lane.wall_s} for lane in lanes}
    return per_student, summary


def _entry(res: dict, lane: Lane | None, job: Job) -> dict:
    return {"returncode": res.get("returncode"), "wall_s": res.get("wall_s"), "gpu": lane.id if lane else None,
            "lane": lane.label if lane else res.get("lane"), "host": res.get("host"),
            "malformed": res.get("malformed") or [], "log_tail": res.get("log_tail", ""),
            "attempts": [{"lane": a.get("label"), "why": a.get("why")} for a in job.attempts]}


def _not_graded(job: Job, what: str) -> dict:
    last = job.attempts[-1]["why"] if job.attempts else ""
    return {"returncode": None, "gpu": None, "lane": None, "not_graded": f"not graded, retry ({what}): {last[:300]}",
            "attempts": [{"lane": a.get("label"), "why": a.get("why")} for a in job.attempts]}


def main(argv: list[str] | None = None) -> int:
    import argparse

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
    p = sub.add_parser("prepare", help="measure this GPU's trusted baseline into $COURSE_BATCH_DIR")
    p.add_argument("week")
    args = ap.parse_args(argv)
    if args.cmd == "prepare":
        _prepare_here(args.week)
        return 0
    res = grade_task(args.week, args.student, args.out, submitted=args.submitted, template=args.template,
                     lane=args.lane, batch_dir=args.batch_dir, timeout=args.timeout, attempt=args.attempt,
                     figures=lane_figures(args.batch_dir) if args.batch_dir else None)
    return 0 if res["state"] == "done" else 1


if __name__ == "__main__":
    sys.exit(main())
