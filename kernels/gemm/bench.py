"""Week 2, day 4's benchmark: check every GEMM rung (the five CUDA rungs, Triton, cuBLAS) on awkward shapes, then
time them at 8192^3, 2048^3 and a skinny 128 x 8192 x 8192 with the model's prediction beside each CUDA row, rung 3's
ring depths (1, 2, 4, 6 stages), and the exercise's known answers timed by the grader's own function — all in one
run, all on the exercise's inputs (kernels/gemm/exercise.py make_inputs: bf16 N(0, 1) / K^0.25), so that every
ratio (a rung over cuBLAS, the solution over its bar) compares like with like. The SM clock is read during every
timing (kernels.clock; None where it cannot be read).

One lesson is about the data itself (data_effect): the best CUDA rung and cuBLAS at 8192^3, each timed on the
exercise's inputs and on plain N(0, 1), rows tagged `data` "exercise" / "normal" and `lesson` "data_effect", with
the mean SM clock of each timing. Another is rung 6 against cuBLAS (parity_rounds: rung 6, cuBLAS, Triton and rung 5
timed in turn, PARITY_ROUNDS rounds, on the exercise's data in the ladder and on both data in make gpu-test's
'claims rounds' step, rows `lesson` "parity"; the parity goal is judged on the median of the rounds' ratios:
parity_summary, parity_line). Claims, the goal and the model read only the
exercise-data rows (main_rows).

    python -m kernels.gemm.bench --out build/gpu [--quick]

Rung 6's switches and ncu's tensor-pipe share of rungs 5 and 6: kernels/gemm/rung6.py.

`check_all()` and `measure()` serve the notebook's Explore section; `run()` also writes the record and the plots.
Everything here needs an sm_90 GPU except `claims()`, `best_cuda()`, `main_rows()`, `data_effect_summary()`, the
`*_line()` texts, `parity_summary()`, `rung6_lines()` and the plots.
"""

from __future__ import annotations


from .. import record
from ..bench import bench, kernel_names, refill, rotating_inputs
from ..clock import timed
from ..topic import Topic, answer_row, check_answers, check_kernels, exercise_of, row, shipped, time_answer
from . import baselines, epilogue, exercise, model, story
from .launch import CONFIG, CUDA_VARIANTS, RUNGS, VARIANTS, gemm
from .workload import DATA, MEASURE_ORDER, SHAPES, TEST_SHAPES, flops, inputs_for, make_inputs, reference, shape_name
from ..compare import round_orders
from .rounds import (CLAIM_PAIRS, GOAL, PARITY_GOAL, data_effect_line, data_effect_rounds,  # noqa: F401 - the day's
                     data_effect_summary, goal_line, parity_line, parity_summary, pass_line, rounds_of)  # claim texts

SLUG = "gemm"
SOLUTION_STAGES = 4             # the course solution: `constexpr int STAGES = 4` (a test holds them equal)
TIMED_ANSWERS = ("correct", "one_stage")
SWEEP = (1, 2, 6)               # rung 3's other ring depths (4 is the rung itself)
RTOL = exercise.CHECK["rtol"]


def configs(quick: bool = False) -> list[dict]:
    """The timed rows: every rung at every shape, rung 3's sweep (not at the skinny shape when quick)."""
    out = []
    for shape in MEASURE_ORDER:
        for v in RUNGS:  # every rung this copy of the course holds (a student release: no rung 6)
            out.append({"name": v, "variant": v, "stages": None, "shape": shape})
        for st in SWEEP if not quick or shape == SHAPES[0] else ():
            out.append({"name": f"pipelined s{st}", "variant": "pipelined", "stages": st, "shape": shape})
    return out


