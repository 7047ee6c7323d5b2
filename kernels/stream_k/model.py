"""Week 3 day 2's model: how long a split-K launch takes, from waves, bytes per SM and the fix-up — what picks a tile
and a split for a shape.

A CTA of r1_split_k.cu works on one unit: a (BM, BN) tile of C over ceil(ktiles / splits) k-tiles of 64. With U =
tiles x splits units on S SMs holding `ctas` CTAs each, the grid runs in ceil(U / (S x ctas)) waves. Inside a wave an
SM streams its CTAs' k-tiles: each k-tile brings (BM + BN) x 64 x 2 bytes, and an SM's rate is its bytes in flight over
the latency of a load (every build keeps ~192 KiB in flight: stages x stage bytes x ctas), a constant BW_SM — unless
the tensor core is slower (2 BM BN 64 FLOP a k-tile at the SM's dense bf16 rate). So, in microseconds:

    unit      = kt_unit x max(ctas x stage_bytes / BW_SM, ctas x tc_ktile) + T_UNIT
    fix-up    = T_FIXUP + (splits - 1) x slot_bytes / BW_GATHER        (splits > 1: the last CTA gathers the slots)
    time      = waves x (unit + fix-up)

BW_SM, T_UNIT (launch, barriers, the ring's first fill and the epilogue), T_FIXUP (staging, the TMA stores' round
trip, the ticket) and BW_GATHER (the last consumer's reads of the other slots) are fitted (`fit`) on the FIT_ROWS rows
of a scan record (every tile and split timed once per shape: kernels/stream_k/scan_<gpu>.json) and checked on its
HELD_OUT rows, which the fit never saw; CONSTANTS holds a record's fit (none yet: NOT_FITTED). `choose` picks the
(tile, splits) the model predicts fastest for a shape; `cost` (the same model in k-tile units of the wide tile, no fitted constant) is the
first guess the day starts from.
"""

from __future__ import annotations

import math

from ..gemm.model import DATASHEET_MHZ, TC_FLOP_PER_CLK_SM
from ..launch import ceil_div

BM, BN, BK = 128, 256, 64  # r1_split_k.cu's default tile ("wide") and k-tile
TILE_SHAPES = {"wide": (128, 256), "narrow": (64, 128), "deep": (64, 64), "deep128": (64, 128)}  # launch.TILES
CTAS_PER_SM = {"wide": 1, "narrow": 2, "deep": 1, "deep128": 1}
FILL = 4.0                 # k-tile times per unit outside its mainloop (a guess, checked by the sweep)
FIXUP = 4.0                # k-tile times of the fix-up (a guess, checked by the sweep)
MAX_SPLITS = 16
MIN_KTILES = 4             # no split leaves a CTA fewer k-tiles than this (a ring of 4 would never fill)


def tiles(shape, tile: str = "wide") -> int:
    m, n, _ = shape
    bm, bn = TILE_SHAPES[tile]
    return ceil_div(m, bm) * ceil_div(n, bn)


def ktiles(shape) -> int:
    return ceil_div(shape[2], BK)


def effective_splits(shape, splits: int, tile: str = "wide") -> int:
    """The splits a launch really has: per = ceil(ktiles / splits) k-tiles each, so ceil(ktiles / per) non-empty
    ranges (ktiles = 10, splits = 4: per 3, ranges of 3, 3, 3, 1 — 4; splits = 6: per 2 — 5)."""
    kt = ktiles(shape)
    per = ceil_div(kt, max(1, min(splits, kt)))
    return ceil_div(kt, per)


def cost(shape, splits: int, sms: int, tile: str = "wide") -> float:
    """The model's time of a launch with `splits` (effective_splits), in k-tile times of the wide tile (a narrow
    k-tile moves 3/8 of the bytes; two narrow CTAs share an SM, each at half its rate)."""
    s = effective_splits(shape, splits)
    ctas = CTAS_PER_SM[tile]
    bm, bn = TILE_SHAPES[tile]
    per_ktile = (bm + bn) / (BM + BN) * ctas
    waves = ceil_div(tiles(shape, tile) * s, sms * ctas)
    return waves * (ceil_div(ktiles(shape), s) * per_ktile + FILL) + (FIXUP if s > 1 else 0.0)


def candidates(shape) -> list[int]:
    """The splits worth asking about: 1 and every effective split up to MAX_SPLITS that leaves MIN_KTILES each."""
    kt = ktiles(shape)
    out = {1}
    for s in range(2, MAX_SPLITS + 1):
        e = effective_splits(shape, s)
        if ceil_div(kt, e) >= MIN_KTILES:
            out.add(e)
    return sorted(out)


def best_splits(shape, sms: int, tile: str = "wide") -> int:
    """The split the model predicts fastest (the fewest splits among equals: less fix-up traffic)."""
    return min(candidates(shape), key=lambda s: (cost(shape, s, sms, tile), s))


# ---------------------------------------------------------------- the fitted model (microseconds)

STAGES = {"wide": 4, "narrow": 4, "deep": 12, "deep128": 8}  # kernels.stream_k.launch.TILES
FIT_ROWS = (64, 512)      # the scan's rows (M) the constants are fitted on
HELD_OUT = (128, 2048)    # ... and the rows they are checked on
BAND = 0.25               # |model / measured - 1| the held-out rows must stay within
# Not fitted yet: no scan record (python -m kernels.stream_k.scan on an sm_90 GPU writes the one fit() reads). Until
# then predict_us and choose need the constants handed to them; the split the launcher takes is best_splits's.
CONSTANTS: dict | None = None
NOT_FITTED = ("the day's model has no fitted constants yet: run `python -m kernels.stream_k.scan` on an sm_90 GPU "
              "(it writes scan.json and constants.json: model.fit on the FIT_ROWS rows) and pass constants=")


