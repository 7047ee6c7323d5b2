"""Week 3 day 1 (fp8_gemm), rung 4 (r4_overlap.cu, kernels/fp8_gemm/launch.py gemm_fp8_overlap): rung 1's 128 x 128
tiles walked persistently in rung 2's grouped order, each consumer promoting one k-block while its own wgmmas of the
next run (two promotion fragments, wgmma_wait<1>).

On CPU: the kernel compiles for sm_90a with no ptxas advisory (no serialized wgmma), and a rolling variant with a
fragment in flight across the k-loop's back-edge does draw one (C7514: the reason the header gives for a k-loop by
steps with nothing in flight at the back-edge); the SASS holds 4 QGMMA.64x128x32 per k-block of code (the body's 16,
the tail's 8 + 4 + 2 + 1), the overlapped retirements (WARPGROUP.DEPBAR.LE gsb0, 0x1) beside one full one (0x0) per
step, the promotion's FFMAs, the bf16x2 stores, no HGMMA and no spills; registers within setmaxnreg's 232, shared
memory within 227 KiB; the launcher's constants match the source; the grid is persistent and the walk covers every
tile once; gemm_fp8_overlap refuses bad inputs on CPU tensors, naming the argument, before anything touches a GPU; a
student release leaves the source out and says so. On an sm_90 GPU: against workload.reference (output poisoned with
NaN, guard rows), K / 128 not a multiple of 16 (every step of the tail), other steps of the k-loop, few CTAs walking
many tiles (the ring's count across tiles), scales that differ block to block, and bit for bit against rung 1 (the
same tiles, the same order of k-blocks and promotions).
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
from kernels.sass import disassemble, opcodes
from kernels.sass import family_count as _n  # an opcode's family, counted

ROOT = Path(__file__).resolve().parents[1]
SOURCE = kernel_file("fp8_gemm", "r4_overlap.cu", left_out=fp8.LEFT_OUT_RUNG4)
F8 = torch.float8_e4m3fn
RTOL = 2e-3  # rung 1's bound (tests/test_fp8_gemm_kernel.py: the bf16 rounding of D is ~ 1.7e-3 of it)
CONSUMER_REGS = 232  # setmaxnreg.inc of the consumer warpgroups


@pytest.fixture(scope="module")
def ops() -> Counter:
    return Counter(opcodes(fp8.overlap_cubin(), fp8.OVERLAP_KERNEL))


# ------------------------------------------------------------------------------------------------ compile and SASS
def test_the_kernel_compiles_for_sm90a_without_a_ptxas_advisory():
    cub = fp8.overlap_cubin()
    assert ARCH == "sm_90a" and fp8.OVERLAP_KERNEL in cub.kernels
    assert advisories(cub) == [], advisories(cub)  # no serialized wgmma, no ignored setmaxnreg


def _rolling_variant() -> str:
    """r4_overlap.cu with the k-loop the header says ptxas cannot prove: t0 issued before the loop and still in
    flight at its back-edge (issue kb + 1, retire kb, around the loop; compiled only, never run), built from the same
    issue() and retire() of promote_overlap.cuh — the header inlined, its overlap_consumer calling the rolling loop."""
    src, shared = SOURCE.read_text(), (COURSE_INCLUDE / "promote_overlap.cuh").read_text()
    call = "overlap_tile<UNROLL>(acc, r, release,"
    assert shared.count(call) == 1 and src.count('#include "promote_overlap.cuh"') == 1
    rolling = """template <class Ring, class Release>
