"""Week 2, day 4: the exercise's design — each choice of ring depth and epilogue staging beside its shared-memory
bytes and the model's time for it (`epilogue_choices`, `epilogue_table`), and rung 6 against rung 5 (`rung6_gain`)."""

from __future__ import annotations

import math
from dataclasses import replace

from .model import BK, CONSTANTS, FIT, SMS, configs_for, ktile_times, predict_config, store_warp_config
from .occupancy import _staging_ns, staging_bank_ways

# ---------------------------------------------------------------------------------------------- the exercise's design
# The exercise (kernels/gemm/exercise.py) gives the mainloop and asks for the epilogue: STAGES of the ring and the
# staging of each consumer warpgroup's m64n256 accumulator under the launch's dynamic shared memory. The guide below
# puts each choice's shared-memory bytes beside the model's time for it: the ring's depth through t1 (rung 4's
# "overlap" structure: max(W, (L + W) / S)), the epilogue through the per-tile term E of predict_config:
#   exposed     (the given plain stores): EPILOGUE_NS, the fitted per-tile
#               epilogue of rung 4, whose epilogue is exactly those plain stores;
#   overlapped  (TMA stores left in flight under the next tile's mainloop): the consumers' time on the staging
#               alone — the tile's C bytes written to shared memory (x the warp stores' bank-conflict ways) and read
#               back by the TMA, at the SM's shared-memory rate (banks x 4 bytes per clock, at the datasheet clock).
# What it leaves out: the latency of a bulk_wait_read between pieces through one buffer, and C's bytes on their way
# to L2 and DRAM under the mainloop (64 KiB a tile beside 48 KiB per k-tile of A and B). A bulk_wait<0> after every
# store (waiting for the global write, not only the read) has no row: the model has no term for a store's
# completion, and the known answer serial_epilogue (autograder's expected.toml) timed like the solution on an H100.

# (name, stages, staging bytes per consumer, overlapped, swizzled): the choices the notebook's table compares.
EPILOGUE_CHOICES = (
    ("given plain stores (STG)", 4, 0, False, True),
    ("whole accumulator staged, 32 KiB", 4, 32768, True, True),
    ("whole accumulator staged, 32 KiB", 3, 32768, True, True),
    ("whole accumulator staged, 32 KiB", 2, 32768, True, True),
    ("4 pieces, 2 x 8 KiB buffers", 4, 16384, True, True),
    ("4 pieces, one 8 KiB buffer", 4, 8192, True, True),
    ("4 pieces, 2 x 8 KiB, unswizzled", 4, 16384, True, False),
    ("4 pieces, 2 x 8 KiB buffers", 1, 16384, True, True),
)


def epilogue_choices(shape=(8192, 8192, 8192), dram_tbps: float | None = None) -> list[dict]:
    """Each EPILOGUE_CHOICES row: dynamic shared memory (1 KiB alignment + stages x 48 KiB + 2 consumers' staging),
    whether it fits the exercise's SMEM_BYTES, the model's per-k-tile time t1 at that ring depth, the exposed
    epilogue per tile, and the predicted TFLOPS at `shape` (predict_config of the exercise's config with that depth
    and that epilogue). An unswizzled staging buffer does not match the contract's C map (128B swizzle): its row is
    what the layout would cost, not an answer that passes."""
    from . import exercise

    out = []
    for name, stages, staging, overlapped, swizzle in EPILOGUE_CHOICES:
        smem = exercise.ALIGN_SLACK + stages * exercise.STAGE_BYTES + 2 * staging
        cfg = replace(configs_for(shape, stages)["exercise"], epilogue="tma" if overlapped else "stores")
        t = ktile_times(cfg.tile)
        t1 = max(t["W"], (t["L"] + t["W"]) / stages)
        epi = _staging_ns(cfg.tile, swizzle) if overlapped else CONSTANTS["EPILOGUE_NS"]
        pred = predict_config(cfg, dram_tbps, STAGING_NS=epi)
        out.append({"choice": name, "stages": stages, "staging_per_consumer": staging, "smem": smem,
                    "fits": smem <= exercise.SMEM_BYTES, "overlapped": overlapped, "swizzle": swizzle,
                    "bank_ways": staging_bank_ways(swizzle) if staging else None, "t1_ns": t1,
                    "ring_bound": "tensor" if t["W"] >= (t["L"] + t["W"]) / stages else "latency",
                    "epilogue_ns": epi, "tflops": pred.tflops if smem <= exercise.SMEM_BYTES else None})
    return out


