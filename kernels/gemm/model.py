"""Week 2, day 4's model: a roofline with a pipeline inside — what bounds each rung of the GEMM ladder.

Every CTA computes (BM, BN) tiles of C, one k-tile (BK = 64) at a time. Per k-tile a CTA needs
    W     = 2 BM BN BK / (TC_EFF x PEAK / SMs)  the tensor core's time for the k-tile's MMAs, with
            PEAK  = TC_FLOP_PER_CLK_SM x SMs x f  the tensor cores' clock-adjusted peak at the SM clock f the run
                                             measured (physics: tensor_peak_tflops) and TC_EFF the fraction of it a
                                             mainloop sustains (fitted)
    bytes = (BM + BN / share) BK x 2         what the SM pulls from L2 (share = CTAs of a cluster that split one B
                                             tile by TMA multicast: rung 5 has share 2)
and, depending on the rung's structure, the per-CTA time of one k-tile is
    rung 2 (load, wait, multiply, wait):      T1 = L + W + B                    nothing overlaps
    rung 3 (S stages, one consumer,  wait 0): T1 = max(W + B, (L + W) / S)      loads overlap; the drain does not
    rung 4/5 (S stages, 2 consumers, wait 1): T1 = max(W, (L + W) / S)          the other warpgroup fills the drain
with L the TMA round trip of a k-tile's loads and B the bubble of a consumer that drains its wgmma groups
(wgmma.wait_group 0) and hands the stage back before it can issue the next k-tile. `a` CTAs resident on one SM
share its tensor core and its L2 bandwidth:
    t_sm(a) = max(a W, T1, a bytes / (L2 / SMs), DRAM)    per k-tile of all a CTAs (DRAM: below)
A non-persistent grid runs the busiest SM's ceil(tiles / SMs) CTAs in rounds of `ctas_per_sm` (each round
ktiles x t_sm(a) + E: the epilogue and the first fill); a persistent CTA runs its ceil(tiles / grid) tiles back to
back (ktiles x t_sm(1) + E each). Rung 1 has no tensor core: its time is FLOPs / FMA spread over its tiles.

DRAM (`wave_traffic`): the CTAs that run at the same time (a wave) share A and B panels through L2. A non-persistent
grid launches tiles a row of tile columns at a time, so a wave of P CTAs spans all N / BN columns and ~ P / columns
rows; a persistent grid walks GROUP_M tile rows per column sweep. With the wave's CTAs in step, each panel it touches
comes from DRAM once (all of A and B once, if they fit in L2); that traffic per k-tile over the DRAM of the same run
(its copy ceiling: `dram_tbps`, never a fixed constant — an H100's HBM3 and an H200's HBM3e differ) is one more term
of t_sm, and the compulsory bytes (A, B read once, C written once) / DRAM a floor under the whole run.
The CTAs per SM come from the kernel itself (kernels/gemm/occupancy.py).

Rung 6 (r6_store_warp.cu: rung 5's mainloop, the epilogue handed to a store stage) differs from rung 5 in one term:
its consumers only stage the tile in shared memory and go back to the mainloop, the TMA store's global writes run under
the next tile, so E is the staging alone (kernels.gemm.epilogue.rung6_gain: E per tile and the tensor core's busy share
of each, which ncu's tensor-pipe counter measures). Its rows are held out: that term has no constant of its own (the
staging is computed from the SM's shared-memory rate) and no rung-6 row was fitted.

"Tensor-bound" in this model means that the term a W binds: the tensor cores at TC_EFF of their clock-adjusted peak —
a physical rate (TC_FLOP_PER_CLK_SM dense bf16 FLOP per SM per clock, times the SMs, times the run's SM clock) times a
fitted fraction — never a rate some library reached in the same run (cuBLAS is a row like the others, below that
peak: tests/test_gemm.py; `tensor_fractions` prints each row's measured fraction of it).

Physics (FIT["constants"]):
    TC_FLOP_PER_CLK_SM  dense bf16 FLOP per SM per clock of Hopper's tensor cores (the datasheet's dense bf16 peak
                  over its SMs and the clock it assumes: sim.H100)
    sm_mhz        the run's SM clock: the mean over its record's rows of the clock sampled while each ran
                  (record_sm_mhz, kernels.clock); a record that sampled none (the H200's, taken before the benchmark
                  read the clock): the clock the datasheet's peak assumes (DATASHEET_MHZ)
Fitted (by `fit` on the FIT_ROWS of the run named in FIT, an H100's; HELD_OUT rows were not used and are checked
against +-10 % on every recorded GPU, each with its own run's copy ceiling and SM clock):
    TC_EFF        the fraction of the clock-adjusted tensor peak a wgmma mainloop sustains (W's rate over the peak)
    L2_TBPS       L2 -> SM bandwidth of TMA loads, all SMs together
    LATENCY_NS    round trip of one k-tile's TMA loads (32-48 KiB)
    BUBBLE_NS     a consumer's drain + hand-over per k-tile (wait_group 0, mbarrier arrive, next wait)
    EPILOGUE_NS   per tile: the accumulator stores and the first fill not hidden by anything
    FMA_TFLOPS    rung 1's sustained fp32 FMA rate (shared-memory operands)
    START_NS      once per launch: the launch, barrier set-up, the ring's first fill and the last CTA's tail (it
                  matters at 2048^3, where a whole GEMM takes ~ 30 us)

What the model leaves out (the held-out rows of the records show it; FIT["held_out_outside_band"] names them per GPU):
- Triton at 2048^3: its own epilogue (a TMA store) and scheduling, modelled as rung 4 with 3 stages (-12 % on the
  H100, -17 % on the H200);
- rung 3 (4 stages) at 2048^3: 256 tiles on 132 SMs, two rounds of one CTA per SM, each paying the whole epilogue
  and fill in the model; the GPU ran faster than that serial sum (-14 % on the H100, -17 % on the H200);
- rungs 4 and 5 at the skinny shape (32 tiles on 132 SMs: one tile per CTA, nothing to overlap the fill with; rung
  3 with six stages there too, on the H200);
- whether the CTAs of a non-persistent grid stay in step: rung 3 at one CTA per SM streams all of B from DRAM every
  wave (~ 75 % of an H100's copy ceiling at 4 stages); CTAs that drift apart read B twice. Six stages at 8192^3 ran at
  that floor on the H100 (+33 % miss, KNOWN_MISSES; kernels.gemm.story.stage_depth_story tells it from a record, with
  the DRAM bytes ncu measured where kernels/gemm/counters_<gpu>.json exists);
- the SM clock row by row: the tensor term takes the run's mean clock, but each row ran at its own (the record's
  sm_mhz: the tensor-heavy rows at 8192^3 lower than the light ones); the FMA rung's rate follows the clock too (its
  2048^3 row moved by ~ 20 % between a cool and a warm GPU), and the tensor cores' clock depends on the data they
  multiply (the benchmark's data-effect rows measure it).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace
from functools import lru_cache

from ..held_out import HeldOut
from ..sim import H100
from .occupancy import SMEM_PER_SM, SMEM_RESERVED, _staging_ns, resident_ctas, sass_registers, static_smem
from .fitted import CONSTANTS, FIT, FIT_ROWS, HELD_OUT, HELD_OUT_BAND, KNOWN_MISSES, RUNG6_HELD_OUT

__all__ = ["Config", "Prediction", "CONSTANTS", "FIT", "FIT_ROWS", "HELD_OUT", "HELD_OUT_BAND", "KNOWN_MISSES",
           "configs_for", "predict_config", "predict", "fit", "HELD_OUT_CHECK", "main_row", "explain", "bound_table",
           "wave_traffic", "held_out_report", "ktile_times", "store_warp_config", "RUNG6_HELD_OUT",
           "TC_FLOP_PER_CLK_SM", "DATASHEET_MHZ", "SM_MHZ", "tensor_peak_tflops", "tensor_rate", "record_sm_mhz",
           "run_sm_mhz", "tensor_fractions", "tensor_fraction_lines"]

SMS = H100.sm_count
BK = 64
L2_BYTES = H100.l2_bytes
GROUP_M = 8              # r4_persistent.cu and triton_matmul.py: tile rows per scheduling group
# Dense bf16 FLOP per SM per clock of Hopper's tensor cores: the datasheet's dense peak over its SMs at the clock it
# assumes (sim.H100: bf16_dense_tflops, sm_count, clock_ghz; tests/test_gemm.py computes it) = 4 tensor cores x 512
# FMA x 2 (Hopper whitepaper).
TC_FLOP_PER_CLK_SM = 4096
DATASHEET_MHZ = H100.clock_ghz * 1e3  # the clock the datasheet's peak assumes: for a record that sampled none

DRAM_TBPS = FIT["copy_tbps"]  # the DRAM of the fit run (its copy ceiling); a prediction for another run passes its own
SM_MHZ = FIT["sm_mhz"]  # the fit run's mean SM clock (record_sm_mhz); a prediction for another run passes its own


@dataclass(frozen=True)
class Config:
    rung: str                 # tiled | wgmma | pipelined | persistent | cluster | triton
    shape: tuple              # (M, N, K)
    tile: tuple               # (BM, BN)
    stages: int = 1
    consumers: int = 1        # consumer warpgroups per CTA
    ctas_per_sm: int = 1      # resident CTAs per SM (registers, shared memory, threads)
    persistent: bool = False
    share: int = 1            # CTAs that split one B tile (multicast)
    structure: str = "serial"  # serial (rung 2) | drain (rung 3: wait 0) | overlap (rungs 4-5: 2 consumers, wait 1)
    fma: bool = False         # rung 1
    epilogue: str = "stores"  # stores (rungs 1-5: plain STG of the accumulator) | tma (the exercise and rung 6:
                              # staged in shared memory, TMA store overlapped with the next tile)
    group_m: int | None = None  # tile rows per scheduling group of a persistent grid (None: GROUP_M x share)


@dataclass(frozen=True)
class Prediction:
    tflops: float
    bound: str
    ms: float


def configs_for(shape, stages: int | None = None) -> dict[str, Config]:
    """The model's view of every rung this copy of the course holds (launch.py's CONFIG and RUNGS, the cubins'
    registers) at one shape."""
    return dict(_configs_for(tuple(int(x) for x in shape), stages))


@lru_cache(maxsize=None)
def _configs_for(shape: tuple, stages: int | None) -> dict[str, Config]:
    from .launch import CONFIG, KERNELS, RUNGS, cubin, smem_bytes

    out = {}
    for v, cfg in CONFIG.items():
        if v not in RUNGS:  # rung 6 in a student release: its source is instructor-only
            continue
        if v == "store_warp":
            out[v] = store_warp_config(shape)
            continue
        st = stages if (stages and v == "pipelined") else cfg["stages"]
        cub = cubin(v, st) if (stages and v == "pipelined") else cubin(v)
        regs = sass_registers(cub, KERNELS[v])
        c = resident_ctas(cfg["block"], regs, smem_bytes(v, st) + static_smem(cub, KERNELS[v]))
        structure = {"tiled": "serial", "wgmma": "serial", "pipelined": "drain"}.get(v, "overlap")
        out[v] = Config(v, tuple(shape), cfg["tile"], st, 2 if v in ("persistent", "cluster") else 1, c,
                        v in ("persistent", "cluster"), cfg["cluster"], structure, v == "tiled")
    # Triton's persistent TMA matmul: (128, 256) tiles, 3 stages, 8 warps (two warpgroups issue wgmma), one
    # program per SM; modelled as rung 4 with its ring depth.
    out["triton"] = replace(out["persistent"], rung="triton", stages=3)
    # The exercise's kernel (gemm_epilogue's given mainloop): rung 4's tile, roles and grid (no cluster); its consumers wait for each
    # group (wait 0) before the release, but two consumers hide each other's drain: the "overlap" structure.
    out["exercise"] = replace(out["persistent"], rung="exercise", stages=stages or 4, epilogue="tma")
    return out


def store_warp_config(shape, tune: dict | None = None) -> Config:
    """Rung 6 (r6_store_warp.cu) with its switches (launch.TUNE): rung 5's mainloop ("overlap": two consumers,
    wait_group 1; persistent; B shared by `cluster` CTAs) with the exercise's epilogue term ("tma"). Why it gains
    on rung 5: rung 5's consumers store C with plain STG while the tensor core idles, EPILOGUE_NS per tile (fitted,
    ~ 6 us on the H100); rung 6's consumers only write the tile into shared memory (stmatrix, conflict-free) and
    hand it over — the TMA store's global writes run under the next tile's mainloop — so E is the staging alone
    (_staging_ns: C's bytes written and read back at the SM's shared-memory rate, ~ 0.6 us). Left out, as for the
    exercise: a consumer that waits for a slot (2 slots for 4 pieces: pieces 2 and 3 wait for the reads of 0 and 1)
    and C's bytes on their way to L2 under the mainloop. The balanced grid changes no busiest CTA: the model's
    per-CTA tile count ceil(tiles / grid) is the same for it and for one CTA per SM. Where the source is absent (a
    student release: launch.RUNGS has no rung 6) the CTAs per SM come from the dynamic shared memory alone — more
    than half an SM's at every setting TUNE allows, so one CTA, as the registers would give — and the model's figures
    for it, which read no other property of the kernel, stay the same."""
    from .launch import CONFIG, KERNELS, RUNGS, cubin, smem_bytes, tuned

    t = tuned(tune)
    if "store_warp" in RUNGS:
        cub = cubin("store_warp", tune=tune)
        regs = sass_registers(cub, KERNELS["store_warp"])
        c = resident_ctas(CONFIG["store_warp"]["block"], regs,
                          smem_bytes("store_warp", tune=tune) + static_smem(cub, KERNELS["store_warp"]))
    else:
        c = max(1, SMEM_PER_SM // (smem_bytes("store_warp", tune=tune) + SMEM_RESERVED))
    return Config("store_warp", tuple(int(x) for x in shape), CONFIG["store_warp"]["tile"], t["stages"], 2, c, True,
                  t["cluster"], "overlap", False, "tma", t["group_m"])


def _c(kw: dict, name: str) -> float:
    return float(kw.get(name, CONSTANTS[name]))


def tensor_peak_tflops(sm_mhz: float | None = None) -> float:
    """The tensor cores' clock-adjusted dense bf16 peak, TFLOPS: TC_FLOP_PER_CLK_SM x SMS x the SM clock (MHz;
    default SM_MHZ, the fit run's mean). Physics times a measured clock: no fitted or library-measured figure."""
    return TC_FLOP_PER_CLK_SM * SMS * float(sm_mhz or SM_MHZ) * 1e6 / 1e12


