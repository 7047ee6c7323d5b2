"""kernels.sim: the model base (constants, roofline, Little's law, sectors, event simulation, plots)."""

from __future__ import annotations

import dataclasses
import math

import pytest

from kernels import sim
from kernels.sim import (
    H100,
    EventSim,
    access_efficiency,
    bytes_in_flight_needed,
    littles_law_bandwidth,
    plot_predicted_vs_measured,
    roofline,
    sectors_per_request,
    simulate_pipeline,
    warp_addresses,
    within_band,
)


# ---- constants ---------------------------------------------------------------------------------------------------

def test_every_h100_constant_has_a_source_and_a_kind():
    names = [f.name for f in dataclasses.fields(H100) if f.name not in ("name", "sources", "kinds")]
    for n in names:
        assert H100.sources.get(n), f"{n} has no source"
        assert H100.kinds.get(n) in {"datasheet", "guide", "derived", "fit"}, n
    assert H100.kinds["dram_latency_ns"] == "fit"  # honest: NVIDIA publishes no DRAM latency
    assert len(H100.table().splitlines()) == len(names)


def test_h100_values():
    assert (H100.sm_count, H100.hbm_tbps, H100.bf16_dense_tflops) == (132, 3.35, 989.0)
    assert H100.max_threads_per_sm == H100.max_warps_per_sm * H100.warp_size
    assert H100.smem_banks * H100.bank_bytes == 128 == H100.cache_line_bytes == 4 * H100.sector_bytes
    assert H100.smem_per_block_optin_bytes < H100.smem_per_sm_bytes
    # the derived clock reproduces the datasheet peak: 132 SMs x 4096 dense BF16 FLOP/clk
    assert H100.sm_count * 4096 * H100.clock_ghz * 1e9 / 1e12 == pytest.approx(H100.bf16_dense_tflops, rel=0.01)
    with pytest.raises(dataclasses.FrozenInstanceError):
        H100.sm_count = 1  # type: ignore[misc]


# ---- roofline ----------------------------------------------------------------------------------------------------

def test_roofline_memory_bound_copy():
    r = roofline(flops=0, bytes=2e9, peak_tflops=989, peak_tbps=3.35)
    assert r["bound"] == "memory" and r["intensity"] == 0
    assert r["time_s"] == pytest.approx(2e9 / 3.35e12)


def test_roofline_compute_bound_gemm():
    m = n = k = 8192
    flops, nbytes = 2 * m * n * k, 2 * (m * k + k * n + m * n)
    r = roofline(flops, nbytes, 989, 3.35)
    assert r["bound"] == "compute"
    assert r["time_s"] == pytest.approx(flops / 989e12)
    assert r["intensity"] > r["ridge_intensity"] == pytest.approx(989 / 3.35)
    assert r["attainable_tflops"] == 989


def test_roofline_ridge_switches_regime():
    peak_t, peak_b = 100.0, 2.0  # ridge at 50 FLOP/byte
    below = roofline(49 * 1e6, 1e6, peak_t, peak_b)
    above = roofline(51 * 1e6, 1e6, peak_t, peak_b)
    assert below["bound"] == "memory" and above["bound"] == "compute"
    assert below["attainable_tflops"] == pytest.approx(98.0)


# ---- Little's law ------------------------------------------------------------------------------------------------

def test_littles_law_linear_then_saturates():
    lat = 600.0
    b1 = littles_law_bandwidth(8 * 1024, lat)
    b2 = littles_law_bandwidth(16 * 1024, lat)
    assert b2 == pytest.approx(2 * b1)
    assert b1 == pytest.approx(8 * 1024 * 132 / 600 / 1000)  # bytes/ns = GB/s
    capped = [littles_law_bandwidth(k * 1024, lat, ceiling_tbps=3.0) for k in (8, 16, 32, 64, 128)]
    assert capped == sorted(capped) and capped[-1] == 3.0 and capped[0] < 3.0


