"""Week 2, day 2's benchmark: check, time and model the three rungs of the row-sum ring (uniform, warp-specialized,
+ setmaxnreg) at several ring depths, and the exercise's course solution and its non-specialized twin, beside the
copy ceiling of the same run.

    python -m kernels.warp_specialization.bench --out build/gpu [--quick]

`check_all()` and `measure()` serve the notebook's Explore section; `run()` also writes the record and the plots;
`claim_rounds()` times COPY_CLAIMS against the D2D copy of the same bytes in interleaved rounds (kernels.copy_rounds:
make gpu-test's 'claims rounds' step). Everything here needs an sm_90 GPU except `sweep_configs()`, `claims()`,
`littles_law()` and `plot*()`.
"""

from __future__ import annotations


from ..bench import bench, ceilings, rotating_inputs
from .. import record
from ..copy_rounds import claim_entry_points, claim_names, common_rounds, shape_claim_runs
from ..topic import Topic, answer_row, check_answers, check_kernels, finish_sweep, row, shipped, time_answer
from . import exercise, model
from .launch import rowsum
from .workload import (BENCH_SHAPE, RTOL, SWEEP_STAGES, TEST_SHAPES, TILE_BYTES, VARIANTS, bytes_moved, make_inputs,
                       reference, tiles)

SLUG = "warp_specialization"
SOLUTION_STAGES = 8  # the course solution: `constexpr int STAGES = 8` (a test holds them equal)
CHECK_STAGES = (1, 3, 8)
TIMED_ANSWERS = ("correct", "all_threads")


def _sms() -> int:
    import torch

    return torch.cuda.get_device_properties(0).multi_processor_count


