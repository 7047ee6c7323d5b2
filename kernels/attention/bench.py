"""Week 2, day 5's benchmark: check every attention rung (CUDA at each head dim and ring depth, Triton, cuDNN and
FlashAttention-2 through torch SDPA) on awkward shapes, then time them at B4 H32 S4096 (D 128, causal, D 64) with the
model's prediction beside the CUDA rows, and the exercise's known answers timed by the grader's own function — all
in one run, beside the cuBLAS ceiling of the same run.

    python -m kernels.attention.bench --out build/gpu [--quick]

`check_all()` and `measure()` serve the notebook's Explore section; `run()` also writes the record and the plots.
Everything here needs an sm_90 GPU except `configs()`, `claims()` and the plots.
"""

from __future__ import annotations

from .. import record
from ..bench import bench, ceilings, script_main
from ..check import compare
from ..topic import Topic, answer_row, check_answers, row, shipped, time_answer
from . import exercise, model
from .launch import STAGES, attention
from .workload import BENCH_SHAPE, TEST_SHAPES, flops, make_inputs, reference, shape_name

SLUG = "attention"
SOLUTION_STAGES = 2            # correct.cu: `constexpr int STAGES = 2` (a test holds them equal)
TIMED_ANSWERS = ("correct", "one_stage")
RTOL = exercise.CHECK["rtol"]
SHAPES = {"d128": BENCH_SHAPE, "d128 causal": (4, 32, 4096, 128, 1), "d64": (4, 32, 4096, 64, 0)}
LIBS = ("cudnn", "flash", "triton")


def configs(quick: bool = False) -> list[dict]:
    """The timed rows: the CUDA kernel at every ring depth it defines (non-causal D 128 and D 64), the causal D 128
    kernel at its default depth, and Triton / cuDNN / FA2 at each shape."""
    out = []
    for tag, shape in SHAPES.items():
        d, causal = shape[3], shape[4]
        depths = (2,) if causal or quick else STAGES[d]
        for st in depths:
            name = f"attn_fwd d{d} s{st}" + (" causal" if causal else "")
            out.append({"name": name, "variant": "cuda", "stages": st, "shape": shape,
                        "config": {"b": shape[0], "h": shape[1], "s": shape[2], "d": d, "causal": causal,
                                   "stages": st}})
        for lib in LIBS:
            out.append({"name": f"{lib} d{d}" + (" causal" if causal else ""), "variant": lib, "stages": None,
                        "shape": shape, "config": None})
    # The same kernels on plain N(0, 1) inputs (no large-logit heads): the timings depend on the data (a softmax
    # that is nearly one-hot feeds the second GEMM mostly zeros), so the table shows both.
    if not quick:
        for variant, st in (("cuda", 2), ("cuda", 3), ("cudnn", None)):
            d = BENCH_SHAPE[3]
            name = (f"attn_fwd d{d} s{st}" if variant == "cuda" else f"{variant} d{d}") + " plain"
            out.append({"name": name, "variant": variant, "stages": st, "shape": BENCH_SHAPE, "config": None,
                        "plain": True})
    return out


def check_all(seed: int = 1) -> list[str]:
    """Every rung on every awkward test shape (its head dim), against torch's fp32 math SDPA; the exercise's timed
    answers on the spec's test shapes. Returns the failures."""
    failures = []
    for i, shape in enumerate(TEST_SHAPES):
        inp = make_inputs(shape, seed + i)
        ref = reference(inp)
        d = shape[3]
        runs = [("cuda", st) for st in STAGES[d]] + [(lib, None) for lib in LIBS]
        for variant, st in runs:
            try:
                out = attention(inp["q"], inp["k"], inp["v"], bool(inp["causal"]), variant, stages=st)
                rep = compare(out, ref, rtol=RTOL)
                ok, msg = rep.ok, rep.message
            except Exception as exc:  # noqa: BLE001 - a backend that refuses a shape is a failure to report
                ok, msg = False, f"{type(exc).__name__}: {exc}"
            if not ok:
                failures.append(f"{variant} s{st} {shape_name(shape)}: {msg.splitlines()[0]}")
    return failures + check_answers(SLUG, TIMED_ANSWERS, seed=seed + 200)


def _pool(shape, seed):
    return [make_inputs(shape, seed + k) for k in range(2)]