def test_bytes_in_flight_needed_inverts_littles_law():
    need = bytes_in_flight_needed(3.0, 600.0)
    assert littles_law_bandwidth(need, 600.0) == pytest.approx(3.0)
    with pytest.raises(ValueError):
        littles_law_bandwidth(1024, 0)


# ---- sectors -----------------------------------------------------------------------------------------------------

def test_coalesced_4_byte_warp():
    a = warp_addresses(4)
    assert sectors_per_request(a) == 4
    assert access_efficiency(a, 4) == 1.0


def test_128_byte_stride_warp():
    a = warp_addresses(128)
    assert sectors_per_request(a) == 32
    assert access_efficiency(a, 4) == 0.125


def test_16_byte_vector_warp():
    a = warp_addresses(16)
    assert sectors_per_request(a) == 16
    assert sectors_per_request(a, bytes_per_access=16) == 16
    assert access_efficiency(a, 16) == 1.0


def test_misaligned_and_small_strides():
    # 8-byte stride with 4-byte words: half of every sector is used
    assert access_efficiency(warp_addresses(8), 4) == 0.5
    # a 16-byte vector starting 8 bytes into a sector straddles two sectors
    assert sectors_per_request([8], bytes_per_access=16) == 1
    assert sectors_per_request([24], bytes_per_access=16) == 2
    # a broadcast: every lane reads the same word
    assert sectors_per_request([64] * 32) == 1 and access_efficiency([64] * 32, 4) == 4 / 32
    # an unaligned base shifts the 4-byte coalesced warp over 5 sectors
    assert sectors_per_request(warp_addresses(4, base=4)) == 5


def test_read_and_write_traffic():
    from kernels.sim import read_traffic_bytes, write_traffic_bytes

    coalesced, strided = warp_addresses(4), warp_addresses(128)
    assert read_traffic_bytes(coalesced, 4) == 128 and read_traffic_bytes(strided, 4) == 32 * 32
    assert read_traffic_bytes(strided, 4, granule=64) == 32 * 64
    assert write_traffic_bytes(coalesced, 4, granule=64, partial_cost=2.0) == 128  # two full granules
    assert write_traffic_bytes(strided, 4, granule=64, partial_cost=2.0) == 32 * 128  # 32 partial granules
    assert write_traffic_bytes(strided, 4) == 32 * 32  # partial_cost=1: just the sectors


# ---- event simulation --------------------------------------------------------------------------------------------

def test_eventsim_runs_in_time_order_ties_in_schedule_order():
    s, seen = EventSim(), []
    s.at(5, seen.append, "c")
    s.at(1, seen.append, "a")
    s.at(5, seen.append, "d")
    s.after(3, lambda: (seen.append("b"), s.after(10, seen.append, "e")))
    assert s.run(until=5) == 5 and seen == ["a", "b", "c", "d"]
    assert s.run() == 13 and seen[-1] == "e"
    with pytest.raises(ValueError):
        s.at(1, print)


def test_one_stage_serialises_load_and_compute():
    r = simulate_pipeline(n_tiles=10, stages=1, load_latency=100, load_interval=0, compute_time=30)
    assert r.total_time == pytest.approx(10 * (100 + 30))
    for a, b in zip(r.timeline, r.timeline[1:]):
        assert b.load_start >= a.compute_end  # the only buffer is busy until the consumer is done


def test_enough_stages_is_compute_bound():
    n, lat, comp = 64, 100.0, 30.0
    r = simulate_pipeline(n, stages=8, load_latency=lat, load_interval=5.0, compute_time=comp)
    assert r.total_time == pytest.approx(n * comp + lat)
    assert r.compute_busy_fraction > 0.95
    assert r.consumer_stall == pytest.approx(lat)  # only the first tile waits


def test_more_stages_never_slower_and_saturate():
    times = [simulate_pipeline(64, s, 100, 5, 30).total_time for s in (1, 2, 3, 4, 6, 8, 16)]
    assert times == sorted(times, reverse=True)
    assert times[0] > 2 * times[-1]
    assert times[-2] == times[-1]  # past latency/compute + 1 stages nothing is left to hide


