"""Day 4's model: a discrete-event N-stage pipeline per block (kernels.sim.simulate_pipeline), summed over the SMs.

A block streams its tiles through a ring of `stages` shared-memory buffers. In the event simulation

    tile i is issued when buffer i % stages is free (tile i - stages consumed) and the memory system has room,
    it lands LATENCY later, and the block consumes tiles in order, COMPUTE each.

In steady state that gives (the simulation adds the first tiles' ramp and the last tile's drain):

    period per tile = max( (LATENCY + COMPUTE) / stages,   COMPUTE,   tile bytes / (bandwidth share of the block) )
    predicted TB/s  = blocks x bytes per block / (time of one block)

- stages = 1: load, wait, add, load, ...: every tile pays the full latency (Little's law with 1 tile in flight).
- each extra stage puts one more tile in flight: the latency-bound rate grows linearly with stages, until the
  block's share of the bandwidth (the copy ceiling measured in the same run x READ_CEILING, split evenly over
  SMs x blocks per SM) caps it. Blocks per SM multiply bytes in flight the same way stages do.

Two workloads:
1. The streaming sum of stream.cu (prim, pipe, roles; 1-4 stages; a persistent grid of `blocks_per_sm` x SMs
   blocks of 4 KiB tiles). `predict_stream(...)`. Roles (a producer warp, consumer warps) adds two barrier
   hand-offs to every tile's round trip: consumers release -> the producer's acquire returns and it issues; the
   data lands -> the produced phase completes -> the consumers' wait returns (HANDOFF_NS in total).
2. The resample exercise (a block = search its 256 targets, then stream its source window in 16-row tiles with 4
   stages while lerping and storing). `predict_resample(...)`: one block alone takes SEARCH (binary-search steps
   of dependent loads) + its pipeline over its tiles (latency-bound); SMs x blocks per SM such blocks run at once;
   their combined pace is capped by the copy ceiling (read + write bytes); the first search and tile are a ramp.

Named constants (explicit, few; placeholders until fit to recorded_h100.json by `fit()`, whose result bench.py
records next to the measurements as "model_fit"; paste it below and set FITTED = True, and tests/test_pipeline.py
holds every recorded row within +-20 % of the model):
- LATENCY_NS: from a tile's cp.async issue to its last byte in shared memory (the loaded DRAM latency).
  Placeholder: 2 x kernels.sim.H100.dram_latency_ns. Identified by the 1-stage rows (latency-bound).
- COMPUTE_NS: per-tile consumer time of the streaming sum: wait, LDS.128, 4 FADD, commit, loop, per warp x 8
  warps over 4 schedulers. Estimate ~100 cycles ~ 55 ns; only LATENCY + COMPUTE is identified by the data.
- HANDOFF_NS: the roles kernel's two mbarrier hand-offs per tile (arrive -> try_wait wakes), fit from roles S=1.
- READ_CEILING: the rate of a read-only stream as a fraction of the copy ceiling (the copy mixes reads and
  writes; reads alone may run a little faster). Fit from the saturated (4-stage) rows.
- SEARCH_STEP_NS: one step of the per-thread binary search over the batch's times (a dependent LDG that mostly
  hits L1/L2). log2(S) + 1 steps per block before its first tile is issued.
- EX_COMPUTE_NS: per-tile time of the resample consumer (search of the tile's targets, 2 LDS.128 + 8 FMA + 1
  STG.128 per target and lane, the pipeline's waits).
- MIXED_CEILING: the rate of the resample's read + write stream as a fraction of the copy ceiling.

Assumptions (say so when a measurement disagrees):
- Blocks of a persistent grid are spread one per SM before any SM gets a second (grid = SMs x blocks per SM).
- Bandwidth is shared evenly by the resident blocks (a FIFO memory system with deterministic service): the knee
  between latency-bound and bandwidth-bound is sharp here and rounder on the GPU (queueing adds latency as the
  load approaches the ceiling), so the stage just below saturation is where the model errs most.
- The window tiles of resample overlap by one row (1/15 extra reads) that hit L2: DRAM bytes are the honest ones.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import asdict, dataclass
from functools import lru_cache
from math import ceil, log2
from pathlib import Path

from ..sim import H100, PipelineResult, simulate_pipeline

__all__ = [
    "LATENCY_NS", "COMPUTE_NS", "HANDOFF_NS", "READ_CEILING", "SEARCH_STEP_NS", "EX_COMPUTE_NS", "MIXED_CEILING",
    "FITTED", "TILE_BYTES", "Prediction", "simulate_block", "predict_stream", "stream_rows", "littles_law_stages",
    "blocks_per_sm", "resource_usage", "predict_resample", "predict", "fit", "explain", "plot_timelines",
]

# ------------------------------------------------------------------------------------------------- named constants
LATENCY_NS = 2 * H100.dram_latency_ns   # placeholder (fit: the 1-stage rows)
COMPUTE_NS = 55.0                       # estimate (see the docstring)
HANDOFF_NS = 300.0                      # placeholder (fit: roles at 1 stage)
READ_CEILING = 1.0                      # placeholder (fit: the 4-stage rows)
SEARCH_STEP_NS = 400.0                  # placeholder (an L2-hit latency)
EX_COMPUTE_NS = 250.0                   # estimate: ~460 issue cycles of 8 warps over 4 schedulers per tile
MIXED_CEILING = 0.95                    # placeholder (fit: the resample reference row)
FITTED = False  # True once the constants above are the fit to kernels/pipeline/recorded_h100.json (model.fit)

# Mirrors of the kernels' geometry (tests check they agree with workload.py / exercise.py).
TILE_BYTES = 4096           # stream.cu: 256 float4 per tile
EX_ROWS, EX_STAGES, EX_TARGETS, EX_THREADS = 16, 4, 256, 256


@dataclass(frozen=True)
class Prediction:
    tbps: float             # predicted figure, bytes as the benchmark counts them / time
    time_us: float
    bound: str              # "latency" (stages/blocks too few) or "bandwidth"
    bytes_in_flight_per_sm: float
    detail: dict

    def as_dict(self) -> dict:
        return asdict(self)


# ------------------------------------------------------------------------------------------------ the event model
def simulate_block(n_tiles: int, stages: int, tile_bytes: float, share_bytes_per_ns: float, latency_ns: float,
                   compute_ns: float) -> PipelineResult:
    """One block streaming `n_tiles` tiles through `stages` buffers, its memory share `share_bytes_per_ns`."""
    return simulate_pipeline(n_tiles, stages, load_latency=latency_ns, load_interval=tile_bytes / share_bytes_per_ns,
                             compute_time=compute_ns)


def littles_law_stages(ceiling_tbps: float, *, blocks_per_sm: int = 1, tile_bytes: int = TILE_BYTES,
                       latency_ns: float | None = None, compute_ns: float | None = None,
                       n_sm: int = H100.sm_count) -> float:
    """Stages at which the latency-bound rate reaches the ceiling: stages x tile x blocks x SMs / (L + C) = ceiling."""
    lat = LATENCY_NS if latency_ns is None else latency_ns
    comp = COMPUTE_NS if compute_ns is None else compute_ns
    return ceiling_tbps * 1e3 * (lat + comp) / (tile_bytes * blocks_per_sm * n_sm)


def predict_stream(stages: int, ceiling_tbps: float, *, variant: str = "pipe", blocks_per_sm: int = 1,
                   n: int = 1 << 26, n_sm: int = H100.sm_count, latency_ns: float | None = None,
                   compute_ns: float | None = None, handoff_ns: float | None = None,
                   read_ceiling: float | None = None) -> Prediction:
    """Predicted TB/s (4 n bytes / time) of stream_sum_<variant> with `stages` at `blocks_per_sm`."""
    if variant not in ("prim", "pipe", "roles"):
        raise ValueError(f"variant {variant!r}: prim, pipe or roles")
    if stages < 1 or blocks_per_sm < 1:
        raise ValueError("stages and blocks_per_sm must be >= 1")
    lat = LATENCY_NS if latency_ns is None else latency_ns
    comp = COMPUTE_NS if compute_ns is None else compute_ns
    hand = HANDOFF_NS if handoff_ns is None else handoff_ns
    rc = READ_CEILING if read_ceiling is None else read_ceiling
    if variant == "roles":
        lat = lat + hand
    grid = blocks_per_sm * n_sm
    tiles = ceil((n // 4) / (TILE_BYTES // 16))                # 256 float4 per tile
    per_block = ceil(tiles / grid) if tiles else 0           # the busiest block sets the time
    share = rc * ceiling_tbps * 1e3 / grid                   # bytes per ns for one block (TB/s x 1e3 = B/ns)
    res = simulate_block(per_block, stages, TILE_BYTES, share, lat, comp)
    time_ns = res.total_time
    tbps = 4 * n / time_ns / 1e3 if time_ns else 0.0
    latency_rate = stages * TILE_BYTES / (lat + comp)
    bound = "latency" if latency_rate < share else "bandwidth"
    return Prediction(tbps, time_ns / 1e3, bound, blocks_per_sm * stages * TILE_BYTES,
                      {"tiles_per_block": per_block, "latency_ns": lat, "compute_ns": comp,
                       "share_bytes_per_ns": share, "variant": variant, "stages": stages,
                       "blocks_per_sm": blocks_per_sm})


def stream_rows() -> list[dict]:
    """The benchmark's streaming rows (kernel name, variant, stages, blocks per SM): bench.py measures these."""
    rows = [{"variant": "pipe", "stages": s, "blocks_per_sm": 1} for s in (1, 2, 3, 4)]
    rows += [{"variant": "roles", "stages": s, "blocks_per_sm": 1} for s in (1, 2, 3, 4)]
    rows += [{"variant": "prim", "stages": 4, "blocks_per_sm": 1},
             {"variant": "pipe", "stages": 8, "blocks_per_sm": 1},   # past the knee: the bandwidth caps it
             {"variant": "pipe", "stages": 1, "blocks_per_sm": 4}]  # 4 blocks x 1 stage = 1 block x 4 stages
    for r in rows:
        r["kernel"] = f"stream_sum_{r['variant']} S={r['stages']} x{r['blocks_per_sm']}/SM"
    return rows


