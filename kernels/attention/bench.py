"""Week 2, day 5's benchmark: check every attention rung (CUDA at each head dim and ring depth, Triton, cuDNN and
FlashAttention-2 through torch SDPA) on awkward shapes, then time them at B4 H32 S4096 (D 128, causal, D 64) with the
model's prediction beside the CUDA rows, and the exercise's known answers timed by the grader's own function — all
in one run, beside the cuBLAS ceiling of the same run, and all on the exercise's inputs (kernels/attention/workload.py
make_inputs: odd heads carry large logits), so that every ratio (a rung over cuDNN, the solution over its bar)
compares like with like. The SM clock is read during every timing (kernels.clock; None where it cannot be read).

One lesson is about the data itself (data_effect): the best CUDA rung and cuDNN at D 128, each timed on the
exercise's inputs and on plain N(0, 1) q, k, v, rows tagged `data` "exercise" / "normal" and `lesson` "data_effect",
with the mean SM clock of each timing. Claims, vs_cudnn and the model read only the exercise-data rows (main_rows).

    python -m kernels.attention.bench --out build/gpu [--quick]

`check_all()` and `measure()` serve the notebook's Explore section; `run()` also writes the record and the plots.
Everything here needs an sm_90 GPU except `configs()`, `claims()`, `main_rows()`, `vs_cudnn()`,
`data_effect_summary()`, `data_effect_line()`, the summaries and tables of a record and the plots.

A ratio to cuDNN from one pass of the ladder (`vs_cudnn`, `goals`) is a measurement, never a claim; the claims are
interleaved rounds (`overlap_rounds`, `rounds_summary`). kernels/attention/ratios.py prints both as what they are.
"""

from __future__ import annotations

from .. import record
from ..bench import bench, ceilings, kernel_names, refill, rotating_inputs
from ..clock import timed
from ..topic import Topic, answer_row, check_answers, check_kernels, finish_sweep, row, shipped, time_answer
from . import exercise, model
from .launch import DEFAULT_OVERLAP, LIBRARIES, OVERLAP, STAGES, attention, overlap_available
from .workload import BENCH_SHAPE, DATA, TEST_SHAPES, flops, inputs_for, make_inputs, reference, shape_name
from ..compare import ROUNDS, round_orders, speed_ratios

SLUG = "attention"
# The exercise's answers timed beside the rungs: the course solution (K ring of 3, V ring of 2, K released after QK^T)
# and the serialised one (one stage per ring, K and V released after PV). Their rows carry no model prediction:
# model.py describes r1_attention.cu's combined K/V ring, not two rings of their own depths.
TIMED_ANSWERS = ("correct", "one_stage")
RTOL = exercise.CHECK["rtol"]
SHAPES = {"d128": BENCH_SHAPE, "d128 causal": (4, 32, 4096, 128, 1), "d64": (4, 32, 4096, 64, 0)}
LIBS = ("cudnn", "flash", "triton")
# The overlap rung's entries timed per shape (r2_overlap.cu, launch.OVERLAP): every one at D 128 and D 64,
# the default and its two neighbours (ping-pong off, 176-key tiles) causal.
OVERLAP_CAUSAL = ("n128 k3v2", "n128 k3v2 nopp", "n176 k2v2")
# The overlap rung's goals (course issue 27): its default entry (launch.DEFAULT_OVERLAP, what attention(...,
# variant="overlap") runs) over cuDNN of the same shape and inputs, judged on interleaved rounds (overlap_rounds,
# rounds_summary: the interval's low end against the goal), never on one pass; D 64 is reported, not held to a goal.
GOALS = {"d128": 0.95, "d128 causal": 1.00, "d64": None}


def configs(quick: bool = False) -> list[dict]:
    """The timed rows: the CUDA kernel at every ring depth it defines (non-causal D 128 and D 64), the causal D 128
    kernel at its default depth, and Triton / cuDNN / FA2 at each shape — all on the exercise's inputs."""
    out = []
    for tag, shape in SHAPES.items():
        d, causal = shape[3], shape[4]
        depths = (2,) if causal or quick else STAGES[d]
        for st in depths:
            name = f"attn_fwd d{d} s{st}" + (" causal" if causal else "")
            out.append({"name": name, "variant": "cuda", "stages": st, "shape": shape,
                        "config": {"b": shape[0], "h": shape[1], "s": shape[2], "d": d, "causal": causal,
                                   "stages": st}})
        out += overlap_configs(shape)
        for lib in LIBS:
            out.append({"name": f"{lib} d{d}" + (" causal" if causal else ""), "variant": lib, "stages": None,
                        "shape": shape, "config": None})
    return out


