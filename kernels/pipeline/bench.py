"""Day 4's benchmark: check, time and model the streaming-sum pipeline at 1-4 stages (three APIs) and the resample
exercise's known answers, beside the copy ceiling of the same run.

    python -m kernels.pipeline.bench --out build/gpu        # the GPU script calls run()

Rows timed:
  - stream_sum_pipe (cuda::pipeline, thread scope) at 1, 2, 3, 4 stages, 1 block per SM (a persistent grid of SMs
    blocks of 4 KiB tiles): Little's law with 1-4 tiles in flight per SM — the model's stage curve;
  - stream_sum_roles (block-scope pipeline_shared_state, a producer warp and 4 consumer warps) at 1-4 stages;
  - stream_sum_prim (__pipeline_* primitives) at 4 stages, stream_sum_pipe at 8 stages (past the knee: the
    bandwidth caps it) and at 1 stage with 4 blocks per SM (the same 16 KiB in flight per SM as 4 stages of 1 block);
  - resample at B=128, S=T=4096, D=256, timed by the grader's own function (kernels.topic.time_answer, every launch
    verified), with the known answers the grader hands in (autograder.benchmarks): the course reference (the solution,
    a thread-scope cuda::pipeline), its primitives twin, the known answers not_pipelined and reads_twice
    (expected.toml says they reach the bar too; this recording is what decides), and two measured rungs of the
    lesson that are not known answers (rungs/ beside them): the same algorithm through a block-scope cuda::pipeline
    (block_scope, the course solution until it measured at the bar) and the exercise's first solution, a binary
    search per target (search_per_target).
Checks: every stream kernel at every stage against float64 per-block partial sums on awkward sizes (poisoned
outputs); the resample answers that must be correct on the spec's shapes (2 fresh runs each); the known-bad answers
(missing_wait, off_by_one) must FAIL the same check. A failed check does not stop the run (keep_going): everything
is timed and recorded first (a row whose check failed says so), then run() returns ok=False with every failure.
The order, the band, the record and the generic plot are the shared scaffold's (kernels/topic.py).
"""

from __future__ import annotations

from ..bench import bench, ceilings
from ..check import compare
from ..topic import (MODEL_BAND, Topic, attempt, answer_cubin, answer_row, check_kernels, check_reports, row,
                     run_answer, shipped, time_answer)
from . import exercise, model
from .launch import THREADS, stream_partials
from .workload import (BENCH_N, COMPILED_STAGES, STAGE_CHOICES, TEST_NS, VARIANTS, bytes_moved, make_inputs,
                       reference_partials)
from ..sim import plot_predicted_vs_measured

SLUG = "pipeline"
STREAM_RTOL = 1e-5  # fp32 accumulation of <= a few thousand U[0,1) values per thread vs float64
TIMED_ANSWERS = ("correct", "correct_primitives", "not_pipelined", "reads_twice")  # known answers: correct; timed
# Measured rungs of the lesson, not known answers (not graded, not in expected.toml): timed beside them. They are
# earlier answers of the exercise, so they live with the known answers (never in a student release) and come with
# them (autograder.benchmarks.answers: the topic's rungs/).
DEMO_ANSWERS = ("block_scope", "search_per_target")
# Must fail the correctness check. They run in the grading harness's own processes (autograder known, make
# gpu-test), never in this one: a race that reads garbage indices can fault and take this process's CUDA context
# with it (seen on the H100: missing_wait ended in an unspecified launch failure).
MUST_FAIL = ("missing_wait", "off_by_one")
IN_PROCESS_MUST_FAIL = ()
QUICK_SHAPE = (32, 4096, 4096, 256)  # --quick: a quarter of the benchmark's batches
DEVICE = "cuda"  # every tensor of the benchmark lives here (a test swaps in "cpu" with fake kernels)
MODEL_KIND = dict(model.ANSWER_KIND)  # answer -> the model's kind: correct and correct_primitives are "thread_scope"


def resample_cubin(name: str = "correct"):
    """A known answer or a measured rung of DEMO_ANSWERS, compiled like an answer (kernels.topic.answer_cubin)."""
    return answer_cubin(SLUG, name)


