"""The trusted harness's child side, run as `python -m autograder.harness_child <mode>` by autograder.harness (one
process per job, a minimal environment, its own process group): `baseline` measures the trusted figures, `grade`
compiles, checks and times a student's kernel, `probe` runs the one launch Nsight Compute measures. Its records go
to the private verdict descriptor the parent passed, never to stdout, where a kernel's printf lands."""

from __future__ import annotations

import json
import math
import os
import random
import signal
import sys
import time
import traceback
from pathlib import Path

from kernels import device, rangeprof, record
from kernels.runner import KernelHang, checked_launch, derive, exercise_baseline, time_exercise

from .harness import _baseline_key
from .spec import load
from kernels.sass import path_evidence


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
    from kernels.bench import ceilings
    from kernels.compile import compile_cuda


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
