"""Week 2 days 1-3's claims against the D2D copy of the same bytes, measured the course's one way (kernels.copy_rounds)
with no GPU: the rounds' order balanced and the bytes checked; the summary's ratio and interval on synthetic rows (a
copy that is slower says "ahead", a tie says "within"); each day's declared claims run through its claim_rounds with
the GPU work faked (the known answers only where the grader hands them in); the claims table's rows of each day; make
gpu-test's 'claims rounds' step writing each day's record; each day's rounds under the GPU-time budget."""

from __future__ import annotations

import json
import random
import statistics
import sys
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kernels import claims, copy_rounds, topic
from kernels.bench import BenchResult
from kernels.compare import balanced_rounds, bootstrap_interval, speed_ratios
from kernels.copy_rounds import COPY, copy_summary, estimate_gpu_s
from kernels.multicast import bench as multicast_bench
from kernels.record import load
from kernels.swizzle import bench as swizzle_bench
from kernels.warp_specialization import bench as ws_bench

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import gpu_claims  # noqa: E402

DAYS = {"swizzle": swizzle_bench, "warp_specialization": ws_bench, "multicast": multicast_bench}
BUDGET_S = 40.0  # GPU seconds of one day's claim rounds on an H100


class FakeClock:
    source = "fake"

    def __init__(self, mhz: float):
        self.mhz = mhz

    def mean(self, t0, t1):
        return self.mhz


def _timers(speed: dict[str, float], nbytes: int, seen: list, rng: random.Random, drift: float = 0.002):
    """A timer per name: its TB/s is speed[name] x a clock that falls a little with every timing (a GPU heating up)
    x noise; each returns a BenchResult of `nbytes` and logs (name, data, round)."""
    def timer(name):
        def t(data, k):
            seen.append((name, data, k))
            tbps = speed[name] / (1 + drift * len(seen)) * (1 + rng.gauss(0, 0.003))
            ms = nbytes / (tbps * 1e12) * 1e3
            return BenchResult(ms=ms, p20_ms=ms, p80_ms=ms, reps=10, bytes=nbytes, flops=0, wall_ms=ms)
        return t

    return {n: timer(n) for n in speed}


def _rounds(speed: dict[str, float], nbytes: int = 268435456, rounds=None, datas=("exercise",), seed=None):
    rng = random.Random(seed)
    seen: list = []
    ts = _timers(speed, nbytes, seen, rng)
    runs = {n: t for n, t in ts.items() if n != COPY}
    rows = copy_rounds.copy_rounds(runs, nbytes, shape="8192x8192", claim="c", clock=FakeClock(1755.0), rounds=rounds,
                                   datas=datas, copy=ts[COPY])
    return rows, seen


@pytest.mark.parametrize("n", [1, 2, 3])
def test_copy_rounds_are_balanced_and_time_every_name_once_a_round(n):
    speed = {**{f"k{i}": random.uniform(1.5, 3.0) for i in range(n)}, COPY: 3.0}
    rows, seen = _rounds(speed, datas=("exercise", "normal"))
    rounds = balanced_rounds(list(speed))
    assert rounds == (18 if n < 3 else 24)
    assert len(rows) == len(seen) == 2 * rounds * (n + 1)
    passes: dict = {}
    for name, data, k in seen:
        passes.setdefault((data, k), []).append(name)
    assert len(passes) == 2 * rounds
    for data in ("exercise", "normal"):
        orders = [o for (d, _), o in passes.items() if d == data]
        assert all(sorted(o) == sorted(speed) for o in orders)
        for i in (0, -1):
            assert len(set(Counter(o[i] for o in orders).values())) == 1 and \
                set(Counter(o[i] for o in orders)) == set(speed), (data, i)
    # one data per pass, the datas' order swapped every other round
    assert [d for _, d, k in seen if k == 0][0] == "exercise" and [d for _, d, k in seen if k == 1][0] == "normal"
    r = rows[0]
    assert r["lesson"] == "rounds" and r["claim"] == "c" and r["shape"] == "8192x8192" and r["sm_mhz"] == 1755.0
    assert r["clock_source"] == "fake" and r["tbps"] and r["round"] == 0 and r["rung"] == seen[0][0]
    assert {x["rung"] for x in rows} == set(speed) and all(x["tbps"] > 0 for x in rows)
    assert {x["kernel"] for x in rows if x["round"] == 3 and x["data"] == "normal"} == \
        {f"{n} (round 3, normal data)" for n in speed}
    # each timing's wall time kept: what the rounds held the GPU for
    assert all(x["timing_s"] >= 0 for x in rows)
    secs = copy_rounds.rounds_seconds(rows + [{"lesson": "rounds", "claim": "d", "timing_s": 2.5}, {"timing_s": 9}])
    assert secs["c"] == pytest.approx(sum(x["timing_s"] for x in rows)) and secs["d"] == 2.5
    assert secs["total"] == pytest.approx(secs["c"] + 2.5)


