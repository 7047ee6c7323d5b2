"""kernels.naive_loads.model: sector efficiency and bytes in flight of day 1's copy kernels."""

from __future__ import annotations

import pytest

from kernels.naive_loads import model
from kernels.sim import sectors_per_request

CEIL = 3.0  # TB/s, a stand-in for the copy ceiling measured in the same run


def test_efficiency_from_the_kernels_addresses():
    assert model.efficiency("strided") == 0.125       # lanes 128 bytes apart: one word per sector
    assert model.efficiency("scalar") == 1.0
    assert model.efficiency("vec16") == 1.0
    assert model.efficiency("grid_stride") == 1.0
    assert sectors_per_request(model.warp_load_addresses("strided")) == 32
    assert sectors_per_request(model.warp_load_addresses("scalar")) == 4
    assert sectors_per_request(model.warp_load_addresses("vec16")) == 16
    # a narrower view wastes less: 2 columns -> lanes 8 bytes apart -> half of each sector used
    assert model.efficiency("strided", cols=2) == 0.5
    assert model.efficiency("strided", cols=1) == 1.0


def test_dram_efficiency_granules_and_partial_writes():
    # 64-byte granules, partial writes cost 2 granules: useful (read + written) / DRAM bytes
    assert model.dram_efficiency("scalar") == 1.0
    assert model.dram_efficiency("vec16") == 1.0
    assert model.dram_efficiency("grid_stride") == 1.0
    for cols, expected in ((1, 1.0), (2, 1 / 3), (4, 1 / 6), (8, 1 / 12), (32, 1 / 24), (64, 1 / 24)):
        assert model.dram_efficiency("strided", cols) == pytest.approx(expected), cols
    # with 32-byte granules and no write penalty it is the sector efficiency again
    assert model.dram_efficiency("strided", granule=32, partial_write_cost=1.0) == model.efficiency("strided")


def test_strided_address_pattern_matches_the_kernel_index():
    # copy_strided: i = (t % rows) * cols + t // rows; a warp is 32 consecutive t with the same t // rows
    cols, rows = model.STRIDED_COLS, 1 << 10
    idx = [(t % rows) * cols + t // rows for t in range(64, 96)]
    assert [4 * i - 4 * idx[0] for i in idx] == model.warp_load_addresses("strided")


def test_bytes_in_flight():
    assert model.bytes_in_flight("scalar") == 2048 * 4
    assert model.bytes_in_flight("vec16") == 2048 * 16
    assert model.bytes_in_flight("grid_stride") == 2048 * 4 * 16
    assert model.bytes_in_flight("scalar", threads_per_sm=1024, loads_per_thread=2, bytes_per_load=8) == 16384
    with pytest.raises(ValueError, match="variant"):
        model.bytes_in_flight("nope")


def test_prediction_monotonic_in_bytes_in_flight():
    preds = [model.predict_copy_tbps("vec16", CEIL, threads_per_sm=t) for t in (64, 128, 256, 512, 1024, 2048)]
    assert all(b >= a for a, b in zip(preds, preds[1:]))
    assert preds[0] < 0.2 * CEIL                  # few threads: latency-bound
    lat_bound = [model.predict_copy_tbps("scalar", CEIL, loads_per_thread=k, latency_ns=2000) for k in (1, 2, 4)]
    assert lat_bound[0] < lat_bound[1] < lat_bound[2]
    assert lat_bound[1] == pytest.approx(2 * lat_bound[0])


def test_never_above_the_ceiling():
    for v in model.VARIANTS:
        for lat in (50, 600, 5000):
            assert model.predict_copy_tbps(v, CEIL, latency_ns=lat) <= CEIL


def test_ordering_strided_scalar_vec16():
    p = model.predict_all(CEIL)
    assert p["strided"] < p["scalar"] <= p["vec16"] <= p["grid_stride"]
    assert p["strided"] == pytest.approx(CEIL / 24)  # 8 useful bytes per 64 read + 128 read-modify-written
    assert p["grid_stride"] == CEIL
    plain = model.predict_copy_tbps("strided", CEIL, granule=32, partial_write_cost=1.0)
    assert plain == pytest.approx(CEIL * 0.125)  # the textbook sector model
    # with a long latency the 4 B scalar copy falls to Little's law while 16 B loads still reach the ceiling
    slow = model.predict_all(CEIL, latency_ns=1500)
    assert slow["scalar"] < slow["vec16"]
    assert slow["scalar"] == pytest.approx(2 * 2048 * 4 * 132 / 1500 / 1e3)


def test_l2_reuse_option_for_small_strided_copies():
    big = model.predict_copy_tbps("strided", CEIL, l2_tbps=7.0)              # n = 2^28: reuse misses L2
    small = model.predict_copy_tbps("strided", CEIL, l2_tbps=7.0, n=1 << 20)  # 2 * 32768 sectors = 2 MB
    assert big == pytest.approx(CEIL / 24)
    assert small == pytest.approx(7.0 * 0.125)


def test_fit_latency_round_trips():
    lat = model.fit_latency_ns(1.5, "scalar")
    assert model.predict_copy_tbps("scalar", 10.0, latency_ns=lat) == pytest.approx(1.5)


def test_constants_match_the_workload():
    pytest.importorskip("torch")
    from kernels.naive_loads import workload

    assert model.STRIDED_COLS == workload.STRIDED_COLS
    assert model.BENCH_N == workload.BENCH_N
    assert 2 * model.WORD_BYTES * model.BENCH_N == workload.bytes_moved(model.BENCH_N)


def test_explain_mentions_every_variant_and_the_numbers():
    text = model.explain(ceiling_tbps=CEIL)
    for v in model.VARIANTS:
        assert v in text
    assert "e = 0.125" in text and "32 sectors" in text and "e_dram = 0.042" in text and "Little" in text
    assert "fit" in text
    assert "latency-bound" in model.explain(ceiling_tbps=CEIL, latency_ns=2000)
    assert "latency-bound" not in model.explain(ceiling_tbps=CEIL, latency_ns=100)


def test_fitted_constants_are_marked():
    import inspect

    src = inspect.getsource(model)
    assert "LATENCY_NS = " in src and "fit to H100 measurements in recorded_h100.json" in src
    assert 100 < model.LATENCY_NS < 5000


def test_loaded_latency_option():
    from kernels.naive_loads.model import _loaded_bandwidth

    # the fixed point satisfies bw = concurrency / (idle + slope * bw)
    conc = 2 * 8192 * 132 / 1e3
    bw = _loaded_bandwidth(conc)
    assert bw == pytest.approx(conc / (model.IDLE_LATENCY_NS + model.LATENCY_SLOPE_NS_PER_TBPS * bw))
    assert _loaded_bandwidth(conc, slope=0.0) == pytest.approx(conc / model.IDLE_LATENCY_NS)
    # it agrees with the constant latency at full occupancy, and predicts more at low occupancy
    full_c = model.predict_copy_tbps("scalar", 10.0)
    full_l = model.predict_copy_tbps("scalar", 10.0, loaded=True)
    assert full_l == pytest.approx(full_c, rel=0.05)
    low_c = model.predict_copy_tbps("scalar", 10.0, threads_per_sm=256)
    low_l = model.predict_copy_tbps("scalar", 10.0, threads_per_sm=256, loaded=True)
    assert low_l > 1.3 * low_c
    preds = [model.predict_copy_tbps("scalar", 10.0, threads_per_sm=t, loaded=True) for t in (256, 512, 1024, 2048)]
    assert preds == sorted(preds)
    assert preds[1] < 2 * preds[0]  # sub-linear: latency grows with load
