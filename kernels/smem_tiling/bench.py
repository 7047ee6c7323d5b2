"""Day 2's benchmark: check, time and model every transpose rung — and the exercise's known answers, whose figures
place the throughput bar — at one shape, beside the copy ceiling of the same run; and the demo (records.cu: sums
over records), which the model predicts with the constants the transposes fixed.

    python -m kernels.smem_tiling.bench --out build/gpu        # the GPU script calls run()

`explore()` and `plot()` serve the notebook's Explore section (the demo: a student release carries no transpose
rung, since those answer the exercise). `run()` is kernels.topic's scaffold on
what this file declares (TOPIC): it also checks that the known-bad answers fail, holds the day's claims (the bar's
separation among them), records and plots.
"""

from __future__ import annotations

import json
import math

from ..bench import bench, ceilings, rotating_inputs
from ..check import compare, poison
from ..topic import (Topic, answer_cubin, answer_row, check_answers, check_kernels, row, run_answer, shape_label,
                     shipped, time_answer)
from . import exercise, model
from .launch import RUNGS, VARIANTS, record_sums, transpose
from .workload import (BENCH_SHAPE, DEMO_N, DEMO_TEST_NS, TEST_SHAPES, bytes_moved, make_inputs, make_records,
                       records_bytes, records_reference, reference)
from ..record import path

SLUG = "smem_tiling"
# Known answers of the exercise that are correct, timed here (the bar must sit between "unpadded" and the
# conflict-free ones), with the demo rung each one matches for the model.
TIMED_ANSWERS = {"correct": "padded", "swizzled": "swizzled", "unpadded": "smem", "naive": "naive"}
# Known answers that must fail correctness (the grader's tests of them run with the spec; this is the quick proof
# on the benchmark machine that the test shapes catch them — the race above all).
BAD_ANSWERS = ("off_by_one", "full_tiles_only", "no_sync")
QUICK_SHAPES = ((127, 129), (1, 4097), (4097, 1), (4095, 4097))  # the test shapes a quick run checks
MIN_SEPARATION = 1.15  # conflict-free / unpadded throughput below this: no bar can separate them reliably
SAME_SPEED = 0.05      # padded and swizzled tiles (same bytes, same wavefronts) within this of each other


shape_str = shape_label  # "127x129"


def check_all(seed: int = 1, shapes=TEST_SHAPES, answers=tuple(TIMED_ANSWERS)) -> list[str]:
    """Every rung and every correct known answer against the reference: fresh inputs, awkward shapes, poisoned
    outputs, bit-exact. Returns the failures (empty when all are right)."""
    failures = check_kernels(RUNGS, shapes, inputs=make_inputs, reference=reference, check={"exact": True},
                             output=lambda x, v: exercise.make_output({"x": x}), seed=seed,
                             launch=lambda v, x, out: transpose(x, variant=v, out=out),
                             label=lambda v: f"transpose_{v}")
    return failures + check_answers(SLUG, answers, shapes, seed=seed + 100)


def check_demo(seed: int = 1, ns=DEMO_TEST_NS) -> list[str]:
    """Every records.cu rung on awkward record counts, fresh inputs, poisoned outputs: within float32 tolerance of
    the float64 reference, and the four rungs bit-exact with each other (they sum in the same order)."""
    import torch

    failures = []
    for i, n in enumerate(ns):
        x = make_records(n, seed + i)
        ref = records_reference(x)
        outs = {}
        for variant in VARIANTS:
            out = poison(torch.empty(n, dtype=torch.float32, device="cuda"))
            record_sums(x, variant=variant, out=out)
            torch.cuda.synchronize()
            rep = compare(out, ref)
            if not rep.ok:
                failures.append(f"records_{variant} n={n}: {rep.message}")
            outs[variant] = out
        for variant in VARIANTS[1:]:
            rep = compare(outs[variant], outs["naive"], exact=True)
            if not rep.ok:
                failures.append(f"records_{variant} n={n} differs from records_naive bit-wise: {rep.message}")
    return failures


def _time_demo(variant: str, n: int, reps: int, seed: int):
    """Time one records.cu rung over n records with the course's one timer: two input buffers alternated, fresh
    values and a poisoned output before every launch, L2 flushed, every launch's output checked."""
    import torch

    pool = [make_records(n, seed + k) for k in range(2)]
    out = torch.empty(n, dtype=torch.float32, device="cuda")
    fresh = rotating_inputs(pool)

    def verify(args) -> str | None:
        rep = compare(args[1], records_reference(args[0]))
        return None if rep.ok else rep.message.splitlines()[0]

    return bench(lambda x, y: record_sums(x, variant=variant, out=y), lambda: (*fresh(), poison(out)),
                 bytes=records_bytes(n), reps=reps, verify=verify)