def overlap_name(d: int, entry: str, causal) -> str:
    return f"attn_overlap d{d} {entry}" + (" causal" if causal else "")


def overlap_configs(shape) -> list[dict]:
    """The overlap rung's timed rows at `shape` (none where r2_overlap.cu is absent: a student release). Their
    config carries the entry's tile (bn), ring depths and ping-pong flag: what model.predict_overlap reads."""
    if not overlap_available():
        return []
    d, causal = shape[3], shape[4]
    out = []
    for entry in (OVERLAP_CAUSAL if causal else OVERLAP[d]):
        bn, ks, vs, pp = OVERLAP[d][entry]
        out.append({"name": overlap_name(d, entry, causal), "variant": "overlap", "stages": None, "entry": entry,
                    "shape": shape, "config": {"b": shape[0], "h": shape[1], "s": shape[2], "d": d, "causal": causal,
                                               "bn": bn, "k_stages": ks, "v_stages": vs, "pingpong": pp}})
    return out


def check_all(seed: int = 1) -> list[str]:
    """Every rung on every awkward test shape (the CUDA depths of its head dim), against torch's fp32 math SDPA,
    each output poisoned first (the scaffold's loop); the exercise's timed answers on the spec's test shapes.
    Returns the failures."""
    return check_rungs(seed, [(lib, None) for lib in LIBS]) + check_answers(SLUG, TIMED_ANSWERS, seed=seed + 200)


def check_rungs(seed: int = 1, extra=(), shapes=TEST_SHAPES) -> list[str]:
    """r1_attention.cu at every depth and r2_overlap.cu at every entry (where present) of each test shape's head
    dim, then the `extra` runs ((variant, None): the libraries), against torch's fp32 math SDPA, outputs poisoned
    first. Returns the failures."""
    import torch

    depths = sorted({st for sts in STAGES.values() for st in sts})
    entries = sorted({e for es in OVERLAP.values() for e in es}) if overlap_available() else []

    def skip(run, shape):
        return (run[0] == "cuda" and run[1] not in STAGES[shape[3]]) or \
            (run[0] == "overlap" and run[1] not in OVERLAP[shape[3]])

    def go(run, inp, out):
        kw = {"config": run[1]} if run[0] == "overlap" else {"stages": run[1]}
        attention(inp["q"], inp["k"], inp["v"], bool(inp["causal"]), run[0], out=out, **kw)

    return check_kernels(
        [("cuda", st) for st in depths] + [("overlap", e) for e in entries] + list(extra), shapes,
        inputs=make_inputs, reference=reference, check={"rtol": RTOL}, seed=seed, shape_name=shape_name, skip=skip,
        output=lambda inp, run: torch.empty_like(inp["q"]),
        label=lambda run: f"{run[0]} s{run[1]}" if run[0] != "overlap" else f"overlap {run[1]}", launch=go)


def _pool(shape, seed):
    return [make_inputs(shape, seed + k) for k in range(2)]


def _time(variant: str, stages, shape, data: str, pool, clock, reps: int, seed: int, entry: str | None = None):
    """(BenchResult, mean SM MHz while it ran) of one attention rung or library on `data`'s inputs (`entry`: the
    overlap rung's OVERLAP entry)."""
    import torch

    # A library (cuDNN, FlashAttention-2 through SDPA) writes an output of its own: handing it `out` would time a
    # copy of that output too (launch.attention copies into `out`), which no course kernel pays.
    out = None if variant in LIBRARIES else torch.empty_like(pool[0]["q"])

    def fn(inp):
        attention(inp["q"], inp["k"], inp["v"], bool(inp["causal"]), variant, stages=stages, config=entry, out=out)

    args = rotating_inputs(pool, refill(inputs_for(data), shape, seed + 100))  # fresh draws of `data` per repetition
    return timed(clock, lambda: bench(fn, args, flops=flops(shape), reps=reps))


