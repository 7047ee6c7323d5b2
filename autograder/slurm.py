"""Grading a class on a Slurm cluster: an sbatch job array, one task per student (or per chunk of students).

    autograder slurm submit week1 [--chunk N] [--partition P] [--time 01:00:00] [--account A] [--dry-run]
    autograder slurm collect week1        # merge what finished; list what did not, with its Slurm state
    autograder slurm resubmit week1       # a new array for the students with no result (and none queued)

Slurm schedules; the course does not. Each array task runs `python -m autograder.slurm task`, which grades its
students one by one with autograder.task.grade_task — the same code a pool worker runs — each into a folder of its
own under the shared folder <grading>/slurm/<week>/results/<student>/<array job>_<task>/ (its own gradebook.db, autograded notebooks,
verdicts, and result.json written last). Nothing but `collect` (autograder.slurm_collect) writes the class's
gradebook: it merges every finished result with autograder.merge.merge_result (replacing, keyed by student,
notebook and cell), so running it twice changes nothing and a task that failed, timed out or never ran costs only
its own students.

The grading folder (and the course checkout, and its Python) must be on a file system every node sees, at the
same path: the usual cluster home or project space. The secret seed reaches the tasks through the environment sbatch
exports from `autograder slurm submit` (never written into the script) or through --seed-file, a path the script
names. A task's state comes from Slurm: `sacct` (with accounting storage), else `sacct --completion` (a cluster with
job completion records only, as tools/slurm_local.sh sets up), else `scontrol show job`, and `squeue` for what is
still queued or running; a task that left no record anywhere is reported as never started.

A result counts only for the hand-in it graded: the task records the digest of the student's hand-in before it grades
it (<result folder>.handin, beside the folder), and `collect` compares it with the digest of the hand-in there now. A
student whose hand-in changed since is "not graded, resubmit" (the old grade is withdrawn from the class's gradebook
and report) until a task grades the new one; `resubmit` sends them. Where sbatch or squeue cannot reach Slurm (no
SLURM_CONF and no /etc/slurm/slurm.conf, a DNS SRV or connection error), the command says so in one line naming
SLURM_CONF.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shlex
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

from kernels.paths import write_whole

from .batch import _prepare_here, class_assignment, lane_figures, make_template
from .children import grading_lock, read_seed_file
from .plan import _gpu_count
from .task import RESULT, STARTED, _atomic_json, _slurm_ids, file_digests, grade_task, read_result, task_folder
from .release import ROOT, grading_dir
from .students import submission_folder
from .score import CPU_GRADING

DEFAULTS = {"chunk": 1, "partition": None, "time": "01:00:00", "account": None, "gres": "gpu:1",
            "cpus_per_task": 8, "mem": None, "max_parallel": None, "sbatch_args": []}


def shared_dir(week: str) -> Path:
    return grading_dir() / "slurm" / week


def _load_state(sdir: Path) -> dict:
    f = sdir / "jobs.json"
    return json.loads(f.read_text()) if f.exists() else {"submissions": []}


def _save_json(path: Path, data) -> None:
    write_whole(path, json.dumps(data, indent=1, sort_keys=True))  # whole or not at all (kernels.paths)


# ------------------------------------------------------------------------------------------------- the script
def submission_template(week: str, sdir: Path) -> Path:
    """The template gradebook the tasks of a submission made now start from: one per content of the week's sources
    (`batch._assignment_key`), under <sdir>/templates/<key>/. A submit after the sources changed gets a template of its
    own; an array submitted earlier keeps grading against the one its script names."""
    from .batch import _assignment_key

    return sdir / "templates" / _assignment_key(week) / "template.db"


def script(week: str, roster: Path, n_tasks: int, opts: dict, *, sdir: Path, template: Path,
           seed_file: str | None = None) -> str:
    """The sbatch script of one submission: an array of n_tasks tasks, task i grading line i of `roster` from
    `template`."""
    array = f"0-{n_tasks - 1}" + (f"%{opts['max_parallel']}" if opts.get("max_parallel") else "")
    lines = ["#!/bin/bash", f"#SBATCH --job-name=grade-{week}", f"#SBATCH --array={array}",
             f"#SBATCH --output={sdir / 'logs' / '%A_%a.out'}", "#SBATCH --nodes=1", "#SBATCH --ntasks=1",
             f"#SBATCH --cpus-per-task={opts['cpus_per_task']}", "#SBATCH --export=ALL"]
    if opts.get("gres"):
        lines.append(f"#SBATCH --gres={opts['gres']}")
    for key, flag in (("partition", "partition"), ("time", "time"), ("account", "account"), ("mem", "mem")):
        if opts.get(key):
            lines.append(f"#SBATCH --{flag}={opts[key]}")
    lines += [f"#SBATCH {a}" for a in opts.get("sbatch_args") or []]
    lines += ["",
              "# Written by `autograder slurm submit`: each task grades its line of the roster, each student into",
              f"# {sdir / 'results'}/<student>/ (merged into the gradebook by `autograder slurm collect {week}`).",
              "# The secret seed comes from the environment sbatch exports (COURSE_SECRET_SEED) or the file named",
              "# here; it is never written into this script.",
              "set -euo pipefail",
              f"cd {shlex.quote(str(ROOT))}",
              f"export PYTHONPATH={shlex.quote(str(ROOT))}${{PYTHONPATH:+:$PYTHONPATH}}",
              f"export COURSE_GRADING_DIR={shlex.quote(str(grading_dir()))}"]
    if not opts.get("gres"):  # a task that asks for no GPU: CPU grading on purpose (run_task refuses it otherwise)
        lines.append("export COURSE_CPU_GRADING=1")
    if seed_file:
        lines.append(f"export COURSE_SECRET_SEED_FILE={shlex.quote(str(Path(seed_file).expanduser().resolve()))}")
    lines.append(f"exec {shlex.quote(sys.executable)} -m autograder.slurm task {week} --roster "
                 f"{shlex.quote(str(roster))} --index \"$SLURM_ARRAY_TASK_ID\" --template {shlex.quote(str(template))}")
    return "\n".join(lines) + "\n"


def chunks(students: list[str], size: int) -> list[list[str]]:
    size = max(1, int(size))
    return [students[i:i + size] for i in range(0, len(students), size)]


def submit(week: str, students: list[str], opts: dict, *, secret: str | None, seed_file: str | None = None,
           dry_run: bool = False, out=print) -> str | None:
    """Write the roster and script of a new array for `students` and sbatch it (or print it: dry_run). Returns the
    array's job id."""
    sdir = shared_dir(week)
    state = _load_state(sdir)
    n = len(state["submissions"]) + 1
    roster = sdir / f"roster_{n}.txt"
    groups = chunks(students, opts["chunk"])
    template = submission_template(week, sdir)
    text = script(week, roster, len(groups), opts, sdir=sdir, template=template, seed_file=seed_file)
    if dry_run:
        out(text.rstrip("\n"))
        out(f"# roster {roster} ({len(groups)} task(s)):")
        for i, g in enumerate(groups):
            out(f"#   {i}: {' '.join(shlex.quote(x) for x in g)}")
        return None
    for d in ("logs", "results"):
        (sdir / d).mkdir(parents=True, exist_ok=True)
    with grading_lock(grading_dir(), f"autograder slurm submit {week}"):
        # The class's gradebook knows the assignment; every task's gradebook starts from a template that knows it.
        class_assignment(week, grading_dir())
        make_template(week, template.parent)
    roster.write_text("".join(json.dumps(g, ensure_ascii=False) + "\n" for g in groups), encoding="utf-8")
    path = sdir / f"job_{n}.sbatch"
    path.write_text(text)
    env = dict(os.environ)
    if secret is not None and not seed_file:
        env["COURSE_SECRET_SEED"] = secret
    try:
        r = subprocess.run(["sbatch", "--parsable", str(path)], env=env, capture_output=True, text=True, timeout=120)
    except FileNotFoundError:
        raise SystemExit("no sbatch on PATH: run `autograder slurm submit` on a login node of the cluster") from None
    if r.returncode != 0:
        raise SystemExit(unreachable("sbatch", r)
                         or f"sbatch refused the job ({r.returncode}): {r.stderr.strip() or r.stdout.strip()}")
    job = r.stdout.strip().split(";")[0]
    state["submissions"].append({"job": job, "roster": str(roster), "script": str(path), "students": groups,
                                 "options": opts, "submitted_at": time.time()})
    state.setdefault("first_submitted_at", time.time())
    _save_json(sdir / "jobs.json", state)
    out(f"submitted job array {job}: {len(groups)} task(s) for {len(students)} student(s) of {week}; "
        f"results under {sdir / 'results'}; then: autograder slurm collect {week}")
    if not opts.get("gres"):

        out(f"the tasks ask for no GPU (--gres ''): they grade on CPU. {CPU_GRADING}")
    return job


