"""Week 3 day 1 (fp8_gemm): the workload, the baselines and the accuracy study.

On CPU: quantize -> dequantize stays within e4m3's precision (2^-4 relative, plus half e4m3's subnormal step times the
scale for entries far below their block's amax) over blocks whose magnitudes span 2^-12 .. 2^12, and keeps zeros
exact; each scale is its block's amax / 448 (one block of each kind checked by hand); an all-zero block quantizes to
zeros with a finite scale; the reference is the float64 block-by-block sum; bad shapes and NaN / inf raise ValueError
naming the argument; FLOPs and bytes; the Triton kernel in Triton's interpreter (TRITON_INTERPRET=1, a subprocess)
against the reference on inputs whose block scales differ (a wrong scale index fails); the rowwise helper's exact
case (every row reaching its blocks' amax) and torch's rowwise scaled mm on CPU; supported() says "needs an sm_90
GPU"; the accumulation demo's errors grow with K without promotion and stay flat with it; accuracy_table's rows.
On an sm_90 GPU: each baseline against its reference at (256, 256, 512) and at K / 128 = 5 (cuBLASLt's padded scale
layout) within CHECK_RTOL (one bf16 rounding of the output), and supported() names each recipe.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import requires_hopper
from kernels.check import compare
from kernels.device import is_hopper
from kernels.fp8_gemm import accuracy, baselines, workload
from kernels.fp8_gemm.workload import BLOCK_K, E4M3_MAX

ROOT = Path(__file__).resolve().parents[1]
REL = 2.0 ** -4             # e4m3: 3 mantissa bits, round to nearest: within half a step, 2^-4 of the value
SUBNORMAL_HALF = 2.0 ** -10  # half of e4m3's subnormal spacing (2^-9), in units of the block's scale
BIG_RANGE = st.integers(-12, 12)


def _spread(rows: int, k: int, block_rows: int, seed: int) -> torch.Tensor:
    """N(0, 1) entries times 2^e, e drawn in -12 .. 12 per (block_rows x 128) block, about 10 % exact zeros."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(rows, k, generator=g)
    e = torch.randint(-12, 13, (-(-rows // block_rows), k // BLOCK_K), generator=g).double()
    mult = (2.0 ** e).repeat_interleave(block_rows, 0)[:rows].repeat_interleave(BLOCK_K, 1)
    x = (x.double() * mult).float()
    x[torch.rand(rows, k, generator=g) < 0.1] = 0.0
    return x


def _within_e4m3(x: torch.Tensor, back: torch.Tensor, scale_per_entry: torch.Tensor):
    err = (back.double() - x.double()).abs()
    bound = REL * x.double().abs() + SUBNORMAL_HALF * scale_per_entry.double()
    bad = err > bound
    return int(bad.sum()), (err / x.double().abs().clamp_min(1e-30))[bad][:5].tolist()


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(m=st.integers(1, 200), kb=st.integers(1, 4), seed=st.integers(0, 2**31 - 1))
def test_quantize_rows_round_trip_is_within_e4m3_precision(m, kb, seed):
    x = _spread(m, kb * BLOCK_K, 1, seed)
    a, sa = workload.quantize_rows(x)
    assert a.dtype == torch.float8_e4m3fn and sa.dtype == torch.float32 and sa.shape == (m, kb)
    back = workload.dequantize_rows(a, sa)
    n_bad, worst = _within_e4m3(x, back, sa.repeat_interleave(BLOCK_K, 1))
    assert n_bad == 0, f"{n_bad} entries beyond 2^-4 relative; relative errors {worst}"
    assert torch.equal(back[x == 0], torch.zeros_like(back[x == 0]))   # zeros stay exact zeros
    assert torch.isfinite(back).all()


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(nb=st.integers(1, 3), kb=st.integers(1, 3), seed=st.integers(0, 2**31 - 1))
def test_quantize_blocks_round_trip_is_within_e4m3_precision(nb, kb, seed):
    w = _spread(nb * BLOCK_K, kb * BLOCK_K, BLOCK_K, seed)
    b, sb = workload.quantize_blocks(w)
    assert b.dtype == torch.float8_e4m3fn and sb.shape == (nb, kb)
    back = workload.dequantize_blocks(b, sb)
    scale = sb.repeat_interleave(BLOCK_K, 0).repeat_interleave(BLOCK_K, 1)
    n_bad, worst = _within_e4m3(w, back, scale)
    assert n_bad == 0, f"{n_bad} entries beyond 2^-4 relative; relative errors {worst}"
    assert torch.equal(back[w == 0], torch.zeros_like(back[w == 0]))


@given(e=BIG_RANGE)
@settings(max_examples=10, deadline=None)
def test_a_block_scale_is_its_amax_over_448_by_hand(e):
    x = _spread(3, 3 * BLOCK_K, 1, seed=e + 100)
    x[1, 128:256] *= 2.0 ** e
    a, sa = workload.quantize_rows(x)
    block = x[1, 128:256]
    amax = float(block.abs().max())
    assert sa[1, 1].item() == pytest.approx(amax / 448.0, rel=1e-7)
    assert float(torch.tensor(amax, dtype=torch.float32) / torch.tensor(448.0)) == sa[1, 1].item()
    i = int(block.abs().argmax())
    assert abs(a[1, 128 + i].float().item()) == E4M3_MAX             # the block's largest entry lands on 448

    w = _spread(256, 256, BLOCK_K, seed=e + 200)
    b, sb = workload.quantize_blocks(w)
    blk = w[128:256, 0:128]
    assert sb[1, 0].item() == float(torch.tensor(float(blk.abs().max())) / torch.tensor(448.0))
    r, c = divmod(int(blk.abs().argmax()), BLOCK_K)
    assert abs(b[128 + r, c].float().item()) == E4M3_MAX


def test_an_all_zero_block_gives_zeros_and_finite_scales():
    x = torch.randn(4, 3 * BLOCK_K)
    x[2, 128:256] = 0.0
    a, sa = workload.quantize_rows(x)
    assert torch.isfinite(sa).all() and (sa > 0).all()
    assert (a[2, 128:256].float() == 0).all()
    back = workload.dequantize_rows(a, sa)
    assert torch.isfinite(back).all() and (back[2, 128:256] == 0).all()
    assert sa[2, 1].item() == pytest.approx(workload.AMAX_FLOOR / 448.0)
    w = torch.randn(256, 256)
    w[:128, 128:] = 0.0
    b, sb = workload.quantize_blocks(w)
    assert torch.isfinite(sb).all() and (b[:128, 128:].float() == 0).all()
    assert torch.isfinite(workload.dequantize_blocks(b, sb)).all()
    x0 = torch.zeros(128, 128)                                        # everything zero: still no NaN
    assert torch.isfinite(workload.dequantize_rows(*workload.quantize_rows(x0))).all()


def test_the_reference_is_the_float64_block_by_block_sum():
    inp = workload.make_inputs((256, 256, 384), seed=3, device="cpu")
    a, sa, b, sb = inp["a"], inp["sa"], inp["b"], inp["sb"]
    ref = workload.reference(inp)
    assert ref.dtype == torch.float64 and ref.shape == (256, 256)
    hand = torch.zeros(256, 256, dtype=torch.float64)
    for kb in range(3):
        ks = slice(kb * BLOCK_K, (kb + 1) * BLOCK_K)
        part = a[:, ks].double() @ b[:, ks].double().T
        hand += part * sa[:, kb].double()[:, None] * sb[:, kb].double().repeat_interleave(BLOCK_K)[None, :]
    assert torch.allclose(ref, hand, rtol=1e-12, atol=1e-12)
    # one element as plain Python floats
    m, n = 17, 200
    s = sum(float(a[m, k].float()) * float(sa[m, k // 128]) * float(b[n, k].float()) * float(sb[n // 128, k // 128])
            for k in range(384))
    assert ref[m, n].item() == pytest.approx(s, rel=1e-12, abs=1e-12)


def test_make_inputs_keys_layouts_and_seeds():
    inp = workload.make_inputs((128, 256, 384), seed=5, device="cpu")
    assert set(inp) == {"a", "sa", "sa_t", "b", "sb"}
    assert inp["a"].shape == (128, 384) and inp["b"].shape == (256, 384)
    assert inp["sa"].shape == (128, 3) and inp["sb"].shape == (2, 3) and inp["sa_t"].shape == (3, 128)
    assert inp["sa_t"].is_contiguous() and torch.equal(inp["sa_t"], inp["sa"].t())
    again = workload.make_inputs((128, 256, 384), seed=5, device="cpu")
    other = workload.make_inputs((128, 256, 384), seed=6, device="cpu")
    assert torch.equal(inp["a"].view(torch.uint8), again["a"].view(torch.uint8))
    assert not torch.equal(inp["a"].view(torch.uint8), other["a"].view(torch.uint8))
    x, w = workload.make_unquantized((128, 256, 384), seed=5, device="cpu")
    assert torch.equal(workload.quantize_rows(x)[1], inp["sa"]) and torch.equal(workload.quantize_blocks(w)[1],
                                                                                  inp["sb"])


def test_scale_varied_inputs_spread_their_scales_block_to_block():
    # the rungs' scale tests: each row group's and block's scale its own power of two, 2^-6 .. 2^6 around make_inputs'
    shape = (256, 384, 1024)
    inp = workload.make_scale_varied_inputs(shape, seed=5, device="cpu")
    plain = workload.make_inputs(shape, seed=5, device="cpu")
    assert {k: v.shape for k, v in inp.items()} == {k: v.shape for k, v in plain.items()}
    assert inp["sa_t"].is_contiguous() and torch.equal(inp["sa_t"], inp["sa"].t())
    for s in (inp["sa"], inp["sb"]):
        e = torch.log2(s / s.median())
        assert float(e.max() - e.min()) >= 8  # blocks 2^8 or more apart: a scale from the wrong block is visible
    assert torch.equal(inp["sb"], workload.make_scale_varied_inputs(shape, seed=5, device="cpu")["sb"])
    assert not torch.equal(inp["sb"], workload.make_scale_varied_inputs(shape, seed=6, device="cpu")["sb"])
    with pytest.raises(ValueError, match="N = 130"):
        workload.make_scale_varied_inputs((128, 130, 128), 0, "cpu")


@pytest.mark.parametrize("call, match", [
    (lambda: workload.make_inputs((100, 128, 128), 0, "cpu"), "M = 100"),
    (lambda: workload.make_inputs((128, 130, 128), 0, "cpu"), "N = 130"),
    (lambda: workload.make_inputs((128, 128, 64), 0, "cpu"), "K = 64"),
    (lambda: workload.make_inputs((128, 128), 0, "cpu"), "shape must be"),
    (lambda: workload.make_inputs((0, 128, 128), 0, "cpu"), "M = 0"),
    (lambda: workload.quantize_rows(torch.randn(4, 100)), "x has shape"),
    (lambda: workload.quantize_rows(torch.randn(128)), "x must be a 2-D"),
    (lambda: workload.quantize_blocks(torch.randn(100, 128)), "w has shape"),
    (lambda: workload.quantize_blocks(torch.randn(128, 200)), "w has shape"),
    (lambda: workload.dequantize_rows(*_rows_with_bad_scale()), "scales of a"),
    (lambda: workload.flops((128, 128, 100)), "K = 100"),
])
def test_bad_shapes_raise_value_errors_naming_the_argument(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def _rows_with_bad_scale():
    a, sa = workload.quantize_rows(torch.randn(4, 256))
    return a, sa[:, :1]


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf")])
def test_nan_or_inf_in_the_input_raises(bad):
    x = torch.randn(8, 256)
    x[3, 7] = bad
    with pytest.raises(ValueError, match=r"x has 1 NaN/inf"):
        workload.quantize_rows(x)
    w = torch.randn(128, 128)
    w[0, 0] = bad
    with pytest.raises(ValueError, match=r"w has 1 NaN/inf"):
        workload.quantize_blocks(w)


def test_flops_and_bytes():
    m, n, k = 256, 384, 512
    assert workload.flops((m, n, k)) == 2 * m * n * k
    scales = 4 * (m * (k // 128) + (n // 128) * (k // 128))
    assert workload.bytes_moved((m, n, k)) == m * k + n * k + scales + 2 * m * n
    assert workload.BENCH_SHAPE == (8192, 8192, 8192)
    assert all(v % 128 == 0 for s in workload.TEST_SHAPES for v in s)
    assert any((s[2] // 128) % 4 for s in workload.TEST_SHAPES)      # a K the cuBLASLt scale padding matters for


# ------------------------------------------------------------------------------------------------ Triton
TRITON_CODE = """
import torch
from kernels.check import compare
from kernels.fp8_gemm import workload
from kernels.fp8_gemm.triton_fp8 import triton_fp8
from tests.test_fp8_gemm_workload import _spread
for shape in [(128, 128, 128), (256, 256, 384)]:
    m, n, k = shape
    a, sa = workload.quantize_rows(_spread(m, k, 1, seed=m + k))        # per-block magnitudes 2^-12 .. 2^12
    b, sb = workload.quantize_blocks(_spread(n, k, 128, seed=n * k))
    inp = {"a": a, "sa": sa, "sa_t": sa.t().contiguous(), "b": b, "sb": sb}
    out = torch.full((m, n), float("nan"), dtype=torch.bfloat16)
    triton_fp8(a, inp["sa_t"], b, sb, out=out)
    rep = compare(out, workload.reference(inp), rtol=8e-3)
    assert rep.ok, (shape, rep.message)
    print(shape, rep.rel_err)
print("ok")
"""


def test_triton_fp8_runs_in_the_interpreter_against_the_reference():
    env = dict(os.environ, TRITON_INTERPRET="1", PYTHONPATH=os.pathsep.join([str(ROOT), str(ROOT / "tests")]))
    r = subprocess.run([sys.executable, "-c", TRITON_CODE], env=env, cwd=ROOT, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), r.stdout[-2000:] + r.stderr[-3000:]


def test_triton_fp8_checks_its_arguments():
    inp = workload.make_inputs((128, 128, 256), seed=0, device="cpu")
    from kernels.fp8_gemm.triton_fp8 import triton_fp8

    with pytest.raises(ValueError, match="sa_t must be"):
        triton_fp8(inp["a"], inp["sa"], inp["b"], inp["sb"])          # sa (M, K/128) where sa_t (K/128, M) belongs
    with pytest.raises(ValueError, match="float8_e4m3fn"):
        triton_fp8(inp["a"].float(), inp["sa_t"], inp["b"], inp["sb"])


# ------------------------------------------------------------------------------------------------ baselines, CPU
def test_rowwise_from_blocks_is_exact_when_every_row_reaches_its_blocks_amax():
    x = torch.rand(128, 384) * 0.9
    x[:, ::128] = 1.0                                                  # every 1x128 block's amax is 1
    w = torch.rand(256, 384) * 0.9 - 0.45
    w[:, ::128] = -1.0                                                 # every row reaches its 128x128 blocks' amax, 1
    a, sa = workload.quantize_rows(x)
    b, sb = workload.quantize_blocks(w)
    a_r, sa_row, b_r, sb_row = baselines.rowwise_from_blocks(a, sa.t().contiguous(), b, sb)
    assert sa_row.shape == (128,) and sb_row.shape == (256,)
    assert torch.equal(a_r.float() * sa_row[:, None], workload.dequantize_rows(a, sa))
    assert torch.equal(b_r.float() * sb_row[:, None], workload.dequantize_blocks(b, sb))


def test_rowwise_from_blocks_stays_close_on_spread_blocks():
    inp = workload.make_inputs((128, 128, 512), seed=2, device="cpu")
    rows = baselines.rowwise_from_blocks(inp["a"], inp["sa_t"], inp["b"], inp["sb"])
    rel = float((baselines.rowwise_reference(*rows) - workload.reference(inp)).norm() / workload.reference(inp).norm())
    assert rel < 0.1     # requantizing adds e4m3 noise again: a few percent, not a wrong product


def test_torch_rowwise_scaled_mm_runs_on_cpu_against_its_reference():
    inp = workload.make_inputs((128, 256, 256), seed=4, device="cpu")
    rows = baselines.rowwise_from_blocks(inp["a"], inp["sa_t"], inp["b"], inp["sb"])
    try:
        out = baselines.cublaslt_rowwise(*rows)
    except (RuntimeError, NotImplementedError) as e:                  # a torch without a CPU scaled mm
        pytest.skip(f"this torch has no CPU rowwise scaled mm: {e}")
    rep = compare(out, baselines.rowwise_reference(*rows), rtol=baselines.CHECK_RTOL)
    assert out.dtype == torch.bfloat16 and rep.ok, rep.message


def test_cublaslt_blockwise_refuses_cpu_tensors_clearly():
    inp = workload.make_inputs((128, 128, 256), seed=0, device="cpu")
    with pytest.raises(baselines.Unsupported, match="sm_90 GPU"):
        baselines.cublaslt_blockwise(inp["a"], inp["sa_t"], inp["b"], inp["sb"])
    with pytest.raises(ValueError, match="sa_t must be"):
        baselines.cublaslt_blockwise(inp["a"], inp["sa"], inp["b"], inp["sb"])


def test_pad_k_blocks_gives_cublaslts_strided_layout():
    sb = torch.arange(2 * 5, dtype=torch.float32).view(2, 5)
    p = baselines.pad_k_blocks(sb)
    assert p.shape == (2, 8) and torch.equal(p[:, :5], sb) and p.t().stride() == (1, 8)
    assert baselines.pad_k_blocks(torch.ones(3, 4)).shape == (3, 4)


@pytest.mark.skipif(is_hopper(), reason="the CPU answer of supported()")
def test_supported_says_it_needs_an_sm90_gpu_on_cpu():
    res = baselines.supported()
    assert set(res) == set(baselines.RECIPES)
    assert all(not v["ok"] and v["why"].startswith("needs an sm_90 GPU") for v in res.values())
    assert all(r in baselines.describe() for r in baselines.RECIPES)


# ------------------------------------------------------------------------------------------------ accuracy
def test_fp8_accumulation_needs_promotion():
    rows = accuracy.fp8_accumulation_demo(rows=32, cols=32)
    assert [r["K"] for r in rows] == list(accuracy.DEMO_KS)
    raw = [r["rel_err_no_promotion"] for r in rows]
    promoted = [r["rel_err_promoted"] for r in rows]
    assert all(b > a for a, b in zip(raw, raw[1:])), raw             # grows with every K
    assert raw[-1] > 8 * raw[0], raw                                  # ~ linearly: 32x from 512 to 16384
    assert max(promoted) < 1.5 * min(promoted), promoted              # flat
    assert promoted[-1] < 0.1 * raw[-1] and max(promoted) < raw[0]
    assert raw[2] > 1e-3                                              # K = 4096: tenths of a percent, as reported


def test_truncate_mantissa_rounds_toward_zero_to_14_significant_bits():
    one_up = torch.tensor([1 + 2.0 ** -14, -(1 + 2.0 ** -13), 3.0, 0.0, 2.0 ** -40 * (1 + 2.0 ** -20)],
                          dtype=torch.float64)
    got = accuracy.truncate_mantissa(one_up, 13)
    assert got.tolist() == [1.0, -(1 + 2.0 ** -13), 3.0, 0.0, 2.0 ** -40]
    x = torch.randn(1000, dtype=torch.float64)
    assert (accuracy.truncate_mantissa(x).abs() <= x.abs()).all()


def test_accuracy_table_rows_on_cpu():
    def dequant_bf16(a, sa_t, b, sb):
        return (workload.dequantize_rows(a, sa_t.t()) @ workload.dequantize_blocks(b, sb).T).to(torch.bfloat16)

    def broken(a, sa_t, b, sb):
        raise baselines.Unsupported("not here")

    def nan(a, sa_t, b, sb):
        return torch.full((a.shape[0], b.shape[0]), float("nan"))

    rows = accuracy.accuracy_table({"dequant": dequant_bf16, "broken": broken, "nan": nan}, shape=(128, 128, 256),
                                   runs=2, device="cpu")
    by = {r["name"]: r for r in rows}
    assert by["dequant"]["runs"] == 2 and by["dequant"]["rel_err_vs_fp32"] < 8e-3
    assert 1e-2 < by["dequant"]["rel_err_vs_unquantized"] < 0.1       # e4m3's cost: a few percent
    assert by["dequant"]["max_abs_err"] > 0
    assert "Unsupported: not here" in by["broken"]["error"]
    assert by["nan"]["rel_err_vs_fp32"] == float("inf")
    assert "rel_err_vs_fp32" in accuracy.format_rows(rows)


# ------------------------------------------------------------------------------------------------ GPU
GPU_SHAPES = [(256, 256, 512), (384, 640, 640)]


@requires_hopper
@pytest.mark.parametrize("shape", GPU_SHAPES)
def test_cublaslt_blockwise_matches_the_reference(shape):
    inp = workload.make_inputs(shape, seed=11)
    out = baselines.cublaslt_blockwise(inp["a"], inp["sa_t"], inp["b"], inp["sb"])
    rep = compare(out, workload.reference(inp), rtol=baselines.CHECK_RTOL)
    assert out.dtype == torch.bfloat16 and rep.ok, rep.message


@requires_hopper
@pytest.mark.parametrize("shape", GPU_SHAPES)
def test_triton_fp8_matches_the_reference(shape):
    from kernels.fp8_gemm.triton_fp8 import triton_fp8

    inp = workload.make_inputs(shape, seed=12)
    out = torch.full(shape[:2], float("nan"), dtype=torch.bfloat16, device="cuda")
    triton_fp8(inp["a"], inp["sa_t"], inp["b"], inp["sb"], out=out)
    rep = compare(out, workload.reference(inp), rtol=baselines.CHECK_RTOL)
    assert rep.ok, rep.message


@requires_hopper
@pytest.mark.parametrize("fast_accum", [False, True])
def test_cublaslt_rowwise_matches_its_reference(fast_accum):
    inp = workload.make_inputs((256, 256, 512), seed=13)
    rows = baselines.rowwise_from_blocks(inp["a"], inp["sa_t"], inp["b"], inp["sb"])
    out = baselines.cublaslt_rowwise(*rows, fast_accum=fast_accum)
    rep = compare(out, baselines.rowwise_reference(*rows), rtol=baselines.CHECK_RTOL)
    assert rep.ok, rep.message


@requires_hopper
def test_supported_names_each_recipe_on_the_gpu():
    res = baselines.supported()
    assert set(res) == set(baselines.RECIPES)
    assert all(v["why"] for v in res.values())
    assert res["triton_fp8"]["ok"], res["triton_fp8"]["why"]
    if baselines._cuda_at_least(12, 9):
        assert res["cublaslt_blockwise"]["ok"] and res["cublaslt_rowwise"]["ok"], res


# ------------------------------------------------------------------------------------------ the claim's rounds
def test_the_rounds_table_prints_every_candidate_its_interval_and_who_was_not_compared():
    """rounds.table on a comparison of fake timers (kernels.compare, as ladder_rounds builds it): every candidate's
    TFLOPS, accuracy, clock and what its interval supports against the baseline; a baseline that did not run here
    is named with its reason."""
    import random

    from kernels.compare import interleaved
    from kernels.fp8_gemm import rounds

    rng = random.Random(3)
    speed = {"block_scaled": 1.0, "cublaslt_blockwise": 0.8, "cublas_bf16": 1.6}  # ms at 8192^3
    cmp = interleaved({n: (lambda ms=ms: ms * (1 + 0.01 * rng.random())) for n, ms in speed.items()}, rounds=18)
    work = workload.flops(workload.BENCH_SHAPE)
    doc = {"shape": list(workload.BENCH_SHAPE), "rounds": 18, "baseline": "cublaslt_blockwise", "device": "NVIDIA H200",
           "skipped": {"triton_fp8": "needs an sm_90 GPU: test"},
           "kernels": {n: [f"{n}_kernel"] for n in speed}, "accuracy": {n: 1.6e-3 for n in speed},
           "tflops": {n: work / (cmp.median_ms(n) * 1e-3) / 1e12 for n in speed},
           "sm_mhz": {n: 1755.0 for n in speed},
           "ratios": {n: cmp.ratio(n, "cublaslt_blockwise").to_dict() for n in speed if n != "cublaslt_blockwise"}}
    text = rounds.table(doc)
    assert "NVIDIA H200: FP8 GEMM 8192x8192x8192, 18 interleaved rounds, baseline cublaslt_blockwise" in text
    assert doc["ratios"]["block_scaled"]["says"].startswith("behind") and doc["ratios"]["block_scaled"]["says"] in text
    assert doc["ratios"]["cublas_bf16"]["says"].startswith("behind")
    assert "(the baseline)" in text and "triton_fp8           not compared: needs an sm_90 GPU: test" in text
    assert all(f"{n}_kernel" in text for n in speed)
    assert f"{doc['tflops']['block_scaled']:7.1f}" in text