def _per_block(n_tiles: int, blocks: int) -> int:
    return -(-n_tiles // blocks)


def sweep_configs(stages=SWEEP_STAGES, sms: int = 132, shape=BENCH_SHAPE) -> list[dict]:
    """The benchmark's rows: every rung at every ring depth, one block per SM."""
    n = tiles(shape)
    blocks = min(n, sms)
    return [{"name": f"rowsum {v} s{s}", "variant": v, "stages": s,
             "config": {"kernel": v, "stages": s, "tiles_per_block": _per_block(n, blocks), "blocks": blocks,
                        "tile_bytes": TILE_BYTES, "streams": 1.0, "total_bytes": float(bytes_moved(shape))}}
            for v in VARIANTS for s in stages]


def exercise_configs(sms: int = 132) -> dict:
    """Model configs of the exercise's timed answers at its bench shape (exercise.BENCH_SHAPE, the spec's)."""
    shape = exercise.BENCH_SHAPE
    n = exercise.tiles(shape)
    blocks = min(n, sms)
    base = {"tiles_per_block": _per_block(n, blocks), "blocks": blocks, "tile_bytes": 2 * 64 * 64 * 2,
            "streams": 1.5, "total_bytes": float(exercise.bytes_moved(shape))}
    return {"correct": {"kernel": "ws_axpy", "stages": SOLUTION_STAGES, **base},
            "all_threads": {"kernel": "all_threads", "stages": SOLUTION_STAGES, **base}}


def check_all(seed: int = 1) -> list[str]:
    """Every rung at several ring depths against the float64 reference on the awkward shapes (the scaffold's loop:
    rowsum zeroes its poisoned output before it accumulates); the exercise's course solution and non-specialized
    answer on the spec's test shapes. Returns the failures."""
    import torch

    failures = check_kernels(
        [(v, st) for v in VARIANTS for st in CHECK_STAGES], TEST_SHAPES, inputs=make_inputs, reference=reference,
        check={"rtol": RTOL}, seed=seed, label=lambda run: f"rowsum {run[0]} s{run[1]}", shape_name=str,
        output=lambda x, run: torch.empty(x.shape[0], dtype=torch.float32, device=x.device),
        launch=lambda run, x, out: rowsum(x, run[0], stages=run[1], out=out))
    return failures + check_answers(SLUG, TIMED_ANSWERS, seed=seed + 200)


def measure(shape=BENCH_SHAPE, reps: int = 20, seed: int = 0, stages=SWEEP_STAGES, with_exercise: bool = True):
    """Time each rung and depth (fresh inputs each repetition, L2 flushed) with the model's prediction beside it;
    the exercise's known answers timed by the grader's own function."""
    import torch

    ceil = ceilings()["copy_tbps"]
    sms = _sms()
    pool = [make_inputs(shape, seed + k) for k in range(2)]
    out = torch.empty(shape[0], dtype=torch.float32, device="cuda")
    rows = []
    for cfg in sweep_configs(stages, sms, shape):
        res = bench(lambda x, cfg=cfg: rowsum(x, cfg["variant"], stages=cfg["stages"], out=out),
                    rotating_inputs(pool), bytes=bytes_moved(shape), reps=reps)
        pred = model.predict_config(model.Config(**cfg["config"]), ceil)
        rows.append(row(cfg["name"], "x".join(map(str, shape)), res, pred, config=cfg["config"],
                        stages=cfg["stages"], variant=cfg["variant"]))
    del pool
    if with_exercise:
        cfgs = exercise_configs(sms)
        for name in shipped(SLUG, TIMED_ANSWERS):
            res = time_answer(SLUG, name, reps=reps, seed=seed)
            rows.append(answer_row(SLUG, name, res, model.predict_config(model.Config(**cfgs[name]), ceil),
                                   kernel=f"{exercise.NAME} {name}", config=cfgs[name]))
        torch.cuda.empty_cache()
    return rows


# The day's claims against the D2D copy of the same bytes, in interleaved rounds (kernels.copy_rounds; make gpu-test's
# 'claims rounds' step): claim -> (its rungs, named as the ladder's rows, and their shape). The best ring depth of the
# warp-specialized rung and of the uniform one beside it (the notebook: specialization buys little on a streaming
# kernel); the exercise's course solution, whose bar is a fraction of the copy ceiling, timed only where the grader
# hands the known answers in (ANSWER_RUNGS: rung -> answer).
COPY_CLAIMS = {"rowsum s4": (("rowsum ws s4", "rowsum uniform s4"), BENCH_SHAPE),
               "ws_axpy": ((f"{exercise.NAME} correct",), exercise.BENCH_SHAPE)}
ANSWER_RUNGS = {f"{exercise.NAME} correct": "correct"}
CLAIM_ROUNDS = common_rounds(claim_names(rungs) for rungs, _ in COPY_CLAIMS.values())


def _rowsum_run(name: str, shape, reps: int, seed: int):
    """(timer, launch) of the rowsum rung `name` (a sweep_configs row) at `shape`: fresh N(0, 1) each repetition."""
    import torch

    cfg = next(c for c in sweep_configs(sms=_sms(), shape=shape) if c["name"] == name)
    pool = [make_inputs(shape, seed + k) for k in range(2)]
    out = torch.empty(shape[0], dtype=torch.float32, device="cuda")

    def fn(x):
        rowsum(x, cfg["variant"], stages=cfg["stages"], out=out)

    def timer(data: str, k: int):
        return bench(fn, rotating_inputs(pool), bytes=bytes_moved(shape), reps=reps)

    return timer, lambda: fn(pool[0])


# One claim of COPY_CLAIMS: ({rung: (timer, launch)}, the bytes each moves, the shape's name)
_claim_runs = shape_claim_runs(SLUG, COPY_CLAIMS, _rowsum_run, answers=ANSWER_RUNGS,
                               exercise_bytes=exercise.bytes_moved, day_bytes=bytes_moved)


# _claim_runs looked up at each call (the lambda), so that a test's replacement of it is what runs
claim_kernels, claim_rounds = claim_entry_points(COPY_CLAIMS, lambda *a: _claim_runs(*a), rounds=CLAIM_ROUNDS)


def _answer(rows, name):
    return next((r for r in rows if r["kernel"] == f"{exercise.NAME} {name}"), None)


DEEPER_GAIN = 1.3   # the best ring depth over one stage, every rung (H100 1.40-1.44x, H200 1.71-1.75x)
FLAT_GAIN = 1.10    # past Little's-law depth S* = C / X(1), a doubling of the ring buys less than this


def claims(rows: list[dict], ceilings: dict) -> list[str]:
    """What the notebook says about these rows, per rung: one stage is the slowest depth; the best depth is >=
    DEEPER_GAIN x one stage; and past Little's-law depth S* = C / X(1) (the stages whose bytes in flight cover the
    copy ceiling C of the same run x the one-stage turnaround) doubling the ring buys < FLAT_GAIN — the gain
    flattens once the ring covers the latency at this GPU's bandwidth. The exercise's solution was timed. Each holds
    on the H100 and the H200 records (S* ~ 1.9 and ~ 2.5)."""
    bad = []
    c = ceilings["copy_tbps"]
    for v in VARIANTS:
        pts = {r["stages"]: r["tbps"] for r in rows if r.get("variant") == v and r.get("tbps")}
        if not pts:
            continue
        if min(pts, key=pts.get) != min(pts):
            bad.append(f"rowsum {v}: the one-stage ring is not the slowest ({pts})")
        if 1 not in pts or len(pts) < 2:
            continue
        best = max(pts, key=pts.get)
        if pts[best] < DEEPER_GAIN * pts[1]:
            bad.append(f"rowsum {v}: the best ring ({best} stages, {pts[best]:.3f} TB/s) is {pts[best] / pts[1]:.2f}x "
                       f"one stage ({pts[1]:.3f}), not >= {DEEPER_GAIN}x")
        s_star = model.little_depth(pts[1], c)
        for s in sorted(pts):
            if s >= s_star and 2 * s in pts and pts[2 * s] >= FLAT_GAIN * pts[s]:
                bad.append(f"rowsum {v}: past Little's-law depth S* = C / X(1) = {c:.2f} / {pts[1]:.2f} = "
                           f"{s_star:.2f} stages, {2 * s} stages still ran {pts[2 * s] / pts[s]:.2f}x {s} stages "
                           f"(>= {FLAT_GAIN}x): the ring had not covered the latency")
    if _answer(rows, "correct") is None:
        bad.append("the exercise's course solution was not timed")
    return bad


def plot_stages(rows: list[dict], ceiling_tbps: float, constants: dict | None = None):
    """TB/s against the ring depth: measured markers per rung, the model's lines."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6.5, 4.0), layout="constrained")
    ax = fig.add_subplot()
    kw = {k.lower(): v for k, v in (constants or {}).items() if k.endswith("_NS")}
    sweep = [r for r in rows if r.get("variant") in VARIANTS and r.get("tbps")]
    depth = sorted({r["stages"] for r in sweep}) or list(SWEEP_STAGES)
    for i, v in enumerate(VARIANTS):
        pts = sorted((r["stages"], r["tbps"]) for r in sweep if r["variant"] == v)
        if pts:
            ax.plot([p[0] for p in pts], [p[1] for p in pts], "o", color=f"C{i}", label=f"{v} measured")
        cfg0 = next((r["config"] for r in sweep if r["variant"] == v), None) or sweep_configs((1,))[i]["config"]
        xs = list(range(1, max(depth) + 1))
        ys = [model.predict_config(model.Config(**{**cfg0, "stages": s}), ceiling_tbps, **kw) for s in xs]
        ax.plot(xs, ys, "-", color=f"C{i}", alpha=0.7, label=f"{v} model")
    ax.axhline(ceiling_tbps, color="grey", linestyle="--", linewidth=1, label="D2D copy ceiling")
    return finish_sweep(ax, "stages (tiles in flight per block, one block per SM)", "TB/s (bytes read)",
                        "Row sums through a TMA ring: measured vs the producer/consumer simulation")


def plot_timelines(ceiling_tbps: float, variant: str = "ws", stages=(1, 4), tiles_per_block: int = 62):
    """The simulated timeline of one block for a few ring depths, side by side."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(9.0, 2.2 * len(stages) + 0.5), layout="constrained")
    axs = fig.subplots(len(stages), 1)
    axs = axs if len(stages) > 1 else [axs]
    for ax, s in zip(axs, stages):
        cfg = model.Config(variant, s, tiles_per_block)
        tr = model.simulate(cfg, ceiling_tbps)
        x = model.predict_config(cfg, ceiling_tbps)
        model.plot_timeline(tr, ax=ax, until=tr.total * 12 / tiles_per_block,
                            title=f"{variant}, {s} stage{'s' * (s > 1)}: model {x:.2f} TB/s (first 12 tiles)")
    return fig


def littles_law(rows: list[dict], ceilings: dict) -> dict:
    """Per rung: X(1), S* = C / X(1) and the gain of each doubling of the ring (what claims() checks)."""
    c = ceilings["copy_tbps"]
    out = {}
    for v in VARIANTS:
        pts = {r["stages"]: r["tbps"] for r in rows if r.get("variant") == v and r.get("tbps")}
        if 1 in pts:
            out[v] = {"x1_tbps": pts[1], "s_star": model.little_depth(pts[1], c),
                      "doubling": {f"{s}->{2 * s}": pts[2 * s] / pts[s] for s in sorted(pts) if 2 * s in pts}}
    return out


def _extra(rows: list[dict], ceilings: dict, checked: dict | None = None) -> dict:
    return {"littles_law": littles_law(rows, ceilings)}


TOPIC = Topic(
    slug=SLUG, title="Week 2 day 2: warp specialization",
    check=check_all,
    measure=lambda quick: measure(reps=10 if quick else 20),
    constants=lambda: {"LATENCY_NS": model.LATENCY_NS, "COMPUTE_NS": model.COMPUTE_NS, "ISSUE_NS": model.ISSUE_NS,
                       "SYNC_NS": model.SYNC_NS, "START_NS": model.START_NS},
    held_out=model.HELD_OUT_CHECK,  # recorded as extra["model"], with a refit on this run's fit rows (record only)
    claims=claims,
    extra=_extra,
    plots={"ws_stages.png": lambda rows, c: plot_stages(rows, c["copy_tbps"]),
           "ws_timeline.png": lambda rows, c: plot_timelines(c["copy_tbps"])})
run = TOPIC.run


if __name__ == "__main__":
    TOPIC.main(__doc__)
