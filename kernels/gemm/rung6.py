"""Week 2, day 4: rung 6's switches (launch.TUNE: cluster 1 / 2, GROUP_M, ring depth and store slots, grid), side by
side with rung 5 and cuBLAS in one process on the same inputs, each checked on the awkward shapes first, and ncu's
tensor-pipe share of rung 5 and rung 6 (the counter that explains the gain):

    python -c "from kernels.gemm.rung6 import rung6; rung6()"

Needs an sm_90 GPU.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from .. import ncu
from ..bench import bench, ceilings, refill, rotating_inputs
from ..clock import SmClock, timed
from ..topic import check_reports
from . import epilogue, exercise, model
from .bench import RTOL
from .launch import KERNELS, gemm, grid, smem_bytes, tuned
from .workload import SHAPES, TEST_SHAPES, flops, make_inputs, reference, shape_name

# ---------------------------------------------------------------------------------------------- rung 6's switches
# (label, launch.TUNE overrides): the default first; each other row changes one switch (two for the ring / slots
# trade, which moves both under the shared-memory budget).
RUNG6_TUNES = (
    ("store_warp", {}),                                      # cluster 2, GROUP_M 16, 4 stages x 2 slots, balanced
    ("store_warp c1", {"cluster": 1}),                       # no multicast: each CTA loads its own B
    ("store_warp g8", {"group_m": 8}),                       # 8 tile rows per group (rung 5's count is 8 pairs)
    ("store_warp g32", {"group_m": 32}),
    ("store_warp s3x4", {"stages": 3, "slots": 4}),          # a whole accumulator staged: no wait for a slot
    ("store_warp c1 s3x4", {"cluster": 1, "stages": 3, "slots": 4}),
    ("store_warp sms", {"grid": "sms"}),                     # one CTA per SM (132) instead of the balanced 128
)


def tensor_pipe(workdir, variants=("cluster", "store_warp"), shape=SHAPES[0]) -> dict:
    """ncu's tensor-pipe active share (percent of the peak sustained while the SMs were active) and duration of one
    launch of each rung at `shape`, each in a process of its own (kernels.ncu.pipe_shares): why rung 6 gains on rung 5
    — its tensor core waits less between tiles (epilogue.rung6_gain: the busy share the model predicts).
    {variant: {"pct", "metric", "ms"} or {"error"}}."""
    code = ("import sys, torch; from kernels.gemm.launch import gemm; from kernels.gemm.exercise import make_inputs; "
            f"x = make_inputs({tuple(shape)}, 1); v = sys.argv[1]; "
            "[gemm(x['a'], x['b'], v) for _ in range(3)]; torch.cuda.synchronize()")
    root = Path(__file__).resolve().parents[2]
    out: dict = {}
    for v in variants:
        try:
            m = ncu.pipe_shares([sys.executable, "-c", code, v], {"tensor": ncu.TENSOR_PIPE},
                                kernel=f"regex:^{KERNELS[v]}$", workdir=Path(workdir) / f"ncu_{v}", cwd=str(root))
        except ncu.ProfilerUnavailable as exc:
            return {v: {"error": str(exc)[-800:]} for v in variants}
        out[v] = m if "error" in m else {"pct": m["tensor"], "metric": m["metrics"]["tensor"], "ms": m["ms"]}
    return out


def _rung6_call(run, a, b, out):
    """One run of rung6(): (variant, None) for a ladder row or cuBLAS, ("<tune name>", tune) for a rung-6 switch."""
    name, t = run
    if t is None:
        gemm(a, b, name, out=out)
    else:
        gemm(a, b, "store_warp", out=out, tune=t)


def _rung6_check(runs, shape, seed: int) -> tuple[list[str], set]:
    """(failures, names of the wrong runs): every run on the awkward test shapes and at `shape` (the scaffold's loop,
    NaN-poisoned outputs) — the test shapes give a CTA one tile at most, so only at `shape` does every store slot and
    every ring stage go round many times across tiles (a stale slot or a missed parity shows there first)."""
    failures, bad = [], set()
    for c in check_reports(runs, (*TEST_SHAPES, shape), inputs=make_inputs, reference=reference,
                           check={"rtol": RTOL}, seed=seed + 1, output=lambda inp, run: exercise.make_output(inp),
                           launch=lambda run, inp, out: _rung6_call(run, inp["a"], inp["b"], out)):
        if not c.ok:
            bad.add(c.run[0])
            failures.append(f"{c.run[0]} {shape_name(c.shape)}: {c.message}")
    for f in failures:
        print("WRONG", f)
    return failures, bad


def _rung6_time(runs, shape, pool, reps: int, seed: int) -> tuple[dict, dict]:
    """({name: [TFLOPS of pass 1, pass 2]}, {name: [ms, ms]}): two passes, forward then reversed."""
    import torch

    out = torch.empty(shape[0], shape[1], dtype=torch.bfloat16, device="cuda")
    tf: dict = {r[0]: [] for r in runs}
    ms: dict = {r[0]: [] for r in runs}
    with SmClock() as clock:
        for order in (runs, runs[::-1]):
            for run in order:
                args = rotating_inputs(pool, refill(make_inputs, shape, seed + 1000))
                res, _ = timed(clock, lambda run=run: bench(lambda inp: _rung6_call(run, inp["a"], inp["b"], out),
                                                            args, flops=flops(shape), reps=reps, warmup=3,
                                                            warm_s=0.25))
                tf[run[0]].append(res.tflops)
                ms[run[0]].append(res.ms)
    return tf, ms


def _rung6_rows(runs, shape, bad: set, tf: dict, ms: dict, dram: float, sms: int) -> list[dict]:
    """One row per run: its tune, correctness, mean TFLOPS of the passes, ratio to cuBLAS, grid, shared memory,
    the model's figure."""
    rows = []
    cub = sum(tf["cublas"]) / 2 if "cublas" in tf else None
    for name, t in runs:
        r = {"name": name, "tune": None if t is None else tuned(t), "correct": name not in bad}
        if name in tf:
            r.update(tflops=sum(tf[name]) / 2, passes=tf[name], ms=sum(ms[name]) / 2)
            r["over_cublas"] = r["tflops"] / cub if cub else None
        if t is not None:
            r["grid"] = grid("store_warp", shape, sms, t)
            r["smem_kib"] = smem_bytes("store_warp", tune=t) / 1024
            r["model"] = model.predict_config(model.store_warp_config(shape, t), dram).tflops
        elif name == "cluster":
            r["grid"] = grid("cluster", shape, sms)
            r["smem_kib"] = smem_bytes("cluster") / 1024
            r["model"] = model.predict_config(model.configs_for(shape)["cluster"], dram).tflops
        rows.append(r)
    return rows


