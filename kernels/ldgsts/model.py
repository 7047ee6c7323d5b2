"""Day 3's model: a sync vs async timeline of the tiles one SM works through (kernels.sim.simulate_pipeline),
with the load latency that the bandwidth being drawn sets (loaded latency) and the DRAM bandwidth as the roof.

Each resident block of an SM is a *slot* that streams tiles. Per tile, a slot spends

    the load latency L   from issuing a tile's loads to their landing (the thread, or the block, waits for them)
    a turnaround T       everything else before the slot's next loads go out: wake up from the wait, barrier, LDS,
                         FMAs, stores, and then either the block's exit and the next block's start (one tile per
                         block) or the loop back to the next prefetch (the persistent double-buffered rung)

    sync   (stages = 1)  load | wait L | T | next tile's loads ...         period  = ROUNDS x L + T
    async  (stages = 2)  tile i+1's loads fly while tile i is waited for    period  = max((L + T) / 2, T)
                         and computed
    DRAM roof            an SM's B slots share DRAM_FRACTION_OF_COPY x (the same run's copy ceiling) / SMs
                         bytes per ns, read and write bytes alike           period >= B x tile bytes / share

    predicted TB/s = SMs x B x counted bytes per tile / period  (the simulation adds the first tile's ramp and the
                                                                 last wave)

ROUNDS is the number of *dependent* load round trips per tile. It is 1 for every staged rung (all of a tile's copies
go out before the one wait). stencil_direct has 4: its SASS (tests/test_ldgsts.py checks it) issues the 7 loads of
one output, waits, computes, stores, then issues the next output's 7 loads — each thread has 4 bytes of x in flight
at a time, like day 1's copy_scalar, and pays the latency four times per tile.

The latency grows with the bandwidth being drawn (requests queue): L = IDLE_LATENCY_NS + LATENCY_SLOPE x TB/s. Both
numbers are day 1's measurement on the same H100 (copy_scalar with 256 / 512 / 1024 / 2048 threads per SM drew
0.44 / 0.79 / 1.40 / 2.41 TB/s at effective latencies 616 / 681 / 775 / 899 ns; kernels/naive_loads/model.py), not
refit here. The predicted bandwidth and the latency are solved together (a fixed point: more bandwidth, longer
latency, fewer tiles per ns).

Constants fitted here (fit to build/h100-run9, 2026-11-22: H100 80GB HBM3, copy ceiling 3.00 TB/s; `fit()` below
is the procedure, run on that recording's rows except "smooth_bf16 (correct)" — see FIT_SOURCE; smooth_bf16 was
the graded exercise then, a 1-D bf16 stencil with the same tile of 2048 outputs as today's blur2d_bf16):
- TURNAROUND_NS = 350: minimax over the latency-bound rows (stencil_smem_sync / _ldgsts / _ldgsts_db at 1 block/SM,
  stencil_ldgsts at 2, stencil_direct). ~640 cycles at 1.83 GHz. It is one number for rungs that differ in detail:
  stencil_smem_sync at 1 block/SM measured ~9% faster than the model, stencil_ldgsts at 2 blocks/SM ~9% slower.
- DRAM_FRACTION_OF_COPY = 0.937: minimax over the DRAM-bound rows. They spread from 0.88 (stencil_ldgsts_db) to
  1.01 (stencil_smem_sync, stage_copy_*) of the copy ceiling, so every one of them is within ~7% of the model.

What the earlier structure got wrong (the first fit, recorded in that run's model_fit): a separate BLOCK_SWITCH_NS
(the cost of retiring a block and starting the next) came out negative. With a constant latency, the double-
buffered rung at 1 block/SM (period (L + C) / 2 = 569 ns) implied L + C = 1138 ns, longer than the whole measured
period of the single-buffered rung (L + C + S = 1010 ns). The two rows were drawing different bandwidths (1.90 vs
1.07 TB/s): with the loaded latency of day 1, L is ~826 ns for one and ~710 ns for the other, and both rows agree on
one turnaround (~300 ns) — a one-tile block's exit and the next block's start cost nothing measurable beyond the
double-buffered loop's own turnaround. So there is no BLOCK_SWITCH_NS: the switch is inside T.

Not in the model (say so when reading the rows):
- stencil_ldgsts_db at full occupancy ran ~13% slower than stencil_smem_sync (2.63 vs 3.02 TB/s). It is not fewer
  resident threads: its persistent grid is 8 x 132 = 1056 blocks of 256 threads, the 2048 threads per SM the driver's
  occupancy calculator reports, and it keeps up to two tiles per block in flight. Day 1's persistent copy
  (copy_grid_stride) showed the same kind of loss against the one-chunk-per-thread copy (2.82 vs 3.02 TB/s). The
  likely cause is the persistent grid itself: each block's share of tiles (248 or 249) is fixed at launch, while a
  one-tile-per-block grid lets the block scheduler hand more tiles to SMs that drain faster; if SMs do not get equal
  shares of a saturated DRAM, the persistent kernel ends with its slowest SM. Unverified: it needs per-SM timing.
- At full occupancy the exercise's rows (bf16 in, fp32 out: two thirds of the bytes are writes; 2.65 TB/s for the
  course solution in the harness, 2.79 for plain_loads) and the zero-filling stencil_ldgsts (2.91) ran below the
  fp32 register-staged rung and the staged copies (3.02); the model gives them all one roof.
- Halo re-reads (8 elements per tile) hit L2: DRAM bytes per tile = the counted bytes. Stores are fire-and-forget.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from math import ceil

from ..sim import H100, PipelineResult, plot_pipeline_timeline, simulate_pipeline

__all__ = [
    "IDLE_LATENCY_NS", "LATENCY_SLOPE_NS_PER_TBPS", "TURNAROUND_NS", "DRAM_FRACTION_OF_COPY", "FITTED",
    "FIT_SOURCE", "KernelShape", "KERNELS", "Prediction", "loaded_latency_ns", "predict", "predict_tbps",
    "steady_tbps", "timeline", "fit", "explain", "plot_timelines",
]

# Loaded latency, L = IDLE_LATENCY_NS + LATENCY_SLOPE_NS_PER_TBPS x (TB/s drawn): day 1's measurement on the same
# H100 (kernels/naive_loads/model.py, kernels.sim.H100.dram_latency_ns), used as it is.
IDLE_LATENCY_NS = H100.dram_latency_ns  # 560 ns
LATENCY_SLOPE_NS_PER_TBPS = 140.0
# Fitted once (module docstring): fit to build/h100-run9, 2026-11-22.
TURNAROUND_NS = 350.0
DRAM_FRACTION_OF_COPY = 0.937
# True: the constants above hold fit()'s values for the recorded run; bench.run() and the tests then hold every
# prediction within +-20% of its measurement.
FITTED = True
FIT_SOURCE = ("fit to build/h100-run9, 2026-11-22 (H100 80GB HBM3, copy ceiling 3.00 TB/s): fit(rows, 3.001, "
              "exclude=('smooth_bf16 (correct)',)). The excluded row was timed by the bench with a refresh that "
              "differed from the grading harness's (2.39 there, 2.65 TB/s in the harness) and its kernel was "
              "changed afterwards; the model predicts it, the fit does not use it")

BENCH_N = 1 << 28  # mirrors workload.BENCH_N (a test checks); the model imports no torch
EXERCISE_BENCH_N = 8192 * 16384  # outputs at exercise.BENCH_SHAPE (H x W; a test checks)


@dataclass(frozen=True)
class KernelShape:
    name: str
    tile_outputs: int  # elements of y one tile produces
    tile_bytes: int  # bytes kernels.bench counts per tile: x read once + y written once
    landed_bytes: int  # bytes one tile's loads put in shared memory (tile + halo); informational
    stages: int  # 1: load, wait, compute; 2: the next tile's loads fly during this tile's compute
    rounds: int  # dependent load round trips per tile (1: every load of the tile goes out before the wait)
    persistent: bool  # one block walks many tiles (informational: the switch cost is inside TURNAROUND_NS)
    description: str


_F32_TILE = 1024 * 4 * 2  # 1024 floats read + 1024 written
KERNELS: dict[str, KernelShape] = {
    "stencil_direct": KernelShape("stencil_direct", 1024, _F32_TILE, 0, 1, 4, False,
                                  "plain loads: 4 rounds per thread of 7 loads (one output), wait, FMA, store"),
    "stencil_smem_sync": KernelShape("stencil_smem_sync", 1024, _F32_TILE, 258 * 16, 1, 1, False,
                                     "tile + halo through registers into shared memory, __syncthreads"),
    "stencil_ldgsts": KernelShape("stencil_ldgsts", 1024, _F32_TILE, 258 * 16, 1, 1, False,
                                  "tile + halo with 16-byte cp.async, wait_group 0"),
    "stencil_ldgsts_db": KernelShape("stencil_ldgsts_db", 1024, _F32_TILE, 258 * 16, 2, 1, True,
                                     "persistent, two buffers: tile i+1 in flight while tile i is computed"),
    "stage_copy_4": KernelShape("stage_copy_4", 1024, _F32_TILE, 4096, 1, 1, False, "4-byte cp.async.ca x4"),
    "stage_copy_8": KernelShape("stage_copy_8", 1024, _F32_TILE, 4096, 1, 1, False, "8-byte cp.async.ca x2"),
    "stage_copy_16_ca": KernelShape("stage_copy_16_ca", 1024, _F32_TILE, 4096, 1, 1, False, "16-byte cp.async.ca"),
    "stage_copy_16": KernelShape("stage_copy_16", 1024, _F32_TILE, 4096, 1, 1, False, "16-byte cp.async.cg"),
    # The graded exercise: bf16 in (2 B), fp32 out (4 B), a 16 x 128 tile of 2048 outputs per block, one tile per
    # block; its 18 x 18 staged chunks (5184 B) include the halos, which kernels.bench does not count.
    "blur2d_bf16": KernelShape("blur2d_bf16", 2048, 2048 * (2 + 4), 18 * 18 * 16, 1, 1, False,
                               "exercise: 3x3 bf16 stencil on a pitch-linear image, fp32 out, cp.async-staged"),
    # The former exercise (1-D, 9 taps, the same tile of 2048 outputs): the constants were fit to rows that include
    # its plain_loads row (FIT_SOURCE), so the model keeps it to reproduce that fit.
    "smooth_bf16": KernelShape("smooth_bf16", 2048, 2048 * (2 + 4), 258 * 16, 1, 1, False,
                               "former exercise: 9-point 1-D bf16 stencil, fp32 out, cp.async-staged"),
}


def _shape(kernel: str) -> KernelShape:
    try:
        return KERNELS[kernel]
    except KeyError:
        raise ValueError(f"kernel {kernel!r}: the model knows {tuple(KERNELS)}") from None


@dataclass(frozen=True)
class Constants:
    idle_latency_ns: float
    latency_slope: float  # ns per TB/s drawn
    turnaround_ns: float
    fraction: float  # of the copy ceiling


def _constants(idle_latency_ns=None, latency_slope=None, turnaround_ns=None, fraction=None) -> Constants:
    return Constants(IDLE_LATENCY_NS if idle_latency_ns is None else float(idle_latency_ns),
                     LATENCY_SLOPE_NS_PER_TBPS if latency_slope is None else float(latency_slope),
                     TURNAROUND_NS if turnaround_ns is None else float(turnaround_ns),
                     DRAM_FRACTION_OF_COPY if fraction is None else float(fraction))


def loaded_latency_ns(tbps: float, *, idle_latency_ns: float | None = None,
                      latency_slope: float | None = None) -> float:
    """Load latency while the GPU draws `tbps` (bytes read + written): day 1's linear fit."""
    k = _constants(idle_latency_ns, latency_slope)
    return k.idle_latency_ns + k.latency_slope * tbps


