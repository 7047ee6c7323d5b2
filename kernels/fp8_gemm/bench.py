"""Week 3 day 1's benchmark (FP8 GEMM with block scaling): check and time the day's kernel and the vendor's, through
the course's scaffold.

    python -m kernels.fp8_gemm.bench --out build/gpu [--quick]

The check: gemm_fp8 (r1_block_scaled.cu, at 6 stages and at the 2 and 4 the model's rows time) and each baseline that
runs here against the fp32 product of the dequantized operands on awkward shapes (one k-block, N != M, K not a
multiple of 4 k-blocks), the course kernel's output poisoned with NaN first. The rows: rung 1 at the model's rows
(ROWS: shapes and builds, each with its config, the SM clock while it ran and the model's figure beside it; which
rows the model is fitted on and which are held out is the model's, kernels/fp8_gemm/model.py FIT_ROWS and HELD_OUT),
then each baseline at each of BENCH_SHAPES (kernels.bench's timer). The record's extra (measure's evidence): the
accuracy table (accuracy.accuracy_table: the worst of three seeds) and, unless --quick, the claim's interleaved rounds
at 8192^3 (rounds.ladder_rounds).

The model's figure: `model_prediction` once its constants are a record's fit (model.FITTED), at the run's mean SM
clock; before that `model_prior` (the priors' figure, judged by no band) — the scaffold's held-out check refits on the
run's own fit rows either way (extra["model"]). GPU time of the model's rows: 13 rows x (2 warm-ups + 5 timed + 5
wall-clock launches), ~ 4 ms a pass over all 13 at the priors' times (8192^3: ~ 1.2 ms), ~ 0.05 s of kernel time; the
inputs of 6 shapes, the L2 flushes and the two extra builds (2 and 4 stages: compiled once, cached) take the rest, a
few seconds in all beside the baselines and the rounds.
"""

from __future__ import annotations

from ..bench import bench
from ..clock import SmClock, timed
from ..device import gpu
from ..topic import Topic, answer_row, check_kernels, row, shipped, time_answer
from . import model, workload
from .launch import LADDER, gemm_fp8

TEST_SHAPES = [(128, 128, 128), (256, 384, 512), (384, 128, 640), (1024, 2048, 4096)]
BENCH_SHAPES = [(2048, 2048, 2048), (4096, 4096, 4096), workload.BENCH_SHAPE]  # the baselines' shapes
RTOL = 2e-3  # ||D - ref|| / ||ref||: the bf16 rounding of D is 1.5-1.7e-3 (tests/test_fp8_gemm_kernel.py says why)
ROUNDS = 18
MODEL_REPS, MODEL_WARMUP = 5, 2  # per model row: a few repetitions (the medians of 5 L2-flushed launches)

# The builds the model's rows time: name -> (promote, stages). nopromote: FP8_PROMOTE=0, the demonstration build (its
# output is right only for scales constant along K: timed here for the promotion's cost, never checked as an answer).
BUILDS = {"block_scaled": (True, 6), "block_scaled nopromote": (False, 6), "block_scaled s2": (True, 2),
          "block_scaled s4": (True, 4)}
# The model's rows, (build, shape), grouped by shape (one set of inputs a shape); every one is a FIT_ROWS or HELD_OUT
# row of the model (tests/test_fp8_gemm_model.py holds the two lists equal).
ROWS = (
    ("block_scaled", (4096, 4096, 4096)), ("block_scaled nopromote", (4096, 4096, 4096)),
    ("block_scaled s2", (4096, 4096, 4096)), ("block_scaled s4", (4096, 4096, 4096)),
    ("block_scaled", (4096, 4096, 16384)), ("block_scaled nopromote", (4096, 4096, 16384)),
    ("block_scaled", (4096, 4096, 1024)),
    ("block_scaled", (2048, 2048, 2048)), ("block_scaled nopromote", (2048, 2048, 2048)),
    ("block_scaled", (1536, 1408, 8192)), ("block_scaled", (1664, 1408, 8192)),
    ("block_scaled", workload.BENCH_SHAPE), ("block_scaled nopromote", workload.BENCH_SHAPE),
)
CHECKED = ("block_scaled", "block_scaled s2", "block_scaled s4")  # the builds checked against the reference
# The exercise's known answers timed by the grader's own function at the exercise's bench shape (only where the grader
# handed them over, make gpu-test): the course solution ("correct": its margin over the bar is what `autograder
# calibrate` reads) and the one-stage answer the spec keeps below the bar. The exercise's kernel is rung 1 with the
# student's promote: the model's figure for it is rung 1's at the answer's depth.
TIMED_ANSWERS = {"correct": 6, "one_stage": 1}


