"""The pool's plan: its lanes (one per GPU), its jobs (a student, or one part of a long hand-in), the order they are
handed out in (the longest expected first) and the queue the lanes take them from.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import threading
from dataclasses import dataclass, field
from pathlib import Path

from .children import STOP
from .handin import _notebooks_under, hand_in_work
from .score import CPU_GRADING


@dataclass
class Job:
    student: str
    attempts: list[dict] = field(default_factory=list)  # {"lane", "why"} of each failed attempt
    part: int = 0  # this job grades part `part` of the student's hand-in: split[part] (part_notebooks)
    split: tuple = ()  # the hand-in's notebooks, one list per part (plan_jobs); () = graded whole
    expected_s: float = 0.0  # its expected grading time (plan_jobs)

    @property
    def parts(self) -> int:
        return max(1, len(self.split))

    @property
    def label(self) -> str:
        return self.student if self.parts == 1 else f"{self.student} (part {self.part + 1} of {self.parts})"

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
    ready_s: float = 0.0  # seconds from the lane's start until its GPU answered and its baselines were measured
    phases: dict = field(default_factory=dict)  # seconds of each step of the lane's set-up (_lane_ready)
    died_for: list = field(default_factory=list)  # the students whose task process died since its last success
    spare: object = None  # the lane's next task process, started ahead (_spare_task); None until the first task


def lanes_for(gpus: str, env: dict | None = None) -> list[Lane]:
    """--gpus all | none | 0,1,... -> one lane per GPU, each with the CUDA_VISIBLE_DEVICES its processes see. Ids
    index the GPUs this process sees (an inherited CUDA_VISIBLE_DEVICES=4,5 makes "0" physical GPU 4). With
    COURSE_FORCE_CPU (CPU mode, the tests) the ids are lanes only and need no GPU, and `all` is refused as where
    there is no GPU."""
    env = dict(os.environ if env is None else env)
    visible = [v.strip() for v in env.get("CUDA_VISIBLE_DEVICES", "").split(",") if v.strip()]
    count = _gpu_count() if not env.get("COURSE_FORCE_CPU") else 0
    if gpus == "all" and count == 0:  # COURSE_FORCE_CPU included: it pretends there is no GPU, never grades on CPU

        raise SystemExit(f"--gpus all: no GPU here ({no_gpu_diagnosis(env)}). Grade on a GPU machine, or on CPU on "
                         f"purpose with --gpus none ({CPU_GRADING})")
    if gpus == "none":
        return [Lane(None, dict(env), "cpu")]
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


def no_gpu_diagnosis(env: dict | None = None) -> str:
    """What was found when torch sees no GPU: torch's build, the driver (nvidia-smi), CUDA_VISIBLE_DEVICES."""
    env = dict(os.environ if env is None else env)
    if env.get("COURSE_FORCE_CPU"):
        return f"COURSE_FORCE_CPU={env['COURSE_FORCE_CPU']} is set: it makes the course act as if there were no GPU"
    parts = []
    try:
        import torch

        cuda = getattr(torch.version, "cuda", None)
        parts.append(f"torch {torch.__version__} is a CPU-only build (no CUDA)" if not cuda else
                     f"torch {torch.__version__} (built for CUDA {cuda}) sees no CUDA device")
    except Exception as exc:  # noqa: BLE001
        parts.append(f"torch cannot be imported ({type(exc).__name__})")
    smi = shutil.which("nvidia-smi")
    if not smi:
        parts.append("no nvidia-smi on PATH (no NVIDIA driver?)")
    else:
        try:
            r = subprocess.run([smi, "--query-gpu=name,driver_version", "--format=csv,noheader"],
                               capture_output=True, text=True, timeout=30)
            found = "; ".join(x.strip() for x in r.stdout.splitlines() if x.strip())
            parts.append(f"nvidia-smi lists {found}" if r.returncode == 0 and found else
                         f"nvidia-smi fails: {(r.stderr or r.stdout).strip()[:200] or f'exit {r.returncode}'}")
        except (OSError, subprocess.TimeoutExpired) as exc:
            parts.append(f"nvidia-smi fails ({type(exc).__name__})")
    if "CUDA_VISIBLE_DEVICES" in env:
        parts.append(f"CUDA_VISIBLE_DEVICES={env['CUDA_VISIBLE_DEVICES']!r}")
    return "; ".join(parts)


def _gpu_count() -> int:
    try:
        import torch

        return torch.cuda.device_count() if torch.cuda.is_available() else 0
    except Exception:  # noqa: BLE001
        return 0


NOTEBOOK_WORK = 0.1  # a notebook's cost to grade beyond its attempted exercises, in exercises (measured on one
# H200: the five unattempted notebooks of the release took 1.2 s, one attempted exercise 5 to 17 s)