def resident_blocks(cub) -> int:
    """Blocks of resample per SM at the contract's block size and dynamic smem (the driver's occupancy figure)."""
    from ..launch import get_kernel

    occ = get_kernel(cub, exercise.KERNEL).occupancy
    smem = exercise.smem_bytes(exercise.BENCH_SHAPE[3])
    return int(occ.max_active_blocks_per_multiprocessor(exercise.BLOCK, smem))


def check_stream(seed: int = 1) -> list[str]:
    """Every stream kernel at every compiled stage count (1 and 2 blocks per SM) on awkward sizes, poisoned partials
    (the scaffold's loop)."""
    import torch

    sms = torch.cuda.get_device_properties(0).multi_processor_count
    failures = []
    for stages in COMPILED_STAGES:
        failures += check_kernels(
            [(v, bps) for v in VARIANTS for bps in (1, 2)], TEST_NS, seed=seed + stages, stride=31,
            inputs=lambda n, s: make_inputs(n, s, device=DEVICE), check={"rtol": STREAM_RTOL},
            reference_for=lambda run, x: reference_partials(x, run[1] * sms),
            output=lambda x, run: torch.empty(run[1] * sms, dtype=torch.float32, device=DEVICE),
            launch=lambda run, x, out: stream_partials(x, variant=run[0], stages=stages, blocks_per_sm=run[1],
                                                       out=out),
            label=lambda run: f"stream_sum_{run[0]} S={stages} x{run[1]}/SM")
    torch.cuda.synchronize()
    return failures


def check_resample(seed: int = 2, shapes=exercise.TEST_SHAPES, runs: int = 2) -> tuple[list[str], dict]:
    """The timed answers must be right on every shape and run; the known-bad ones must be wrong on at least one
    (the scaffold's loop, every report kept). Returns (failures, {answer: [messages]})."""
    names = shipped(SLUG, TIMED_ANSWERS + DEMO_ANSWERS + IN_PROCESS_MUST_FAIL)
    cubs = {name: resample_cubin(name) for name in names}
    seen: dict = {name: [] for name in names}
    wrong = dict.fromkeys(names, 0)
    for c in check_reports(names, shapes, seed=seed, stride=1000, draws=runs, check=exercise.CHECK,
                           inputs=lambda shape, s: exercise.make_inputs(shape, s, device=DEVICE),
                           reference=exercise.reference, output=lambda inp, name: exercise.make_output(inp),
                           launch=lambda name, inp, out: run_answer(SLUG, cubs[name], inp, out)):
        seen[c.run].append(f"{c.shape} run {c.draw}: {c.message.splitlines()[0]}")
        wrong[c.run] += not c.ok
    failures = []
    for name, msgs in seen.items():
        if name not in MUST_FAIL and wrong[name]:
            failures.append(f"resample {name} is wrong: " + "; ".join(m for m in msgs if "WRONG" in m)[:2000])
        if name in MUST_FAIL and not wrong[name]:
            failures.append(f"resample {name} passed every check: the check does not catch it")
    return failures, seen


def check(quick: bool = False) -> tuple[list[str], dict]:
    """The run's checks (a quick run: fewer shapes and one draw each) and what each saw, for the record."""
    failures: list[str] = []
    failures += attempt("check_stream", check_stream, failures, [])
    ex_failures, seen = attempt(
        "check_resample", lambda: check_resample(
            shapes=exercise.TEST_SHAPES[:4] + (exercise.RACE_SHAPE,) if quick else exercise.TEST_SHAPES,
            runs=1 if quick else 2), failures, ([], {}))
    failures += ex_failures
    return failures, seen