def measure(reps: int = 10, seed: int = 0, quick: bool = False):
    """Time each row on the exercise's inputs (fresh each repetition, L2 flushed) with the model's prediction beside
    the CUDA rows and the SM clock while it ran; then the data-effect lesson (data_effect) and the exercise's known
    answers (the grader's own timer, the exercise's inputs)."""
    import torch

    from ..clock import SmClock

    rows, pools = [], {}
    with SmClock() as clock:
        for cfg in configs(quick):
            shape = cfg["shape"]
            if shape not in pools:
                pools.clear()
                torch.cuda.empty_cache()
                pools[shape] = _pool(shape, seed)
            res, mhz = _time(cfg["variant"], cfg["stages"], shape, "exercise", pools[shape], clock, reps, seed,
                             cfg.get("entry"))
            pred = model.predict_row({"config": cfg["config"]}) if cfg["config"] else None
            rows.append(row(cfg["name"], shape_name(shape), res, pred, config=cfg["config"], variant=cfg["variant"],
                            stages=cfg["stages"], data="exercise", sm_mhz=mhz, clock_source=clock.source,
                            **({"entry": cfg["entry"]} if cfg.get("entry") else {})))
        pools.clear()
        torch.cuda.empty_cache()
        rows += data_effect(rows, clock, reps=reps, seed=seed)
        for name in shipped(SLUG, TIMED_ANSWERS):
            res, mhz = timed(clock, lambda name=name: time_answer(SLUG, name, reps=reps, seed=seed))
            res = {**res, "bytes": None}  # a TFLOPS row, not a TB/s one
            rows.append(answer_row(SLUG, name, res, None, config=None, shape=shape_name(BENCH_SHAPE),
                                   variant="exercise", data="exercise", sm_mhz=mhz, clock_source=clock.source))
    torch.cuda.empty_cache()
    return rows


def best_cuda(rows: list[dict], shape=BENCH_SHAPE) -> dict | None:
    """The fastest CUDA row at `shape` (main rows: the exercise's data)."""
    pts = [r for r in main_rows(rows) if r.get("variant") == "cuda" and r["shape"] == shape_name(shape)
           and r.get("tflops")]
    return max(pts, key=lambda r: r["tflops"]) if pts else None


def data_effect(rows: list[dict], clock=None, reps: int = 10, seed: int = 0, shape=BENCH_SHAPE) -> list[dict]:
    """The day's one data-effect lesson: the best CUDA rung of `rows` at `shape` and cuDNN, each timed on the
    exercise's inputs and on plain N(0, 1) q, k, v (workload.DATA), back to back, with the mean SM clock of each
    timing. Rows named "<rung> (<data> data)", `lesson` "data_effect"; claims and the ratios to cuDNN read only
    the main rows (all on the exercise's data)."""
    import torch

    best = best_cuda(rows, shape)
    runs = ([(best["kernel"], "cuda", best["stages"])] if best else []) + [(f"cudnn d{shape[3]}", "cudnn", None)]
    pool = _pool(shape, seed + 500)
    out = []
    for name, variant, stages in runs:
        for data in DATA:
            res, mhz = _time(variant, stages, shape, data, pool, clock, reps, seed + 500)
            out.append(row(f"{name} ({data} data)", shape_name(shape), res, None, config=None, variant=variant,
                           stages=stages, data=data, lesson="data_effect", rung=name, sm_mhz=mhz,
                           clock_source=getattr(clock, "source", None)))
    del pool
    torch.cuda.empty_cache()
    return out


def _data(r: dict) -> str:
    """A row's input distribution: its `data` key; records before it said `inputs` ("workload" / "N(0,1)")."""
    return r.get("data") or {"N(0,1)": "normal"}.get(r.get("inputs"), "exercise")


def main_rows(rows: list[dict]) -> list[dict]:
    """The rows claims, ratios and the model read: every row on the exercise's data, the data-effect lesson's rows
    (and an older record's "plain" N(0, 1) rows) left out."""
    return [r for r in rows if not r.get("lesson") and _data(r) == "exercise"]