def tensor_rate(sm_mhz: float | None = None, **constants) -> float:
    """The rate W is charged at, TFLOPS: TC_EFF (fitted) x the clock-adjusted peak at `sm_mhz`."""
    return _c(constants, "TC_EFF") * tensor_peak_tflops(sm_mhz)


def record_sm_mhz(record: dict) -> float | None:
    """The mean SM clock (MHz) over a record's model rows (main_row) that sampled one; None if none did (records
    taken before the benchmark sampled the clock)."""
    xs = [r["sm_mhz"] for r in record["rows"] if main_row(r) and r.get("sm_mhz")]
    return sum(xs) / len(xs) if xs else None


def run_sm_mhz(record: dict) -> float:
    """The clock a row of `record` without a sample of its own is predicted at: the record's mean, else the
    datasheet's (DATASHEET_MHZ)."""
    return record_sm_mhz(record) or DATASHEET_MHZ


def ktile_times(tile, share: int = 1, sm_mhz: float | None = None, **constants) -> dict:
    """The per-k-tile terms predict_config builds its t1 from, in ns, for a (BM, BN) tile of C and one k-tile
    (BK = 64): W = 2 BM BN BK / (TC_EFF x PEAK / SMs) (the tensor core's time; PEAK the clock-adjusted peak at
    `sm_mhz`, default SM_MHZ: tensor_peak_tflops), B = BUBBLE_NS (a consumer's drain and
    hand-over), L = LATENCY_NS (the k-tile's TMA round trip), and the L2 time of its (BM + BN / share) BK 2 bytes at
    one SM's share of L2_TBPS. For the pictures (kernels/gemm/pictures.py); tests/test_gemm.py holds predict_config
    to the same W and B."""
    bm, bn = tile
    peak_sm = tensor_rate(sm_mhz, **constants) * 1e12 / SMS
    l2_sm = _c(constants, "L2_TBPS") * 1e12 / SMS
    return {"W": 2.0 * bm * bn * BK / peak_sm * 1e9, "B": _c(constants, "BUBBLE_NS"), "L": _c(constants, "LATENCY_NS"),
            "l2": (bm + bn / share) * BK * 2 / l2_sm * 1e9}


