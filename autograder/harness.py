"""The trusted harness: compile, read SASS, check, time and profile one exercise, each in a process of its own.

Parent side (trusted, never runs student code): `run_exercise(slug, exercise, source, seed=..., reference_source=...)`

1. **Baseline** (`baseline` child): the exercise's throughput baseline (the D2D copy ceiling, or the vendor library
   doing the exercise's work on its own inputs), the ceilings and the course reference's timing, measured in a
   process that never loads student code, before any student process of this grading run starts. A grading batch
   measures them once for all its students (`prepare_batch`, the `autograder grade` command); a single run measures
   its own first.
2. **Grade** (`grade` child): compiles the student's CUDA source (NVRTC: only course and CUDA headers), reads the
   SASS (static evidence), checks the kernel on inputs from a per-job seed (awkward shapes, poisoned outputs, shape
   order and run counts drawn from the seed), and times it with the course timer, **verifying the output of every
   launch** — warm-ups, timed repetitions and every call of the wall-clock check, whose counts are drawn from the
   seed too. A kernel that counts its launches and skips work on some cannot pass. The timing loop also runs as many
   counted launches as timed ones, interleaved at positions drawn from the seed, each prepared like a timed one:
   CUPTI's range profiler counts the mechanism's own counter (TMA bytes, cp.async instructions) in one range per
   counted launch, one pass, nothing replayed (`_timed`, kernels.rangeprof; a range slows some kernels, so a counted
   launch is not timed). The path part holds every counted launch to the rule the profiled launch met, so a kernel
   cannot run the mechanism only while it is watched.
3. **Probe** (`probe` child, under Nsight Compute): one untimed launch at the bench shape after a seeded number of
   verified launches, measured by counters: which memory path carried the bytes (`kernels.ncu`). The spec's
   `[[...path.executed]]` rules turn that into path points (autograder.score).

Each child (autograder.harness_child) gets a minimal environment (no secret, no instructor variables: `child_env`),
a fresh working folder, and its own process group, killed at the timeout. **The verdict travels on a private file
descriptor** that the parent opened and passed (`pass_fds`); the child's stdout and stderr — where a kernel's device
`printf` lands — go to capture files that are never parsed: what a kernel printed is shown to the student as such,
capped.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from kernels.paths import write_whole
from kernels.runner import derive
from kernels import device, ncu
from .spec import load

ROOT = Path(__file__).resolve().parent.parent
PRINT_CAP = 2000  # characters of a kernel's own output kept for the feedback
# The environment a child may see: how to run Python and CUDA, where the caches are. Nothing else of the grading
# process (its secret seed, the instructor's variables) crosses.
ENV_KEEP = ("PATH", "HOME", "LANG", "LC_ALL", "LC_CTYPE", "TMPDIR", "LD_LIBRARY_PATH", "CUDA_VISIBLE_DEVICES",
            "CUDA_HOME", "CUDA_PATH", "CUDA_DEVICE_ORDER", "CUDA_CACHE_PATH", "COURSE_CACHE_DIR", "TRITON_CACHE_DIR",
            "XDG_CACHE_HOME", "COURSE_FORCE_CPU", "COURSE_NCU", "COURSE_NO_NCU", "NVIDIA_VISIBLE_DEVICES",
            "NCCL_NVLS_ENABLE", "TORCH_SYMM_MEM_DISABLE_MULTICAST", "NVSHMEM_DISABLE_NVLS")
TEST_HOOKS = ("COURSE_HARNESS_TEST_HANG", "COURSE_HARNESS_TEST_CRASH", "COURSE_HARNESS_TEST_FORGE",
              "COURSE_HARNESS_TEST_ENV", "COURSE_HARNESS_TEST_FLOOD")


def child_env() -> dict:
    env = {k: os.environ[k] for k in ENV_KEEP + TEST_HOOKS if k in os.environ}
    # The course first on the path (a folder list holds no secret).
    paths = [str(ROOT)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and p != str(ROOT)]
    env["PYTHONPATH"] = os.pathsep.join(paths)
    env["PYTHONUNBUFFERED"] = "1"
    env.setdefault("COURSE_CACHE_DIR", str(ROOT / "build" / "cache" / "course"))
    return env


# ----------------------------------------------------------------------------------------------------- parent side
class _Capture(threading.Thread):
    """Drains one of a child's output pipes as it is written, keeping only the first `head` and the last `tail`
    bytes and counting all of them: a kernel that printf's on every launch costs the grading disk nothing (the
    pipe never fills, so the child never blocks on it either)."""

    def __init__(self, pipe, head: int, tail: int):
        super().__init__(daemon=True)
        self.pipe, self.head_cap, self.tail_cap = pipe, head, tail
        self.head, self.tail, self.total = bytearray(), bytearray(), 0

    def run(self) -> None:
        while chunk := self.pipe.read1(1 << 16) if hasattr(self.pipe, "read1") else self.pipe.read(1 << 16):
            self.total += len(chunk)
            room = self.head_cap - len(self.head)
            if room > 0:
                self.head += chunk[:room]
                chunk = chunk[room:]
            if chunk and self.tail_cap:
                self.tail = (self.tail + chunk)[-self.tail_cap:]

    def text(self) -> str:
        """The kept bytes: the head, and where bytes were left out, how many and the tail."""
        left_out = self.total - len(self.head) - len(self.tail)
        mid = f"\n... [{left_out} bytes not kept] ...\n".encode() if left_out > 0 else b""
        return (bytes(self.head) + mid + bytes(self.tail)).decode(errors="replace")


STDOUT_HEAD, STDOUT_TAIL = 64 * 1024, 16 * 1024  # a kernel's own printing kept per child (the rest is counted)
STDERR_HEAD, STDERR_TAIL = 0, 4000


def _spawn(mode: str, job: dict, timeout: float, workdir: Path) -> dict:
    """Run one child; its records come back on the private descriptor. Returns {"records": [...], "timed_out",
    "returncode", "stdout": the first 64 KiB and the last 16 KiB of the child's own stdout (a kernel's printf),
    "stdout_bytes": how much it wrote in all, "stderr": its last 4000 bytes}. Nothing the child prints is written to
    disk."""
    verdict = tempfile.TemporaryFile()
    job = {**job, "verdict_fd": verdict.fileno()}
    proc = subprocess.Popen([sys.executable, "-m", "autograder.harness_child", mode], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=child_env(), cwd=str(workdir),
                            start_new_session=True, pass_fds=(verdict.fileno(),))
    out, err = _Capture(proc.stdout, STDOUT_HEAD, STDOUT_TAIL), _Capture(proc.stderr, STDERR_HEAD, STDERR_TAIL)
    out.start()
    err.start()
    try:
        proc.stdin.write(json.dumps(job).encode())
        proc.stdin.close()
    except BrokenPipeError:
        pass
    try:
        proc.wait(timeout=timeout)
        timed_out = False
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        proc.wait()
        timed_out = True
    finally:
        _kill_group(proc)  # anything the child left behind (forks) goes with its process group
    out.join(10)
    err.join(10)
    verdict.seek(0)
    records = []
    for line in verdict.read().decode(errors="replace").splitlines():
        kind, _, body = line.partition(" ")
        try:
            records.append((kind, json.loads(body)))
        except json.JSONDecodeError:
            continue
    verdict.close()
    return {"records": records, "timed_out": timed_out, "returncode": proc.returncode, "stdout": out.text(),
            "stdout_bytes": out.total, "stderr": err.text()}


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def printed(text: str) -> str:
    """What a kernel printed, made safe to show: control characters out, capped."""
    clean = "".join(c if c.isprintable() or c in "\n\t" else "?" for c in text)
    if len(clean) <= PRINT_CAP:
        return clean
    head, tail = clean[:PRINT_CAP * 3 // 4], clean[-(PRINT_CAP // 4):]
    return head + f"\n... ({len(clean) - len(head) - len(tail)} more characters) ...\n" + tail


def _wants_gpu(gpu: bool | None) -> bool:
    if gpu is False:
        return False

    return device.is_hopper()


_baselines: dict = {}


def _baseline_key(slug: str, exercise: str, reference_source: str | None) -> str:
    where = os.environ.get("CUDA_VISIBLE_DEVICES", "all")
    h = hashlib.sha256(f"{slug}/{exercise}/{reference_source or ''}/{where}".encode()).hexdigest()[:16]
    return f"baseline_{slug}_{exercise}_{h}"


def baseline(slug: str, exercise: str, reference_source: str | None, *, seed: int = 0) -> dict:
    """The trusted figures a student's throughput is compared with: ceilings of this GPU and the course reference
    timed with the same timer, measured in a process that loads no student code. Kept for the grading batch
    (COURSE_BATCH_DIR) or for this process."""
    key = _baseline_key(slug, exercise, reference_source)
    got = _kept_baseline(key)
    if got is not None:
        return got
    _measure_baselines([(slug, exercise, reference_source)], seed)
    return _baselines[key]


def _kept_baseline(key: str) -> dict | None:
    f = _baseline_file(key)
    if key not in _baselines and f is not None and f.exists():
        _baselines[key] = json.loads(f.read_text())
    return _baselines.get(key)


def _baseline_file(key: str) -> Path | None:
    d = os.environ.get("COURSE_BATCH_DIR")
    return Path(d) / f"{key}.json" if d else None


def _measure_baselines(items, seed: int = 0, progress=None) -> None:
    """Every (slug, exercise, reference source) of `items` measured in ONE process that loads no student code: one
    CUDA context and one measurement of the ceilings for all of them (a lane's fixed cost: a process and the ceilings
    per exercise cost about 4 s each). Each result is kept as it arrives; a failure names the exercise it stopped
    at."""
    timeout = sum(load(s).exercises[e].timeout_s for s, e, _ in items)
    job = {"items": [{"slug": s, "exercise": e, "reference_source": r} for s, e, r in items], "seed": int(seed)}
    with tempfile.TemporaryDirectory(prefix="course-baseline-") as tmp:
        r = _spawn("baseline", job, timeout, Path(tmp))
    keys, done = {_baseline_key(*it) for it in items}, 0
    for kind, body in r["records"]:
        if kind != "BASELINE" or body.get("key") not in keys:
            continue
        key = body.pop("key")
        body["measured_at"] = time.time()
        _baselines[key] = body
        f = _baseline_file(key)
        if f is not None:
            f.parent.mkdir(parents=True, exist_ok=True)
            write_whole(f, json.dumps(body))
        done += 1
        if progress:
            progress(f"baseline {key}")
    if done < len(items):
        s, e, _ = items[done]
        raise RuntimeError(f"the baseline of {s}.{e} (ceilings, course reference) failed: "
                           + ("timeout" if r["timed_out"] else f"exit {r['returncode']}") + ": " + r["stderr"][-1500:])


def prepare_batch(items, progress=None) -> dict:
    """Measure the baseline of every (slug, exercise, reference source) of a grading batch before any student's
    code runs, all in one process (_measure_baselines). Returns {key: baseline}."""
    items = list(items)
    todo = [it for it in items if _kept_baseline(_baseline_key(*it)) is None]
    if todo:
        if progress:
            progress(f"baselines of {len(todo)} exercise(s), one process")
        _measure_baselines(todo, progress=progress)
    return {_baseline_key(*it): _baselines[_baseline_key(*it)] for it in items}


def run_exercise(slug: str, exercise: str, source: str | None, *, seed: int, reference_source: str | None = None,
                 gpu: bool | None = None, timeout_s: float | None = None) -> dict:
    spec = load(slug)
    ex = spec.exercises[exercise]
    timeout = timeout_s or ex.timeout_s
    t0 = time.perf_counter()
    base = None
    on_gpu = bool(source) and _wants_gpu(gpu)
    baseline_error = None
    if on_gpu:
        try:
            base = baseline(slug, exercise, reference_source)  # before the student's process starts
        except Exception as exc:  # noqa: BLE001 - the course's own reference failing must not cost the student
            baseline_error = str(exc)[:1500]
    job = {"slug": slug, "exercise": exercise, "source": source, "seed": int(seed), "gpu": gpu, "baseline": base}
    with tempfile.TemporaryDirectory(prefix="course-harness-") as tmp:
        r = _spawn("grade", job, timeout, Path(tmp))
        res = _verdict(r, timeout)
        if on_gpu and _probe_due(ex, res):
            res["path"]["executed"] = probe(slug, exercise, source, seed=seed, workdir=Path(tmp) / "probe")
    if baseline_error:
        res["baseline_error"] = baseline_error
    res["wall_s"] = time.perf_counter() - t0
    return res


def _verdict(r: dict, timeout: float) -> dict:
    partial, final = {}, None
    for kind, body in r["records"]:
        if kind == "PARTIAL":
            partial = body
        elif kind == "VERDICT":
            final = body
    if final is not None and not r["timed_out"]:
        res = final
    elif r["timed_out"]:
        res = {**partial, "status": "timeout", "error": f"the exercise did not finish in {timeout:.0f} s (a hang?): "
               "killed", "stderr_tail": r["stderr"][-2000:]}
    else:
        code = r["returncode"]
        sig = -code if code and code < 0 else None
        why = f"killed by signal {signal.Signals(sig).name}" if sig else f"exit code {code}"
        res = {**partial, "status": "crash", "error": f"the harness process died ({why}) before giving a verdict",
               "stderr_tail": r["stderr"][-2000:]}
    res.setdefault("flags", [])
    if r["stdout"].strip():
        text = printed(r["stdout"])
        res["kernel_output"] = text
        res["flags"].append(f"kernel-printed: your kernel printed {r.get('stdout_bytes', len(r['stdout']))} bytes; the "
                            "grader ignores them (the verdict travels on a channel no kernel can write)")
    return res


def _probe_due(ex, res: dict) -> bool:
    corr = res.get("correctness") or {}
    return bool(ex.parts["path"].executed) and res.get("status") == "ok" and bool(res.get("gpu")) \
        and corr.get("graded") and corr.get("ok") and (res.get("path") or {}).get("ok") is not None


def probe(slug: str, exercise: str, source: str, *, seed: int, workdir: Path) -> dict:
    """The path evidence of one untimed launch at the bench shape, measured by Nsight Compute."""

    ex = load(slug).exercises[exercise]
    ok, why = ncu.available()
    if not ok:
        return {"measured": False, "unavailable": True, "reason": why}
    workdir.mkdir(parents=True, exist_ok=True)
    skip = random.Random(derive(seed, "probe", "skip")).randint(1, 3)
    result = workdir / "probe_result.json"
    job = {"slug": slug, "exercise": exercise, "source": source, "seed": int(seed), "launches": skip + 1,
           "result_path": str(result)}
    try:
        prof = ncu.profile([sys.executable, "-m", "autograder.harness_child", "probe"], kernel=ex.kernel, launch_skip=skip,
                           workdir=workdir, timeout_s=ex.timeout_s, env=child_env(), stdin_text=json.dumps(job),
                           cwd=str(workdir))
    except ncu.ProfilerUnavailable as exc:
        return {"measured": False, "unavailable": True, "reason": str(exc)}
    except ncu.ProfileError as exc:  # the kernel under measurement hung, crashed or never launched
        return {"measured": False, "unavailable": False, "reason": str(exc)}
    info = json.loads(result.read_text()) if result.exists() else {}
    return {"measured": True, "shape": list(ex.bench_shape), "launch": skip + 1, "bytes": prof.bytes,
            "read_bytes": info.get("read_bytes"), "written_bytes": info.get("written_bytes"),
            "output_ok": info.get("ok", False), "output_message": info.get("message", "no result"),
            "executed": prof.memory_summary(), "executed_counts": prof.executed, "ctas": info.get("ctas")}