def data_effect_summary(rows: list[dict]) -> dict:
    """{rung: {"exercise": TFLOPS, "normal": TFLOPS, "normal_over_exercise", "sm_mhz": {data: MHz or None}}} from
    the data-effect rows; an older record's "plain" rows count as its normal side, beside its same-named rows."""
    out: dict = {}
    for r in rows:
        if not r.get("tflops"):
            continue
        if r.get("lesson") == "data_effect":
            name, data = r.get("rung") or r["kernel"].split(" (")[0], r["data"]
        elif _data(r) == "normal" and r["kernel"].endswith(" plain"):
            name, data = r["kernel"][: -len(" plain")], "normal"
        else:
            continue
        d = out.setdefault(name, {"sm_mhz": {}})
        d[data] = r["tflops"]
        d["sm_mhz"][data] = r.get("sm_mhz")
    for name, d in out.items():
        if "exercise" not in d:  # an older record: the same kernel's main row
            ex = next((r["tflops"] for r in main_rows(rows) if r["kernel"] == name and r.get("tflops")), None)
            if ex:
                d["exercise"] = ex
        if d.get("exercise") and d.get("normal"):
            d["normal_over_exercise"] = d["normal"] / d["exercise"]
    return out


def data_effect_line(doc: dict | None) -> str:
    """The data-effect lesson of a record, one line per timed kernel."""
    eff = data_effect_summary((doc or {}).get("rows", []))
    if not eff:
        return "no data-effect rows in this record: the benchmark writes them"
    out = []
    for name, d in eff.items():
        clk = ", ".join(f"{k} {v:.0f} MHz" for k, v in d["sm_mhz"].items() if v) or "SM clock not read"
        ratio = f"{d['normal_over_exercise']:.3f}x" if d.get("normal_over_exercise") else "?"
        out.append(f"{name:<22} exercise data {d.get('exercise', float('nan')):6.1f}  N(0,1) "
                   f"{d.get('normal', float('nan')):6.1f} TFLOPS  (N(0,1) / exercise {ratio}; {clk})")
    return f"on {doc['device']}:\n" + "\n".join(out)


def _tf(rows, name):
    return next((r["tflops"] for r in main_rows(rows) if r["kernel"] == name and r.get("tflops")), None)


def claims(rows: list[dict], ceilings: dict) -> list[str]:
    """What the notebook says about these rows: one stage is the slowest CUDA depth; the course solution was timed.
    (The fraction of cuDNN is reported, not claimed: see extra()["vs_cudnn"].)"""
    bad = []
    for d in (128, 64):
        pts = {r["stages"]: r["tflops"] for r in main_rows(rows) if r.get("variant") == "cuda" and r.get("config")
               and r["config"]["d"] == d and not r["config"]["causal"] and r.get("tflops")}
        if len(pts) > 1 and min(pts, key=pts.get) != 1:
            bad.append(f"D {d}: the one-stage ring is not the slowest ({pts})")
    if _tf(rows, f"{exercise.NAME} (correct)") is None:
        bad.append("the exercise's course solution was not timed")
    return bad


def vs_cudnn(rows: list[dict]) -> dict:
    """Each non-library row's TFLOPS over cuDNN's at the same shape, both on the exercise's data (main rows): one
    pass each, a measurement and no claim — ratios.vs_cudnn_report prints them so, beside the claim interleaved
    rounds support where the GPU has them."""
    out = {}
    rows = main_rows(rows)
    for r in rows:
        if r.get("variant") in ("cudnn",) or not r.get("tflops"):
            continue
        ref = next((c["tflops"] for c in rows if c.get("variant") == "cudnn" and c["shape"] == r["shape"]), None)
        if ref:
            out[f"{r['kernel']} | {r['shape']}"] = r["tflops"] / ref
    return out


def goals(rows: list[dict]) -> dict:
    """Per shape of GOALS: the overlap rung's default entry, cuDNN, their ratio (both main rows of one run), the goal
    (None: reported only) and whether it is met (None where either row is missing); the best overlap entry beside."""
    out = {}
    main = main_rows(rows)
    for tag, goal in GOALS.items():
        shape = SHAPES[tag]
        name = overlap_name(shape[3], DEFAULT_OVERLAP[shape[3]], shape[4])
        ours, cud = _tf(rows, name), _tf(rows, f"cudnn d{shape[3]}" + (" causal" if shape[4] else ""))
        best = max((r for r in main if r.get("variant") == "overlap" and r["shape"] == shape_name(shape)
                    and r.get("tflops")), key=lambda r: r["tflops"], default=None)
        ratio = ours / cud if ours and cud else None
        out[tag] = {"overlap": name, "overlap_tflops": ours, "cudnn_tflops": cud, "over_cudnn": ratio, "goal": goal,
                    "met": None if goal is None or ratio is None else ratio >= goal,
                    "best_entry": best["kernel"] if best else None,
                    "best_over_cudnn": best["tflops"] / cud if best and cud else None}
    return out