def wave_traffic(cfg: Config, b_reuse: bool = True) -> dict:
    """What one wave of co-resident CTAs pulls, with the CTAs of the wave in step (each A and B panel that several
    of them need read once from DRAM, then served from L2); `b_reuse=False`: every CTA reads its own B panel from
    DRAM (the CTAs that share a B panel out of step — see `stage_depth_story`).

    Non-persistent grids launch tiles x-fastest (a row of N / BN tile columns, then the next row): a wave of P CTAs
    spans all tile columns and ~ P / columns + 1 tile rows. Persistent grids walk GROUP_M tile rows (pairs in rung 5)
    per column sweep: a wave spans GROUP_M (x share) rows and P / rows columns. An operand pair that fits in L2 is read
    from DRAM once for the whole product (the compulsory bytes)."""
    m, n, k = cfg.shape
    bm, bn = cfg.tile
    tm, tn = math.ceil(m / bm), math.ceil(n / bn)
    tiles = tm * tn
    a_panel, b_panel = bm * k * 2.0, bn * k * 2.0
    if cfg.persistent:
        p = min(tiles if cfg.share == 1 else math.ceil(tiles / cfg.share) * cfg.share, SMS)
        rows = min(tm, cfg.group_m or GROUP_M * cfg.share, p)
        cols = min(tn, max(1.0, p / rows))
    else:
        p = min(tiles, SMS * max(1, cfg.ctas_per_sm))
        cols = min(tn, p)
        rows = tm if p >= tiles else min(tm, 1 + (p - 1) / tn)
    l2 = p * (bm + bn / cfg.share) * k * 2.0
    if 2.0 * (m * k + n * k) <= L2_BYTES:
        dram = 2.0 * (m * k + n * k) * p / tiles
    else:
        dram = rows * a_panel + (cols if b_reuse else p) * b_panel
    return {"ctas": p, "tile_rows": rows, "tile_cols": cols, "l2_bytes": l2, "dram_bytes": dram + p * bm * bn * 2.0,
            "dram_share": min(1.0, dram / l2)}