# -------------------------------------------------------------------------------------- resources and occupancy
def _cuobjdump() -> str | None:
    try:
        import cuda.pathfinder as pf

        found = pf.find_nvidia_binary_utility("cuobjdump")
        if found:
            return str(found)
    except Exception:  # noqa: BLE001
        pass
    for cand in (shutil.which("cuobjdump"), "/usr/local/cuda/bin/cuobjdump"):
        if cand and Path(cand).exists():
            return cand
    return None


@lru_cache(maxsize=64)
def _res_usage(path: str) -> dict[str, dict[str, int]]:
    exe = _cuobjdump()
    if exe is None:
        raise FileNotFoundError("cuobjdump not found (pip install nvidia-cuda-cuobjdump)")
    out = subprocess.run([exe, "-res-usage", path], capture_output=True, text=True, timeout=60).stdout
    funcs, current = {}, None
    for line in out.splitlines():
        m = re.match(r"\s*Function (\S+):", line)
        if m:
            current = m.group(1)
            continue
        if current and "REG:" in line:
            funcs[current] = {k: int(v) for k, v in re.findall(r"(\w+):(\d+)", line)}
            current = None
    return funcs


def resource_usage(cubin, kernel: str) -> dict[str, int]:
    """{"REG": registers per thread, "SHARED": static smem bytes, "LOCAL": local-memory bytes, "STACK": ...} of a
    compiled kernel, read with cuobjdump -res-usage (no GPU needed)."""
    funcs = _res_usage(str(cubin.path))
    if kernel not in funcs:
        raise KeyError(f"{kernel!r} not in {cubin.name}: {sorted(funcs)}")
    return funcs[kernel]


