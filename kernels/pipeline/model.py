"""Day 4's model: Little's law with a loaded latency for the streaming sum, and synchronized waves of blocks for the
resample exercise. Every constant is named below with the measurement it comes from.

1. The streaming sum (stream.cu; prim, pipe, roles; a persistent grid of `blocks_per_sm` x SMs blocks, 4 KiB tiles).
   A block keeps `stages` tiles in flight, so an SM has B = blocks_per_sm x stages x 4 KiB in flight, and a tile's
   round trip is the loaded DRAM latency plus the consumer's work (plus, for roles, the hand-offs between warps):

       latency-bound rate  R = SMs x B / (L(R) + COMPUTE [+ HANDOFF])         (Little's law)
       L(R) = IDLE_LATENCY_NS + LATENCY_SLOPE_NS_PER_TBPS x R                 (latency grows with the load)
       predicted TB/s     = min(R, READ_CEILING x copy ceiling)             (+ the first tile's ramp)

   The first equation is a quadratic in R (`littles_law_loaded`). Each stage adds one tile in flight: the rate climbs
   with the stages, a little less than linearly (the latency grows with the load), until the ceiling caps it.
   Blocks per SM buy bytes in flight exactly like stages (the x4/SM row).

2. The resample exercise (a grid of blocks of 256 targets; blocks_per_sm x SMs of them resident). A block first
   finds its window — dependent rounds of global loads with nothing in flight for it — then streams its window
   through its pipeline at its share of the bandwidth. All blocks do the same work and share the bandwidth evenly, so
   the blocks of a wave start, search, stream and finish together: the search is paid once per wave, by the whole
   GPU at once, and the stages (which hide the latency of the tiles *in* the pipeline) cannot hide it:

       dead time of a block = (search rounds + 1 for the first tile) x ROUND_NS
       time = sum over waves [dead time + wave bytes / min(MIXED_CEILING x copy ceiling, blocks x per-block cap)]

   search rounds: the course solution's 256-ary window search shrinks the range to ceil(n / 257) per round until
   256 probes cover it, 2 rounds at S = 4096 (`window_rounds`); a binary search per target takes
   floor(log2 S) + 1 = 13, + 1 for the interval's two times (`binary_rounds`, kind "search_per_target", the
   exercise's first solution: the measured rung search_per_target).
   The per-block cap (its tiles in flight per round trip) only matters when few blocks run: one block per SM, or a
   small last wave (2048 blocks over 5 x 132 slots leave 68; a one-tile-in-flight kernel is then latency-bound).

Named constants, fit to build/h100-run12, 2026-11-22 (NVIDIA H100 80GB HBM3, copy ceiling 3.0008 TB/s; the first
run with every pipeline row). Max |model/measured - 1| there: streaming 8.7 %, resample 8.4 % (tests/test_pipeline.py):
- IDLE_LATENCY_NS = 340: fit (minimax) to pipe S=1..4, prim S=4 and pipe S=1 x4/SM. Lower than day 1's 560 (a scalar
  copy at 256-2048 threads/SM): one block/SM of 4 KiB tiles, each thread waiting for its own 16 B per stage.
- LATENCY_SLOPE_NS_PER_TBPS = 140: day 1's; pipe S=1 -> S=2 of the same run gives the same slope (493 -> 594 ns at
  1.10 -> 1.82 TB/s).
- COMPUTE_NS = 55: estimate, not fit — a thread-scope ring's iteration after its data lands (~100 dependent cycles).
- HANDOFF_NS = 305: fit to roles S=1 — what a roles tile pays on top of the latency (the tile completes with its
  slowest copy; consumers wake on the produced barrier; the producer on the consumed one).
- BLOCK_TILE_NS = 390: fit to the roles plateau (S=3 1.332, S=4 1.339 TB/s): a block-scope cuda::pipeline hands over
  at most one tile per 390 ns (mbarrier arrive, phase flip, every waiter's try_wait wake-up, the next acquire), so
  roles is capped at SMs x blocks x 4 KiB / 390 ns whatever its stages. The same constant prices the resample's
  block-scope resample kernels per tile (below): block_scope vs correct_primitives alone would give ~410 ns.
- READ_CEILING = 0.86: pipe S=8 (0.862 of the copy ceiling), the bandwidth-bound streaming sum.
- MIXED_CEILING = 0.97: day 3's stencil_ldgsts (a bandwidth-bound cp.async read + write stream), kept.
- ROUND_NS = 490: fit (minimax, the two constants above given) to the five resample rows: one exposed round of
  dependent global loads — a search round, the first tile, and each tile of the synchronous not_pipelined kernel.
  Below day 1's loaded latency: part of a round is hidden by blocks that drift apart.
- EX_COMPUTE_NS = 300: estimate — a resample tile's consumer work. Only the per-block cap uses it.

The resample's per-tile hand-over: the "block" kinds (block_scope: the measured rung of that name, and
reads_twice, search_per_target: block-scope cuda::pipeline, mbarriers in shared memory) pay BLOCK_TILE_NS per tile
per wave; "thread" (thread_scope: the course solution, a thread-scope cuda::pipeline, and its twin
correct_primitives on the __pipeline_* primitives, the same instructions: each thread's own cp.async groups +
one __syncthreads per tile) nothing; "sync" (not_pipelined) ROUND_NS per tile. reads_twice hands over 32 tiles of
8 targets instead of 18 window tiles.
Records written before the course solution became the thread-scope kernel (2026-11-22) carry kind "reference" on both
course solutions, and their answer "correct" is the block-scope kernel: `row_kind` reads them so.

Assumptions (say so when a measurement disagrees):
- Resample blocks of a wave finish together (equal work, even sharing): the search is paid once per wave. Real
  blocks drift apart a little, which hides part of the later waves' searches; ROUND_NS, fit on a kernel with a long
  search, absorbs that — for a short search the model may be a little optimistic.
- The window tiles' one-row overlap (1/15 extra reads) and reads_twice's duplicate reads are not charged as DRAM
  bytes. On the H100 reads_twice ran at 2.18 TB/s of honest bytes, faster than the ~1.95 TB/s it could reach if every
  duplicate came from DRAM, so L2 caught at least part of them; its measured slowdown is what its 32 hand-overs per
  block predict (+8 %); the remaining gap may be duplicates that missed L2.
- A search round costs the same in every wave (the first wave's probes miss L2, later ones mostly hit, under load).
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import asdict, dataclass
from functools import lru_cache
from math import ceil, log2, sqrt

from ..sim import H100, PipelineResult, plot_pipeline_timeline, simulate_pipeline
from ..paths import cuda_tool

__all__ = [
    "IDLE_LATENCY_NS", "LATENCY_SLOPE_NS_PER_TBPS", "COMPUTE_NS", "HANDOFF_NS", "READ_CEILING", "MIXED_CEILING",
    "ROUND_NS", "BLOCK_TILE_NS", "EX_COMPUTE_NS", "ANSWER_KIND", "FITTED", "CALIBRATION", "TILE_BYTES",
    "RESAMPLE_KINDS", "Prediction", "row_kind",
    "loaded_latency", "littles_law_loaded", "simulate_block", "predict_stream", "stream_rows", "littles_law_stages",
    "blocks_per_sm", "resource_usage", "window_rounds", "binary_rounds", "predict_resample", "predict", "fit",
    "explain", "plot_timelines",
]

# ------------------------------------------------------------------------------------------------- named constants
# fit to build/h100-run12, 2026-11-22 (the first H100 run with every pipeline row; see the module docstring)
IDLE_LATENCY_NS = 340.0           # fit to build/h100-run12, 2026-11-22: pipe S=1..4, prim S=4, x4/SM (minimax)
LATENCY_SLOPE_NS_PER_TBPS = 140.0  # day 1's slope; pipe S=1 -> S=2 on build/h100-run12 gives the same (140)
COMPUTE_NS = 55.0                 # estimate: a thread-scope ring's iteration after its data lands
HANDOFF_NS = 305.0                # fit to build/h100-run12, 2026-11-22: roles S=1 (slowest copy + two wake-ups)
READ_CEILING = 0.86               # fit to build/h100-run12, 2026-11-22: pipe S=8 (0.862 of the copy ceiling)
MIXED_CEILING = 0.97              # day 3 stencil_ldgsts: a bandwidth-bound cp.async read + write stream (kept)
ROUND_NS = 490.0                  # fit to build/h100-run12, 2026-11-22: the five resample rows (minimax)
BLOCK_TILE_NS = 390.0             # fit to build/h100-run12, 2026-11-22: roles S=3/S=4 plateau (1.33 TB/s)
EX_COMPUTE_NS = 300.0             # estimate: a resample tile's consumer work
FITTED = True  # the constants above are the fit; tests/test_pipeline.py holds every recorded row within +-20 %

# The measurement ROUND_NS is fit to (and tests/test_pipeline.py re-checks when build/h100-run9 is there).
CALIBRATION = {"kind": "search_per_target", "tbps": 2.419271380728641, "copy_tbps": 3.0027008974578377,
               "blocks_per_sm": 5, "shape": (128, 4096, 4096, 256),
               "source": "build/h100-run9/specs/pipeline.toml (grader calibration, 2026-11-22)"}

# Mirrors of the kernels' geometry (tests check they agree with workload.py / exercise.py / the .cu files).
TILE_BYTES = 4096           # stream.cu: 256 float4 per tile
EX_ROWS, EX_STAGES, EX_TARGETS, EX_THREADS = 16, 4, 256, 256
EX_PROBES = 256             # the window search: one probe per thread and key per round

# kind -> (search, stages, targets per tile or None for the window tiles, how a tile is handed over:
#          "thread" = each thread's own cp.async groups (a thread-scope cuda::pipeline or the __pipeline_*
#          primitives) + one __syncthreads per tile, "block" = a block-scope cuda::pipeline (mbarriers in shared
#          memory, BLOCK_TILE_NS per tile), "sync" = loaded synchronously: one exposed round trip per tile)
RESAMPLE_KINDS = {
    "thread_scope": ("window", EX_STAGES, None, "thread"),       # the course solution and correct_primitives
    "block_scope": ("window", EX_STAGES, None, "block"),         # a measured rung of the lesson
    "not_pipelined": ("window", 1, None, "sync"),                # the same tiles, loaded synchronously
    "reads_twice": ("window+staged", EX_STAGES, 8, "block"),     # 8 targets' 2 rows per stage, intervals found first
    "search_per_target": ("binary", EX_STAGES, None, "block"),   # the exercise's first solution
}
# the model's kind of each timed answer (bench.MODEL_KIND is this table)
ANSWER_KIND = {"correct": "thread_scope", "correct_primitives": "thread_scope", "block_scope": "block_scope",
               "not_pipelined": "not_pipelined", "reads_twice": "reads_twice", "search_per_target": "search_per_target"}
LEGACY_KIND = "reference"  # the kind both course solutions were recorded with on 2026-11-22 (see the docstring)


def row_kind(row: dict) -> str:
    """The model's kind of a recorded resample row. In a record of before the rename (kind "reference"), answer
    "correct" is the block-scope kernel that the course solution was then; otherwise the answer decides, then the row's kind."""
    answer, kind = row.get("answer"), row.get("kind")
    if kind == LEGACY_KIND and answer == "correct":
        return "block_scope"
    return ANSWER_KIND.get(answer, kind)