def predict_config(cfg: Config, dram_tbps: float | None = None, sm_mhz: float | None = None,
                   **constants) -> Prediction:
    """The model's TFLOPS for `cfg` on a GPU whose DRAM delivers `dram_tbps` (the copy ceiling of the same run;
    default DRAM_TBPS, the fit run's)."""
    m, n, k = cfg.shape
    flops = 2.0 * m * n * k
    bm, bn = cfg.tile
    tiles = math.ceil(m / bm) * math.ceil(n / bn)
    dram = float(dram_tbps or DRAM_TBPS) * 1e12
    dram_s = 2.0 * (m * k + n * k + m * n) / dram
    if cfg.fma:
        per_sm = math.ceil(tiles / SMS)
        t = per_sm * (2.0 * bm * bn * k) / (_c(constants, "FMA_TFLOPS") * 1e12 / SMS) + _c(constants, "START_NS") * 1e-9
        return Prediction(flops / t / 1e12, "fma", t * 1e3)
    peak_sm = tensor_rate(sm_mhz, **constants) * 1e12 / SMS
    l2_sm = _c(constants, "L2_TBPS") * 1e12 / SMS
    lat, bub, epi = (_c(constants, x) * 1e-9 for x in ("LATENCY_NS", "BUBBLE_NS", "EPILOGUE_NS"))
    if cfg.epilogue == "tma":  # the stores overlap the next tile: only the staging is the consumers' (STAGING_NS:
        epi = constants.get("STAGING_NS", _staging_ns(cfg.tile)) * 1e-9  # a layout's own, epilogue_choices)
    w = 2.0 * bm * bn * BK / peak_sm
    nbytes = (bm + bn / cfg.share) * BK * 2
    ktiles = math.ceil(k / BK)
    wave = wave_traffic(cfg)
    dram_ktile = wave["dram_bytes"] / ktiles  # the wave's DRAM bytes per k-tile, its CTAs in step
    c = 1 if cfg.persistent else max(1, cfg.ctas_per_sm)
    s = max(1, cfg.stages)
    if cfg.structure == "serial":
        t1 = lat + w + bub
    elif cfg.structure == "drain":
        t1 = max(w + bub, (lat + w) / s)
    else:
        t1 = max(w, (lat + w) / s)

    def t_sm(a: int) -> tuple[float, str]:
        terms = {"tensor": a * w, "latency" if cfg.structure != "drain" or (lat + w) / s > w + bub else "drain": t1,
                 "l2": a * nbytes / l2_sm, "dram": dram_ktile * a / c / dram}
        name = max(terms, key=terms.get)
        return terms[name], name

    if cfg.persistent:
        grid_ctas = min(tiles if cfg.share == 1 else math.ceil(tiles / cfg.share) * cfg.share, SMS)
        per_cta = math.ceil(tiles / grid_ctas)
        tk, bound = t_sm(1)
        t = per_cta * (ktiles * tk + epi)
    else:
        per_sm = math.ceil(tiles / SMS)
        t, bound = 0.0, "tensor"
        left = per_sm
        while left > 0:
            a = min(c, left)
            tk, b = t_sm(a)
            if a == c:
                bound = b
            t += ktiles * tk + epi
            left -= a
    t += _c(constants, "START_NS") * 1e-9
    if dram_s > t:
        return Prediction(flops / dram_s / 1e12, "dram", dram_s * 1e3)
    return Prediction(flops / t / 1e12, bound, t * 1e3)


