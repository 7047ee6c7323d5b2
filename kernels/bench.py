"""The course's one timer, and the ceilings it is compared with (measured in the same run).

    res = bench(lambda x, y: copy(x, out=y), make_args=lambda: (fresh_x(), out), bytes=2 * x.nbytes)
    res.ms, res.p20_ms, res.p80_ms, res.tbps, res.tflops, res.fraction_of_copy

Each repetition: fresh inputs (`make_args()` is called outside the timed region), an L2 flush (a write of a
buffer larger than 50 MB, the H100's L2), then CUDA events on torch's current stream around the one call.
Median with p20/p80. A wall-clock cross-check across a device sync catches work the events did not see
(e.g. a launch on another stream): a timing it contradicts raises `TimingError`.

Timing work that is not trusted (the grader): `verify(args)` checks the output of *every* launch — warm-ups, timed
repetitions and each call of the wall-clock check, which then gets its own arguments per call (`make_wall_args`) —
outside the timed region. A kernel that keeps state across launches and skips the work on some of them leaves a
wrong (poisoned) output there: `res.problems` says which launch. The caller chooses the counts (the grader draws
them from its secret seed, so they cannot be predicted).

Counting what the timed launches do (`ranges`, a kernels.rangeprof.RangeCounters, and `counted`): the loop runs
`reps + len(counted)` repetitions, each prepared alike (fresh inputs, flush, spin); the ones at the positions in
`counted` run inside a counter range and are not timed, every other one is timed and not counted. A counter range
slows some kernels (on an H100, cp.async-heavy ones; TMA ones not: `res.counted_ms`, the counted launches' median,
shows by how much), so no repetition is both; the positions come from the caller's secret, so a kernel cannot tell
a counted launch from a timed one.

Which kernels a call launches (`kernel_names`), the name each side of a claim ran under: cuBLAS picks its kernel by
heuristic and cuDNN by its plan (the course's Triton kernel has fixed blocks), and another pick is another baseline.
The call is warmed up, then run once under torch.profiler (CUDA activity) after the L2 flush the timer runs before
each repetition; the distinct CUDA kernels launched come back longest total GPU time first, memcpy / memset and
the flush's own kernel (named by profiling the flush alone, once a process) left out. `device_kernels`, the ranking,
is plain Python; tests give `kernel_names` a profiler of their own (`profile=`).
"""

from __future__ import annotations

import statistics
import time
from dataclasses import asdict, dataclass, field
from typing import Callable

FLUSH_BYTES = 256 * 1024 * 1024  # > 5x the 50 MB L2 of an H100
_SPIN_CYCLES = 400_000  # ~0.2 ms at 1.98 GHz: covers the host's launch overhead (outside the timed region)
_flush_buf = None
_ceilings: dict | None = None


class TimingError(RuntimeError):
    """The events and a wall clock across a device sync disagree: the timed work was not on the timed stream."""


@dataclass
class BenchResult:
    ms: float
    p20_ms: float
    p80_ms: float
    reps: int
    bytes: int
    flops: int
    wall_ms: float  # wall clock per call across a device sync (launch overhead included, no flush)
    ceilings: dict | None = None
    launches: int = 0  # launches of fn, warm-ups and wall-check calls included
    verified: int = 0  # of those, how many had their output checked (verify)
    problems: list = field(default_factory=list)  # "timed repetition 7: WRONG ..." for each launch that failed
    counted_ms: float | None = None  # median of the counted (untimed) repetitions, when there were any

    @property
    def tbps(self) -> float | None:
        return self.bytes / (self.ms * 1e-3) / 1e12 if self.bytes else None

    @property
    def tflops(self) -> float | None:
        return self.flops / (self.ms * 1e-3) / 1e12 if self.flops else None

    @property
    def fraction_of_copy(self) -> float | None:
        if self.tbps is None or not self.ceilings:
            return None
        return self.tbps / self.ceilings["copy_tbps"]

    @property
    def fraction_of_matmul(self) -> float | None:
        if self.tflops is None or not self.ceilings or not self.ceilings.get("cublas_bf16_tflops"):
            return None
        return self.tflops / self.ceilings["cublas_bf16_tflops"]

    def as_dict(self) -> dict:
        d = asdict(self)
        d.update(tbps=self.tbps, tflops=self.tflops, fraction_of_copy=self.fraction_of_copy,
                 fraction_of_matmul=self.fraction_of_matmul)
        return d

    def __str__(self) -> str:
        parts = [f"{self.ms:.4f} ms (p20 {self.p20_ms:.4f}, p80 {self.p80_ms:.4f}, n={self.reps})"]
        if self.tbps is not None:
            parts.append(f"{self.tbps:.3f} TB/s")
            if self.fraction_of_copy is not None:
                parts.append(f"{self.fraction_of_copy:.2f}x copy ceiling")
        if self.tflops is not None:
            parts.append(f"{self.tflops:.1f} TFLOPS")
            if self.fraction_of_matmul is not None:
                parts.append(f"{self.fraction_of_matmul:.2f}x cuBLAS")
        return ", ".join(parts)