def check_all(seed: int = 1) -> list[str]:
    """Every rung (and rung 3 at every swept depth) on every awkward test shape against the fp32 reference, NaN-
    poisoned outputs (the scaffold's loop); the exercise's timed known answers on the spec's test shapes. Returns the
    failures."""
    runs = [(v, None) for v in RUNGS] + [("pipelined", st) for st in SWEEP]
    return check_kernels(
        runs, TEST_SHAPES, inputs=make_inputs, reference=reference, check={"rtol": RTOL}, seed=seed,
        output=lambda inp, run: exercise.make_output(inp), shape_name=shape_name,
        launch=lambda run, inp, out: gemm(inp["a"], inp["b"], run[0], out=out, stages=run[1]),
        label=lambda run: f"{run[0]}{'' if run[1] is None else f' s{run[1]}'}") \
        + check_answers(SLUG, TIMED_ANSWERS, seed=seed + 200)


def _launcher(variant: str, stages, shape):
    """fn(inputs) that runs one rung (or a baseline of kernels.gemm.baselines) at `shape` into an output of its own
    (allocated here, on the GPU)."""
    import torch

    if variant in baselines.RUNS:
        return baselines.launcher(variant, shape)

    out = torch.empty(shape[0], shape[1], dtype=torch.bfloat16, device="cuda")

    def fn(inp):
        gemm(inp["a"], inp["b"], variant, out=out, stages=stages)

    return fn


def _time_rung(variant: str, stages, shape, data: str, pool, clock, reps: int, seed: int):
    """(BenchResult, mean SM MHz while it ran) of one rung at one shape on `data`'s inputs."""
    fn = _launcher(variant, stages, shape)
    slow = variant == "tiled" and shape[0] * shape[1] * shape[2] > 2048 ** 3
    args = rotating_inputs(pool, refill(inputs_for(data), shape, seed + 1000))  # fresh draws of `data` per repetition
    return timed(clock, lambda: bench(fn, args, flops=flops(shape),
                                      reps=3 if slow else reps, warmup=1 if slow else 3))


def measure(reps: int = 10, seed: int = 0, quick: bool = False) -> list[dict]:
    """Time each row on the exercise's inputs (fresh each repetition, L2 flushed) with the model's prediction beside
    the rungs and the SM clock while it ran; then the data-effect lesson (data_effect) and the exercise's known
    answers (the grader's own timer, the exercise's inputs)."""
    import torch

    from ..bench import ceilings
    from ..clock import SmClock

    dram = ceilings()["copy_tbps"]
    rows, pool, pool_shape = [], None, None
    with SmClock() as clock:
        for cfg in configs(quick):
            shape = cfg["shape"]
            if shape != pool_shape:
                pool = None
                torch.cuda.empty_cache()
                pool, pool_shape = [make_inputs(shape, seed + k) for k in range(2)], shape
            res, mhz = _time_rung(cfg["variant"], cfg["stages"], shape, "exercise", pool, clock, reps, seed)
            mcfg = model.configs_for(shape, cfg["stages"]).get(cfg["variant"])
            pred = model.predict_config(mcfg, dram) if mcfg else None
            rows.append(row(cfg["name"], shape_name(shape), res, pred, variant=cfg["variant"], stages=cfg["stages"],
                            config_name=cfg["name"], data="exercise", sm_mhz=mhz, clock_source=clock.source,
                            config=None if mcfg is None else {"tile": list(mcfg.tile), "stages": mcfg.stages,
                                                              "consumers": mcfg.consumers,
                                                              "ctas_per_sm": mcfg.ctas_per_sm,
                                                              "persistent": mcfg.persistent, "share": mcfg.share,
                                                              "structure": mcfg.structure}))
        pool = None
        torch.cuda.empty_cache()
        rows += data_effect(rows, clock, reps=reps, seed=seed)
        if not quick:
            rows += parity_rounds(clock, reps=reps, seed=seed, datas=("exercise",))  # the ladder's: as before
        for name in shipped(SLUG, TIMED_ANSWERS):  # none in a notebook: the grader hands the known answers over
            ex_shape = tuple(exercise_bench_shape())
            res, mhz = timed(clock, lambda name=name: time_answer(SLUG, name, reps=reps, seed=seed))
            res = {**res, "bytes": None}  # a TFLOPS row, not a TB/s one
            st = SOLUTION_STAGES if name == "correct" else 1
            # the exercise's kernel: rung 4's structure with wait 0 (two consumers hide each other's drain)
            pred = model.predict_config(model.configs_for(ex_shape, st)["exercise"], dram)
            rows.append(answer_row(SLUG, name, res, pred, shape=shape_name(ex_shape), variant="exercise", stages=st,
                                   config_name=f"exercise s{st}", data="exercise", sm_mhz=mhz,
                                   clock_source=clock.source))
    torch.cuda.empty_cache()
    return rows


