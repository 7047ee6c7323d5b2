"""Day 1's benchmark: check, time and model every copy rung at one shape, beside the copy ceiling of the same run.

    python -m kernels.naive_loads.bench --out build/gpu        # the GPU script calls run()

`measure()` serves the notebook's Explore section; `run()` also writes recorded_h100.json and the plot.
"""

from __future__ import annotations

import os
from pathlib import Path

from .. import record
from ..bench import bench, ceilings, rotating_inputs, script_main
from ..check import compare, poison
from . import model
from .launch import VARIANTS, copy
from .workload import BENCH_N, TEST_NS, bytes_moved, make_inputs, reference

SLUG = "naive_loads"


def check_all(seed: int = 1) -> list[str]:
    """Every rung against the reference on fresh inputs, awkward sizes, poisoned outputs, bit-exact. Returns
    the failures (empty when all are right)."""
    import torch

    failures = []
    for variant in VARIANTS:
        for i, n in enumerate(TEST_NS):
            if variant == "strided" and n % 32:
                continue
            x = make_inputs(n, seed + i)
            out = poison(torch.empty_like(x))
            copy(x, variant, out=out)
            rep = compare(out, reference(x), exact=True)
            if not rep.ok:
                failures.append(f"{variant} n={n}: {rep.message}")
    return failures


def measure(n: int = BENCH_N, reps: int = 20, seed: int = 0, variants=VARIANTS) -> list[dict]:
    """Time each rung (fresh inputs each repetition, L2 flushed) and put the model's prediction beside it."""
    import torch

    ceil = ceilings()
    pool = [make_inputs(n, seed + k) for k in range(2)]
    out = torch.empty_like(pool[0])
    rows = []
    for variant in variants:
        res = bench(lambda x: copy(x, variant, out=out), rotating_inputs(pool), bytes=bytes_moved(n), reps=reps)
        pred = model.predict_copy_tbps(variant, ceil["copy_tbps"]) if variant in model.VARIANTS else None
        rows.append({"kernel": f"copy_{variant}", "shape": f"n={n}", "ms": res.ms, "p20_ms": res.p20_ms,
                     "p80_ms": res.p80_ms, "tbps": res.tbps, "tflops": None,
                     "fraction_of_ceiling": res.fraction_of_copy, "model_prediction": pred})
    return rows


def plot(rows: list[dict], ceiling_tbps: float | None = None):
    """Measured TB/s per rung with the model's prediction and the copy ceiling of the same run."""
    from ..sim import plot_predicted_vs_measured

    fig = plot_predicted_vs_measured(rows, title="Day 1: copy bandwidth, measured vs model")
    if ceiling_tbps:
        ax = fig.axes[0]
        ax.axhline(ceiling_tbps, color="grey", linestyle="--", linewidth=1)
        ax.text(-0.4, ceiling_tbps * 1.01, f"D2D copy ceiling {ceiling_tbps:.2f} TB/s", fontsize="small")
    return fig


def run(out_dir: Path, quick: bool = False) -> dict:
    """The GPU script's entry: check, measure, record, plot. ok=False (with the reasons) on any mismatch."""
    out_dir = Path(out_dir)
    failures = check_all()
    if failures:
        return {"ok": False, "failures": failures, "rows": []}
    rows = measure(n=BENCH_N // (8 if quick else 1))
    ceil = ceilings()
    band = max(abs(r["model_prediction"] / r["tbps"] - 1) for r in rows if r["model_prediction"])
    vec16 = next(r for r in rows if r["kernel"] == "copy_vec16")
    best16 = max(r["tbps"] for r in rows if r["kernel"] in ("copy_vec16", "copy_grid_stride"))
    extra = {"model_latency_ns": model.LATENCY_NS, "model_band": band,
             "fit_latency_ns_from_scalar": model.fit_latency_ns(
                 next(r for r in rows if r["kernel"] == "copy_scalar")["tbps"], "scalar")}
    target = record.write(SLUG, rows, ceil, extra, out=out_dir / SLUG / "recorded_h100.json")
    if os.environ.get("COURSE_RECORD") == "1":
        record.write(SLUG, rows, ceil, extra)
    fig = plot(rows, ceil["copy_tbps"])
    fig.savefig(out_dir / SLUG / "copy_vs_model.png", dpi=110)
    return {"ok": best16 >= 0.90 * ceil["copy_tbps"], "rows": rows, "ceilings": ceil, "model_band": band,
            "vec16_fraction": vec16["fraction_of_ceiling"], "best16_fraction": best16 / ceil["copy_tbps"],
            "recorded": str(target),
            "failures": [] if best16 >= 0.90 * ceil["copy_tbps"] else
            [f"16-byte copy at {best16 / ceil['copy_tbps']:.3f}x of the D2D copy (< 0.90x)"]}


if __name__ == "__main__":
    script_main(SLUG, run, __doc__)
