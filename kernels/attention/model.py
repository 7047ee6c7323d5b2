"""Week 2, day 5's model: two rungs of attention, each per K/V tile of one block — the chain each consumer warpgroup
runs, the tensor core the two warpgroups share, and the ring(s) that feed them — each fitted on some rows of the H100
record and checked on rows held out of its fit.

One block per SM (Q 32 KiB + the K/V tiles at D = 128), two consumer warpgroups of 64 query rows. Per K/V tile of BN
keys and per warpgroup:

    tensor time of its two GEMMs      t_mma = 2 x 2 x 64 x BN x D FLOP / (P_SM x TC_EFF)   (QK^T and PV: t_mma / 2 each)
                                      (P_SM = the tensor peak per SM: 989 TFLOP/s / 132 on an H100; TC_EFF fitted)
    its softmax                       t_sm  = SOFTMAX_NS x BN / 128   (mask, max, exp2, sums, rescale, pack: fitted)

r1_attention.cu, the serial chain (HELD_OUT_CHECK). Each warpgroup, per tile: QK^T -> wait -> softmax -> PV -> wait
(the HGMMA, WARPGROUP.DEPBAR, MUFU.EX2 order of its SASS). Both warpgroups wait on the same full[s] and no barrier
orders them, so a warpgroup's GEMM may find the other's GEMMs on the tensor core first: CONTENTION (fitted, 0 .. 1) is
the fraction of the other warpgroup's t_mma its chain waits for, per tile (0: the two chains perfectly out of step, one
softmax under the other's GEMMs; 1: lockstep, both GEMMs then both softmaxes). The block's compute period:

        P_c = max(2 t_mma, t_mma + t_sm + CONTENTION x t_mma)        (the tensor core's share, or one chain)

r2_overlap.cu, the overlap (OVERLAP_CHECK). Round j issues S_j = Q K_j^T and O += P_{j-1} V_{j-1} back to back
and waits only for S_j: the softmax waits for one GEMM (t_mma / 2) and runs under its own PV. With ping-pong (named
barriers 1 and 2) the warpgroups take turns at the tensor core and neither waits for the other's GEMMs; without it
(`nopp`) its CONTENTION (fitted for this rung) returns:

        P_c = max(2 t_mma, t_mma / 2 + t_sm + (1 - PINGPONG) x CONTENTION x t_mma)

The rings. r1_attention.cu: one ring of `stages`, a stage holding a K and a V tile, released after both warpgroups' PV;
r2_overlap.cu: a K ring and a V ring of their own depths. A stage turns around in t_ld + P_c (refill, then
held for one period), and `stages` of them share that time (Little's law):

        P = max(P_c, (t_ld + P_c) / stages)       (the overlap rung: that of each ring, the deeper one not binding)
        t_ld = LOAD_NS + bytes / (L2_TBPS / SMs)  (LOAD_NS: the TMA round trip fitted in week 1 day 5,
                                                   kernels.tma.model.LATENCY_NS; L2_TBPS fitted on r1_attention.cu's rows)

The run: T = (sum over blocks of their tiles) x P / SMs + waves x BLOCK_NS (causal blocks have 1 .. S/BN tiles;
BLOCK_NS: a block's fixed cost, Q load, first tile, epilogue, once per wave of SMs). FLOPs as
kernels.attention.workload.flops (4 B H S^2 D, half when causal): the models predict TFLOPS in those units.

Constants, fitted on the H100 record (kernels/attention/recorded_h100.json), each model on its own fit rows (at most
one fitted constant per two rows; FIT["constants"] names each constant's kind):
  the overlap model (OVERLAP_FIT_ROWS: its nine non-causal rows, D 128 and 64, 128- and 176-key tiles, ping-pong on
  and off) fits TC_EFF, its SOFTMAX_NS, CONTENTION and BLOCK_NS (OVERLAP_CONSTANTS). With ping-pong at D = 128 the
  rung is tensor-bound: its rows measure the tensor core's rate, TC_EFF, which the serial chain never reaches;
  the serial chain (FIT_ROWS: its six non-causal rows) takes that TC_EFF and that BLOCK_NS (the same Q load and
  epilogue) and fits SOFTMAX_NS, CONTENTION and L2_TBPS.
  Both hold out their causal rows: another shape class (a block has 1 .. S/BN tiles, the diagonal one masked).
The serial chain's held-out rows are checked on every GPU recorded (the H100's and the H200's records), and so are the
overlap model's (fitted on the H100's rows, predicting the H200's, recorded 2026-12-02). The H200 and the
H100 share the GH100 chip, its SM count and clocks: the per-SM tensor peak is the H100's, and no term depends on DRAM
(K and V tiles are re-read from L2).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from functools import lru_cache

from ..fits import kept
from ..held_out import HeldOut
from ..sim import H100
from ..tma.model import LATENCY_NS as TMA_LATENCY_NS
from .workload import BM, BN, flops

__all__ = ["Config", "predict_config", "predict", "fit", "HELD_OUT_CHECK", "FIT_ROWS", "HELD_OUT", "HELD_OUT_BAND",
           "TC_EFF", "SOFTMAX_NS", "CONTENTION", "LOAD_NS", "BLOCK_NS", "L2_TBPS", "per_tile", "schedules",
           "held_out_report", "CONSTANTS", "main_row", "OverlapConfig", "per_tile_overlap", "predict_row",
           "fit_overlap", "overlap_errors", "OVERLAP_FIT", "OVERLAP_FIT_ROWS", "OVERLAP_HELD_OUT", "OVERLAP_BAND",
           "OVERLAP_CONSTANTS", "OVERLAP_CHECK", "overlap_report", "tile_timeline"]

P_SM_TFLOPS = H100.bf16_dense_tflops / H100.sm_count   # 7.49 TFLOP/s per SM (datasheet peak / 132)
LOAD_NS = TMA_LATENCY_NS  # a TMA request's round trip with nothing queued (week 1 day 5's fit), ns
# Fitted constants (see FIT and OVERLAP_FIT: the fits of kernels/attention/recorded_h100.json).
TC_EFF = 0.68         # fraction of the tensor peak the GEMMs reach (the overlap rung's fit: it is tensor-bound)
SOFTMAX_NS = 659.8    # r1_attention.cu: one warpgroup's softmax of a 64 x 128 score tile, ns
CONTENTION = 0.589    # r1_attention.cu: the part of the other warpgroup's GEMMs a chain waits for, per tile
L2_TBPS = 90.26       # the rate a tile's bytes add to LOAD_NS (all SMs; see FIT["known_miss"] on its size)
BLOCK_NS = 1557.5     # a block's fixed cost per wave (Q load, first tile, epilogue), ns: the overlap rung's fit
CONSTANTS = ("TC_EFF", "SOFTMAX_NS", "CONTENTION", "L2_TBPS", "BLOCK_NS")  # the serial chain's, fit()'s order

FIT: dict = {"source": "kernels/attention/recorded_h100.json: NVIDIA H100 80GB HBM3, driver 580.159.04, 2026-11-26, "
                       "make gpu-test",
             "device": "NVIDIA H100 80GB HBM3", "driver": "580.159.04", "date": "2026-11-26",
             "fit_rows": ["attn_fwd d128 s1", "attn_fwd d128 s2", "attn_fwd d128 s3", "attn_fwd d64 s1",
                          "attn_fwd d64 s2", "attn_fwd d64 s4"],
             "rms_rel_err_fit_rows": 0.013,
             # prediction / measurement - 1 on the rows not used to fit, per recorded GPU (rows timed on the
             # exercise's inputs: large logits on odd heads), these constants: HELD_OUT_CHECK.errors(record)
             "held_out": {"h100": {"attn_fwd d128 s2 causal": -0.045}, "h200": {"attn_fwd d128 s2 causal": -0.029}},
             # GPU -> row -> error, as every topic's FIT (kernels.topic.fit_table prints them): the held_out errors
             # outside HELD_OUT_BAND
             "held_out_outside_band": {"h100": {}, "h200": {}},
             "known_miss": "L2_TBPS is fitted far above any L2 -> SM rate: a one-stage ring pays the TMA round trip "
                           "(LOAD_NS) and little of the tile's bytes, because QK^T starts on the K half while the V "
                           "half is still landing — the constant says so, it is no bandwidth. TC_EFF is the overlap "
                           "rung's (this rung never keeps the tensor core busy enough to measure it). The exercise's "
                           "kernel (attn_kv: a K ring and a V ring of their own depths, K released before the softmax) "
                           "is not this model's combined ring: its rows carry no prediction"}
# Three constants of its own on six rows (the course's rule: at most one fitted constant per two rows it is fitted
# on): every non-causal row of r1_attention.cu; the causal row (another shape class: blocks of 1 .. S/BN tiles, the
# diagonal tile masked) is held out.
FIT_ROWS = ("attn_fwd d128 s1", "attn_fwd d128 s2", "attn_fwd d128 s3", "attn_fwd d64 s1", "attn_fwd d64 s2",
            "attn_fwd d64 s4")
HELD_OUT = ("attn_fwd d128 s2 causal",)
HELD_OUT_BAND = 0.10
FIT.update(constants={
    "SOFTMAX_NS": {"kind": "fitted", "rows": FIT_ROWS}, "CONTENTION": {"kind": "fitted", "rows": FIT_ROWS},
    "L2_TBPS": {"kind": "fitted", "rows": FIT_ROWS},
    "TC_EFF": {"kind": "fitted", "from": "the overlap rung's fit (OVERLAP_FIT_ROWS, same record)"},
    "BLOCK_NS": {"kind": "fitted", "from": "the overlap rung's fit (OVERLAP_FIT_ROWS, same record)"},
    "LOAD_NS": {"kind": "fitted", "from": "kernels.tma.model (week 1 day 5, an H100's copies)"},
    "P_SM_TFLOPS": {"kind": "physics", "source": "989 TFLOP/s dense BF16 / 132 SMs (H100 datasheet; the H200 is the "
                                                 "same GH100 die and clocks)"},
    "BM, BN": {"kind": "physics", "source": "the kernel's tiles (128 query rows, 128 keys): "
                                            "kernels.attention.workload"}},
    held_out_regime="the causal row: another shape class (1 .. S/BN tiles a block, the diagonal tile masked)",
    misses={"h100": {}, "h200": {}})


@dataclass(frozen=True)
class Config:
    b: int
    h: int
    s: int
    d: int
    causal: int
    stages: int

    @property
    def shape(self):
        return (self.b, self.h, self.s, self.d, self.causal)


def _t_mma(d: int, bn: int, tc_eff: float) -> float:
    """One warpgroup's two GEMMs of a tile (64 x bn x d each way), ns."""
    return 2 * 2 * (BM // 2) * bn * d / (P_SM_TFLOPS * 1e12 * tc_eff) * 1e9


def _t_load(nbytes: float, l2_tbps: float) -> float:
    return LOAD_NS + nbytes / (l2_tbps * 1e12 / H100.sm_count) * 1e9


def per_tile(d: int, stages: int, *, tc_eff: float = None, softmax_ns: float = None, contention: float = None,
             l2_tbps: float = None) -> dict:
    """r1_attention.cu's per-tile times (ns) of one block: the serial chain of each warpgroup, the tensor core they
    share, the one ring of `stages` (a K and a V tile per stage)."""
    tc_eff = TC_EFF if tc_eff is None else tc_eff
    softmax_ns = SOFTMAX_NS if softmax_ns is None else softmax_ns
    contention = CONTENTION if contention is None else contention
    l2_tbps = L2_TBPS if l2_tbps is None else l2_tbps
    t_mma = _t_mma(d, BN, tc_eff)
    t_sm = softmax_ns * BN / 128
    chain = t_mma + t_sm + contention * t_mma
    p_c = max(2 * t_mma, chain)
    t_ld = _t_load(2 * BN * d * 2, l2_tbps)
    period = max(p_c, (t_ld + p_c) / stages)
    return {"t_mma": t_mma, "t_softmax": t_sm, "t_wait": contention * t_mma, "chain": chain, "compute_period": p_c,
            "t_load": t_ld, "period": period,
            "bound": "load (ring too shallow)" if period > p_c else
            ("one warpgroup's chain" if chain >= 2 * t_mma else "tensor core")}


def schedules(d: int) -> dict:
    """One block's compute period per tile (ns, the module's constants) under the serial chain's two extreme schedules
    of its consumer warpgroups and the fitted one: `interleaved` (CONTENTION 0: one's softmax under the other's GEMMs),
    `lockstep` (CONTENTION 1: both QK^T, both softmaxes, both PV) and `fitted` (CONTENTION as fitted)."""
    return {"interleaved": per_tile(d, 1, contention=0.0)["compute_period"],
            "lockstep": per_tile(d, 1, contention=1.0)["compute_period"],
            "fitted": per_tile(d, 1)["compute_period"]}


@lru_cache(maxsize=None)  # a fit's least squares asks for the same few configs ~10^6 times (cfg: a frozen dataclass)
def _tiles(cfg, bn: int = BN) -> tuple[int, int]:
    """(total K/V tiles of `bn` keys over all blocks, blocks)."""
    m_blocks = -(-cfg.s // BM)
    per_head = 0
    for m in range(m_blocks):
        kv_end = min(cfg.s, (m + 1) * BM) if cfg.causal else cfg.s
        per_head += -(-kv_end // bn)
    return per_head * cfg.b * cfg.h, m_blocks * cfg.b * cfg.h


def _tflops(work: float, tiles_blocks, period: float, block_ns: float, sms: int) -> float:
    """TFLOPS of `work` FLOPs (workload.flops of the shape) over the tiles and blocks of _tiles."""
    tiles, blocks = tiles_blocks
    t_ns = tiles * period / sms + -(-blocks // sms) * block_ns
    return work / (t_ns * 1e-9) / 1e12


def predict_config(cfg: Config, sms: int = H100.sm_count, *, block_ns: float = None, **kw) -> float:
    """Predicted TFLOPS of r1_attention.cu (the workload's FLOP count); `kw`: per_tile's constants."""
    block_ns = BLOCK_NS if block_ns is None else block_ns
    return _tflops(flops(cfg.shape), _tiles(cfg), per_tile(cfg.d, cfg.stages, **kw)["period"], block_ns, sms)


def predict(shape, stages: int, sms: int = H100.sm_count) -> float:
    return predict_config(Config(*shape, stages), sms)


def _cfg_of(row: dict) -> Config | None:
    c = row.get("config")
    return Config(**c) if c else None


def _search(err, grid: dict, lo: dict, hi: dict) -> tuple[dict, float]:
    """Least squares: the best point of a coarse grid (constant -> values), then a pattern search from it: each
    constant in turn moved by +-step (relative; absolute where it is 0), kept where the error falls; steps halved when
    nothing improves, down to 1e-4. Deterministic."""
    start = min((dict(zip(grid, p)) for p in itertools.product(*grid.values())), key=err)
    c, best = dict(start), err(start)
    step = {k: 0.25 for k in start}
    while max(step.values()) > 1e-4:
        moved = False
        for k in start:
            for sgn in (1, -1):
                cand = dict(c)
                cand[k] = min(hi[k], max(lo[k], c[k] * (1 + sgn * step[k]) if c[k] else sgn * step[k]))
                e = err(cand)
                if e < best - 1e-15:
                    c, best, moved = cand, e, True
        if not moved:
            step = {k: v / 2 for k, v in step.items()}
    return c, best


def _rows_by_name(rows: list[dict]) -> dict:
    return {r["kernel"]: r for r in rows if main_row(r) and r.get("config") and r.get("tflops")}


def fit(rows: list[dict], fit_rows=FIT_ROWS, sms: int = H100.sm_count, tc_eff: float | None = None,
        block_ns: float | None = None) -> dict:
    """The serial chain's SOFTMAX_NS, CONTENTION and L2_TBPS: least squares (relative error) on the fit rows of one
    run, TC_EFF and BLOCK_NS held at `tc_eff` and `block_ns` (the overlap model's fit of the same run, fit_overlap:
    one tensor rate, one fixed cost of a block — its Q load and epilogue are the same code; None: the module's)."""
    tc = TC_EFF if tc_eff is None else tc_eff
    blk = BLOCK_NS if block_ns is None else block_ns
    by = _rows_by_name(rows)
    pts = [(_cfg_of(by[n]), by[n]["tflops"]) for n in fit_rows if n in by]
    if len(pts) < 2:
        return {"fitted": False, "reason": f"only {len(pts)} fit rows measured"}

    def err(p):
        return sum((predict_config(c, sms, tc_eff=tc, softmax_ns=p["SOFTMAX_NS"], contention=p["CONTENTION"],
                                   l2_tbps=p["L2_TBPS"], block_ns=blk) / m - 1) ** 2 for c, m in pts)

    best, e = _search(err, {"SOFTMAX_NS": [300.0, 600.0, 900.0, 1200.0], "CONTENTION": [0.0, 0.25, 0.5, 0.75, 1.0],
                            "L2_TBPS": [5.0, 20.0, 80.0]},
                      lo={"SOFTMAX_NS": 0.0, "CONTENTION": 0.0, "L2_TBPS": 0.1},
                      hi={"SOFTMAX_NS": 1e5, "CONTENTION": 1.0, "L2_TBPS": 1e3})
    return {"fitted": True, "TC_EFF": round(tc, 3), "SOFTMAX_NS": round(best["SOFTMAX_NS"], 1),
            "CONTENTION": round(best["CONTENTION"], 3), "L2_TBPS": round(best["L2_TBPS"], 2),
            "BLOCK_NS": round(blk, 1), "rms_rel_err": (e / len(pts)) ** 0.5,
            "fit_rows": [n for n in fit_rows if n in by]}


def main_row(r: dict) -> bool:
    """A row the model reads: timed on the exercise's data (its `data` key; records before it said `inputs`:
    "workload" / "N(0,1)"), the data-effect lesson's rows left out."""
    data = r.get("data") or {"N(0,1)": "normal"}.get(r.get("inputs"), "exercise")
    return not r.get("lesson") and data == "exercise"


def _serial_kw(constants: dict | None) -> dict:
    if constants and constants.get("fitted"):
        return dict(tc_eff=constants["TC_EFF"], softmax_ns=constants["SOFTMAX_NS"], contention=constants["CONTENTION"],
                    l2_tbps=constants["L2_TBPS"], block_ns=constants["BLOCK_NS"])
    return {}


def _predict_row(row: dict, record: dict, constants: dict | None = None) -> float | None:
    """TFLOPS of a record's r1_attention.cu row (no term depends on the run's DRAM), with the module's constants or a
    refit's (fit())."""
    c = row.get("config")
    if not c or "stages" not in c:
        return None
    return predict_config(_cfg_of(row), H100.sm_count, **_serial_kw(constants))


def _refit_serial(record: dict) -> dict:
    """fit() on the record's own fit rows, TC_EFF from fit_overlap on the same record where it holds the overlap
    rung's rows (the H100's), else the module's."""
    rows = [r for r in record["rows"] if main_row(r)]
    ov = fit_overlap(rows)
    return fit(rows, tc_eff=ov["TC_EFF"] if ov.get("fitted") else None,
               block_ns=ov["BLOCK_NS"] if ov.get("fitted") else None)


# The serial chain's held-out check (kernels.held_out.HeldOut): each record's held-out rows on the exercise's data, and
# a refit on the record's own fit rows. The scaffold records it as extra["model"].
HELD_OUT_CHECK = HeldOut(FIT, FIT_ROWS, HELD_OUT, band=HELD_OUT_BAND, predict=_predict_row, unit="TFLOPS",
                         refit=_refit_serial,
                         constants=dict(zip(CONSTANTS, (TC_EFF, SOFTMAX_NS, CONTENTION, L2_TBPS, BLOCK_NS))),
                         select=main_row, fmt="6.1f",
                         remarks=(f"known: {FIT['known_miss']}",))
held_out_report = HELD_OUT_CHECK.report


# ============================================================================ the overlap rung (r2_overlap.cu)
# Four constants on nine rows: every non-causal row of the rung (D 128 and 64, 128- and 176-key tiles, ping-pong on
# and off, K/V rings of 2-4); the causal rows (another shape class) are held out.
OVERLAP_FIT_ROWS = ("attn_overlap d128 n128 k3v2", "attn_overlap d128 n128 k3v2 nopp", "attn_overlap d128 n128 k2v2",
                    "attn_overlap d128 n128 k3v3", "attn_overlap d128 n176 k2v2", "attn_overlap d128 n176 k2v2 nopp",
                    "attn_overlap d64 n128 k4v4", "attn_overlap d64 n128 k4v4 nopp", "attn_overlap d64 n176 k3v3")
OVERLAP_HELD_OUT = ("attn_overlap d128 n128 k3v2 causal", "attn_overlap d128 n128 k3v2 nopp causal",
                    "attn_overlap d128 n176 k2v2 causal")
OVERLAP_BAND = 0.10
# fit_overlap() of the H100 record's OVERLAP_FIT_ROWS (TC_EFF above is its TC_EFF)
OVERLAP_CONSTANTS: dict = {"fitted": True, "TC_EFF": TC_EFF, "SOFTMAX_NS": 985.6, "CONTENTION": 0.421,
                           "BLOCK_NS": BLOCK_NS}
OVERLAP_FIT: dict = {"source": FIT["source"], "device": FIT["device"], "driver": FIT["driver"], "date": FIT["date"],
                     "fit_rows": list(OVERLAP_FIT_ROWS), "rms_rel_err_fit_rows": 0.020,
                     # OVERLAP_CHECK.errors(record): fitted on the H100's rows, predicting the H200's (2026-12-02)
                     "held_out": {"h100": {"attn_overlap d128 n128 k3v2 causal": +0.020,
                                           "attn_overlap d128 n128 k3v2 nopp causal": +0.019,
                                           "attn_overlap d128 n176 k2v2 causal": +0.018},
                                  "h200": {"attn_overlap d128 n128 k3v2 causal": +0.013,
                                           "attn_overlap d128 n128 k3v2 nopp causal": -0.006,
                                           "attn_overlap d128 n176 k2v2 causal": +0.013}},
                     "held_out_outside_band": {"h100": {}, "h200": {}},
                     "constants": {
                         "TC_EFF": {"kind": "fitted", "rows": OVERLAP_FIT_ROWS},
                         "SOFTMAX_NS": {"kind": "fitted", "rows": OVERLAP_FIT_ROWS},
                         "CONTENTION": {"kind": "fitted", "rows": tuple(n for n in OVERLAP_FIT_ROWS if "nopp" in n)},
                         "BLOCK_NS": {"kind": "fitted", "rows": OVERLAP_FIT_ROWS},
                         "L2_TBPS": {"kind": "fitted", "from": "the serial chain's fit (FIT_ROWS, same record)"},
                         "LOAD_NS": {"kind": "fitted", "from": "kernels.tma.model (week 1 day 5)"},
                         "P_SM_TFLOPS": {"kind": "physics", "source": "989 TFLOP/s dense BF16 / 132 SMs (H100 "
                                                                      "datasheet)"}},
                     "held_out_regime": "the causal rows: another shape class (1 .. S/BN tiles a block, the diagonal "
                                        "tile masked)",
                     "misses": {"h100": {}},
                     "known_miss": "none outside the band. Four constants on nine fit rows (every non-causal row "
                                   "of the rung); the causal rows, held out, are within 2 %"}


@dataclass(frozen=True)
class OverlapConfig:
    b: int
    h: int
    s: int
    d: int
    causal: int
    bn: int
    k_stages: int
    v_stages: int
    pingpong: int

    @property
    def shape(self):
        return (self.b, self.h, self.s, self.d, self.causal)


def _overlap_times(d: int, bn: int, k_stages: int, v_stages: int, pingpong: int, tc_eff: float, softmax_ns: float,
                   contention: float, t_ld: float) -> tuple:
    """per_tile_overlap's times (ns) as a tuple: (t_mma, t_softmax, t_wait, chain, compute_period, t_load, period).
    `t_ld`: one K or V tile's load (_t_load of bn * d * 2 bytes). A fit asks for them ~10^6 times (fit_overlap): no
    dict, no defaults here."""
    t_mma, t_sm = _t_mma(d, bn, tc_eff), softmax_ns * bn / 128
    wait = 0.0 if pingpong else contention * t_mma
    chain = t_mma / 2 + t_sm + wait
    p_c = max(2 * t_mma, chain)
    return t_mma, t_sm, wait, chain, p_c, t_ld, max(p_c, (t_ld + p_c) / k_stages, (t_ld + p_c) / v_stages)


def per_tile_overlap(d: int, bn: int, k_stages: int, v_stages: int, pingpong: int, *, tc_eff: float = None,
                     softmax_ns: float = None, contention: float = None, l2_tbps: float = None) -> dict:
    """r2_overlap.cu's per-tile times (ns) of one block: the softmax under its own PV GEMM, ping-pong or not,
    a K ring and a V ring (one tile each per stage). Defaults: OVERLAP_CONSTANTS (L2_TBPS: the serial chain's)."""
    c = OVERLAP_CONSTANTS
    tc_eff = c["TC_EFF"] if tc_eff is None else tc_eff
    softmax_ns = c["SOFTMAX_NS"] if softmax_ns is None else softmax_ns
    contention = c["CONTENTION"] if contention is None else contention
    l2_tbps = L2_TBPS if l2_tbps is None else l2_tbps
    t_mma, t_sm, wait, chain, p_c, t_ld, period = _overlap_times(d, bn, k_stages, v_stages, pingpong, tc_eff,
                                                                 softmax_ns, contention, _t_load(bn * d * 2, l2_tbps))
    return {"t_mma": t_mma, "t_softmax": t_sm, "t_wait": wait, "chain": chain, "compute_period": p_c, "t_load": t_ld,
            "period": period, "bound": "load (rings too shallow)" if period > p_c else
            ("one warpgroup's chain" if chain > 2 * t_mma else "tensor core")}


def predict_overlap(cfg: OverlapConfig, sms: int = H100.sm_count, constants: dict | None = None) -> float:
    """Predicted TFLOPS of one r2_overlap.cu entry with `constants` (fit_overlap's; None: OVERLAP_CONSTANTS)."""
    c = constants or OVERLAP_CONSTANTS
    period = _overlap_times(cfg.d, cfg.bn, cfg.k_stages, cfg.v_stages, cfg.pingpong, c["TC_EFF"], c["SOFTMAX_NS"],
                            c["CONTENTION"], _t_load(cfg.bn * cfg.d * 2, L2_TBPS))[-1]
    return _tflops(flops(cfg.shape), _tiles(cfg, cfg.bn), period, c["BLOCK_NS"], sms)


def predict_row(row: dict, constants: dict | None = None) -> float | None:
    """The models' TFLOPS for a row: r1_attention.cu's rows (config with `stages`) by the serial chain,
    r2_overlap.cu's (config with `bn`) by the overlap model (`constants`: fit_overlap's; None: OVERLAP_CONSTANTS); None otherwise."""
    cfg = row.get("config")
    if not cfg:
        return None
    if "bn" in cfg:
        return predict_overlap(OverlapConfig(**cfg), constants=constants)
    return predict_config(Config(**cfg))


@kept  # seconds to half a minute (the pattern search): once per record and library version (kernels.fits)
def fit_overlap(rows: list[dict], fit_rows=OVERLAP_FIT_ROWS, sms: int = H100.sm_count) -> dict:
    """Least squares (relative error, _search) of TC_EFF, SOFTMAX_NS, CONTENTION and BLOCK_NS on the overlap rung's
    fit rows of one run. Needs at least 4 of them, one with ping-pong off."""
    by = _rows_by_name(rows)
    pts = [(OverlapConfig(**by[n]["config"]), by[n]["tflops"]) for n in fit_rows if n in by]
    if len(pts) < 4 or not any(c.pingpong == 0 for c, _ in pts):
        return {"fitted": False, "reason": f"{len(pts)} of the fit rows measured (4 needed, one with ping-pong off)"}
    # predict_overlap's arithmetic, in its order (the same floats), with what no constant moves computed once
    fixed = [((c.d, c.bn, c.k_stages, c.v_stages, c.pingpong), _t_load(c.bn * c.d * 2, L2_TBPS), flops(c.shape),
              _tiles(c, c.bn), m) for c, m in pts]

    def err(p):
        tc, sm, cont, blk = p["TC_EFF"], p["SOFTMAX_NS"], p["CONTENTION"], p["BLOCK_NS"]
        return sum((_tflops(work, tb, _overlap_times(*cfg, tc, sm, cont, t_ld)[-1], blk, sms) / m - 1) ** 2
                   for cfg, t_ld, work, tb, m in fixed)

    best, e = _search(err, {"TC_EFF": [0.4, 0.5, 0.6, 0.7, 0.8, 0.9], "SOFTMAX_NS": [300.0, 600.0, 900.0, 1200.0],
                            "CONTENTION": [0.0, 0.25, 0.5, 0.75, 1.0], "BLOCK_NS": [0.0, 1000.0, 3000.0]},
                      lo={"TC_EFF": 0.05, "SOFTMAX_NS": 0.0, "CONTENTION": 0.0, "BLOCK_NS": 0.0},
                      hi={"TC_EFF": 1.0, "SOFTMAX_NS": 1e5, "CONTENTION": 1.0, "BLOCK_NS": 1e6})
    return {"fitted": True, "TC_EFF": round(best["TC_EFF"], 3), "SOFTMAX_NS": round(best["SOFTMAX_NS"], 1),
            "CONTENTION": round(best["CONTENTION"], 3), "BLOCK_NS": round(best["BLOCK_NS"], 1),
            "rms_rel_err": (e / len(pts)) ** 0.5, "fit_rows": [n for n in fit_rows if n in by]}


def _predict_overlap_row(row: dict, record: dict, constants: dict | None = None) -> float | None:
    c = row.get("config")
    if not c or "bn" not in c:
        return None
    return predict_overlap(OverlapConfig(**c), H100.sm_count, constants if constants and constants.get("fitted")
                           else None)


# The overlap model's held-out check: the same mechanism (kernels.held_out.HeldOut), on the records that hold the rung's
# rows (the H100's, the H200's); the bench records it beside the serial chain's, with the same keys, as extra["overlap_model"].
OVERLAP_CHECK = HeldOut(OVERLAP_FIT, OVERLAP_FIT_ROWS, OVERLAP_HELD_OUT, band=OVERLAP_BAND,
                        predict=_predict_overlap_row, unit="TFLOPS",
                        refit=lambda record: fit_overlap([r for r in record["rows"] if main_row(r)]),
                        constants={k: OVERLAP_CONSTANTS[k] for k in ("TC_EFF", "SOFTMAX_NS", "CONTENTION",
                                                                      "BLOCK_NS")},
                        select=main_row, fmt="6.1f", width=40,
                        remarks=("fitted on the H100 record, checked on it and on the H200's (recorded 2026-12-02)",))
overlap_report = OVERLAP_CHECK.report


def overlap_errors(rows: list[dict], constants: dict | None = None, held_out=OVERLAP_HELD_OUT) -> dict:
    """{row: prediction / measurement - 1} for each held-out overlap row of `rows` with `constants` (fit_overlap's;
    None: OVERLAP_CONSTANTS): OVERLAP_CHECK.errors of the rows as a record."""
    check = OVERLAP_CHECK if tuple(held_out) == OVERLAP_HELD_OUT else HeldOut(
        OVERLAP_FIT, OVERLAP_FIT_ROWS, tuple(held_out), band=OVERLAP_BAND, predict=_predict_overlap_row,
        select=main_row)
    return check.errors({"rows": rows, "ceilings": {}}, constants)


# ------------------------------------------------------------------------------------ one tile, per warpgroup
def tile_timeline(kind: str, d: int = 128) -> dict:
    """One K/V tile of one block in steady state, per lane, from the fitted constants: {"period": ns, "bound": ...,
    "lanes": {"tensor core" | "wg 0" | "wg 1": [(start ns, end ns, what), ...]}}. `kind`: "serial" (r1_attention.cu: each
    warpgroup QK^T -> softmax -> wait for the other's GEMMs (CONTENTION) -> PV, the second warpgroup half a period
    later), "overlap" (r2_overlap.cu with ping-pong: QK^T_j and PV_{j-1} issued together, the softmax under
    the PV and under the other warpgroup's GEMMs, which follow its own) or "overlap nopp" (no ping-pong: the wait for
    the other warpgroup's GEMMs returns). GEMM segments are also drawn on the tensor core's lane."""
    if kind == "serial":
        pt = per_tile(d, 8)
        a, s, w, p = pt["t_mma"] / 2, pt["t_softmax"], pt["t_wait"], pt["compute_period"]
        wg0 = [(0.0, a, "QK^T"), (a, a + s, "softmax"), (a + s, a + s + w, "wait: tensor core (CONTENTION)"),
               (a + s + w, 2 * a + s + w, "PV")]
        off = p / 2
    elif kind in ("overlap", "overlap nopp"):
        pp = int(kind == "overlap")
        pt = per_tile_overlap(d, BN, 3, 2, pp)
        a, s, w, p = pt["t_mma"] / 2, pt["t_softmax"], pt["t_wait"], pt["compute_period"]
        wg0 = [(w, w + a, "QK^T"), (w + a, w + 2 * a, "PV (prev tile)"), (w + a, w + a + s, "softmax")]
        if w:
            wg0.insert(0, (0.0, w, "wait: tensor core (CONTENTION)"))
        off = 2 * a + w if pp else p / 2
    else:
        raise ValueError(f"kind {kind!r}: 'serial', 'overlap' or 'overlap nopp'")
    wg1 = [(b + off, e + off, what) for b, e, what in wg0]
    gemm = ("QK^T", "PV", "PV (prev tile)")
    tc = sorted([(b, e, f"wg {i}: {what}") for i, lane in enumerate((wg0, wg1)) for b, e, what in lane
                 if what in gemm])
    return {"kind": kind, "d": d, "period": p, "bound": pt["bound"], "tensor_busy": 4 * a / p,
            "lanes": {"tensor core": tc, "wg 0": wg0, "wg 1": wg1}}