def _row_config(r: dict, cfgs_cache: dict) -> Config | None:
    name = r.get("config_name") or r["kernel"]
    shape = tuple(int(x) for x in r["shape"].split("x"))
    parts = name.split()
    rung = parts[0]
    stages = int(parts[1][1:]) if len(parts) > 1 and re.fullmatch(r"s\d+", parts[1]) else None
    key = (shape, stages)
    if key not in cfgs_cache:
        cfgs_cache[key] = configs_for(shape, stages)
    if rung == "store_warp" and stages is None:  # also where its source is absent (store_warp_config)
        return store_warp_config(shape)
    return cfgs_cache[key].get(rung)


def predict(rows, dram_tbps: float | None = None, sm_mhz: float | None = None, **constants) -> list[float | None]:
    cache: dict = {}
    out = []
    for r in rows:
        cfg = _row_config(r, cache)
        out.append(None if cfg is None else predict_config(cfg, dram_tbps, sm_mhz, **constants).tflops)
    return out


def _name(r: dict) -> str:
    return f"{r.get('config_name') or r['kernel']} {r['shape']}"


def _errors(rows, names, consts, dram_tbps=None, sm_mhz=None) -> list[float]:
    sel = [r for r in rows if _name(r) in names and r.get("tflops")]
    preds = predict(sel, dram_tbps, sm_mhz, **consts)
    return [p / r["tflops"] - 1 for p, r in zip(preds, sel) if p is not None]