def blocks_per_sm(threads: int, dynamic_smem: int, static_smem: int = 0, registers: int = 32,
                  spec=H100) -> int:
    """Resident blocks per SM allowed by threads, registers (allocated per warp in units of 256) and shared memory
    (1 KiB per block reserved by the system on sm_80+)."""
    warps = ceil(threads / spec.warp_size)
    by_threads = spec.max_threads_per_sm // (warps * spec.warp_size)
    regs_per_warp = ceil(registers * spec.warp_size / 256) * 256
    by_regs = spec.registers_per_sm // (regs_per_warp * warps)
    smem = dynamic_smem + static_smem + 1024
    by_smem = spec.smem_per_sm_bytes // smem
    return max(0, min(by_threads, by_regs, by_smem, spec.max_blocks_per_sm))


# -------------------------------------------------------------------------------------------------- the exercise
def predict_resample(shape, ceiling_tbps: float, *, kind: str = "reference", blocks_per_sm_: int = 5,
                     n_sm: int = H100.sm_count, latency_ns: float | None = None, search_step_ns: float | None = None,
                     compute_ns: float | None = None, mixed_ceiling: float | None = None) -> Prediction:
    """Predicted TB/s (honest bytes / time) of a resample kernel at `shape` = (B, S, T, D), for shapes where every
    source row is needed and targets are about as dense as sources (T ~ S, the benchmark).

    kind: "reference" (the window in 16-row tiles, 4 stages), "not_pipelined" (same tiles, 1 synchronous stage),
    "reads_twice" (8 targets' 2 rows each per 16-row stage: more tiles, half the output per tile; the second reads
    hit L2, so DRAM bytes are the reference's)."""
    B, S, T, D = shape
    lat = LATENCY_NS if latency_ns is None else latency_ns
    step = SEARCH_STEP_NS if search_step_ns is None else search_step_ns
    comp = EX_COMPUTE_NS if compute_ns is None else compute_ns
    mc = MIXED_CEILING if mixed_ceiling is None else mixed_ceiling
    row = 2 * D
    targets_per_block = min(EX_TARGETS, T)
    intervals = targets_per_block * (S - 1) / max(T - 1, 1)         # window of one block, in intervals
    if kind in ("reference", "not_pipelined"):
        n_tiles = max(1, ceil(intervals / (EX_ROWS - 1)))
        read_per_tile = EX_ROWS * row
        stages = EX_STAGES if kind == "reference" else 1
    elif kind == "reads_twice":
        n_tiles = ceil(targets_per_block / 8)
        read_per_tile = EX_ROWS * row                                  # L2 -> SM bytes; DRAM sees half of them
        stages = EX_STAGES
    else:
        raise ValueError(f"kind {kind!r}: reference, not_pipelined or reads_twice")
    write_per_block = targets_per_block * row
    dram_per_block = min(intervals + 1, S) * row + write_per_block     # honest bytes (rows once)
    dram_per_tile = dram_per_block / n_tiles
    blocks = ceil(T / EX_TARGETS) * B
    slots = n_sm * blocks_per_sm_
    search_ns = (int(log2(S)) + 1) * step
    # One block on its own (no bandwidth limit): search, then its pipeline, latency-bound.
    alone = simulate_block(n_tiles, stages, dram_per_tile, 1e9, lat, comp)
    block_ns = search_ns + alone.total_time
    # The resident blocks together, each at that pace, vs the bandwidth: while one block searches, the others'
    # tiles in flight keep the memory busy, so a search costs time only when the blocks are latency-bound.
    latency_rate = slots * dram_per_block / block_ns                     # B/ns
    bw_rate = mc * ceiling_tbps * 1e3
    rate = min(latency_rate, bw_rate, blocks * dram_per_block / block_ns)
    honest = B * S * (row + 4) + B * T * 4 + B * T * row
    total_ns = honest / rate + search_ns + lat                           # + the first search and first tile (ramp)
    tbps = honest / total_ns / 1e3
    bound = "latency" if latency_rate < bw_rate else "bandwidth"
    return Prediction(tbps, total_ns / 1e3, bound, blocks_per_sm_ * max(stages - 1, 1) * read_per_tile,
                      {"kind": kind, "tiles_per_block": n_tiles, "search_ns": search_ns, "block_alone_ns": block_ns,
                       "waves": blocks / slots, "blocks_per_sm": blocks_per_sm_, "stages": stages,
                       "latency_rate_tbps": latency_rate / 1e3})


