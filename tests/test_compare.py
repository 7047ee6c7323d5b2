"""kernels.compare: interleaved rounds with balanced positions, a median ratio with a bootstrap interval, and the
sentence the interval supports — driven by timers that drift, as a GPU's clock does."""
from __future__ import annotations

import random
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kernels.compare import bootstrap_interval, interleaved, round_orders


@given(n=st.integers(2, 5), mult=st.integers(1, 4))
def test_every_candidate_is_first_and_last_equally_often(n, mult):
    names = [f"k{i}" for i in range(n)]
    orders = round_orders(names, 2 * n * mult)
    assert all(sorted(o) == names for o in orders)
    assert Counter(o[0] for o in orders) == {k: 2 * mult for k in names}
    assert Counter(o[-1] for o in orders) == {k: 2 * mult for k in names}


def _drifting(true_ms: dict[str, float], drift: float, noise: float, seed: int):
    """Timers whose times grow with every call made by any of them (a GPU heating up), plus noise."""
    rng = random.Random(seed)
    calls = [0]

    def timer(name):
        def f():
            calls[0] += 1
            return true_ms[name] * (1 + drift * calls[0]) * (1 + rng.gauss(0, noise))
        return f

    return {n: timer(n) for n in true_ms}


@settings(max_examples=30, deadline=None)
@given(speed=st.sampled_from([0.9, 0.97, 1.0, 1.03, 1.1]), seed=st.integers(0, 10**6))
def test_the_interval_holds_the_true_ratio_under_drift_and_says_what_it_supports(speed, seed):
    """Candidate `a` is `speed` times as fast as `b`; the clock drifts 0.5 % a call (36 calls: 18 % over the run, far
    more than the difference). Interleaved rounds recover the ratio; the sentence follows the interval."""
    cmp = interleaved(_drifting({"a": 1.0 / speed, "b": 1.0}, drift=0.005, noise=0.002, seed=seed), rounds=18)
    r = cmp.ratio("a", "b")
    assert r.lo <= r.median <= r.hi
    assert r.lo - 0.006 <= speed <= r.hi + 0.006, (speed, r)
    if speed > 1.02:
        assert r.verdict == "ahead", r.says()
    elif speed < 0.98:
        assert r.verdict == "behind", r.says()
    assert r.says().endswith("18 rounds)")


def test_a_single_pass_in_one_order_would_have_misled():
    """The same drifting timers timed in one fixed order (a then b, never reversed) see `b` slower than it is: what
    the balanced order removes. Equal kernels: the interleaved verdict is 'within', the fixed order's ratio is off."""
    timers = _drifting({"a": 1.0, "b": 1.0}, drift=0.01, noise=0.0, seed=1)
    fixed = [timers["b"]() / timers["a"]() for _ in range(1)]  # a timed first: b sees a hotter GPU
    assert fixed[0] != pytest.approx(1.0, abs=0.005)
    r = interleaved(_drifting({"a": 1.0, "b": 1.0}, drift=0.01, noise=0.0, seed=1), rounds=18).ratio("a", "b")
    assert r.verdict == "within", r.says()


def test_bad_input_is_refused_with_a_reason():
    with pytest.raises(ValueError, match="two candidates"):
        interleaved({"a": lambda: 1.0}, rounds=4)
    with pytest.raises(ValueError, match="single pass"):
        interleaved({"a": lambda: 1.0, "b": lambda: 1.0}, rounds=1)
    with pytest.raises(ValueError, match="nan"):
        interleaved({"a": lambda: float("nan"), "b": lambda: 1.0}, rounds=2)
    with pytest.raises(ValueError, match="no rounds"):
        bootstrap_interval([])


@given(xs=st.lists(st.floats(0.5, 2.0), min_size=1, max_size=40))
def test_the_bootstrap_interval_brackets_the_median(xs):
    lo, hi = bootstrap_interval(xs, resamples=500)
    assert min(xs) <= lo <= hi <= max(xs)


