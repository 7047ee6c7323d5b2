"""Week 3 day 1 (fp8_gemm): the model of rung 1 (kernels/fp8_gemm/model.py) and the benchmark's rows for it, on CPU.
The model's constants are the kernel's (tile, k-block bytes, depth) and physics (FP8 = twice bf16's per-clock rate: the
spec's roofline); its fit recovers known constants from rows it generated itself with noise (fresh draws); the
held-out check flags a row 20 % off and passes one 5 % off; its predictions have the shape the kernel has (more waves
take longer, no promotion is faster, fewer stages are never faster); the bench times exactly the model's fit and
held-out rows, has no template copy stub left and records prior figures as priors. Where a GPU has recorded the day
(kernels/fp8_gemm/recorded_<gpu>.json) the model is held to each record as every other day's is: constants its fit,
held-out rows within the band or named; with no record those tests skip and say so."""

from __future__ import annotations

import inspect
import json
import random
import tomllib
from pathlib import Path

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from kernels import models
from kernels.fp8_gemm import bench, launch, model
from kernels.gemm import model as gemm_model
from kernels.topic import fit_table

ROOT = Path(__file__).resolve().parents[1]
SLUG = "fp8_gemm"
RECORDS = {p.stem.removeprefix("recorded_"): p for p in sorted((ROOT / "kernels" / SLUG).glob("recorded_*.json"))}
NO_RECORD = pytest.param(None, marks=pytest.mark.skip(
    reason="no kernels/fp8_gemm/recorded_<gpu>.json yet: `make gpu-test` (the bench on a Hopper) records one; then "
           "fit the model to it (model.fit) and these checks run"))
TAGS = sorted(RECORDS) or [NO_RECORD]


def _rows(constants: dict, noise: float = 0.0, seed: int = 0, mhz: float | None = None,
          names=model.FIT_ROWS + model.HELD_OUT, sms: int = 132) -> list[dict]:
    """Rows as the bench records them (kernel, shape, ms, tflops, config, sm_mhz), their times the model's with
    `constants`, each off by a uniform relative noise of at most `noise`."""
    rng = random.Random(seed)
    mhz = mhz or model.DATASHEET_MHZ  # the clock a record with none sampled is predicted at (run_sm_mhz)
    out = []
    for name in names:
        cfg = model._parse(name)
        cfg = model.Config(cfg.m, cfg.n, cfg.k, cfg.promote, cfg.stages, sms)
        ms = model.predict_config(cfg, mhz, **constants).ms * (1 + rng.uniform(-noise, noise))
        kernel, shape = name.rsplit(" ", 1)
        out.append({"kernel": kernel, "shape": shape, "ms": ms, "tbps": None,
                    "tflops": 2.0 * cfg.m * cfg.n * cfg.k / (ms * 1e-3) / 1e12, "sm_mhz": mhz,
                    "config": {"m": cfg.m, "n": cfg.n, "k": cfg.k, "promote": cfg.promote, "stages": cfg.stages,
                               "sms": sms}})
    return out


def _record(rows, device="NVIDIA H200", date="2026-12-05") -> dict:
    return {"device": device, "date": date, "rows": rows, "ceilings": {"copy_tbps": 4.2}}