def test_copy_rounds_refuse_a_timing_of_other_bytes_and_a_claim_without_rungs():
    seen: list = []
    ts = _timers({"k": 2.0, COPY: 3.0}, 1000, seen, random.Random())
    with pytest.raises(ValueError, match="moved 1000 bytes"):
        copy_rounds.copy_rounds({"k": ts["k"]}, 2000, shape="s", claim="c", copy=_timers({COPY: 3.0}, 2000, [],
                                                                                          random.Random())[COPY])
    with pytest.raises(ValueError, match="rungs of its own"):
        copy_rounds.copy_rounds({}, 1000, shape="s", claim="c", copy=ts[COPY])
    # the copy's float32 buffers may move up to 7 bytes fewer than the claim's bytes
    rows = copy_rounds.copy_rounds({"k": _timers({"k": 2.0}, 1003, [], random.Random())["k"]}, 1003, shape="s",
                                   claim="c", rounds=2, copy=ts[COPY])
    assert len(rows) == 4


def _synthetic(fractions: list[float], copy_tbps: list[float], rung="k", claim="c", data="exercise", mhz=(1700, 1650)):
    rows = []
    for k, (f, c) in enumerate(zip(fractions, copy_tbps)):
        rows.append({"kernel": f"{rung} (round {k})", "shape": "s", "tbps": f * c, "lesson": "rounds", "round": k,
                     "rung": rung, "claim": claim, "data": data, "sm_mhz": mhz[0]})
        rows.append({"kernel": f"copy (round {k})", "shape": "s", "tbps": c, "lesson": "rounds", "round": k,
                     "rung": COPY, "claim": claim, "data": data, "sm_mhz": mhz[1]})
    return rows


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10**6), frac=st.floats(0.5, 1.2))
def test_the_summary_is_the_median_of_the_per_round_ratios_with_its_interval(seed, frac):
    rng = random.Random(seed)
    fr = [frac * (1 + rng.gauss(0, 0.01)) for _ in range(18)]
    cp = [3.0 * (1 - 0.002 * k) for k in range(18)]  # the copy drifts; the ratio is taken within each round
    s = copy_summary(_synthetic(fr, cp) + [{"kernel": "ladder row", "shape": "s", "tbps": 9.0}])
    assert set(s) == {"c"} and s["c"]["shape"] == "s" and set(s["c"]["by_data"]) == {"exercise"}
    x = s["c"]["by_data"]["exercise"]["k"]
    assert x["per_round"] == pytest.approx(fr) and x["rounds"] == 18
    assert x["median"] == pytest.approx(statistics.median(fr))
    assert (x["lo"], x["hi"]) == pytest.approx(bootstrap_interval(x["per_round"]))
    assert x["lo"] <= x["median"] <= x["hi"] and x["min"] == min(x["per_round"]) and x["max"] == max(x["per_round"])
    assert x["sm_mhz"] == {"k": 1700, COPY: 1650}
    assert x["says"].split(":")[0].split()[0] == ("ahead" if x["lo"] > 1 else "behind" if x["hi"] < 1 else "within")


def test_a_slower_copy_says_ahead_a_tie_within_a_faster_one_behind():
    rng = random.Random()
    cp = [rng.uniform(2.9, 3.1) for _ in range(18)]

    def says(center):
        return copy_summary(_synthetic([center * (1 + rng.uniform(-0.002, 0.002)) for _ in cp], cp))["c"][
            "by_data"]["exercise"]["k"]["says"]

    assert says(1.05).startswith("ahead: 1.0")  # the copy slower: the rung ahead of it
    es = [rng.uniform(0.001, 0.02) for _ in range(9)]
    tie = [1 + e for e in es] + [1 - e for e in es]  # a tie: as many rounds above as below, as far
    rng.shuffle(tie)
    assert copy_summary(_synthetic(tie, cp))["c"]["by_data"]["exercise"]["k"]["says"].startswith("within +-")
    assert says(0.8).startswith("behind: 0.")
    # two data labels and two claims: summarised apart
    rows = _synthetic([1.05] * 18, cp) + _synthetic([0.8] * 18, cp, data="normal") + \
        _synthetic([0.9] * 18, cp, claim="d", rung="j")
    s = copy_summary(rows)
    assert s["c"]["by_data"]["exercise"]["k"]["median"] == pytest.approx(1.05)
    assert s["c"]["by_data"]["normal"]["k"]["median"] == pytest.approx(0.8)
    assert set(s["d"]["by_data"]["exercise"]) == {"j"} and copy_summary(rows[:1]) == {}


