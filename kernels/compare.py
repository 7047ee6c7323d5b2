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
the round's order. Nothing here needs a GPU: tests drive it with timers of their own.
"""

from __future__ import annotations

import random
import statistics
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


# ------------------------------------------------------------------------------------------ the recorded claims
def claims_table(slug: str | None = None) -> list[dict]:
    """Every claim against a baseline that recorded rounds support (kernels/<slug>/rounds_<gpu>.json), one row each:
    the GPU, driver and date, the claim, the rounds, the median ratio, its 95 % interval, what the interval supports,
    and each side's mean SM clock where the rounds sampled it. Read with the topic's own summary (the GEMM's
    parity_summary, attention's rounds_summary), so the table and the notebooks agree."""
    import statistics

    from .record import rounds_records

    out = []
    only = slug
    for slug, tag, doc in rounds_records():
        if only is not None and slug != only:
            continue
        where = {"device": doc["device"], "driver": doc.get("driver"), "date": doc.get("date")}
        if slug == "gemm":
            from .gemm.bench import parity_summary

            s = parity_summary(doc["rows"])
            mhz = {}
            for r in doc["rows"]:
                if r.get("lesson") == "parity" and r.get("sm_mhz"):
                    mhz.setdefault(r["rung"], []).append(r["sm_mhz"])
            for v, x in s.get("over_cublas", {}).items():
                shape = next(r["shape"] for r in doc["rows"] if r.get("lesson") == "parity")
                out.append({**where, "slug": slug, "claim": f"{v} / cuBLAS, {shape}",
                            "rounds": s["rounds"], "median": x["median"], "lo": x["lo"], "hi": x["hi"],
                            "says": x["says"].split(":")[0],
                            "sm_mhz": {k: statistics.mean(mhz[k]) for k in (v, "cublas") if mhz.get(k)}})
        elif slug == "attention":
            from .attention.bench import rounds_summary

            for shape, x in rounds_summary(doc["rows"]).items():
                out.append({**where, "slug": slug, "claim": f"overlap rung / cuDNN, {shape}", "rounds": x["rounds"],
                            "median": x["median"], "lo": x["lo"], "hi": x["hi"], "says": x["says"].split(":")[0],
                            "sm_mhz": {k: v for k, v in x["sm_mhz"].items() if v}})
    return out


def claims_markdown(slug: str | None = None) -> str:
    """The recorded claims as a Markdown table (the README's, held to this by a test)."""
    lines = ["| GPU (driver, date) | claim | rounds | median | 95 % interval | the interval says | mean SM MHz |",
             "|---|---|---|---|---|---|---|"]
    for r in claims_table(slug):
        clocks = ", ".join(f"{k} {v:.0f}" for k, v in r["sm_mhz"].items())
        lines.append(f"| {r['device']} ({r['driver']}, {r['date']}) | {r['claim']} | {r['rounds']} | "
                     f"{r['median']:.3f}x | {r['lo']:.3f}-{r['hi']:.3f}x | {r['says']} | {clocks} |")
    return "\n".join(lines)


def print_claims(rows: list[dict] | str | None = None) -> None:
    """The recorded claims (all, or one topic's: print_claims("gemm")), one line each."""
    rows = claims_table(rows) if rows is None or isinstance(rows, str) else rows
    print(f"{'GPU (driver, date)':<48}{'claim':<38}{'rounds':>7}{'median':>8}{'95 % interval':>16}  "
          f"{'says':<16}SM MHz")
    for r in rows:
        clocks = ", ".join(f"{k} {v:.0f}" for k, v in r["sm_mhz"].items())
        print(f"{r['device'] + ' (' + str(r['driver']) + ', ' + str(r['date']) + ')':<48}{r['claim']:<38}"
              f"{r['rounds']:>7}{r['median']:>7.3f}x{r['lo']:>9.3f}-{r['hi']:.3f}x  {r['says']:<16}{clocks}")


if __name__ == "__main__":  # python -m kernels.compare [--markdown]: the recorded claims
    import sys

    if "--markdown" in sys.argv:
        print(claims_markdown())
    else:
        print_claims()
