"""The trusted harness: compile, read SASS, check and time one exercise in a process of its own.

Parent side: `run_exercise(spec, exercise, source, seed=..., reference_source=...) -> dict` starts
`python -m autograder.harness` in a new session, sends the job as JSON on stdin, and kills the whole process group
at the exercise's timeout. A hang, a crash, an illegal address or a process that never exits costs that exercise
only. The child prints one line `VERDICT <json>` with facts (not points); `autograder.score` turns facts into points.

Child side (`main`): trusted code only. The student's artefact is CUDA source: it is compiled with NVRTC and
launched with the exercise's fixed launch contract (kernels/<slug>/exercise.py). No student Python runs here.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import traceback

VERDICT = "VERDICT "
PARTIAL = "PARTIAL "  # facts known before the first launch (compile, SASS path): kept when the kernel then hangs


# ----------------------------------------------------------------------------------------------------- parent side
def run_exercise(slug: str, exercise: str, source: str | None, *, seed: int, reference_source: str | None = None,
                 gpu: bool | None = None, timeout_s: float | None = None) -> dict:
    from .spec import load

    spec = load(slug)
    ex = spec.exercises[exercise]
    job = {"slug": slug, "exercise": exercise, "source": source, "seed": int(seed),
           "reference_source": reference_source, "gpu": gpu}
    timeout = timeout_s or ex.timeout_s
    env = dict(os.environ)
    env.setdefault("PYTHONPATH", "")
    root = str(__import__("pathlib").Path(__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join([root, *filter(None, env["PYTHONPATH"].split(os.pathsep))])
    env.pop("NBGRADER_EXECUTION", None)
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "autograder.harness"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            start_new_session=True)
    try:
        out, err = proc.communicate(json.dumps(job), timeout=timeout)
        timed_out = False
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        out, err = proc.communicate()
        timed_out = True
    finally:
        _kill_group(proc)  # anything the child left behind (forks) goes with its process group
    partial: dict = {}
    for line in (out or "").splitlines():
        if line.startswith(VERDICT) and not timed_out:
            res = json.loads(line[len(VERDICT):])
            res["wall_s"] = time.perf_counter() - t0
            return res
        if line.startswith(PARTIAL):
            partial = json.loads(line[len(PARTIAL):])
    if timed_out:
        return {**partial, "status": "timeout", "wall_s": time.perf_counter() - t0,
                "error": f"the exercise did not finish in {timeout:.0f} s (a hang?): killed",
                "stderr_tail": (err or "")[-2000:]}
    sig = -proc.returncode if proc.returncode and proc.returncode < 0 else None
    why = f"killed by signal {signal.Signals(sig).name}" if sig else f"exit code {proc.returncode}"
    return {**partial, "status": "crash", "error": f"the harness process died ({why}) before giving a verdict",
            "wall_s": time.perf_counter() - t0, "stderr_tail": (err or "")[-2000:]}


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


# ------------------------------------------------------------------------------------------------------ child side
def _err_text(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}"
    return text if len(text) < 3000 else text[:3000] + " ..."


class KernelHang(RuntimeError):
    pass


def _wait(deadline_s: float, what: str) -> None:
    """Wait for the GPU with a deadline: a kernel that never finishes (a barrier nobody completes, a parity that
    never flips) becomes a verdict in seconds instead of the exercise's whole timeout."""
    import torch

    ev = torch.cuda.Event()
    ev.record()
    t0 = time.perf_counter()
    while not ev.query():
        if time.perf_counter() - t0 > deadline_s:
            raise KernelHang(f"{what} did not finish within {deadline_s:.0f} s: the kernel hangs "
                             "(a barrier that never completes? a wait on the wrong parity? a wrong tx byte count?)")
        time.sleep(0.001)
    torch.cuda.synchronize()  # raises the kernel's error, if any


def _correctness(ex, wl, cubin, seed: int, facts: dict) -> bool:
    import torch

    from kernels.check import compare, poison
    from kernels.launch import launch

    check_kw = dict(wl.CHECK)
    runs = ex.parts["correctness"].runs
    shapes = []
    ok_all = True
    for si, shape in enumerate(ex.test_shapes):
        for r in range(runs):
            s = _derive(seed, "correctness", si, r)
            inputs = wl.make_inputs(shape, s, device="cuda")
            before = {k: v.clone() for k, v in inputs.items() if isinstance(v, torch.Tensor)}
            ref = wl.reference(inputs)
            out = poison(wl.make_output(inputs))
            la = wl.launch_args(inputs, out)
            launch(cubin, ex.kernel, grid=la["grid"], block=la["block"], args=la["args"], smem=la.get("smem", 0),
                   cluster=la.get("cluster"))
            _wait(ex.launch_timeout_s, f"{ex.kernel} on shape {tuple(shape)}")
            rep = compare(out, ref, **check_kw)
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


