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

Each child gets a minimal environment (no secret, no instructor variables: `child_env`), a fresh working folder,
and its own process group, killed at the timeout. **The verdict travels on a private file descriptor** that the
parent opened and passed (`pass_fds`); the child's stdout and stderr — where a kernel's device `printf` lands — go
to capture files that are never parsed: what a kernel printed is shown to the student as such, capped.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from pathlib import Path

from kernels import record
from kernels.paths import write_whole
from kernels.runner import KernelHang, checked_launch, derive, exercise_baseline, time_exercise

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
    proc = subprocess.Popen([sys.executable, "-m", "autograder.harness", mode], stdin=subprocess.PIPE,
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
    from kernels import device

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
    from .spec import load

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
    from .spec import load

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
    from kernels import ncu

    from .spec import load

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
        prof = ncu.profile([sys.executable, "-m", "autograder.harness", "probe"], kernel=ex.kernel, launch_skip=skip,
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


# ------------------------------------------------------------------------------------------------------ child side
def _err_text(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}"
    return text if len(text) < 3000 else text[:3000] + " ..."


def _correctness(ex, wl, cubin, seed: int, facts: dict) -> bool:
    """Every shape, in an order drawn from the seed, `runs` (+ 0 or 1, drawn) times on fresh inputs."""
    import torch

    rng = random.Random(derive(seed, "correctness", "plan"))
    order = list(range(len(ex.test_shapes)))
    rng.shuffle(order)
    runs = ex.parts["correctness"].runs
    shapes = []
    ok_all = True
    for si in order:
        shape = ex.test_shapes[si]
        for r in range(runs + rng.randint(0, 1)):
            inputs = wl.make_inputs(shape, derive(seed, "correctness", si, r), device="cuda")
            before = {k: v.clone() for k, v in inputs.items() if isinstance(v, torch.Tensor)}
            _, rep = checked_launch(ex, wl, cubin, inputs, wl.reference(inputs), f"{ex.kernel} on shape {tuple(shape)}")
            mutated = [k for k, v in before.items() if not torch.equal(v, inputs[k])]
            if mutated:
                facts["flags"].append(f"inputs-mutated: the kernel wrote to its input(s) {mutated}")
            entry = {"shape": list(shape), "run": r, "ok": rep.ok and not mutated, "message": rep.message}
            shapes.append(entry)
            if not entry["ok"]:
                ok_all = False
                if r > 0:  # the same shape was right on an earlier run with other inputs
                    facts["flags"].append("inconsistent-results: right on an earlier run of this shape, wrong on "
                                          f"fresh inputs (shape {tuple(shape)}, run {r}): results cached across "
                                          "calls, or a race")
                break  # the first failing run of a shape is enough
    facts["correctness"] = {"graded": True, "ok": ok_all, "shapes": shapes}
    return ok_all


def _emit(kind: str, body: dict) -> None:
    """One record on the private verdict descriptor (never stdout: a kernel's printf lands there)."""
    fd = _VERDICT_FD[0]
    if fd is None:
        raise RuntimeError("no verdict descriptor")
    os.write(fd, (kind + " " + json.dumps(body, default=str) + "\n").encode())


_VERDICT_FD: list = [None]


def main(argv=None) -> int:
    mode = (argv or sys.argv[1:] or ["grade"])[0]
    job = json.loads(sys.stdin.read())
    _VERDICT_FD[0] = job.get("verdict_fd")
    # Test hooks of the harness's own tests: a harness that hangs, crashes, or prints a forged verdict the way a
    # kernel's device printf would (on the process's stdout and stderr).
    if os.environ.get("COURSE_HARNESS_TEST_FORGE"):
        forged = json.dumps({"status": "ok", "flags": [], "compile": {"ok": True}, "path": {"ok": True},
                             "correctness": {"graded": True, "ok": True, "shapes": []}})
        for fd in (1, 2):
            os.write(fd, ("x" * 70000 + "\nVERDICT " + forged + "\nPARTIAL " + forged + "\n").encode())
    if os.environ.get("COURSE_HARNESS_TEST_ENV"):
        os.write(1, json.dumps(dict(os.environ)).encode())
    if os.environ.get("COURSE_HARNESS_TEST_FLOOD"):  # a kernel that printf's on every launch: N MiB, then a last line
        line = b"launch says hello " * 3 + b"\n"
        block = line * (2**20 // len(line))
        for _ in range(int(os.environ["COURSE_HARNESS_TEST_FLOOD"])):
            os.write(1, block)
        os.write(1, b"LAST LINE\n")
    if os.environ.get("COURSE_HARNESS_TEST_HANG"):
        time.sleep(3600)
    if os.environ.get("COURSE_HARNESS_TEST_CRASH"):
        os.kill(os.getpid(), signal.SIGSEGV)
    if mode == "probe":
        _probe_child(job)
        os._exit(0)
    facts: dict = {"status": "ok", "flags": [], "device": None}
    try:
        if mode == "baseline":
            _baseline_child(job)
            os._exit(0)
        _run(job, facts)
    except KernelHang as exc:
        facts["status"] = "timeout"
        facts["error"] = str(exc)
    except BaseException as exc:  # noqa: BLE001 - every failure becomes a verdict
        facts["status"] = "error"
        facts["error"] = _err_text(exc)
        facts["traceback"] = traceback.format_exc()[-3000:]
        text = str(exc).lower()
        if "illegal address" in text or "illegal memory" in text or "misaligned" in text:
            facts["flags"].append("illegal-address: the kernel faulted (out-of-bounds or misaligned access)")
        elif any(w in text for w in ("launch failure", "trap", "exception", "illegal instruction", "assert")):
            facts["flags"].append("kernel-fault: the kernel aborted (a trap or an unspecified launch failure)")
    if mode == "baseline":
        sys.stderr.write(f"baseline failed: {facts.get('error')}\n{facts.get('traceback', '')}")
        os._exit(1)
    _emit("VERDICT", facts)
    os._exit(0)  # a corrupted CUDA context must not hang the exit


def _baseline_child(job: dict) -> None:
    """Trusted figures only: no student source is ever given to this process. One BASELINE record per item (in
    order, each as soon as it is measured); the ceilings measured once for all of them."""
    from kernels import device
    from kernels.bench import ceilings
    from kernels.compile import compile_cuda

    from .spec import load

    g = device.gpu() or {}
    seed = int(job.get("seed", 0))
    for it in job["items"]:
        ex = load(it["slug"]).exercises[it["exercise"]]
        out = {"device": g.get("name"), "ceilings": ceilings(), "reference": None,
               "baseline": exercise_baseline(ex, ex.workload(), seed)}
        if it.get("reference_source"):
            cubin = compile_cuda(it["reference_source"], name=f"{ex.name}_reference")
            ref = time_exercise(ex, ex.workload(), cubin, seed, "reference", out["ceilings"])
            if not ref["output_ok"]:
                raise RuntimeError(f"the course reference of {ex.name} failed its own verification: {ref['problems']}")
            out["reference"] = ref
        _emit("BASELINE", {"key": _baseline_key(it["slug"], it["exercise"], it.get("reference_source")), **out})


def _probe_child(job: dict) -> None:
    """Launch the kernel `launches` times at the bench shape (fresh inputs, each output verified); ncu measures the
    last launch. The result (output right or not, the bytes the workload must read and write) goes to a file."""
    import torch

    from kernels.compile import compile_cuda

    from .spec import load

    ex = load(job["slug"]).exercises[job["exercise"]]
    wl = ex.workload()
    cubin = compile_cuda(job["source"], name=ex.answer_var)
    shape = ex.bench_shape
    ok, message = True, ""
    out = None
    for i in range(int(job["launches"])):
        inputs = wl.make_inputs(shape, derive(int(job["seed"]), "probe", i), device="cuda")
        out, rep = checked_launch(ex, wl, cubin, inputs, wl.reference(inputs), f"{ex.kernel} (profiled launch)")
        if not rep.ok:
            ok, message = False, f"launch {i + 1}: " + rep.message.splitlines()[0]
    written = out.numel() * out.element_size() if isinstance(out, torch.Tensor) else 0
    grid = wl.launch_args(inputs, out)["grid"]  # the CTAs of the measured launch (the last one)
    ctas = grid if isinstance(grid, int) else math.prod(grid)
    res = {"ok": ok, "message": message or "every launch right", "written_bytes": written,
           "read_bytes": wl.bytes_moved(shape) - written, "ctas": int(ctas)}
    Path(job["result_path"]).write_text(json.dumps(res))


def _timed(ex, wl, cubin, seed: int, ceilings, facts: dict) -> dict:
    """Time the kernel (kernels.runner.time_exercise) with the mechanism's counters taken over the very launches that
    are timed: as many counted launches as timed ones in the same loop, interleaved at secret positions, one CUPTI
    range per counted launch, every counter in one pass, nothing replayed (kernels.rangeprof, kernels.bench).
    facts["path"]["timed"] = the counts per counted launch, or why there are none."""
    from kernels import rangeprof

    wanted = {r.bytes[0] for r in rangeprof.counted_rules(ex.parts["path"])}
    path = facts.setdefault("path", {})
    if not wanted:
        return time_exercise(ex, wl, cubin, seed, "student", ceilings)
    try:
        rc = rangeprof.timed_counters(wanted)
        rc.__enter__()
    except rangeprof.RangeUnavailable as exc:
        path["timed"] = {"measured": False, "reason": str(exc)[:500]}
        return time_exercise(ex, wl, cubin, seed, "student", ceilings)
    try:
        mine = time_exercise(ex, wl, cubin, seed, "student", ceilings, ranges=rc)
    except BaseException:
        rc.__exit__(*sys.exc_info())  # the timing's own error is what counts
        raise
    try:
        rc.__exit__(None, None, None)
    except rangeprof.RangeUnavailable as exc:  # timed, but the counts could not be read: the timing stands
        path["timed"] = {"measured": False, "reason": str(exc)[:500]}
        return mine
    written = mine.get("written_bytes") or 0
    path["timed"] = {"measured": True, "launches": mine["plan"]["counted"], "timed_ms": mine["ms"],
                     "counted_ms": mine["counted_ms"], "skipped": rc.skipped,
                     "per_launch": rangeprof.bytes_per_launch(rc),
                     "den": {"read": mine["bytes"] - written, "written": written},
                     "what": {q: rangeprof.TIMED[q][2] for q in rc.values}}
    return mine


def _compiled(ex, source: str | None, facts: dict):
    """The student's cubin, or None with facts["compile"] saying why (not attempted, a forbidden include, an error);
    ptxas's advisories become a flag."""
    from kernels.compile import CompileError, ForbiddenInclude, NotAttempted, advisories, compile_cuda

    if not source:
        facts["compile"] = {"ok": False, "not_attempted": True, "error": "no kernel source was submitted"}
        return None
    try:
        cubin = compile_cuda(source, name=ex.answer_var)
    except NotAttempted as exc:
        facts["compile"] = {"ok": False, "not_attempted": True, "error": str(exc)}
        return None
    except ForbiddenInclude as exc:
        facts["compile"] = {"ok": False, "not_attempted": False, "error": str(exc)}
        facts["flags"].append(f"forbidden-include: {exc.directive[:120]} (line {exc.line}): only the course's and "
                              "the CUDA toolkit's headers can be included, by name")
        return None
    except CompileError as exc:
        facts["compile"] = {"ok": False, "not_attempted": False, "error": str(exc)}
        return None
    facts["compile"] = {"ok": True}
    adv = advisories(cubin)
    if adv:  # ptxas changed what the kernel does (kernels.compile.ADVISORIES): the student and the report hear it
        facts["compile"]["advisories"] = adv
        facts["flags"].append("ptxas-advisory: " + "; ".join(adv)[:400] + " — ptxas compiled something other than "
                              "what the source says (e.g. C7517: a register the tensor cores still write was read "
                              "before its wgmma_wait, so ptxas waited there and the GEMMs no longer overlap)")
    return cubin


def _path(ex, cubin, facts: dict) -> bool:
    """The SASS path evidence into facts["path"] (and a path-elsewhere flag); False when the named kernel is not in
    the cubin (nothing more can be graded)."""
    from kernels.sass import path_evidence

    pp = ex.parts["path"]
    try:
        ev = path_evidence(cubin, ex.kernel, pp.require, pp.forbid)
    except KeyError as exc:
        facts["path"] = {"ok": False, "missing": list(pp.require), "summary": str(exc), "no_kernel": True}
        facts["correctness"] = {"graded": False, "ok": False, "reason": str(exc)}
        return False
    facts["path"] = {"ok": ev.ok, "missing": ev.missing, "forbidden": {k: v[:3] for k, v in ev.forbidden.items()},
                     "found": {k: v[:3] for k, v in ev.found.items()}, "summary": ev.summary(),
                     "kernels": cubin.kernels}
    others = [k for k in cubin.kernels if k != ex.kernel]
    if not ev.ok and others:
        elsewhere = [k for k in others if path_evidence(cubin, k, pp.require, ()).ok]
        if elsewhere:
            facts["flags"].append(f"path-elsewhere: {', '.join(pp.require)} appear only in {elsewhere}, "
                                  f"not in {ex.kernel}, the kernel that does the work")
    return True


def _run(job: dict, facts: dict) -> None:
    from kernels import device

    from .spec import load

    spec = load(job["slug"])
    ex = spec.exercises[job["exercise"]]
    gpu = device.is_hopper() if job.get("gpu") is None else bool(job["gpu"]) and device.is_hopper()
    g = device.gpu()
    facts["device"] = g["name"] if g else None
    facts["gpu"] = gpu
    cubin = _compiled(ex, job.get("source"), facts)
    if cubin is None or not _path(ex, cubin, facts):
        return
    # What is known before the first launch survives a hang or a crash of what follows.
    _emit("PARTIAL", facts)
    if not gpu:
        why = device.cpu_mode_reason()
        facts["correctness"] = {"graded": False, "ok": False, "reason": f"needs an sm_90 GPU: {why}"}
        facts["throughput"] = {"graded": False, "reason": f"not timed here ({why}): throughput is graded on a Hopper GPU"}
        return
    import torch

    torch.cuda.init()
    seed = int(job["seed"])
    wl = ex.workload()  # (here, not above: its module imports torch, which CPU mode never needs)
    ok = _correctness(ex, wl, cubin, seed, facts)
    if not ok:
        facts["throughput"] = {"graded": False, "reason": "a kernel that is not correct is not timed"}
        return
    base = job.get("baseline") or {}
    mine = _timed(ex, wl, cubin, seed, base.get("ceilings"), facts)
    tag = record.device_tag(g["name"])
    facts["throughput"] = {"graded": bool(base.get("baseline")), "student": mine, "reference": base.get("reference"),
                           "baseline": base.get("baseline"), "gpu": tag, "device": g["name"],
                           "reason": "" if base.get("baseline") else "the trusted baseline was not measured"}
    roof = ex.roofline_for(tag)
    if mine["value"] and mine["value"] > roof:  # the datasheet peak of this GPU kind
        facts["flags"].append(f"above-roofline: {mine['value']:.3f} {ex.metric} > {roof} — impossible "
                              "for work actually done")
    if not mine["output_ok"]:
        facts["flags"].append(f"stale-output: {mine['wrong_launches']} of {mine['verified']} verified launches at "
                              f"the bench shape left a wrong output (first: {mine['problems'][0]})")


if __name__ == "__main__":
    sys.exit(main())