# ------------------------------------------------------------------------------------------- constants and physics
def test_the_models_constants_are_the_kernels():
    assert (model.BM, model.BN, model.BK, model.STAGES) == (launch.BM, launch.BN, launch.BK, launch.STAGES)
    assert model.KB_BYTES == launch.STAGE_TILES + launch.SA_BYTES == 33280
    src = (ROOT / "kernels" / SLUG / "r1_block_scaled.cu").read_text()
    assert "expect-tx per stage: 16384 (A) + 16384 (B) + 512 (sa) = 33280 bytes" in src
    roles = (ROOT / "kernels" / "include" / "block_scaled.cuh").read_text()  # split_roles: the rungs' setmaxnreg
    assert "__launch_bounds__(384, 1)" in src and "split_roles(" in src
    assert "setmaxnreg_dec<40>" in roles and "setmaxnreg_inc<232>" in roles
    # one CTA per SM at six stages by shared memory; at every depth by setmaxnreg's register pool
    assert 2 * (launch.smem_bytes(6) + 1024) > 228 * 1024 and 40 * 128 + 232 * 256 > 65536 // 2
    assert launch.grid((8192, 4096, 128)) == (4096 // 128, 8192 // 128)


def test_fp8_rate_is_twice_bf16s_and_the_spec_roofline():
    assert model.FP8_FLOP_PER_CLK_SM == 2 * gemm_model.TC_FLOP_PER_CLK_SM == 8192
    spec = tomllib.loads((ROOT / "kernels" / SLUG / "spec.toml").read_text())
    roof = spec["exercises"]["fp8_promote"]["roofline"]["h100"]
    peak = model.FP8_FLOP_PER_CLK_SM * model.SMS * gemm_model.DATASHEET_MHZ * 1e6 / 1e12
    assert peak == pytest.approx(roof, rel=2e-3)
    kb = model.kblock_times(sm_mhz=gemm_model.DATASHEET_MHZ, TC_EFF=1.0)
    assert kb["W"] == pytest.approx(2 * 128 ** 3 / (peak * 1e12 / 132) * 1e9)  # W at the full peak: one SM's share
    assert kb["L2"] == pytest.approx(33280 / (model.CONSTANTS["L2_TBPS"] * 1e12 / 132) * 1e9)


def test_constants_are_declared_by_kind_and_the_rule_holds():
    """kernels.models' conventions: each constant physics (with its source) or fitted (on this model's fit rows, or
    imported from another fit), at most one fitted constant per two fit rows, held-out rows of another regime."""
    consts = model.FIT["constants"]
    for name, c in consts.items():
        assert c["kind"] in ("physics", "fitted"), name
        if c["kind"] == "physics":
            assert c.get("source"), name
        else:
            assert bool(c.get("rows")) != bool(c.get("from")), name
            assert set(c.get("rows", ())) <= set(model.FIT_ROWS), name
    assert set(model.HELD_OUT_CHECK.constants) <= set(consts) and set(model.CONSTANTS) <= set(consts)
    assert models.rule_holds(model.FIT)
    own = [k for k, c in consts.items() if c["kind"] == "fitted" and "rows" in c]
    assert len(own) == 4 and 2 * len(own) <= len(model.FIT_ROWS)
    assert not set(model.FIT_ROWS) & set(model.HELD_OUT) and model.FIT["held_out_regime"]
    # the mainloop's constant is fitted where the fit charged the mainloop, the other imported
    which = {"l2": "L2_TBPS", "tensor": "TC_EFF"}[model.MAINLOOP_BOUND]
    assert "rows" in consts[which] and "from" in consts[({"L2_TBPS", "TC_EFF"} - {which}).pop()]


# ------------------------------------------------------------------------------------------------------ the fit
@given(seed=st.integers(0, 2**32 - 1), l2=st.floats(5.0, 10.5), promote=st.floats(30.0, 400.0),
       epi=st.floats(500.0, 8000.0), start=st.floats(1000.0, 12000.0), mhz=st.floats(1500.0, 1980.0),
       noise=st.floats(0.0, 0.004))
@settings(max_examples=40, deadline=None)
def test_fit_recovers_l2_bound_constants(seed, l2, promote, epi, start, mhz, noise):
    """Rows from known constants with the L2 term binding (TC_EFF week 2's): the fit returns them, charges the
    mainloop to L2, and predicts the held-out rows it never saw; the record's own clock is the one it used."""
    true = {**model.CONSTANTS, "L2_TBPS": l2, "PROMOTE_NS": promote, "EPILOGUE_NS": epi, "START_NS": start}
    kb = model.kblock_times(sm_mhz=mhz, **true)
    assume(kb["L2"] > 1.02 * kb["W"])  # L2 binds at this clock (a slow clock lengthens W: the tensor case below)
    rows = _rows(true, noise, seed, mhz)
    got = model.fit(rows)
    assert got["fitted"] and got["mainloop_bound"] == "l2" and got["rows"] == len(model.FIT_ROWS)
    assert got["L2_TBPS"] == pytest.approx(l2, rel=0.01 + 3 * noise)
    assert got["TC_EFF"] == model.CONSTANTS["TC_EFF"] and got["LATENCY_NS"] == model.CONSTANTS["LATENCY_NS"]
    t_kb = model.kblock_times(promote=False, sm_mhz=mhz, **true)["t_kb"]
    assert got["PROMOTE_NS"] == pytest.approx(promote, abs=8 * noise * t_kb + 0.5)
    assert got["EPILOGUE_NS"] == pytest.approx(epi, rel=0.1, abs=30000 * noise + 1)
    assert got["band"] <= 2 * noise + 1e-4  # the constants are rounded (0.1 ns, 1e-4 TB/s)
    errs = model.HELD_OUT_CHECK.errors(_record(rows), got)
    assert set(errs) == set(model.HELD_OUT) and max(abs(e) for e in errs.values()) <= 3 * noise + 1e-4


@given(seed=st.integers(0, 2**32 - 1), tc=st.floats(0.82, 1.0), promote=st.floats(30.0, 400.0),
       noise=st.floats(0.0, 0.004))
@settings(max_examples=25, deadline=None)
def test_fit_recovers_a_tensor_bound_mainloop(seed, tc, promote, noise):
    """Rows whose tensor term binds (TC_EFF above week 2's, L2 fast enough): the fit charges the mainloop to the
    tensor cores and returns their fraction."""
    true = {**model.CONSTANTS, "TC_EFF": tc, "L2_TBPS": 25.0, "PROMOTE_NS": promote}
    got = model.fit(_rows(true, noise, seed, 1830.0))
    assert got["mainloop_bound"] == "tensor" and got["TC_EFF"] == pytest.approx(tc, rel=0.01 + 3 * noise)
    # L2 is only known to be fast enough: at least what keeps its term under W
    assert got["L2_TBPS"] >= model.KB_BYTES * 132 / (got["KBLOCK_NS"] * 1e-9) / 1e12 * (1 - 1e-3)


@given(seed=st.integers(0, 2**32 - 1), lat=st.floats(600.0, 2500.0), noise=st.floats(0.0, 0.003))
@settings(max_examples=25, deadline=None)
def test_fit_recovers_the_rings_latency_from_a_two_stage_row(seed, lat, noise):
    """LATENCY_NS is week 2's unless asked for: with fit_latency and a two-stage row among the rows fitted, the fit
    solves for it (its (LATENCY_NS + W) / 2 binds over L2 from 2 x 439 - 356 = 523 ns on)."""
    true = {**model.CONSTANTS, "LATENCY_NS": lat}
    rows = _rows(true, noise, seed)
    got = model.fit(rows, names=model.FIT_ROWS + ("block_scaled s2 4096x4096x4096",), fit_latency=True)
    assert "LATENCY_NS" in got["pinned"]
    assert got["LATENCY_NS"] == pytest.approx(lat, rel=0.02 + 10 * noise)
    assert model.fit(rows)["LATENCY_NS"] == model.CONSTANTS["LATENCY_NS"]  # not fitted by default


def test_the_fit_can_fail():
    """A fit that ignored a row, a term or the promotion would pass nothing above; and it says when rows cannot pin
    the constants (one wave count and no nopromote row) instead of returning numbers."""
    rows = _rows(model.CONSTANTS)
    assert model.fit(rows)["PROMOTE_NS"] == pytest.approx(model.CONSTANTS["PROMOTE_NS"], abs=0.2)
    moved = [dict(r, ms=r["ms"] * 1.3, tflops=r["tflops"] / 1.3) if r["kernel"] == "block_scaled" and
             r["shape"] == "4096x4096x16384" else r for r in rows]
    assert model.fit(moved)["PROMOTE_NS"] > 1.3 * model.CONSTANTS["PROMOTE_NS"]  # one row 30 % slower
    few = model.fit(rows, names=("block_scaled 4096x4096x4096", "block_scaled 4096x4096x16384"))
    assert "error" in few and "pin" in few["error"]
    assert "error" in model.fit([r for r in rows if r["kernel"] != "block_scaled"], names=("nothing",))


# ------------------------------------------------------------------------------------------- the held-out check
@pytest.mark.parametrize("off,flagged", [(0.20, True), (-0.20, True), (0.05, False), (-0.05, False)])
def test_held_out_check_flags_20_percent_and_passes_5(off, flagged):
    rows = _rows(model.CONSTANTS)
    name = random.choice(model.HELD_OUT)
    for r in rows:
        if model.row_name(r) == name:  # measured such that prediction / measurement - 1 = off
            r["tflops"] /= 1 + off
            r["ms"] *= 1 + off
    rec = _record(rows, device="NVIDIA H100 80GB HBM3")  # a GPU whose misses model.FIT names none of
    errs = model.HELD_OUT_CHECK.errors(rec)
    assert errs[name] == pytest.approx(off) and all(abs(e) < 1e-9 for n, e in errs.items() if n != name)
    assert (name in model.HELD_OUT_CHECK.outside_band(rec)) == flagged
    text = model.held_out_report(rec)
    line = next(ln for ln in text.splitlines() if ln.strip().startswith(name + " "))
    assert f"({off:+.1%})" in line and ("outside +-10%: NOT named in model.FIT" in line) == flagged
    assert "NVIDIA H100" in text and "its own fit rows refit" in text


def test_a_run_without_the_fit_rows_is_reported_without_a_refit():
    """A --quick run times the bench shape only: the scaffold's held-out facts check what it has, no refit."""
    quick = [model.row_name(r) for r in _rows(model.CONSTANTS) if r["shape"] == "8192x8192x8192"]
    assert {f"{n} {s}" for n, s in [(a, "x".join(map(str, b))) for a, b in bench.model_rows(quick=True)]} == set(quick)
    rec = _record(_rows(model.CONSTANTS, names=tuple(quick)))
    facts = model.HELD_OUT_CHECK.facts(rec)
    assert facts["refit"] is None and facts["refit_missing"] == list(model.FIT_ROWS)
    assert set(facts["held_out"]) == set(quick) and "no refit on this run" in model.held_out_report(rec)


# ------------------------------------------------------------------------------------- the shape of predictions
@given(mt=st.integers(1, 80), nt=st.integers(1, 80), kb=st.integers(1, 128), stages=st.integers(2, 6),
       extra=st.integers(1, 200))
@settings(max_examples=60, deadline=None)
def test_predictions_have_the_kernels_shape(mt, nt, kb, stages, extra):
    cfg = model.Config(128 * mt, 128 * nt, 128 * kb, True, stages)
    t = model.predict_config(cfg).ms
    more = model.Config(128 * (mt + extra), cfg.n, cfg.k, True, stages)  # at least as many tiles, never fewer waves
    assert more.waves >= cfg.waves and model.predict_config(more).ms >= t
    if more.waves > cfg.waves:
        assert model.predict_config(more).ms > t
    assert model.predict_config(model.Config(cfg.m, cfg.n, cfg.k, False, stages)).ms < t  # no promotion: faster
    deeper = [model.predict_config(model.Config(cfg.m, cfg.n, cfg.k, True, s)).ms for s in range(2, 7)]
    assert all(a >= b for a, b in zip(deeper, deeper[1:]))  # fewer stages: never faster
    peak = model.FP8_FLOP_PER_CLK_SM * 132 * model.SM_MHZ * 1e6 / 1e12
    assert model.predict_config(cfg).tflops < peak


def test_waves_and_stages_at_the_bench_rows():
    one, two = model.Config(1536, 1408, 8192), model.Config(1664, 1408, 8192)
    assert (one.tiles, one.waves, two.tiles, two.waves) == (132, 1, 143, 2)
    assert model.predict_config(two).ms > 1.8 * model.predict_config(one).ms - model.CONSTANTS["START_NS"] * 1e-6
    assert model.Config(8192, 8192, 8192).waves == 32  # 4096 tiles: 31 full waves and a tail of 4 CTAs
    s2, s4, s6 = (model.predict_config(model.Config(4096, 4096, 4096, True, s)) for s in (2, 4, 6))
    assert s2.bound == "latency+promote" and s2.ms > s4.ms == s6.ms  # 2 stages: the ring's latency binds
    table = model.bound_table()
    assert [r["row"] for r in table] == list(model.FIT_ROWS + model.HELD_OUT)
    assert {r["set"] for r in table if r["row"] in model.HELD_OUT} == {"held out"}


def test_dram_stays_below_the_copy_ceilings():
    """The docstring's DRAM figure: at 8192^3 a wave streams all of B (64 MiB > the 50 MB L2) and ~3 panels of A, at
    the model's wave time below the H100's copy ceiling (week 2's fit run: 3.0 TB/s)."""
    d = model.dram_demand(model.Config(8192, 8192, 8192))
    assert d["bytes"] == pytest.approx((1 + 131 / 64) * 128 * 8192 + 64 * 128 * 8192)
    assert d["tbps"] < gemm_model.FIT["copy_tbps"]
    assert f"~ {d['tbps']:.1f} TB/s with the fitted constants" in model.__doc__
    small = model.dram_demand(model.Config(2048, 2048, 2048))  # A and B fit in L2: read once for the launch
    assert small["bytes"] == pytest.approx(2 * 2048 * 2048 / 2)


# ------------------------------------------------------------------------------------------------ the bench
def test_the_bench_times_the_models_rows():
    names = [f"{b} {'x'.join(map(str, s))}" for b, s in bench.ROWS]
    assert len(names) == len(set(names)) and set(names) == set(model.FIT_ROWS) | set(model.HELD_OUT)
    assert "block_scaled 8192x8192x8192" in model.HELD_OUT
    for b, s in bench.ROWS:
        assert all(v % 128 == 0 for v in s) and b in bench.BUILDS
        cfg = model._parse(f"{b} {'x'.join(map(str, s))}")
        assert (cfg.promote, cfg.stages) == bench.BUILDS[b]
    shapes = [s for _, s in bench.ROWS]
    assert shapes == sorted(shapes, key=shapes.index)  # grouped by shape: one set of inputs each
    assert [s for i, s in enumerate(shapes) if s not in shapes[:i]] == list(dict.fromkeys(shapes))
    assert {"block_scaled s2", "block_scaled s4"} <= set(bench.CHECKED)  # every timed depth is checked first
    assert bench.TOPIC.held_out is model.HELD_OUT_CHECK and bench.TOPIC.fit is model.fit


def test_the_bench_has_no_template_copy_stub():
    src = inspect.getsource(bench)
    for gone in ("COPY_SHAPES", "_copy_inputs", "fp8_gemm.cu", "import copy", ", copy", "copy(inp"):
        assert gone not in src, gone


@pytest.mark.parametrize("fitted", [False, True])
def test_the_bench_records_priors_as_priors(monkeypatch, fitted):
    """Before the model is fitted the rows carry `model_prior` (no band judges it); after, `model_prediction`,
    each at the run's mean SM clock."""
    monkeypatch.setattr(model, "FITTED", fitted)
    rows = _rows(model.CONSTANTS, mhz=1700.0) + [{"kernel": "cublas_bf16", "shape": "8192x8192x8192", "tflops": 700.0}]
    for r in rows:
        r.pop("model_prediction", None)
    bench._with_model(rows)
    mine = [r for r in rows if model.main_row(r)]
    key = "model_prediction" if fitted else "model_prior"
    assert all(r[key] == pytest.approx(model.predict_row(r, {"rows": rows})) for r in mine)
    assert all(("model_prediction" in r) == fitted and ("model_prior" in r) != fitted for r in mine)
    assert "model_prediction" not in rows[-1] and "model_prior" not in rows[-1]


# ------------------------------------------------------------------------------------ no record yet / records
def test_without_a_record_the_model_says_so():
    text = fit_table(model.FIT, model.CONSTANTS, fit_rows=model.FIT_ROWS, held_out=model.HELD_OUT)
    assert all(n in text for n in model.FIT_ROWS + model.HELD_OUT) and all(k in text for k in model.CONSTANTS)
    if RECORDS:
        assert model.FITTED and "no record yet" not in text, \
            f"records {sorted(RECORDS)} exist: fit the model to one (model.fit) and name it in model.FIT"
        return
    assert not model.FITTED and text.startswith("source      no record yet")
    assert "no record of this day's rows yet" in model.fit_lines(None)
    fig = model.plot_vs_model(None)
    assert "priors" in fig.axes[0].get_title() and len(fig.axes[0].get_xticklabels()) == len(bench.ROWS)
    rec = _record(_rows(model.CONSTANTS))
    assert "held-out rows of NVIDIA H200" in model.fit_lines(rec) and "(priors" in model.held_out_report(rec)
    assert "(fit)" in " ".join(t.get_text() for t in model.plot_vs_model(rec).axes[0].get_xticklabels())


def _doc(tag: str) -> dict:
    return json.loads(RECORDS[tag].read_text())


@pytest.mark.parametrize("tag", TAGS)
def test_held_out_rows_within_band_or_named(tag):
    doc = _doc(tag)
    errs = model.HELD_OUT_CHECK.errors(doc)
    assert set(errs) == set(model.HELD_OUT), set(model.HELD_OUT) - set(errs)  # every held-out row measured
    outside = model.HELD_OUT_CHECK.outside_band(doc)
    named = model.FIT["held_out_outside_band"].get(tag, {})
    assert set(outside) == set(named), errs
    for k, v in named.items():
        assert outside[k] == pytest.approx(v, abs=0.002) and model.FIT["misses"][tag][k], k
    assert all(abs(v) <= 0.20 for v in errs.values()), errs  # the course's hard band
    text = model.held_out_report(doc)
    assert doc["device"] in text and text.count("named in model.FIT") == len(named) and "NOT named" not in text


@pytest.mark.parametrize("tag", TAGS)
def test_constants_are_the_fit_of_the_fit_record(tag):
    doc = _doc(tag)
    if (model.FIT.get("device"), model.FIT.get("date")) != (doc["device"], doc["date"]):
        fitted_on = [t for t in RECORDS if (_doc(t)["device"], _doc(t)["date"]) ==
                     (model.FIT.get("device"), model.FIT.get("date"))]
        assert fitted_on, f"model.FIT names no recorded run ({model.FIT.get('source')})"
        pytest.skip(f"the constants were fitted on {fitted_on[0]}'s record, not {tag}'s")
    assert model.FITTED and f"{doc['device']}, driver {doc['driver']}, {doc['date']}" in model.FIT["source"]
    f = model.fit(doc["rows"], sm_mhz=model.run_sm_mhz(doc), sms=doc.get("sms"))
    assert f["mainloop_bound"] == model.MAINLOOP_BOUND == model.FIT["mainloop_bound"]
    for k, v in model.CONSTANTS.items():
        assert f[k] == pytest.approx(v, rel=1e-3), k
    assert model.SM_MHZ == pytest.approx(model.run_sm_mhz(doc), abs=0.05)
    assert f["band"] == pytest.approx(model.FIT["band"], abs=1e-3)


@pytest.mark.parametrize("tag", TAGS)
def test_recorded_rows_carry_their_build(tag):
    doc = _doc(tag)
    mine = {model.row_name(r): r for r in doc["rows"] if model.main_row(r)}
    assert set(mine) == set(model.FIT_ROWS) | set(model.HELD_OUT) or doc.get("quick")
    for n, r in mine.items():
        cfg = model._parse(n)
        assert (r["config"]["m"], r["config"]["n"], r["config"]["k"], r["config"]["promote"],
                r["config"]["stages"]) == (cfg.m, cfg.n, cfg.k, cfg.promote, cfg.stages), n
        assert ("model_prediction" in r and r["model_prediction"] is not None) or "model_prior" in r, n