def timing_consistent(event_ms: float, host_ms: float, wall_ms: float) -> bool:
    """False when a wall clock through a device sync saw far more time per call than both the events (GPU time of the
    timed work) and the host's own launch time explain: work ran where the events did not look."""
    return not (wall_ms > 0.2 and wall_ms > 4 * max(event_ms, host_ms))


def _flush() -> None:
    global _flush_buf
    import torch

    if _flush_buf is None:
        _flush_buf = torch.empty(FLUSH_BYTES // 4, dtype=torch.int32, device="cuda")
    _flush_buf.zero_()


def _quantile(xs: list[float], q: float) -> float:
    s = sorted(xs)
    pos = q * (len(s) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def bench(
    fn: Callable,
    make_args: Callable[[], tuple] | None = None,
    *,
    bytes: int = 0,  # noqa: A002 - the bytes the kernel must move (each input read once, each output written once)
    flops: int = 0,
    reps: int = 30,
    warmup: int = 3,
    warm_s: float = 0.0,
    flush: bool = True,
    wall_check: bool = True,
    with_ceilings: bool = True,
    verify: Callable[[tuple], str | None] | None = None,
    wall_calls: int | None = None,
    make_wall_args: Callable[[int], list] | None = None,
    ranges=None,
    counted: frozenset[int] | set[int] = frozenset(),
) -> BenchResult:
    """Time `fn(*make_args())` with the course's method. Needs a CUDA GPU. `verify`, `wall_calls` and
    `make_wall_args`: see the module docstring."""
    import torch

    make_args = make_args or (lambda: ())
    problems: list[str] = []
    counts = {"launches": 0, "verified": 0}

    def check(what: str, args: tuple) -> None:
        if verify is None:
            return
        counts["verified"] += 1
        problem = verify(args)
        if problem:
            problems.append(f"{what}: {problem}")

    # warm-ups: `warmup` launches, and more until `warm_s` seconds have passed — a kernel of a tenth of a millisecond
    # ends three warm-ups before the GPU leaves its idle clocks (measured on an H100: multicast's broadcast_sum came
    # out 10-15 % slow in a process's first pass); the queue is drained every 50 launches so the host's clock tracks
    # the GPU's work
    end, w = time.perf_counter() + warm_s, 0
    while w < warmup or time.perf_counter() < end:
        args = make_args()
        fn(*args)
        counts["launches"] += 1
        w += 1
        check(f"warm-up {w}", args)
        if warm_s and w % 50 == 0:
            torch.cuda.synchronize()
    torch.cuda.synchronize()

    times, counted_ms = _timed_loop(fn, make_args, reps, flush, ranges, counted, counts, check)
    wall_ms = float("nan")
    if wall_check:
        host_ms, wall_ms = _wall_clock(fn, make_args, make_wall_args, wall_calls or max(3, min(reps, 20)), counts,
                                       check)
        med = statistics.median(times)
        if not timing_consistent(med, host_ms, wall_ms):
            raise TimingError(
                f"CUDA events measured {med:.4f} ms per call and the host spent {host_ms:.4f} ms launching it, but "
                f"a wall clock across a device sync saw {wall_ms:.4f} ms per call: work the events did not see "
                "(another stream, a thread, or deferred work)")
    res = BenchResult(
        ms=statistics.median(times), p20_ms=_quantile(times, 0.2), p80_ms=_quantile(times, 0.8), reps=reps,
        bytes=int(bytes), flops=int(flops), wall_ms=wall_ms,
        ceilings=ceilings() if with_ceilings else None, launches=counts["launches"], verified=counts["verified"],
        problems=problems, counted_ms=counted_ms,
    )
    return res


def _timed_loop(fn, make_args, reps: int, flush: bool, ranges, counted, counts: dict,
                check) -> tuple[list, float | None]:
    """The timed repetitions, with the counted ones interleaved (module docstring): (the timed launches' times in
    ms, the counted launches' median or None)."""
    import torch

    if counted and ranges is None:
        raise ValueError("counted repetitions need the counter ranges to count them in")
    total = reps + len(counted)
    if any(not 0 <= i < total for i in counted):
        raise ValueError(f"counted positions {sorted(counted)} outside the loop of {total} repetitions")
    stream = torch.cuda.current_stream()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(total)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(total)]
    for i in range(total):
        args = make_args()
        if flush:
            _flush()
        if i in counted:  # one counter range around this launch (kernels.rangeprof), the flush left outside
            ranges.push()
        # A short GPU spin before the start event: the launch below (host work: tensor maps, argument packing)
        # is enqueued while the GPU is still busy, so no host time lands between the events.
        torch.cuda._sleep(_SPIN_CYCLES)
        starts[i].record(stream)
        fn(*args)
        ends[i].record(stream)
        if i in counted:
            ranges.pop()
        counts["launches"] += 1
        # after the end event: outside the timed region
        check(f"{'counted' if i in counted else 'timed'} repetition {i + 1} of {total}", args)
    torch.cuda.synchronize()
    every = [s.elapsed_time(e) for s, e in zip(starts, ends)]
    times = [t for i, t in enumerate(every) if i not in counted]
    # the counted launches' own times: how much the counters slowed them (never part of the result's timing)
    return times, (statistics.median([every[i] for i in sorted(counted)]) if counted else None)


def _wall_clock(fn, make_args, make_wall_args, n: int, counts: dict, check) -> tuple[float, float]:
    """n back-to-back calls timed twice over: (the host's own enqueue time per call, no sync; the wall clock per call
    through a device sync). A kernel whose launch costs the host more than the kernel costs the GPU is host-bound,
    not hidden: only time that neither the events nor the host account for means work off the timed stream."""
    import torch

    # Each call gets its own arguments when the caller can give them (its own output to verify): a kernel that
    # works on one call in n cannot average its lazy calls into the wall clock unseen.
    calls = list(make_wall_args(n)) if make_wall_args else [make_args()] * n
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for args in calls:
        fn(*args)
    t1 = time.perf_counter()
    torch.cuda.synchronize()
    t2 = time.perf_counter()
    counts["launches"] += n
    for j, args in enumerate(calls if make_wall_args else calls[:1]):
        check(f"wall-clock call {j + 1} of {n}", args)
    return (t1 - t0) * 1e3 / n, (t2 - t0) * 1e3 / n


def _copy_ceiling() -> BenchResult:
    import torch

    n = 1 << 28  # 256 Mi float32 = 1 GiB
    src = torch.randn(n, device="cuda")
    dst = torch.empty_like(src)
    return bench(lambda: dst.copy_(src), bytes=2 * src.nbytes, reps=20, with_ceilings=False)


def _matmul_ceiling() -> BenchResult:
    import torch

    m = 8192
    a = torch.randn(m, m, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(m, m, device="cuda", dtype=torch.bfloat16)
    return bench(lambda: a @ b, flops=2 * m**3, reps=20, with_ceilings=False)


def ceilings(refresh: bool = False) -> dict:
    """The copy and matmul ceilings of this GPU, measured once per process with the same timer.

    copy_tbps: torch's device-to-device copy of 1 GiB, bytes read + written.
    cublas_bf16_tflops: torch.matmul (cuBLAS) of two random bf16 8192x8192 matrices.
    """
    global _ceilings
    if _ceilings is not None and not refresh:
        return _ceilings
    import torch

    copy, mm = _copy_ceiling(), _matmul_ceiling()
    torch.cuda.empty_cache()
    _ceilings = {"copy_tbps": copy.tbps, "cublas_bf16_tflops": mm.tflops,
                 "copy_ms": copy.ms, "cublas_ms": mm.ms}
    return _ceilings


def rotating_inputs(pool: list, refresh: Callable[[object], None] | None = None) -> Callable[[], tuple]:
    """make_args for `bench`: alternate between the buffers of `pool`, giving each fresh values before its use
    (`refresh(x)`, default `x.normal_()`), so no repetition reads what an earlier one left in a cache."""
    state = {"i": 0}

    def make_args():
        state["i"] += 1
        x = pool[state["i"] % len(pool)]
        (refresh or (lambda t: t.normal_()))(x)
        return (x,)

    return make_args


def refill(generate: Callable, shape, seed: int) -> Callable[[dict], None]:
    """A `rotating_inputs` refresh for an exercise's input dict: its n-th call draws `generate(shape, seed + n)` on
    the buffer's device and copies every tensor of that draw into the buffer, in place (n = 1, 2, ...)."""
    import torch

    state = {"n": 0}

    def refresh(inputs: dict) -> None:
        state["n"] += 1
        device = next(v.device for v in inputs.values() if isinstance(v, torch.Tensor))
        fresh = generate(shape, seed + state["n"], device=device)
        for key, value in fresh.items():
            if isinstance(value, torch.Tensor):
                inputs[key].copy_(value)

    return refresh


# ------------------------------------------------------------------------------------------ kernel names
_NOT_KERNELS = ("memcpy", "memset")  # copies and fills the runtime issues: not a kernel of the call
_flush_names: list[str] | None = None


def device_kernels(events, exclude=()) -> list[str]:
    """The distinct names of the CUDA kernels among profiled events (torch's FunctionEvent: a name, where it ran and
    its own GPU time), ordered by total GPU time, longest first (ties: first launched first); memcpy / memset and the
    names in `exclude` left out."""
    from torch.autograd import DeviceType  # noqa: the profiler's device kinds: only where events are read

    total: dict[str, float] = {}
    for e in events:
        if e.device_type != DeviceType.CUDA or e.name.lower().startswith(_NOT_KERNELS) or e.name in exclude:
            continue
        total[e.name] = total.get(e.name, 0.0) + float(e.self_device_time_total)
    order = list(total)
    return sorted(total, key=lambda n: (-total[n], order.index(n)))


def _profiled(fn: Callable[[], object], profile=None) -> list:
    """The events of one call of `fn` under the profiler (torch.profiler.profile with CUDA activity by default),
    the GPU drained before and after."""
    import torch

    sync = torch.cuda.synchronize if torch.cuda.is_available() else (lambda: None)
    if profile is None:
        from torch.profiler import ProfilerActivity, profile as torch_profile

        def profile():
            return torch_profile(activities=[ProfilerActivity.CUDA])
    sync()
    with profile() as prof:
        fn()
        sync()
    return list(prof.events())


def flush_kernel_names(profile=None) -> list[str]:
    """The kernels of the timer's L2 flush (_flush), profiled alone once a process (or with `profile`)."""
    global _flush_names
    if profile is not None:  # a profiler of the caller's (a test's): not cached
        return device_kernels(_profiled(_flush, profile))
    if _flush_names is None:
        _flush_names = device_kernels(_profiled(_flush))
    return _flush_names


def kernel_names(fn: Callable[[], object], *, warmup: int = 1, flush: bool = True, profile=None) -> list[str]:
    """The CUDA kernels one call of `fn` launches, longest total GPU time first (module docstring): `warmup`
    calls first, then the flush (where `flush`, as the timer runs it) and the call under the profiler; memcpy,
    memset and the flush's kernel left out. `profile`: a profiler context factory (default torch.profiler's)."""
    for _ in range(warmup):
        fn()

    def once():
        if flush:
            _flush()
        fn()

    exclude = flush_kernel_names(profile) if flush else ()
    return device_kernels(_profiled(once, profile), exclude)


def top(names: list[str] | None) -> str | None:
    """The longest-running kernel of a kernel_names list (None for none)."""
    return names[0] if names else None


def clocked_rounds(fns: dict[str, Callable[[], object]], *, flops: float, reps: int, rounds: int, progress=None):
    """The course's interleaved rounds (kernels.compare.interleaved, `rounds` balanced by balanced_rounds) of `fns`,
    each measurement a bench() of `reps` launches with the SM clock sampled over it (kernels.clock). Returns (the
    Comparison, {name: mean SM MHz over its measurements, or None where the clock was not read}, {name: TFLOPS of its
    median time})."""
    from .clock import SmClock, timed
    from .compare import balanced_rounds, interleaved

    mhz: dict[str, list] = {n: [] for n in fns}

    def measure(name):
        def run():
            res, m = timed(clock, lambda: bench(fns[name], flops=flops, reps=reps))
            mhz[name].append(m)
            return res.ms
        return run

    with SmClock() as clock:
        cmp = interleaved({n: measure(n) for n in fns}, rounds=balanced_rounds(fns, rounds), progress=progress)
    mean = {n: (statistics.mean([m for m in v if m]) if any(v) else None) for n, v in mhz.items()}
    tflops = {n: flops / (statistics.median(t) * 1e-3) / 1e12 for n, t in cmp.times.items()}
    return cmp, mean, tflops
