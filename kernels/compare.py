"""The course's one method for a claim against a baseline: interleaved rounds, positions balanced, a median ratio with
a bootstrap interval, and the sentence the interval supports.

    cmp = interleaved({"course": time_course, "vendor": time_vendor}, rounds=18)
    r = cmp.ratio("course", "vendor")      # speed of course relative to vendor: vendor's time / course's time
    r.median, r.lo, r.hi, r.says()          # 1.023, 1.011, 1.034, "ahead: 1.023x (95 % interval 1.011-1.034)"

A timing of one kernel moves from run to run by more than the differences the course claims (the same SASS 5-20 %
apart on other data; cuBLAS at 8192^3 from 724 to 804 TFLOPS on one H100 at its power limit), and it drifts within
a run as the GPU heats and its clock falls. So no claim compares two single passes: each round times every candidate
once, in an order that rotates each round and reverses every other round (each candidate first and last equally
often over a multiple of 2 x candidates rounds), and the ratio is taken within a round (both sides saw the same
clock), then summarised over rounds by its median with a percentile bootstrap interval.

`measure` callables return milliseconds of one measurement (e.g. kernels.bench.bench(...).ms); they are called in
the round's order. A topic that times its rounds itself (rows of TFLOPS or TB/s per round) summarises each run
against its baseline with speed_ratios. Nothing here needs a GPU: tests drive it with timers of their own.
"""

from __future__ import annotations

import random
import statistics
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable

ROUNDS = 18  # the course's default: every position balanced for 2 and 3 candidates (18 = 2 x 9 = 2 x 3 x 3)
BOOTSTRAP = 4000
LEVEL = 0.95