# -------------------------------------------------------------------------------------------------- the task
def run_task(week: str, roster: Path, index: int, template: Path | None = None) -> int:
    """One array task: measure this node's GPU (if any) once, then grade each student of line `index`, each from a
    copy of `template` (the submission's; a script written before scripts named one: <sdir>/template.db)."""
    students = roster_line(roster, index)
    sdir = shared_dir(week)
    if not os.environ.get("COURSE_SECRET_SEED", "").strip():
        f = os.environ.get("COURSE_SECRET_SEED_FILE")
        if not f:
            print("no secret seed: COURSE_SECRET_SEED or COURSE_SECRET_SEED_FILE", file=sys.stderr)
            return 2
        try:
            os.environ["COURSE_SECRET_SEED"] = read_seed_file(f)
        except SystemExit as exc:
            print(exc, file=sys.stderr)
            return 2
    task = f"{os.environ.get('SLURM_ARRAY_JOB_ID', 'local')}_{os.environ.get('SLURM_ARRAY_TASK_ID', index)}"
    if no_gpu := _no_gpu_here():  # a GPU task on a node that shows none: nobody graded on CPU unasked
        for student in students:
            out = results_dir(sdir, student) / task
            _save_handin(out, handin_digest(week, student))
            refuse_task(week, student, out, no_gpu)
        print(no_gpu, file=sys.stderr)
        return 1
    batch_dir = sdir / "baselines" / task
    batch_dir.mkdir(parents=True, exist_ok=True)
    os.environ["COURSE_BATCH_DIR"] = str(batch_dir)
    _prepare_here(week)  # this process loads no student code: students are graded in processes of their own
    bad = 0
    for student in students:
        out = results_dir(sdir, student) / task
        # the hand-in as it is before grading: a change while it is graded makes the result count for no hand-in
        _save_handin(out, handin_digest(week, student))
        res = grade_task(week, student, out, submitted=grading_dir() / "submitted",
                         template=template or sdir / "template.db", batch_dir=batch_dir,
                         figures=lane_figures(batch_dir))
        print(f"{student}: {res['state']} in {res['wall_s']:.0f} s (exit {res['returncode']})", flush=True)
        bad += res["state"] != "done"
    return 1 if bad else 0