__device__ __forceinline__ void rolling_tile(float (&acc)[64], const Ring& r, Release& release,
                                             const float* __restrict__ sb_row, int c, int kblocks, unsigned& it) {
    const int row = 64 * c + 16 * warp_index_in_warpgroup() + lane_index() / 4;
    float t[2][64], lo[2], hi[2];
    for (int i = 0; i < 64; ++i) acc[i] = 0.f;
    int kb = 0;
    issue(t[0], r, sb_row, c, row, 0, it, lo[0], hi[0]);
    for (; kb + 2 < kblocks; kb += 2, it += 2) {
        issue(t[1], r, sb_row, c, row, kb + 1, it + 1, lo[1], hi[1]);
        retire<1>(acc, t[0], r, release, it, lo[0], hi[0]);
        issue(t[0], r, sb_row, c, row, kb + 2, it + 2, lo[0], hi[0]);
        retire<1>(acc, t[1], r, release, it + 1, lo[1], hi[1]);
    }
    issue(t[1], r, sb_row, c, row, kb + 1, it + 1, lo[1], hi[1]);
    retire<1>(acc, t[0], r, release, it, lo[0], hi[0]);
    retire<0>(acc, t[1], r, release, it + 1, lo[1], hi[1]);
    it += 2;
}

"""
    at = shared.index("// Consumer c of a CTA that walks")
    variant = shared[:at] + rolling + shared[at:].replace(call, "rolling_tile(acc, r, release,")
    return src.replace('#include "promote_overlap.cuh"', variant.replace("#pragma once", ""))


def test_a_fragment_in_flight_across_the_back_edge_draws_the_serialization_advisory():
    # the header's reason for the 4-k-block body, measured: the same kernel with a rolling pipeline is serialized
    found = advisories(compile_cuda(_rolling_variant(), name="r4_overlap_rolling.cu"))
    assert any(a.startswith("C7514") and "serialized" in a for a in found), found


def _steps(unroll: int) -> list[int]:
    """The steps of k-blocks r4_overlap.cu has code for: the body's (unroll) and the tail's (unroll / 2, ..., 1)."""
    return [unroll >> i for i in range(unroll.bit_length())]


def test_the_sass_holds_the_overlapped_retirements_the_fp8_wgmma_and_the_promotion(ops):
    steps = _steps(fp8.OVERLAP_UNROLL)  # 16, 8, 4, 2, 1: 31 k-blocks of code
    assert ops["QGMMA.64x128x32.F32.E4M3.E4M3"] == 4 * sum(steps) == 124, sorted(k for k in ops if "GMMA" in k)
    assert _n(ops, "QGMMA") == 4 * sum(steps) and _n(ops, "HGMMA") == 0
    assert ops["WARPGROUP.ARRIVE"] == sum(steps)  # a fence before each k-block's 4 wgmmas
    # each step of u k-blocks: wait<1> u - 1 times (promote kb while kb + 1 runs), then wait<0> once
    assert _waits(fp8.overlap_cubin()) == {"0x1": sum(steps) - len(steps), "0x0": len(steps)} == {"0x1": 26, "0x0": 5}
    assert ops["UTMALDG.2D"] == 3 and _n(ops, "UTMALDG") == 3 and _n(ops, "LDGSTS") == 0  # A, B, sa
    assert ops["FFMA"] >= 64 * sum(steps)  # the promotion: one FFMA per fragment register per k-block
    assert ops["F2FP.BF16.F32.PACK_AB"] == ops["STG.E"] == _n(ops, "STG") == 32  # rung 1's epilogue
    assert [op for op in ("STSM", "STS", "UTMASTG", "UTMACMDFLUSH") if _n(ops, op)] == []
    assert ops["SYNCS.EXCH.64"] == 2 * fp8.OVERLAP_STAGES  # mbarrier.init of full[s] and empty[s]
    assert ops["SYNCS.ARRIVE.TRANS64.A1T0"] == sum(steps)  # a release per retirement
    assert _n(ops, "USETMAXREG") == 2 and ops["ELECT"] >= 1
    assert _n(ops, "LDL") == 0 and _n(ops, "STL") == 0  # no spills


def _waits(cub) -> Counter:
    """The wgmma waits of the kernel's SASS by how many groups each leaves in flight (WARPGROUP.DEPBAR.LE gsb0, N)."""
    waits = [i.text for i in disassemble(cub)[fp8.OVERLAP_KERNEL] if "WARPGROUP.DEPBAR" in i.text]
    assert all(w.startswith("WARPGROUP.DEPBAR.LE gsb0, 0x") for w in waits), waits
    return Counter(w.split()[-1] for w in waits)