def round_orders(names: list[str], rounds: int) -> list[list[str]]:
    """The order of each round: rotated by the round's index, reversed every other round. Over 2 x len(names)
    rounds (a multiple of it), each name is first, and last, equally often."""
    n = len(names)
    orders = []
    for r in range(rounds):
        k = (r // 2) % n
        order = names[k:] + names[:k]
        orders.append(order[::-1] if r % 2 else order)
    return orders


def balanced_rounds(names, at_least: int = ROUNDS) -> int:
    """The fewest rounds, at least `at_least`, whose round_orders put each name first, and last, equally often: 18 for
    2 or 3 names, 24 for 4 (18 rounds of 4 names put two of them first 5 times, the other two 4 times)."""
    names = list(names)
    r = at_least
    while True:
        orders = round_orders(names, r)
        if all(len(set(Counter(o[i] for o in orders)[n] for n in names)) == 1 for i in (0, -1)):
            return r
        r += 1


@dataclass(frozen=True)
class Ratio:
    """Speed of `a` relative to `b` per round (b's time / a's time), summarised: median and bootstrap interval."""

    a: str
    b: str
    per_round: tuple[float, ...]
    median: float
    lo: float
    hi: float
    level: float = LEVEL

    @classmethod
    def of(cls, a: str, b: str, per_round, *, level: float = LEVEL) -> "Ratio":
        """The summary of per-round ratios (a's speed over b's, each within one round): median, bootstrap interval."""
        per = tuple(per_round)
        lo, hi = bootstrap_interval(list(per), level=level)
        return cls(a, b, per, statistics.median(per), lo, hi, level)

    def says(self, tolerance: float = 0.0) -> str:
        """What the interval supports: "ahead" (the whole interval above 1 + tolerance), "behind" (below 1 -
        tolerance), else "within +-x %" (x: the interval's farther end from 1)."""
        text = f"{self.median:.3f}x (95 % interval {self.lo:.3f}-{self.hi:.3f}, {len(self.per_round)} rounds)"
        if self.lo > 1 + tolerance:
            return f"ahead: {text}"
        if self.hi < 1 - tolerance:
            return f"behind: {text}"
        return f"within +-{100 * max(abs(self.lo - 1), abs(self.hi - 1)):.1f} %: {text}"

    @property
    def verdict(self) -> str:
        """"ahead", "behind" or "within"."""
        return self.says().split(":", 1)[0].split()[0]

    def to_dict(self) -> dict:
        return {"a": self.a, "b": self.b, "median": self.median, "lo": self.lo, "hi": self.hi, "level": self.level,
                "rounds": len(self.per_round), "per_round": list(self.per_round), "says": self.says()}


def speed_ratios(per: dict[str, dict[int, float]], baseline: str, mhz: dict[str, list] | None = None, *,
                 min_rounds: int = 2, level: float = LEVEL) -> dict[str, dict]:
    """The rounds of a claim against `baseline` summarised, one entry per other run: `per` holds each run's speed
    (TB/s or TFLOPS: higher is faster) by round, `mhz` each run's SM clock samples (one per timing, None where none
    was read). For each run, its speed over the baseline's of the same round (the rounds both timed), summarised by
    Ratio.of: {"rounds", "median", "lo", "hi", "min", "max", "says", "per_round", "sm_mhz": {run: mean MHz or None,
    baseline: mean MHz or None}}. A run with fewer than `min_rounds` rounds in common with the baseline is left out;
    {} without the baseline."""
    base = per.get(baseline) or {}
    if not base:
        return {}

    def mean_mhz(run: str) -> float | None:
        xs = [m for m in (mhz or {}).get(run, []) if m]
        return statistics.mean(xs) if xs else None

    out = {}
    for run, speed in per.items():
        ks = sorted(set(speed) & set(base))
        if run == baseline or len(ks) < min_rounds:
            continue
        ratios = [speed[k] / base[k] for k in ks]
        r = Ratio.of(run, baseline, ratios, level=level)
        out[run] = {"rounds": len(ks), "median": r.median, "lo": r.lo, "hi": r.hi, "min": min(ratios),
                    "max": max(ratios), "says": r.says(), "per_round": ratios,
                    "sm_mhz": {run: mean_mhz(run), baseline: mean_mhz(baseline)}}
    return out


def bootstrap_interval(xs: list[float], *, level: float = LEVEL, resamples: int = BOOTSTRAP,
                       seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap interval of the median of `xs` (deterministic: seeded)."""
    if not xs:
        raise ValueError("no rounds to summarise")
    rng = random.Random(seed)
    n = len(xs)
    meds = sorted(statistics.median(rng.choices(xs, k=n)) for _ in range(resamples))
    tail = (1 - level) / 2
    return meds[int(tail * (resamples - 1))], meds[int(round((1 - tail) * (resamples - 1)))]


@dataclass
class Comparison:
    """Each candidate's time (ms) in each round, in round order."""

    names: list[str]
    times: dict[str, list[float]] = field(default_factory=dict)
    orders: list[list[str]] = field(default_factory=list)

    def ratio(self, a: str, b: str, *, level: float = LEVEL) -> Ratio:
        per = [tb / ta for ta, tb in zip(self.times[a], self.times[b]) if ta > 0]
        if not per:
            raise ValueError(f"no round timed both {a} and {b}")
        return Ratio.of(a, b, per, level=level)

    def median_ms(self, name: str) -> float:
        return statistics.median(self.times[name])

    def to_dict(self) -> dict:
        return {"names": self.names, "times_ms": self.times, "orders": self.orders}


def interleaved(measure: dict[str, Callable[[], float]], rounds: int = ROUNDS,
                progress: Callable[[int, int], None] | None = None) -> Comparison:
    """Time every candidate once per round, in round_orders' order; `progress(done, rounds)` after each round."""
    if len(measure) < 2:
        raise ValueError("a comparison needs two candidates or more")
    if rounds < 2:
        raise ValueError("a comparison needs two rounds or more (one round is a single pass)")
    names = list(measure)
    cmp = Comparison(names, {n: [] for n in names})
    for r, order in enumerate(round_orders(names, rounds)):
        for n in order:
            ms = float(measure[n]())
            if not ms > 0:
                raise ValueError(f"{n}: a measurement of {ms!r} ms")
            cmp.times[n].append(ms)
        cmp.orders.append(order)
        if progress:
            progress(r + 1, rounds)
    return cmp