def data_effect(rows: list[dict], clock=None, reps: int = 10, seed: int = 0, shape=SHAPES[0]) -> list[dict]:
    """The day's one data-effect lesson: the best CUDA rung of `rows` at `shape` and cuBLAS, each timed on the
    exercise's inputs and on plain N(0, 1) entries (workload.DATA), back to back, with the mean SM clock of each
    timing. Rows named "<rung> (<data> data)", `lesson` "data_effect"; nothing else reads them (claims, the goal and
    the model use the main rows, all on the exercise's data)."""
    import torch

    best_name, _ = best_cuda(rows, shape_name(shape))
    best = next((r for r in rows if r.get("config_name") == best_name and r["shape"] == shape_name(shape)), None)
    runs = ([(best_name, best["variant"], best.get("stages"))] if best else []) + [("cublas", "cublas", None)]
    pool = [make_inputs(shape, seed + k) for k in range(2)]
    out = []
    for name, variant, stages in runs:
        for data in DATA:
            res, mhz = _time_rung(variant, stages, shape, data, pool, clock, reps, seed + 500)
            out.append(row(f"{name} ({data} data)", shape_name(shape), res, None, variant=variant, stages=stages,
                           config_name=f"{name} ({data} data)", data=data, lesson="data_effect", rung=name,
                           sm_mhz=mhz, clock_source=getattr(clock, "source", None)))
    del pool
    torch.cuda.empty_cache()
    return out


PARITY = ("store_warp", "cublas", "triton", "cluster")  # the rows of the parity rounds, in a round's forward order
CLAIM_RUNS = PARITY + baselines.RUNS  # the claims step's rounds: with the vendor's best (cuBLASLt's, Triton autotuned)

PARITY_ROUNDS = 18  # kernels.compare.ROUNDS: every run first and last equally often (the H100 record holds 6)

ROUND_DATA = ("normal", "exercise")  # a claim's two inputs (issue 40): plain N(0, 1) and the exercise's (workload.DATA)


def parity_kernels(shape=SHAPES[0], runs=PARITY, seed: int = 0) -> dict:
    """{run: the CUDA kernels one launch of it runs at `shape`, longest first} (kernels.bench.kernel_names, on the
    exercise's inputs, after a warm-up): the kernel each side of the parity claim is — cuBLAS's heuristic pick, the
    course's Triton kernel (fixed blocks, not autotuned). Measured once, before the rounds; a rounds record carries it
    as "kernels"."""
    import torch

    inp = make_inputs(shape, seed)
    out = {}
    for v in runs:
        fn = _launcher(v, None, shape)
        out[v] = kernel_names(lambda: fn(inp))
    del inp
    torch.cuda.empty_cache()
    return out


