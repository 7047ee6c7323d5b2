"""Run an exercise's workload under its launch contract: launch, wait with a deadline, time with every launch
verified. The grader's harness and a topic's benchmark share it (a benchmark times an answer exactly as grading
does), so it lives in the library.

    cubin = compile_cuda(source); ex = autograder.spec.load("tma").exercises["tma_add"]
    res = time_exercise(ex, ex.workload(), cubin, seed=7, tag="student")
    res["value"], res["output_ok"], res["problems"], res["plan"]
"""

from __future__ import annotations

import hashlib
import random
import time


def derive(seed: int, *parts) -> int:
    """A seed for one use (a shape, a run, a plan) from a job's seed: fresh per use, reproducible per job."""
    h = hashlib.sha256(repr((seed, *parts)).encode()).digest()
    return int.from_bytes(h[:7], "little")


def launch_contract(ex, cubin, la) -> None:
    """Launch the exercise's kernel with the launch arguments its workload built (grid, block, smem, cluster)."""
    from .launch import launch

    launch(cubin, ex.kernel, grid=la["grid"], block=la["block"], args=la["args"], smem=la.get("smem", 0),
           cluster=la.get("cluster"))


class KernelHang(RuntimeError):
    pass


def wait(deadline_s: float, what: str) -> None:
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


def checked_launch(ex, wl, cubin, inputs: dict, ref, what: str, deadline_s: float | None = None):
    """One launch on fresh inputs, checked: the output poisoned first, the launch waited for with the spec's deadline
    (or `deadline_s`: a kernel under compute-sanitizer runs many times slower), the output compared with `ref` — the
    reference of the inputs *as they were drawn*, computed before the launch, so a kernel that rewrites its inputs
    cannot make its output "right" for what it left behind. Returns (output, kernels.check report)."""
    from .check import compare, poison

    out = poison(wl.make_output(inputs))
    launch_contract(ex, cubin, wl.launch_args(inputs, out))
    wait(ex.launch_timeout_s if deadline_s is None else deadline_s, what)
    return out, compare(out, ref, **dict(wl.CHECK))


def time_exercise(ex, wl, cubin, seed: int, tag: str, ceilings: dict | None = None, ranges=None) -> dict:
    """Time one kernel at the bench shape with the course's one timer, verifying every launch.

    Fresh input values before every launch (regenerated in place, outside the timed region: no result can be
    reused), the output poisoned, and after the launch its output compared with the reference of exactly those
    inputs as drawn (computed before the launch). The numbers of warm-ups, timed repetitions and wall-clock calls are
    drawn from the seed; each wall-clock call writes its own output, so each is verified too. `ranges` (a
    kernels.rangeprof.RangeCounters, entered): as many counted repetitions as timed ones, interleaved at positions
    drawn from the seed, each in a counter range of its own and left out of the timing (kernels.bench)."""
    import torch

    from .bench import bench
    from .check import compare, poison

    rng = random.Random(derive(seed, tag, "counts"))
    warmup, reps, wall = rng.randint(2, 5), ex.bench_reps + rng.randint(0, 7), rng.randint(5, 10)
    # With counters: as many counted repetitions as timed ones, at positions drawn from the seed (kernels.bench).
    counted = frozenset(rng.sample(range(2 * reps), reps)) if ranges is not None else frozenset()
    shape = ex.bench_shape
    pool = [wl.make_inputs(shape, derive(seed, tag, "pool", i), device="cuda") for i in range(2)]
    out = wl.make_output(pool[0])
    count = [0]
    refs: dict = {}

    def refresh(inputs):
        fresh = wl.make_inputs(shape, derive(seed, tag, "rep", count[0]), device="cuda")
        count[0] += 1
        for k, v in fresh.items():
            if isinstance(v, torch.Tensor):
                inputs[k].copy_(v)
        # the reference of the inputs as drawn, before any launch can touch them (outside the timed region)
        refs[id(inputs)] = wl.reference(inputs)

    def make_args():
        # Everything host-side happens here, outside the timed region: fresh values in the same buffers, the
        # output poisoned, and the launch arguments (tensor maps included) built.
        inputs = pool[count[0] % 2]
        refresh(inputs)
        poison(out)
        return (wl.launch_args(inputs, out), inputs, out)

    def make_wall_args(n):
        inputs = pool[0]
        refresh(inputs)
        outs = [poison(wl.make_output(inputs)) for _ in range(n)]
        return [(wl.launch_args(inputs, o), inputs, o) for o in outs]

    def run(la, inputs, o):
        launch_contract(ex, cubin, la)

    def verify(args):
        la, inputs, o = args
        wait(ex.launch_timeout_s, f"{ex.kernel} at the bench shape")
        rep = compare(o, refs[id(inputs)], **dict(wl.CHECK))
        return None if rep.ok else rep.message.splitlines()[0]

    nbytes = wl.bytes_moved(shape)
    nflops = wl.flops(shape)
    res = bench(run, make_args, bytes=nbytes, flops=nflops, reps=reps, warmup=warmup, with_ceilings=False,
                verify=verify, wall_calls=wall, make_wall_args=make_wall_args, ranges=ranges,
                counted=counted)
    value = res.tbps if ex.metric == "tbps" else res.tflops
    return {"value": value, "ms": res.ms, "p20_ms": res.p20_ms, "p80_ms": res.p80_ms, "wall_ms": res.wall_ms,
            "ceilings": ceilings, "output_ok": not res.problems, "problems": res.problems[:5],
            "wrong_launches": len(res.problems), "launches": res.launches, "verified": res.verified,
            "plan": {"warmup": warmup, "reps": reps, "wall_calls": wall, "counted": len(counted)},
            "counted_ms": res.counted_ms, "bytes": nbytes, "flops": nflops,
            "written_bytes": out.numel() * out.element_size()}


_baselines: dict = {}


def exercise_baseline(ex, wl, seed: int = 0) -> dict:
    """The figure an exercise's throughput bar is a fraction of, measured in this process with the course timer
    (once per exercise): the D2D copy ceiling for a TB/s exercise (spec copy_fraction), or the vendor library doing
    the exercise's own work on the exercise's inputs at its bench shape (spec vendor_fraction; the workload's
    `vendor`). {"kind", "what", "value", "ms"}."""
    from .bench import bench, ceilings

    tp = ex.parts["throughput"]
    key = (ex.name, tp.baseline_kind)
    if tp.baseline_kind == "copy":  # ceilings() measures once per process
        c = ceilings()
        return {"kind": "copy", "what": "D2D copy (torch, 1 GiB)", "value": c["copy_tbps"], "ms": c.get("copy_ms")}
    if key in _baselines:
        return _baselines[key]
    if tp.baseline_kind == "vendor":
        if not hasattr(wl, "vendor"):
            raise ValueError(f"{ex.name}: a vendor_fraction bar needs `vendor(inputs, out)` in {wl.__name__}")
        inputs = wl.make_inputs(ex.bench_shape, derive(seed, "vendor"), device="cuda")
        fn = wl.vendor(inputs, wl.make_output(inputs))
        r = bench(fn, bytes=wl.bytes_moved(ex.bench_shape), flops=wl.flops(ex.bench_shape), reps=ex.bench_reps,
                  with_ceilings=False)
        value = r.tbps if ex.metric == "tbps" else r.tflops
        res = {"kind": "vendor", "what": wl.VENDOR, "value": value, "ms": r.ms}
    else:
        raise ValueError(f"{ex.name}: its throughput part names no baseline (copy_fraction / vendor_fraction)")
    _baselines[key] = res
    return res