def test_bandwidth_bound_pipeline():
    # loads can start only every 50 units while compute takes 30: the interval decides
    r = simulate_pipeline(100, stages=16, load_latency=100, load_interval=50, compute_time=30)
    assert r.total_time == pytest.approx(99 * 50 + 100 + 30)


def test_per_tile_times_and_validation():
    r = simulate_pipeline(3, 2, load_latency=[10, 20, 5], load_interval=0, compute_time=[1, 2, 3])
    assert [t.load_end for t in r.timeline] == [10, 20, 16]
    assert r.timeline[2].compute_start == 22 and r.total_time == 25
    with pytest.raises(ValueError):
        simulate_pipeline(3, 2, load_latency=[1, 2], load_interval=0, compute_time=1)
    assert simulate_pipeline(0, 2, 1, 0, 1).total_time == 0


def test_pipeline_agrees_with_an_event_driven_version():
    """The recurrence in simulate_pipeline, replayed with EventSim: same timeline."""
    n, stages, lat, interval, comp = 20, 3, 70.0, 12.0, 25.0
    s = EventSim()
    load_end, comp_end = {}, {}
    state = {"next_issue": 0, "last_issue": -math.inf, "consumer_free": 0.0, "next_compute": 0}

    def try_issue():
        i = state["next_issue"]
        if i >= n or (i >= stages and i - stages not in comp_end):
            return
        start = max(s.now, state["last_issue"] + interval)
        if start > s.now:
            s.at(start, try_issue)
            return
        state["next_issue"], state["last_issue"] = i + 1, s.now
        s.after(lat, landed, i)
        try_issue()

    def landed(i):
        load_end[i] = s.now
        try_compute()

    def try_compute():
        i = state["next_compute"]
        if i < n and i in load_end and s.now >= state["consumer_free"]:
            state["next_compute"] = i + 1
            state["consumer_free"] = s.now + comp
            s.after(comp, done, i)

    def done(i):
        comp_end[i] = s.now
        try_issue()
        try_compute()

    s.at(0, try_issue)
    s.run()
    r = simulate_pipeline(n, stages, lat, interval, comp)
    assert [t.load_end for t in r.timeline] == pytest.approx([load_end[i] for i in range(n)])
    assert [t.compute_end for t in r.timeline] == pytest.approx([comp_end[i] for i in range(n)])


# ---- comparing with measurements -------------------------------------------------------------------------------

def test_within_band():
    assert within_band(1.1, 1.0, 0.15) and not within_band(1.2, 1.0, 0.15)
    assert sim.relative_error(0.9, 1.0) == pytest.approx(-0.1)


def test_plot_predicted_vs_measured(tmp_path):
    from matplotlib.figure import Figure

    rows = [  # recorded_h100.json rows and plain measured/predicted rows both work
        {"kernel": "strided", "shape": "n=2^28", "tbps": 0.4, "model_prediction": 0.37},
        {"kernel": "scalar", "tbps": 2.6, "model_prediction": 2.9},
        {"kernel": "vec16", "measured": 3.0, "predicted": 3.0},
        {"kernel": "triton", "tbps": 3.0, "model_prediction": None},
    ]
    fig = plot_predicted_vs_measured(rows, title="day 1 copies")
    assert isinstance(fig, Figure)
    ax = fig.axes[0]
    assert ax.get_title() == "day 1 copies" and ax.get_ylabel() == "TB/s"
    assert len(ax.patches) == 4  # one measured bar per row
    assert [t.get_text() for t in ax.get_xticklabels()][0] == "strided\nn=2^28"
    out = tmp_path / "model.png"
    fig.savefig(out)
    assert out.stat().st_size > 1000


def test_plot_pipeline_timeline(tmp_path):
    r = simulate_pipeline(6, 2, 10, 0, 4)
    fig = sim.plot_pipeline_timeline(r)
    fig.savefig(tmp_path / "t.png")
    assert (tmp_path / "t.png").stat().st_size > 1000