def parity_rounds(clock=None, reps: int = 10, seed: int = 0, shape=SHAPES[0], rounds: int = PARITY_ROUNDS,
                  runs=PARITY, datas=ROUND_DATA) -> list[dict]:
    """Rung 6 against cuBLAS (and Triton, rung 5) where one ladder pass is too coarse to tell: `rounds` rounds at
    `shape`, each timing every run once per input distribution of `datas` with the course timer (fresh draws of that
    data for every run of the pass: both sides of a ratio see the same data), the order rotated and reversed
    (kernels.compare.round_orders) and the datas' order swapped every other round — a clock that drifts over the
    minutes of the rounds (power, temperature) then weighs on both sides alike. Rows `lesson` "parity", `round` k,
    `data`; parity_summary reads them. Rung 6 and cuBLAS are a few percent apart at most, less than one ladder pass
    moves either of them — the reason for the rounds; the parity goal is judged on their median (parity_line)."""
    import torch

    pool = [make_inputs(shape, seed + k) for k in range(2)]
    out = []
    for k, order in enumerate(round_orders(list(runs), rounds)):  # rotated each pair of rounds, reversed every other
        for data in (datas if k % 2 == 0 else datas[::-1]):
            for variant in order:
                res, mhz = _time_rung(variant, None, shape, data, pool, clock, reps, seed + 700 + k)
                name = f"{variant} (parity round {k}" + ("" if data == "exercise" else f", {data} data") + ")"
                out.append(row(name, shape_name(shape), res, None, variant=variant, stages=None, config_name=name,
                               data=data, lesson="parity", round=k, rung=variant, sm_mhz=mhz,
                               clock_source=getattr(clock, "source", None)))
    del pool
    torch.cuda.empty_cache()
    return out


def rung6_lines(doc: dict | None) -> str:
    """Why rung 6 gains on rung 5, for the notebook: the model's per-tile epilogue and tensor-core busy share of each
    (epilogue.rung6_gain, with the record's copy ceiling), the tensor-pipe share ncu measured on the record's GPU
    (story.measured_tensor_pipe), and rung 6 against cuBLAS from the interleaved rounds of the record's GPU
    (parity_line)."""
    dram = ((doc or {}).get("ceilings") or {}).get("copy_tbps")
    gain = epilogue.rung6_gain(SHAPES[0], dram)
    names = {"cluster": "rung 5 (cluster)", "store_warp": "rung 6 (store_warp)"}
    lines = [f"model ({model.FIT['device']} fit): " + "; ".join(
        f"{names[v]} epilogue {g['epilogue_ns']:.0f} ns per tile, {g['tflops']:.1f} TFLOPS, tensor core busy "
        f"{g['tensor_busy']:.1%}" for v, g in gain.items())]
    tp = story.measured_tensor_pipe(doc)
    if tp:
        lines.append(f"ncu on {tp['device']} ({tp['date']}), {tp['metric'].split('.')[0]}, one launch each: " +
                     "; ".join(f"{names[v]} tensor pipe active {m['pct']:.1f} %"
                               for v, m in tp["variants"].items() if v in names))
    else:
        lines.append("no tensor-pipe counter for this record's GPU (make gpu-test writes kernels/gemm/counters_<gpu>"
                     ".json)")
    lines.append(parity_line(doc))  # rung 6 against cuBLAS: the rounds of the record's GPU, never one pass
    return "\n".join(lines)


def main_rows(rows: list[dict]) -> list[dict]:
    """The rows claims, ratios and the model read (model.main_row: every row timed on the exercise's data)."""
    return [r for r in rows if model.main_row(r)]


def exercise_bench_shape():
    """The exercise's bench shape, as the grader handed it with the known answers."""
    return exercise_of(SLUG)[0].bench_shape


def row_of(rows: list[dict], name: str, shape=shape_name(SHAPES[0]), lesson: bool = False) -> dict | None:
    """The row `name` (its config_name) at `shape` with a TFLOPS figure, timed on the exercise's data: a main row
    (main_rows), or with lesson=True a data-effect lesson row."""
    return next((r for r in rows if r.get("config_name", r["kernel"]) == name and r["shape"] == shape
                 and r.get("tflops") and bool(r.get("lesson")) == lesson and r.get("data", "exercise") == "exercise"),
                None)


def _tf(rows, name, shape=shape_name(SHAPES[0])):
    r = row_of(rows, name, shape)
    return r["tflops"] if r else None