def measure_demo(n: int = DEMO_N, reps: int = 20, seed: int = 0) -> list[dict]:
    """Time each records.cu rung, with the model's prediction beside it (constants fit on the transposes: every
    records row is a held-out check of the model)."""
    copy_tbps = ceilings()["copy_tbps"]
    rows = []
    for variant in VARIANTS:
        res = _time_demo(variant, n, reps, seed)
        rows.append(row(f"records_{variant}", f"{n}x32", res, model.predict_records(variant, n, copy_tbps),
                        output_ok=not res.problems, wrong_launches=len(res.problems), launches=res.launches))
    return rows


def explore(reps: int = 20) -> list[dict]:
    """The notebook's Explore section on a GPU: check the demo's four rungs, then time them (rows as recorded)."""
    failures = check_demo()
    print("all four records rungs correct on awkward counts" if not failures else "\n".join(failures))
    return measure_demo(reps=reps)


def recorded_demo() -> dict | None:
    """The newest record that holds the demo's rows (recorded_h100.json first, then another Hopper GPU's), with
    only those rows: what a notebook without a GPU shows."""
    for tag in ("h100", "h200"):
        p = path(SLUG, tag)
        if p.exists():
            doc = json.loads(p.read_text())
            rows = [r for r in doc.get("rows", []) if r["kernel"].startswith("records_")]
            if rows:
                return {**doc, "rows": rows}
    return None


def _answer_report(name: str, shape, seed: int):
    """One launch of a known answer (the grader's launch contract) on fresh inputs, poisoned output: its report."""
    import torch

    inputs = exercise.make_inputs(shape, seed)
    out = run_answer(SLUG, answer_cubin(SLUG, name), inputs, poison(exercise.make_output(inputs)))
    torch.cuda.synchronize()
    return compare(out, exercise.reference(inputs), **exercise.CHECK)


def check_bad_answers(seed: int = 7, shapes=TEST_SHAPES, race_repeats: int = 3) -> tuple[list[str], dict]:
    """Each known-bad answer must fail on at least one test shape. The race (no_sync) is also run `race_repeats`
    times on the largest test shape, and the mismatch counts are recorded: it must fail every time."""
    failures: list[str] = []
    evidence: dict = {}
    big = max(shapes, key=lambda s: s[0] * s[1])
    if not shipped(SLUG, BAD_ANSWERS):
        return failures, evidence
    for name in BAD_ANSWERS:
        failed_on = [shape_str(s) for i, s in enumerate(shapes) if not _answer_report(name, s, seed + i).ok]
        evidence[name] = {"failed_on": failed_on}
        if not failed_on:
            failures.append(f"known-bad answer {name} passed every test shape: the grader would not catch it")
    counts = [_answer_report("no_sync", big, seed + 1000 + k).mismatches for k in range(race_repeats)]
    evidence["no_sync"]["mismatches_on_" + shape_str(big)] = counts
    if min(counts) == 0:
        failures.append(f"no_sync was right on {shape_str(big)} in {counts.count(0)} of {race_repeats} runs: "
                        "the race does not show reliably")
    return failures, evidence


def _time_rung(variant: str, shape, reps: int, seed: int):
    """Time one rung at `shape` with the course's one timer: two input buffers alternated, fresh values and a
    poisoned output before every launch (outside the timed region), L2 flushed; every launch's output compared
    with the transpose of its input (the result's `.problems` names the wrong ones)."""
    import torch

    pool = [make_inputs(shape, seed + k) for k in range(2)]
    out = torch.empty(shape[1], shape[0], dtype=torch.float32, device="cuda")
    fresh = rotating_inputs(pool)

    def verify(args) -> str | None:
        rep = compare(args[1], reference(args[0]), exact=True)
        return None if rep.ok else rep.message.splitlines()[0]

    return bench(lambda x, y: transpose(x, variant=variant, out=y), lambda: (*fresh(), poison(out)),
                 bytes=bytes_moved(shape), reps=reps, verify=verify)


def measure(shape=BENCH_SHAPE, reps: int = 20, seed: int = 0, variants=RUNGS,
            answers=tuple(TIMED_ANSWERS)) -> list[dict]:
    """Time each rung and each correct known answer (the grader's own timer, every launch verified); put the
    model's prediction beside each."""
    copy_tbps = ceilings()["copy_tbps"]
    rows = []
    for variant in variants:
        res = _time_rung(variant, shape, reps, seed)
        rows.append(row(f"transpose_{variant}", shape_str(shape), res, model.predict(variant, shape, copy_tbps),
                        output_ok=not res.problems, wrong_launches=len(res.problems), launches=res.launches))
    for name in shipped(SLUG, answers):
        res = time_answer(SLUG, name, shape=shape, reps=reps, seed=seed)
        rows.append(answer_row(SLUG, name, res, model.predict(TIMED_ANSWERS[name], shape, copy_tbps),
                               kernel=f"exercise:{name}", shape=shape_str(shape)))
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


