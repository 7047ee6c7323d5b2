"""A day's kernels against torch's D2D copy of the same bytes, measured the course's one way (kernels.compare).

Week 2's days 1-3 state their results as fractions of the copy ceiling of the same run (kernels.bench.ceilings: a
torch copy of 1 GiB, one pass): a ratio of two single timings, taken at different moments of the run. A claim
against the copy rests on interleaved rounds instead: each round times every rung of the claim and the copy of the
same number of bytes (`dst.copy_(src)`, float32 buffers of the rung's bytes_moved: half read, half written) once each
with the course timer (kernels.bench.bench: fresh inputs, the L2 flushed before every repetition), in
kernels.compare.round_orders' order, the SM clock sampled while each timing ran (every CLOCK_MS); the ratio rung TB/s
/ copy TB/s is taken within a round and summarised over the rounds (copy_summary: median, bootstrap interval, what it
supports). The copy of a rung's bytes is not the ceiling's 1 GiB copy (a smaller copy need not run at the ceiling's
rate): these ratios are not the ladder's fractions of the ceiling, and the exercises' bars stay fractions of the
ceiling (the grader's).

    rows = copy_rounds({"colsum swz128 p1": time_colsum}, nbytes, shape="4096x16896", claim="colsum 1 pass",
                       clock=clock)
    copy_summary(rows)["colsum 1 pass"]["by_data"]["exercise"]["colsum swz128 p1"]["says"]

A day declares its claims as data in its bench.py (COPY_CLAIMS: claim -> the rungs, the ladder's row names, and
their shape) and its rungs' timers (_claim_runs, through claim_runs), and binds its claim_kernels and
claim_rounds(clock, rounds, datas) with claim_entry_points; make gpu-test's 'claims rounds' step
(tools/gpu_claims.py) writes the rows to kernels/<slug>/rounds_<gpu>.json and kernels.claims reads them with
copy_summary. The days' make_inputs draw one kind of data each (small integers or N(0, 1), no exercise / N(0, 1)
pair as the GEMM and attention days have), so their rounds run on one data label, "exercise" (DATAS).

Rows (the GEMM parity rounds' format): `lesson` "rounds", `round` k, `rung` (a rung's name, or COPY), `data`, `claim`,
`tbps`, `ms`, `sm_mhz` (None where the clock could not be read or took no sample while the timing ran),
`clock_source`, `timing_s` (the timing's wall time, host work included). Everything here but copy_summary,
common_rounds, estimate_gpu_s and rounds_seconds needs a GPU; tests drive copy_rounds with timers of their own.
"""

from __future__ import annotations

import time
from typing import Callable

from .bench import bench, kernel_names
from .compare import ROUNDS, balanced_rounds, round_orders, speed_ratios
from .topic import answer_cubin, exercise_of, row, run_answer, shipped, time_answer

COPY = "copy"  # the baseline's rung name in the rows and in each claim's kernels
DATAS = ("exercise",)  # the copy days' one data label (their make_inputs draw one kind of data)
LESSON = "rounds"
REPS = 10  # timed repetitions of every timing (the GEMM and attention rounds' count)
BYTES_SLACK = 8  # the copy's float32 buffers move nbytes rounded down to 8 bytes (4 read + 4 written)
# The SM clock's sampling period for these rounds (kernels.clock.SmClock's period_ms): its default is longer than many
# timings of a day's kernel last (each row's timing_s), whose windows would then hold no sample.
CLOCK_MS = 10