def _derive(seed: int, *parts) -> int:
    import hashlib

    h = hashlib.sha256(repr((seed, *parts)).encode()).digest()
    return int.from_bytes(h[:7], "little")


def time_exercise(ex, wl, cubin, seed: int, tag: str) -> dict:
    """Time one kernel at the bench shape: fresh inputs every repetition (regenerated in place on the GPU), L2
    flushed, the course's one timer. The last repetition's output is checked against its own fresh inputs: stale or
    cached work fails."""
    import torch

    from kernels.bench import bench
    from kernels.check import compare, poison
    from kernels.launch import launch

    shape = ex.bench_shape
    pool = [wl.make_inputs(shape, _derive(seed, tag, "pool", i), device="cuda") for i in range(2)]
    out = wl.make_output(pool[0])
    rep_no = [0]
    checks: list[str] = []

    def make_args():
        # Everything host-side happens here, outside the timed region: fresh values in the same buffers (no result
        # can be reused), the output poisoned, and the launch arguments (tensor maps included) built.
        i = rep_no[0]
        rep_no[0] += 1
        inputs = pool[i % 2]
        fresh = wl.make_inputs(shape, _derive(seed, tag, "rep", i), device="cuda")
        for k, v in fresh.items():
            if isinstance(v, torch.Tensor):
                inputs[k].copy_(v)
        poison(out)
        return (wl.launch_args(inputs, out),)

    def run(la):
        launch(cubin, ex.kernel, grid=la["grid"], block=la["block"], args=la["args"], smem=la.get("smem", 0),
               cluster=la.get("cluster"))

    nbytes = wl.bytes_moved(shape)
    nflops = wl.flops(shape)
    res = bench(run, make_args, bytes=nbytes, flops=nflops, reps=ex.bench_reps, warmup=2)
    # the last timed repetition's output, checked against its inputs
    last = pool[(rep_no[0] - 1) % 2]
    # bench's wall check ran extra calls on a fresh set: recompute the reference of what `out` holds now
    ref = wl.reference(last)
    rep = compare(out, ref, **dict(wl.CHECK))
    if not rep.ok:
        checks.append("output of the timed runs is wrong: " + rep.message.splitlines()[0])
    value = res.tbps if ex.metric == "tbps" else res.tflops
    return {"value": value, "ms": res.ms, "p20_ms": res.p20_ms, "p80_ms": res.p80_ms, "wall_ms": res.wall_ms,
            "ceilings": res.ceilings, "output_ok": rep.ok, "problems": checks, "bytes": nbytes, "flops": nflops}


def _batch_dir():
    """A grading batch (one `autograder grade` run) measures the ceilings and the course reference once and shares
    them between its students: the same run, and half the GPU time per student."""
    from pathlib import Path

    d = os.environ.get("COURSE_BATCH_DIR")
    return Path(d) if d else None


def _batch_ceilings() -> None:
    import kernels.bench as kb

    d = _batch_dir()
    if d is None:
        return
    f = d / "ceilings.json"
    if f.exists():
        kb._ceilings = json.loads(f.read_text())
    else:
        d.mkdir(parents=True, exist_ok=True)
        _atomic_write(f, json.dumps(kb.ceilings()))


def _batch_reference(ex, wl, job) -> dict:
    import hashlib

    from kernels.compile import compile_cuda

    d = _batch_dir()
    key = hashlib.sha256(f"{job['slug']}/{ex.name}/{job['reference_source']}".encode()).hexdigest()[:16]
    f = d / f"reference_{key}.json" if d else None
    if f is not None and f.exists():
        return json.loads(f.read_text())
    ref_cubin = compile_cuda(job["reference_source"], name=f"{ex.name}_reference")
    ref = time_exercise(ex, wl, ref_cubin, int(job["seed"]), "reference")
    if f is not None:
        _atomic_write(f, json.dumps(ref, default=str))
    return ref