def predict(row: dict, ceiling_tbps: float, **constants) -> float:
    """The model's figure (TB/s) for one benchmark row of bench.py."""
    if row["kernel"].startswith("stream_sum"):
        return predict_stream(row["stages"], ceiling_tbps, variant=row["variant"],
                              blocks_per_sm=row["blocks_per_sm"], n=row.get("n", 1 << 26),
                              **{k: v for k, v in constants.items()
                                 if k in ("latency_ns", "compute_ns", "handoff_ns", "read_ceiling")}).tbps
    return predict_resample(tuple(row["shape_tuple"]), ceiling_tbps, kind=row["kind"],
                            blocks_per_sm_=row.get("blocks_per_sm", 5),
                            **{k: v for k, v in constants.items()
                               if k in ("latency_ns", "search_step_ns", "compute_ns", "mixed_ceiling")}).tbps


# -------------------------------------------------------------------------------------------------------- fitting
def fit(rows: list[dict], ceiling_tbps: float) -> dict:
    """Constants from measured rows (each with "kernel", "tbps" and the keys of stream_rows()):
    LATENCY_NS from pipe S=1 x1 (latency-bound: tile / (L + C) per block), HANDOFF_NS from roles S=1,
    READ_CEILING from the fastest streaming row that is bandwidth-bound (none: not fit), MIXED_CEILING from the
    resample reference row. Paste the result into the constants above and set FITTED = True."""
    out: dict = {}

    def find(variant, stages, bps=1):
        for r in rows:
            if (r.get("variant"), r.get("stages"), r.get("blocks_per_sm")) == (variant, stages, bps) and r.get("tbps"):
                return r
        return None

    p1 = find("pipe", 1)
    if p1:
        per_block_bps = p1["tbps"] * 1e3 / H100.sm_count          # B/ns of one block
        out["latency_ns"] = TILE_BYTES / per_block_bps - COMPUTE_NS
    r1 = find("roles", 1)
    if r1 and "latency_ns" in out:
        out["handoff_ns"] = TILE_BYTES / (r1["tbps"] * 1e3 / H100.sm_count) - COMPUTE_NS - out["latency_ns"]
    # The read ceiling only from a row that is bandwidth-bound: its latency-bound rate (with the fitted latency)
    # must be well above what it measured.
    lat = out.get("latency_ns", LATENCY_NS)
    sat = [r["tbps"] for r in rows if str(r.get("kernel", "")).startswith("stream_sum") and r.get("tbps")
           and r.get("variant") != "roles"
           and r["stages"] * r["blocks_per_sm"] * TILE_BYTES * H100.sm_count / (lat + COMPUTE_NS) / 1e3
           > 1.3 * r["tbps"]]
    if sat:
        out["read_ceiling"] = max(sat) / ceiling_tbps
    ref = next((r for r in rows if r.get("kind") == "reference" and r.get("tbps")), None)
    if ref:
        out["mixed_ceiling"] = ref["tbps"] / ceiling_tbps
    return out


