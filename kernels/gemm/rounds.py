"""The GEMM day's claims from interleaved rounds (kernels.compare's method), never from one pass: the parity rounds
of a record (rung 6, cuBLAS, Triton, rung 5 and, in make gpu-test's claims step, the vendor's best of
kernels/gemm/baselines.py: each run timed once a round, on both inputs) summarised per input distribution, and the
lines the notebook prints from them.

    s = parity_summary(doc["rows"])      # {"rounds", "tflops", "over_cublas": {run: ...}, "vs": {...}, "by_data"}
    rounds_of(doc)                        # the rounds that speak for doc's GPU: its rounds file, else doc's own rows
    parity_line(doc); goal_line(doc); data_effect_line(doc); pass_line(doc)

A ladder record's single pass (one timing per rung) is a measurement of that pass, not a claim: pass_line prints it
as "this pass" beside the rounds' interval.
"""

from __future__ import annotations

import statistics

from .. import record
from ..compare import Ratio, speed_ratios
from .workload import SHAPES, shape_name

CLAIM_PAIRS = (("store_warp", "cublaslt"), ("store_warp", "triton_tuned"))  # claims beside those over
# cuBLAS (kernels.claims' table)
PARITY_GOAL = 1.00  # issue of the capstone: rung 6 >= 1.00 x cuBLAS at 8192^3, same run, same data
GOAL = 0.90  # the day's goal: the best CUDA rung >= 0.90 x cuBLAS at 8192^3 (judged on the rounds)


def _parity_of(rows: list[dict], data: str) -> dict:
    """The parity rounds of one input distribution (rows with no `data`: the exercise's): {} without cuBLAS rounds."""
    per: dict = {}
    mhz: dict = {}
    for r in rows:
        if r.get("lesson") == "parity" and r.get("tflops") and r.get("data", "exercise") == data:
            per.setdefault(r["rung"], {})[r["round"]] = r["tflops"]
            if r.get("sm_mhz"):
                mhz.setdefault(r["rung"], []).append(r["sm_mhz"])
    cub = per.get("cublas")
    if not cub:
        return {}
    vs = {f"{a}/{b}": _over({a: per[a], b: per[b]}, b).get(a) for a, b in CLAIM_PAIRS if a in per and b in per}
    return {"rounds": len(cub), "tflops": {v: [t[k] for k in sorted(t)] for v, t in per.items()},
            "over_cublas": _over(per, "cublas"),
            "sm_mhz": {v: statistics.mean(m) for v, m in mhz.items()},  # each run's mean SM clock over its rounds
            "vs": {k: s for k, s in vs.items() if s is not None}}


SUMMARY_KEYS = ("median", "min", "max", "lo", "hi", "says", "per_round")  # a ratio's figures in the parity summary


def _over(per: dict, baseline: str) -> dict:
    """{run: its speed over `baseline`'s of the same round, SUMMARY_KEYS of kernels.compare.speed_ratios} for every
    other run of `per` sharing a round with it (one suffices); the rounds and clocks are the summary's, once."""
    return {v: {k: s[k] for k in SUMMARY_KEYS} for v, s in speed_ratios(per, baseline, min_rounds=1).items()}


def parity_summary(rows: list[dict]) -> dict:
    """The parity rounds of a record on the exercise's data: per run its TFLOPS per round; per run but cuBLAS its
    ratio to cuBLAS of the same round (median, min, max, the bootstrap 95 % interval of the median and what it
    supports: kernels.compare); whether rung 6's median ratio reaches PARITY_GOAL; each run's mean SM clock over its
    rounds. "by_data": the same figures (goal aside) per input distribution the rounds ran on ("exercise", "normal").
    {} for a record without rounds."""
    datas = dict.fromkeys(r.get("data", "exercise") for r in rows if r.get("lesson") == "parity")
    by = {d: s for d in datas if (s := _parity_of(rows, d))}
    if not by:
        return {}
    out = dict(by.get("exercise", {}))
    r6 = out.get("over_cublas", {}).get("store_warp")
    out["goal"] = PARITY_GOAL
    out["goal_met"] = None if r6 is None else r6["median"] >= PARITY_GOAL
    out["by_data"] = by
    return out


def rounds_of(doc: dict | None) -> dict | None:
    """The rounds that speak for `doc`'s GPU: its rounds file (kernels/gemm/rounds_<gpu>.json, make gpu-test's
    claims step) if there is one, else `doc` itself when its rows hold parity rounds; None otherwise."""
    if not doc:
        return None
    tag = record.device_tag(doc.get("device"))
    for slug, t, d in record.rounds_records():
        if slug == "gemm" and t == tag and d.get("device") == doc.get("device"):
            return d
    return doc if any(r.get("lesson") == "parity" for r in doc.get("rows", [])) else None


def parity_line(doc: dict | None) -> str:
    """Rung 6 against cuBLAS from the rounds of `doc`'s GPU (rounds_of), one line: the median ratio of the rounds
    (what the goal is judged on), its 95 % interval and what it supports, their min-max, the number of rounds, the
    shape, the GPU and the date. A GPU without rounds says so."""
    doc = rounds_of(doc) or doc
    par = parity_summary((doc or {}).get("rows", []))
    r6 = par.get("over_cublas", {}).get("store_warp") if par else None
    if not r6:
        return ("no parity rounds of rung 6 and cuBLAS in this record (the full benchmark, "
                "`python -m kernels.gemm.bench`, writes them)")
    return (f"rung 6 (store_warp) / cuBLAS at {shape_name(SHAPES[0])}, {par['rounds']} interleaved rounds on "
            f"{doc['device']} ({doc['date']}): median {r6['median']:.3f}x (95 % interval {r6['lo']:.3f}-"
            f"{r6['hi']:.3f}x: {r6['says'].split(':')[0]}; min {r6['min']:.3f}x, max {r6['max']:.3f}x; goal >= "
            f"{PARITY_GOAL:.2f}x: the median {'reaches' if r6['median'] >= PARITY_GOAL else 'misses'} it, the interval "
            f"{_against(r6, PARITY_GOAL)})")