def measure(reps: int = 10, seed: int = 0, quick: bool = False):
    """Time each row (fresh inputs each repetition, L2 flushed) with the model's prediction beside the CUDA rows."""
    import torch

    rows, pools = [], {}
    for cfg in configs(quick):
        shape = cfg["shape"]
        if shape not in pools:
            pools.clear()
            torch.cuda.empty_cache()
            pools[shape] = _pool(shape, seed)
        pool = pools[shape]
        out = torch.empty_like(pool[0]["q"])
        state = {"i": 0}

        def make_args(pool=pool, cfg=cfg, shape=shape):
            # fresh values before every repetition: the workload's inputs (large logits on odd heads, as graded),
            # or plain N(0, 1) for the "plain" rows
            state["i"] += 1
            inp = pool[state["i"] % 2]
            if cfg.get("plain"):
                for t in (inp["q"], inp["k"], inp["v"]):
                    t.normal_()
            else:
                fresh = make_inputs(shape, seed + 100 + state["i"])
                for key in ("q", "k", "v"):
                    inp[key].copy_(fresh[key])
            return (inp,)

        def fn(inp, cfg=cfg):
            attention(inp["q"], inp["k"], inp["v"], bool(inp["causal"]), cfg["variant"], stages=cfg["stages"],
                      out=out)

        res = bench(fn, make_args, flops=flops(shape), reps=reps)
        pred = model.predict_config(model.Config(**cfg["config"])) if cfg["config"] else None
        rows.append(row(cfg["name"], shape_name(shape), res, pred, config=cfg["config"], variant=cfg["variant"],
                        stages=cfg["stages"], inputs="N(0,1)" if cfg.get("plain") else "workload"))
    pools.clear()
    torch.cuda.empty_cache()
    for name in shipped(SLUG, TIMED_ANSWERS):
        res = {**time_answer(SLUG, name, reps=reps, seed=seed), "bytes": None}  # a TFLOPS row, not a TB/s one
        st = SOLUTION_STAGES if name == "correct" else 1
        cfg = {"b": BENCH_SHAPE[0], "h": BENCH_SHAPE[1], "s": BENCH_SHAPE[2], "d": 128, "causal": 0, "stages": st}
        rows.append(answer_row(SLUG, name, res, model.predict_config(model.Config(**cfg)), config=cfg,
                               shape=shape_name(BENCH_SHAPE), variant="exercise", inputs="workload"))
    torch.cuda.empty_cache()
    return rows


def _tf(rows, name):
    return next((r["tflops"] for r in rows if r["kernel"] == name and r.get("tflops")), None)


def claims(rows: list[dict], ceilings: dict) -> list[str]:
    """What the notebook says about these rows: one stage is the slowest CUDA depth; the course solution was timed.
    (The fraction of cuDNN is reported, not claimed: see extra()["vs_cudnn"].)"""
    bad = []
    for d in (128, 64):
        pts = {r["stages"]: r["tflops"] for r in rows if r.get("variant") == "cuda" and r.get("config")
               and r["config"]["d"] == d and not r["config"]["causal"] and r.get("tflops")}
        if len(pts) > 1 and min(pts, key=pts.get) != 1:
            bad.append(f"D {d}: the one-stage ring is not the slowest ({pts})")
    if _tf(rows, f"{exercise.NAME} (correct)") is None:
        bad.append("the exercise's course solution was not timed")
    return bad


def vs_cudnn(rows: list[dict]) -> dict:
    """Each non-library row's TFLOPS over cuDNN's at the same shape."""
    out = {}
    for r in rows:
        if r.get("variant") in ("cudnn",) or not r.get("tflops"):
            continue
        ref = next((c["tflops"] for c in rows if c.get("variant") == "cudnn" and c["shape"] == r["shape"]
                    and c.get("inputs") == r.get("inputs")), None)
        if ref:
            out[f"{r['kernel']} | {r['shape']}"] = r["tflops"] / ref
    return out


def _extra(rows: list[dict], ceilings: dict, checked: dict | None = None) -> dict:
    fitted = model.fit(rows)
    return {"model_fitted_on": model.FIT, "model_fit_rows": list(model.FIT_ROWS), "model_refit": fitted,
            "model_held_out": model.held_out_errors(rows), "model_held_out_refit": model.held_out_errors(rows, fitted),
            "model_held_out_band": model.HELD_OUT_BAND, "vs_cudnn": vs_cudnn(rows),
            "flops_definition": "4*B*H*S*S*D, halved for causal (kernels/attention/workload.py)"}


def plot_stages(rows: list[dict], ceilings: dict | None = None):
    """TFLOPS against the ring depth (D 128 and D 64): measured markers, the model's lines, cuDNN as a line."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6.5, 4.0), layout="constrained")
    ax = fig.add_subplot()
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
    ax.set_xlabel("stages of the K/V ring")
    ax.set_ylabel("TFLOPS (4 B H S^2 D)")
    ax.set_title("Attention forward, B4 H32 S4096: ring depth vs model")
    ax.set_ylim(bottom=0)
    ax.legend(fontsize="small")
    return fig


def load_record() -> dict | None:
    return record.load(SLUG, any_hopper=True)


TOPIC = Topic(
    slug=SLUG, title="Week 2 day 5: attention",
    check=lambda quick: check_all(),
    measure=lambda quick: (measure(reps=5 if quick else 10, quick=quick), []),
    constants=lambda: {"TC_EFF": model.TC_EFF, "SOFTMAX_NS": model.SOFTMAX_NS, "LOAD_NS": model.LOAD_NS,
                       "BLOCK_NS": model.BLOCK_NS, "L2_TBPS": model.L2_TBPS},
    claims=claims,
    extra=_extra,
    keep_going=True,
    plots={"attention_stages.png": plot_stages})
run = TOPIC.run


def main() -> None:
    script_main(SLUG, run, __doc__)


if __name__ == "__main__":
    main()