@pytest.mark.parametrize("unroll", [2, 4, 8])
def test_another_step_of_the_k_loop_overlaps_all_but_one_promotion_of_each(unroll):
    cub = fp8.overlap_cubin(unroll=unroll)
    ops_u = Counter(opcodes(cub, fp8.OVERLAP_KERNEL))
    assert advisories(cub) == [] and _n(ops_u, "LDL") == 0 and _n(ops_u, "STL") == 0  # fragments stay registers
    steps = _steps(unroll)
    assert ops_u["QGMMA.64x128x32.F32.E4M3.E4M3"] == 4 * sum(steps) == 4 * (2 * unroll - 1)
    assert _waits(cub) == {"0x1": sum(steps) - len(steps), "0x0": len(steps)}


def test_the_registers_fit_the_consumers_setmaxnreg():
    regs = sass_registers(fp8.overlap_cubin(), fp8.OVERLAP_KERNEL)
    assert 192 <= regs <= CONSUMER_REGS, regs  # acc + t0 + t1 = 192 fp32 a thread, and the addressing
    assert 128 * 40 + 2 * 128 * CONSUMER_REGS <= 65536


# The header's SASS paragraph against the SASS, and that the check can fail: tests/test_fp8_gemm_kernel.py
# (RUNG_HEADERS, one check for every rung).


def test_the_launcher_constants_and_the_byte_budget_match_the_source():
    text = SOURCE.read_text()
    assert int(re.search(r"#define FP8_STAGES (\d+)", text).group(1)) == fp8.OVERLAP_STAGES == fp8.STAGES == 6
    assert int(re.search(r"#define FP8_GROUP_M (\d+)", text).group(1)) == fp8.OVERLAP_GROUP_M
    assert int(re.search(r"#define FP8_UNROLL (\d+)", text).group(1)) == fp8.OVERLAP_UNROLL == 16
    shared = (COURSE_INCLUDE / "promote_overlap.cuh").read_text()
    assert "constexpr int UNROLL = FP8_UNROLL;" in text and "UNROLL <= 64" in shared and fp8.OVERLAP_MAX_UNROLL == 64
    assert "constexpr int BM = 128, BN = 128, BK = 128, STAGES = FP8_STAGES;" in text and fp8.BM == fp8.BN == 128
    assert "static_assert(STAGES >= 3" in text and fp8.OVERLAP_MIN_STAGES == 3
    assert "__launch_bounds__(384, 1)" in text and fp8.THREADS == 384
    assert 'extern "C" __global__' in text and f"{fp8.OVERLAP_KERNEL}(" in text
    assert "= 33280 bytes" in text and "init count 8" in text
    assert fp8.smem_bytes(fp8.OVERLAP_STAGES) == 200704 and "= 200704 B" in text
    static = static_smem(fp8.overlap_cubin(), fp8.OVERLAP_KERNEL)
    assert fp8.smem_bytes(fp8.OVERLAP_STAGES) + static <= SMEM_PER_BLOCK == 227 * 1024, static


def test_a_shallower_ring_builds_and_bad_builds_are_refused():
    ops3 = Counter(opcodes(fp8.overlap_cubin(stages=3), fp8.OVERLAP_KERNEL))
    assert ops3["SYNCS.EXCH.64"] == 6 and ops3["QGMMA.64x128x32.F32.E4M3.E4M3"] == 124 and _n(ops3, "LDL") == 0
    for stages in (2, 7):
        with pytest.raises(ValueError, match=f"^stages: got {stages}, needs 3 .. 6"):
            fp8.overlap_cubin(stages=stages)
    with pytest.raises(ValueError, match="^group_m: got 0, needs at least 1"):
        fp8.overlap_cubin(group_m=0)
    for unroll in (1, 6, 128):
        with pytest.raises(ValueError, match=f"^unroll: got {unroll}, needs a power of two, 2 .. 64"):
            fp8.overlap_cubin(unroll=unroll)
    for unroll in (1, 6):
        with pytest.raises(CompileError, match="FP8_UNROLL: a power of two, 2..64"):
            compile_cuda(SOURCE, defines={"FP8_UNROLL": unroll})
    with pytest.raises(CompileError, match="FP8_STAGES: 3..6"):  # the source's own static_assert, past the launcher
        compile_cuda(SOURCE, defines={"FP8_STAGES": 2})


