"""Day 2's benchmark: check, time and model every transpose rung — and the exercise's known answers, whose figures
place the throughput bar — at one shape, beside the copy ceiling of the same run.

    python -m kernels.smem_tiling.bench --out build/gpu        # the GPU script calls run()

`check_all()` and `measure()` serve the notebook's Explore section; `run()` also checks that the known-bad answers
fail, writes recorded_h100.json and the predicted-vs-measured plot.
"""

from __future__ import annotations

import math
import os
from functools import lru_cache
from pathlib import Path

from .. import record
from ..bench import bench, ceilings, script_main
from ..check import compare, poison
from ..compile import compile_cuda
from ..launch import launch
from . import exercise, model
from .launch import VARIANTS, transpose
from .workload import BENCH_SHAPE, TEST_SHAPES, bytes_moved, make_inputs, reference

SLUG = "smem_tiling"
# Known answers of the exercise that are correct, timed here (the bar must sit between "unpadded" and the
# conflict-free ones), with the demo rung each one matches for the model.
TIMED_ANSWERS = {"correct": "padded", "swizzled": "swizzled", "unpadded": "smem", "naive": "naive"}
# Known answers that must fail correctness (the grader's tests of them run with the spec; this is the quick proof
# on the benchmark machine that the test shapes catch them — the race above all).
BAD_ANSWERS = ("off_by_one", "full_tiles_only", "no_sync")
MIN_SEPARATION = 1.15  # conflict-free / unpadded throughput below this: no bar can separate them reliably
SAME_SPEED = 0.05      # padded and swizzled tiles (same bytes, same wavefronts) within this of each other
MODEL_BAND = 0.20      # the course's hard band for |prediction / measurement - 1| (goal 0.15)


def shape_str(shape) -> str:
    return f"{shape[0]}x{shape[1]}"


def answer_source(name: str) -> str:
    """CUDA source of a known answer (autograder/submissions/smem_tiling: a .cu file, or a base with changes)."""
    from ..known import kernel_source

    return kernel_source(SLUG, name)


@lru_cache(maxsize=None)
def answer_cubin(name: str):
    return compile_cuda(answer_source(name), name=f"{name}.cu")


def run_answer(name: str, inputs: dict, out) -> None:
    """Launch a known answer's `transpose` with the exercise's fixed launch contract (as the harness does)."""
    la = exercise.launch_args(inputs, out)
    launch(answer_cubin(name), exercise.KERNEL, grid=la["grid"], block=la["block"], args=la["args"],
           smem=la.get("smem", 0))


def _check_answer(name: str, shape, seed: int):
    import torch

    inputs = exercise.make_inputs(shape, seed)
    out = poison(exercise.make_output(inputs))
    run_answer(name, inputs, out)
    torch.cuda.synchronize()
    return compare(out, exercise.reference(inputs), **exercise.CHECK)


def check_all(seed: int = 1, shapes=TEST_SHAPES, answers=tuple(TIMED_ANSWERS)) -> list[str]:
    """Every rung and every correct known answer against the reference: fresh inputs, awkward shapes, poisoned
    outputs, bit-exact. Returns the failures (empty when all are right)."""
    import torch

    failures = []
    for i, shape in enumerate(shapes):
        x = make_inputs(shape, seed + i)
        ref = reference(x)
        for variant in VARIANTS:
            out = poison(torch.empty(shape[1], shape[0], dtype=x.dtype, device=x.device))
            transpose(x, variant=variant, out=out)
            torch.cuda.synchronize()
            rep = compare(out, ref, exact=True)
            if not rep.ok:
                failures.append(f"transpose_{variant} {shape_str(shape)}: {rep.message}")
        for name in answers:
            rep = _check_answer(name, shape, seed + 100 + i)
            if not rep.ok:
                failures.append(f"known answer {name} {shape_str(shape)}: {rep.message}")
    return failures