def _atomic_write(path, text: str) -> None:
    """Workers of a batch (one per GPU) may write the same file: readers see the old file or the whole new one."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def main() -> int:
    job = json.loads(sys.stdin.read())
    # Test hooks of the harness's own tests (a harness that hangs / crashes): they only make the process fail.
    if os.environ.get("COURSE_HARNESS_TEST_HANG"):
        time.sleep(3600)
    if os.environ.get("COURSE_HARNESS_TEST_CRASH"):
        os.kill(os.getpid(), signal.SIGSEGV)
    facts: dict = {"status": "ok", "flags": [], "device": None}
    try:
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
    sys.stdout.write("\n" + VERDICT + json.dumps(facts, default=str) + "\n")
    sys.stdout.flush()
    os._exit(0)  # a corrupted CUDA context must not hang the exit


def _run(job: dict, facts: dict) -> None:
    from kernels import device
    from kernels.compile import CompileError, NotAttempted, compile_cuda
    from kernels.sass import path_evidence

    from .spec import load

    spec = load(job["slug"])
    ex = spec.exercises[job["exercise"]]
    wl = ex.workload()
    gpu = device.is_hopper() if job.get("gpu") is None else bool(job["gpu"]) and device.is_hopper()
    g = device.gpu()
    facts["device"] = g["name"] if g else None
    facts["gpu"] = gpu
    source = job.get("source")
    if not source:
        facts["compile"] = {"ok": False, "not_attempted": True, "error": "no kernel source was submitted"}
        return
    try:
        cubin = compile_cuda(source, name=ex.answer_var)
    except NotAttempted as exc:
        facts["compile"] = {"ok": False, "not_attempted": True, "error": str(exc)}
        return
    except CompileError as exc:
        facts["compile"] = {"ok": False, "not_attempted": False, "error": str(exc)}
        return
    facts["compile"] = {"ok": True}
    pp = ex.parts["path"]
    try:
        ev = path_evidence(cubin, ex.kernel, pp.require, pp.forbid)
        facts["path"] = {"ok": ev.ok, "missing": ev.missing, "forbidden": {k: v[:3] for k, v in ev.forbidden.items()},
                         "found": {k: v[:3] for k, v in ev.found.items()}, "summary": ev.summary(),
                         "kernels": cubin.kernels}
        others = [k for k in cubin.kernels if k != ex.kernel]
        if not ev.ok and others:
            elsewhere = [k for k in others if path_evidence(cubin, k, pp.require, ()).ok]
            if elsewhere:
                facts["flags"].append(f"path-elsewhere: {', '.join(pp.require)} appear only in {elsewhere}, "
                                      f"not in {ex.kernel}, the kernel that does the work")
    except KeyError as exc:
        facts["path"] = {"ok": False, "missing": list(pp.require), "summary": str(exc), "no_kernel": True}
        facts["correctness"] = {"graded": False, "ok": False, "reason": str(exc)}
        return
    # What is known before the first launch survives a hang or a crash of what follows.
    sys.stdout.write("\n" + PARTIAL + json.dumps(facts, default=str) + "\n")
    sys.stdout.flush()
    if not gpu:
        why = device.cpu_mode_reason()
        facts["correctness"] = {"graded": False, "ok": False, "reason": f"needs an sm_90 GPU: {why}"}
        facts["throughput"] = {"graded": False, "reason": f"no H100 here ({why}): no throughput points"}
        return
    import torch

    torch.cuda.init()
    ok = _correctness(ex, wl, cubin, int(job["seed"]), facts)
    if not ok:
        facts["throughput"] = {"graded": False, "reason": "a kernel that is not correct is not timed"}
        return
    if not device.is_h100():
        facts["throughput"] = {"graded": False, "reason": f"{g['name']} is not an H100: the bars are H100 figures"}
        return
    _batch_ceilings()
    mine = time_exercise(ex, wl, cubin, int(job["seed"]), "student")
    ref = None
    if job.get("reference_source"):
        ref = _batch_reference(ex, wl, job)
    facts["throughput"] = {"graded": True, "student": mine, "reference": ref}
    if mine["value"] and mine["value"] > ex.roofline:
        facts["flags"].append(f"above-roofline: {mine['value']:.3f} {ex.metric} > {ex.roofline} — impossible "
                              "for work actually done")
    if not mine["output_ok"]:
        facts["flags"].append("stale-output: the timed runs' output does not match their fresh inputs")


if __name__ == "__main__":
    sys.exit(main())