def test_speed_ratios_is_each_runs_ratio_to_the_baseline_of_the_same_round():
    per = {"a": {0: 2.0, 1: 4.0, 2: 3.0}, "b": {0: 1.0, 3: 9.0}, "base": {0: 2.0, 1: 2.0, 2: 2.0}}
    s = speed_ratios(per, "base", {"a": [1800, None], "base": [1700]})
    assert set(s) == {"a"}  # b shares one round with the baseline: fewer than two
    assert s["a"]["per_round"] == [1.0, 2.0, 1.5] and s["a"]["median"] == 1.5 and s["a"]["rounds"] == 3
    assert s["a"]["sm_mhz"] == {"a": 1800, "base": 1700}
    assert speed_ratios({"a": {0: 1.0}}, "base") == {}
    assert set(speed_ratios(per, "base", min_rounds=1)) == {"a", "b"}


def test_common_rounds_balance_every_claim_of_a_day():
    assert copy_rounds.common_rounds([["a", "b"]]) == 18
    assert copy_rounds.common_rounds([["a", "b"], ["a", "b", "c", "d"]]) == 24
    assert copy_rounds.common_rounds([["a", "b", "c"], ["a", "b", "c", "d"]]) == 24
    for day in DAYS.values():
        for rungs, _ in day.COPY_CLAIMS.values():
            assert balanced_rounds(copy_rounds.claim_names(rungs), day.CLAIM_ROUNDS) == day.CLAIM_ROUNDS


def _fake_day(monkeypatch, day, fractions: dict[str, float], answers: bool):
    """A day's claim rounds with the GPU work faked: each rung's own run (the day's) and every known answer's
    (answer_run) a timer of its fraction of a 3 TB/s copy, on the claim's bytes; the known answers handed in or
    not."""
    rng = random.Random()
    seen: list = []
    nbytes_of = {}

    def fake(name, nbytes):
        t = _timers({name: 3.0 * fractions[name]}, nbytes, seen, rng)[name]
        return t, (lambda: None)

    def claim_runs(claim, reps=10, seed=0):
        rungs, shape = day.COPY_CLAIMS[claim]
        nbytes = 1000 + len(nbytes_of)  # each claim its own bytes (the copy's must be the claim's)
        nbytes_of[claim] = nbytes
        monkeypatch.setattr(copy_rounds, "answer_run", lambda slug, answer, shape, reps, seed: fake(
            next(n for n, a in day.ANSWER_RUNGS.items() if a == answer and n in rungs), nbytes))
        runs = copy_rounds.rung_runs(day.SLUG, rungs, lambda name: fake(name, nbytes), answers=day.ANSWER_RUNGS,
                                     shape=shape, reps=reps, seed=seed)
        return runs, nbytes, f"shape of {claim}"

    monkeypatch.setattr(day, "_claim_runs", claim_runs)
    monkeypatch.setattr(copy_rounds, "copy_run",
                        lambda nbytes, reps=10: (_timers({COPY: 3.0}, nbytes, seen, rng)[COPY], lambda: None))
    with topic.provided(day.SLUG, topic.Answers({}, lambda name: "") if answers else None):
        rows = day.claim_rounds(FakeClock(1800.0))
    return rows, seen


