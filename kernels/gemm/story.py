"""Week 2, day 4: rung 3's ring depths told from the kernel and a record (`stage_depth_story`): shared memory and
registers per CTA at each depth, the CTAs per SM that leaves, which depth ran fastest and why, and the DRAM bytes ncu
measured (kernels/gemm/counters_<gpu>.json) beside the model's wave picture with and without B reuse."""

from __future__ import annotations

import json
import math
from pathlib import Path

from ..record import device_tag
from .model import DRAM_TBPS, L2_BYTES, Config, configs_for, predict_config, wave_traffic
from .occupancy import REGS_PER_SM, SMEM_PER_BLOCK, SMEM_PER_SM, ring_occupancy


def b_reuse_distance(cfg: Config) -> float:
    """Bytes L2 must hold between the two reads of a B panel by the CTAs that share it, if a non-persistent grid's
    CTAs run out of step (each starting when the CTA `P` launches before it retires, spread evenly over a CTA's
    life): the second reader of panel x (tile row + 1, `columns` launches later) runs columns / P of a lifetime
    behind, while the wave streams every B panel once per lifetime."""
    w = wave_traffic(cfg)
    m, n, k = cfg.shape
    cols = math.ceil(n / cfg.tile[1])
    return cols * cfg.tile[1] * k * 2.0 * min(1.0, cols / w["ctas"])


def no_reuse_floor(cfg: Config, dram_tbps: float | None = None) -> float:
    """TFLOPS at which reading every CTA's B panel from DRAM (no L2 reuse of B between the CTAs that share it) takes
    all of the DRAM's time: flops / (waves x the wave's DRAM bytes without B reuse / DRAM)."""
    m, n, k = cfg.shape
    w = wave_traffic(cfg, b_reuse=False)
    tiles = math.ceil(m / cfg.tile[0]) * math.ceil(n / cfg.tile[1])
    t = tiles / w["ctas"] * w["dram_bytes"] / (float(dram_tbps or DRAM_TBPS) * 1e12)
    return 2.0 * m * n * k / t / 1e12


def dram_read_bytes(cfg: Config, b_reuse: bool = True) -> float:
    """Bytes the whole run reads from DRAM in the model's wave picture (wave_traffic without the C stores, times the
    waves): with the CTAs that share a B panel in step, or (`b_reuse=False`) every CTA reading its own B panel."""
    m, n, _ = cfg.shape
    w = wave_traffic(cfg, b_reuse)
    tiles = math.ceil(m / cfg.tile[0]) * math.ceil(n / cfg.tile[1])
    return tiles / w["ctas"] * (w["dram_bytes"] - w["ctas"] * cfg.tile[0] * cfg.tile[1] * 2.0)


def measured_dram(record: dict | None) -> dict | None:
    """{stages: DRAM bytes read} that ncu measured for rung 3 at 8192^3 on the record's GPU
    (kernels/gemm/counters_<gpu>.json, <gpu> = kernels.record.device_tag of the record's device), or None where no
    such file exists."""
    if not record:
        return None
    f = Path(__file__).with_name(f"counters_{device_tag(record.get('device'))}.json")
    if not f.exists():
        return None
    doc = json.loads(f.read_text())
    return {int(st): v["dram_read_gb"] * 1e9 for st, v in doc.get("stages", {}).items()
            if v.get("dram_read_gb") is not None}


def measured_tensor_pipe(record: dict | None) -> dict | None:
    """The tensor pipe's active share that ncu measured for rungs 5 and 6 at 8192^3 on the record's GPU
    (kernels/gemm/counters_<gpu>.json "tensor_pipe", written by `make gpu-test`): {"device", "driver", "date",
    "metric", "variants": {variant: {"pct", "ms"}}}, or None where the file or the entry does not exist."""
    if not record:
        return None
    f = Path(__file__).with_name(f"counters_{device_tag(record.get('device'))}.json")
    tp = json.loads(f.read_text()).get("tensor_pipe") if f.exists() else None
    if not tp:
        return None
    var = {v: {"pct": m["pct"], "ms": m.get("ms")} for v, m in tp.get("variants", {}).items() if "pct" in m}
    if not var:
        return None
    metric = next(m["metric"] for m in tp["variants"].values() if "pct" in m)
    return {"device": tp.get("device"), "driver": tp.get("driver"), "date": tp.get("date"), "metric": metric,
            "variants": var}