def measure_stream(n: int = BENCH_N, reps: int = 20, seed: int = 0) -> tuple[list[dict], list[str]]:
    """Time every streaming row of model.stream_rows() (fresh inputs each repetition, L2 flushed)."""
    import torch

    ceil = ceilings()
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    pool = [make_inputs(n, seed + k, device=DEVICE) for k in range(2)]
    state = {"i": 0, "last": None}
    rows, problems = [], []

    def make_args():
        state["i"] += 1
        x = pool[state["i"] % 2]
        x.uniform_()  # fresh values every repetition, in place
        state["last"] = x
        return (x,)

    for spec in model.stream_rows():
        v, s, bps = spec["variant"], spec["stages"], spec["blocks_per_sm"]
        out = torch.empty(bps * sms, dtype=torch.float32, device=DEVICE)
        res = bench(lambda x: stream_partials(x, variant=v, stages=s, blocks_per_sm=bps, out=out), make_args,
                    bytes=bytes_moved(n), reps=reps)
        rep = compare(out, reference_partials(state["last"], bps * sms), rtol=STREAM_RTOL)
        if not rep.ok:
            problems.append(f"{spec['kernel']} timed output: {rep.message.splitlines()[0]}")
        pred = model.predict_stream(s, ceil["copy_tbps"], variant=v, blocks_per_sm=bps, n=n, n_sm=sms)
        rows.append(row(spec["kernel"], f"n=2^{n.bit_length() - 1} fp32", res, pred, variant=v, stages=s,
                        blocks_per_sm=bps, n=n, threads=THREADS[v]))
    return rows, problems


def measure_resample(shape=exercise.BENCH_SHAPE, reps: int = 20, seed: int = 0,
                     answers=TIMED_ANSWERS + DEMO_ANSWERS) -> tuple[list[dict], list[str]]:
    """Time the exercise's answers at `shape` with the grader's own function (fresh inputs in the same buffers every
    repetition, every launch verified, L2 flushed, honest bytes: exercise.bytes_moved)."""
    import torch

    ceil = ceilings()
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    rows, problems = [], []
    if exercise.bytes_for(exercise.make_inputs(shape, seed, device=DEVICE)) != exercise.bytes_moved(shape):
        problems.append(f"resample at {shape}: not every source row is needed, bytes_moved overcounts")
    for name in shipped(SLUG, answers):
        try:
            cub = resample_cubin(name)
            res = time_answer(SLUG, name, shape=shape, reps=reps, seed=seed, cubin=cub)
        except Exception as exc:  # noqa: BLE001 - one answer that cannot be timed must not cost the others' rows
            problems.append(f"resample ({name}) could not be timed: {type(exc).__name__}: {exc}")
            continue
        resident = resident_blocks(cub)
        try:
            usage = model.resource_usage(cub, exercise.KERNEL)
        except (FileNotFoundError, KeyError, OSError):  # no cuobjdump here: registers are only reported
            usage = {}
        pred = model.predict_resample(shape, ceil["copy_tbps"], kind=MODEL_KIND[name], blocks_per_sm_=resident,
                                      n_sm=sms)
        rows.append(answer_row(SLUG, name, res, pred, shape="B={} S={} T={} D={} bf16".format(*shape),
                               kind=MODEL_KIND[name], shape_tuple=list(shape), blocks_per_sm=resident,
                               registers=usage.get("REG"), local_bytes=usage.get("LOCAL"),
                               model_search_rounds=pred.detail["search_rounds"],
                               model_dead_fraction=pred.detail["dead_fraction"],
                               known_answer=name not in DEMO_ANSWERS))
        torch.cuda.empty_cache()
    return rows, problems