@dataclass(frozen=True)
class Prediction:
    kernel: str
    n: int
    blocks_per_sm: int
    tbps: float
    time_ns: float
    tiles_per_slot: int
    period_ns: float  # steady-state time per tile of one slot
    bound: str  # "bandwidth" or "latency"
    latency_ns: float  # the loaded latency at the predicted bandwidth
    turnaround_ns: float
    share_bytes_per_ns: float  # one SM's share of the DRAM bandwidth

    def as_dict(self) -> dict:
        return asdict(self)


def _latency_period(k: KernelShape, latency: float, turnaround: float) -> float:
    if k.stages == 1:
        return k.rounds * latency + turnaround
    return max((k.rounds * latency + turnaround) / k.stages, turnaround)


def _steady(k: KernelShape, blocks_per_sm: int, ceiling_tbps: float, sms: int, c: Constants):
    """(TB/s, period ns, bound, loaded latency ns) in steady state: the fixed point of bandwidth and latency."""
    share = ceiling_tbps * c.fraction * 1e3 / sms  # bytes per ns per SM (1 TB/s = 1e3 bytes/ns)
    band_period = blocks_per_sm * k.tile_bytes / share
    roof = sms * blocks_per_sm * k.tile_bytes / band_period / 1e3

    def tbps_at(drawn: float) -> float:
        period = max(_latency_period(k, c.idle_latency_ns + c.latency_slope * drawn, c.turnaround_ns), band_period)
        return sms * blocks_per_sm * k.tile_bytes / period / 1e3

    # tbps_at falls as `drawn` rises: bisect for tbps_at(b) = b on [0, roof]
    lo, hi = 0.0, roof
    if tbps_at(hi) >= hi:
        lo = hi
    else:
        for _ in range(60):
            mid = 0.5 * (lo + hi)
            lo, hi = (mid, hi) if tbps_at(mid) > mid else (lo, mid)
    drawn = lo
    latency = c.idle_latency_ns + c.latency_slope * drawn
    lat_period = _latency_period(k, latency, c.turnaround_ns)
    period, bound = (band_period, "bandwidth") if band_period >= lat_period else (lat_period, "latency")
    return sms * blocks_per_sm * k.tile_bytes / period / 1e3, period, bound, latency


