"""Day 5's model: TMA requests in flight, Little's law — and a round trip that grows with the bytes in flight.

One thread issues; each request moves a whole box. There are no per-thread loads to count, only:

    N   requests in flight on the GPU   SMs x blocks per SM x stages (the persistent copy, tma_add);
                                        SMs x resident blocks (one box per block: tma_copy_tile, Triton's copy)
    c   bytes one request moves         read + written: a copy's box 2 b; a tma_add stage (x box + y box in,
                                        z box out) 3 b
    T0  its round trip, nothing queued  LATENCY_NS for a load. A one-box block pays two: its load, then its
                                        store's completion (`cp.async.bulk.wait_group 0` before the block exits
                                        and the next block can take its shared memory)

Latency grows with load. The memory system drains bytes at about the copy ceiling C of the same run, and a box is
complete only when its last byte has landed, behind the bytes in flight ahead of it: a request's round trip is
T = T0 + N c / C. Little's law with that round trip:

    X = N c / T = N c / (T0 + N c / C)        i.e.   1 / X = T0 / (N c) + 1 / C

Few requests in flight: X ~ N c / T0 (latency-bound). Many: X creeps up to C and never reaches it — reaching a
fraction f of C takes N c = f / (1 - f) x T0 x C bytes in flight, 9 x T0 x C for 90%.

One constant, fitted (model.fit, names=FIT_ROWS) to the H100 record kernels/tma/recorded_h100.json (2026-11-25, copy
    ceiling 3.00 TB/s): LATENCY_NS = 530 ns over its 15 rows of one block per SM (the box x stages sweep and the
    three one-box copies), worst 7.3 %; the rows of other occupancy and other kernels (2 blocks per SM, Triton's
    host-descriptor copy, tma_add) are held out (HELD_OUT). An earlier run's (build/h100-run9) rows were
    predicted with the previous model (latency + landing rate + issue time under a hard min(); fit band 0.30),
    which had no queueing: it predicted the ceiling wherever Little's law crossed it, and the measurements bent
    away from the ceiling long before.
    530 ns is close to the 560 ns zero-load latency day 1 measured for plain loads (kernels.sim.H100).

Plain 16-byte loads (the plain_loads known answer: 2 blocks x 128 threads per SM, x and y loads of 16 bytes each
in flight per thread, z written) are not boxes. They follow day 1's loaded-latency law, measured on the same
H100 (kernels/naive_loads/model.py): L = IDLE_LATENCY_NS + LATENCY_SLOPE_NS_PER_TBPS x TB/s drawn, solved
self-consistently with Little's law. On the same run the TMA queue law would put them 27% low and day 1's law
puts them within 5%: with the same bytes in flight (12 KiB of traffic per SM: plain_loads and tma_copy_pipe
32x32 s3 b1) the 16-byte loads drew more bandwidth than the 2 KiB boxes. Our reading: a small load completes as
soon as its own sector arrives; a box waits for its last byte.

What the model leaves out (the rows' residuals show it):
- The turnaround of a stage: between its box landing and its next load the stage is not loading (the store must
  first read it out). The model counts only N c, so it puts 4 stages of 2 KiB and 1 stage of 8 KiB (or 4 x 8 KiB
  and 1 x 32 KiB) at the same bandwidth; measured, the deeper ring of smaller boxes did better (1.82 vs 1.61 and
  2.72 vs 2.62 TB/s).
- Launch and tail: a benchmark kernel runs ~0.1 ms; the ceiling was measured on 1 GiB.
- Triton's device-descriptor copy (tl.make_tensor_descriptor): each program builds its 128-byte tensor map
  (tensormap.replace in shared memory, a copy to global memory, a descriptor-cache invalidate) before its
  first load. That work is not modelled: its rows carry no prediction. Triton's host-descriptor copy is a
  one-box kernel with 16 programs of 128 threads per SM and is modelled as one.
- The issuing thread's own time per box: the rings measured (<= 4 stages, boxes >= 2 KiB) fit without it; a deep
  ring of tiny boxes would eventually be limited by it (unmeasured).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..held_out import HeldOut
from ..naive_loads.model import IDLE_LATENCY_NS, LATENCY_SLOPE_NS_PER_TBPS  # day 1's loaded latency, fit there
from ..sim import H100

__all__ = ["LATENCY_NS", "IDLE_LATENCY_NS", "LATENCY_SLOPE_NS_PER_TBPS", "FIT", "FIT_ROWS", "HELD_OUT",
           "HELD_OUT_BAND", "RECORD_CHECK", "held_out_report", "Config", "MODELLED",
           "requests_in_flight", "bytes_per_request", "round_trip_ns", "predict", "predict_config",
           "bytes_in_flight_for", "fit", "parity_schedule", "explain", "resident_tile_blocks"]

# A TMA load's round trip with nothing queued ahead of it (issue -> box landed -> barrier seen), ns.
# Fit by model.fit(rows, copy ceiling, names=FIT_ROWS) to kernels/tma/recorded_h100.json: worst error on the 15 fit
# rows 7.3 % (tests/test_tma.py refits it). (An earlier fit, 540 ns, was of all 18 TMA rows of another run,
# build/h100-run9, 2026-11-22, which the repository does not hold.)
LATENCY_NS = 530.0
FIT = {"source": "kernels/tma/recorded_h100.json: NVIDIA H100 80GB HBM3, driver 580.159.04, 2026-11-25, "
                 "make gpu-test",
       "date": "2026-11-25", "device": "NVIDIA H100 80GB HBM3", "driver": "580.159.04", "copy_tbps": 3.0039,
       "rows": 15, "band": 0.073, "LATENCY_NS": LATENCY_NS}
# The rows the round trip is fitted on: the one-box copies and the rings of one block per SM (boxes of 2, 8 and
# 32 KiB, 1-4 stages). Held out: other occupancy and other kernels — the ring at two blocks per SM, Triton's
# host-descriptor copy (16 programs per SM), the exercise's tma_add (two boxes per stage, 1.5 bytes per byte read)
# and its plain-load answer (day 1's loaded-latency law, no constant of this day).
FIT_ROWS = ("tma_copy_tile 32x32", "tma_copy_tile 64x64", "tma_copy_tile 128x128") + tuple(
    f"tma_copy_pipe {b}x{b} s{s} b1" for b in (32, 64, 128) for s in (1, 2, 3, 4))
HELD_OUT = ("tma_copy_pipe 64x64 s3 b2", "triton_tma host 64x64", "tma_add correct", "tma_add plain_loads")
HELD_OUT_BAND = 0.10
FIT.update(constants={
    "LATENCY_NS": {"kind": "fitted", "rows": FIT_ROWS},
    "IDLE_LATENCY_NS": {"kind": "fitted", "from": "kernels.naive_loads.model (week 1 day 1, an H100's plain loads)"},
    "LATENCY_SLOPE_NS_PER_TBPS": {"kind": "fitted", "from": "kernels.naive_loads.model (week 1 day 1)"},
    "SMS": {"kind": "physics", "source": "132 SMs (H100 datasheet)"},
    "SMEM_PER_SM": {"kind": "physics", "source": "228 KiB per SM, 1 KiB reserved per block, 32 blocks and 2048 threads "
                                                 "per SM (CUDA guide, cc 9.0): the resident one-box blocks"},
    "copy_tbps": {"kind": "physics", "source": "the copy ceiling measured in the same run as the record"}},
    held_out_regime="other occupancy and kernels: 2 blocks per SM, Triton's copy (16 programs per SM), tma_add "
                    "(2 boxes a stage) and its plain loads",
    misses={"h100": {}})

SMEM_PER_SM = H100.smem_per_sm_bytes
SMEM_RESERVED = H100.smem_reserved_per_block_bytes
THREADS_PER_SM = H100.max_threads_per_sm
MAX_BLOCKS = H100.max_blocks_per_sm

ONE_BOX = ("tile", "triton")                  # one box per block: load, store, wait for the store, exit
RING = ("pipelined", "tma_add")               # persistent blocks, a ring of `stages` requests each
MODELLED = ONE_BOX + RING + ("plain_loads",)  # "triton_device" is not modelled (see the docstring)


@dataclass(frozen=True)
class Config:
    """One benchmark row: which kernel, its box bytes, stages and resident blocks per SM."""

    kernel: str                 # "pipelined" | "tile" | "triton" | "triton_device" | "tma_add" | "plain_loads"
    box_bytes: int              # bytes per TMA request (one box); plain_loads: bytes per load instruction (16)
    stages: int = 1             # plain_loads: independent loads per thread before the first use
    blocks_per_sm: int = 1      # persistent kernels: blocks per SM; one-box kernels: resident blocks per SM;
    #                             plain_loads: resident threads per SM
    boxes_per_stage: int = 1    # tma_add: 2 (x and y)
    streams: float = 2.0        # bytes moved per byte read: a copy 2 (read + write), tma_add 3/2


def requests_in_flight(cfg: Config, n_sm: int = H100.sm_count) -> int:
    """N: requests in flight on the GPU (plain_loads: threads, each with its loads in flight)."""
    if cfg.kernel in RING:
        return n_sm * cfg.blocks_per_sm * cfg.stages
    return n_sm * cfg.blocks_per_sm


def bytes_per_request(cfg: Config) -> float:
    """c: bytes one request moves, read + written (what the benchmark's TB/s counts)."""
    read = cfg.box_bytes * cfg.boxes_per_stage
    if cfg.kernel == "plain_loads":
        read = cfg.box_bytes * cfg.stages  # a thread's loads in flight together
    return cfg.streams * read


def round_trip_ns(cfg: Config, latency_ns: float | None = None) -> float:
    """T0: a request's round trip with nothing queued ahead of it (ns)."""
    lat = LATENCY_NS if latency_ns is None else latency_ns
    return 2 * lat if cfg.kernel in ONE_BOX else lat


def _plain_loads_tbps(inflight_bytes: float) -> float:
    """Day 1's loaded latency: X = inflight / (IDLE + SLOPE x X), solved for X (TB/s; inflight in bytes)."""
    l0, k = IDLE_LATENCY_NS, LATENCY_SLOPE_NS_PER_TBPS
    conc = inflight_bytes / 1e3  # TB/s x ns
    return (-l0 + (l0 * l0 + 4 * k * conc) ** 0.5) / (2 * k)


def predict_config(cfg: Config, ceiling_tbps: float, *, latency_ns: float | None = None,
                   n_sm: int = H100.sm_count) -> float | None:
    """Predicted TB/s (the row's own byte count: read + written) of one configuration; None where the model does
    not cover the kernel (Triton's device-descriptor copy)."""
    if cfg.kernel not in MODELLED:
        return None
    inflight = requests_in_flight(cfg, n_sm) * bytes_per_request(cfg)  # N c, bytes
    if cfg.kernel == "plain_loads":
        return min(ceiling_tbps, _plain_loads_tbps(inflight))
    t = round_trip_ns(cfg, latency_ns) + inflight / (ceiling_tbps * 1e3)  # T0 + N c / C
    return inflight / t / 1e3


def predict(rows, ceiling_tbps: float, **constants) -> list[float | None]:
    """predict_config for benchmark rows (dicts with a "config" entry: kernel, box_bytes, stages, ...)."""
    return [predict_config(Config(**r["config"]), ceiling_tbps, **constants) for r in rows]


def bytes_in_flight_for(fraction: float, ceiling_tbps: float, *, latency_ns: float | None = None,
                        one_box: bool = False, n_sm: int = H100.sm_count) -> float:
    """Bytes (read + written) each SM must keep in flight for a TMA kernel to reach `fraction` of the ceiling:
    N c = f / (1 - f) x T0 x C, per SM."""
    if not 0 < fraction < 1:
        raise ValueError("fraction must be in (0, 1): the ceiling itself takes infinitely many bytes in flight")
    lat = LATENCY_NS if latency_ns is None else latency_ns
    t0 = 2 * lat if one_box else lat
    return fraction / (1 - fraction) * t0 * ceiling_tbps * 1e3 / n_sm


def fit(rows, ceiling_tbps: float, *, latencies=None, names=None) -> dict:
    """Fit LATENCY_NS to measured rows by grid search, minimising the worst |predicted / measured - 1| over the
    TMA rows the model covers (plain_loads follows day 1's law and is left out), only those named in `names` where
    given (FIT_ROWS: the recorded fit). Returns the constant and band."""
    latencies = latencies or [200 + 5 * i for i in range(361)]  # 200 .. 2000 ns
    pts = [(Config(**r["config"]), r["tbps"]) for r in rows
           if r.get("config") and r.get("tbps") and r["config"]["kernel"] in ONE_BOX + RING
           and (names is None or r.get("kernel") in names)]
    if not pts:
        raise ValueError("no measured TMA rows with a config to fit")
    best = None
    for lat in latencies:
        band = max(abs(predict_config(c, ceiling_tbps, latency_ns=lat) / m - 1) for c, m in pts)
        if best is None or band < best[0]:
            best = (band, lat)
    band, lat = best
    return {"LATENCY_NS": float(lat), "band": float(band), "rows": len(pts)}


def _predict_row(row: dict, record: dict, constants: dict | None = None) -> float | None:
    """TB/s of a record's row at that record's copy ceiling, with LATENCY_NS or a refit's (fit())."""
    lat = constants["LATENCY_NS"] if constants else None
    return predict_config(Config(**row["config"]), record["ceilings"]["copy_tbps"], latency_ns=lat)


# The held-out check (kernels.held_out.HeldOut): the record's held-out rows with its own run's copy ceiling
# (kernels.models reads it; not the scaffold's HELD_OUT_CHECK: the recorded run predates it and carries no
# extra["model"]).
RECORD_CHECK = HeldOut(FIT, FIT_ROWS, HELD_OUT, band=HELD_OUT_BAND, predict=_predict_row, unit="TB/s", width=26,
                         refit=lambda rec: fit(rec["rows"], rec["ceilings"]["copy_tbps"], names=FIT_ROWS),
                         constants={"LATENCY_NS": LATENCY_NS})
held_out_report = RECORD_CHECK.report


def resident_tile_blocks(box_bytes: int, threads: int = 32, static_smem: int = 8) -> int:
    """Blocks of a one-box-per-block kernel that fit on an SM (shared memory, threads, the 32-block limit)."""
    per_block = box_bytes + 128 + static_smem + SMEM_RESERVED
    return max(1, min(MAX_BLOCKS, SMEM_PER_SM // per_block, THREADS_PER_SM // threads))


def parity_schedule(stages: int, boxes: int) -> list[dict]:
    """For boxes k = 0 .. boxes-1 of one block: the stage it uses, which use of that stage it is, and the barrier
    parity its wait must name (the n-th completed phase of a barrier has parity n & 1)."""
    return [{"box": k, "stage": k % stages, "use": k // stages, "parity": (k // stages) & 1} for k in range(boxes)]


def explain(ceiling_tbps: float | None = None, *, boxes=(2048, 8192, 32768), stages=(1, 2, 3, 4)) -> str:
    """The model in words and numbers (for the notebook)."""
    ceil = ceiling_tbps or H100.hbm_tbps
    need90 = bytes_in_flight_for(0.90, ceil)
    lines = [
        "TMA model: X = N c / (T0 + N c / C)   (Little's law; the round trip grows with the bytes in flight)",
        f"  N requests in flight, c bytes each (read + written), T0 = {LATENCY_NS:.0f} ns per load "
        f"(one-box kernels: 2 x {LATENCY_NS:.0f} ns, load + store), C = the {ceil:.2f} TB/s copy ceiling",
        f"  90% of the ceiling takes 9 x T0 x C = {need90 * H100.sm_count / 2**20:.1f} MiB in flight on the GPU, "
        f"{need90 / 1024:.0f} KiB per SM (read + written)",
        "  one block per SM, predicted TB/s:   " + "  ".join(f"{s} stage{'s' if s > 1 else ' '}" for s in stages),
    ]
    for b in boxes:
        vals = [predict_config(Config("pipelined", b, s, 1), ceil) for s in stages]
        lines.append(f"    box {b // 1024:>2} KiB per request          " + "  ".join(f"{v:8.2f}" for v in vals))
    return "\n".join(lines)
