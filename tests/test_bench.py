"""The course timer's rules (the GPU parts run in make gpu-test; the decisions are pure and tested here)."""

import statistics

import pytest

from kernels.bench import BenchResult, timing_consistent


def test_work_off_the_timed_stream_is_caught():
    # seen on an H100: a 101 ms kernel launched on a stream of its own read as 0.10 ms by torch's events
    assert not timing_consistent(event_ms=0.10, host_ms=0.02, wall_ms=101.0)


def test_a_host_bound_launch_is_not_a_false_alarm():
    # seen on an H100 (day 4's stream sum): events 0.1038 ms, the host spends ~0.5 ms per launch
    assert timing_consistent(event_ms=0.1038, host_ms=0.50, wall_ms=0.5096)
    assert timing_consistent(event_ms=0.71, host_ms=0.03, wall_ms=0.72)  # a GPU-bound copy
    assert timing_consistent(event_ms=0.005, host_ms=0.01, wall_ms=0.02)  # too short to judge


def test_result_figures():
    r = BenchResult(ms=0.5, p20_ms=0.49, p80_ms=0.52, reps=20, bytes=3 * 10**9, flops=2 * 10**12, wall_ms=0.6,
                    ceilings={"copy_tbps": 3.0, "cublas_bf16_tflops": 800.0})
    assert r.tbps == pytest.approx(6.0) and r.fraction_of_copy == pytest.approx(2.0)
    assert r.tflops == pytest.approx(4000.0) and r.fraction_of_matmul == pytest.approx(5.0)
    assert "TB/s" in str(r) and "TFLOPS" in str(r)
    assert BenchResult(1.0, 1.0, 1.0, 1, 0, 0, 1.0).tbps is None


class _FakeCuda:
    """torch.cuda as the timer uses it, on a CPU: a simulated clock where each launch takes the time `fn` says, and
    a counter range (push/pop) slows the launch inside it 1.5 times, as cp.async kernels on an H100 are slowed."""

    def __init__(self):
        self.now, self.in_range, self.log = 0.0, False, []
        fake = self

        class Event:
            def __init__(self, enable_timing=False):
                self.t = None

            def record(self, stream=None):
                self.t = fake.now

            def elapsed_time(self, other):
                return other.t - self.t

        self.Event = Event

    def synchronize(self):
        pass

    def current_stream(self):
        return None

    def _sleep(self, cycles):
        pass


class _Ranges:
    def __init__(self, cuda):
        self.cuda, self.pushed = cuda, 0

    def push(self):
        assert not self.cuda.in_range
        self.cuda.in_range = True
        self.pushed += 1

    def pop(self):
        self.cuda.in_range = False


def test_counted_launches_are_interleaved_and_never_timed(monkeypatch):
    import random

    import torch

    import kernels.bench as kb

    cuda = _FakeCuda()
    for name in ("Event", "synchronize", "current_stream", "_sleep"):
        monkeypatch.setattr(torch.cuda, name, getattr(cuda, name))
    monkeypatch.setattr(kb, "_flush", lambda: None)
    rng = random.Random()
    reps = rng.randint(5, 12)
    counted = frozenset(rng.sample(range(2 * reps), reps))
    seen = []

    def fn(i):
        seen.append((i, cuda.in_range))
        cuda.now += (1.0 + 0.001 * i) * (1.5 if cuda.in_range else 1.0)

    n = iter(range(10**6))
    ranges = _Ranges(cuda)
    r = kb.bench(fn, lambda: (next(n),), reps=reps, warmup=2, wall_check=False, with_ceilings=False,
                 ranges=ranges, counted=counted)
    # every loop position after the warm-ups ran once; exactly the counted ones inside a range
    loop = seen[2:]
    assert len(loop) == 2 * reps and ranges.pushed == reps
    assert {k for k, (_, inside) in enumerate(loop) if inside} == counted
    assert not any(inside for _, inside in seen[:2])
    # the timing is the un-counted launches' alone (none slowed); counted_ms is the counted ones' (all slowed)
    timed = sorted(1.0 + 0.001 * i for k, (i, _) in enumerate(loop) if k not in counted)
    assert r.ms == pytest.approx(statistics.median(timed)) and r.reps == reps
    assert r.counted_ms == pytest.approx(statistics.median(
        [1.5 * (1.0 + 0.001 * i) for k, (i, _) in enumerate(loop) if k in counted]))
    # no counter ranges: no counted launch, and no position may be asked for
    r0 = kb.bench(fn, lambda: (next(n),), reps=reps, warmup=0, wall_check=False, with_ceilings=False)
    assert r0.counted_ms is None
    with pytest.raises(ValueError):
        kb.bench(fn, lambda: (next(n),), reps=reps, wall_check=False, with_ceilings=False, counted={0})
    with pytest.raises(ValueError):
        kb.bench(fn, lambda: (next(n),), reps=3, wall_check=False, with_ceilings=False, ranges=_Ranges(cuda),
                 counted={7})


def test_warm_up_by_time_keeps_launching_until_the_time_has_passed(monkeypatch):
    """warm_s: at least `warmup` launches, and more until warm_s seconds of wall time have passed (each verified and
    counted like any warm-up); warm_s = 0 is exactly `warmup` launches."""
    import torch

    import kernels.bench as kb

    cuda = _FakeCuda()
    for name in ("Event", "synchronize", "current_stream", "_sleep"):
        monkeypatch.setattr(torch.cuda, name, getattr(cuda, name))
    monkeypatch.setattr(kb, "_flush", lambda: None)
    clock = {"t": 0.0}
    monkeypatch.setattr(kb.time, "perf_counter", lambda: clock["t"])

    def fn():
        cuda.now += 1.0
        clock["t"] += 0.001  # each launch costs the host 1 ms

    for warm_s, want in ((0.0, 3), (0.0505, 51), (0.001, 3)):
        verified = []
        r = kb.bench(fn, reps=4, warmup=3, warm_s=warm_s, wall_check=False, with_ceilings=False,
                     verify=lambda args: verified.append(1))
        assert r.launches == want + 4 and len(verified) == want + 4, (warm_s, r.launches)
