"""`autograder slurm submit / collect / resubmit` through a real Slurm: a single-node cluster on this machine
(tools/slurm_local.sh: Debian's slurm-wlm, munged + slurmctld + slurmd on localhost, installed with apt-get when
missing), no GPU.

The CPU-gradable part of the synthetic cohort (autograder/cohort.py: blank, malformed, tamper, scalar loads) goes
through sbatch as a job array of one task per student, graded in CPU mode. One task is cancelled with `scancel`
while it runs: `collect` merges the other three into the gradebook with the scores the cohort expects, names the
cancelled student with its Slurm state (CANCELLED, from `sacct --completion`), and a second `collect` changes
nothing; `resubmit` sends only that student, and the next `collect` completes the class.

Where Slurm cannot start (no root or sudo, no apt-get), the test skips and says why; on a machine that can install
and start it (root and apt-get: the course's machines and CI), a failure to start is a failure. COURSE_REQUIRE_SLURM=1
makes every failure to start a failure.
"""
from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from autograder.release import ROOT

WEEK = "week1"
COHORT = ["blank", "malformed", "tamper", "naive_loads-scalar_loads"]
SCRIPT = ROOT / "tools" / "slurm_local.sh"


def _can_install() -> bool:
    """Root (or password-less sudo) and apt-get: tools/slurm_local.sh can install and start Slurm here."""
    if os.geteuid() == 0:
        root = True
    elif shutil.which("sudo"):
        root = subprocess.run(["sudo", "-n", "true"], capture_output=True).returncode == 0
    else:
        root = False
    return root and shutil.which("apt-get") is not None


@pytest.fixture(scope="module")
def slurm():
    """A running single-node Slurm; SLURM_CONF set for the client commands. Stopped afterwards when this fixture
    started it (one that was already running, another session's, is left as it was)."""
    conf_dir = Path(os.environ.get("COURSE_SLURM_DIR", "/tmp/course-slurm"))
    env = dict(os.environ, COURSE_SLURM_DIR=str(conf_dir), SLURM_CONF=str(conf_dir / "slurm.conf"))
    was_up = subprocess.run(["bash", str(SCRIPT), "status"], env=env, capture_output=True).returncode == 0
    t0 = time.perf_counter()
    r = subprocess.run(["bash", str(SCRIPT), "start"], env=env, capture_output=True, text=True, timeout=900)
    if r.returncode != 0:
        why = f"Slurm could not start here (tools/slurm_local.sh start): {(r.stderr or r.stdout).strip()[-1500:]}"
        if os.environ.get("COURSE_REQUIRE_SLURM") == "1" or _can_install():
            pytest.fail(why)
        pytest.skip(why)
    print(f"single-node Slurm up in {time.perf_counter() - t0:.1f} s ({'already running' if was_up else 'started'})")
    old = os.environ.get("SLURM_CONF")
    os.environ["SLURM_CONF"] = env["SLURM_CONF"]
    try:
        yield env
    finally:
        if old is None:
            os.environ.pop("SLURM_CONF", None)
        else:
            os.environ["SLURM_CONF"] = old
        if not was_up:
            subprocess.run(["bash", str(SCRIPT), "stop"], env=env, capture_output=True, timeout=120)