@pytest.mark.parametrize("slug", list(DAYS))
def test_each_days_claims_run_in_rounds_and_give_the_claims_tables_rows(monkeypatch, slug):
    day = DAYS[slug]
    rungs = [n for rs, _ in day.COPY_CLAIMS.values() for n in rs]
    fractions = {n: random.uniform(0.6, 1.1) for n in rungs}
    rows, seen = _fake_day(monkeypatch, day, fractions, answers=True)
    assert {r["claim"] for r in rows} == set(day.COPY_CLAIMS) and {r["data"] for r in rows} == {"exercise"}
    for claim, (rs, _) in day.COPY_CLAIMS.items():
        mine = [r for r in rows if r["claim"] == claim]
        assert {r["round"] for r in mine} == set(range(day.CLAIM_ROUNDS)) and \
            {r["rung"] for r in mine} == {*rs, COPY} and len(mine) == day.CLAIM_ROUNDS * (len(rs) + 1)
        for i in (0, -1):  # first and last equally often, per claim
            firsts = Counter([r["rung"] for r in mine if r["round"] == k][i] for k in range(day.CLAIM_ROUNDS))
            assert set(firsts) == {*rs, COPY} and len(set(firsts.values())) == 1, (claim, i, firsts)
    kernels = {claim: {**{n: [f"{n.split()[0]}_kernel", "other"] for n in rs}, COPY: []}
               for claim, (rs, _) in day.COPY_CLAIMS.items()}
    doc = {"device": "NVIDIA H100 80GB HBM3", "driver": "test", "date": "2026-12-03", "rows": rows, "kernels": kernels}
    table = claims.doc_claims(slug, doc)
    assert [r["claim"] for r in table] == [f"{n} / D2D copy, shape of {c}" for c, (rs, _) in day.COPY_CLAIMS.items()
                                           for n in rs]
    for r in table:
        rung = r["claim"].split(" / ")[0]
        assert r["slug"] == slug and r["data"] == "exercise" and r["rounds"] == day.CLAIM_ROUNDS
        assert r["lo"] - 0.02 <= fractions[rung] <= r["hi"] + 0.02 and r["lo"] <= r["median"] <= r["hi"]
        word = "ahead" if r["lo"] > 1 else "behind" if r["hi"] < 1 else \
            f"within +-{100 * max(abs(r['lo'] - 1), abs(r['hi'] - 1)):.1f} %"  # kernels.compare's Ratio.says
        assert r["says"] == word and r["sm_mhz"] == {rung: 1800.0, COPY: 1800.0}
        assert r["kernels"] == {rung: f"{rung.split()[0]}_kernel"}  # the copy's memcpy names no kernel
    # without the known answers (a notebook, a student release): the answers' rungs are left out, a claim of answers
    # alone is not run at all
    rows, _ = _fake_day(monkeypatch, day, fractions, answers=False)
    left = {n for rs, _ in day.COPY_CLAIMS.values() for n in rs if n not in day.ANSWER_RUNGS}
    assert {r["rung"] for r in rows} == {*left, COPY}
    assert {r["claim"] for r in rows} == \
        {c for c, (rs, _) in day.COPY_CLAIMS.items() if set(rs) - set(day.ANSWER_RUNGS)}


@pytest.mark.parametrize("slug", list(DAYS))
def test_each_days_claims_name_its_ladder_rows_and_its_exercises_bench_shape(slug):
    """Every rung of a claim is a row of the day's ladder records (the same name, the same shape where the claim's
    shape is the ladder's), the answers' rungs are the exercise's known answers and their shape is the spec's bench
    shape."""
    from autograder.spec import load as spec

    day = DAYS[slug]
    ex = next(iter(spec(slug).exercises.values()))
    for tag in ("h100", "h200"):
        rows = {r["kernel"]: r for r in load(slug, tag)["rows"]}
        for rungs, shape in day.COPY_CLAIMS.values():
            for n in rungs:
                assert n in rows and rows[n].get("tbps"), (tag, n)
                if isinstance(shape, tuple):
                    assert rows[n]["shape"] == "x".join(map(str, shape)), (tag, n)
    for n, answer in day.ANSWER_RUNGS.items():
        claim = next(c for c, (rs, _) in day.COPY_CLAIMS.items() if n in rs)
        assert tuple(day.COPY_CLAIMS[claim][1]) == tuple(ex.bench_shape) and answer in ("correct", "per_cta")
        assert set(day.COPY_CLAIMS[claim][0]) <= set(day.ANSWER_RUNGS)  # a claim is all answers or none: one bytes


@pytest.mark.parametrize("slug", list(DAYS))
@pytest.mark.parametrize("tag", ["h100", "h200"])
def test_each_days_rounds_stay_within_the_gpu_time_budget(slug, tag):
    """estimate_gpu_s from the day's recorded ladder (launches per timing x recorded ms x rounds, warm-ups included)
    under BUDGET_S per day, every claim counted with its answers."""
    day = DAYS[slug]
    warm = {n: day.WARM_S for n in day.BROADCAST} if slug == "multicast" else None
    est = estimate_gpu_s(day.COPY_CLAIMS, load(slug, tag), rounds=day.CLAIM_ROUNDS, answers=day.ANSWER_RUNGS,
                         warm_s=warm)
    assert set(est) == {*day.COPY_CLAIMS, "total"} and all(v > 0 for v in est.values())
    assert est["total"] < BUDGET_S, est
    # the estimate grows with the rounds and with what each timing repeats
    more = estimate_gpu_s(day.COPY_CLAIMS, load(slug, tag), rounds=2 * day.CLAIM_ROUNDS, answers=day.ANSWER_RUNGS,
                          warm_s=warm, reps=30)
    assert more["total"] > 2 * est["total"] * 0.99