def _no_gpu_here() -> str | None:
    """Why this task must not grade here (a task that asked for a GPU on a node where none is visible), or None."""
    if os.environ.get("COURSE_CPU_GRADING") or (_gpu_count() > 0 and not os.environ.get("COURSE_FORCE_CPU")):
        return None

    return (f"node {socket.gethostname()} shows this task no GPU (CUDA_VISIBLE_DEVICES="
            f"{os.environ.get('CUDA_VISIBLE_DEVICES', 'unset')}"
            + (", COURSE_FORCE_CPU is set" if os.environ.get("COURSE_FORCE_CPU") else "") + "): not graded, "
            f"resubmit to a GPU partition (--partition, --gres). {CPU_GRADING}; to grade on CPU on purpose, submit "
            "with --gres ''")


def refuse_task(week: str, student: str, out: Path, why: str) -> None:
    """A failed result that says why the student was not graded (collect shows it)."""
    out.mkdir(parents=True, exist_ok=True)
    info = {"student": student, "week": week, "host": socket.gethostname(), "slurm": _slurm_ids(),
            "started_at": time.time()}
    _atomic_json(out / STARTED, info)
    _atomic_json(out / RESULT, {**info, "state": "failed", "returncode": None, "why": why, "finished_at": time.time(),
                                "log_tail": ""})


def roster_line(roster: Path, index: int) -> list[str]:
    """The students of line `index` of a roster: a JSON list (any id: spaces, quotes, non-ASCII); a roster written
    before (ids separated by spaces) is still read."""
    line = Path(roster).read_text(encoding="utf-8").splitlines()[index]
    return json.loads(line) if line.lstrip().startswith("[") else line.split()


def handin_digest(week: str, student: str) -> str:
    """What identifies a student's hand-in of `week`: the names and bytes of every file of their folder
    (students.submission_folder: a mapped id finds its folder; Jupyter's checkpoints left out); "" when there is
    none."""
    folder = submission_folder(grading_dir() / "submitted", student, week)
    if not folder.is_dir():
        return ""
    files = file_digests(folder, skip={".ipynb_checkpoints"})
    return hashlib.sha256(json.dumps(files, sort_keys=True).encode()).hexdigest()[:20]


