"""Day 5's benchmark: check, time and model every TMA rung, the sweep of the TMA model (box bytes x stages),
the Triton tensor-descriptor copies and the exercise's course solution, beside the copy ceiling of the same run.

    python -m kernels.tma.bench --out build/gpu        # the GPU script calls run() (kernels.topic's scaffold)

`check_all()` and `measure()` serve the notebook's Explore section; `run()` also writes recorded_h100.json and
the plots. Everything here needs an sm_90 GPU except `sweep_configs()`, `claims()` and `plot*()`.
"""

from __future__ import annotations

from ..bench import bench, ceilings, rotating_inputs
from ..topic import Topic, answer_row, check_answers, check_kernels, finish_sweep, row, shipped, time_answer
from . import exercise, model
from .launch import VARIANTS, copy, resident_blocks
from .workload import (BENCH_SHAPE, DEFAULT_BOX, ELEMENT_BYTES, SWEEP_BOXES, SWEEP_STAGES, TEST_SHAPES, box_bytes,
                       bytes_moved, make_inputs, reference)
from ..sass import path_evidence

SLUG = "tma"
# A shape with many boxes per block for every sweep box (128x128: 32 x 33 = 1056 boxes, 8 per block at one block
# per SM): every stage of every ring depth is reused, so a parity that did not flip would show.
SWEEP_CHECK_SHAPE = (4096, 4104)
DEFAULT_PIPE = {"box": DEFAULT_BOX, "stages": 3, "blocks_per_sm": 2}
TRITON_PROGRAM_THREADS = 128  # num_warps = 4
QUICK_SWEEP = {"boxes": ((32, 32), (64, 64)), "stages": (1, 4)}  # run(quick=True)


def sweep_configs(boxes=SWEEP_BOXES, stages=SWEEP_STAGES) -> list[dict]:
    """The benchmark's configurations: one-box-per-block copies, the pipelined sweep (one block per SM), the
    default pipelined copy, Triton (host and device descriptors)."""
    cfgs = []
    for box in boxes:
        cfgs.append({"name": f"tma_copy_tile {box[0]}x{box[1]}", "variant": "tile", "box": box, "stages": 1,
                     "blocks_per_sm": None,
                     "config": {"kernel": "tile", "box_bytes": box_bytes(box), "stages": 1,
                                "blocks_per_sm": resident_blocks(box, ELEMENT_BYTES, 1)}})
    for box in boxes:
        for s in stages:
            cfgs.append({"name": f"tma_copy_pipe {box[0]}x{box[1]} s{s} b1", "variant": "pipelined", "box": box,
                         "stages": s, "blocks_per_sm": 1,
                         "config": {"kernel": "pipelined", "box_bytes": box_bytes(box), "stages": s,
                                    "blocks_per_sm": 1}})
    b, s, bps = DEFAULT_PIPE["box"], DEFAULT_PIPE["stages"], DEFAULT_PIPE["blocks_per_sm"]
    cfgs.append({"name": f"tma_copy_pipe {b[0]}x{b[1]} s{s} b{bps}", "variant": "pipelined", "box": b, "stages": s,
                 "blocks_per_sm": bps,
                 "config": {"kernel": "pipelined", "box_bytes": box_bytes(b), "stages": s, "blocks_per_sm": bps}})
    for kind in ("triton", "triton_device"):
        cfgs.append({"name": f"triton_tma {'host' if kind == 'triton' else 'device'} {b[0]}x{b[1]}",
                     "variant": kind, "box": b, "stages": 1, "blocks_per_sm": None,
                     "config": {"kernel": kind, "box_bytes": box_bytes(b), "stages": 1,
                                "blocks_per_sm": model.resident_tile_blocks(box_bytes(b), TRITON_PROGRAM_THREADS)}})
    return cfgs


SOLUTION_STAGES = 5  # the course solution's ring (`constexpr int STAGES = 5`; a test holds them equal)
EXERCISE_CONFIGS = {
    "correct": {"kernel": "tma_add", "box_bytes": 64 * 64 * 2, "stages": SOLUTION_STAGES,
                "blocks_per_sm": exercise.BLOCKS_PER_SM, "boxes_per_stage": 2, "streams": 1.5},
    "plain_loads": {"kernel": "plain_loads", "box_bytes": 16, "stages": 2,
                    "blocks_per_sm": exercise.BLOCKS_PER_SM * exercise.BLOCK, "streams": 1.5},
}
TIMED_ANSWERS = tuple(EXERCISE_CONFIGS)  # the exercise's known answers the benchmark times (the grader's timer)


def _shape(shape) -> str:
    return "x".join(map(str, shape))