def _occupancy_lines(occ: list[dict]) -> list[str]:
    """The kernel side of the story: shared memory and registers per CTA at each depth, and from which depth on one
    CTA per SM is left."""
    st_bytes = occ[0]["stage_bytes"]
    lines = [f"Rung 3 (r3_pipelined.cu): a stage is one k-tile of A and B, 2 x (128 x 64) bf16 = {st_bytes // 1024} "
             f"KiB; {occ[0]['block']} threads x {occ[0]['registers']} registers. An SM has "
             f"{SMEM_PER_SM // 1024} KiB of shared memory ({SMEM_PER_BLOCK // 1024} KiB per block) and "
             f"{REGS_PER_SM // 1024}K registers:",
             f"  {'stages':>6} {'smem per CTA':>13} {'CTAs/SM by smem':>16} {'by registers':>13} {'resident':>9}"]
    for o in occ:
        lines.append(f"  {o['stages']:>6} {o['smem']['total'] / 1024:>9.1f} KiB {o['by_smem']:>16} {o['by_regs']:>13}"
                     f" {o['resident']:>9}")
    lines.append("  (smem per CTA = dynamic stages x 32 KiB + 1 KiB alignment slack, + the cubin's static bytes "
                 "(mbarriers), + 1 KiB reserved per block)")
    one = [o["stages"] for o in occ if o["resident"] == 1]
    two = [o["stages"] for o in occ if o["resident"] >= 2]
    lines.append(f"Up to {max(two)} stages two CTAs fit (the registers allow no more than two): while one CTA's "
                 "consumer drains its wgmma group and hands the stage back, the other's keeps the tensor core busy. "
                 f"From {min(one)} stages on one CTA is left, and its drain is exposed on every k-tile: "
                 f"{min(one)} and {max(one)} stages are the same SM to the model (same occupancy, same drain).")
    return lines


def _measured_tflops(record: dict, name: str) -> dict:
    """{stages: TFLOPS} of the record's rung 3 exercise rows at shape `name` (no stages given: 4)."""
    tf = {}
    for r in record["rows"]:
        if r.get("variant") == "pipelined" and r["shape"] == name and r.get("tflops") \
                and r.get("data", "exercise") == "exercise" and not r.get("lesson"):
            tf[r.get("stages") or 4] = r["tflops"]
    return tf


def _deep_ring_lines(record: dict, shape, tf: dict, pred: dict, cfgs: dict, deep: list, dram: float) -> list[str]:
    """Why the shallowest and the deepest one-CTA depths part or not: DRAM with and without B reuse, and whether the
    deeper ring landed near the no-reuse floor (a named miss) or stayed with the model."""
    lines = []
    a, b = deep[0], deep[-1]
    c = cfgs[a]
    w = wave_traffic(c)
    floor = no_reuse_floor(c, dram)
    t_in_step = w["dram_bytes"] * (math.ceil(shape[0] / c.tile[0]) * math.ceil(shape[1] / c.tile[1])) \
        / w["ctas"] / (2.0 * shape[0] * shape[1] * shape[2] / (tf[a] * 1e12))
    lines.append(
        f"{a} and {b} stages, one CTA per SM each: {tf[a]:.1f} and {tf[b]:.1f} TFLOPS ({tf[b] / tf[a] - 1:+.0%}). "
        f"What can part them is DRAM: a wave of {w['ctas']} CTAs is {w['ctas'] / w['tile_cols']:.1f} tile rows "
        f"deep "
        f"across all {w['tile_cols']:.0f} tile columns, so it streams all of B "
        f"({w['tile_cols'] * c.tile[1] * shape[2] * 2 / 2**20:.0f} MiB, more than the {L2_BYTES / 2**20:.0f} MiB "
        f"L2) from DRAM once per wave — with the CTAs that share a B panel in step (the model's DRAM term): "
        f"{t_in_step / 1e12:.2f} TB/s at {a} stages' rate, {t_in_step / 1e12 / dram:.0%} of this run's copy "
        f"ceiling. If those CTAs drift apart, L2 must hold B for {b_reuse_distance(c) / 2**20:.0f} MiB of "
        f"other traffic between the two reads and cannot: B comes from DRAM twice, and the floor is "
        f"{floor:.0f} TFLOPS here. {b} stages measured {tf[b]:.1f} ({tf[b] / floor - 1:.0%} above that floor), "
        f"{a} stages {tf[a]:.1f} ({tf[a] / floor - 1:.0%} above it).")
    if tf[b] < 0.9 * pred[b]:
        lines.append(f"On this GPU ({device_tag(record['device'])}) the deeper ring landed near the no-reuse "
                     f"floor and the model misses it by {pred[b] / tf[b] - 1:+.0%} (a named miss: "
                     "model.KNOWN_MISSES); the model does not say which state a run falls into. A deeper ring "
                     "is not free: beyond the depth that hides the round trip it buys nothing and costs CTAs.")
    else:
        lines.append(f"On this GPU ({device_tag(record['device'])}) the two stayed within "
                     f"{abs(tf[b] / tf[a] - 1):.0%} of each other and within {abs(pred[b] / tf[b] - 1):.0%} of "
                     f"the model; its DRAM is fast enough that the no-reuse floor ({floor:.0f}) sits close to "
                     "the drain bound, so the two states are hard to tell apart here.")
    return lines