def _against(r: dict, goal: float) -> str:
    """Where a summary's 95 % interval lies against a goal."""
    return "clears it" if r["lo"] >= goal else "lies below it" if r["hi"] < goal else "holds it (not settled)"


def goal_line(doc: dict | None) -> str:
    """The day's goal (the best CUDA rung >= GOAL x cuBLAS at 8192^3) judged on the rounds of `doc`'s GPU: rung 6
    (the best CUDA rung the rounds time) over cuBLAS, its interval; "reached" when the whole interval clears GOAL.
    Without rounds: the ladder pass's best rung, printed as one pass, and no verdict."""
    if not doc:
        return "no recorded run yet"
    rd = rounds_of(doc)
    r6 = (parity_summary(rd["rows"]).get("over_cublas", {}).get("store_warp") if rd else None)
    if r6:
        verdict = {"clears it": "reached", "lies below it": "not reached"}.get(_against(r6, GOAL), "not settled")
        return (f"rung 6 (store_warp) / cuBLAS at {shape_name(SHAPES[0])}, {len(r6['per_round'])} interleaved "
                f"rounds on {rd['device']} ({rd['date']}): {r6['median']:.3f}x (95 % interval {r6['lo']:.3f}-"
                f"{r6['hi']:.3f}x); goal >= {GOAL:.2f}x: {verdict}")
    return pass_line(doc) + " - no rounds on this GPU: no verdict on the goal"


def pass_line(doc: dict | None) -> str:
    """The ladder pass's best CUDA rung over the same pass's cuBLAS row, labelled as one pass (not a claim)."""
    if not doc or not doc.get("best_cuda_tflops"):
        return "no recorded run yet"
    cub = doc.get("cublas_same_shape_tflops")
    what = "cuBLAS on the same inputs"
    if not cub:
        cub, what = doc["ceilings"]["cublas_bf16_tflops"], "the cuBLAS ceiling"
    return (f"one ladder pass on {doc['device']} ({doc.get('date')}): {doc['best_cuda_rung']} "
            f"{doc['best_cuda_tflops']:.1f} TFLOPS = {doc['best_cuda_tflops'] / cub:.3f} x {what} ({cub:.1f}) in "
            "this pass")


def data_effect_summary(rows: list[dict]) -> dict:
    """{rung: {"exercise": TFLOPS, "normal": TFLOPS, "normal_over_exercise", "sm_mhz": {data: MHz or None}}} from
    the data-effect rows (older records, whose rows all used N(0, 1), have none: {})."""
    out: dict = {}
    for r in rows:
        if r.get("lesson") != "data_effect" or not r.get("tflops"):
            continue
        d = out.setdefault(r.get("rung") or r["kernel"].split(" (")[0], {"sm_mhz": {}})
        d[r["data"]] = r["tflops"]
        d["sm_mhz"][r["data"]] = r.get("sm_mhz")
    for d in out.values():
        if d.get("exercise") and d.get("normal"):
            d["normal_over_exercise"] = d["normal"] / d["exercise"]
    return out


def data_effect_rounds(doc: dict | None) -> dict:
    """{run: Ratio of its N(0, 1) TFLOPS over its exercise-data TFLOPS, round by round} from the rounds of `doc`'s GPU
    that ran both inputs (each round times a run on both, back to back): {} without such rounds."""
    rd = rounds_of(doc)
    per: dict = {}
    for r in (rd or {}).get("rows", []):
        if r.get("lesson") == "parity" and r.get("tflops"):
            per.setdefault(r["rung"], {}).setdefault(r["round"], {})[r.get("data", "exercise")] = r["tflops"]
    out = {}
    for run, rounds in per.items():
        both = [v["normal"] / v["exercise"] for _, v in sorted(rounds.items()) if "normal" in v and "exercise" in v]
        if len(both) >= 2:
            out[run] = Ratio.of("normal", "exercise", both)
    return out


def data_effect_line(doc: dict | None) -> str:
    """The data-effect lesson: per run, N(0, 1) over the exercise's data from the rounds of `doc`'s GPU (median,
    interval, what it supports); without such rounds, the record's data-effect rows as one pass each (records before
    the lesson: a note)."""
    rounds = data_effect_rounds(doc)
    if rounds:
        rd = rounds_of(doc)
        return (f"N(0,1) over the exercise's data, {rd['device']} ({rd['date']}), interleaved rounds:\n" +
                "\n".join(f"{run:<14} {r.says()}" for run, r in rounds.items()))
    eff = data_effect_summary((doc or {}).get("rows", []))
    if not eff:
        return ("no data-effect rows in this record (its rows were all timed on one distribution): the benchmark "
                "writes them")
    out = []
    for name, d in eff.items():
        mhz = d["sm_mhz"]
        clk = ", ".join(f"{k} {v:.0f} MHz" for k, v in mhz.items() if v) or "SM clock not read"
        ratio = f"{d['normal_over_exercise']:.3f}x" if d.get("normal_over_exercise") else "?"
        out.append(f"{name:<14} exercise data {d.get('exercise', float('nan')):6.1f}  N(0,1) "
                   f"{d.get('normal', float('nan')):6.1f} TFLOPS  (N(0,1) / exercise {ratio}; {clk})")
    return f"one pass each on {doc['device']} (no rounds on both inputs for this GPU: not a claim):\n" + "\n".join(out)
