"""Week 2, day 1's model: where each TMA swizzle mode puts a byte, how many shared-memory wavefronts a warp's read
then costs (an explicit bank-conflict counter over the real addresses), and the time that follows.

1. The swizzle rule (CU_TENSOR_MAP_SWIZZLE_32B / 64B / 128B = CuTe's Swizzle<1,4,3> / <2,4,3> / <3,4,3>): the TMA
   writes a box densely (row r of a box with S-byte rows at r * S) and XORs the 16-byte chunk index — address bits
   4 .. 4+B-1 — with address bits 7 .. 7+B-1 (B = 1, 2, 3):

       swizzle_offset(off, "128B") = off ^ (((off >> 7) & 7) << 4)      chunk' = chunk ^ (row % 8), 128-byte rows

   The pattern repeats every 2^(7+B) bytes (256 / 512 / 1024) of the shared-memory ADDRESS, so the offset rule holds
   for a destination aligned to that; `swizzle_address` is the rule on absolute addresses (any 128-aligned
   destination), `swizzle_bitwise` the same rule bit by bit, as the hardware is described (the tests hold all of
   them equal, and the GPU's own layout, read back by kernels/swizzle/launch.probe, against them). The rule lives in
   the library (kernels/swizzle_map.py: every day that lays out a swizzled box uses it); this day teaches it.

2. The counter: kernels/smem_tiling/model.py's `wavefronts` (day 2), on the byte addresses the kernel's lanes use.
   A 16-byte access is served a quarter-warp (8 lanes) per phase; a conflict-free LDS.128 costs 4 wavefronts.
   colsum.cu's column read (lane l: tile rows l and l + 32, chunk C) costs, per LDS.128:

       layout            rows     wavefronts   why
       none, 128 B rows  l..l+7   32 (8-way)   8 rows x 128 B: chunk C of every row in banks 4C..4C+3
       none,  64 B rows           16 (4-way)   rows 2 apart share a bank group
       none,  32 B rows            8 (2-way)   rows 4 apart share a bank group
       32B / 64B / 128B swizzle    4           the XOR spreads the 8 rows over 8 bank groups

3. Time of the demo (colsum, `passes` reads of every tile). Two resources, the slower sets the time:

       t_smem = tiles per SM x (passes x LDS wavefronts per tile + TMA_FILL_WAVEFRONTS) / WAVEFRONTS_PER_NS
       t_mem  = bytes / X,   X = N c / (T0 + N c / (e C))              (day 5's TMA law, kernels/tma/model.py)
       t      = max(t_smem, t_mem)

   N = SMs x resident blocks x STAGES tiles in flight, c = 8 KiB, C = the copy ceiling of the same run, T0 =
   TMA_LATENCY_NS, e = ROW32_EFFICIENCY for boxes of 32-byte rows (each box row one 32-byte sector request: 256
   requests per 8 KiB tile against 64 of 128 bytes), 1 for 64- and 128-byte rows. Where two resources are close the
   real time is longer than the max (they do not overlap perfectly): the benchmark's configurations sit at the two
   ends, 1 pass (memory) and 32 passes (shared memory).
   (An earlier model bound 32-byte rows by an SM-side box-row rate, TMA_ROWS_PER_NS. The H100 and the H200 have the
   same SM, yet their 32-byte-row rows ran 2.10 and 2.66-2.73 TB/s: the limit is on the memory side, and scales with
   the copy ceiling of each GPU.)

4. Time of the exercise's course solution (swizzle_transpose): day 5's law with the ring of the solution (2 blocks x
   6 stages x 8 KiB read + 8 KiB written per SM), T0 = TMA_LATENCY_NS, drained at day 2's transpose rate,
   DRAM_FRACTION_OF_COPY x C (kernels/smem_tiling/model.py): its 32 ldmatrix / stmatrix per tile and 128 box rows
   are far from their limits. The plain-load known answer (one tile per block at a time, loading and storing in
   turn) is not modelled.

Constants (named, with their source, FIT["constants"]): three are fit to the H100 run of
kernels/swizzle/recorded_h100.json (FIT, the colsum rows named in FIT_ROWS); the exercise's transpose is held out
(HELD_OUT) and must be within 10 % on the record of every GPU, each with its own run's copy ceiling; the H200's
colsum rows are checked with the H100's constants too (kernels.models).
   WAVEFRONTS_PER_NS   shared-memory wavefronts one SM serves per ns: fit to the six 32-pass rows (every layout,
                       shared-memory bound), the harmonic mean of their rates (their errors sum to zero). About 1 per
                       clock at the 1.98 GHz boost; the conflict-free layouts run a few % below it (per-tile barriers
                       and waits the counter does not see). The same fit on the H200's record: it is the SM's.
   ROW32_EFFICIENCY    the fraction of the copy ceiling boxes of 32-byte rows draw: fit to the two 1-pass rows of
                       32-byte rows (none32, swz32), the mean of their values.
   TMA_LATENCY_NS      day 5's T0 for this kernel: fit to the four 1-pass rows of 64- and 128-byte rows, the mean of
                       their values (day 5 fit 530 ns on an H100's copies; colsum's blocks also wait on the consumers).
   Three constants on twelve rows; the exercise's transpose (another kernel and shape) is the held-out row.
   TMA_FILL_WAVEFRONTS the TMA's own writes of a tile into shared memory: 8 KiB / 128 B per wavefront = 64. Not fit.
   DRAM_FRACTION_OF_COPY  day 2's transpose DRAM rate (kernels/smem_tiling/model.py, fit on an H100). Not refit.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import ceil

from ..held_out import HeldOut
from ..sim import H100
from ..smem import wavefronts  # day 2's bank-conflict counter: the one counter of the course
from ..swizzle_map import (MODES, SPAN, check_mode, chunk_layout, repeat_bytes,  # the rule: the course's
                           swizzle_address, swizzle_bitwise, swizzle_offset, swz_chunk)
from ..smem_tiling.model import DRAM_FRACTION_OF_COPY  # day 2: a transpose drains at 0.92 x the copy ceiling
from ..tma.model import LATENCY_NS as H100_TMA_LATENCY_NS  # day 5 (an H100): 540 ns

__all__ = ["MODES", "SPAN", "swizzle_offset", "swizzle_address", "swizzle_bitwise", "swz_chunk", "chunk_layout",
           "repeat_bytes", "colsum_offsets", "lds_wavefronts", "tile_wavefronts", "Config", "predict_config",
           "predict_transpose", "fit", "explain", "plot_layouts", "plot_column_read", "WAVEFRONTS_PER_NS",
           "TMA_FILL_WAVEFRONTS", "TMA_LATENCY_NS", "ROW32_EFFICIENCY", "HELD_OUT_CHECK", "HELD_OUT_BAND",
           "held_out_report", "H100_TMA_LATENCY_NS", "DRAM_FRACTION_OF_COPY", "FIT", "FIT_ROWS", "HELD_OUT", "wavefronts"]


# ------------------------------------------------------------------------------------------------ named constants
# Fit by model.fit to kernels/swizzle/recorded_h100.json (NVIDIA H100 80GB HBM3, copy ceiling 3.005 TB/s): see the
# docstring. tests/test_swizzle.py refits them from that record.
WAVEFRONTS_PER_NS = 1.834
ROW32_EFFICIENCY = 0.901
TMA_LATENCY_NS = 920.0
FIT = {"source": "kernels/swizzle/recorded_h100.json: NVIDIA H100 80GB HBM3, driver 580.159.04, 2026-11-25, "
                 "make gpu-test",
       "device": "NVIDIA H100 80GB HBM3", "driver": "580.159.04", "date": "2026-11-25", "copy_tbps": 3.0048,
       "WAVEFRONTS_PER_NS": WAVEFRONTS_PER_NS, "ROW32_EFFICIENCY": ROW32_EFFICIENCY,
       "TMA_LATENCY_NS": TMA_LATENCY_NS,
       # held-out rows outside +-10 % on each recorded GPU (with these constants and that run's copy ceiling): none
       "held_out_outside_band": {"h100": {}, "h200": {}}}
# Three constants on twelve rows (the course's rule: at most one fitted constant per two rows it is fitted on), each
# from the rows where it binds: the 32-pass rows are shared-memory bound, the 1-pass rows memory bound.
FIT_SMEM_ROWS = ("colsum none128 p32", "colsum none64 p32", "colsum none32 p32", "colsum swz32 p32",
                 "colsum swz64 p32", "colsum swz128 p32")                      # -> WAVEFRONTS_PER_NS
FIT_LATENCY_ROWS = ("colsum none128 p1", "colsum none64 p1", "colsum swz64 p1", "colsum swz128 p1")  # -> TMA_LATENCY_NS
FIT_ROW32_ROWS = ("colsum swz32 p1", "colsum none32 p1")                       # -> ROW32_EFFICIENCY
FIT_ROWS = FIT_SMEM_ROWS + FIT_LATENCY_ROWS + FIT_ROW32_ROWS
# Held out: the exercise's transpose, a kernel of another shape (8192 x 8192, 2 blocks x 6 stages, read + written)
# whose rate no colsum row sets.
HELD_OUT = ("swizzle_transpose correct",)
HELD_OUT_BAND = 0.10  # every held-out row within +-10 % on each recorded GPU, or named in FIT
# The constants by kind (kernels.models): "physics" with its source, "fitted" with the rows it was fitted on ("from":
# a fit of another day's model, imported); the held-out rows' regime; rows outside +-10 % per GPU, and why.
FIT.update(constants={
    "WAVEFRONTS_PER_NS": {"kind": "fitted", "rows": FIT_SMEM_ROWS},
    "TMA_LATENCY_NS": {"kind": "fitted", "rows": FIT_LATENCY_ROWS},
    "ROW32_EFFICIENCY": {"kind": "fitted", "rows": FIT_ROW32_ROWS},
    "DRAM_FRACTION_OF_COPY": {"kind": "fitted", "from": "kernels.smem_tiling.model (week 1 day 2, an H100's "
                                                        "transpose)"},
    "TMA_FILL_WAVEFRONTS": {"kind": "physics", "source": "8 KiB tile / 128 B per shared-memory wavefront (32 banks x "
                                                         "4 B, CUDA guide)"},
    "lds_wavefronts": {"kind": "physics", "source": "the bank-conflict counter on the kernel's addresses (CUDA guide's "
                                                    "32 banks; ncu's l1tex data-bank wavefronts agree)"},
    "SMS": {"kind": "physics", "source": "132 SMs (H100 datasheet; the H200 is the same GH100 die)"},
    "copy_tbps": {"kind": "physics", "source": "the copy ceiling measured in the same run as each record"}},
    held_out_regime="the exercise's transpose: another kernel (8192 x 8192, 2 blocks x 6 stages, read and written) "
                    "no colsum row times",
    misses={"h100": {}, "h200": {}})
TMA_FILL_WAVEFRONTS = 8192 // 128  # a tile's 8 KiB written into shared memory by the TMA, 128 bytes per wavefront
TILE_ROWS, TILE_BYTES, STAGES, WARPS = 64, 8192, 4, 8  # colsum.cu
BLOCKS_PER_SM = 2  # colsum's benchmark grid: 264 strips on 132 SMs (kernels/swizzle/workload.BENCH_SHAPE)


# ------------------------------------------------------------------------------------------ the demo's accesses
def colsum_offsets(mode: str, span: int, warp: int, second: bool = False) -> list[int]:
    """Byte offsets in the tile (from its 1024-aligned start) of the 32 lanes' LDS.128 of warp `warp` in colsum.cu:
    lane l reads tile row l (second: l + 32), logical chunk column `warp`; a tile is 128 / span boxes of 64 x span B."""
    chunks = span // 16
    box, chunk = warp // chunks, warp % chunks
    out = []
    for lane in range(32):
        r = lane + (32 if second else 0)
        off = r * span + 16 * chunk
        out.append(box * TILE_ROWS * span + (swizzle_offset(off, mode) if mode != "none" else off))
    return out


def lds_wavefronts(mode: str, span: int | None = None, warp: int = 0) -> int:
    """Wavefronts of one warp's LDS.128 in colsum.cu (the counter on the real addresses)."""
    span = span or SPAN[check_mode(mode)] or 128
    return wavefronts(colsum_offsets(mode, span, warp), 16)