def _tile_coords(t: int, tiles_m: int, tiles_n: int, group: int) -> tuple[int, int]:
    """block_scaled.cuh's grouped_order in Python over 128 x 128 tiles (the test below holds the source to it)."""
    per_group = group * tiles_n
    g = t // per_group
    first = g * group
    rows = min(group, tiles_m - first)
    r = t - g * per_group
    return (first + r % rows) * 128, (r // rows) * 128


def test_the_persistent_walk_covers_every_tile_once():
    text = SOURCE.read_text()
    shared = (COURSE_INCLUDE / "promote_overlap.cuh").read_text()  # the producer and consumer rungs 4 and 6 share
    # overlap_producer's walk and overlap_consumer's: the same tiles in the same order
    assert shared.count("grouped_order(t, tiles_m, tiles_n, GROUP_M, i, j);") == 2
    assert shared.count("for (int t = blockIdx.x; t < tiles; t += gridDim.x)") == 2
    assert "const int m0 = i * BM, n0 = j * BN;" in shared and "epilogue(acc, i * 128 + 64 * c, j * 128);" in shared
    assert "overlap_producer<Ring, GROUP_M>(" in text and "overlap_consumer<UNROLL, GROUP_M>(" in text
    shared = (COURSE_INCLUDE / "block_scaled.cuh").read_text()
    for line in ("const int per_group = group * units_n, g = t / per_group, first = g * group;",
                 "const int rows = min(group, units_m - first), r = t - g * per_group;",
                 "row = first + r % rows;", "col = r / rows;"):
        assert line in shared, line
    for (m, n), grid in (((128, 128), 1), ((384, 640), 3), ((2304, 640), 7), ((8192, 8192), 132), ((1152, 384), 5)):
        tiles_m, tiles_n = m // 128, n // 128
        for group in (1, 16):
            # CTA b takes tiles b, b + grid, ...: together every tile exactly once
            seen = [_tile_coords(t, tiles_m, tiles_n, group) for b in range(grid)
                    for t in range(b, tiles_m * tiles_n, grid)]
            assert sorted(seen) == [(i * 128, j * 128) for i in range(tiles_m) for j in range(tiles_n)], (m, n, group)


def test_the_grid_is_persistent():
    assert fp8.overlap_grid((8192, 8192, 8192), 132) == (132,)  # 4096 tiles on 132 SMs
    assert fp8.overlap_grid((384, 640, 128), 132) == (15,)  # 3 x 5 tiles: one CTA each
    assert fp8.overlap_grid((128, 128, 128), 132) == (1,)
    for sms in (0, -1):
        with pytest.raises(ValueError, match=f"^sms: got {sms}, needs at least 1"):
            fp8.overlap_grid((256, 256, 128), sms)


def test_no_cuda_function_of_the_rung_is_over_120_lines():
    sys.path.insert(0, str(ROOT / "tools"))
    import structure  # tools/structure.py: the course's measure (tests/test_structure.py), loaded by path

    assert structure.cuda_functions(SOURCE.read_text(), limit=120) == []


def test_a_copy_without_the_source_says_why(tmp_path, monkeypatch):
    from kernels import compile as kc

    assert fp8.HAS_RUNG4 and "student release leaves its source out" in fp8.LEFT_OUT_RUNG4
    monkeypatch.setattr(kc, "__file__", str(tmp_path / "compile.py"))  # a tree with no kernels/fp8_gemm/ sources
    fp8.overlap_cubin.cache_clear()
    try:
        with pytest.raises(kc.SourceLeftOut, match="r4_overlap.cu is not in this copy.*promotes each k-block"):
            fp8.overlap_cubin()
    finally:
        fp8.overlap_cubin.cache_clear()


def test_the_release_check_keeps_the_source_out():
    from autograder.release_check import INSTRUCTOR_ONLY

    assert "kernels/fp8_gemm/r4_overlap.cu" in INSTRUCTOR_ONLY, (
        "r4_overlap.cu holds the exercise's promotion answered: name it in autograder/release_check.py INSTRUCTOR_ONLY")


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
    ("sms=0", "sms", "got 0, needs at least 1"),
])
def test_gemm_fp8_overlap_refuses_bad_inputs_on_the_cpu_naming_the_argument(monkeypatch, case, arg, words):
    def no_gpu(*a, **k):
        raise AssertionError("gemm_fp8_overlap reached the GPU before its checks refused the inputs")

    for name in ("launch", "cached_tensor_map", "overlap_cubin", "sm_count"):
        monkeypatch.setattr(fp8, name, no_gpu)
    x, out, kw = _valid(), None, {}
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
    elif case == "sms=0":
        kw = {"sms": 0}
    with pytest.raises(ValueError, match=rf"^{re.escape(arg)}: ") as err:
        fp8.gemm_fp8_overlap(x["a"], x["sa_t"], x["b"], x["sb"], out=out, **kw)
    assert words in str(err.value), str(err.value)


