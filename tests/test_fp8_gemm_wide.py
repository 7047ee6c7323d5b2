"""Week 3 day 1 (fp8_gemm), rung 2 (r2_wide.cu, kernels/fp8_gemm/launch.py gemm_fp8_wide): 128 x 256 tiles, a
persistent grid walked in groups of tile rows.

On CPU: the kernel compiles for sm_90a with no ptxas advisory; its SASS holds the FP8 tensor-core MMA in two halves of
m64n128k32 per k-block (nvdisasm's QGMMA.64x128x32.F32.E4M3.E4M3, 8 of them), the 4 TMA loads of a stage (A, B's two
boxes, sa), the promotion's FFMAs, the plain bf16x2 stores; no HGMMA, no cp.async, no spills — every opcode the
file's header names, read from the header itself; its registers fit setmaxnreg's 232, its shared memory 227 KiB; the
launcher's constants match the source; the grouped walk covers every tile once; gemm_fp8_wide refuses bad inputs on
CPU tensors, naming the argument, before anything touches a GPU. On an sm_90 GPU: gemm_fp8_wide against
workload.reference (output poisoned with NaN: every element must be written), with half tiles (N % 256 == 128), with
few CTAs (each walking many tiles, the ring running on across them), and with scales that differ block to block.
"""

from __future__ import annotations

import re
import sys
from collections import Counter
from pathlib import Path

import pytest
import torch

from conftest import requires_hopper
from kernels.compile import ARCH, COURSE_INCLUDE, CompileError, advisories, compile_cuda, kernel_file
from kernels.fp8_gemm import launch as fp8
from kernels.gemm.occupancy import SMEM_PER_BLOCK, sass_registers, static_smem
from kernels.sass import opcodes
from kernels.sass import family_count as _n  # an opcode's family, counted

ROOT = Path(__file__).resolve().parents[1]
SOURCE = kernel_file("fp8_gemm", "r2_wide.cu")
F8 = torch.float8_e4m3fn
RTOL = 2e-3  # rung 1's bound (tests/test_fp8_gemm_kernel.py: the bf16 rounding of D is ~ 1.7e-3 of it)
CONSUMER_REGS = 232  # setmaxnreg.inc of the consumer warpgroups


@pytest.fixture(scope="module")
def ops() -> Counter:
    return Counter(opcodes(fp8.wide_cubin(), fp8.WIDE_KERNEL))


# ------------------------------------------------------------------------------------------------ compile and SASS
def test_the_kernel_compiles_for_sm90a_without_a_ptxas_advisory():
    cub = fp8.wide_cubin()
    assert ARCH == "sm_90a" and fp8.WIDE_KERNEL in cub.kernels
    assert advisories(cub) == [], advisories(cub)  # no serialized wgmma, no ignored setmaxnreg


def test_the_sass_holds_two_halves_of_fp8_wgmma_the_loads_and_the_promotion(ops):
    # one k-block: 2 halves x 4 k32 steps, unrolled once in the mainloop; no 256-wide fragment (it does not fit)
    assert ops["QGMMA.64x128x32.F32.E4M3.E4M3"] == 8, sorted(k for k in ops if "GMMA" in k)
    assert _n(ops, "QGMMA") == 8 and _n(ops, "HGMMA") == 0
    assert ops["WARPGROUP.ARRIVE"] == 2 and _n(ops, "WARPGROUP.DEPBAR") == 2  # a fence and a wait<0> per half
    assert ops["UTMALDG.2D"] == 4  # A, B rows 0..127, B rows 128..255 (a wide tile only), sa: on one barrier
    assert _n(ops, "LDGSTS") == 0
    assert ops["FFMA"] >= 128  # the promotion: one FFMA per accumulator register per k-block
    # the epilogue: 128 fp32 of a thread's (64, 256) rows -> 64 bf16 pairs, each one 4-byte store straight to D
    assert ops["F2FP.BF16.F32.PACK_AB"] == fp8.WIDE_BN // 4 and ops["STG.E"] == fp8.WIDE_BN // 4
    assert _n(ops, "STG") == fp8.WIDE_BN // 4
    assert [op for op in ("STSM", "STS", "UTMASTG", "UTMACMDFLUSH") if _n(ops, op)] == []
    assert ops["SYNCS.EXCH.64"] == 2 * fp8.WIDE_STAGES  # mbarrier.init of full[s] and empty[s]
    assert ops["SYNCS.ARRIVE.TRANS64"] >= 1 and ops["SYNCS.ARRIVE.TRANS64.A1T0"] >= 1
    assert ops["SYNCS.PHASECHK.TRANS64.TRYWAIT"] >= 2
    assert _n(ops, "USETMAXREG") == 2 and ops["ELECT"] >= 1
    assert _n(ops, "LDL") == 0 and _n(ops, "STL") == 0  # no spills


