"""Day 1's benchmark: check, time and model every copy rung at one shape, beside the copy ceiling of the same run.

    python -m kernels.naive_loads.bench --out build/gpu        # the GPU script calls run()

`measure()` serves the notebook's Explore section; `run()` also writes recorded_h100.json and the plot.
"""

from __future__ import annotations

from ..bench import bench, ceilings, rotating_inputs
from ..topic import Topic, answer_row, check_answers, check_kernels, row, shipped, time_answer
from . import model
from .launch import VARIANTS, copy
from .workload import BENCH_N, TEST_NS, bytes_moved, make_inputs, reference

SLUG = "naive_loads"
TIMED_ANSWERS = ("correct", "scalar_loads")  # the exercise's known answers the benchmark times (the grader's timer)


def check_all(seed: int = 1) -> list[str]:
    """Every rung against the reference on fresh inputs, awkward sizes, poisoned outputs, bit-exact (the scaffold's
    loop; the strided rung only where n is a multiple of 32). Returns the failures (empty when all are right)."""
    import torch

    return check_kernels(VARIANTS, TEST_NS, inputs=make_inputs, reference=reference,
                         launch=lambda variant, x, out: copy(x, variant, out=out),
                         output=lambda x, variant: torch.empty_like(x), check={"exact": True}, seed=seed,
                         skip=lambda variant, n: variant == "strided" and n % 32)


def measure(n: int = BENCH_N, reps: int = 20, seed: int = 0, variants=VARIANTS, with_exercise: bool = False
            ) -> list[dict]:
    """Time each rung (fresh inputs each repetition, L2 flushed) and put the model's prediction beside it; with
    `with_exercise`, also the exercise's known answers, timed by the grader's own function."""
    import torch

    ceil = ceilings()
    pool = [make_inputs(n, seed + k) for k in range(2)]
    out = torch.empty_like(pool[0])
    rows = []
    for variant in variants:
        res = bench(lambda x: copy(x, variant, out=out), rotating_inputs(pool), bytes=bytes_moved(n), reps=reps)
        pred = model.predict_copy_tbps(variant, ceil["copy_tbps"]) if variant in model.VARIANTS else None
        rows.append(row(f"copy_{variant}", f"n={n}", res, pred))
    del pool, out
    if with_exercise:
        for name in shipped(SLUG, TIMED_ANSWERS):
            rows.append(answer_row(SLUG, name, time_answer(SLUG, name, seed=seed)))
    return rows


def claims(rows: list[dict], ceilings: dict) -> list[str]:
    """What the day teaches, checked: 16-byte loads with enough bytes in flight reach the copy ceiling (>= 0.90x).
    (That the exercise's 2-byte known answer stays below its bar is the grader's check: autograder.benchmarks.)"""
    bad = []
    best16 = max(r["tbps"] for r in rows if r["kernel"] in ("copy_vec16", "copy_grid_stride"))
    if best16 < 0.90 * ceilings["copy_tbps"]:
        bad.append(f"16-byte copy at {best16 / ceilings['copy_tbps']:.3f}x of the D2D copy (< 0.90x)")
    return bad


def plot(rows: list[dict], ceiling_tbps: float | None = None):
    """Measured TB/s per rung with the model's prediction and the copy ceiling of the same run."""
    return TOPIC.plot(rows, ceiling_tbps)


TOPIC = Topic(
    slug=SLUG, title="Day 1: copy bandwidth",
    check=lambda quick: check_all() + check_answers(SLUG, TIMED_ANSWERS),
    measure=lambda quick: measure(n=BENCH_N // (8 if quick else 1), with_exercise=True),
    constants=lambda: {"LATENCY_NS": model.LATENCY_NS, "IDLE_LATENCY_NS": model.IDLE_LATENCY_NS,
                       "LATENCY_SLOPE_NS_PER_TBPS": model.LATENCY_SLOPE_NS_PER_TBPS,
                       "DRAM_GRANULE_BYTES": model.DRAM_GRANULE_BYTES,
                       "PARTIAL_WRITE_COST": model.PARTIAL_WRITE_COST},
    fit=lambda rows, copy_tbps: {"LATENCY_NS": model.fit_latency_ns(
        next(r for r in rows if r["kernel"] == "copy_scalar")["tbps"], "scalar")},
    claims=claims)
run = TOPIC.run


if __name__ == "__main__":
    TOPIC.main(__doc__)