def measure(quick: bool = False, reps: int | None = None) -> tuple[list[dict], list[str]]:
    """All rows: (rows, problems of timed outputs); a quick run times a quarter of the work, 10 repetitions."""
    reps = reps or (10 if quick else 20)
    r1, p1 = measure_stream(n=BENCH_N // (4 if quick else 1), reps=reps)
    r2, p2 = measure_resample(shape=QUICK_SHAPE if quick else exercise.BENCH_SHAPE, reps=reps)
    return r1 + r2, p1 + p2


def refit(rows: list[dict], ceiling_tbps: float) -> dict:
    """model.fit on this run's rows; each row gets the refit constants' prediction beside the model's."""
    fitted = model.fit(rows, ceiling_tbps)
    for r in rows:
        r["model_prediction_refit"] = model.predict(r, ceiling_tbps, **fitted)
    return fitted


def claims(rows: list[dict], ceilings: dict) -> list[str]:
    """The statements the notebook makes about the measurements (the streaming rows' stage curve, roles' hand-offs,
    the resample's window search against a search per target), checked on a run; returns the ones it breaks."""
    def tb(variant, stages, bps=1):
        return next((r["tbps"] for r in rows if (r.get("variant"), r.get("stages"), r.get("blocks_per_sm"))
                     == (variant, stages, bps) and r.get("tbps")), None)

    bad = []
    pipe = [tb("pipe", s) for s in STAGE_CHOICES]
    if None not in pipe:
        if pipe[1] < 1.4 * pipe[0]:
            bad.append(f"a second stage should add a tile in flight: pipe S=2 {pipe[1]:.2f} < 1.4 x S=1 {pipe[0]:.2f}")
        if any(b < 0.95 * a for a, b in zip(pipe, pipe[1:])):
            bad.append(f"throughput should not drop with more stages: pipe {[round(v, 2) for v in pipe]}")
    four, wide = tb("pipe", 4), tb("pipe", 1, 4)
    if four and wide and abs(wide / four - 1) > 0.25:
        bad.append(f"4 blocks x 1 stage ({wide:.2f}) and 1 block x 4 stages ({four:.2f}) should be alike")
    prim4 = tb("prim", 4)
    if prim4 and four and abs(prim4 / four - 1) > 0.10:
        bad.append(f"prim and pipe are the same instructions: S=4 {prim4:.2f} vs {four:.2f}")
    r1, p1 = tb("roles", 1), tb("pipe", 1)
    if r1 and p1 and r1 > 1.05 * p1:
        bad.append(f"roles adds hand-offs to the round trip: roles S=1 {r1:.2f} > pipe S=1 {p1:.2f}")

    def ex(answer):
        return next((r["tbps"] for r in rows if r.get("answer") == answer and r.get("tbps")), None)

    # H100, 2026-11-22 (build/h100-run12): the per-target search costs the course solution almost nothing (the other
    # resident blocks stream while one searches); the block-scope cuda::pipeline's per-tile hand-over does cost
    # (block_scope 2.44 vs correct_primitives 2.71 TB/s). correct (thread-scope cuda::pipeline) and correct_primitives
    # compile to the same instructions (tests/test_pipeline.py), so they must time alike.
    ref, prim_, blk, old = ex("correct"), ex("correct_primitives"), ex("block_scope"), ex("search_per_target")
    if ref and prim_ and abs(ref / prim_ - 1) > 0.10:
        bad.append(f"a thread-scope cuda::pipeline and the primitives are the same instructions: resample (correct) "
                   f"{ref:.2f} vs (correct_primitives) {prim_:.2f} TB/s")
    for name, fast in (("correct", ref), ("correct_primitives", prim_)):
        if fast and blk and fast < 1.05 * blk:
            bad.append(f"each thread's own cp.async groups + one __syncthreads skip the block-scope pipeline's "
                       f"per-tile hand-over: resample ({name}) {fast:.2f} vs (block_scope) {blk:.2f} TB/s")
        if fast and old and fast < 1.05 * old:
            bad.append(f"the window search + a thread-scope ring should beat a binary search per target: resample "
                       f"({name}) {fast:.2f} vs (search_per_target) {old:.2f} TB/s")
    top = max((r["tbps"] for r in rows if r.get("tbps")), default=0.0)
    if top > 1.25 * ceilings["copy_tbps"]:
        bad.append(f"{top:.2f} TB/s is above 1.25 x the copy ceiling ({ceilings['copy_tbps']:.2f}): bytes miscounted?")
    return bad


def solution_checks(rows: list[dict], ceilings: dict) -> list[str]:
    """No timed answer may use local memory. (The course reference against this run's bar, with the course's margin,
    is the grader's check: autograder.benchmarks.bar_checks.)"""
    return [f"{r['kernel']} uses {r['local_bytes']} bytes of local memory per thread" for r in rows
            if r.get("local_bytes")]


def extra(rows: list[dict], ceilings: dict, checked: dict) -> dict:
    """The record's day-4 facts: the checks' evidence (each row says whether its check failed), the refit's band,
    the bench shape's bytes and the course reference's fraction of the ceiling."""
    seen, failures = checked["evidence"], checked["failures"]
    wrong = {name for name, msgs in seen.items() if name not in MUST_FAIL and any("WRONG" in m for m in msgs)}
    for r in rows:
        r["check_failed"] = r.get("answer") in wrong or any(r["kernel"] in f for f in failures)
    refit_ = [abs(r["model_prediction_refit"] / r["tbps"] - 1) for r in rows if r.get("model_prediction_refit")]
    ref = next((r for r in rows if r.get("answer") == "correct"), None)
    return {"model_band_refit": max(refit_, default=float("nan")), "bench_shape": list(exercise.BENCH_SHAPE),
            "bytes_bench_shape": exercise.bytes_moved(exercise.BENCH_SHAPE),
            "reference_fraction_of_ceiling": ref["fraction_of_ceiling"] if ref else None,
            "known_bad_caught": {k: [m for m in v if "WRONG" in m][:3] for k, v in seen.items() if k in MUST_FAIL},
            "check_failures": failures}


def plot(rows: list[dict], ceiling_tbps: float | None = None):
    """Two panels: TB/s vs stages (measured and model) for pipe and roles; every row vs its prediction."""
    from matplotlib.figure import Figure


    fig = Figure(figsize=(13.0, 4.6), layout="constrained")
    ax1, ax2 = fig.subplots(1, 2, width_ratios=[1, 2])
    for variant, color in (("pipe", "#4C72B0"), ("roles", "#C44E52")):
        pts = sorted((r["stages"], r["tbps"], r["model_prediction"]) for r in rows
                     if r.get("variant") == variant and r.get("blocks_per_sm") == 1)
        if pts:
            ax1.plot([p[0] for p in pts], [p[1] for p in pts], "o-", color=color, label=f"{variant} measured")
            ax1.plot([p[0] for p in pts], [p[2] for p in pts], "D--", color=color, alpha=0.6,
                     label=f"{variant} model")
    if ceiling_tbps:
        ax1.axhline(ceiling_tbps, color="grey", linestyle=":", linewidth=1)
        ax1.text(1, ceiling_tbps * 1.01, f"copy ceiling {ceiling_tbps:.2f} TB/s", fontsize="small")
    ax1.set_xlabel("stages (tiles in flight per block), 1 block/SM")
    ax1.set_ylabel("TB/s")
    ax1.set_title("Streaming sum: throughput vs stages")
    ax1.set_ylim(bottom=0)
    ax1.set_xticks(sorted({r["stages"] for r in rows if r.get("blocks_per_sm") == 1}))
    ax1.legend(fontsize="small")
    short = [{**r, "kernel": r["kernel"].replace("stream_sum_", "").replace("resample ", ""), "shape": ""}
             for r in rows]
    plot_predicted_vs_measured(short, ax=ax2, title=f"{TOPIC.title}, measured vs model", band=0.15,
                               outer_band=MODEL_BAND)
    return fig


TOPIC = Topic(
    slug=SLUG, title="Day 4: pipeline", check=check, measure=measure,
    constants=lambda: {"idle_latency_ns": model.IDLE_LATENCY_NS,
                       "latency_slope_ns_per_tbps": model.LATENCY_SLOPE_NS_PER_TBPS, "compute_ns": model.COMPUTE_NS,
                       "handoff_ns": model.HANDOFF_NS, "read_ceiling": model.READ_CEILING,
                       "mixed_ceiling": model.MIXED_CEILING, "round_ns": model.ROUND_NS,
                       "ex_compute_ns": model.EX_COMPUTE_NS, "fitted": model.FITTED},
    fit=refit, claims=lambda rows, c: claims(rows, c) + solution_checks(rows, c), extra=extra,
    # the two-panel figure replaces the scaffold's <slug>_vs_model.png (its right panel is that plot)
    plots={f"{SLUG}_vs_model.png": lambda rows, c: plot(rows, c["copy_tbps"])},
    keep_going=True)
run = TOPIC.run


if __name__ == "__main__":
    TOPIC.main(__doc__)