def tile_wavefronts(mode: str, span: int | None = None, passes: int = 1) -> int:
    """Shared-memory wavefronts of one tile in colsum.cu: 8 warps x 2 LDS.128 per pass, + the TMA's fill."""
    span = span or SPAN[check_mode(mode)] or 128
    lds = sum(wavefronts(colsum_offsets(mode, span, w, s), 16) for w in range(WARPS) for s in (False, True))
    return passes * lds + TMA_FILL_WAVEFRONTS


# ------------------------------------------------------------------------------------------------- the time
@dataclass(frozen=True)
class Config:
    """One benchmark row: colsum with a layout and a pass count, or the exercise's course solution."""

    kernel: str                # "colsum" | "transpose"
    mode: str = "128B"         # colsum: the map's swizzle
    span: int = 128            # colsum: the box's row in bytes
    passes: int = 1
    rows: int = 4096
    cols: int = 16896
    stages: int = STAGES
    blocks_per_sm: int = BLOCKS_PER_SM


@dataclass(frozen=True)
class Prediction:
    tbps: float
    ms: float
    bound: str
    smem_ms: float
    mem_ms: float


def _tma_law(inflight: float, ceiling_tbps: float, latency_ns: float) -> float:
    """Day 5: X = N c / (T0 + N c / C), TB/s (inflight = N c in bytes)."""
    return inflight / (latency_ns + inflight / (ceiling_tbps * 1e3)) / 1e3