def _copy_day_docs():
    docs = {}
    for slug, day in DAYS.items():
        rows = []
        for claim, (rungs, _) in day.COPY_CLAIMS.items():
            for k in range(day.CLAIM_ROUNDS):
                for n in (*rungs, COPY):
                    rows.append({"kernel": f"{n} (round {k})", "shape": f"shape of {claim}", "lesson": "rounds",
                                 "round": k, "rung": n, "claim": claim, "data": "exercise", "sm_mhz": 1790.0,
                                 "tbps": (2.4 if n != COPY else 3.0) * (1 + 0.001 * random.random())})
        docs[slug] = {"kernels": {c: {n: [f"{n}_k"] for n in rs} for c, (rs, _) in day.COPY_CLAIMS.items()},
                      "rows": rows, "rounds": day.CLAIM_ROUNDS, "datas": ["exercise"]}
    return docs


def test_the_claims_step_writes_each_copy_days_record(tmp_path, fake_claims_step):
    measured = _copy_day_docs()
    asked, _ = fake_claims_step(measured, "NVIDIA H100 80GB HBM3")
    cmd = "python3 tools/gpu_check.py --slugs swizzle warp_specialization multicast"
    res = gpu_claims.claims_rounds(["multicast", "tma", "swizzle", "warp_specialization"], tmp_path / "out", cmd)
    assert res["ok"] and asked == ["swizzle", "warp_specialization", "multicast"]
    for slug, m in measured.items():
        out = json.loads((tmp_path / "out" / slug / "rounds_h100.json").read_text())
        assert out == json.loads((tmp_path / "kernels" / slug / "rounds_h100.json").read_text())
        assert out["datas"] == ["exercise"] and out["rounds"] == DAYS[slug].CLAIM_ROUNDS and out["what"] == cmd
        assert out["rows"] == m["rows"] and out["kernels"] == m["kernels"] and "exercise data" in out["about"]
        cl = res[slug]["claims"]
        assert len(cl) == sum(len(rs) for rs, _ in DAYS[slug].COPY_CLAIMS.values())
        assert all(c["claim"].split(" / ")[1].startswith("D2D copy, shape of ") and c["median"] == pytest.approx(
            0.8, rel=0.01) and c["says"] == "behind" for c in cl)


def test_measure_rounds_of_a_copy_day_hands_the_known_answers_in(monkeypatch):
    """measure_rounds for a copy day: the day's kernels profiled and its rounds run with its known answers provided
    (shipped), the SM clock running, on the day's one data label, its CLAIM_ROUNDS rounds."""
    seen = {}

    class Clock:
        source = "fake"

        def __init__(self, period_ms=None):
            seen["period_ms"] = period_ms

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

    def kernels():
        seen["kernels"] = topic.shipped("warp_specialization", ["correct"])
        return {"k": 1}

    def rounds(clock, rounds=None, datas=None):
        seen["rounds"] = (topic.shipped("warp_specialization", ["correct"]), rounds, datas, clock.source)
        return [{"row": 1}]

    monkeypatch.setattr(gpu_claims, "SmClock", Clock)
    monkeypatch.setattr(gpu_claims, "known_answers", lambda slug: topic.Answers({}, lambda n: ""))
    monkeypatch.setattr(ws_bench, "claim_kernels", kernels)
    monkeypatch.setattr(ws_bench, "claim_rounds", rounds)
    m = gpu_claims.measure_rounds("warp_specialization")
    assert m == {"kernels": {"k": 1}, "rows": [{"row": 1}], "rounds": ws_bench.CLAIM_ROUNDS, "datas": ["exercise"]}
    assert seen == {"kernels": ["correct"], "rounds": (["correct"], ws_bench.CLAIM_ROUNDS, ("exercise",), "fake"),
                    "period_ms": copy_rounds.CLOCK_MS}
    assert topic.shipped("warp_specialization", ["correct"]) == []  # handed back after the step
    assert set(gpu_claims.SLUGS) == {"gemm", "attention", "fp8_gemm", *DAYS}
    assert set(gpu_claims.ABOUT) == set(gpu_claims.SLUGS)
    assert {s: gpu_claims.rounds_for(s) for s in DAYS} == {"swizzle": 18, "warp_specialization": 18, "multicast": 24}