def best_cuda(rows: list[dict], shape=shape_name(SHAPES[0])) -> tuple[str | None, float | None]:
    """The fastest CUDA rung at `shape` (main rows: the exercise's data) and its TFLOPS."""
    pts = {r["config_name"]: r["tflops"] for r in main_rows(rows) if r.get("variant") in CUDA_VARIANTS
           and r["shape"] == shape and r.get("tflops") and r.get("config_name")}
    if not pts:
        return None, None
    k = max(pts, key=pts.get)
    return k, pts[k]


def ring_depths(rows: list[dict], shape=shape_name(SHAPES[0])) -> dict:
    """Rung 3 at each timed ring depth: {stages: (TFLOPS, resident CTAs per SM or None)} (main rows)."""
    out = {}
    for r in main_rows(rows):
        if r.get("variant") == "pipelined" and r["shape"] == shape and r.get("tflops"):
            st = r.get("stages") or (r.get("config") or {}).get("stages") or CONFIG["pipelined"]["stages"]
            out[st] = (r["tflops"], (r.get("config") or {}).get("ctas_per_sm"))
    return out


def claims(rows: list[dict], ceilings: dict) -> list[str]:
    """What the notebook says about these rows (the main rows: every rung on the exercise's data): every
    tensor-core rung is >= 5x the FMA rung at 8192^3; rung 4 beats rung 2 there; rung 3's fastest ring depth is the
    deepest that still leaves two CTAs per SM (2 stages: 4 and 6 stages leave one), and it is >= 1.2x one stage;
    the exercise's solution was timed and its one-stage answer is slower. (The goal — best CUDA rung >= 0.90 x
    cuBLAS on the same data — is reported in extra(), not claimed.) Each holds on the H100 and the H200 records.
    Rung 6 (where a record has it) is faster than rung 5 at 8192^3: its epilogue leaves the tensor core's path."""
    bad = []
    t = {v: _tf(rows, v) for v in VARIANTS}
    if t["tiled"] and any(t[v] and t[v] < 5 * t["tiled"] for v in ("wgmma", "pipelined", "persistent", "cluster")):
        bad.append(f"a tensor-core rung is not 5x the FMA rung at 8192^3: {t}")
    if t["persistent"] and t["wgmma"] and t["persistent"] < t["wgmma"]:
        bad.append(f"rung 4 ({t['persistent']:.0f}) is slower than rung 2 ({t['wgmma']:.0f}) at 8192^3")
    if t["store_warp"] and t["cluster"] and t["store_warp"] <= t["cluster"]:  # records before rung 6: no row
        bad.append(f"rung 6 ({t['store_warp']:.0f}) is not faster than rung 5 ({t['cluster']:.0f}) at 8192^3: the "
                   "epilogue it takes off the tensor core's path (epilogue.rung6_gain) did not show")
    depth = ring_depths(rows)
    if len(depth) > 1:
        tf = {st: v[0] for st, v in depth.items()}
        two = [st for st, (_, c) in depth.items() if (c if c is not None else
               model.configs_for(SHAPES[0], st)["pipelined"].ctas_per_sm) >= 2]
        best = max(tf, key=tf.get)
        if two and best != max(two):
            bad.append(f"rung 3's fastest depth at 8192^3 is {best} stages, not {max(two)} (the deepest ring that "
                       f"leaves two CTAs per SM): {tf}")
        if 1 in tf and 2 in tf and tf[2] < 1.2 * tf[1]:
            bad.append(f"two stages ({tf[2]:.0f}) are not 1.2x one stage ({tf[1]:.0f}) at 8192^3")
    sol = next((r["tflops"] for r in rows if r.get("answer") == "correct"), None)
    one = next((r["tflops"] for r in rows if r.get("answer") == "one_stage"), None)
    if sol is None:
        bad.append("the exercise's course solution was not timed")
    elif one is not None and one >= sol:
        bad.append(f"the one-stage answer ({one:.0f}) is not slower than the solution ({sol:.0f})")
    return bad