def _per_sm_tiles(cfg: Config, n_sm: int) -> int:
    """Tiles the busiest SM reads: ceil(strips / SMs) strips of ceil(rows / 64) tiles."""
    return ceil(ceil(cfg.cols / 64) / n_sm) * ceil(cfg.rows / TILE_ROWS)


def row_efficiency(span: int, row32_efficiency: float | None = None) -> float:
    """e: the fraction of the copy ceiling a box of `span`-byte rows draws (ROW32_EFFICIENCY for 32-byte rows)."""
    return (ROW32_EFFICIENCY if row32_efficiency is None else row32_efficiency) if span == 32 else 1.0


def predict_config(cfg: Config, ceiling_tbps: float, *, wavefronts_per_ns: float | None = None,
                   row32_efficiency: float | None = None, latency_ns: float | None = None,
                   n_sm: int = H100.sm_count) -> Prediction | None:
    """Predicted time and TB/s (the row's bytes: read + written) of one configuration; keywords replace the
    named constants."""
    lat = TMA_LATENCY_NS if latency_ns is None else latency_ns
    if cfg.kernel == "transpose":
        return predict_transpose(ceiling_tbps, stages=cfg.stages, blocks_per_sm=cfg.blocks_per_sm,
                                 shape=(cfg.rows, cfg.cols), latency_ns=lat, n_sm=n_sm)
    if cfg.kernel != "colsum":
        return None
    rate = WAVEFRONTS_PER_NS if wavefronts_per_ns is None else wavefronts_per_ns
    eff = row_efficiency(cfg.span, row32_efficiency)
    per_sm = _per_sm_tiles(cfg, n_sm)
    smem_ns = per_sm * tile_wavefronts(cfg.mode, cfg.span, cfg.passes) / rate
    resident = min(cfg.blocks_per_sm, ceil(ceil(cfg.cols / 64) / n_sm))
    x = _tma_law(n_sm * resident * cfg.stages * TILE_BYTES, eff * ceiling_tbps, lat)
    read = 2 * cfg.rows * cfg.cols
    mem_ns = read / (x * 1e3)
    t = max(smem_ns, mem_ns)
    bound = "shared memory" if t == smem_ns else ("memory (32-byte rows)" if eff < 1 else "memory")
    nbytes = read + 4 * cfg.cols
    return Prediction(nbytes / t / 1e3, t / 1e6, bound, smem_ns / 1e6, mem_ns / 1e6)