def _measured_depth_lines(record: dict, shape, name: str, tf: dict, one: list) -> list[str]:
    """The record's TFLOPS per depth against the model, the fastest depth, and the one-CTA depths compared."""
    dram = record["ceilings"]["copy_tbps"]
    cfgs = {st: configs_for(shape, st)["pipelined"] for st in tf}
    pred = {st: predict_config(c, dram).tflops for st, c in cfgs.items()}
    gpu = f"{record['device']} ({record['date']}, copy ceiling {dram:.2f} TB/s)"
    lines = [f"Measured at {name} on {gpu}, TFLOPS (model):  " +
             "  ".join(f"{st} stage{'s' * (st > 1)} {tf[st]:.1f} ({pred[st]:.0f})" for st in sorted(tf))]
    best = max(tf, key=tf.get)
    lines.append(f"Fastest: {best} stages ({tf[best] / tf[min(tf)]:.2f}x one stage).")
    deep = sorted(st for st in tf if st in one)
    if len(deep) >= 2:
        lines.extend(_deep_ring_lines(record, shape, tf, pred, cfgs, deep, dram))
    return lines


def _dram_counter_lines(record: dict, shape, name: str, one: list) -> list[str]:
    """The DRAM bytes ncu measured per depth against the model's wave with and without B reuse (none without a
    counters file)."""
    lines = []
    dram_meas = measured_dram(record)
    if dram_meas:
        c4 = configs_for(shape, 4)["pipelined"]
        in_step, no_reuse = dram_read_bytes(c4), dram_read_bytes(c4, b_reuse=False)
        lines.append(f"DRAM bytes read, measured by ncu (kernels/gemm/counters_{device_tag(record['device'])}.json), "
                     "rung 3 at " + name + ": " + ", ".join(f"{st} stage{'s' * (st > 1)} {dram_meas[st] / 1e9:.2f} GB"
                                                            for st in sorted(dram_meas)) +
                     f". The model's wave, one CTA per SM: {in_step / 1e9:.2f} GB with the CTAs that share a B panel "
                     f"in step, {no_reuse / 1e9:.2f} GB with every CTA reading its own B panel.")
        deep_m = sorted(st for st in dram_meas if st in one)
        if len(deep_m) >= 2:
            a, b = deep_m[0], deep_m[-1]
            lines.append(f"{a} stages read {dram_meas[a] / in_step:.2f}x the in-step bytes; {b} stages read "
                         f"{dram_meas[b] / dram_meas[a]:.2f}x what {a} stages read, "
                         f"{(dram_meas[b] - in_step) / (no_reuse - in_step):.0%} of the way to reading B once per CTA: "
                         "the deeper ring's CTAs drift out of step and B comes from DRAM again.")
        two = sorted(st for st in dram_meas if st not in one)
        if two and deep_m:
            st, b = two[-1], deep_m[-1]
            c2 = configs_for(shape, st)["pipelined"]
            lines.append(f"{st} stages keep {c2.ctas_per_sm} CTAs per SM, a wave of {wave_traffic(c2)['ctas']} CTAs "
                         f"(another wave, not on the one-CTA scale above): the model's in-step figure for it is "
                         f"{dram_read_bytes(c2) / 1e9:.2f} GB; ncu measured {dram_meas[st] / 1e9:.2f} GB, "
                         f"{dram_meas[st] / dram_meas[b]:.2f}x what {b} stages read. What the counter shows is the "
                         f"deep ring's extra bytes; the shallower rings' bytes sit far below them, and the model "
                         f"does not order those two.")
    return lines


def stage_depth_story(record: dict | None = None, shape=(8192, 8192, 8192)) -> str:
    """Rung 3's ring depths explained from the kernel (shared memory per stage x stages, the CTAs per SM that leaves,
    registers) and, with a record, from its measurements: which depth is fastest and why, and what the model cannot
    tell apart (four and six stages). The notebook prints it for the record of the GPU it runs on."""
    occ = ring_occupancy()
    lines = _occupancy_lines(occ)
    one = [o["stages"] for o in occ if o["resident"] == 1]
    if not record:
        return "\n".join(lines)
    name = "x".join(map(str, shape))
    tf = _measured_tflops(record, name)
    if not tf:
        return "\n".join(lines)
    lines.extend(_measured_depth_lines(record, shape, name, tf, one))
    lines.extend(_dram_counter_lines(record, shape, name, one))
    return "\n".join(lines)
