"""Day 5's model: the TMA issue model — one thread issues, each request moves a whole box, and the requests in
flight per SM set the bandwidth through Little's law.

A TMA copy has no per-thread loads to count. What matters is:

    b   bytes per request              the box: box_rows x box_cols x element size (2 KiB .. 32 KiB here)
    C   requests in flight per SM      stages x blocks per SM (persistent kernel); resident blocks (one box each)
    T   how long a request holds its   load latency + the time the box takes to land in shared memory and to be
        shared-memory stage            read out again by the TMA store:  T(b) = LATENCY_NS + 2 b / SM_TMA_GBPS

Little's law: an SM with C requests of b bytes outstanding, each held T, reads C b / T bytes per ns. A copy writes
what it reads, and the ceiling it is compared with counts both, so

    copy TB/s = min(ceiling, 2 x SMs x C x b / T(b), 2 x SMs x blocks x b / (ISSUE_NS + b / SM_TMA_GBPS))

The last term is the issuing thread itself: per box it waits for the barrier, issues the store, waits until the
store has read the stage (b / SM_TMA_GBPS) and issues the next load — ISSUE_NS of instructions and waiting that
no other stage can hide, because one thread does all of it.

Constants (explicit, few, named; NVIDIA publishes none of them — fit once to recorded_h100.json with `fit()`, the
fit recorded beside the measurements):
    LATENCY_NS     a TMA load's round trip under a streaming load (issue -> bytes landed -> barrier seen)
    SM_TMA_GBPS    bytes per ns one SM's TMA unit writes a landing box into (or reads a stored box out of) shared
                   memory
    ISSUE_NS       the issuing thread's own time per box, beyond the store's read of the stage

Assumptions (say so when a measurement disagrees):
- Latency does not grow with load: near the ceiling it does (queueing), so the knee of the real curve is rounder
  than the model's min().
- The tile kernel (one box per block) pays the load's round trip, the store's completion (a second round trip:
  the block may not exit before its store has read shared memory and `wait_group 0` also waits for the writes)
  and no launch cost: T_tile = 2 LATENCY_NS + 2 b / SM_TMA_GBPS, with C = the blocks that fit on an SM.
- Triton's copy is modelled like the tile kernel (one box per program, programs per SM limited by 2048 threads
  and shared memory); the device-descriptor variant's descriptor building is not modelled.
- tma_add (the exercise) reads two boxes per stage and writes one: its requests in flight are counted in read
  bytes (2 boxes per stage) and its figure counts 3 streams, so the Little's-law term is 3/2 x the read rate.
- plain_loads (the same sum with LDG.E.128 under the exercise's launch contract: 2 blocks x 256 threads per SM,
  two 16-byte loads per thread in flight) is day 1's model: 3/2 x threads x 32 B x SMs / LATENCY_NS.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import product

from ..sim import H100, bytes_in_flight_needed, littles_law_bandwidth

__all__ = ["LATENCY_NS", "SM_TMA_GBPS", "ISSUE_NS", "Config", "cycle_ns", "predict", "predict_config",
           "fit", "parity_schedule", "explain"]

LATENCY_NS = 900.0    # fit: placeholder of the order of a loaded DRAM round trip (kernels.sim.H100.dram_latency_ns)
SM_TMA_GBPS = 120.0   # fit: placeholder (bytes/ns per SM); ~64 B/clk at 1.83 GHz
ISSUE_NS = 150.0      # fit: placeholder; tens of dependent instructions and a barrier poll per box

SMEM_PER_SM = H100.smem_per_sm_bytes
SMEM_RESERVED = 1024
THREADS_PER_SM = H100.max_threads_per_sm
MAX_BLOCKS = H100.max_blocks_per_sm


@dataclass(frozen=True)
class Config:
    """One benchmark row: which kernel, its box bytes, stages and resident blocks per SM."""

    kernel: str                 # "pipelined" | "tile" | "triton" | "triton_device" | "tma_add" | "plain_loads"
    box_bytes: int              # bytes per TMA request (one box); plain_loads: bytes per load instruction (16)
    stages: int = 1             # plain_loads: independent loads per thread before the first use
    blocks_per_sm: int = 1      # persistent kernels: blocks per SM; one-box kernels: resident blocks per SM;
    #                             plain_loads: resident threads per SM
    boxes_per_stage: int = 1    # tma_add: 2 (x and y)
    streams: float = 2.0        # figure bytes per byte read: a copy 2 (read + write), tma_add 3/2


def cycle_ns(box_bytes: int, *, latency_ns: float | None = None, sm_tma_gbps: float | None = None) -> float:
    """How long one request holds its stage: latency + landing + the store's read, T(b) = L + 2 b / R."""
    lat = LATENCY_NS if latency_ns is None else latency_ns
    r = SM_TMA_GBPS if sm_tma_gbps is None else sm_tma_gbps
    return lat + 2.0 * box_bytes / r