def predict_transpose(ceiling_tbps: float, *, stages: int = 6, blocks_per_sm: int = 2, shape=(8192, 8192),
                      latency_ns: float | None = None, n_sm: int = H100.sm_count) -> Prediction:
    """The exercise's course solution: day 5's law, a ring of `stages` 8 KiB tiles read + written per block, drained
    at DRAM_FRACTION_OF_COPY x C (day 2's transpose)."""
    lat = TMA_LATENCY_NS if latency_ns is None else latency_ns
    inflight = n_sm * blocks_per_sm * stages * 2 * TILE_BYTES
    x = _tma_law(inflight, DRAM_FRACTION_OF_COPY * ceiling_tbps, lat)
    nbytes = 4 * shape[0] * shape[1]
    t = nbytes / (x * 1e3)
    return Prediction(x, t / 1e6, "memory", 0.0, t / 1e6)


def fit(rows, ceiling_tbps: float, n_sm: int = H100.sm_count) -> dict:
    """The three fitted constants from the rows FIT_ROWS names (see the docstring), and every other modelled row's
    error with them (held_out_errors; held_out_band: the worst)."""
    by = {r["kernel"]: r for r in rows if r.get("config")}
    missing = [n for n in FIT_ROWS if n not in by or not by[n].get("ms")]
    if missing:
        raise ValueError(f"the fit rows {missing} were not measured")

    def cfg(name):
        return Config(**by[name]["config"])

    def inflight(c):
        return n_sm * min(c.blocks_per_sm, ceil(ceil(c.cols / 64) / n_sm)) * c.stages * TILE_BYTES

    def read_rate(name):  # read bytes per ns
        c = cfg(name)
        return 2 * c.rows * c.cols / (by[name]["ms"] * 1e6)

    # Each constant from its own rows (every colsum row of the benchmark): the per-row values, then their mean
    # (the harmonic mean of the rates: the errors on those rows sum to zero).
    rates = [_per_sm_tiles(cfg(n), n_sm) * tile_wavefronts(cfg(n).mode, cfg(n).span, cfg(n).passes)
             / (by[n]["ms"] * 1e6) for n in FIT_SMEM_ROWS]
    rate = len(rates) / sum(1 / r for r in rates)
    lats = [inflight(cfg(n)) / read_rate(n) - inflight(cfg(n)) / (ceiling_tbps * 1e3) for n in FIT_LATENCY_ROWS]
    lat = sum(lats) / len(lats)
    effs = [inflight(cfg(n)) / ((inflight(cfg(n)) / read_rate(n) - lat) * ceiling_tbps * 1e3) for n in FIT_ROW32_ROWS]
    eff = sum(effs) / len(effs)
    kw = dict(wavefronts_per_ns=rate, row32_efficiency=eff, latency_ns=lat, n_sm=n_sm)
    errs = {}
    for name, r in by.items():
        if name in FIT_ROWS or not r.get("tbps"):
            continue
        p = predict_config(Config(**r["config"]), ceiling_tbps, **kw)
        if p is not None:
            errs[name] = p.tbps / r["tbps"] - 1
    worst = max(errs, key=lambda k: abs(errs[k])) if errs else None
    c32 = cfg(FIT_ROW32_ROWS[0])
    return {"WAVEFRONTS_PER_NS": rate, "ROW32_EFFICIENCY": eff, "TMA_LATENCY_NS": lat, "fit_rows": list(FIT_ROWS),
            # not a constant of the model: the box rows per ns per SM the 32-byte-row fit row reached (what the
            # earlier model called a TMA issue rate), kept for comparison
            "TMA_ROWS_PER_NS": (_per_sm_tiles(c32, n_sm) * TILE_ROWS * (128 // c32.span)
                                / (by[FIT_ROW32_ROWS[0]]["ms"] * 1e6)),
            "fit_errors": {n: (predict_config(cfg(n), ceiling_tbps, **kw).tbps / by[n]["tbps"] - 1) for n in FIT_ROWS},
            "held_out_band": abs(errs[worst]) if worst else None, "held_out_worst": worst, "held_out_errors": errs}


def _predict_row(row: dict, record: dict, constants: dict | None = None) -> float | None:
    """TB/s of a record's row at that record's copy ceiling, with the named constants or a refit's (fit())."""
    kw = {} if not constants else {"wavefronts_per_ns": constants["WAVEFRONTS_PER_NS"],
                                   "row32_efficiency": constants["ROW32_EFFICIENCY"],
                                   "latency_ns": constants["TMA_LATENCY_NS"]}
    p = predict_config(Config(**row["config"]), record["ceilings"]["copy_tbps"], **kw)
    return p.tbps if p is not None else None


# The held-out check (kernels.held_out.HeldOut): every HELD_OUT row within HELD_OUT_BAND on the record of every GPU,
# each with its own run's copy ceiling, or named in FIT; the benchmark records it, the notebook prints held_out_report.
HELD_OUT_CHECK = HeldOut(FIT, FIT_ROWS, HELD_OUT, band=HELD_OUT_BAND, predict=_predict_row, unit="TB/s", width=28,
                         refit=lambda record: fit(record["rows"], record["ceilings"]["copy_tbps"]),
                         constants={"WAVEFRONTS_PER_NS": WAVEFRONTS_PER_NS, "ROW32_EFFICIENCY": ROW32_EFFICIENCY,
                                    "TMA_LATENCY_NS": TMA_LATENCY_NS})
held_out_report = HELD_OUT_CHECK.report


# ------------------------------------------------------------------------------------------------- for the notebook
def explain(ceiling_tbps: float | None = None) -> str:
    ceil_tbps = ceiling_tbps or 3.0
    lines = ["colsum.cu, one warp's LDS.128 of a chunk column (counter on the real addresses; ideal = 4):",
             f"{'layout':<18}{'LDS.128 wf':>11}{'conflict':>10}{'tile wf p1':>12}{'tile wf p32':>13}"
             f"{'pred p1':>9}{'pred p32':>10}  TB/s, bound at 32 passes"]
    for mode, span in (("none", 128), ("none", 64), ("none", 32), ("32B", 32), ("64B", 64), ("128B", 128)):
        wf = lds_wavefronts(mode, span)
        p1 = predict_config(Config("colsum", mode, span, 1), ceil_tbps)
        p32 = predict_config(Config("colsum", mode, span, 32), ceil_tbps)
        lines.append(f"{mode + f', {span} B rows':<18}{wf:>11}{wf // 4:>9}x{tile_wavefronts(mode, span, 1):>12}"
                     f"{tile_wavefronts(mode, span, 32):>13}{p1.tbps:>9.2f}{p32.tbps:>10.2f}  {p32.bound}")
    t = predict_transpose(ceil_tbps)
    lines.append(f"WAVEFRONTS_PER_NS = {WAVEFRONTS_PER_NS:.3f} per SM, ROW32_EFFICIENCY = {ROW32_EFFICIENCY:.3f} of "
                 f"the copy ceiling for 32-byte box rows, TMA_LATENCY_NS = {TMA_LATENCY_NS:.0f} (fit: {FIT['source']});"
                 f" copy ceiling {ceil_tbps:.2f} TB/s")
    lines.append(f"exercise, course solution (2 blocks x 6 stages x 8 KiB per SM, drained at "
                 f"{DRAM_FRACTION_OF_COPY:.2f} x C): {t.tbps:.2f} TB/s = {t.tbps / ceil_tbps:.2f} x the ceiling")
    return "\n".join(lines)


def plot_layouts(modes=("none", "32B", "64B", "128B"), rows: int = 8):
    """One panel per mode: 8 rows of a box, each 16-byte cell coloured and labelled with the logical chunk the TMA put
    there (none and 128B: 128-byte rows; 64B: 64-byte rows; 32B: 32-byte rows), and the cells of logical chunk 1
    outlined: the column a warp reads. Returns a Figure."""
    from matplotlib.figure import Figure
    from matplotlib.patches import Rectangle

    fig = Figure(figsize=(3.2 * len(modes), 3.6), layout="constrained")
    for k, mode in enumerate(modes):
        ax = fig.add_subplot(1, len(modes), k + 1)
        lay = chunk_layout(mode, rows)
        n = len(lay[0])
        ax.imshow(lay, cmap="tab10", vmin=0, vmax=9, aspect="auto", interpolation="nearest")
        for r in range(rows):
            for p in range(n):
                ax.text(p, r, str(lay[r][p]), ha="center", va="center", fontsize=9)
                if lay[r][p] == 1:
                    ax.add_patch(Rectangle((p - 0.5, r - 0.5), 1, 1, fill=False, edgecolor="black", linewidth=2))
        span = SPAN[mode] or 128
        rule = {"none": "chunk' = chunk", "32B": "chunk' = chunk ^ ((row/4) % 2)",
                "64B": "chunk' = chunk ^ ((row/2) % 4)", "128B": "chunk' = chunk ^ (row % 8)"}[mode]
        ax.set_title(f"{mode}: {span}-byte rows\n{rule}", fontsize="medium")
        ax.set_xticks(range(n), [f"{16 * p}" for p in range(n)], fontsize="small")
        ax.set_xlabel("byte offset in the row (16-byte chunks)")
        ax.set_ylabel("box row")
    fig.suptitle("Which logical 16-byte chunk the TMA put where (outlined: logical chunk 1, a warp's column)")
    return fig


def plot_column_read(modes=(("none", 128), ("128B", 128)), chunk: int = 1):
    """The 8 lanes of one quarter-warp reading chunk `chunk` of rows 0..7 (colsum.cu): the banks each lane's 16 bytes
    occupy. Without swizzle the 8 rows stack on 4 banks (8 wavefronts); with 128B swizzle they cover all 32 (1)."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(5.5 * len(modes), 3.0), layout="constrained")
    for k, (mode, span) in enumerate(modes):
        ax = fig.add_subplot(1, len(modes), k + 1)
        offs = colsum_offsets(mode, span, chunk)[:8]
        for lane, off in enumerate(offs):
            b0 = (off // 4) % 32
            ax.barh(lane, 4, left=b0, color=f"C{lane}", edgecolor="black")
        wf = wavefronts(offs, 16)
        ax.set_xlim(0, 32)
        ax.set_xticks(range(0, 33, 4))
        ax.set_yticks(range(8), [f"lane {i} (row {i})" for i in range(8)], fontsize="small")
        ax.invert_yaxis()
        ax.set_xlabel("bank")
        ax.set_title(f"{mode}, {span}-byte rows: chunk {chunk} of rows 0-7 -> {wf} wavefront{'s' * (wf > 1)}",
                     fontsize="medium")
    return fig