def fit(rows, ceiling=None, names=FIT_ROWS, iters: int = 400, sm_mhz: float | None = None) -> dict:
    """Refit the constants to the named rows (minimise the squared log error; Nelder-Mead on log constants, started
    from CONSTANTS), with the DRAM of the rows' run at `ceiling` (its copy ceiling, TB/s; default DRAM_TBPS) and each
    row's tensor peak at its own SM clock, `sm_mhz` (the run's mean: run_sm_mhz) where it sampled none. Every constant
    of CONSTANTS is fitted, TC_EFF among them: the tensor peak it scales is physics (tensor_peak_tflops), no rate
    measured in the run."""
    keys = list(CONSTANTS)
    x0 = [math.log(CONSTANTS[k]) for k in keys]
    sel = [r for r in rows if _name(r) in names and r.get("tflops")]
    if not sel:
        return {"error": "none of the fit rows was measured"}

    def unpack(x):
        return {k: math.exp(v) for k, v in zip(keys, x)}

    def loss(x):
        consts = unpack(x)
        preds = predict(sel, ceiling, sm_mhz, **consts)
        return sum(math.log(p / r["tflops"]) ** 2 for p, r in zip(preds, sel) if p)

    pts = [x0] + [[v + (0.3 if i == j else 0) for j, v in enumerate(x0)] for i in range(len(x0))]
    vals = [loss(p) for p in pts]
    for _ in range(iters):
        order = sorted(range(len(pts)), key=lambda i: vals[i])
        pts, vals = [pts[i] for i in order], [vals[i] for i in order]
        cen = [sum(p[j] for p in pts[:-1]) / (len(pts) - 1) for j in range(len(x0))]
        refl = [c + (c - w) for c, w in zip(cen, pts[-1])]
        fr = loss(refl)
        if fr < vals[0]:
            exp = [c + 2 * (c - w) for c, w in zip(cen, pts[-1])]
            fe = loss(exp)
            pts[-1], vals[-1] = (exp, fe) if fe < fr else (refl, fr)
        elif fr < vals[-2]:
            pts[-1], vals[-1] = refl, fr
        else:
            con = [c + 0.5 * (w - c) for c, w in zip(cen, pts[-1])]
            fc = loss(con)
            if fc < vals[-1]:
                pts[-1], vals[-1] = con, fc
            else:
                pts = [pts[0]] + [[b + 0.5 * (p - b) for p, b in zip(pt, pts[0])] for pt in pts[1:]]
                vals = [vals[0]] + [loss(p) for p in pts[1:]]
    best = pts[min(range(len(pts)), key=lambda i: vals[i])]
    consts = {k: round(v, 4 if k == "TC_EFF" else 1) for k, v in unpack(best).items()}
    errs = _errors(rows, names, consts, ceiling, sm_mhz)
    return {**consts, "rows": len(sel), "band": max(abs(e) for e in errs) if errs else None}