def _handin_file(rdir: Path) -> Path:
    """Where a result folder's hand-in digest is kept: beside the folder, which grade_task empties first."""
    return Path(rdir).with_name(Path(rdir).name + ".handin")


def _save_handin(rdir: Path, digest: str) -> None:
    f = _handin_file(rdir)
    f.parent.mkdir(parents=True, exist_ok=True)
    tmp = f.with_name(f".{f.name}.tmp")
    tmp.write_text(digest + "\n")
    os.replace(tmp, f)


def graded_handin(rdir: Path) -> str | None:
    """The digest of the hand-in a result graded; None for a result written before tasks recorded it."""
    try:
        return _handin_file(rdir).read_text().strip()
    except OSError:
        return None


def results_dir(sdir: Path, student: str) -> Path:
    """results/<task folder>/: named as the pool names a task's folder (task.task_folder: the id itself where it is
    plain), since nbgrader reads the task's path as a regular expression it does not escape."""
    return Path(sdir) / "results" / task_folder(student)


def results_of(sdir: Path, student: str) -> list[Path]:
    """Every result folder of a student: results/<student>/<array job>_<task>/ (one per array task that graded
    them; an earlier layout's results/<student>/ too)."""
    base = results_dir(sdir, student)
    return [p for p in [base, *sorted(base.glob("*"))] if p.is_dir() and (p / "result.json").exists()
            or p.is_dir() and (p / STARTED).exists()]


def best_result(sdir: Path, student: str, handin: str | None = None) -> tuple[Path | None, dict | None]:
    """The newest finished result of a student (by its finish time), whichever array task wrote it; given `handin`
    (handin_digest), the newest that graded that hand-in: a result of an earlier hand-in does not count. (A result
    written before tasks recorded the hand-in counts for any: nothing tells which one it graded.)"""
    best = (None, None)
    for p in results_of(sdir, student):
        res = read_result(p)
        graded = graded_handin(p) if handin is not None else None
        if res is not None and res.get("state") == "done" and graded in (None, handin) and \
                (best[1] is None or (res.get("finished_at") or 0) > (best[1].get("finished_at") or 0)):
            best = (p, res)
    return best


# --------------------------------------------------------------------------------------------- Slurm's word
def _run(cmd: list[str]) -> subprocess.CompletedProcess | None:
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None


SLURM_CONF_DEFAULT = Path("/etc/slurm/slurm.conf")  # where the client commands look when SLURM_CONF is not set
# What sbatch and squeue print when they cannot reach Slurm at all: no configuration (configless lookup through DNS
# SRV records failed, a SLURM_CONF naming no file), or no controller answering.
_UNREACHABLE = ("dns srv", "configuration source", "unable to process configuration file", "unable to read",
                "unable to contact slurm controller", "connection refused", "unable to establish")
_ANSWERED = ("invalid job id", "batch job submission failed")  # the controller's own refusals


def unreachable(cmd: str, r: subprocess.CompletedProcess) -> str | None:
    """One line saying that `cmd` failed because it cannot reach Slurm, and what to set SLURM_CONF to; None when
    it ran, or failed for another reason (a job id Slurm no longer knows, a partition it refuses)."""
    text = (r.stderr or "") + (r.stdout or "")
    hits = [ln.strip() for ln in text.splitlines() if any(m in ln.lower() for m in _UNREACHABLE)]
    conf = os.environ.get("SLURM_CONF")
    no_conf = not conf and not SLURM_CONF_DEFAULT.exists()
    answered = any(m in text.lower() for m in _ANSWERED)  # a configless cluster's controller did answer
    if r.returncode == 0 or not (hits or no_conf and not answered):
        return None
    now = (f"SLURM_CONF={conf}" + ("" if Path(conf).is_file() else ", no such file") if conf else
           "SLURM_CONF is not set" + (f" and there is no {SLURM_CONF_DEFAULT}" if no_conf else ""))
    said = (hits or [ln.strip() for ln in text.splitlines() if ln.strip()] or [f"exit {r.returncode}"])[-1]
    return (f"{cmd} cannot reach Slurm ({now}; {said[:200]}): set SLURM_CONF to the cluster's slurm.conf "
            "(export SLURM_CONF=/path/to/slurm.conf, the path the cluster's documentation gives; the single-node "
            "Slurm of tools/slurm_local.sh: SLURM_CONF=/tmp/course-slurm/slurm.conf), or run on a login node")