def test_valid_cpu_inputs_are_refused_for_being_on_the_cpu(monkeypatch):
    monkeypatch.setattr(fp8, "launch", lambda *a, **k: pytest.fail("launched with CPU tensors"))
    x = _valid(m=384)
    with pytest.raises(ValueError, match="on the CPU, needs CUDA tensors: gemm_fp8_overlap"):
        fp8.gemm_fp8_overlap(x["a"], x["sa_t"], x["b"], x["sb"])


# ------------------------------------------------------------------------------------------------ on an sm_90 GPU
def _check(inputs: dict, **kw):
    from kernels.check import compare, poison  # imports torch's CUDA side: GPU tests only
    from kernels.fp8_gemm import workload  # the day's workload (reference), used by the GPU tests only

    m, n = inputs["a"].shape[0], inputs["b"].shape[0]
    buf = poison(torch.empty(m + 2, n, dtype=torch.bfloat16, device="cuda"))  # D with a guard row above and below
    out = buf[1:m + 1]
    got = fp8.gemm_fp8_overlap(inputs["a"], inputs["sa_t"], inputs["b"], inputs["sb"], out=out, **kw)
    torch.cuda.synchronize()
    assert got is out
    assert int(torch.isnan(out).sum()) == 0, "elements of D left unwritten (still the NaN poison)"
    assert bool(torch.isnan(buf[0]).all()) and bool(torch.isnan(buf[m + 1]).all()), "stores outside D"
    report = compare(out, workload.reference(inputs), rtol=RTOL)
    assert report.ok, report.message


@requires_hopper
@pytest.mark.parametrize("shape", [
    (128, 128, 128),     # one tile, one k-block: the tail's step of 1 only
    (256, 384, 2048),    # 16 k-blocks: the body once, no tail
    (384, 256, 640),     # 5 k-blocks: the tail's steps of 4 and 1
    (512, 640, 3968),    # 31 k-blocks: the body once and every step of the tail (8 + 4 + 2 + 1)
    (2048, 2048, 4096),  # 256 tiles on every SM: the ring's count runs across tiles
])
def test_gemm_fp8_overlap_matches_the_reference(shape):
    from kernels.fp8_gemm import workload  # the day's workload (inputs), used by the GPU tests only

    _check(workload.make_inputs(shape, seed=2))


@requires_hopper
@pytest.mark.parametrize("unroll", [2, 4, 32])
def test_other_steps_of_the_k_loop_give_the_same_product(unroll):
    # 45 k-blocks (a body step and an odd tail for each) on few CTAs: bit for bit rung 1's
    from kernels.fp8_gemm import workload  # the day's workload (inputs), used by the GPU tests only

    x = workload.make_inputs((384, 640, 5760), seed=6)
    args = (x["a"], x["sa_t"], x["b"], x["sb"])
    assert torch.equal(fp8.gemm_fp8_overlap(*args, unroll=unroll, sms=4), fp8.gemm_fp8(*args))


