"""Week 2, day 5: the overlap rung (r2_overlap.cu) measured outside the bench run — `compare_overlap`, its
entries beside today's rung and the libraries in one process, and `pipes`, ncu's tensor and XU pipe shares of today's
rung and the overlap rung's entries (what limits each run).

    python -m kernels.attention.overlap [--out build/gpu]
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from .. import ncu, record
from ..clock import SmClock
from ..compile import SourceLeftOut
from ..topic import row
from . import model
from .bench import SHAPES, _pool, _time, check_rungs, configs, overlap_rounds
from .ratios import ladder_table
from .launch import OVERLAP_MISSING, kernel_name, overlap_available, overlap_kernel_name
from .workload import TEST_SHAPES, shape_name


# What pipes() profiles: (label, variant, stages, overlap entry, shape): today's rung at its best d128 depth, the
# overlap rung's defaults at d128 and d64, and the d64 entry with wider K/V tiles.
PIPE_RUNS = (("attn_fwd d128 s3", "cuda", 3, None, SHAPES["d128"]),
             ("attn_overlap d128 n128 k3v2", "overlap", None, "n128 k3v2", SHAPES["d128"]),
             ("attn_overlap d64 n128 k4v4", "overlap", None, "n128 k4v4", SHAPES["d64"]),
             ("attn_overlap d64 n176 k3v3", "overlap", None, "n176 k3v3", SHAPES["d64"]))


def pipes(workdir, runs=PIPE_RUNS) -> dict:
    """What limits each run, as ncu sees one launch (a process of its own per run; kernels.ncu.pipe_shares): the
    tensor pipe's and the XU pipe's (MUFU: the softmax's ex2) active share of their peak sustained while the SMs
    were active. {label: {"tensor", "xu", "metrics", "ms"} or {"error"}}."""
    code = ("import sys, torch; from kernels.attention.launch import attention; "
            "from kernels.attention.workload import make_inputs; "
            "v, st, cfg, shape = sys.argv[1], sys.argv[2], sys.argv[3], tuple(map(int, sys.argv[4].split(','))); "
            "x = make_inputs(shape, 1); "
            "[attention(x['q'], x['k'], x['v'], bool(shape[4]), v, stages=int(st) if st != '-' else None, "
            "config=cfg if cfg != '-' else None) for _ in range(3)]; torch.cuda.synchronize()")
    root = Path(__file__).resolve().parents[2]
    out: dict = {}
    for label, variant, stages, entry, shape in runs:
        d = shape[3]
        kernel = kernel_name(d, stages) if variant == "cuda" else overlap_kernel_name(d, entry)
        cmd = [sys.executable, "-c", code, variant, str(stages or "-"), entry or "-", ",".join(map(str, shape))]
        try:
            out[label] = ncu.pipe_shares(cmd, {"tensor": ncu.TENSOR_PIPE, "xu": ncu.XU_PIPE},
                                         kernel=f"regex:^{kernel}$", workdir=Path(workdir) / label.replace(" ", "_"),
                                         cwd=str(root))
        except ncu.ProfilerUnavailable as exc:
            return {r[0]: {"error": str(exc)[-800:]} for r in runs}
    return out


# ---------------------------------------------------------------------------------------------- the overlap rung
# Today's rung at the depths the comparison times beside the overlap rung: every depth non-causal, 2 causal (configs).
def compare_overlap(reps: int = 10, seed: int = 0, out: str | None = "build/gpu/attention_overlap.json",
                    check: bool = True) -> list[dict]:
    """One process, one GPU: r2_overlap.cu's entries checked against torch's fp32 math SDPA on the awkward
    test shapes (with r1_attention.cu's depths beside them), then timed at the bench's three shapes beside
    r1_attention.cu ("cuda"), cuDNN and FlashAttention-2 on the same inputs (the exercise's, fresh each repetition)
    with kernels.bench, then the overlap rung against cuDNN in interleaved rounds (bench.overlap_rounds). Prints one
    table (ratios.ladder_table: TFLOPS, "this pass" over cuDNN of the same shape — one pass, no claim — the models'
    figures, SM MHz) with the claims of this run's rounds under it (median, 95 % interval, what it supports), and
    the overlap model's fit on these rows; writes the rows to `out` (JSON) for the record.

        python -m kernels.attention.overlap [--out build/gpu]
    """
    import torch

    if not overlap_available():
        raise SourceLeftOut(OVERLAP_MISSING)
    fails = check_rungs(seed=1) if check else []
    print(f"check vs fp32 SDPA on {len(TEST_SHAPES)} awkward shapes: " + ("all correct" if not fails else
                                                                         f"{len(fails)} FAILED"))
    for f in fails:
        print("  FAIL", f)
    rows = []
    with SmClock() as clock:
        for tag, shape in SHAPES.items():
            torch.cuda.empty_cache()
            pool = _pool(shape, seed)
            for cfg in [c for c in configs() if c["shape"] == shape and c["variant"] in ("cuda", "overlap", "cudnn",
                                                                                           "flash")]:
                res, mhz = _time(cfg["variant"], cfg["stages"], shape, "exercise", pool, clock, reps, seed,
                                 cfg.get("entry"))
                pred = model.predict_row({"config": cfg["config"]}) if cfg["config"] else None
                rows.append(row(cfg["name"], shape_name(shape), res, pred, config=cfg["config"],
                                variant=cfg["variant"], stages=cfg["stages"], data="exercise", sm_mhz=mhz,
                                clock_source=clock.source, **({"entry": cfg["entry"]} if cfg.get("entry") else {})))
            del pool
    with SmClock() as clock:  # the goals' evidence: interleaved rounds, not the pass above
        rows += overlap_rounds(clock, reps=reps, seed=seed)
    dev = torch.cuda.get_device_name()
    # the pass's TFLOPS, "this pass" over cuDNN (no claim) and the models, then the claims: this run's rounds
    print("\n" + ladder_table({**record.this_run(rows, {}), "device": dev}))
    fit = model.fit_overlap(rows)
    print("overlap model fit on these rows:", json.dumps(fit, default=str))
    if fit.get("fitted"):
        print("held-out errors (prediction / measured - 1):",
              {k: round(v, 3) for k, v in model.overlap_errors(rows, fit).items()})
        print("serial chain refit on these rows (TC_EFF from the overlap fit):",
              json.dumps(model.fit(rows, tc_eff=fit["TC_EFF"]), default=str))
    if out:
        os.makedirs(os.path.dirname(out) or ".", exist_ok=True)
        with open(out, "w") as f:
            json.dump({"device": dev, "rows": rows, "check_failures": fails, "overlap_fit": fit}, f, indent=1,
                      default=str)
        print("rows written to", out)
    return rows


if __name__ == "__main__":
    args = sys.argv[1:]
    compare_overlap(out=f"{args[args.index('--out') + 1] if '--out' in args else 'build/gpu'}/attention_overlap.json")