def check_all(seed: int = 1) -> list[str]:
    """Every rung against the reference: fresh inputs, awkward shapes, NaN-poisoned outputs, bit-exact (the
    scaffold's loop). Also the sweep configurations on a shape that reuses every stage, and the exercise's course
    solution (and the plain-load known answer, which is timed too) on the spec's test shapes. Returns the failures
    (empty when all are right)."""
    import torch

    loop = {"inputs": make_inputs, "reference": reference, "output": lambda x, run: torch.empty_like(x),
            "check": {"exact": True}}
    failures = check_kernels(VARIANTS, TEST_SHAPES, launch=lambda v, x, out: copy(x, v, out=out), seed=seed,
                             label=lambda v: v, **loop)
    failures += check_kernels(
        sweep_configs(), [SWEEP_CHECK_SHAPE], label=lambda cfg: cfg["name"], seed=seed + 100,
        launch=lambda cfg, x, out: copy(x, cfg["variant"], box=cfg["box"], stages=cfg["stages"],
                                        blocks_per_sm=cfg["blocks_per_sm"], out=out), **loop)
    return failures + check_answers(SLUG, TIMED_ANSWERS, seed=seed + 200)


def measure(shape=BENCH_SHAPE, reps: int = 20, seed: int = 0, configs=None, with_exercise: bool = True,
            with_baseline: bool = True) -> list[dict]:
    """Time each configuration (fresh inputs each repetition, L2 flushed), the model's prediction beside it; with
    `with_exercise`, the exercise's known answers too, timed by the grader's own function at the spec's shape."""
    import torch

    ceil = ceilings()["copy_tbps"]
    configs = sweep_configs() if configs is None else configs
    pool = [make_inputs(shape, seed + k) for k in range(2)]
    out = torch.empty_like(pool[0])
    rows = []
    for cfg in configs:
        def fn(x, cfg=cfg, out=out):
            copy(x, cfg["variant"], box=cfg["box"], stages=cfg["stages"], blocks_per_sm=cfg["blocks_per_sm"],
                 out=out)

        res = bench(fn, rotating_inputs(pool), bytes=bytes_moved(shape), reps=reps)
        pred = model.predict_config(model.Config(**cfg["config"]), ceil)
        rows.append(row(cfg["name"], _shape(shape), res, pred, config=cfg["config"], box=list(cfg["box"]),
                        stages=cfg["stages"], blocks_per_sm=cfg["blocks_per_sm"]))
    del pool, out
    if with_exercise:
        for name in shipped(SLUG, EXERCISE_CONFIGS):
            cfg = EXERCISE_CONFIGS[name]
            res = time_answer(SLUG, name, reps=reps, seed=seed)
            rows.append(answer_row(SLUG, name, res, model.predict_config(model.Config(**cfg), ceil),
                                   kernel=f"{exercise.NAME} {name}", config=cfg))
        torch.cuda.empty_cache()
    if with_baseline:
        rows += measure_baseline(shape, reps=reps)
    return rows


def measure_baseline(shape=BENCH_SHAPE, reps: int = 20) -> list[dict]:
    """Day 1's best plain copy (grid-stride, 4 x 16-byte loads per thread, 2048 threads per SM) moving the same
    bytes: what TMA has to match with one issuing thread per block."""
    try:
        from ..naive_loads.launch import copy as copy1  # day 1 may be left out of a release: no baseline then
    except ImportError:
        return []
    import torch

    n = shape[0] * shape[1] * ELEMENT_BYTES // 4  # fp32 words with the same byte count
    pool = [torch.randn(n, device="cuda") for _ in range(2)]
    out = torch.empty_like(pool[0])
    res = bench(lambda x: copy1(x, "grid_stride", out=out), rotating_inputs(pool), bytes=2 * 4 * n, reps=reps)
    return [row("naive_loads copy_grid_stride", _shape(shape), res, None, config=None,
                note="fp32, same bytes, 2048 thr/SM")]


def _answer(rows: list[dict], name: str) -> dict | None:
    return next((r for r in rows if r["kernel"] == f"{exercise.NAME} {name}"), None)


def claims(rows: list[dict], ceilings: dict) -> list[str]:
    """What the day teaches, checked: the exercise's course solution reaches >= 0.90x of the D2D copy ceiling (the
    bar is within reach); plain 16-byte loads under the same contract stay below it (expected.toml gives the
    plain-load known answer no throughput points: the bar separates TMA from plain loads)."""
    bad, ceil = [], ceilings["copy_tbps"]
    solution, plain = _answer(rows, "correct"), _answer(rows, "plain_loads")
    for name, r in (("correct", solution), ("plain_loads", plain)):
        if r is None or r.get("tbps") is None:
            bad.append(f"{exercise.NAME} {name} was not timed: the notebook's claim about it is unchecked")
    if solution and solution.get("tbps") is not None and solution["tbps"] < 0.90 * ceil:
        bad.append(f"the exercise's course solution reached {solution['tbps'] / ceil:.3f}x of the D2D copy ceiling "
                   "(< 0.90x): the bar would be out of reach")
    if plain and plain.get("tbps") is not None and plain["tbps"] >= 0.90 * ceil:
        bad.append(f"plain 16-byte loads under the exercise's contract reached {plain['tbps'] / ceil:.3f}x of the "
                   "ceiling (>= 0.90x): the bar would not separate TMA from plain loads")
    return bad