def _extra(rows: list[dict], ceilings: dict, checked: dict | None = None) -> dict:
    name, best = best_cuda(rows)
    cub = _tf(rows, "cublas")
    sol = next((r["tflops"] for r in rows if r.get("answer") == "correct"), None)
    goal_met = best / cub >= GOAL if best and cub else None  # reported, not claimed: a run may fall short of it
    return {"best_cuda_rung": name, "best_cuda_tflops": best, "cublas_same_shape_tflops": cub,
            "best_cuda_over_cublas_row": best / cub if best and cub else None,
            "best_cuda_over_cublas_ceiling": best / ceilings["cublas_bf16_tflops"] if best else None,
            "goal": f"best CUDA rung >= {GOAL} x cuBLAS bf16 at 8192^3, same run, same data (the exercise's): "
                    + ("not measured" if goal_met is None else
                       f"{'met' if goal_met else 'not met'} ({best / cub:.3f}x)"),
            "goal_met": goal_met,
            "exercise_solution_over_cublas": sol / cub if sol and cub else None,
            "rung6_over_cublas": _tf(rows, "store_warp") / cub if _tf(rows, "store_warp") and cub else None,
            "rung6_over_rung5": (_tf(rows, "store_warp") / _tf(rows, "cluster")
                                 if _tf(rows, "store_warp") and _tf(rows, "cluster") else None),
            "inputs": "every row but the data-effect lesson's 'normal' ones: the exercise's make_inputs (bf16 "
                      "N(0, 1) / K^0.25); cublas_bf16_tflops of the ceilings: kernels.bench's N(0, 1) matmul",
            "data_effect": data_effect_summary(rows),
            "parity": parity_summary(rows),
            "flops_definition": "2*M*N*K (kernels/gemm/exercise.py)"}


def plot_ladder(rows: list[dict], ceilings: dict | None = None):
    """TFLOPS per rung at each shape (bars), the model's prediction (diamonds), cuBLAS of the same shape (line)."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(8.5, 4.2), layout="constrained")
    shapes = [shape_name(s) for s in SHAPES]
    axes = fig.subplots(1, len(shapes), sharey=False)
    for ax, sh in zip(axes, shapes):
        rs = [r for r in main_rows(rows) if r["shape"] == sh and r.get("variant") in VARIANTS and r.get("tflops")
              and r.get("stages") is None]
        names = [r["config_name"] for r in rs]
        ax.bar(range(len(rs)), [r["tflops"] for r in rs], color=["C0" if r["variant"] in CUDA_VARIANTS else "C7"
                                                                 for r in rs])
        for i, r in enumerate(rs):
            if r.get("model_prediction"):
                ax.plot(i, r["model_prediction"], "D", color="C3", markersize=5)
        cub = next((r["tflops"] for r in rs if r["variant"] == "cublas"), None)
        if cub:
            ax.axhline(cub, color="grey", linestyle="--", linewidth=1)
        ax.set_xticks(range(len(rs)), names, rotation=60, fontsize="small")
        ax.set_title(sh, fontsize="small")
    axes[0].set_ylabel("TFLOPS (2 M N K)")
    fig.suptitle("GEMM ladder: measured (bars), model (diamonds), cuBLAS (dashed)", fontsize="medium")
    return fig


TOPIC = Topic(
    slug=SLUG, title="Week 2 day 4: GEMM",
    check=check_all,
    measure=lambda quick: measure(reps=5 if quick else 10, quick=quick),
    constants=lambda: dict(model.CONSTANTS),
    claims=claims,
    extra=_extra,
    keep_going=True,
    held_out=model.HELD_OUT_CHECK,  # recorded as extra["model"], with a refit on this run's fit rows
    plots={"gemm_ladder.png": plot_ladder},
    known_misses=model.KNOWN_MISSES)
run = TOPIC.run


if __name__ == "__main__":
    TOPIC.main(__doc__)
