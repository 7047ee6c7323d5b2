"""One GPU session of week 2, day 1, in one process: every check, the misaligned probe, a wide sweep of the demo
(passes 1 .. 32, every layout) and the exercise's timed answers — written as JSON to --out, a table printed. The
model's constants were fit to its output (kernels/swizzle/fit_run_h200.json, model.FIT).

    python -m kernels.swizzle.gpu_run --out build/gpu [--passes 1 2 4 8 16 32] [--reps 10]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="build/gpu")
    ap.add_argument("--passes", type=int, nargs="*", default=[1, 2, 4, 8, 16, 32])
    ap.add_argument("--reps", type=int, default=10)

    args = ap.parse_args()
    out = Path(args.out) / "swizzle"
    out.mkdir(parents=True, exist_ok=True)

    from kernels.bench import ceilings
    from kernels.swizzle import bench

    doc: dict = {}
    t0 = time.time()
    doc["check_failures"] = bench.check_all(seed=7)
    print(f"checks ({time.time() - t0:.0f} s): {len(doc['check_failures'])} failure(s)", *doc["check_failures"][:20],
          sep="\n  ")
    doc["probe_misaligned"] = bench.probe_misaligned()
    print("misaligned 128B probe:", doc["probe_misaligned"])
    doc["ceilings"] = ceilings()
    rows = bench.measure(reps=args.reps, configs=bench.sweep_configs(passes=tuple(args.passes)))
    doc["rows"] = rows
    c = doc["ceilings"]["copy_tbps"]
    print(f"copy ceiling {c:.3f} TB/s")
    for r in rows:
        pred = r.get("model_prediction")
        print(f"{r['kernel']:<32} {r['ms']:9.4f} ms {r['tbps']:7.3f} TB/s {r['tbps'] / c:6.3f}x  "
              f"model {pred if pred is None else round(pred, 3)}")
    (out / "gpu_run.json").write_text(json.dumps(doc, indent=1, default=str))
    print(f"total {time.time() - t0:.0f} s")


if __name__ == "__main__":
    main()