def _rung6_print(rows, pipe: dict, shape, dram: float, cub_ceiling: float, failures: list[str]) -> None:
    from ..device import gpu

    print(f"\nrung 6 vs rung 5 and cuBLAS at {shape_name(shape)} on {(gpu() or {}).get('name')} (cuBLAS ceiling of "
          f"this run {cub_ceiling:.1f} TFLOPS; every row on the exercise's inputs; TFLOPS = mean of two passes)")
    print(f"{'run':<20} {'cl':>2} {'G':>3} {'st':>2} {'sl':>2} {'grid':>5} {'smem':>6} {'ok':>3} {'ms':>7} "
          f"{'TFLOPS':>7} {'pass1/pass2':>13} {'x cuBLAS':>8} {'model':>6}")
    for r in rows:
        t = r["tune"] or {}
        cl = t.get("cluster", 2 if r["name"] == "cluster" else "")
        tf_ = f"{r['tflops']:7.1f}" if r.get("tflops") else "      -"
        ps = "/".join(f"{x:.0f}" for x in r.get("passes", []))
        print(f"{r['name']:<20} {cl!s:>2} {t.get('group_m', '')!s:>3} {t.get('stages', '')!s:>2} "
              f"{t.get('slots', '')!s:>2} {r.get('grid', '')!s:>5} "
              f"{(str(round(r['smem_kib'])) + 'K') if r.get('smem_kib') else '':>6} "
              f"{'yes' if r['correct'] else 'NO':>3} {r.get('ms', float('nan')):7.4f} {tf_} {ps:>13} "
              f"{(r.get('over_cublas') or float('nan')):8.3f} "
              f"{(str(round(r['model'])) if r.get('model') else ''):>6}")
    for v, m in pipe.items():
        print(f"ncu {v:<11}: " + (f"tensor pipe active {m['pct']:.1f} % ({m['metric'].split('.')[0]}), "
                                  f"{m['ms']:.3f} ms under ncu" if "pct" in m else f"error: {m['error'][-300:]}"))
    gain = epilogue.rung6_gain(shape, dram)
    if gain:
        print("model: tensor core busy " + ", ".join(f"{v} {g['tensor_busy']:.1%} (epilogue {g['epilogue_ns']:.0f} "
                                                     f"ns/tile)" for v, g in gain.items()))
    print(f"correctness: {'all right' if not failures else f'{len(failures)} failures'} on {len(TEST_SHAPES)} "
          f"awkward shapes and at {shape_name(shape)}")


def rung6(shape=SHAPES[0], reps: int = 20, seed: int = 0, ncu_counter: bool = True, tunes=RUNG6_TUNES) -> list[dict]:
    """Rung 6's switches next to rung 5 and cuBLAS, in one process on the same inputs: (1) every run on every
    awkward test shape against the fp32 reference (NaN-poisoned outputs: the scaffold's loop) and once at `shape`
    (_rung6_check); (2) each timed at `shape` with the course timer (L2 flushed, fresh draws of the exercise's inputs
    each repetition), in two passes — forward, then reversed, so a drifting clock shows as a gap between them;
    (3) ncu's tensor-pipe share of rung 5 and rung 6 (tensor_pipe). A run that is wrong anywhere is not timed.
    Prints one table; returns its rows. Needs an sm_90 GPU."""
    import torch

    runs = [("cluster", None)] + [(name, t) for name, t in tunes] + [("cublas", None)]
    failures, bad = _rung6_check(runs, shape, seed)
    pool = [make_inputs(shape, seed + k) for k in range(2)]
    dram, cub_ceiling = ceilings()["copy_tbps"], ceilings()["cublas_bf16_tflops"]
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    tf, ms = _rung6_time([r for r in runs if r[0] not in bad], shape, pool, reps, seed)
    rows = _rung6_rows(runs, shape, bad, tf, ms, dram, sms)
    pipe = {}
    if ncu_counter:
        with tempfile.TemporaryDirectory() as d:
            pipe = tensor_pipe(d, shape=shape)
    _rung6_print(rows, pipe, shape, dram, cub_ceiling, failures)
    return rows + ([{"name": "tensor_pipe", **pipe}] if pipe else [])