def steady_tbps(kernel: str, ceiling_tbps: float, blocks_per_sm: int, *, sms: int = H100.sm_count, **constants):
    """Steady-state prediction (no ramp, no last wave): fast, for fits. `constants`: idle_latency_ns,
    latency_slope, turnaround_ns, fraction."""
    return _steady(_shape(kernel), blocks_per_sm, ceiling_tbps, sms, _constants(**constants))[0]


def timeline(kernel: str, blocks_per_sm: int, share_bytes_per_ns: float, n_tiles: int, *, latency_ns: float,
             turnaround_ns: float | None = None) -> PipelineResult:
    """simulate_pipeline for one slot of `kernel`: n_tiles tiles (x its dependent rounds), its stages, the
    per-slot bandwidth interval, the given load latency."""
    k = _shape(kernel)
    turn = TURNAROUND_NS if turnaround_ns is None else turnaround_ns
    interval = blocks_per_sm * k.tile_bytes / k.rounds / share_bytes_per_ns
    return simulate_pipeline(n_tiles * k.rounds, k.stages, latency_ns, interval, turn / k.rounds)


def predict(kernel: str, ceiling_tbps: float, blocks_per_sm: int, *, n: int | None = None, sms: int = H100.sm_count,
            idle_latency_ns: float | None = None, latency_slope: float | None = None,
            turnaround_ns: float | None = None, fraction: float | None = None) -> Prediction:
    """Predicted bandwidth (TB/s, as kernels.bench counts it) of `kernel` at `blocks_per_sm` resident blocks.

    ceiling_tbps: the D2D copy ceiling measured in the same run. blocks_per_sm: resident blocks per SM (the
    occupancy the driver reports for the launch; for stencil_ldgsts_db also its persistent blocks per SM)."""
    k = _shape(kernel)
    if blocks_per_sm < 1:
        raise ValueError("blocks_per_sm must be >= 1")
    if ceiling_tbps <= 0:
        raise ValueError("ceiling_tbps must be positive")
    c = _constants(idle_latency_ns, latency_slope, turnaround_ns, fraction)
    n = n if n is not None else (EXERCISE_BENCH_N if kernel in ("blur2d_bf16", "smooth_bf16") else BENCH_N)
    share = ceiling_tbps * c.fraction * 1e3 / sms
    _, period, bound, latency = _steady(k, blocks_per_sm, ceiling_tbps, sms, c)
    tiles = ceil(n / k.tile_outputs)
    slots = min(blocks_per_sm * sms, tiles)
    tiles_per_slot = ceil(tiles / slots)
    res = timeline(kernel, blocks_per_sm, share, tiles_per_slot, latency_ns=latency, turnaround_ns=c.turnaround_ns)
    # simulate_pipeline spaces the issues by the bandwidth interval; the pipe must also finish moving the last
    # tile's bytes, so a slot takes at least tiles x interval.
    time_ns = max(res.total_time, tiles_per_slot * blocks_per_sm * k.tile_bytes / share)
    counted = n * k.tile_bytes / k.tile_outputs
    return Prediction(kernel, n, blocks_per_sm, counted / time_ns / 1e3, time_ns, tiles_per_slot, period, bound,
                      latency, c.turnaround_ns, share)