def check_bad_answers(seed: int = 7, shapes=TEST_SHAPES, race_repeats: int = 3) -> tuple[list[str], dict]:
    """Each known-bad answer must fail on at least one test shape. The race (no_sync) is also run `race_repeats`
    times on the largest test shape, and the mismatch counts are recorded: it must fail every time."""
    failures: list[str] = []
    evidence: dict = {}
    big = max(shapes, key=lambda s: s[0] * s[1])
    for name in BAD_ANSWERS:
        failed_on = []
        for i, shape in enumerate(shapes):
            rep = _check_answer(name, shape, seed + i)
            if not rep.ok:
                failed_on.append(shape_str(shape))
        evidence[name] = {"failed_on": failed_on}
        if not failed_on:
            failures.append(f"known-bad answer {name} passed every test shape: the grader would not catch it")
    counts = []
    for k in range(race_repeats):
        rep = _check_answer("no_sync", big, seed + 1000 + k)
        counts.append(rep.mismatches)
    evidence["no_sync"]["mismatches_on_" + shape_str(big)] = counts
    if min(counts) == 0:
        failures.append(f"no_sync was right on {shape_str(big)} in {counts.count(0)} of {race_repeats} runs: "
                        "the race does not show reliably")
    return failures, evidence


def _time(fn, shape, reps: int, seed: int):
    """Time fn(x, out) at `shape`: two input buffers alternated and refilled every repetition (outside the timed
    region), L2 flushed, the course's one timer. The output of the last call is checked against its input:
    `.output_ok` on the result (False: the timed kernel was not computing the transpose)."""
    import torch

    pool = [make_inputs(shape, seed + k) for k in range(2)]
    out = torch.empty(shape[1], shape[0], dtype=torch.float32, device="cuda")
    state = {"i": 0}

    def make_args():
        state["i"] += 1
        x = pool[state["i"] % 2]
        x.normal_()  # fresh values every repetition
        poison(out)
        return (x, out)

    res = bench(fn, make_args, bytes=bytes_moved(shape), reps=reps)
    torch.cuda.synchronize()
    # bench's last calls (its wall-clock check) ran on the inputs of the last make_args()
    res.output_ok = compare(out, reference(pool[state["i"] % 2]), exact=True).ok
    return res


def _row(kernel: str, shape, res, pred) -> dict:
    return {"kernel": kernel, "shape": shape_str(shape), "ms": res.ms, "p20_ms": res.p20_ms, "p80_ms": res.p80_ms,
            "tbps": res.tbps, "tflops": None, "fraction_of_ceiling": res.fraction_of_copy,
            "model_prediction": pred.tbps, "model_bound": pred.bound,
            "output_ok": getattr(res, "output_ok", None)}


def measure(shape=BENCH_SHAPE, reps: int = 20, seed: int = 0, variants=VARIANTS,
            answers=tuple(TIMED_ANSWERS)) -> list[dict]:
    """Time each rung and each correct known answer; put the model's prediction beside each."""
    copy_tbps = ceilings()["copy_tbps"]
    rows = []
    for variant in variants:
        res = _time(lambda x, out, v=variant: transpose(x, variant=v, out=out), shape, reps, seed)
        rows.append(_row(f"transpose_{variant}", shape, res, model.predict(variant, shape, copy_tbps)))
    for name in answers:
        res = _time(lambda x, out, n=name: run_answer(n, {"x": x}, out), shape, reps, seed)
        rows.append(_row(f"exercise:{name}", shape, res, model.predict(TIMED_ANSWERS[name], shape, copy_tbps)))
    return rows