def epilogue_table(shape=(8192, 8192, 8192), dram_tbps: float | None = None) -> str:
    """epilogue_choices as the notebook prints it, with the budget and the model's terms in the head."""
    from . import exercise

    t = ktile_times((128, 256))
    head = (f"dynamic shared memory of the launch: {exercise.SMEM_BYTES / 1024:.0f} KiB (a k-tile stage "
            f"{exercise.STAGE_BYTES // 1024} KiB, + {exercise.ALIGN_SLACK // 1024} KiB alignment); model at "
            f"{'x'.join(map(str, shape))}: W = {t['W']:.0f} ns, L = {t['L']:.0f} ns per k-tile, exposed epilogue "
            f"EPILOGUE_NS = {CONSTANTS['EPILOGUE_NS']:.0f} ns per tile ({FIT['device']} fit)")
    lines = [head, f"{'choice':<40} {'stages':>6} {'staging':>8} {'smem KiB':>8}  {'fits':<4} {'ring':<8} "
                   f"{'conflicts':>9} {'epilogue ns':>11} {'TFLOPS':>7}"]
    for r in epilogue_choices(shape, dram_tbps):
        ways = "-" if r["bank_ways"] is None else f"{r['bank_ways']}-way"
        tf = "-" if r["tflops"] is None else f"{r['tflops']:.1f}"
        lines.append(f"{r['choice']:<40} {r['stages']:>6} {r['staging_per_consumer'] // 1024:>5} KiB "
                     f"{r['smem'] / 1024:>8.0f}  {'yes' if r['fits'] else 'NO':<4} {r['ring_bound']:<8} {ways:>9} "
                     f"{r['epilogue_ns']:>11.0f} {tf:>7}")
    return "\n".join(lines)


def rung6_gain(shape=(8192, 8192, 8192), dram_tbps: float | None = None) -> dict:
    """Rung 6 against rung 5 in the model at `shape`: each one's per-tile epilogue term E (what the tensor core waits
    for between two tiles), the per-CTA time and the predicted TFLOPS, and the tensor core's busy share of a CTA's
    time (ktiles x W over the whole): the same share ncu's tensor-pipe counter reads (tools/gpu_check.py;
    measured_tensor_pipe). Rung 6's figures need no source of it (store_warp_config): a student release gets them."""
    cfgs = {**configs_for(shape), "store_warp": store_warp_config(shape)}
    out = {}
    for v in ("cluster", "store_warp"):
        cfg = cfgs[v]
        p = predict_config(cfg, dram_tbps)
        e = _staging_ns(cfg.tile) if cfg.epilogue == "tma" else CONSTANTS["EPILOGUE_NS"]
        w = ktile_times(cfg.tile, cfg.share)["W"]
        busy = math.ceil(shape[2] / BK) * w * math.ceil(
            math.ceil(shape[0] / cfg.tile[0]) * math.ceil(shape[1] / cfg.tile[1])
            / min(SMS, math.ceil(shape[0] / cfg.tile[0]) * math.ceil(shape[1] / cfg.tile[1]))) / (p.ms * 1e6)
        out[v] = {"epilogue_ns": e, "tflops": p.tflops, "ms": p.ms, "bound": p.bound, "tensor_busy": busy}
    return out