def _baselines() -> dict:
    """{name: fn(a, sa_t, b, sb)} of what is timed beside rung 1 at BENCH_SHAPES: rungs 2-6 (r2_wide.cu,
    r3_cluster.cu, r4_overlap.cu, r5_overlap_cluster.cu, r6_tma_store.cu; not modelled) where this copy has them,
    and the vendor baselines that run on this machine (baselines.supported)."""
    from .baselines import cublaslt_blockwise, supported  # imports torch and Triton: only where they run
    from .triton_fp8 import triton_fp8  # Triton: only where the baselines run

    ok = supported()
    rungs = {name: fn for name, (has, _, fn) in LADDER.items() if has}
    return rungs | {n: f for n, f in (("cublaslt_blockwise", cublaslt_blockwise), ("triton_fp8", triton_fp8))
                   if ok[n]["ok"]}


def _build(name: str):
    promote, stages = BUILDS[name]
    return lambda a, sa_t, b, sb, out=None: gemm_fp8(a, sa_t, b, sb, out=out, promote=promote, stages=stages)


def check_all() -> list[str]:
    """The course kernel (at each checked depth) and the baselines against the fp32 reference (the course kernel's
    output poisoned first)."""
    runs = {name: _build(name) for name in CHECKED}
    runs.update({n: (lambda a, sa_t, b, sb, out, f=f: f(a, sa_t, b, sb, out=out)) if n in LADDER  # rungs write out
                 else (lambda a, sa_t, b, sb, out, f=f: out.copy_(f(a, sa_t, b, sb))) for n, f in _baselines().items()})
    return check_kernels(list(runs), TEST_SHAPES, inputs=lambda shape, seed: workload.make_inputs(shape, seed),
                         reference=workload.reference, output=lambda inp, run: workload.make_output(inp),
                         launch=lambda run, inp, out: runs[run](inp["a"], inp["sa_t"], inp["b"], inp["sb"], out),
                         check={"rtol": RTOL})


def model_rows(quick: bool = False) -> list[tuple[str, tuple]]:
    """The (build, shape) rows measure() times for the model: all of ROWS, or those at the bench shape when quick."""
    return [(n, s) for n, s in ROWS if not quick or tuple(s) == tuple(workload.BENCH_SHAPE)]


def _time_model_rows(shape, names, inp, clock, sms) -> list[dict]:
    """The model's rows at one shape: each build timed on the same inputs, with its config and the SM clock."""
    out = []
    args = (inp["a"], inp["sa_t"], inp["b"], inp["sb"])
    d = workload.make_output(inp)
    for name in names:
        fn = _build(name)
        res, mhz = timed(clock, lambda fn=fn: bench(lambda: fn(*args, out=d), flops=workload.flops(shape),
                                                    reps=MODEL_REPS, warmup=MODEL_WARMUP))
        promote, stages = BUILDS[name]
        cfg = {"m": shape[0], "n": shape[1], "k": shape[2], "promote": promote, "stages": stages, "sms": sms}
        out.append(row(name, workload.shape_name(shape), res, None, config=cfg, sm_mhz=mhz,
                       clock_source=clock.source))
    return out


def _with_model(rows: list[dict]) -> None:
    """Each model row's figure at the run's mean SM clock: model_prediction once the model is fitted, else
    model_prior (module docstring)."""
    run = {"rows": rows}
    for r in rows:
        if not model.main_row(r):
            continue
        p = model.predict_config(model.row_config(r, run), model.run_sm_mhz(run))
        if model.FITTED:
            r["model_prediction"], r["model_bound"] = p.tflops, p.bound
        else:
            r["model_prior"], r["model_prior_bound"] = p.tflops, p.bound