def fits(rows: list[dict], copy_tbps: float, shape=BENCH_SHAPE) -> dict:
    """The named constants of model.py that would reproduce this run's rung that each one alone limits (record
    them; model.py holds the values fit once, with their source)."""
    by = {r["kernel"]: r for r in rows}
    tiles = math.ceil(shape[0] / model.TILE) * math.ceil(shape[1] / model.TILE)
    out: dict = {}
    if "transpose_padded" in by:
        out["DRAM_FRACTION_OF_COPY"] = by["transpose_padded"]["tbps"] / copy_tbps
    if "transpose_smem" in by:  # L1TEX-bound: time = tiles x wavefronts / (SMs x clock)
        wf = model.tile_cost("smem", *shape).l1_wavefronts
        out["CLOCK_GHZ"] = tiles * wf / (model.H100.sm_count * by["transpose_smem"]["ms"] * 1e-3) / 1e9
    if "transpose_naive" in by:  # L2-request-bound: time = tiles x requests / rate
        req = model.tile_cost("naive", *shape).l2_requests
        out["L2_REQUESTS_PER_NS"] = tiles * req / (by["transpose_naive"]["ms"] * 1e6)
    return out


def claims(rows: list[dict]) -> list[str]:
    """What the day teaches about these rungs, checked on the measurement (each held on the H100 of
    build/h100-run9): the two conflict-free layouts run alike; the bank conflicts and the uncoalesced stores each
    cost a clear factor. Returns the claims that failed."""
    by = {r["kernel"]: r["tbps"] for r in rows}
    out = []
    pad, swz = by.get("transpose_padded"), by.get("transpose_swizzled")
    smem, naive = by.get("transpose_smem"), by.get("transpose_naive")
    if pad and swz and abs(swz / pad - 1) > SAME_SPEED:
        out.append(f"padding and XOR swizzle should run alike (both conflict-free, DRAM-bound): {pad:.3f} vs "
                   f"{swz:.3f} TB/s, more than {SAME_SPEED:.0%} apart")
    if pad and smem and smem > pad / MIN_SEPARATION:
        out.append(f"the 32-way bank conflict should cost a clear factor: unpadded {smem:.3f} vs padded {pad:.3f} TB/s")
    if smem and naive and naive > smem / MIN_SEPARATION:
        out.append(f"staging should beat the uncoalesced column store by a clear factor: naive {naive:.3f} vs "
                   f"unpadded {smem:.3f} TB/s")
    return out


def bar_hint(rows: list[dict], copy_tbps: float | None = None) -> dict:
    """Where the exercise's throughput bar can go: above the unpadded answer, below the conflict-free ones (and,
    given the copy ceiling of the run, as the spec's `copy_fraction`)."""
    by = {r["kernel"]: r["tbps"] for r in rows}
    good = min(by.get("exercise:correct", math.inf), by.get("exercise:swizzled", math.inf))
    bad = max(by.get("exercise:unpadded", 0.0), by.get("exercise:naive", 0.0))
    if not math.isfinite(good) or bad <= 0:
        return {}
    hint = {"conflict_free_tbps": good, "best_wrong_mechanism_tbps": bad, "separation": good / bad,
            "suggested_bar_tbps": math.sqrt(good * bad)}
    if copy_tbps:
        hint["suggested_copy_fraction"] = hint["suggested_bar_tbps"] / copy_tbps
    return hint


def plot(rows: list[dict], ceiling_tbps: float | None = None, bar_tbps: float | None = None):
    """Measured TB/s per rung and known answer, the model's prediction, the copy ceiling and the exercise's bar."""
    from ..sim import plot_predicted_vs_measured

    fig = plot_predicted_vs_measured(rows, title="Day 2: transpose bandwidth, measured vs model")
    ax = fig.axes[0]
    if ceiling_tbps:
        ax.axhline(ceiling_tbps, color="grey", linestyle="--", linewidth=1)
        ax.text(-0.4, ceiling_tbps * 1.01, f"D2D copy ceiling {ceiling_tbps:.2f} TB/s", fontsize="small")
    if bar_tbps:
        ax.axhline(bar_tbps, color="#C44E52", linestyle=":", linewidth=1)
        ax.text(-0.4, bar_tbps * 1.01, f"exercise bar {bar_tbps:.2f} TB/s", fontsize="small", color="#C44E52")
    return fig