def test_the_registers_fit_the_consumers_setmaxnreg():
    # acc[128] + tmp[64] + addresses and scales, under the 232 of setmaxnreg.inc (and no spill: the test above)
    regs = sass_registers(fp8.wide_cubin(), fp8.WIDE_KERNEL)
    assert 192 < regs <= CONSUMER_REGS, regs
    assert 128 * 40 + 2 * 128 * CONSUMER_REGS <= 65536  # the block's register pool balances


# The header's SASS paragraph against the SASS, and that the check can fail: tests/test_fp8_gemm_kernel.py
# (RUNG_HEADERS, one check for the three rungs).


def test_the_launcher_constants_and_the_byte_budget_match_the_source():
    text = SOURCE.read_text()
    assert int(re.search(r"#define FP8_STAGES (\d+)", text).group(1)) == fp8.WIDE_STAGES == 4
    assert int(re.search(r"#define FP8_GROUP_M (\d+)", text).group(1)) == fp8.WIDE_GROUP_M
    assert "constexpr int BM = 128, BN = 256, BK = 128, STAGES = FP8_STAGES;" in text
    assert (fp8.BM, fp8.WIDE_BN, fp8.BK, fp8.THREADS) == (128, 256, 128, 384) and "__launch_bounds__(384, 1)" in text
    assert 'extern "C" __global__' in text and f"{fp8.WIDE_KERNEL}(" in text
    # expect-tx: A + two B boxes + the row scales; a half tile one B box (rung 1's 33280)
    assert fp8.WIDE_STAGE_TX == 49664 == 16384 * 3 + 512 and "= 49664 bytes" in text and "33280" in text
    # 4 stages fit 227 KiB with the cubin's static bytes and the 1 KiB the system reserves; 5 do not
    static = static_smem(fp8.wide_cubin(), fp8.WIDE_KERNEL)
    assert fp8.wide_smem_bytes() == 199680 == 1024 + 4 * 49152 + 2048 and f"({fp8.wide_smem_bytes()} B;" in text
    assert fp8.wide_smem_bytes() + static <= SMEM_PER_BLOCK == 227 * 1024, static
    assert fp8.wide_smem_bytes(5) > SMEM_PER_BLOCK and f"{fp8.wide_smem_bytes(5)} B, over" in text


def test_a_shallower_ring_builds_and_a_deeper_one_is_refused():
    ops3 = Counter(opcodes(fp8.wide_cubin(stages=3), fp8.WIDE_KERNEL))
    assert ops3["SYNCS.EXCH.64"] == 6 and ops3["QGMMA.64x128x32.F32.E4M3.E4M3"] == 8 and _n(ops3, "LDL") == 0
    with pytest.raises(ValueError, match="^stages: got 5, needs 2 .. 4"):
        fp8.wide_cubin(stages=5)
    with pytest.raises(CompileError, match="FP8_STAGES: 2..4"):  # the source's own static_assert, past the launcher
        compile_cuda(SOURCE, defines={"FP8_STAGES": 5})