def explain(ceiling_tbps: float | None = None) -> str:
    """The model in a few lines, with its constants and what it predicts for the benchmark rows."""
    ceil_ = ceiling_tbps or 3.0
    lines = [
        "Model: per block, a ring of `stages` tile buffers (kernels.sim.simulate_pipeline):",
        "  period per tile = max((LATENCY + COMPUTE) / stages, COMPUTE, tile bytes / bandwidth share of the block)",
        f"  LATENCY {LATENCY_NS:.0f} ns, COMPUTE {COMPUTE_NS:.0f} ns, roles +{HANDOFF_NS:.0f} ns of hand-offs, "
        f"read ceiling {READ_CEILING:.2f} x copy ceiling",
        f"  Little's law: 1 block/SM of 4 KiB tiles saturates {ceil_:.2f} TB/s at "
        f"{littles_law_stages(ceil_):.1f} stages",
    ]
    if ceiling_tbps is not None:
        for r in stream_rows():
            p = predict_stream(r["stages"], ceiling_tbps, variant=r["variant"], blocks_per_sm=r["blocks_per_sm"])
            lines.append(f"  {r['kernel']:<34} {p.tbps:5.2f} TB/s ({p.bound}-bound, "
                         f"{p.bytes_in_flight_per_sm // 1024:.0f} KiB in flight per SM)")
    return "\n".join(lines)


def plot_timelines(stages=(1, 2, 4), n_tiles: int = 10, latency_ns: float | None = None,
                   compute_ns: float | None = None):
    """One block's first tiles at each stage count (kernels.sim.plot_pipeline_timeline, one panel per count):
    grey = a tile in flight, blue = the block summing it. No bandwidth limit: the latency-bound regime."""
    from matplotlib.figure import Figure

    from ..sim import plot_pipeline_timeline

    lat = LATENCY_NS if latency_ns is None else latency_ns
    comp = max(COMPUTE_NS if compute_ns is None else compute_ns, lat / 10)  # visible at this scale
    fig = Figure(figsize=(5.0 * len(stages), 0.3 * n_tiles + 1.8), layout="constrained")
    axes = fig.subplots(1, len(stages), sharex=True)
    for ax, s in zip(axes if len(stages) > 1 else [axes], stages):
        res = simulate_block(n_tiles, s, TILE_BYTES, 1e9, lat, comp)
        plot_pipeline_timeline(res, ax=ax, title=f"{s} stage{'s' if s > 1 else ''}")
        ax.set_xlabel("ns")
    return fig