def predict_tbps(kernel: str, ceiling_tbps: float, blocks_per_sm: int, **kw) -> float:
    return predict(kernel, ceiling_tbps, blocks_per_sm, **kw).tbps


def _row_kernel(row: dict) -> str:
    return row["kernel"].split(" (")[0]


def fit(rows: list[dict], ceiling_tbps: float, *, sms: int = H100.sm_count, exclude: tuple[str, ...] = (),
        idle_latency_ns: float | None = None, latency_slope: float | None = None) -> dict:
    """Fit TURNAROUND_NS and DRAM_FRACTION_OF_COPY to recorded rows (dicts with "kernel", "tbps",
    "resident_blocks"; rows whose kernel the model does not know, and rows named in `exclude`, are skipped).

    - DRAM_FRACTION_OF_COPY: minimax over the rows the model calls bandwidth-bound (their prediction is
      proportional to it): the fraction that makes the largest over- and under-prediction equal.
    - TURNAROUND_NS: minimax over the latency-bound rows (ternary search: each row's error is monotonic in T).
    The latency curve (IDLE_LATENCY_NS, LATENCY_SLOPE_NS_PER_TBPS) is day 1's and is not fit here. Returns the
    values, each used row's error at them, the largest |error| and notes."""
    used = [r for r in rows if _row_kernel(r) in KERNELS and r["kernel"] not in exclude and r.get("tbps")]
    if not used:
        raise ValueError("no rows the model knows")
    lat_kw = dict(idle_latency_ns=idle_latency_ns, latency_slope=latency_slope)
    turn, frac = TURNAROUND_NS, DRAM_FRACTION_OF_COPY

    def pred(r, t, f):
        return steady_tbps(_row_kernel(r), ceiling_tbps, int(r["resident_blocks"]), sms=sms, turnaround_ns=t,
                           fraction=f, **lat_kw)

    def bound(r, t, f):
        k = _shape(_row_kernel(r))
        return _steady(k, int(r["resident_blocks"]), ceiling_tbps, sms, _constants(turnaround_ns=t, fraction=f,
                                                                                   **lat_kw))[2]

    for _ in range(4):  # classification and constants settle in one or two rounds
        band_rows = [r for r in used if bound(r, turn, frac) == "bandwidth"]
        lat_rows = [r for r in used if r not in band_rows]
        if band_rows:
            ratios = [pred(r, turn, 1.0) / r["tbps"] for r in band_rows]
            frac = 2.0 / (max(ratios) + min(ratios))
        if lat_rows:
            def worst(t):
                return max(abs(pred(r, t, frac) / r["tbps"] - 1) for r in lat_rows)
            lo, hi = 0.0, 3000.0
            for _ in range(80):
                a, b = lo + (hi - lo) / 3, hi - (hi - lo) / 3
                lo, hi = (lo, b) if worst(a) <= worst(b) else (a, hi)
            turn = 0.5 * (lo + hi)
    errors = {f"{r['kernel']} | {r.get('shape', '')}": pred(r, turn, frac) / r["tbps"] - 1 for r in used}
    notes = [f"bandwidth-bound rows: {len(band_rows)}, latency-bound rows: {len(lat_rows)}",
             f"latency curve not fit: {loaded_latency_ns(0, **lat_kw):.0f} ns + "
             f"{loaded_latency_ns(1, **lat_kw) - loaded_latency_ns(0, **lat_kw):.0f} ns per TB/s (day 1)"]
    if exclude:
        notes.append(f"excluded: {', '.join(exclude)}")
    return {"TURNAROUND_NS": turn, "DRAM_FRACTION_OF_COPY": frac, "max_abs_error": max(abs(e) for e in errors.values()),
            "errors": errors, "notes": notes}