def claims(rows: list[dict], ceilings: dict | None = None) -> list[str]:
    """What the day teaches about these rows, checked on the measurement (each held on the H100 of
    build/h100-run9): the two conflict-free layouts run alike; the bank conflicts and the uncoalesced stores each
    cost a clear factor; the conflict-free answers are a clear factor faster than the others, so that a bar
    separates them. Returns the claims that failed."""
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
    dpad, dswz = by.get("records_padded"), by.get("records_swizzled")
    dsmem, dnaive = by.get("records_smem"), by.get("records_naive")
    if dpad and dswz and abs(dswz / dpad - 1) > SAME_SPEED:
        out.append(f"records: padding and XOR swizzle should run alike: {dpad:.3f} vs {dswz:.3f} TB/s")
    if dpad and dsmem and dsmem > dpad / MIN_SEPARATION:
        out.append(f"records: the 32-way bank conflict should cost a clear factor: unpadded {dsmem:.3f} vs padded "
                   f"{dpad:.3f} TB/s")
    if dpad and dnaive and dnaive > dpad / MIN_SEPARATION:
        out.append(f"records: a lane walking its own record should cost a clear factor: naive {dnaive:.3f} vs "
                   f"padded {dpad:.3f} TB/s")
    hint = bar_hint(rows)
    if hint and hint["separation"] < MIN_SEPARATION:
        out.append(f"the conflict-free answers ({hint['conflict_free_tbps']:.3f} TB/s) are only "
                   f"{hint['separation']:.2f}x the unpadded / naive ones ({hint['best_wrong_mechanism_tbps']:.3f}"
                   f" TB/s): no throughput bar separates them reliably (need >= {MIN_SEPARATION}x)")
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
    return TOPIC.plot(rows, ceiling_tbps, bar_tbps)


# The evidence that the known-bad answers fail, from the last run's measure (recorded beside its rows by extra).
def _measure(quick: bool) -> tuple[list[dict], list[str], dict]:
    """The known-bad answers (their failures are the run's failures, but do not stop it; what they did is recorded
    as "known_bad"), then the timings."""
    failures, evidence = check_bad_answers(shapes=QUICK_SHAPES if quick else TEST_SHAPES)
    reps = 10 if quick else 20
    return measure(reps=reps) + measure_demo(reps=reps), failures, {"known_bad": evidence}


def extra(rows: list[dict], ceil: dict, checked: dict) -> dict:
    copy_tbps = ceil["copy_tbps"]
    return {
        "bench_shape": list(BENCH_SHAPE),
        # the hypothesis the naive row refutes: L2 merging none of the partial writes (day 1's DRAM cost for each)
        "naive_unmerged_prediction_tbps": model.predict("naive", BENCH_SHAPE, copy_tbps, merge="instruction").tbps,
        "tile_costs": {v: model.predict(v, BENCH_SHAPE, copy_tbps).as_dict()["cost"] for v in VARIANTS},
        "bar_hint": bar_hint(rows, copy_tbps),
    }


TOPIC = Topic(
    slug=SLUG, title="Day 2: transpose bandwidth",
    check=lambda quick: check_all(shapes=QUICK_SHAPES if quick else TEST_SHAPES) + check_demo(),
    measure=_measure,
    constants=lambda: {"CLOCK_GHZ": model.CLOCK_GHZ, "WAVEFRONTS_PER_CLK": model.WAVEFRONTS_PER_CLK,
                       "DRAM_FRACTION_OF_COPY": model.DRAM_FRACTION_OF_COPY,
                       "L2_REQUESTS_PER_NS": model.L2_REQUESTS_PER_NS, "DRAM_GRANULE_BYTES": model.DRAM_GRANULE_BYTES,
                       "PARTIAL_WRITE_COST": model.PARTIAL_WRITE_COST, "fit": model.FIT_SOURCE},
    fit=fits, claims=claims, extra=extra,
    # the scaffold's predicted-vs-measured plot, replaced by the same with this run's suggested bar as a line
    plots={f"{SLUG}_vs_model.png": lambda rows, c: plot(rows, c["copy_tbps"],
                                                        bar_hint(rows).get("suggested_bar_tbps"))})
run = TOPIC.run


if __name__ == "__main__":
    TOPIC.main(__doc__)