@dataclass(frozen=True)
class Prediction:
    tbps: float             # predicted figure, bytes as the benchmark counts them / time
    time_us: float
    bound: str              # "latency" (too little in flight) or "bandwidth"
    bytes_in_flight_per_sm: float
    detail: dict

    def as_dict(self) -> dict:
        return asdict(self)


# ------------------------------------------------------------------------------------------------ Little's law
def loaded_latency(tbps: float, idle_ns: float | None = None, slope: float | None = None) -> float:
    """Day 1's loaded latency (ns) while the GPU draws `tbps` TB/s from DRAM."""
    l0 = IDLE_LATENCY_NS if idle_ns is None else idle_ns
    k = LATENCY_SLOPE_NS_PER_TBPS if slope is None else slope
    return l0 + k * tbps


def littles_law_loaded(bytes_in_flight_per_sm: float, extra_ns: float = 0.0, *, n_sm: int = H100.sm_count,
                       idle_ns: float | None = None, slope: float | None = None) -> float:
    """The rate R (TB/s) with R = SMs x bytes in flight / (L(R) + extra_ns), L(R) = idle + slope x R."""
    l0 = (IDLE_LATENCY_NS if idle_ns is None else idle_ns) + extra_ns
    k = LATENCY_SLOPE_NS_PER_TBPS if slope is None else slope
    x = n_sm * bytes_in_flight_per_sm / 1e3  # TB/s x ns
    if k == 0:
        return x / l0
    return (-l0 + sqrt(l0 * l0 + 4.0 * k * x)) / (2.0 * k)