def main_row(r: dict) -> bool:
    """A row the model reads: timed on the exercise's data (rows of records that carry no `data` key were all timed on
    one distribution), the data-effect lesson's rows left out."""
    return not r.get("lesson") and r.get("data", "exercise") == "exercise"


def _predict_row(row: dict, record: dict, constants: dict | None = None) -> float | None:
    """TFLOPS of a record's row with the DRAM of that record's run (its copy ceiling) and the row's SM clock (else
    the run's: run_sm_mhz), with the named constants or a refit's (fit())."""
    consts = {**CONSTANTS, **{k: v for k, v in (constants or {}).items() if k in CONSTANTS}}
    return predict([row], record["ceilings"]["copy_tbps"], run_sm_mhz(record), **consts)[0]


def _refit(record: dict) -> dict:
    """fit() on a record's own rows, its run's DRAM and SM clocks (run_sm_mhz where a row sampled none)."""
    return fit([r for r in record["rows"] if main_row(r)], record["ceilings"]["copy_tbps"],
               sm_mhz=run_sm_mhz(record))


# The held-out check (kernels.held_out.HeldOut): each record's held-out rows with its own run's DRAM; the one row
# outside the hard band carries its explanation (KNOWN_MISSES: stage_depth_story).
HELD_OUT_CHECK = HeldOut(FIT, FIT_ROWS, HELD_OUT, band=HELD_OUT_BAND, predict=_predict_row, unit="TFLOPS",
                         refit=_refit, constants=CONSTANTS, select=main_row, name=_name, width=34, fmt="6.1f",
                         known={k: "model.KNOWN_MISSES: stage_depth_story" for k in KNOWN_MISSES})