@requires_hopper
@pytest.mark.parametrize("shape, sms", [
    ((1152, 640, 896), 7),  # 45 tiles on 7 CTAs, 7 k-blocks a tile (tail steps 4 + 2 + 1): parity changes mid-tile
    ((640, 384, 384), 1),   # one CTA walks all 15 tiles, 3 k-blocks each (tail steps 2 + 1)
])
def test_few_ctas_walk_many_tiles(shape, sms):
    from kernels.fp8_gemm import workload  # the day's workload (inputs), used by the GPU tests only

    _check(workload.make_inputs(shape, seed=3), sms=sms)


@requires_hopper
def test_every_scale_lands_on_its_block():
    # scales that differ by powers of two from block to block: rows of A, 128-column k-blocks, 128 x 128 blocks of B
    from kernels.fp8_gemm import workload  # the day's workload (quantizers), used by the GPU tests only

    inputs = workload.make_scale_varied_inputs((384, 640, 1152), seed=5)
    _check(inputs, sms=4)


@requires_hopper
def test_it_agrees_with_rung_1_bit_for_bit():
    # the same tiles, the same k-block order, the same promotion arithmetic: only when each promotion runs changed
    from kernels.fp8_gemm import workload  # the day's workload (inputs), used by the GPU tests only

    x = workload.make_inputs((1152, 640, 1408), seed=4)
    args = (x["a"], x["sa_t"], x["b"], x["sb"])
    assert torch.equal(fp8.gemm_fp8_overlap(*args, sms=5), fp8.gemm_fp8(*args))


def test_the_headers_step_of_16_is_the_recorded_sweeps_fastest():
    # r4_overlap.cu's "Why 16", held to the record it names (python -m kernels.fp8_gemm.rounds --unrolls 4 8 32)
    import json

    assert "kernels/fp8_gemm/unroll_rounds_h200.json" in SOURCE.read_text()
    doc = json.loads((ROOT / "kernels" / "fp8_gemm" / "unroll_rounds_h200.json").read_text())
    assert doc["device"] == "NVIDIA H200" and doc["rounds"] >= 18 and doc["baseline"] == "cublaslt_blockwise"
    steps = {16: doc["ratios"]["overlap"]["median"]} | {
        int(k.removeprefix("overlap_u")): v["median"] for k, v in doc["ratios"].items() if k.startswith("overlap_u")}
    assert sorted(steps) == [4, 8, 16, 32] and max(steps, key=steps.get) == fp8.OVERLAP_UNROLL == 16, steps
    assert all(doc["kernels"][k] == ["fp8_gemm_overlap"] for k in doc["ratios"] if k.startswith("overlap"))
    assert all(e < 2e-3 for k, e in doc["accuracy"].items() if k.startswith("overlap"))


def test_the_no_store_ablation_builds_from_this_source():
    # `python -m kernels.fp8_gemm.rounds --ablations` times rung 4 with its stores guarded off: the patch must find
    # the epilogue in today's source, and the build must keep rung 4's mainloop and stores (only a guard added)
    from kernels.fp8_gemm import rounds

    src = rounds.no_store_source()
    assert src.replace("if (K == 12345) ", "", 1) == SOURCE.read_text()
    cub = compile_cuda(src, name="r4_overlap_no_store.cu")
    ablated = Counter(opcodes(cub, fp8.OVERLAP_KERNEL))
    rung4 = Counter(opcodes(fp8.overlap_cubin(), fp8.OVERLAP_KERNEL))
    assert advisories(cub) == []
    for op in ("QGMMA.64x128x32.F32.E4M3.E4M3", "WARPGROUP.DEPBAR.LE", "UTMALDG.2D", "STG.E"):
        assert ablated[op] == rung4[op], op