def _cli(env, *args, timeout=600):
    return subprocess.run([sys.executable, "-m", "autograder.cli", *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=timeout)


def _wait(what, cond, timeout, step=0.5):
    t0 = time.time()
    while time.time() - t0 < timeout:
        if cond():
            return
        time.sleep(step)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def _queue_empty(job: str) -> bool:
    r = subprocess.run(["squeue", "-h", "-j", job], capture_output=True, text=True)
    return r.returncode == 0 and not r.stdout.strip()


def _scores(grading: Path) -> dict:
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{grading / 'gradebook.db'}") as gb:
        return {s.student.id: s.score for s in gb.assignment_submissions(WEEK)}


def test_dry_run_prints_the_array_script(tmp_path):
    env = dict(os.environ, COURSE_GRADING_DIR=str(tmp_path / "grading"), PYTHONPATH=str(ROOT))
    for s in ("ann", "ben", "cy"):
        (tmp_path / "grading" / "submitted" / s / WEEK).mkdir(parents=True)
    r = _cli(env, "slurm", "submit", WEEK, "--dry-run", "--partition", "gpu", "--time", "00:30:00", "--account",
             "cs101", "--chunk", "2", "--sbatch-arg=--qos=short", timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    out = r.stdout
    for line in ("#SBATCH --array=0-1", "#SBATCH --gres=gpu:1", "#SBATCH --partition=gpu", "#SBATCH --time=00:30:00",
                 "#SBATCH --account=cs101", "#SBATCH --qos=short", "-m autograder.slurm task week1",
                 "#   0: ann ben", "#   1: cy"):
        assert line in out, f"{line!r} missing from:\n{out}"
    assert not (tmp_path / "grading" / "slurm").exists(), "a dry run writes nothing"


@pytest.mark.slow
def test_slurm_array_cancel_one_task_collect_resubmit(slurm, tmp_path):
    from autograder.cohort import build

    grading = tmp_path / "grading"
    made = {m.student: m for m in build(grading / "submitted", WEEK, COHORT)}
    env = dict(os.environ, **{k: slurm[k] for k in ("SLURM_CONF",)}, COURSE_GRADING_DIR=str(grading),
               PYTHONPATH=str(ROOT), COURSE_FORCE_CPU="1")
    t0 = time.perf_counter()
    r = _cli(env, "slurm", "submit", WEEK, "--seed", "7", "--gres", "", "--cpus-per-task", "1", "--time",
             "00:20:00")
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    sdir = grading / "slurm" / WEEK
    state = json.loads((sdir / "jobs.json").read_text())
    job = state["submissions"][0]["job"]
    roster = [g[0] for g in state["submissions"][0]["students"]]
    victim = "tamper"
    idx = roster.index(victim)
    # cancel the victim's task while it runs (its own result folder says it started)
    _wait(f"{victim}'s task to start", lambda: any((sdir / "results" / victim).glob("*/started.json")), 300)
    subprocess.run(["scancel", f"{job}_{idx}"], check=True, env=env)
    _wait("the array to leave the queue", lambda: _queue_empty(job), 600)
    first = time.perf_counter() - t0

    r = _cli(env, "slurm", "collect", WEEK)
    assert r.returncode == 2, r.stdout[-3000:] + r.stderr[-3000:]
    line = next((ln for ln in r.stdout.splitlines() if f"NOT GRADED {victim}" in ln), "")
    assert "CANCELLED" in line and "(sacct" in line, r.stdout  # the state comes from Slurm's own records
    scores = _scores(grading)
    assert victim not in scores, "the cancelled student has no grade"
    for s in made:
        if s != victim:
            assert scores[s] == pytest.approx(made[s].expected_cpu), (s, scores)
    report = {ln.split(",")[0]: ln for ln in (grading / f"report_{WEEK}.csv").read_text().splitlines()}
    assert "not graded, retry" in report[victim] and "CANCELLED" in report[victim]

    # idempotent: a second collect changes nothing
    files = {p: p.read_bytes() for p in (grading / "gradebook.db", grading / f"batch_{WEEK}.json",
                                         sdir / "merged.json")}
    r2 = _cli(env, "slurm", "collect", WEEK)
    assert r2.returncode == 2 and "nothing new to merge" in r2.stdout, r2.stdout
    assert {p: p.read_bytes() for p in files} == files

    # resubmit: only the missing student
    t1 = time.perf_counter()
    r = _cli(env, "slurm", "resubmit", WEEK, "--seed", "7")
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    state = json.loads((sdir / "jobs.json").read_text())
    assert len(state["submissions"]) == 2 and state["submissions"][1]["students"] == [[victim]]
    _wait("the resubmitted task", lambda: _queue_empty(state["submissions"][1]["job"]), 600)
    r = _cli(env, "slurm", "collect", WEEK)
    # every student graded; the exit status 2 is the malformed hand-in, named as grade names it
    assert r.returncode == 2 and "NOT GRADED" not in r.stdout, r.stdout[-3000:] + r.stderr[-3000:]
    assert "HAND-IN MISTAKES (1)" in r.stdout and "NOT READABLE malformed:" in r.stdout, r.stdout
    scores = _scores(grading)
    assert scores == pytest.approx({s: m.expected_cpu for s, m in made.items()})
    print(f"Slurm (1 node, {os.cpu_count()} CPUs, CPU grading): {len(made)} students as an array in {first:.0f} s "
          f"(one task cancelled); resubmit of 1 in {time.perf_counter() - t1:.0f} s")


# ------------------------------------------------------------------------------------- ids, queue, provenance
FAKE = {
    "sbatch": 'n=$(( $(cat "$FAKE_SLURM/next" 2>/dev/null || echo 41) + 1 )); echo $n > "$FAKE_SLURM/next"; '
              'cp "${@: -1}" "$FAKE_SLURM/job_$n.sbatch"; echo "$n"',
    "squeue": 'cat "$FAKE_SLURM/queue" 2>/dev/null; true',
    "sacct": "exit 1",
    "scontrol": "exit 1",
}


def test_a_submit_after_the_sources_changed_grades_against_their_template(tmp_path, monkeypatch):
    """Each submission's tasks start from the template of the week's sources at its submit, named in its script: a
    submit after the sources changed (another assignment key) gets a template of its own, and the array submitted
    before keeps the template it named. (Fake sbatch; the template's content stands in for generate_assignment's.)"""
    import random

    from autograder import batch, slurm

    fake = tmp_path / "fake"
    fake.mkdir()
    (fake / "sbatch").write_text("#!/bin/bash\n" + FAKE["sbatch"] + "\n")
    (fake / "sbatch").chmod(0o755)
    monkeypatch.setenv("FAKE_SLURM", str(fake))
    monkeypatch.setenv("PATH", f"{fake}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("COURSE_GRADING_DIR", str(tmp_path / "grading"))
    monkeypatch.setattr(slurm, "class_assignment", lambda week, grading: None)
    sources = {"key": f"k{random.randrange(10**6)}", "template": tmp_path / "t1.db"}
    sources["template"].write_bytes(random.randbytes(64))
    monkeypatch.setattr(batch, "_assignment_key", lambda week: sources["key"])
    monkeypatch.setattr(batch, "assignment_template", lambda week: sources["template"])

    def submit_and_read(job: int) -> Path:
        slurm.submit(WEEK, ["ann"], dict(slurm.DEFAULTS, gres=""), secret="7", out=lambda *a: None)
        line = (fake / f"job_{job}.sbatch").read_text().splitlines()[-1]
        return Path(shlex.split(line)[shlex.split(line).index("--template") + 1])

    first = submit_and_read(42)
    assert first.read_bytes() == (tmp_path / "t1.db").read_bytes() and sources["key"] in first.parts
    old_key = sources["key"]
    sources["key"], sources["template"] = old_key + "x", tmp_path / "t2.db"
    sources["template"].write_bytes(random.randbytes(64))
    second = submit_and_read(43)
    assert second != first and second.read_bytes() == (tmp_path / "t2.db").read_bytes()
    assert first.read_bytes() == (tmp_path / "t1.db").read_bytes(), "the earlier array's template is left as it was"


@pytest.mark.slow
def test_ids_with_spaces_quotes_and_accents_queue_and_provenance(tmp_path):
    """No Slurm needed: sbatch, squeue, sacct and scontrol are stand-ins; the array's tasks are run here, by the
    script sbatch was handed. Ids with a space, a quote and non-ASCII letters are graded as themselves; a student
    still queued is said to be queued (exit 3, not an error); a student re-submitted in an array that has not run
    keeps the earlier array's result, and collect says which task it came from."""
    from autograder.cohort import build

    grading = tmp_path / "grading"
    build(grading / "submitted", WEEK, ["malformed"])  # no nbgrader run: fast
    ids = ["ann lee", "o'neil", "zoë ø"]
    for s in ids:
        shutil.copytree(grading / "submitted" / "malformed", grading / "submitted" / s)
    shutil.rmtree(grading / "submitted" / "malformed")
    fake = tmp_path / "fake"
    fake.mkdir()
    for name, body in FAKE.items():
        (fake / name).write_text("#!/bin/bash\n" + body + "\n")
        (fake / name).chmod(0o755)
    env = dict(os.environ, COURSE_GRADING_DIR=str(grading), PYTHONPATH=str(ROOT), COURSE_FORCE_CPU="1",
               FAKE_SLURM=str(fake), PATH=f"{fake}{os.pathsep}{Path(sys.executable).parent}{os.pathsep}"
                                         f"{os.environ['PATH']}", MPLCONFIGDIR=str(tmp_path / "mpl"))
    r = _cli(env, "slurm", "submit", WEEK, "--seed", "7", "--gres", "", timeout=300)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    sdir = grading / "slurm" / WEEK
    state = json.loads((sdir / "jobs.json").read_text())
    assert state["submissions"][0]["students"] == [[s] for s in sorted(ids)]

    def run_task(job: str, i: int):
        # what sbatch --export=ALL hands the task: the environment of `submit`, the seed among it
        e = dict(env, SLURM_ARRAY_JOB_ID=job, SLURM_ARRAY_TASK_ID=str(i), SLURM_JOB_ID=f"{int(job) + 100 + i}",
                 COURSE_SECRET_SEED="7")
        t = subprocess.run(["bash", str(fake / f"job_{job}.sbatch")], env=e, capture_output=True, text=True,
                           timeout=300)
        assert t.returncode == 0, t.stdout[-2000:] + t.stderr[-2000:]

    order = sorted(ids)
    run_task("42", order.index("ann lee"))
    run_task("42", order.index("o'neil"))
    (fake / "queue").write_text(f"42_{order.index('zoë ø')}|PENDING\n")
    r = _cli(env, "slurm", "collect", WEEK, timeout=300)
    # exit 2, not 3 (still queued): the two graded hand-ins are not notebooks, a mistake collect names
    assert r.returncode == 2 and "HAND-IN MISTAKES (2)" in r.stdout, r.stdout[-3000:] + r.stderr[-3000:]
    assert "NOT GRADED" not in r.stdout and "queued zoë ø: Slurm task 42_2 is PENDING" in r.stdout, r.stdout
    assert _scores(grading) == {"ann lee": 0.0, "o'neil": 0.0}
    report = {row.split(",")[0].strip('"'): row for row in (grading / f"report_{WEEK}.csv").read_text().splitlines()}
    assert "queued" in report["zoë ø"] and "NotJSONError" in report["ann lee"]

    # ann lee again, in a new array that is still queued: the earlier result stands, and collect says so
    r = _cli(env, "slurm", "submit", WEEK, "--seed", "7", "--gres", "", "--students", "ann lee", timeout=300)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    (fake / "queue").write_text("42_2|PENDING\n43_0|PENDING\n")
    r = _cli(env, "slurm", "collect", WEEK, timeout=300)
    assert r.returncode == 2, r.stdout[-3000:] + r.stderr[-3000:]
    assert "ann lee: graded by array task 42_0 (Slurm task 43_0 (submitted later) is PENDING)" in r.stdout, r.stdout


# ------------------------------------------------------------------------------ hand-ins, forget, no Slurm reachable
def _fake_slurm(tmp_path: Path, grading: Path, **bodies) -> tuple[Path, dict]:
    """Stand-ins for sbatch, squeue, sacct and scontrol (FAKE, or `bodies`) in <tmp>/fake, and the environment of a
    command that finds them first."""
    fake = tmp_path / "fake"
    fake.mkdir(exist_ok=True)
    for name, body in {**FAKE, **bodies}.items():
        (fake / name).write_text("#!/bin/bash\n" + body + "\n")
        (fake / name).chmod(0o755)
    env = dict(os.environ, COURSE_GRADING_DIR=str(grading), PYTHONPATH=str(ROOT), COURSE_FORCE_CPU="1",
               FAKE_SLURM=str(fake), PATH=f"{fake}{os.pathsep}{Path(sys.executable).parent}{os.pathsep}"
                                         f"{os.environ['PATH']}", MPLCONFIGDIR=str(tmp_path / "mpl"))
    return fake, env


def _run_array_task(env: dict, fake: Path, job: str, i: int) -> None:
    """Run task i of array `job` here, by the script sbatch was handed, with what sbatch --export=ALL hands it."""
    e = dict(env, SLURM_ARRAY_JOB_ID=job, SLURM_ARRAY_TASK_ID=str(i), SLURM_JOB_ID=f"{int(job) + 100 + i}",
             COURSE_SECRET_SEED="7")
    t = subprocess.run(["bash", str(fake / f"job_{job}.sbatch")], env=e, capture_output=True, text=True, timeout=300)
    assert t.returncode == 0, t.stdout[-2000:] + t.stderr[-2000:]


def _submit_run_collect(env: dict, fake, n: int, code: int = 0) -> str:
    """Stand-in Slurm: submit the week, run its array's n tasks (job 42) here, collect: all n graded, exit `code`
    (2: hand-in mistakes named). Returns what collect printed."""
    r = _cli(env, "slurm", "submit", WEEK, "--seed", "7", "--gres", "", timeout=300)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    for i in range(n):
        _run_array_task(env, fake, "42", i)
    r = _cli(env, "slurm", "collect", WEEK, timeout=300)
    assert r.returncode == code and f"{n} of {n} student(s) graded" in r.stdout, r.stdout[-3000:] + r.stderr[-3000:]
    return r.stdout


@pytest.mark.slow
def test_a_result_counts_only_for_the_hand_in_it_graded_and_forget_leaves_slurm(tmp_path):
    """Stand-in Slurm, the array's tasks run here. Two students hand in again; the later array grades one of them
    and the other's task never runs (cancelled): collect exits 2, says the other is not graded because the hand-in
    changed, withdraws the old grade (gradebook, report), and resubmit sends that student. `forget` of a student
    takes them out of the Slurm state: the next collect neither names them nor writes their row again. Each collect
    names the hand-ins that are not notebooks (not JSON) and exits 2, as the grade command does."""
    from autograder.cohort import build

    grading = tmp_path / "grading"
    build(grading / "submitted", WEEK, ["malformed"])  # not JSON: graded 0 without nbgrader (fast)
    nb = next((grading / "submitted" / "malformed" / WEEK).glob("*.ipynb"))
    for s in ("ann", "ben", "cy"):
        shutil.copytree(grading / "submitted" / "malformed", grading / "submitted" / s)
    shutil.rmtree(grading / "submitted" / "malformed")
    fake, env = _fake_slurm(tmp_path, grading)
    sdir = grading / "slurm" / WEEK
    out = _submit_run_collect(env, fake, 3, code=2)
    assert f"3 hand-ins not readable: ann/{WEEK}/{nb.name}, ben/{WEEK}/{nb.name}, cy/{WEEK}/{nb.name}" in out, out
    assert "NOT READABLE ann:" in out and "HAND-IN MISTAKES (3): once the hand-ins are mended, autograder slurm " \
        f"submit {WEEK} --students ann,ben,cy" in out, out

    for s in ("ann", "ben"):  # a new hand-in each (still not JSON: the score stays 0, the content changed)
        f = grading / "submitted" / s / WEEK / nb.name
        f.write_text(f.read_text() + f"\n{s} again\n")
    r = _cli(env, "slurm", "submit", WEEK, "--seed", "7", "--gres", "", "--students", "ann,ben", timeout=300)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    _run_array_task(env, fake, "43", 0)  # ann's; ben's task 43_1 is cancelled before it runs (no record of it)
    r = _cli(env, "slurm", "collect", WEEK, timeout=300)
    assert r.returncode == 2, r.stdout[-3000:] + r.stderr[-3000:]
    assert "2 of 3 student(s) graded" in r.stdout and "ann: graded by array task 43_0" in r.stdout, r.stdout
    line = next((ln for ln in r.stdout.splitlines() if "NOT GRADED ben" in ln), "")
    assert "hand-in changed after array task 42_1 graded it" in line and "43_1" in line, r.stdout
    assert _scores(grading) == {"ann": 0.0, "cy": 0.0}, "ben's grade of the earlier hand-in is withdrawn"
    report = {row.split(",")[0]: row for row in (grading / f"report_{WEEK}.csv").read_text().splitlines()}
    assert "not graded" in report["ben"] and "hand-in changed" in report["ben"], report["ben"]

    r = _cli(env, "slurm", "resubmit", WEEK, "--seed", "7", timeout=300)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    state = json.loads((sdir / "jobs.json").read_text())
    assert [s["students"] for s in state["submissions"]][2:] == [[["ben"]]], "resubmit sends ben, and only ben"
    _run_array_task(env, fake, "44", 0)

    r = _cli(env, "forget", "cy", timeout=300)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    r = _cli(env, "slurm", "collect", WEEK, timeout=300)
    assert r.returncode == 2 and "2 of 2 student(s) graded" in r.stdout, r.stdout[-3000:] + r.stderr[-3000:]
    assert "HAND-IN MISTAKES (2)" in r.stdout and "cy" not in r.stdout.split("report:", 1)[1], r.stdout
    assert _scores(grading) == {"ann": 0.0, "ben": 0.0}
    assert "cy" not in {row.split(",")[0] for row in (grading / f"report_{WEEK}.csv").read_text().splitlines()}


@pytest.mark.slow
def test_a_gpu_task_on_a_node_with_no_gpu_grades_nobody_on_cpu(tmp_path):
    """Stand-in Slurm: an array submitted for GPUs (the default --gres gpu:1) whose task lands where no GPU is visible
    grades nobody on CPU: its students are not graded, collect says why (the node, CUDA_VISIBLE_DEVICES, how to grade
    on CPU on purpose) and exits 2. Submitted with --gres '' (CPU on purpose), the same task grades, and submit says
    what CPU grading awards."""
    from autograder.cohort import build
    from autograder.score import CPU_GRADING

    grading = tmp_path / "grading"
    build(grading / "submitted", WEEK, ["malformed"])
    fake, env = _fake_slurm(tmp_path, grading)
    r = _cli(env, "slurm", "submit", WEEK, "--seed", "7", timeout=300)
    assert r.returncode == 0 and CPU_GRADING not in r.stdout, r.stdout[-2000:] + r.stderr[-2000:]
    e = dict(env, SLURM_ARRAY_JOB_ID="42", SLURM_ARRAY_TASK_ID="0", SLURM_JOB_ID="142", COURSE_SECRET_SEED="7")
    t = subprocess.run(["bash", str(fake / "job_42.sbatch")], env=e, capture_output=True, text=True, timeout=300)
    assert t.returncode == 1 and "shows this task no GPU" in t.stderr, t.stdout[-2000:] + t.stderr[-2000:]
    r = _cli(env, "slurm", "collect", WEEK, timeout=300)
    assert r.returncode == 2 and "0 of 1 student(s) graded" in r.stdout, r.stdout[-3000:] + r.stderr[-3000:]
    line = next((ln for ln in r.stdout.splitlines() if "NOT GRADED malformed" in ln), "")
    assert "shows this task no GPU" in line and "--gres ''" in line, r.stdout
    assert _scores(grading) == {}

    r = _cli(env, "slurm", "resubmit", WEEK, "--seed", "7", "--gres", "", timeout=300)
    assert r.returncode == 0 and CPU_GRADING in r.stdout, r.stdout[-2000:] + r.stderr[-2000:]
    _run_array_task(env, fake, "43", 0)
    r = _cli(env, "slurm", "collect", WEEK, timeout=300)
    assert "1 of 1 student(s) graded" in r.stdout and _scores(grading) == {"malformed": 0.0}, r.stdout[-3000:]


def test_slurm_out_of_reach_is_one_line_naming_slurm_conf(tmp_path, monkeypatch):
    """sbatch and squeue that cannot reach Slurm (no SLURM_CONF, no /etc/slurm/slurm.conf: the configless lookup
    through DNS SRV fails; a controller that does not answer) stop the command with one line naming SLURM_CONF; a
    job id Slurm no longer knows is no such failure."""
    from autograder import slurm

    grading = tmp_path / "grading"
    dns = ('echo "$(basename $0): error: resolve_ctls_from_dns_srv: res_nsearch error: Unknown host" >&2; '
           'echo "$(basename $0): error: fetch_config: DNS SRV lookup failed" >&2; '
           'echo "$(basename $0): fatal: Could not establish a configuration source" >&2; exit 1')
    fake, env = _fake_slurm(tmp_path, grading, sbatch=dns, squeue=dns)
    monkeypatch.setenv("PATH", env["PATH"])
    monkeypatch.setenv("COURSE_GRADING_DIR", str(grading))
    monkeypatch.delenv("SLURM_CONF", raising=False)
    monkeypatch.setattr(slurm, "SLURM_CONF_DEFAULT", tmp_path / "no-slurm.conf", raising=False)
    monkeypatch.setattr(slurm, "class_assignment", lambda week, grading: None)
    monkeypatch.setattr(slurm, "make_template", lambda week, batch: None)
    for call in (lambda: slurm.submit(WEEK, ["ann"], dict(slurm.DEFAULTS), secret="7", out=lambda *a: None),
                 lambda: slurm.queued(["42"])):
        with pytest.raises(SystemExit) as e:
            call()
        msg = str(e.value)
        assert "SLURM_CONF" in msg and "SLURM_CONF is not set" in msg and "\n" not in msg, msg
    (fake / "squeue").write_text('#!/bin/bash\necho "squeue: error: Unable to contact slurm controller '
                                 '(connect failure)" >&2; exit 1\n')
    monkeypatch.setenv("SLURM_CONF", str(tmp_path / "slurm.conf"))
    with pytest.raises(SystemExit, match="SLURM_CONF=.*slurm.conf"):
        slurm.queued(["42"])
    (fake / "squeue").write_text('#!/bin/bash\necho "slurm_load_jobs error: Invalid job id specified" >&2; exit 1\n')
    assert slurm.queued(["42"]) == {}, "a job Slurm has forgotten is not an unreachable Slurm"
    monkeypatch.delenv("SLURM_CONF")  # a configless cluster (DNS SRV) whose controller answers: its refusal stands
    (fake / "sbatch").write_text('#!/bin/bash\necho "sbatch: error: Batch job submission failed: Invalid partition '
                                 'name specified" >&2; exit 1\n')
    with pytest.raises(SystemExit, match="^sbatch refused the job .*Invalid partition"):
        slurm.submit(WEEK, ["ann"], dict(slurm.DEFAULTS), secret="7", out=lambda *a: None)


def test_forget_takes_the_student_out_of_the_slurm_arrays(tmp_path, monkeypatch, capsys):
    """`autograder forget` takes a student out of every array's student list (the others keep their task index) and
    out of merged.json, so `slurm collect` and `resubmit` no longer count them."""
    from autograder import cli, slurm, slurm_collect

    grading = tmp_path / "grading"
    sdir = grading / "slurm" / WEEK
    (sdir / "results" / "cy" / "42_1").mkdir(parents=True)
    state = {"submissions": [{"job": "42", "students": [["ann"], ["cy"], ["ben"]]},
                             {"job": "43", "students": [["cy", "ann"]]}]}
    (sdir / "jobs.json").write_text(json.dumps(state))
    (sdir / "merged.json").write_text(json.dumps({"ann": "a1", "cy": "c1"}))
    monkeypatch.setenv("COURSE_GRADING_DIR", str(grading))
    assert cli.main(["forget", "cy"]) == 0
    assert slurm_collect._owners(slurm._load_state(sdir)) == {"ann": ("43", 0), "ben": ("42", 2)}
    assert json.loads((sdir / "merged.json").read_text()) == {"ann": "a1"}
    said = capsys.readouterr().out
    assert not (sdir / "results" / "cy").exists() and "cy: out of the Slurm arrays of week1" in said, said


@pytest.mark.slow
def test_slurm_grades_ids_nbgrader_reads_as_patterns(tmp_path):
    """Stand-in Slurm: students whose ids nbgrader would read as a regular expression in a task's path (`smith (john)`)
    or that are mapped to a safe id (a folder name that is not UTF-8: `caf\\xe9`) are graded by their array task and
    collected like any other (their results were once under results/<raw id>/, inside nbgrader's unescaped path)."""
    from autograder.cohort import build
    from autograder.students import student_id

    grading = tmp_path / "grading"
    build(grading / "submitted", WEEK, ["blank"])  # the release notebooks as handed out: graded by nbgrader
    sub = os.fsencode(grading / "submitted")
    names = [b"smith (john)", b"caf\xe9"]
    for name in names:
        shutil.copytree(os.path.join(sub, b"blank"), os.path.join(sub, name))
    shutil.rmtree(grading / "submitted" / "blank")
    ids = sorted(student_id(os.fsdecode(n)) for n in names)
    fake, env = _fake_slurm(tmp_path, grading)
    _submit_run_collect(env, fake, 2)
    assert sorted(_scores(grading)) == ids