def stage_bytes(tile: str) -> int:
    bm, bn = TILE_SHAPES[tile]
    return (bm + bn) * BK * 2


def _terms(shape, tile: str, splits: int, sms: int, mhz: float = DATASHEET_MHZ) -> dict:
    """The model's features of one launch: waves, bytes an SM streams per unit, the tensor core's time per unit (us),
    whether there is a fix-up and the bytes its gather reads."""
    s = effective_splits(shape, splits, tile)
    bm, bn = TILE_SHAPES[tile]
    ctas = CTAS_PER_SM[tile]
    kt_unit = ceil_div(ktiles(shape), s)
    tc_ktile_us = 2 * bm * bn * BK / (TC_FLOP_PER_CLK_SM * mhz)  # FLOP / (FLOP per clock x clocks per us)
    return {"waves": ceil_div(tiles(shape, tile) * s, sms * ctas), "bytes": kt_unit * ctas * stage_bytes(tile),
            "tc_us": kt_unit * ctas * tc_ktile_us, "fixup": 1.0 if s > 1 else 0.0,
            "gather": (s - 1) * min(bm, shape[0]) * bn * 4.0}


def predict_us(shape, tile: str, splits: int, sms: int, constants: dict | None = None) -> float:
    """The model's time of gemm_split_k(a, b, splits, tile=tile) at `shape` on `sms` SMs, in microseconds."""
    c = constants or CONSTANTS
    if c is None:
        raise LookupError(NOT_FITTED)
    t = _terms(shape, tile, splits, sms)
    unit = max(t["bytes"] / c["BW_SM"], t["tc_us"]) + c["T_UNIT"]
    fix = t["fixup"] * (c["T_FIXUP"] + t["gather"] / c["BW_GATHER"])
    return t["waves"] * (unit + fix)


def choose(shape, sms: int, constants: dict | None = None) -> tuple[str, int]:
    """The (tile, splits) the model predicts fastest (ties: the fewer splits, then the tile named first)."""
    options = [(t, s) for t in TILE_SHAPES for s in candidates(shape)]
    return min(options, key=lambda o: (predict_us(shape, *o, sms, constants), o[1]))


def fit(rows: list[dict], sms: int) -> dict:
    """CONSTANTS fitted on `rows` ({"shape", "tile", "splits", "us"}): least squares on the relative error, each row
    in the regime (memory or tensor core) the current constants put it, repeated while the fit gets better, from a
    few first guesses of BW_SM (a row near the regimes' border can hold one start in a worse fit)."""
    best, best_err = None, math.inf
    for start in (20e3, 50e3, 100e3, 200e3, 500e3):  # where each row's regime is first guessed from (bytes / us)
        best, best_err = _refine({"BW_SM": start, "T_UNIT": 1.0, "T_FIXUP": 1.0, "BW_GATHER": 100e3}, rows, sms,
                                 best, best_err)
    return {k: float(v) for k, v in best.items()}


def _refine(c: dict, rows: list[dict], sms: int, best, best_err):
    """fit's iteration from constants `c`: (the best constants seen, their squared relative error)."""
    import numpy as np

    for _ in range(30):
        x, y, tc = [], [], []
        for r in rows:
            t = _terms(r["shape"], r["tile"], r["splits"], sms)
            mem = t["bytes"] / c["BW_SM"] >= t["tc_us"]
            # time = waves (bytes / BW | tc) + waves T_UNIT + waves fixup T_FIXUP + waves gather / BW_GATHER
            x.append([t["waves"] * t["bytes"] * mem, t["waves"], t["waves"] * t["fixup"],
                      t["waves"] * t["fixup"] * t["gather"]])
            tc.append(0.0 if mem else t["waves"] * t["tc_us"])
            y.append(r["us"])
        x, y, tc = np.array(x), np.array(y), np.array(tc)
        w = 1.0 / y  # relative error
        sol, *_ = np.linalg.lstsq(x * w[:, None], (y - tc) * w, rcond=None)
        sol = np.maximum(sol, 1e-9)
        c = {"BW_SM": 1.0 / sol[0], "T_UNIT": float(sol[1]), "T_FIXUP": float(sol[2]), "BW_GATHER": 1.0 / sol[3]}
        err = sum((predict_us(r["shape"], r["tile"], r["splits"], sms, c) / r["us"] - 1) ** 2 for r in rows)
        if err < best_err - 1e-15:  # the regimes moved to a better fit: go on from there
            best, best_err = dict(c), err
        else:
            break
    return best, best_err


def scan_rows(scan: list[dict], rows) -> list[dict]:
    """The rows of a scan record ({"shape", "res": {"<tile>/s<splits>": ms}}) whose M is in `rows`, in microseconds."""
    out = []
    for entry in scan:
        if entry["shape"][0] not in rows:
            continue
        for key, ms in entry["res"].items():
            tile, s = key.split("/s")
            out.append({"shape": tuple(entry["shape"]), "tile": tile, "splits": int(s), "us": ms * 1e3})
    return out