def _time_baselines(shape, inp, fns, quick: bool) -> list[dict]:
    import torch

    out = []
    args = (inp["a"], inp["sa_t"], inp["b"], inp["sb"])
    for name, fn in fns.items():  # TFLOPS rows (no bytes: a GEMM is judged by its FLOPs)
        res = bench(lambda fn=fn: fn(*args), flops=workload.flops(shape), reps=5 if quick else 20)
        out.append(row(name, workload.shape_name(shape), res))
    da = workload.dequantize_rows(inp["a"], inp["sa"]).to(torch.bfloat16)
    db = workload.dequantize_blocks(inp["b"], inp["sb"]).to(torch.bfloat16)
    res = bench(lambda: da @ db.T, flops=workload.flops(shape), reps=5 if quick else 20)
    out.append(row("cublas_bf16", workload.shape_name(shape), res))
    return out


def measure(quick: bool = False):
    """The model's rows (model_rows), then the baselines at BENCH_SHAPES (at the bench shape only when quick), one set
    of inputs a shape; the record's evidence (_evidence)."""
    import torch

    rows = []
    fns = _baselines()
    todo = model_rows(quick)
    shapes = list(dict.fromkeys([tuple(s) for _, s in todo] + [tuple(s) for s in BENCH_SHAPES
                                                                if not quick or s == workload.BENCH_SHAPE]))
    sms = (gpu() or {}).get("sms")
    with SmClock() as clock:
        for shape in shapes:
            inp = workload.make_inputs(shape, seed=0)
            rows += _time_model_rows(shape, [n for n, s in todo if tuple(s) == shape], inp, clock, sms)
            if shape in [tuple(s) for s in BENCH_SHAPES]:
                rows += _time_baselines(shape, inp, fns, quick)
            del inp
            torch.cuda.empty_cache()
        rows += _time_answers(clock, sms)
    _with_model(rows)
    return rows, [], _evidence({"block_scaled": gemm_fp8, **fns}, quick)


def _time_answers(clock, sms) -> list[dict]:
    """The exercise's TIMED_ANSWERS, timed by the grader's own function (kernels.runner.time_exercise) on the
    exercise's inputs at its bench shape, the model's figure for rung 1 at the answer's depth beside each."""
    out = []
    shape = tuple(workload.BENCH_SHAPE)
    for name in shipped("fp8_gemm", TIMED_ANSWERS):  # none in a notebook: the grader hands the known answers over
        res, mhz = timed(clock, lambda name=name: time_answer("fp8_gemm", name))
        res = {**res, "bytes": None}  # a TFLOPS row, not a TB/s one
        p = model.predict_config(model.Config(*shape, True, TIMED_ANSWERS[name], int(sms or model.SMS)), mhz)
        fig = {} if model.FITTED else {"model_prior": p.tflops, "model_prior_bound": p.bound}  # as _with_model
        out.append(answer_row("fp8_gemm", name, res, p if model.FITTED else None, shape=workload.shape_name(shape),
                              stages=TIMED_ANSWERS[name], sm_mhz=mhz, clock_source=clock.source, **fig))
    return out


def _evidence(fns: dict, quick: bool) -> dict:
    """For the record: the accuracy table (the worst of three seeds at 4096^3; the build without promotion beside it)
    and, unless quick, the claim's interleaved rounds at 8192^3 (rounds.ladder_rounds)."""
    from .accuracy import accuracy_table  # imports torch: only on the GPU
    from .rounds import ladder_rounds

    no_promotion = {"block_scaled no promotion": lambda *a: gemm_fp8(*a, promote=False)}
    out = {"accuracy": accuracy_table(fns, shape=(4096, 4096, 4096), runs=3),
           "accuracy_no_promotion": accuracy_table(no_promotion, shape=(4096, 4096, 4096), runs=1)}
    if not quick:
        out["rounds"] = ladder_rounds(workload.BENCH_SHAPE, rounds=ROUNDS)
    return out


def plot_model(rows: list[dict], ceilings: dict | None = None):
    """The run's model rows against the model (model.plot_vs_model: fit rows marked, priors until fitted)."""
    g = gpu() or {}
    return model.plot_vs_model({"rows": rows, "device": g.get("name", "this run"), "sms": g.get("sms")})


TOPIC = Topic(slug="fp8_gemm", title="Week 3 day 1: FP8 GEMM with block scaling", check=check_all, measure=measure,
              constants=lambda: dict(model.CONSTANTS), fit=model.fit, keep_going=True,
              held_out=model.HELD_OUT_CHECK,  # recorded as extra["model"], with a refit on this run's fit rows
              plots={"fp8_gemm_vs_model.png": plot_model})  # replaces the common plot: priors shown until fitted
run = TOPIC.run

if __name__ == "__main__":
    TOPIC.main(__doc__)