def run(out_dir: Path, quick: bool = False) -> dict:
    """The GPU script's entry: check, measure, record, plot. ok=False (with the reasons) on any mismatch."""
    from ..device import cpu_mode_reason, is_hopper

    if not is_hopper():
        return {"ok": False, "failures": [f"needs an sm_90 GPU: {cpu_mode_reason()}"], "rows": []}
    out_dir = Path(out_dir)
    shapes = TEST_SHAPES if not quick else tuple(s for s in TEST_SHAPES if s in ((127, 129), (1, 4097), (4097, 1),
                                                                                    (4095, 4097)))
    failures = check_all(shapes=shapes)
    if failures:
        return {"ok": False, "failures": failures, "rows": []}
    bad_failures, bad_evidence = check_bad_answers(shapes=shapes)
    rows = measure(reps=10 if quick else 20)
    ceil = ceilings()
    band = max(abs(r["model_prediction"] / r["tbps"] - 1) for r in rows)
    hint = bar_hint(rows, ceil["copy_tbps"])
    failures = list(bad_failures)
    failures += [f"{r['kernel']}: the output of the timed runs is wrong" for r in rows if r["output_ok"] is False]
    failures += claims(rows)
    if band > MODEL_BAND:
        worst = max(rows, key=lambda r: abs(r["model_prediction"] / r["tbps"] - 1))
        failures.append(f"model off by {band:.0%} (> {MODEL_BAND:.0%}) on {worst['kernel']}: predicted "
                        f"{worst['model_prediction']:.3f}, measured {worst['tbps']:.3f} TB/s ({worst['model_bound']} "
                        "bound); refit model.py's constants or revise its mechanism")
    if hint and hint["separation"] < MIN_SEPARATION:
        failures.append(f"the conflict-free answers ({hint['conflict_free_tbps']:.3f} TB/s) are only "
                        f"{hint['separation']:.2f}x the unpadded / naive ones ({hint['best_wrong_mechanism_tbps']:.3f}"
                        f" TB/s): no throughput bar separates them reliably (need >= {MIN_SEPARATION}x)")
    extra = {
        "bench_shape": list(BENCH_SHAPE),
        "model_band": band,
        "model_constants": {"CLOCK_GHZ": model.CLOCK_GHZ, "WAVEFRONTS_PER_CLK": model.WAVEFRONTS_PER_CLK,
                            "DRAM_FRACTION_OF_COPY": model.DRAM_FRACTION_OF_COPY,
                            "L2_REQUESTS_PER_NS": model.L2_REQUESTS_PER_NS,
                            "DRAM_GRANULE_BYTES": model.DRAM_GRANULE_BYTES,
                            "PARTIAL_WRITE_COST": model.PARTIAL_WRITE_COST, "fit": model.FIT_SOURCE},
        # the hypothesis the naive row refutes: L2 merging none of the partial writes (day 1's DRAM cost for each)
        "naive_unmerged_prediction_tbps": model.predict("naive", BENCH_SHAPE, ceil["copy_tbps"],
                                                        merge="instruction").tbps,
        "model_fits": fits(rows, ceil["copy_tbps"]),
        "tile_costs": {v: model.predict(v, BENCH_SHAPE, ceil["copy_tbps"]).as_dict()["cost"] for v in VARIANTS},
        "bar_hint": hint,
        "known_bad": bad_evidence,
    }
    target = record.write(SLUG, rows, ceil, extra, out=out_dir / SLUG / "recorded_h100.json")
    if os.environ.get("COURSE_RECORD") == "1":
        record.write(SLUG, rows, ceil, extra)
    fig = plot(rows, ceil["copy_tbps"], hint.get("suggested_bar_tbps"))
    fig.savefig(out_dir / SLUG / "transpose_vs_model.png", dpi=110)
    return {"ok": not failures, "failures": failures, "rows": rows, "ceilings": ceil, "model_band": band,
            "bar_hint": hint, "known_bad": bad_evidence, "recorded": str(target)}


if __name__ == "__main__":
    script_main(SLUG, run, __doc__)
