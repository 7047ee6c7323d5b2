"""The course timer's rules (the GPU parts run in make gpu-test; the decisions are pure and tested here)."""

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