def triton_sass() -> dict:
    """Path evidence of the Triton copies as compiled here: the JIT's cubin of the last GPU launch when there was
    one, else compiled ahead of time. Errors are recorded, not raised (the Triton of the H100 image may differ)."""
    import triton

    from .triton_tma import LAST_COMPILED, aot_compile  # loads Triton: only the SASS step

    out = {}
    for kind in ("host", "device"):
        try:
            k = LAST_COMPILED.get(kind)
            if k is not None:
                cub, name, how = bytes(k.asm["cubin"]), k.metadata.name, "jit"
            else:
                art = aot_compile(kind)
                cub, name, how = art["cubin"], art["name"], "aot"
            ev = path_evidence(cub, name, require=["UTMALDG", "UTMASTG"], forbid=["LDG", "STG"])
            out[kind] = {"ok": ev.ok, "summary": ev.summary(), "triton": triton.__version__, "compiled": how}
        except Exception as exc:  # noqa: BLE001
            out[kind] = {"ok": False, "error": f"{type(exc).__name__}: {exc}"[:800], "triton": triton.__version__}
    try:
        aot_compile("host")
        out["aot_compile"] = "ok"
    except Exception as exc:  # noqa: BLE001
        out["aot_compile"] = f"failed: {type(exc).__name__}: {exc}"[:800]
    return out


def plot(rows: list[dict], ceiling_tbps: float | None = None):
    """Measured TB/s per configuration with the model's prediction and the copy ceiling of the same run."""
    return TOPIC.plot(rows, ceiling_tbps)


def plot_sweep(rows: list[dict], ceiling_tbps: float, constants: dict | None = None):
    """The TMA model's sweep: TB/s against stages (one block per SM), one line per box size — measured
    markers (when rows hold the sweep), model lines (with `constants`, e.g. a fit, instead of model.py's)."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6.5, 4.0), layout="constrained")
    ax = fig.add_subplot()
    kw = {} if not constants else {"latency_ns": constants["LATENCY_NS"]}
    sweep = [r for r in rows if r.get("config") and r["config"]["kernel"] == "pipelined"
             and r["config"]["blocks_per_sm"] == 1 and r.get("tbps")]
    sizes = sorted({r["config"]["box_bytes"] for r in sweep}) or [box_bytes(b) for b in SWEEP_BOXES]
    for i, bb in enumerate(sizes):
        pts = sorted((r["config"]["stages"], r["tbps"]) for r in sweep if r["config"]["box_bytes"] == bb)
        color = f"C{i}"
        if pts:
            ax.plot([p[0] for p in pts], [p[1] for p in pts], "o", color=color, label=f"box {bb // 1024} KiB measured")
        xs = list(range(1, max([p[0] for p in pts] or [max(SWEEP_STAGES)]) + 1))
        ax.plot(xs, [model.predict_config(model.Config("pipelined", bb, s, 1), ceiling_tbps, **kw) for s in xs],
                "-", color=color, alpha=0.7, label=f"box {bb // 1024} KiB model")
    ax.axhline(ceiling_tbps, color="grey", linestyle="--", linewidth=1, label="D2D copy ceiling")
    ax.set_xticks(list(range(1, max(SWEEP_STAGES + tuple(r["config"]["stages"] for r in sweep)) + 1)))
    return finish_sweep(ax, "stages (TMA requests in flight per SM, one block per SM)", "TB/s (read + written)",
                        "TMA model: X = N c / (T0 + N c / C), one block per SM")


def _extra(rows: list[dict], ceilings: dict, checked: dict) -> dict:
    solution, plain = _answer(rows, "correct"), _answer(rows, "plain_loads")
    return {"model_fitted_on": model.FIT, "triton_sass": triton_sass(),
            "exercise_solution_fraction": solution and solution["fraction_of_ceiling"],
            "exercise_plain_loads_fraction": plain and plain["fraction_of_ceiling"]}


TOPIC = Topic(
    slug=SLUG, title="Day 5: TMA",
    check=check_all,
    measure=lambda quick: measure(reps=10 if quick else 20, configs=sweep_configs(**QUICK_SWEEP) if quick else None),
    constants=lambda: {"LATENCY_NS": model.LATENCY_NS, "IDLE_LATENCY_NS": model.IDLE_LATENCY_NS,
                       "LATENCY_SLOPE_NS_PER_TBPS": model.LATENCY_SLOPE_NS_PER_TBPS},
    # a refit on this run's rows, for the record only: the predictions use model.py's constants (model.FIT)
    fit=model.fit,
    claims=claims,
    extra=_extra,
    plots={"tma_sweep.png": lambda rows, c: plot_sweep(rows, c["copy_tbps"]),
           "tma_sweep_fit.png": lambda rows, c: plot_sweep(rows, c["copy_tbps"], model.fit(rows, c["copy_tbps"]))})
run = TOPIC.run


if __name__ == "__main__":
    TOPIC.main(__doc__)