def queued(jobs: list[str]) -> dict[str, str]:
    """Array tasks still in the queue: "<job>_<index>" -> PENDING / RUNNING / ... (squeue). A squeue that cannot
    reach Slurm stops the command (`unreachable`): every queued task would otherwise read as never started."""
    if not jobs:
        return {}
    r = _run(["squeue", "-h", "-r", "-j", ",".join(jobs), "-o", "%i|%T"])
    if r is not None and r.returncode != 0 and unreachable("squeue", r):
        raise SystemExit(unreachable("squeue", r))
    out = {}
    for line in (r.stdout if r and r.returncode == 0 else "").splitlines():
        tid, _, st = line.partition("|")
        out[tid.strip()] = st.strip()
    return out


def finished_state(job: str, index: int, raw: str | None) -> tuple[str, str] | None:
    """(state, source) of a finished array task from Slurm's records, or None when Slurm keeps none."""
    r = _run(["sacct", "-X", "-n", "-P", "-j", f"{job}_{index}", "-o", "JobID,State,ExitCode"])
    text = (r.stdout + r.stderr) if r else ""
    if r and r.returncode == 0 and "accounting storage is disabled" not in text:
        for line in r.stdout.splitlines():
            f = line.split("|")
            if len(f) >= 3 and f[0] == f"{job}_{index}":
                return f"{f[1]} (exit {f[2]})", "sacct"
    if raw:  # job completion records (sacct --completion) know a task by its own job id only
        r = _run(["sacct", "--completion", "-n", "-P", "-j", raw, "-o", "JobID,State,ExitCode"])
        for line in (r.stdout if r and r.returncode == 0 else "").splitlines():
            f = line.split("|")
            if len(f) >= 3 and f[0] == raw:
                return f"{f[1]} (exit {f[2]})", "sacct --completion"
    r = _run(["scontrol", "-o", "show", "job", raw or f"{job}_{index}"])
    for line in (r.stdout if r and r.returncode == 0 else "").splitlines():
        fields = dict(kv.split("=", 1) for kv in line.split() if "=" in kv)
        if fields.get("ArrayTaskId") == str(index) or fields.get("JobId") == raw:
            return f"{fields.get('JobState', '?')} (exit {fields.get('ExitCode', '?')})", "scontrol"
    return None


def forget(grading: Path, students: list[str], week: str | None = None) -> list[str]:
    """Take students out of the Slurm state of `week` (of every week: None), for `autograder forget` (which calls
    it after autograder.record.forget; record cannot import this module, which imports record): out of the arrays'
    student lists in jobs.json (a task's list keeps its place, so the array indices stay right) and out of
    merged.json, their result folders (and hand-in digests) removed; so `collect` neither waits for them nor writes
    their row again. A task of theirs still queued runs, and what it writes is never collected. Returns what was
    done, one line each."""
    gone, said = set(students), []
    for sdir in sorted(Path(grading).glob(f"slurm/{week or '*'}")):
        state = _load_state(sdir)
        hit = sorted({s for sub in state["submissions"] for g in sub["students"] for s in g if s in gone})
        for sub in state["submissions"]:
            sub["students"] = [[s for s in g if s not in gone] for g in sub["students"]]
        if hit:
            _save_json(sdir / "jobs.json", state)
        merged_f = sdir / "merged.json"
        merged = json.loads(merged_f.read_text()) if merged_f.exists() else {}
        if gone & set(merged):
            _save_json(merged_f, {k: v for k, v in merged.items() if k not in gone})
        for student in hit:
            said.append(f"{student}: out of the Slurm arrays of {sdir.name} ({sdir / 'jobs.json'})")
        for student in students:
            if results_dir(sdir, student).exists():
                shutil.rmtree(results_dir(sdir, student))
                said.append(f"{student}: {results_dir(sdir, student)} removed")
    return said


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m autograder.slurm")
    sub = ap.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("task", help="(run by sbatch) grade one line of a roster")
    t.add_argument("week")
    t.add_argument("--roster", required=True, type=Path)
    t.add_argument("--index", required=True, type=int)
    t.add_argument("--template", type=Path, help="the submission's template gradebook")
    args = ap.parse_args(argv)
    return run_task(args.week, args.roster, args.index, args.template)


if __name__ == "__main__":
    sys.exit(main())