ROUND_RUNS = ("overlap", "cudnn")  # the runs of one round at a GOALS shape: the default overlap entry, cuDNN
ROUND_DATA = ("normal", "exercise")  # a claim's two inputs (issue 40): plain N(0, 1) q, k, v and the exercise's


def rounds_kernels(seed: int = 0) -> dict:
    """{GOALS shape: {run: the CUDA kernels one launch of it runs, longest first}} (kernels.bench.kernel_names, the
    exercise's inputs): each side's kernel (cuDNN's plan differs by shape), measured once before the rounds."""
    import torch

    out: dict = {}
    for tag, shape in SHAPES.items():
        inp = make_inputs(shape, seed)
        o = torch.empty_like(inp["q"])
        for run in ROUND_RUNS:
            entry = DEFAULT_OVERLAP[shape[3]] if run == "overlap" else None
            out.setdefault(tag, {})[run] = kernel_names(lambda: attention(
                inp["q"], inp["k"], inp["v"], bool(inp["causal"]), run, config=entry,
                out=None if run in LIBRARIES else o))
        del inp, o
        torch.cuda.empty_cache()
    return out


def overlap_rounds(clock=None, reps: int = 10, seed: int = 0, rounds: int | None = None,
                   datas=ROUND_DATA) -> list[dict]:
    """The overlap rung's default entry against cuDNN at each GOALS shape in interleaved rounds (kernels.compare: the
    order rotated and reversed so each is first and last equally often), each round timing both once per input
    distribution of `datas` (both sides of a ratio on the same data; the datas' order swapped every other round):
    rows `lesson` "rounds", `round` k, `rung` overlap / cudnn, `data`. rounds_summary reads them."""
    import torch

    out = []
    for tag, shape in SHAPES.items():
        entry = DEFAULT_OVERLAP[shape[3]]
        pool = _pool(shape, seed)
        for k, order in enumerate(round_orders(list(ROUND_RUNS), rounds or ROUNDS)):
            for data in (datas if k % 2 == 0 else datas[::-1]):
                for run in order:
                    res, mhz = _time(run, None, shape, data, pool, clock, reps, seed + 900 + k,
                                     entry if run == "overlap" else None)
                    name = overlap_name(shape[3], entry, shape[4]) if run == "overlap" else \
                        f"cudnn d{shape[3]}" + (" causal" if shape[4] else "")
                    out.append(row(f"{name} (round {k}" + ("" if data == "exercise" else f", {data} data") + ")",
                                   shape_name(shape), res, None, variant=run, stages=None, data=data,
                                   lesson="rounds", round=k, rung=run, goal_shape=tag, sm_mhz=mhz,
                                   clock_source=getattr(clock, "source", None)))
        del pool
        torch.cuda.empty_cache()
    return out


def _rounds_of(ours: dict, cud: dict, tag: str) -> dict | None:
    """One shape's and data's rounds ({round: row} of each side) summarised (kernels.compare.speed_ratios); None
    under two common rounds."""
    sides = {"overlap": ours, "cudnn": cud}
    s = speed_ratios({n: {k: r["tflops"] for k, r in side.items()} for n, side in sides.items()}, "cudnn",
                     {n: [r.get("sm_mhz") for r in side.values()] for n, side in sides.items()}).get("overlap")
    if s is None:
        return None
    return {**{k: s[k] for k in ("rounds", "median", "lo", "hi", "per_round", "sm_mhz", "says")},
            "goal": GOALS.get(tag)}