def resident_tile_blocks(box_bytes: int, threads: int = 32, static_smem: int = 8) -> int:
    """Blocks of a one-box-per-block kernel that fit on an SM (shared memory, threads, the 32-block limit)."""
    per_block = box_bytes + 128 + static_smem + SMEM_RESERVED
    return max(1, min(MAX_BLOCKS, SMEM_PER_SM // per_block, THREADS_PER_SM // threads))


def predict_config(cfg: Config, ceiling_tbps: float, *, latency_ns: float | None = None,
                   sm_tma_gbps: float | None = None, issue_ns: float | None = None,
                   n_sm: int = H100.sm_count) -> float:
    """Predicted TB/s (the row's own byte count: read + written) of one configuration."""
    lat = LATENCY_NS if latency_ns is None else latency_ns
    r = SM_TMA_GBPS if sm_tma_gbps is None else sm_tma_gbps
    iss = ISSUE_NS if issue_ns is None else issue_ns
    b = cfg.box_bytes * cfg.boxes_per_stage  # read bytes per stage
    streams = cfg.streams
    if cfg.kernel == "plain_loads":  # threads x loads x bytes in flight, a plain load's latency, no TMA landing
        little = littles_law_bandwidth(cfg.blocks_per_sm * cfg.stages * cfg.box_bytes, lat, n_sm)
        return min(ceiling_tbps, streams * little)
    if cfg.kernel in ("tile", "triton", "triton_device"):
        t = 2 * lat + 2.0 * b / r
        little = littles_law_bandwidth(cfg.blocks_per_sm * b, t, n_sm)
        return min(ceiling_tbps, streams * little)
    t = lat + 2.0 * b / r
    little = littles_law_bandwidth(cfg.stages * cfg.blocks_per_sm * b, t, n_sm)
    issue = littles_law_bandwidth(cfg.blocks_per_sm * b, iss + b / r, n_sm)  # one box per ISSUE+read per block
    return min(ceiling_tbps, streams * little, streams * issue)


def predict(rows, ceiling_tbps: float, **constants) -> list[float]:
    """predict_config for benchmark rows (dicts with a "config" entry: kernel, box_bytes, stages, ...)."""
    return [predict_config(Config(**r["config"]), ceiling_tbps, **constants) for r in rows]


def fit(rows, ceiling_tbps: float, *, latencies=None, rates=None, issues=None) -> dict:
    """Fit (LATENCY_NS, SM_TMA_GBPS, ISSUE_NS) to measured rows by grid search, minimising the worst
    |predicted / measured - 1| over rows that have a config and a measurement. Returns the constants and the band."""
    latencies = latencies or [300 + 25 * i for i in range(69)]        # 300 .. 2000 ns
    rates = rates or [20 * 1.15 ** i for i in range(25)]               # 20 .. ~570 B/ns
    issues = issues or [0, 25, 50, 75, 100, 150, 200, 300, 400, 600, 800]
    pts = [(Config(**r["config"]), r["tbps"]) for r in rows if r.get("config") and r.get("tbps")]
    if not pts:
        raise ValueError("no measured rows with a config to fit")
    best = None
    for lat, rate, iss in product(latencies, rates, issues):
        band = max(abs(predict_config(c, ceiling_tbps, latency_ns=lat, sm_tma_gbps=rate, issue_ns=iss) / m - 1)
                   for c, m in pts)
        if best is None or band < best[0]:
            best = (band, lat, rate, iss)
    band, lat, rate, iss = best
    return {"LATENCY_NS": float(lat), "SM_TMA_GBPS": float(rate), "ISSUE_NS": float(iss), "band": float(band),
            "rows": len(pts)}


def parity_schedule(stages: int, boxes: int) -> list[dict]:
    """For boxes k = 0 .. boxes-1 of one block: the stage it uses, which use of that stage it is, and the barrier
    parity its wait must name (the n-th completed phase of a barrier has parity n & 1)."""
    return [{"box": k, "stage": k % stages, "use": k // stages, "parity": (k // stages) & 1} for k in range(boxes)]


def explain(ceiling_tbps: float | None = None, *, boxes=(2048, 8192, 32768), stages=(1, 2, 3, 4)) -> str:
    """The model in words and numbers (for the notebook)."""
    ceil = ceiling_tbps or H100.hbm_tbps
    read_need = bytes_in_flight_needed(ceil / 2, LATENCY_NS)
    lines = [
        "TMA issue model: copy TB/s = min(ceiling, 2 x SMs x requests in flight x box bytes / T(box), "
        "issue limit)",
        f"  T(b) = {LATENCY_NS:.0f} ns + 2 b / {SM_TMA_GBPS:.0f} B/ns; issue limit per block = b / "
        f"({ISSUE_NS:.0f} ns + b / {SM_TMA_GBPS:.0f} B/ns)",
        f"  to read at half the {ceil:.2f} TB/s ceiling (the other half is the write) each SM must keep "
        f"{read_need / 1024:.1f} KiB in flight (Little's law at {LATENCY_NS:.0f} ns)",
        "  one block per SM, predicted TB/s:   " + "  ".join(f"{s} stage{'s' if s > 1 else ' '}" for s in stages),
    ]
    for b in boxes:
        vals = [predict_config(Config("pipelined", b, s, 1), ceil) for s in stages]
        lines.append(f"    box {b // 1024:>2} KiB per request          " + "  ".join(f"{v:8.2f}" for v in vals))
    return "\n".join(lines)