held_out_report = HELD_OUT_CHECK.report


def tensor_fractions(record: dict, shape: str = "8192x8192x8192") -> list[dict]:
    """Each model row of `record` at `shape` (main_row, measured) against the tensor cores' clock-adjusted peak:
    {"name", "tflops", "sm_mhz", "clock" ("row": sampled while it ran; "run": the record's mean; "datasheet": a record
    that sampled none), "peak" (tensor_peak_tflops at that clock), "fraction" (tflops / peak)}. cuBLAS is one of the
    rows: a library's rate is measured against the peak, never taken for it."""
    run = record_sm_mhz(record)
    out = []
    for r in record["rows"]:
        if not (main_row(r) and r.get("tflops") and r["shape"] == shape):
            continue
        mhz, clock = (r["sm_mhz"], "row") if r.get("sm_mhz") else (run, "run") if run else (DATASHEET_MHZ, "datasheet")
        peak = tensor_peak_tflops(mhz)
        out.append({"name": _name(r), "tflops": r["tflops"], "sm_mhz": mhz, "clock": clock, "peak": peak,
                    "fraction": r["tflops"] / peak})
    return out


def tensor_fraction_lines(record: dict | None, shape: str = "8192x8192x8192") -> str:
    """tensor_fractions as the notebook prints it: the peak's physics, the model's TC_EFF and its rate at the run's
    clock, then each row's measured fraction of the peak at its clock."""
    if not record:
        return "no record: nothing measured to set against the tensor peak"
    mhz, sampled = run_sm_mhz(record), record_sm_mhz(record) is not None
    lines = [f"tensor cores' clock-adjusted peak = {TC_FLOP_PER_CLK_SM} dense bf16 FLOP per SM per clock x {SMS} SMs "
             f"x the SM clock; on {record['device']} ({record['date']}) at "
             + (f"the run's mean SM clock, {mhz:.0f} MHz" if sampled else
                f"the datasheet's clock, {mhz:.0f} MHz (the record sampled none)")
             + f": {tensor_peak_tflops(mhz):.1f} TFLOPS; the model's tensor term, TC_EFF = {CONSTANTS['TC_EFF']:g} "
             f"of it (fitted): {tensor_rate(mhz):.1f} TFLOPS",
             f"each row at {shape} against that peak at its own clock (row: sampled while it ran; run: the record's "
             "mean; datasheet: none sampled):"]
    for f in tensor_fractions(record, shape):
        lines.append(f"  {f['name']:<34} {f['tflops']:6.1f} TFLOPS at {f['sm_mhz']:4.0f} MHz ({f['clock']:<9}) = "
                     f"{f['fraction']:.3f} x {f['peak']:.1f}")
    return "\n".join(lines)


def bound_table(shape=(8192, 8192, 8192)) -> list[dict]:
    """What bounds each rung at `shape` in the model: predicted TFLOPS and the binding term (CPU only)."""
    out = []
    for name, cfg in configs_for(shape).items():
        p = predict_config(cfg)
        out.append({"rung": name, "tile": cfg.tile, "stages": cfg.stages, "ctas_per_sm": cfg.ctas_per_sm,
                    "predicted_tflops": round(p.tflops, 1), "bound": p.bound})
    return out


def explain() -> str:
    return __doc__