def rounds_summary(rows: list[dict]) -> dict:
    """Per GOALS shape with rounds on the exercise's data in `rows`: the overlap entry over cuDNN per round, the
    median, its bootstrap 95 % interval and what it supports (kernels.compare), and the mean SM clock of each side;
    "by_data": the same per input distribution the rounds ran on ("exercise", "normal"). {} without rounds."""
    per: dict = {}
    for r in rows:
        if r.get("lesson") == "rounds" and r.get("tflops"):
            per.setdefault(r["goal_shape"], {}).setdefault(_data(r), {}).setdefault(r["rung"], {})[r["round"]] = r
    out = {}
    for tag, datas in per.items():
        by = {d: s for d, runs in datas.items() if (s := _rounds_of(runs.get("overlap", {}), runs.get("cudnn", {}),
                                                                     tag))}
        if "exercise" in by:
            out[tag] = {**by["exercise"], "by_data": by}
    return out


def overlap_record() -> dict | None:
    """The record that shows the overlap rung: this GPU's (else the H100's: kernels.record.load) where it holds the
    rung's rows, else the first recorded GPU's that does; else that first one."""
    first = record.load(SLUG)
    docs = [first] + list(record.load_all(SLUG).values())
    return next((d for d in docs if d and any(r.get("variant") == "overlap" for r in d["rows"])), first)


def _extra(rows: list[dict], ceilings: dict, checked: dict | None = None) -> dict:
    g = goals(rows)
    over = ({"overlap_model": model.OVERLAP_CHECK.facts({"rows": rows, "ceilings": ceilings})}
            if any(r.get("variant") == "overlap" for r in rows) else {})
    rs = rounds_summary(rows)
    judged = [v for v in rs.values() if v["goal"] is not None]
    return {"vs_cudnn": vs_cudnn(rows),
            "overlap_goals": g,  # one pass: what the ladder saw, no claim
            "overlap_rounds": rs,  # the goals' evidence: interleaved rounds with an interval (kernels.compare)
            # met: the interval's low end clears the goal at every goal shape; None without rounds (no claim)
            "overlap_goals_met": all(v["lo"] >= v["goal"] for v in judged) if judged and
            len(judged) == sum(v is not None for v in GOALS.values()) else None,
            **over,
            "data_effect": data_effect_summary(rows),
            "inputs": "every row but the data-effect lesson's 'normal' ones: the exercise's make_inputs (odd heads "
                      "with large logits)",
            "flops_definition": "4*B*H*S*S*D, halved for causal (kernels/attention/workload.py)"}


def plot_stages(rows: list[dict], ceilings: dict | None = None):
    """TFLOPS against the ring depth (D 128 and D 64): measured markers, the model's lines, cuDNN as a line."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6.5, 4.0), layout="constrained")
    ax = fig.add_subplot()
    rows = main_rows(rows)
    for i, d in enumerate((128, 64)):
        pts = sorted((r["stages"], r["tflops"]) for r in rows if r.get("variant") == "cuda" and r.get("config")
                     and r["config"]["d"] == d and not r["config"]["causal"] and r.get("tflops"))
        if pts:
            ax.plot([p[0] for p in pts], [p[1] for p in pts], "o", color=f"C{i}", label=f"CUDA D {d} measured")
        xs = [1, 2, 3, 4]
        shape = SHAPES["d128" if d == 128 else "d64"]
        ys = [model.predict(shape, s) for s in xs]
        ax.plot(xs, ys, "-", color=f"C{i}", alpha=0.7, label=f"model D {d}")
        cud = next((r["tflops"] for r in rows if r["kernel"] == f"cudnn d{d}"), None)
        if cud:
            ax.axhline(cud, color=f"C{i}", linestyle=":", label=f"cuDNN D {d}")
    return finish_sweep(ax, "stages of the K/V ring", "TFLOPS (4 B H S^2 D)",
                        "Attention forward, B4 H32 S4096: ring depth vs model")


TOPIC = Topic(
    slug=SLUG, title="Week 2 day 5: attention",
    check=check_all,
    measure=lambda quick: measure(reps=5 if quick else 10, quick=quick),
    constants=lambda: {**{k: getattr(model, k) for k in model.CONSTANTS}, "LOAD_NS": model.LOAD_NS,
                       "overlap": {k: v for k, v in model.OVERLAP_CONSTANTS.items() if k != "fitted"}},
    claims=claims,
    extra=_extra,
    keep_going=True,
    held_out=model.HELD_OUT_CHECK,  # recorded as extra["model"], with a refit on this run's fit rows
    plots={"attention_stages.png": plot_stages})
run = TOPIC.run


if __name__ == "__main__":
    TOPIC.main(__doc__)