def simulate_block(n_tiles: int, stages: int, tile_bytes: float, share_bytes_per_ns: float, latency_ns: float,
                   compute_ns: float) -> PipelineResult:
    """One block streaming `n_tiles` tiles through `stages` buffers at a fixed latency (the notebook's timelines)."""
    return simulate_pipeline(n_tiles, stages, load_latency=latency_ns, load_interval=tile_bytes / share_bytes_per_ns,
                             compute_time=compute_ns)


def littles_law_stages(ceiling_tbps: float, *, blocks_per_sm: int = 1, tile_bytes: int = TILE_BYTES,
                       latency_ns: float | None = None, compute_ns: float | None = None,
                       n_sm: int = H100.sm_count) -> float:
    """Stages at which the latency-bound rate reaches `ceiling_tbps`: stages x tile x blocks x SMs / (L + C) = ceiling,
    with L the loaded latency at that rate unless `latency_ns` is given."""
    lat = loaded_latency(ceiling_tbps) if latency_ns is None else latency_ns
    comp = COMPUTE_NS if compute_ns is None else compute_ns
    return ceiling_tbps * 1e3 * (lat + comp) / (tile_bytes * blocks_per_sm * n_sm)


def predict_stream(stages: int, ceiling_tbps: float, *, variant: str = "pipe", blocks_per_sm: int = 1,
                   n: int = 1 << 26, n_sm: int = H100.sm_count, idle_latency_ns: float | None = None,
                   latency_slope: float | None = None, compute_ns: float | None = None,
                   handoff_ns: float | None = None, read_ceiling: float | None = None,
                   block_tile_ns: float | None = None) -> Prediction:
    """Predicted TB/s (4 n bytes / time) of stream_sum_<variant> with `stages` at `blocks_per_sm`."""
    if variant not in ("prim", "pipe", "roles"):
        raise ValueError(f"variant {variant!r}: prim, pipe or roles")
    if stages < 1 or blocks_per_sm < 1:
        raise ValueError("stages and blocks_per_sm must be >= 1")
    comp = COMPUTE_NS if compute_ns is None else compute_ns
    hand = HANDOFF_NS if handoff_ns is None else handoff_ns
    rc = READ_CEILING if read_ceiling is None else read_ceiling
    extra = comp + (hand if variant == "roles" else 0.0)
    inflight = blocks_per_sm * stages * TILE_BYTES
    rate = littles_law_loaded(inflight, extra, n_sm=n_sm, idle_ns=idle_latency_ns, slope=latency_slope)
    cap = rc * ceiling_tbps
    bound = "latency" if rate < cap else "bandwidth"
    handoff_cap = float("inf")
    if variant == "roles":  # a block-scope pipeline hands over at most one tile per BLOCK_TILE_NS
        btn = BLOCK_TILE_NS if block_tile_ns is None else block_tile_ns
        handoff_cap = n_sm * blocks_per_sm * TILE_BYTES / btn / 1e3
        if handoff_cap < min(rate, cap):
            bound = "handoff"
    r = min(rate, cap, handoff_cap)
    nbytes = 4 * n
    # the first tile's round trip is a ramp nobody overlaps
    time_ns = (nbytes / (r * 1e3) + loaded_latency(r, idle_latency_ns, latency_slope) + extra) if n else 0.0
    tbps = nbytes / time_ns / 1e3 if time_ns else 0.0
    return Prediction(tbps, time_ns / 1e3, bound, inflight,
                      {"latency_ns": loaded_latency(r, idle_latency_ns, latency_slope), "extra_ns": extra,
                       "latency_bound_tbps": rate, "cap_tbps": cap, "handoff_cap_tbps": handoff_cap,
                       "variant": variant, "stages": stages,
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
    return cuda_tool("cuobjdump")


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
def window_rounds(S: int, probes: int = EX_PROBES) -> int:
    """Dependent rounds of loads of the course solution's window search over S source times (a range
    longer than `probes` shrinks to at most ceil(n / (probes + 1)); a shorter one is probed whole)."""
    n, rounds = S, 1
    while n > probes:
        n = -(-n // (probes + 1))
        rounds += 1
    return rounds


def binary_rounds(S: int) -> int:
    """Dependent rounds of a per-target upper-bound binary search over S times, + 1 for the interval's two times."""
    return int(log2(S)) + 1 + 1


def _search_rounds(kind: str, S: int) -> int:
    search = RESAMPLE_KINDS[kind][0]
    if search == "binary":
        return binary_rounds(S)
    if search == "window+staged":
        return window_rounds(S) + 1  # + staging the window's times (the per-thread search is in shared memory)
    return window_rounds(S)


def predict_resample(shape, ceiling_tbps: float, *, kind: str = "thread_scope", blocks_per_sm_: int = 6,
                     n_sm: int = H100.sm_count, round_ns: float | None = None, mixed_ceiling: float | None = None,
                     compute_ns: float | None = None, block_tile_ns: float | None = None) -> Prediction:
    """Predicted TB/s (honest bytes / time) of a resample kernel at `shape` = (B, S, T, D) for shapes where every
    source row is needed (T >= S, the benchmark), with `blocks_per_sm_` resident blocks (6 for the course solution,
    38 registers; 5 for search_per_target, 48).

    kind: "thread_scope" (the course solution: window search, 16-row tiles, 4 stages, each thread's own cp.async
    groups + one __syncthreads per tile), "block_scope" (the same through a block-scope cuda::pipeline: a hand-over
    per tile), "not_pipelined" (the same tiles, one synchronous tile), "reads_twice" (window search + staged times,
    8 targets' 2 rows per stage), "search_per_target" (a binary search per target, then block_scope's tiles)."""
    if kind not in RESAMPLE_KINDS:
        raise ValueError(f"kind {kind!r}: one of {sorted(RESAMPLE_KINDS)}")
    B, S, T, D = shape
    rnd = ROUND_NS if round_ns is None else round_ns
    mc = MIXED_CEILING if mixed_ceiling is None else mixed_ceiling
    comp = EX_COMPUTE_NS if compute_ns is None else compute_ns
    _, stages, per_tile_targets, handover = RESAMPLE_KINDS[kind]
    btn = BLOCK_TILE_NS if block_tile_ns is None else block_tile_ns
    row = 2 * D
    honest = B * S * (row + 4) + B * T * 4 + B * T * row        # exercise.bytes_moved
    blocks = ceil(T / EX_TARGETS) * B
    per_block = honest / blocks
    targets = min(EX_TARGETS, T)
    if per_tile_targets is None:                                # window tiles of 15 intervals
        n_tiles = max(1, ceil(targets * (S - 1) / max(T - 1, 1) / (EX_ROWS - 1)))
    else:
        n_tiles = ceil(targets / per_tile_targets)
    tile_bytes = per_block / n_tiles
    in_flight = max(stages - 1, 1) * tile_bytes                 # tiles in flight while one is consumed
    cap = in_flight / (rnd + comp)                              # B/ns one block can move on its own
    bw = mc * ceiling_tbps * 1e3                                # B/ns
    dead = (_search_rounds(kind, S) + 1) * rnd                  # search + the first tile's round trip
    # per tile, a step of every block's loop that no other block of the (lock-step) wave fills:
    per_tile = {"block": btn, "thread": 0.0, "sync": rnd}[handover]
    dead += n_tiles * per_tile
    slots = n_sm * blocks_per_sm_
    waves = [slots] * (blocks // slots) + ([blocks % slots] if blocks % slots else [])
    time_ns, capped = 0.0, False
    for nb in waves:
        rate = min(bw, nb * cap)
        capped |= nb == slots and nb * cap < bw
        time_ns += dead + nb * per_block / rate
    tbps = honest / time_ns / 1e3
    return Prediction(tbps, time_ns / 1e3, "latency" if capped else "bandwidth",
                      blocks_per_sm_ * in_flight,
                      {"kind": kind, "handover": handover, "per_tile_ns": per_tile,
                       "search_rounds": _search_rounds(kind, S), "dead_ns": dead,
                       "waves": blocks / slots, "n_waves": len(waves), "blocks_per_sm": blocks_per_sm_,
                       "tiles_per_block": n_tiles, "stages": stages, "dead_fraction": len(waves) * dead / time_ns,
                       "bandwidth_tbps": bw / 1e3})


def predict(row: dict, ceiling_tbps: float, **constants) -> float:
    """The model's figure (TB/s) for one benchmark row of bench.py."""
    if row["kernel"].startswith("stream_sum"):
        keys = ("idle_latency_ns", "latency_slope", "compute_ns", "handoff_ns", "read_ceiling", "block_tile_ns")
        return predict_stream(row["stages"], ceiling_tbps, variant=row["variant"],
                              blocks_per_sm=row["blocks_per_sm"], n=row.get("n", 1 << 26),
                              **{k: v for k, v in constants.items() if k in keys}).tbps
    keys = ("round_ns", "mixed_ceiling", "block_tile_ns")
    return predict_resample(tuple(row["shape_tuple"]), ceiling_tbps, kind=row_kind(row),
                            blocks_per_sm_=row.get("blocks_per_sm") or 6,
                            **{k: v for k, v in constants.items() if k in keys}).tbps


# -------------------------------------------------------------------------------------------------------- fitting
def _solve(f, lo: float, hi: float, target: float) -> float | None:
    """x in [lo, hi] with f(x) = target for a monotonic f (bisection), None when target is out of range."""
    flo, fhi = f(lo) - target, f(hi) - target
    if flo * fhi > 0:
        return None
    for _ in range(80):
        mid = 0.5 * (lo + hi)
        fm = f(mid) - target
        if (fm > 0) == (flo > 0):
            lo, flo = mid, fm
        else:
            hi = mid
    return 0.5 * (lo + hi)


def fit(rows: list[dict], ceiling_tbps: float) -> dict:
    """Constants refit from measured rows (each with "kernel", "tbps" and the keys of stream_rows() or the resample
    rows' "kind", "shape_tuple", "blocks_per_sm"). Recorded next to the measurements as "model_fit"; the constants
    above stay as they are (fit once) unless a person decides to move them.
    - idle_latency_ns from pipe S=1 x1 (latency-bound; slope and compute kept);
    - handoff_ns from roles S=1;
    - read_ceiling from the fastest pipe/prim row whose latency-bound rate is well above its measurement;
    - round_ns from the search_per_target row (mixed_ceiling kept), or round_ns and mixed_ceiling together when a
      thread_scope row (the course solution or its primitives twin: no per-tile hand-over) is there too (two kinds,
      two unknowns)."""
    out: dict = {}

    def find(variant, stages, bps=1):
        for r in rows:
            if (r.get("variant"), r.get("stages"), r.get("blocks_per_sm")) == (variant, stages, bps) and r.get("tbps"):
                return r
        return None

    p1 = find("pipe", 1)
    if p1:
        x = _solve(lambda l0: predict_stream(1, ceiling_tbps, idle_latency_ns=l0).tbps, 50.0, 5000.0, p1["tbps"])
        if x is not None:
            out["idle_latency_ns"] = x
    l0 = out.get("idle_latency_ns", IDLE_LATENCY_NS)
    r1 = find("roles", 1)
    if r1:
        x = _solve(lambda h: predict_stream(1, ceiling_tbps, variant="roles", idle_latency_ns=l0, handoff_ns=h).tbps,
                   0.0, 5000.0, r1["tbps"])
        if x is not None:
            out["handoff_ns"] = x
    sat = [r["tbps"] for r in rows if str(r.get("kernel", "")).startswith("stream_sum") and r.get("tbps")
           and r.get("variant") != "roles"
           and littles_law_loaded(r["stages"] * r["blocks_per_sm"] * TILE_BYTES, COMPUTE_NS, idle_ns=l0)
           > 1.3 * r["tbps"]]
    if sat:
        out["read_ceiling"] = max(sat) / ceiling_tbps

    def one(kind):
        return next((r for r in rows if r.get("shape_tuple") and row_kind(r) == kind and r.get("tbps")), None)

    old, ref = one("search_per_target"), one("thread_scope")

    def pred(r, **kw):
        return predict_resample(tuple(r["shape_tuple"]), ceiling_tbps, kind=row_kind(r),
                                blocks_per_sm_=r.get("blocks_per_sm") or 6, **kw).tbps

    if old:
        x = _solve(lambda rn: pred(old, round_ns=rn), 1.0, 20000.0, old["tbps"])
        if x is not None:
            out["round_ns"] = x
    if old and ref:
        def ref_at(mc):
            rn = _solve(lambda r_: pred(old, round_ns=r_, mixed_ceiling=mc), 0.0, 20000.0, old["tbps"])
            return pred(ref, round_ns=rn, mixed_ceiling=mc) if rn is not None else float("nan")

        mc = _solve(ref_at, old["tbps"] / ceiling_tbps, 1.2, ref["tbps"])
        if mc is not None:
            out["mixed_ceiling"] = mc
            out["round_ns"] = _solve(lambda r_: pred(old, round_ns=r_, mixed_ceiling=mc), 0.0, 20000.0, old["tbps"])
    return out


def explain(ceiling_tbps: float | None = None) -> str:
    """The model in a few lines, with its constants and what it predicts for the benchmark rows."""
    ceil_ = ceiling_tbps or 3.0
    lines = [
        "Streaming sum: Little's law with a loaded latency (day 1's fit on the same H100):",
        f"  R = SMs x bytes in flight / (L(R) + {COMPUTE_NS:.0f} ns [+ {HANDOFF_NS:.0f} ns roles]), "
        f"L(R) = {IDLE_LATENCY_NS:.0f} + {LATENCY_SLOPE_NS_PER_TBPS:.0f} x R ns; capped at "
        f"{READ_CEILING:.2f} x copy ceiling",
        f"  Little's law: 1 block/SM of 4 KiB tiles reaches {READ_CEILING * ceil_:.2f} TB/s at "
        f"{littles_law_stages(READ_CEILING * ceil_):.1f} stages",
    ]
    if ceiling_tbps is not None:
        for r in stream_rows():
            p = predict_stream(r["stages"], ceiling_tbps, variant=r["variant"], blocks_per_sm=r["blocks_per_sm"])
            lines.append(f"  {r['kernel']:<34} {p.tbps:5.2f} TB/s ({p.bound}-bound, "
                         f"{p.bytes_in_flight_per_sm // 1024:.0f} KiB in flight per SM)")
    lines += [
        "Resample: waves of blocks; each block searches its window (dead rounds of "
        f"{ROUND_NS:.0f} ns), then streams at {MIXED_CEILING:.2f} x copy ceiling shared by the wave:",
    ]
    shape = (128, 4096, 4096, 256)
    for kind, bps in (("thread_scope", 6), ("block_scope", 6), ("not_pipelined", 6), ("reads_twice", 6),
                      ("search_per_target", 5)):
        p = predict_resample(shape, ceil_, kind=kind, blocks_per_sm_=bps)
        lines.append(f"  {kind:<18} {p.detail['search_rounds']:2d} search rounds, {p.detail['n_waves']} waves of "
                     f"{bps} blocks/SM: {p.tbps:5.2f} TB/s ({p.tbps / ceil_:.2f}x copy; "
                     f"{p.detail['dead_fraction']:.0%} of the time nothing streams)")
    return "\n".join(lines)


def plot_timelines(stages=(1, 2, 4), n_tiles: int = 10, latency_ns: float | None = None,
                   compute_ns: float | None = None):
    """One block's first tiles at each stage count (kernels.sim.plot_pipeline_timeline, one panel per count):
    grey = a tile in flight, blue = the block summing it. No bandwidth limit, the latency at light load."""
    from matplotlib.figure import Figure


    lat = loaded_latency(0.5) if latency_ns is None else latency_ns
    comp = max(COMPUTE_NS if compute_ns is None else compute_ns, lat / 10)  # visible at this scale
    fig = Figure(figsize=(5.0 * len(stages), 0.3 * n_tiles + 1.8), layout="constrained")
    axes = fig.subplots(1, len(stages), sharex=True)
    for ax, s in zip(axes if len(stages) > 1 else [axes], stages):
        res = simulate_block(n_tiles, s, TILE_BYTES, 1e9, lat, comp)
        plot_pipeline_timeline(res, ax=ax, title=f"{s} stage{'s' if s > 1 else ''}")
        ax.set_xlabel("ns")
    return fig