def copy_run(nbytes: int, reps: int = REPS):
    """(timer, launch) of torch's D2D copy moving `nbytes` bytes: float32 buffers of nbytes // 8 elements, read
    once and written once (the copy ceiling's copy, kernels.bench, at the rung's size); timer(data, k) ->
    BenchResult (the course timer, L2 flushed before every repetition; `data` and `k` do not change a copy)."""
    import torch

    src = torch.randn(max(1, nbytes // 8), device="cuda")
    dst = torch.empty_like(src)

    def launch():
        dst.copy_(src)

    def timer(data: str, k: int):
        return bench(launch, bytes=2 * src.nbytes, reps=reps, with_ceilings=False)

    return timer, launch


def answer_run(slug: str, answer: str, shape, reps: int = REPS, seed: int = 0):
    """(timer, launch) of the exercise's known answer `answer` at `shape`, where the grader handed the answers in
    (kernels.topic.provided): timer(data, k) times it with the grader's own function (kernels.topic.time_answer:
    every launch verified, fresh inputs, seed + k) and raises where a launch was wrong; launch() runs it once on the
    exercise's inputs (for kernel_names)."""
    ex, wl = exercise_of(slug)
    inputs = wl.make_inputs(tuple(shape), seed, device="cuda")
    out = wl.make_output(inputs)

    def timer(data: str, k: int):
        res = time_answer(slug, answer, shape=shape, reps=reps, seed=seed + k)
        if not res["output_ok"]:
            raise RuntimeError(f"{ex.name} ({answer}) at {shape}: {res['wrong_launches']} wrong launches in round {k}"
                               f" ({'; '.join(res['problems'][:2])})")
        return res

    def launch():
        run_answer(slug, answer_cubin(slug, answer), inputs, out)

    return timer, launch


def _bytes(res) -> int:
    return int(res["bytes"] if isinstance(res, dict) else res.bytes)


def copy_rounds(runs: dict[str, Callable[[str, int], object]], nbytes: int, *, shape: str, claim: str, clock=None,
                rounds: int | None = None, datas=DATAS, reps: int = REPS, copy=None) -> list[dict]:
    """One claim's interleaved rounds (module docstring): `runs` maps each rung's name to timer(data, k) -> its
    timing on `data` in round k (a kernels.bench.BenchResult, or time_answer's dict) moving `nbytes` bytes; the copy
    of the same bytes (copy_run; `copy`: a timer of the caller's) is timed beside them as COPY. `rounds` rounds
    (default the fewest, at least kernels.compare.ROUNDS, that put every name first and last equally often), each
    timing every name once per data of `datas` in round_orders' order (the datas' order swapped every other round).
    A timing whose bytes are not the claim's raises ValueError. Rows: module docstring; copy_summary reads them."""
    names = [*runs, COPY]
    if COPY in runs or len(names) < 2:
        raise ValueError(f"a claim against the copy needs rungs of its own, none named {COPY!r}: {list(runs)}")
    rounds = rounds or balanced_rounds(names)
    timers = {**runs, COPY: copy or copy_run(nbytes, reps)[0]}
    out = []
    for k, order in enumerate(round_orders(names, rounds)):
        for data in (datas if k % 2 == 0 else datas[::-1]):
            for name in order:
                t0 = time.monotonic()  # kernels.clock.timed, the timing's duration kept (timing_s)
                res = timers[name](data, k)
                t1 = time.monotonic()
                mhz = clock.mean(t0, t1) if clock is not None else None
                if abs(_bytes(res) - nbytes) > (BYTES_SLACK if name == COPY else 0):
                    raise ValueError(f"{claim}: {name} moved {_bytes(res)} bytes in round {k}, the claim's are "
                                     f"{nbytes}")
                label = f"{name} (round {k}" + ("" if data == "exercise" else f", {data} data") + ")"
                out.append(row(label, shape, res, None, variant=name, config_name=label, data=data, lesson=LESSON,
                               round=k, rung=name, claim=claim, sm_mhz=mhz,
                               clock_source=getattr(clock, "source", None), timing_s=t1 - t0))
    return out


def copy_kernels(launches: dict[str, Callable[[], object]], nbytes: int) -> dict:
    """{rung: the CUDA kernels one launch of it runs, longest first} (kernels.bench.kernel_names), and the copy's
    under COPY: torch's contiguous copy is the runtime's DtoD memcpy, which kernel_names leaves out (an empty list
    then). Measured once, before the rounds; a rounds record carries it per claim as "kernels"."""
    out = {name: kernel_names(fn) for name, fn in launches.items()}
    _, launch = copy_run(nbytes, 1)
    out[COPY] = kernel_names(launch)
    return out


def rung_runs(slug: str, rungs, own: Callable[[str], tuple], *, answers: dict, shape, reps: int = REPS,
              seed: int = 0) -> dict:
    """{rung: (timer, launch)} of one claim's rungs: a rung named in `answers` (rung -> the exercise's known answer
    it is) by answer_run where the grader handed the answers in (kernels.topic.shipped), left out where it did not (a
    notebook, a student release); every other rung by the day's own(rung)."""
    out = {}
    for name in rungs:
        if name not in answers:
            out[name] = own(name)
        elif shipped(slug, [answers[name]]):
            out[name] = answer_run(slug, answers[name], shape, reps, seed)
    return out


def run_claims(claims, runs_of: Callable[[str], tuple], *, clock=None, rounds: int | None = None, datas=DATAS,
               reps: int = REPS) -> list[dict]:
    """A day's claims in turn, each in rounds of its own (copy_rounds): runs_of(claim) -> (its rungs' {name: (timer,
    launch)}, the bytes each moves, the shape's name); a claim with no rung to time here is left out. The GPU memory
    of each claim is given back before the next."""
    import torch

    out = []
    for claim in claims:
        runs, nbytes, shape = runs_of(claim)
        if runs:
            out += copy_rounds({n: t for n, (t, _) in runs.items()}, nbytes, shape=shape, claim=claim, clock=clock,
                               rounds=rounds, datas=datas, reps=reps)
        del runs
        torch.cuda.empty_cache()
    return out


def claims_kernels(claims, runs_of: Callable[[str], tuple]) -> dict:
    """{claim: copy_kernels of its rungs and the copy} (runs_of: run_claims'), one claim at a time."""
    import torch

    out = {}
    for claim in claims:
        runs, nbytes, _ = runs_of(claim)
        if runs:
            out[claim] = copy_kernels({n: launch for n, (_, launch) in runs.items()}, nbytes)
        del runs
        torch.cuda.empty_cache()
    return out


def claim_runs(slug: str, rungs, shape, own: Callable[[str], tuple], nbytes: int, *, answers: dict,
               reps: int = REPS, seed: int = 0, shape_name: str | None = None) -> tuple[dict, int, str]:
    """One claim as run_claims' runs_of gives it: (rung_runs of `rungs` at `shape`, the `nbytes` each moves, the
    shape's name: `shape_name`, else the shape's sizes joined by "x")."""
    runs = rung_runs(slug, rungs, own, answers=answers, shape=shape, reps=reps, seed=seed)
    return runs, nbytes, shape_name or "x".join(map(str, shape))


def shape_claim_runs(slug: str, claims: dict, own: Callable[[str, tuple, int, int], tuple], *, answers: dict,
                     exercise_bytes: Callable[[tuple], int], day_bytes: Callable[[tuple], int]) -> Callable:
    """A day's _claim_runs(claim, reps, seed) where each of `claims` is (rungs, shape) and own(name, shape, reps, seed)
    times the day's own rung `name`: the bytes are the exercise's where every rung is an answer's, else the day's."""

    def runs_of(claim: str, reps: int = REPS, seed: int = 0) -> tuple[dict, int, str]:
        rungs, shape = claims[claim]
        nbytes = exercise_bytes(shape) if set(rungs) <= set(answers) else day_bytes(shape)
        return claim_runs(slug, rungs, shape, lambda name: own(name, shape, reps, seed), nbytes, answers=answers,
                          reps=reps, seed=seed)

    return runs_of


def claim_entry_points(claims: dict, runs_of: Callable[[str, int, int], tuple], *, rounds: int) -> tuple:
    """A day's (claim_kernels, claim_rounds) over its COPY_CLAIMS (`claims`): runs_of(claim, reps, seed) -> the
    claim's claim_runs (the day's _claim_runs); `rounds`: the day's CLAIM_ROUNDS, the rounds unless given."""
    day_rounds = rounds

    def claim_kernels(seed: int = 0) -> dict:
        """{claim: {rung: its kernels, longest first; "copy": the copy's}} (kernels.copy_rounds.claims_kernels),
        profiled once before the rounds."""
        return claims_kernels(claims, lambda claim: runs_of(claim, 1, seed))

    def claim_rounds(clock=None, rounds: int | None = None, datas=DATAS, reps: int = REPS,
                     seed: int = 0) -> list[dict]:
        """The day's COPY_CLAIMS against the D2D copy of the same bytes in interleaved rounds (kernels.copy_rounds:
        CLAIM_ROUNDS rounds unless given, the SM clock sampled on `clock`), on the one data label "exercise"; the
        rows are copy_summary's."""
        return run_claims(claims, lambda claim: runs_of(claim, reps, seed), clock=clock, rounds=rounds or day_rounds,
                          datas=datas, reps=reps)

    return claim_kernels, claim_rounds


def common_rounds(groups, at_least: int = ROUNDS) -> int:
    """The fewest rounds, at least `at_least`, that put each name first, and last, equally often in every group of
    names (kernels.compare.balanced_rounds for each): one count for all of a day's claims (2 or 3 names: 18; 4: 24)."""
    groups = [list(g) for g in groups]
    r = at_least
    while True:
        r = max(balanced_rounds(g, r) for g in groups)
        if all(balanced_rounds(g, r) == r for g in groups):
            return r


def claim_names(rungs) -> list[str]:
    """The names of one claim's rounds: its rungs, then COPY."""
    return [*rungs, COPY]


def copy_summary(rows: list[dict]) -> dict:
    """The copy rounds in `rows` (lesson "rounds" with a `claim`), per claim: {"shape", "by_data": {data: {rung:
    {"rounds", "median", "lo", "hi", "min", "max", "says", "per_round", "sm_mhz"}}}} of rung TB/s over the copy's TB/s
    of the same round (kernels.compare.speed_ratios: median, bootstrap 95 % interval, what it supports; the mean SM
    clock of the rung and of the copy over their rounds). {} without such rows."""
    per: dict = {}
    mhz: dict = {}
    shape: dict = {}
    for r in rows:
        if r.get("lesson") != LESSON or "claim" not in r or not r.get("tbps"):
            continue
        key = (r["claim"], r.get("data", "exercise"))
        per.setdefault(key, {}).setdefault(r["rung"], {})[r["round"]] = r["tbps"]
        mhz.setdefault(key, {}).setdefault(r["rung"], []).append(r.get("sm_mhz"))
        shape.setdefault(r["claim"], r["shape"])
    out: dict = {}
    for (claim, data), p in per.items():
        s = speed_ratios(p, COPY, mhz[(claim, data)])
        if s:
            out.setdefault(claim, {"shape": shape[claim], "by_data": {}})["by_data"][data] = s
    return out


def rounds_seconds(rows: list[dict]) -> dict:
    """{claim: wall seconds its timings took (the rows' timing_s), "total": all of them}: what a day's rounds held
    the GPU for, besides the kernel profiling before them."""
    out: dict = {}
    for r in rows:
        if r.get("lesson") == LESSON and "claim" in r and r.get("timing_s") is not None:
            out[r["claim"]] = out.get(r["claim"], 0.0) + r["timing_s"]
    out["total"] = sum(out.values())
    return out


def estimate_gpu_s(claims: dict, doc: dict, *, rounds: int, datas=DATAS, reps: int = REPS, answers=(),
                   warm_s: dict | None = None, warmup: int = 3) -> dict:
    """GPU seconds of a day's claim rounds, estimated from a record of its ladder (`doc`, kernels.record.load): per
    claim of `claims` ({claim: (rungs, shape)}), rounds x datas x the launches of every timing x each rung's recorded
    ms (the copy's: the rung's bytes at the record's copy ceiling), plus `warm_s` (rung -> seconds of untimed
    launches a timing starts with). A timing launches `warmup` + `reps` + the wall-clock check's calls
    (kernels.bench.bench's default); the known answers (`answers`) as many as kernels.runner.time_exercise draws at
    most. Kernel time alone: the L2 flush, spin and input refresh before every repetition, and the host's time
    between timings, come on top. {claim: seconds, "total": seconds}; a rung the record lacks raises KeyError."""
    by = {r["kernel"]: r for r in doc["rows"] if r.get("ms") and r.get("tbps")}
    copy_tbps = doc["ceilings"]["copy_tbps"]
    plain = warmup + reps + max(3, min(reps, 20))
    timed_answer = 5 + reps + 7 + 10  # time_exercise: 2-5 warm-ups, reps + 0-7 repetitions, 5-10 wall-clock calls
    out = {}
    for claim, (rungs, _shape) in claims.items():
        ms = 0.0
        for name in rungs:
            r = by[name]
            n = timed_answer if name in answers else plain
            ms += n * r["ms"] + 1e3 * (warm_s or {}).get(name, 0.0)
            ms += plain * r["ms"] * r["tbps"] / copy_tbps / len(rungs)  # the copy of the same bytes, once per round
        out[claim] = rounds * len(datas) * ms / 1e3
    out["total"] = sum(out.values())
    return out