def expected_seconds(grading: Path, week: str, students: list[str]) -> dict[str, tuple[float, dict, int]]:
    """{student: (expected seconds, {notebook: work}, bytes handed in)}. Work: the hand-in's attempted exercises
    per notebook (hand_in_work) plus NOTEBOOK_WORK per notebook. Expected: the student's wall time in the last run
    that graded them (the batch record, batch_<week>.json: update_batch_record keeps a graded entry through a later
    failure); else their work at the recorded seconds per unit of work (the median over the recorded students; 1 s
    when none is recorded)."""
    try:
        per = json.loads((Path(grading) / f"batch_{week}.json").read_text()).get("per_student")
    except (OSError, ValueError, AttributeError):
        per = None
    per = per if isinstance(per, dict) else {}
    work, size = {}, {}
    for s in students:
        folder = Path(grading) / "submitted" / s / week
        work[s] = {n: w + NOTEBOOK_WORK for n, w in hand_in_work(folder, week).items()} if folder.is_dir() else {}
        size[s] = sum(p.stat().st_size for p in _notebooks_under(folder))
    units = {s: sum(w.values()) for s, w in work.items()}
    recorded = {s: float(e["wall_s"]) for s, e in per.items() if s in units and isinstance(e, dict)
                and not e.get("not_graded") and isinstance(e.get("wall_s"), (int, float)) and e["wall_s"] > 0}
    rates = sorted(recorded[s] / units[s] for s in recorded if units[s])
    rate = rates[len(rates) // 2] if rates else 1.0
    return {s: (recorded.get(s, rate * units[s]), work[s], size[s]) for s in students}


def longest_first(grading: Path, week: str, students: list[str], exp: dict | None = None) -> list[str]:
    """`students` in the order the pool hands them out: the longest expected grading first (expected_seconds, or
    `exp` where the caller has read it already), so that a long hand-in is not started last and left as the batch's
    critical path (longest-processing-time-first); ties: the larger hand-in first, then the given order."""
    exp = exp if exp is not None else expected_seconds(grading, week, students)
    order = {s: i for i, s in reversed(list(enumerate(students)))}
    return sorted(dict.fromkeys(students), key=lambda s: (-exp[s][0], -exp[s][2], order[s]))


# A hand-in expected to take more than PART_SHARE of a lane's share of the class (the class's expected time / lanes)
# is graded in parts. Longest-first balances the lanes well while every job is below a lane's share; a part is not
# free (measured on 4 H200s: the solutions' hand-in took 62.9 s whole and 72.6 s in three parts), so no more parts
# than that bound needs.
PART_SHARE = 0.75


def split_hand_in(work: dict[str, float], k: int) -> list[list[str]]:
    """The notebooks of a hand-in in k parts of about equal work (longest first, each to the lightest part)."""
    parts: list[list] = [[0.0, []] for _ in range(k)]
    for name, w in sorted(work.items(), key=lambda x: (-x[1], x[0])):
        light = min(parts, key=lambda p: p[0])
        light[0] += w
        light[1].append(name)
    return [sorted(names) for _, names in parts]


def plan_jobs(grading: Path, week: str, students: list[str], lanes: int) -> list[Job]:
    """The pool's jobs, longest expected first. On one lane, one job per student. On several, a hand-in of several
    notebooks expected to take more than PART_SHARE × the class's expected time / lanes is graded in parts on
    different lanes at once (each part its own nbgrader run of some of its notebooks, `grade_task(part=...)`, the
    notebooks shared out by their work): one long hand-in would otherwise be the batch's critical path however many
    lanes there are (measured on 4 H200s, the solutions' five notebooks took 58 s of a 98 s run). Each part costs a
    task's start, so no more parts than needed to bring a part under that share, and none smaller than a notebook."""
    exp = expected_seconds(grading, week, students)  # reads every hand-in: once
    order = longest_first(grading, week, students, exp)
    if lanes < 2:
        return [Job(s, expected_s=exp[s][0]) for s in order]
    share = PART_SHARE * sum(t for t, _, _ in exp.values()) / lanes
    jobs = []
    for s in order:
        t, work, _ = exp[s]
        k = min(len(work), int(-(-t // share))) if share > 0 and t > share else 1
        if k < 2:
            jobs.append(Job(s, expected_s=t))
            continue
        split = split_hand_in(work, k)
        total = sum(work.values()) or 1.0
        jobs += [Job(s, part=i, split=tuple(tuple(p) for p in split),
                     expected_s=t * sum(work[n] for n in p) / total) for i, p in enumerate(split)]
    rank = {s: i for i, s in enumerate(order)}
    return sorted(jobs, key=lambda j: (-j.expected_s, rank[j.student], j.part))


class _Queue:
    """The jobs still to grade (students, or parts of their hand-ins), handed to workers in the order given (run_pool:
    plan_jobs): a job handed back avoids the lane it failed on while another lane is working. gated=True: no job is
    handed out before open() (the batch's one-off set-up, run_pool's `prepare`, runs while the lanes measure their
    GPUs)."""

    def __init__(self, students: list, lanes: list[Lane], gated: bool = False):
        self.pending = [j if isinstance(j, Job) else Job(j) for j in students]
        self.in_flight = 0
        self.live = {id(lane) for lane in lanes}
        self.cond = threading.Condition()
        self.opened = not gated

    def fill(self, jobs: list) -> None:
        """The jobs to hand out, in order (before open())."""
        with self.cond:
            self.pending += [j if isinstance(j, Job) else Job(j) for j in jobs]

    def open(self) -> None:
        with self.cond:
            self.opened = True
            self.cond.notify_all()

    def take(self, lane: Lane) -> Job | None:
        with self.cond:
            while True:
                if STOP.is_set():
                    return None
                others_live = self.live - {id(lane)}
                for j in self.pending if self.opened else []:
                    if id(lane) not in j.avoid or not others_live:
                        self.pending.remove(j)
                        self.in_flight += 1
                        return j
                if self.opened and not self.pending and not self.in_flight:
                    return None
                self.cond.wait(timeout=1.0)

    def waiting(self) -> int:
        """How many jobs wait to be handed out (a lane starts its next task process ahead only while some do)."""
        with self.cond:
            return len(self.pending)

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
