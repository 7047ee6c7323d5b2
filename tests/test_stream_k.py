"""Week 3 day 2 (kernels/stream_k/): split-K with its fix-up through the TMA, the model that picks the split, the
sweep's shapes. CPU: the model's rules, the launcher's refusals, both builds compiled and their SASS held to the
header's contract. GPU (sm_90): every split and both fix-ups against fp32 on awkward shapes, launch after launch (the
workspace cleans itself), and the poisoned output fully written."""

from __future__ import annotations

import re
from collections import Counter

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import requires_hopper
from kernels.compile import kernel_file
from kernels.sass import disassemble
from kernels.stream_k import launch, model, workload

SOURCE = kernel_file("stream_k", "r1_split_k.cu")


# ---------------------------------------------------------------- the model and the workload

@settings(max_examples=300, deadline=None)
@given(k=st.integers(64, 64 * 600).map(lambda v: v - v % 8), splits=st.integers(1, model.MAX_SPLITS))
def test_effective_splits_leave_no_range_empty(k, splits):
    shape = (64, 256, k)
    kt = model.ktiles(shape)
    s = model.effective_splits(shape, splits)
    per = -(-kt // s)
    assert 1 <= s <= min(splits, kt)
    assert (s - 1) * per < kt <= s * per  # the last range holds at least one k-tile, none runs past K
    assert -(-kt // splits) == per  # the kernel's own per (unit_of): the same ranges


@settings(max_examples=200, deadline=None)
@given(m=st.integers(1, 9000), n=st.integers(16, 7500).map(lambda v: v * 8),
       k=st.integers(8, 4000).map(lambda v: v * 8), sms=st.sampled_from([78, 114, 132]))
def test_best_split_is_a_candidate_and_never_adds_a_wave_for_nothing(m, n, k, sms):
    shape = (m, n, k)
    cands = model.candidates(shape)
    best = model.best_splits(shape, sms)
    assert best in cands and 1 in cands
    assert all(-(-model.ktiles(shape) // s) >= model.MIN_KTILES for s in cands if s > 1)
    assert model.cost(shape, best, sms) == min(model.cost(shape, s, sms) for s in cands)
    if model.tiles(shape) % sms == 0:  # whole waves already: a split only adds waves and a fix-up
        assert best == 1


def test_decode_rows_split_and_prefill_rows_do_not():
    # 64 rows of Llama 3 8B's O projection: 16 tiles for 132 SMs — the model cuts K; 8192 rows: 1024 tiles, it doesn't
    assert model.best_splits((64, 4096, 4096), 132) > 1
    assert model.best_splits((8192, 4096, 4096), 132) == 1


def test_the_sweep_is_every_row_count_with_every_projection_of_both_models():
    shapes = workload.sweep()
    assert len(shapes) == len(workload.ROWS) * len(workload.PROJECTIONS) == 40
    assert workload.PROJECTIONS["llama3_8b.qkv"] == (6144, 4096)  # (32 + 2 x 8) heads x 128, hidden 4096
    assert workload.PROJECTIONS["llama3_8b.gate_up"] == (28672, 4096)
    assert workload.PROJECTIONS["llama3_70b.down"] == (8192, 28672)
    assert workload.PROJECTIONS["llama3_70b.qkv"] == (10240, 8192)
    for m, n, k in shapes:
        launch.check_inputs(torch.empty(m, k, dtype=torch.bfloat16), torch.empty(n, k, dtype=torch.bfloat16))
    assert {s[0] for s in shapes} == set(workload.ROWS)


# ---------------------------------------------------------------- the launcher's refusals (CPU tensors)

def _ab(m=64, n=256, k=128, dtype=torch.bfloat16):
    return torch.zeros(m, k, dtype=dtype), torch.zeros(n, k, dtype=dtype)


@pytest.mark.parametrize("make, call, match", [
    (lambda: _ab(dtype=torch.float16), {}, "bf16"),
    (lambda: (torch.zeros(128, 64, dtype=torch.bfloat16).T, torch.zeros(256, 128, dtype=torch.bfloat16)), {},
     "contiguous"),
    (lambda: (torch.zeros(64, 128, dtype=torch.bfloat16), torch.zeros(128, 256, dtype=torch.bfloat16)), {},
     "K differs"),
    (lambda: _ab(n=260), {}, "multiples of 8"),
    (lambda: _ab(k=36), {}, "multiples of 8"),
    (lambda: _ab(k=32), {}, "K >= 64"),
    (lambda: _ab(n=64), {}, "N >= 128"),
    (lambda: _ab(), {"splits": 0}, "splits"),
    (lambda: _ab(), {"splits": 17}, "splits"),
    (lambda: _ab(), {"splits": True}, "splits"),
    (lambda: _ab(), {"splits": 2.0}, "splits"),
    (lambda: _ab(), {"out": torch.zeros(64, 256, dtype=torch.float32)}, "out must be"),
    (lambda: _ab(), {"out": torch.zeros(256, 64, dtype=torch.bfloat16)}, "out must be"),
])
def test_bad_inputs_are_refused_with_the_rule(make, call, match):
    a, b = make()
    with pytest.raises((ValueError, TypeError), match=match):
        launch.gemm_split_k(a, b, **call)


def test_a_list_is_not_a_tensor_and_cpu_tensors_pass_the_checks_then_stop():
    a, b = _ab()
    with pytest.raises(TypeError, match="torch.Tensor"):
        launch.gemm_split_k(a.tolist(), b)
    with pytest.raises(ValueError, match="sm_90 GPU"):
        launch.gemm_split_k(a, b)


# ---------------------------------------------------------------- the kernel, compiled on CPU

def _ops(reduce: bool, tile: str = "wide") -> Counter:
    return Counter(i.opcode for i in disassemble(launch.cubin(reduce, tile))[launch.KERNEL])


def test_launcher_constants_are_the_sources():
    text = SOURCE.read_text()
    define = {k: int(v) for k, v in re.findall(r"#define (SPLITK_\w+) (\d+)", text)}
    wide = launch.TILES["wide"]
    assert (define["SPLITK_BM"], define["SPLITK_BN"], define["SPLITK_STAGES"], define["SPLITK_CTAS"]) == \
        (wide["bm"], wide["bn"], wide["stages"], wide["ctas"])  # the default build is the launcher's "wide"
    assert define["SPLITK_REDUCE"] == 0  # slots by default
    assert (model.BM, model.BN) == model.TILE_SHAPES["wide"] == (wide["bm"], wide["bn"])
    assert re.search(r"constexpr int BM = SPLITK_BM, BN = SPLITK_BN, BK = (\d+)", text).group(1) == str(model.BK)
    for name, t in launch.TILES.items():
        cfg = launch.tile_config(name)
        assert model.TILE_SHAPES[name] == (t["bm"], t["bn"]) and model.CTAS_PER_SM[name] == t["ctas"]
        # the rings (and ~1 KiB of static shared memory each) of the CTAs an SM holds fit its 228 KiB
        assert t["ctas"] * (cfg["smem"] + 1024) <= 228 * 1024, name
        assert cfg["smem"] <= 227 * 1024
    assert launch.tile_config("wide")["threads"] == launch.THREADS == 384
    assert launch.tile_config("wide")["smem"] == launch.SMEM


def test_an_unknown_tile_is_refused():
    a, b = _ab()
    with pytest.raises(ValueError, match="tile 'huge'"):
        launch.gemm_split_k(a, b, tile="huge")


@pytest.mark.parametrize("tile", sorted(launch.TILES))
@pytest.mark.parametrize("reduce", [False, True], ids=["slots", "reduce"])
def test_both_fix_ups_compile_clean_to_the_headers_sass(reduce, tile):
    cub = launch.cubin(reduce, tile)
    assert not cub.log.strip(), f"ptxas advisories: {cub.log}"
    ops = _ops(reduce, tile)
    bm, bn = model.TILE_SHAPES[tile]
    assert ops[f"HGMMA.64x{bn}x16.F32.BF16"] == 4  # one k-tile: 4 x k16
    assert ops["UTMALDG.2D"] == 1 + bn // min(bn, 128)  # A, then B in boxes of (up to) 128 rows
    write = "UTMAREDG.2D.ADD" if reduce else "UTMASTG.2D"
    other = "UTMASTG.2D" if reduce else "UTMAREDG.2D.ADD"
    assert ops[write] == bn // 32 and ops[other] == 0  # the (64, 32) boxes of a consumer's partial, one way only
    assert ops["ATOMG.E.ADD.STRONG.GPU"] == 1  # the ticket
    assert ops["LDG.E.64.STRONG.GPU"] == bn // 4  # the last consumer's reads of W: one pass of its columns, unrolled
    assert not any(o.startswith(("LDL", "STL")) for o in ops), "local memory: the accumulator spilled"
    assert (ops["USETMAXREG.TRY_ALLOC.CTAPOOL"] == 1) == (bm == 128)  # registers moved only with two consumers
    header = SOURCE.read_text().split("SASS you should see:")[1].split("//\n")[0]
    for op in ("UTMALDG.2D", "HGMMA.64x256x16.F32.BF16", write, "ATOMG.E.ADD.STRONG.GPU", "LDG.E.64.STRONG.GPU"):
        assert op in header


def test_the_reduce_build_zeroes_w_behind_it_and_the_slot_build_does_not():
    # reduce: the last consumer's 64 loads of W are each followed by a store of zeros (STG.E.64.STRONG.GPU); slots:
    # W is overwritten by the next launch's stores, nothing to clean
    assert _ops(True)["STG.E.64.STRONG.GPU"] == 64
    assert _ops(False)["STG.E.64.STRONG.GPU"] == 0


# ---------------------------------------------------------------- on an sm_90 GPU

def _check(m, n, k, splits, reduce, seed, tile="wide"):
    g = torch.Generator(device="cuda").manual_seed(seed)
    a = torch.randn(m, k, generator=g, device="cuda").bfloat16()
    b = torch.randn(n, k, generator=g, device="cuda").bfloat16()
    ref = a.float() @ b.float().T
    for launch_no in range(3):  # the workspace and the tickets left as the kernel found them, launch after launch
        c = torch.full((m, n), float("nan"), dtype=torch.bfloat16, device="cuda")
        launch.gemm_split_k(a, b, splits, out=c, reduce=reduce, tile=tile)
        assert not c.isnan().any(), f"{(m, n, k)} splits {splits}: elements never written (launch {launch_no})"
        err = ((c.float() - ref).norm() / ref.norm()).item()
        assert err < 4e-3, f"{(m, n, k)} splits {splits} reduce {reduce}: rel err {err:.2e} (launch {launch_no})"


@requires_hopper
@settings(max_examples=25, deadline=None)
@given(m=st.integers(1, 400), n=st.integers(16, 140).map(lambda v: v * 8), k=st.integers(8, 700).map(lambda v: v * 8),
       splits=st.integers(1, model.MAX_SPLITS), reduce=st.booleans(), seed=st.integers(0, 2**31),
       tile=st.sampled_from(sorted(launch.TILES)))
def test_every_split_matches_fp32_on_awkward_shapes(m, n, k, splits, reduce, seed, tile):
    _check(m, n, k, splits, reduce, seed, tile)


@requires_hopper
@pytest.mark.parametrize("shape", [(64, 4096, 4096), (128, 4096, 14336), (512, 6144, 4096)])
def test_the_models_split_matches_fp32_on_the_sweeps_shapes(shape):
    _check(*shape, None, False, 0)


# ---------------------------------------------------------------- the fitted model (no record to fit yet)

def _synthetic_rows(constants, sms=132):
    shapes = workload.sweep((64, 512))[::2]
    return [{"shape": sh, "tile": t, "splits": s, "us": model.predict_us(sh, t, s, sms, constants)}
            for sh in shapes for t in model.TILE_SHAPES for s in (1, 2, 4, 8) if s in model.candidates(sh)]


@settings(max_examples=8, deadline=None)
@given(bw=st.floats(40e3, 200e3), t_unit=st.floats(0.5, 8.0), t_fix=st.floats(0.5, 8.0), bwg=st.floats(20e3, 400e3))
def test_the_fit_recovers_the_constants_that_made_its_rows(bw, t_unit, t_fix, bwg):
    truth = {"BW_SM": bw, "T_UNIT": t_unit, "T_FIXUP": t_fix, "BW_GATHER": bwg}
    rows = _synthetic_rows(truth)
    got = model.fit(rows, 132)
    worst = max(abs(model.predict_us(r["shape"], r["tile"], r["splits"], 132, got) / r["us"] - 1) for r in rows)
    assert worst < 0.02, (got, truth)  # the rows' own times back
    assert got["BW_SM"] == pytest.approx(bw, rel=0.02) and got["T_UNIT"] == pytest.approx(t_unit, rel=0.05)


def test_an_unfitted_model_says_what_to_run_and_choose_takes_constants():
    with pytest.raises(LookupError, match="kernels.stream_k.scan"):
        model.predict_us((64, 4096, 4096), "wide", 1, 132)
    c = {"BW_SM": 100e3, "T_UNIT": 3.0, "T_FIXUP": 2.0, "BW_GATHER": 100e3}
    tile, splits = model.choose((64, 4096, 4096), 132, c)
    assert tile in model.TILE_SHAPES and splits in model.candidates((64, 4096, 4096))
    # 8192 rows of a wide projection: more than a wave of wide tiles; the memory-bound model never splits there
    assert model.choose((8192, 28672, 4096), 132, c)[1] == 1


# ---------------------------------------------------------------- the H200 record (kernels/stream_k/sweep_h200.json)

RECORD = SOURCE.parent / "sweep_h200.json"


def test_the_sweep_record_is_every_shape_and_its_figures_come_from_its_rounds():
    import json
    import math
    import statistics

    from kernels.compare import Ratio
    from kernels.stream_k import sweep

    doc = json.loads(RECORD.read_text())
    assert doc["device"] == "NVIDIA H200" and doc["driver"] and doc["date"] and doc["what"].startswith("python -m")
    assert [tuple(s["shape"]) for s in doc["shapes"]] == workload.sweep()
    for s in doc["shapes"]:
        t = s["comparison"]["times_ms"]
        assert len(s["comparison"]["orders"]) >= 6
        for run, r in s["ratios"].items():  # every ratio recomputed from the per-round times
            per = [cb / c for c, cb in zip(t[run], t["cublas"])]
            again = Ratio.of(run, "cublas", per)
            assert math.isclose(again.median, r["median"]) and math.isclose(again.lo, r["lo"]), (s["shape"], run)
        assert s["model_splits"] == model.best_splits(tuple(s["shape"]), 132)  # the split the launcher takes today
        assert s["accuracy"]["split_k"] <= 4e-3 and s["accuracy"]["cublas"] <= 4e-3
    sm = sweep.summary(doc["shapes"])
    assert math.isclose(sm["geomean"], doc["summary"]["geomean"])
    med = [s["ratios"]["split_k"]["median"] for s in doc["shapes"]]
    assert math.isclose(sm["geomean"], math.exp(statistics.mean(map(math.log, med))))
    assert sm["min"] == min(med)


def test_the_kernels_header_says_what_the_record_measured_of_the_reduce_add():
    import json

    doc = json.loads(RECORD.read_text())
    both = [s for s in doc["shapes"] if "split_k_reduce" in s["ratios"]]
    ahead = [s for s in both if s["ratios"]["split_k_reduce"]["median"] > s["ratios"]["split_k"]["median"]]
    assert len(both) - len(ahead) == 15 and len(both) == 19  # "behind everywhere else it ran (15 of 19 shapes"
    assert all(s["model_splits"] == 8 and model.tiles(tuple(s["shape"])) == 16 for s in ahead)  # "8 splits of 16"
    worst = min(s["ratios"]["split_k_reduce"]["median"] / s["ratios"]["split_k"]["median"] for s in both)
    assert worst < 0.34  # "down to a third"
    assert "15 of 19 shapes" in SOURCE.read_text()


def test_make_gpu_tests_claims_step_runs_the_scan_then_the_sweep_with_its_fit(tmp_path):
    import sys

    sys.path.insert(0, str(SOURCE.parents[2] / "tools"))
    from gpu_claims import SWEEP_SLUGS, stream_k_commands

    from kernels.stream_k import scan, sweep

    assert SWEEP_SLUGS == ("stream_k",)
    first, second = stream_k_commands(tmp_path, 18)
    assert first[1:3] == ["-m", "kernels.stream_k.scan"] and second[1:3] == ["-m", "kernels.stream_k.sweep"]
    # each command's options are its module's (parsed by its own parser: a renamed flag fails here, not on a GPU)
    for cmd, mod in ((first, scan), (second, sweep)):
        import argparse

        parsers = []
        real = argparse.ArgumentParser.parse_args

        def grab(self, args=None, namespace=None):
            parsers.append(self)
            return real(self, args, namespace)

        argparse.ArgumentParser.parse_args = grab
        try:
            with pytest.raises(SystemExit):  # parse only: --help after the options stops it before any GPU work
                mod.main(cmd[3:] + ["--help"])
        finally:
            argparse.ArgumentParser.parse_args = real
        ns = real(parsers[0], cmd[3:])
        assert ns.out == str(tmp_path / "stream_k")
    assert second[second.index("--constants") + 1] == str(tmp_path / "stream_k" / "constants.json")