def explain(ceiling_tbps: float | None = None, full_blocks_per_sm: int = 8) -> str:
    """The model in words and numbers for the notebook."""
    ceil_ = ceiling_tbps or 3.0
    lines = [
        "Model: each resident block is a slot streaming tiles through 1 (sync) or 2 (async) buffers; per tile it",
        f"waits the loaded latency L = {IDLE_LATENCY_NS:.0f} ns + {LATENCY_SLOPE_NS_PER_TBPS:.0f} ns per TB/s drawn "
        f"(day 1's measurement) and spends TURNAROUND {TURNAROUND_NS:.0f} ns on everything else;",
        f"an SM's slots share DRAM_FRACTION_OF_COPY ({DRAM_FRACTION_OF_COPY:.3f}) x the copy ceiling "
        f"({ceil_:.2f} TB/s{'' if ceiling_tbps else ', assumed'}). Constants {'fitted' if FITTED else 'NOT fitted'}.",
    ]
    for kernel, blocks in (("stencil_direct", full_blocks_per_sm), ("stencil_smem_sync", full_blocks_per_sm),
                           ("stencil_ldgsts", full_blocks_per_sm), ("stencil_ldgsts_db", full_blocks_per_sm),
                           ("stencil_ldgsts", 1), ("stencil_ldgsts", 2), ("stencil_ldgsts_db", 1)):
        p = predict(kernel, ceil_, blocks)
        lines.append(f"  {kernel:<18} {blocks} block(s)/SM: L {p.latency_ns:4.0f} ns, period {p.period_ns:5.0f} ns "
                     f"per tile per block, {p.bound:<9}-bound -> {p.tbps:.2f} TB/s ({p.tbps / ceil_:.0%} of the "
                     "ceiling)")
    lines += [
        "At full occupancy every staged rung meets the DRAM roof: cp.async buys no bandwidth by itself.",
        "stencil_direct does not: 4 dependent rounds of loads per tile keep 4 bytes per thread in flight (Little's law).",
        "At one block per SM the single-buffered rungs wait L + T per tile; the double-buffered rung overlaps the next",
        "tile's latency with this tile's wait and turnaround: about half the period.",
    ]
    return "\n".join(lines)


def plot_timelines(ceiling_tbps: float = 3.0, n_tiles: int = 6, blocks_per_sm: int = 1):
    """Side-by-side Gantt charts of one slot: stencil_ldgsts (sync) and stencil_ldgsts_db (async), each at the
    loaded latency of its own predicted bandwidth."""
    from matplotlib.figure import Figure


    fig = Figure(figsize=(11, 3.2), layout="constrained")
    axes = fig.subplots(1, 2, sharex=True)
    for ax, kernel, title in ((axes[0], "stencil_ldgsts", "sync: load | wait | turnaround"),
                              (axes[1], "stencil_ldgsts_db", "async: next tile in flight during the wait")):
        p = predict(kernel, ceiling_tbps, blocks_per_sm)
        res = timeline(kernel, blocks_per_sm, p.share_bytes_per_ns, n_tiles, latency_ns=p.latency_ns)
        plot_pipeline_timeline(res, ax=ax, title=f"{title} (L = {p.latency_ns:.0f} ns)")
        ax.set_xlabel("ns (grey: tile's loads in flight; blue: turnaround)")
    return fig