def _tile_coords(t: int, tiles_m: int, tiles_n: int, group: int) -> tuple[int, int]:
    """r2_wide.cu's tile_coords in Python (the test below holds the source to the same lines)."""
    per_group = group * tiles_n
    g = t // per_group
    first = g * group
    rows = min(group, tiles_m - first)
    r = t - g * per_group
    return (first + r % rows) * 128, (r // rows) * 256


def test_the_grouped_walk_covers_every_tile_once():
    text = SOURCE.read_text()
    for line in ("grouped_order(t, tiles_m, tiles_n, GROUP_M, i, j);", "m0 = i * BM;", "n0 = j * BN;"):
        assert line in text, line
    shared = (COURSE_INCLUDE / "block_scaled.cuh").read_text()  # the grouped order rungs 2 and 3 share
    for line in ("const int per_group = group * units_n, g = t / per_group, first = g * group;",
                 "const int rows = min(group, units_m - first), r = t - g * per_group;",
                 "row = first + r % rows;", "col = r / rows;"):
        assert line in shared, line
    for m, n in ((128, 128), (384, 640), (2304, 640), (8192, 8192), (4096, 1408)):
        tiles_m, tiles_n = m // 128, -(-n // 256)
        for group in (1, 16):
            seen = [_tile_coords(t, tiles_m, tiles_n, group) for t in range(tiles_m * tiles_n)]
            assert sorted(seen) == [(i * 128, j * 256) for i in range(tiles_m) for j in range(tiles_n)], (m, n, group)
    # 8192^3: 64 x 32 tiles; the first 132 (one wave) span 16 tile rows and 9 tile columns
    first_wave = {_tile_coords(t, 64, 32, 16) for t in range(132)}
    assert {m0 for m0, _ in first_wave} == {128 * i for i in range(16)} and len({n0 for _, n0 in first_wave}) == 9


def test_the_grid_is_persistent():
    assert fp8.wide_tiles((8192, 8192, 8192)) == 2048 and fp8.wide_grid((8192, 8192, 8192), 132) == (132,)
    assert fp8.wide_tiles((384, 640, 128)) == 9 and fp8.wide_grid((384, 640, 128), 132) == (9,)  # 3 x (2 + a half)
    with pytest.raises(ValueError, match="^sms: got 0"):
        fp8.wide_grid((128, 128, 128), 0)


def test_no_cuda_function_of_the_rung_is_over_120_lines():
    sys.path.insert(0, str(ROOT / "tools"))
    import structure  # tools/structure.py: the course's measure (tests/test_structure.py), loaded by path

    assert structure.cuda_functions(SOURCE.read_text(), limit=120) == []


# ------------------------------------------------------------------------------------------------ input checks (CPU)
def _valid(m=256, n=384, k=512):
    return {"a": torch.zeros(m, k).to(F8), "sa_t": torch.ones(k // 128, m), "b": torch.zeros(n, k).to(F8),
            "sb": torch.ones(n // 128, k // 128)}


@pytest.mark.parametrize("case, arg, words", [
    ("bf16", "a", "torch.bfloat16, needs torch.float8_e4m3fn"),
    ("M=100", "a", "M = 100"),
    ("N=200", "b", "N = 200"),
    ("sa_t shape", "sa_t", "got shape (256, 4), needs (4, 256)"),
    ("sb shape", "sb", "got shape (4, 3), needs (3, 4)"),
    ("b's K", "b", "K = 512"),
    ("misaligned b", "b", "16-byte"),
    ("out dtype", "out", "torch.float32, needs torch.bfloat16"),
])
def test_gemm_fp8_wide_refuses_bad_inputs_on_the_cpu_naming_the_argument(monkeypatch, case, arg, words):
    def no_gpu(*a, **k):
        raise AssertionError("gemm_fp8_wide reached the GPU before its checks refused the inputs")

    for name in ("launch", "cached_tensor_map", "wide_cubin", "sm_count"):
        monkeypatch.setattr(fp8, name, no_gpu)
    x, out = _valid(), None
    if case == "bf16":
        x["a"] = x["a"].to(torch.bfloat16)
    elif case == "M=100":
        x = _valid(m=100, n=128, k=128)
    elif case == "N=200":
        x["b"], x["sb"] = torch.zeros(200, 512).to(F8), torch.ones(1, 4)
    elif case == "sa_t shape":
        x["sa_t"] = torch.ones(256, 4)
    elif case == "sb shape":
        x["sb"] = torch.ones(4, 3)
    elif case == "b's K":
        x["b"] = torch.zeros(384, 256).to(F8)
    elif case == "misaligned b":
        x["b"] = torch.zeros(384 * 512 + 8, dtype=torch.uint8)[8:].view(F8).view(384, 512)
    elif case == "out dtype":
        out = torch.empty(256, 384)
    with pytest.raises(ValueError, match=rf"^{re.escape(arg)}: ") as err:
        fp8.gemm_fp8_wide(x["a"], x["sa_t"], x["b"], x["sb"], out=out)
    assert words in str(err.value), str(err.value)


def test_valid_cpu_inputs_are_refused_for_being_on_the_cpu(monkeypatch):
    monkeypatch.setattr(fp8, "launch", lambda *a, **k: pytest.fail("launched with CPU tensors"))
    x = _valid()  # N = 384: a wide tile and a half tile, accepted
    with pytest.raises(ValueError, match="on the CPU, needs CUDA tensors: gemm_fp8_wide"):
        fp8.gemm_fp8_wide(x["a"], x["sa_t"], x["b"], x["sb"])


# ------------------------------------------------------------------------------------------------ on an sm_90 GPU
def _check(inputs: dict, **kw):
    from kernels.check import compare, poison  # imports torch's CUDA side: GPU tests only
    from kernels.fp8_gemm import workload  # the day's workload (reference), used by the GPU tests only

    m, n = inputs["a"].shape[0], inputs["b"].shape[0]
    out = poison(torch.empty(m, n, dtype=torch.bfloat16, device="cuda"))
    got = fp8.gemm_fp8_wide(inputs["a"], inputs["sa_t"], inputs["b"], inputs["sb"], out=out, **kw)
    torch.cuda.synchronize()
    assert got is out
    assert int(torch.isnan(out).sum()) == 0, "elements of D left unwritten (still the NaN poison)"
    report = compare(out, workload.reference(inputs), rtol=RTOL)
    assert report.ok, report.message


@requires_hopper
@pytest.mark.parametrize("shape", [
    (256, 256, 128),     # one tile row, one wide tile column, one k-block
    (384, 512, 640),     # 5 k-blocks: the ring of 4 wraps inside a tile
    (1024, 768, 1152),   # 9 k-blocks, 24 tiles
    (2048, 2048, 4096),  # 128 tiles: one wave of the persistent grid on 132 SMs
    (256, 384, 512),     # N % 256 == 128: a wide tile and a half tile per tile row
    (640, 640, 1152),    # half tiles, 5 tile rows
])
def test_gemm_fp8_wide_matches_the_reference(shape):
    from kernels.fp8_gemm import workload  # the day's workload (inputs), used by the GPU tests only

    _check(workload.make_inputs(shape, seed=2))


@requires_hopper
@pytest.mark.parametrize("shape, sms", [
    ((2304, 640, 640), 5),  # 18 x 3 tiles (two groups of tile rows: 16 + 2; half tiles) on 5 CTAs: ~ 11 tiles each
    ((512, 512, 384), 1),   # one CTA walks all 8 tiles: 3 k-blocks a tile, so the ring's parity changes mid-tile
])
def test_few_ctas_walk_many_tiles(shape, sms):
    from kernels.fp8_gemm import workload  # the day's workload (inputs), used by the GPU tests only

    _check(workload.make_inputs(shape, seed=3), sms=sms)


@requires_hopper
def test_every_scale_lands_on_its_block():
    # scales that differ by powers of two from block to block (rows of A, 128-column k-blocks, 128 x 128 blocks of B
    # — both halves of a wide tile, and a half tile): a scale read for the wrong row, k-block or half is off by 2x
    from kernels.fp8_gemm import workload  # the day's workload (quantizers), used by the GPU tests only

    inputs = workload.make_scale_varied_inputs((256, 640, 1024), seed=5)
    _check(inputs)