def test_the_recorded_claims_table_is_what_the_rounds_rows_give():
    """kernels.compare.claims_table over the recorded rounds (kernels/<slug>/rounds_<gpu>.json and ladder records
    holding rounds): each claim's median (per claim and data) is the median of its per-round ratios, recomputed here
    from the rows themselves; the interval holds it; what it says follows the interval; the H200's GEMM and attention
    rounds are there with 18 rounds or more each."""
    import statistics

    from kernels.claims import COPY_DAYS, claims_table
    from kernels.copy_rounds import COPY
    from kernels.record import rounds_records

    rows = claims_table()
    docs = {(s, t): d for s, t, d in rounds_records()}
    assert {("gemm", "h200"), ("attention", "h200"), ("gemm", "h100")} <= set(docs)
    for r in rows:
        doc = next(d for (s, t), d in docs.items() if s == r["slug"] and d["device"] == r["device"])
        if r["slug"] == "gemm":
            ours = r["claim"].split(" / ")[0]
            tf = {(x["rung"], x["round"]): x["tflops"] for x in doc["rows"] if x.get("lesson") == "parity"
                  and x.get("data", "exercise") == r["data"]}
        elif r["slug"] == "fp8_gemm":  # "<candidate> / cuBLASLt block-scaled FP8, <shape>": speed = 1 / ms
            ours, shape = r["claim"].split(" / ")[0], r["claim"].split(", ", 1)[1]
            lad = next(x for x in doc["rows"] if "x".join(map(str, x["shape"])) == shape)
            tf = {(n, k): 1 / ms for n, t in lad["comparison"]["times_ms"].items() for k, ms in enumerate(t)}
        elif r["slug"] in COPY_DAYS:  # "<rung> / D2D copy, <shape>": the rung's claim's rows, TB/s
            ours, shape = r["claim"].split(" / D2D copy, ")
            claim = next(x["claim"] for x in doc["rows"] if x.get("rung") == ours and x["shape"] == shape)
            tf = {(x["rung"], x["round"]): x["tbps"] for x in doc["rows"] if x.get("lesson") == "rounds"
                  and x.get("claim") == claim and x.get("data", "exercise") == r["data"]}
        else:
            shape = r["claim"].split(", ", 1)[1]
            ours = "overlap"
            tf = {(x["rung"], x["round"]): x["tflops"] for x in doc["rows"] if x.get("lesson") == "rounds"
                  and x["goal_shape"] == shape and x.get("data", "exercise") == r["data"]}
        # a GEMM claim's baseline is its pair's other side (cuBLAS, cuBLASLt's best, Triton's best tile)
        base = (next(k for k in r["sm_mhz"] if k != ours) if r["slug"] == "gemm"
                else COPY if r["slug"] in COPY_DAYS else lad["baseline"] if r["slug"] == "fp8_gemm" else "cudnn")
        ks = sorted(k for v, k in tf if v == ours and (base, k) in tf)
        assert len(ks) == r["rounds"] >= 6
        assert r["median"] == pytest.approx(statistics.median(tf[(ours, k)] / tf[(base, k)] for k in ks))
        assert r["lo"] <= r["median"] <= r["hi"]
        assert r["says"] == ("ahead" if r["lo"] > 1 else "behind" if r["hi"] < 1 else r["says"])
        assert r["says"].startswith("within") == (r["lo"] <= 1 <= r["hi"])
    h200 = [r for r in rows if r["device"] == "NVIDIA H200"]
    assert {"gemm", "attention"} <= {r["slug"] for r in h200} and all(r["rounds"] >= 18 for r in h200)


def test_the_readme_claims_table_is_the_generated_one():
    """README's "Claims against a baseline" table is `python -m kernels.claims --markdown` of today's records."""
    import re
    from pathlib import Path

    from kernels.claims import claims_markdown

    text = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    m = re.search(r"<!-- claims: generated by python -m kernels.claims --markdown -->\n(.*?)\n<!-- claims: end -->",
                  text, re.S)
    assert m, "README has no generated claims table"
    assert m.group(1) == claims_markdown()
