"""Week 3 day 1 (fp8_gemm), rung 3 (r3_cluster.cu, kernels/fp8_gemm/launch.py gemm_fp8_cluster): rung 2's 128 x 256
tiles and persistent grouped walk, in clusters of 2 CTAs along M that share each k-block's B tile by TMA multicast.

On CPU: the kernel compiles for sm_90a with no ptxas advisory; its SASS holds rung 2's two halves of m64n128k32 per
k-block (QGMMA.64x128x32.F32.E4M3.E4M3, 8), the promotion's FFMAs and the bf16x2 stores, and what the cluster adds:
one multicast TMA load of this CTA's half of B (UTMALDG.2D.MULTICAST) beside the plain loads of A and sa, the remote
release of a stage (SYNCS.ARRIVE.TRANS64.RED.A1T0) and the cluster barriers — every opcode the file's header names,
read from the header itself; no HGMMA, no cp.async, no spills; registers within setmaxnreg's 232, shared memory within
227 KiB; the launcher's constants match the source; the walk over tile pairs covers every tile once (odd M / 128
included: one drained CTA); gemm_fp8_cluster refuses bad inputs on CPU tensors, naming the argument, before anything
touches a GPU. On an sm_90 GPU: gemm_fp8_cluster against workload.reference (output poisoned with NaN: every element
must be written, none outside D), with half tiles, odd tile rows, few clusters walking many tile pairs, and scales that
differ block to block.
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
SOURCE = kernel_file("fp8_gemm", "r3_cluster.cu", left_out=fp8.LEFT_OUT_RUNG3)
F8 = torch.float8_e4m3fn
RTOL = 2e-3  # rung 1's bound (tests/test_fp8_gemm_kernel.py: the bf16 rounding of D is ~ 1.7e-3 of it)
CONSUMER_REGS = 232  # setmaxnreg.inc of the consumer warpgroups


@pytest.fixture(scope="module")
def ops() -> Counter:
    return Counter(opcodes(fp8.cluster_cubin(), fp8.CLUSTER_KERNEL))


# ------------------------------------------------------------------------------------------------ compile and SASS
def test_the_kernel_compiles_for_sm90a_without_a_ptxas_advisory():
    cub = fp8.cluster_cubin()
    assert ARCH == "sm_90a" and fp8.CLUSTER_KERNEL in cub.kernels
    assert advisories(cub) == [], advisories(cub)  # no serialized wgmma, no ignored setmaxnreg


def test_the_sass_holds_the_multicast_load_the_fp8_wgmma_and_the_promotion(ops):
    # rung 2's k-block: 2 halves x 4 k32 steps, unrolled once in the mainloop
    assert ops["QGMMA.64x128x32.F32.E4M3.E4M3"] == 8, sorted(k for k in ops if "GMMA" in k)
    assert _n(ops, "QGMMA") == 8 and _n(ops, "HGMMA") == 0
    assert ops["WARPGROUP.ARRIVE"] == 2 and _n(ops, "WARPGROUP.DEPBAR") == 2  # a fence and a wait<0> per half
    # the loads of a stage: A and sa plain (this CTA only), this CTA's half of B multicast into both CTAs
    assert ops["UTMALDG.2D"] == 2 and ops["UTMALDG.2D.MULTICAST"] == 1, sorted(k for k in ops if "UTMA" in k)
    assert _n(ops, "UTMALDG") == 3 and _n(ops, "LDGSTS") == 0
    assert ops["FFMA"] >= 128  # the promotion: one FFMA per accumulator register per k-block
    assert ops["F2FP.BF16.F32.PACK_AB"] == fp8.WIDE_BN // 4 and ops["STG.E"] == fp8.WIDE_BN // 4
    assert _n(ops, "STG") == fp8.WIDE_BN // 4
    assert [op for op in ("STSM", "STS", "UTMASTG", "UTMACMDFLUSH") if _n(ops, op)] == []
    assert ops["SYNCS.EXCH.64"] == 2 * fp8.CLUSTER_STAGES  # mbarrier.init of full[s] and empty[s]
    assert ops["SYNCS.ARRIVE.TRANS64"] >= 1  # the producer's arrive.expect_tx
    # each release (half tile, wide tile, drained tile) arrives on this CTA's empty[s] and on the peer's
    assert ops["SYNCS.ARRIVE.TRANS64.A1T0"] == ops["SYNCS.ARRIVE.TRANS64.RED.A1T0"] == 3
    assert ops["SYNCS.PHASECHK.TRANS64.TRYWAIT"] >= 3
    assert ops["UCGABAR_ARV"] == ops["UCGABAR_WAIT"] == 2  # after the barriers' init, before exit
    assert _n(ops, "USETMAXREG") == 2 and ops["ELECT"] >= 1
    assert _n(ops, "LDL") == 0 and _n(ops, "STL") == 0  # no spills


def test_the_registers_fit_the_consumers_setmaxnreg():
    regs = sass_registers(fp8.cluster_cubin(), fp8.CLUSTER_KERNEL)
    assert 192 < regs <= CONSUMER_REGS, regs
    assert 128 * 40 + 2 * 128 * CONSUMER_REGS <= 65536


# The header's SASS paragraph against the SASS, and that the check can fail: tests/test_fp8_gemm_kernel.py
# (RUNG_HEADERS, one check for the three rungs).


def test_the_launcher_constants_and_the_byte_budget_match_the_source():
    text = SOURCE.read_text()
    assert int(re.search(r"#define FP8_STAGES (\d+)", text).group(1)) == fp8.CLUSTER_STAGES == 4
    assert int(re.search(r"#define FP8_GROUP_M (\d+)", text).group(1)) == fp8.CLUSTER_GROUP_M
    assert "constexpr int BM = 128, BN = 256, BK = 128, STAGES = FP8_STAGES;" in text
    assert "constexpr int CLUSTER = 2;" in text and fp8.CLUSTER_SIZE == 2
    assert "constexpr unsigned short CTA_MASK = 0b11;" in text and "ctaMask 0b11" in text
    assert "EMPTY_ARRIVALS = CLUSTER * CONSUMER_WARPS;" in text and "init count 16" in text
    assert "__launch_bounds__(384, 1)" in text and fp8.THREADS == 384
    assert 'extern "C" __global__' in text and f"{fp8.CLUSTER_KERNEL}(" in text
    assert fp8.CLUSTER_STAGE_TX == 49664 and "= 49664 bytes" in text and "33280" in text
    static = static_smem(fp8.cluster_cubin(), fp8.CLUSTER_KERNEL)
    assert fp8.wide_smem_bytes(fp8.CLUSTER_STAGES) == 199680 and "(199680 B;" in text
    assert fp8.wide_smem_bytes(fp8.CLUSTER_STAGES) + static <= SMEM_PER_BLOCK == 227 * 1024, static


def test_a_shallower_ring_builds_and_bad_builds_are_refused():
    ops3 = Counter(opcodes(fp8.cluster_cubin(stages=3), fp8.CLUSTER_KERNEL))
    assert ops3["SYNCS.EXCH.64"] == 6 and ops3["UTMALDG.2D.MULTICAST"] == 1 and _n(ops3, "LDL") == 0
    with pytest.raises(ValueError, match="^stages: got 5, needs 2 .. 4"):
        fp8.cluster_cubin(stages=5)
    with pytest.raises(ValueError, match="^group_m: got 3, needs a positive multiple of 2"):
        fp8.cluster_cubin(group_m=3)
    with pytest.raises(CompileError, match="FP8_GROUP_M: a positive multiple of the cluster"):  # the source's own
        compile_cuda(SOURCE, defines={"FP8_GROUP_M": 3})


def _unit_coords(u: int, pairs_m: int, tiles_n: int, rank: int, group: int) -> tuple[int, int]:
    """r3_cluster.cu's unit_coords in Python (the test below holds the source to the same lines)."""
    pairs = group // 2
    per_group = pairs * tiles_n
    g = u // per_group
    first = g * pairs
    rows = min(pairs, pairs_m - first)
    r = u - g * per_group
    return (2 * (first + r % rows) + rank) * 128, (r // rows) * 256


def test_the_walk_over_tile_pairs_covers_every_tile_once():
    text = SOURCE.read_text()
    for line in ("grouped_order(u, pairs_m, tiles_n, GROUP_PAIRS, p, q);",
                 "m0 = (CLUSTER * p + static_cast<int>(rank)) * BM;", "n0 = q * BN;",
                 "for (int u = blockIdx.x / CLUSTER; u < units; u += gridDim.x / CLUSTER)"):
        assert line in text, line
    shared = (COURSE_INCLUDE / "block_scaled.cuh").read_text()  # rung 2's grouped order, here over tile pairs
    for line in ("const int per_group = group * units_n, g = t / per_group, first = g * group;",
                 "const int rows = min(group, units_m - first), r = t - g * per_group;",
                 "row = first + r % rows;", "col = r / rows;"):
        assert line in shared, line
    for m, n in ((128, 128), (384, 640), (2304, 640), (8192, 8192), (4224, 1408), (1152, 384)):
        tiles_m, tiles_n = m // 128, -(-n // 256)
        units = fp8.cluster_units((m, n, 128))
        assert units == -(-tiles_m // 2) * tiles_n
        for group in (2, 16):
            seen = [_unit_coords(u, -(-tiles_m // 2), tiles_n, r, group) for u in range(units) for r in (0, 1)]
            live = [t for t in seen if t[0] < m]
            # every tile exactly once; the tiles below M (one per tile column when M / 128 is odd) are rank 1's
            assert sorted(live) == [(i * 128, j * 256) for i in range(tiles_m) for j in range(tiles_n)], (m, n, group)
            assert len(seen) - len(live) == (tiles_m % 2) * tiles_n
    # the two ranks of a unit: vertically adjacent tiles, the same columns of B
    for u in range(64):
        (m0, n0), (m1, n1) = (_unit_coords(u, 32, 32, r, 16) for r in (0, 1))
        assert m1 == m0 + 128 and n1 == n0


def test_the_grid_is_clusters_of_two_and_persistent():
    assert fp8.cluster_units((8192, 8192, 8192)) == 1024 and fp8.cluster_grid((8192, 8192, 8192), 132) == (132,)
    assert fp8.cluster_grid((8192, 8192, 8192), 133) == (132,)  # whole clusters only
    assert fp8.cluster_units((384, 640, 128)) == 6 and fp8.cluster_grid((384, 640, 128), 132) == (12,)
    assert fp8.cluster_grid((128, 128, 128), 132) == (2,)  # one tile: a live CTA and a drained one
    for sms in (0, 1):
        with pytest.raises(ValueError, match=f"^sms: got {sms}, needs at least 2"):
            fp8.cluster_grid((256, 256, 128), sms)


def test_no_cuda_function_of_the_rung_is_over_120_lines():
    sys.path.insert(0, str(ROOT / "tools"))
    import structure  # tools/structure.py: the course's measure (tests/test_structure.py), loaded by path

    assert structure.cuda_functions(SOURCE.read_text(), limit=120) == []


def test_a_copy_without_the_source_says_why(tmp_path, monkeypatch):
    # rung 3 promotes each k-block as the day's exercise asks (rung 2's promote): a student release leaves it out,
    # and asking for it there says so rather than raising a bare FileNotFoundError
    from kernels import compile as kc

    assert fp8.HAS_RUNG3 and "student release leaves its source out" in fp8.LEFT_OUT_RUNG3
    monkeypatch.setattr(kc, "__file__", str(tmp_path / "compile.py"))  # a tree with no kernels/fp8_gemm/ sources
    fp8.cluster_cubin.cache_clear()
    try:
        with pytest.raises(kc.SourceLeftOut, match="r3_cluster.cu is not in this copy.*promotes each k-block"):
            fp8.cluster_cubin()
    finally:
        fp8.cluster_cubin.cache_clear()


def test_the_release_check_keeps_the_source_out():
    from autograder.release_check import INSTRUCTOR_ONLY

    assert "kernels/fp8_gemm/r3_cluster.cu" in INSTRUCTOR_ONLY, (
        "r3_cluster.cu holds the exercise's promotion answered: name it in autograder/release_check.py INSTRUCTOR_ONLY")


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
    ("sms=1", "sms", "needs at least 2 (one cluster of 2 CTAs"),
])
def test_gemm_fp8_cluster_refuses_bad_inputs_on_the_cpu_naming_the_argument(monkeypatch, case, arg, words):
    def no_gpu(*a, **k):
        raise AssertionError("gemm_fp8_cluster reached the GPU before its checks refused the inputs")

    for name in ("launch", "cached_tensor_map", "cluster_cubin", "sm_count"):
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
    elif case == "sms=1":
        kw = {"sms": 1}
    with pytest.raises(ValueError, match=rf"^{re.escape(arg)}: ") as err:
        fp8.gemm_fp8_cluster(x["a"], x["sa_t"], x["b"], x["sb"], out=out, **kw)
    assert words in str(err.value), str(err.value)


def test_valid_cpu_inputs_are_refused_for_being_on_the_cpu(monkeypatch):
    monkeypatch.setattr(fp8, "launch", lambda *a, **k: pytest.fail("launched with CPU tensors"))
    x = _valid(m=384)  # M / 128 = 3 (odd) and N = 384 (a half tile): both accepted
    with pytest.raises(ValueError, match="on the CPU, needs CUDA tensors: gemm_fp8_cluster"):
        fp8.gemm_fp8_cluster(x["a"], x["sa_t"], x["b"], x["sb"])


# ------------------------------------------------------------------------------------------------ on an sm_90 GPU
def _check(inputs: dict, **kw):
    from kernels.check import compare, poison  # imports torch's CUDA side: GPU tests only
    from kernels.fp8_gemm import workload  # the day's workload (reference), used by the GPU tests only

    m, n = inputs["a"].shape[0], inputs["b"].shape[0]
    # D inside a poisoned buffer with a guard row above and below: a drained CTA (or a wrong m0) must store nothing
    buf = poison(torch.empty(m + 2, n, dtype=torch.bfloat16, device="cuda"))
    out = buf[1:m + 1]
    got = fp8.gemm_fp8_cluster(inputs["a"], inputs["sa_t"], inputs["b"], inputs["sb"], out=out, **kw)
    torch.cuda.synchronize()
    assert got is out
    assert int(torch.isnan(out).sum()) == 0, "elements of D left unwritten (still the NaN poison)"
    assert bool(torch.isnan(buf[0]).all()) and bool(torch.isnan(buf[m + 1]).all()), "stores outside D"
    report = compare(out, workload.reference(inputs), rtol=RTOL)
    assert report.ok, report.message


@requires_hopper
@pytest.mark.parametrize("shape", [
    (256, 256, 128),     # one tile pair, one wide tile column, one k-block
    (512, 384, 640),     # a wide and a half tile column; 5 k-blocks: the ring of 4 wraps inside a tile
    (1024, 768, 1152),   # 9 k-blocks, 12 tile pairs
    (2048, 2048, 4096),  # 64 tile pairs: one wave of 64 clusters on 132 SMs
    (384, 512, 256),     # M / 128 = 3: the last pair's rank-1 CTA drains
    (128, 384, 384),     # one tile row: every unit has a drained CTA; a half tile too
])
def test_gemm_fp8_cluster_matches_the_reference(shape):
    from kernels.fp8_gemm import workload  # the day's workload (inputs), used by the GPU tests only

    _check(workload.make_inputs(shape, seed=2))


@requires_hopper
@pytest.mark.parametrize("shape, sms", [
    ((2304, 640, 640), 6),  # 9 x 3 tile pairs (two groups of pair rows: 8 + 1; half tiles) on 3 clusters
    ((640, 512, 384), 2),   # one cluster walks all 6 pairs (the last pair row half drained): 3 k-blocks a tile,
])                          # so the ring's parity changes mid-tile
def test_few_clusters_walk_many_tile_pairs(shape, sms):
    from kernels.fp8_gemm import workload  # the day's workload (inputs), used by the GPU tests only

    _check(workload.make_inputs(shape, seed=3), sms=sms)


@requires_hopper
def test_every_scale_lands_on_its_block():
    # scales that differ by powers of two from block to block (rows of A in both CTAs of a cluster, 128-column
    # k-blocks, 128 x 128 blocks of B — both halves, each loaded by a different CTA — and a half tile)
    from kernels.fp8_gemm import workload  # the day's workload (quantizers), used by the GPU tests only

    inputs = workload.make_scale_varied_inputs((384, 640, 1024), seed=5)
    _check(inputs)


@requires_hopper
def test_it_agrees_with_rung_2_bit_for_bit():
    # the same tiles, the same k-block order, the same promotion: only who loads B changed
    from kernels.fp8_gemm import workload  # the day's workload (inputs), used by the GPU tests only

    x = workload.make_inputs((1152, 640, 1024), seed=4)
    args = (x["a"], x["sa_t"], x["b"], x["sb"])
    assert torch.equal(fp8.gemm_fp8_cluster(*args), fp8.gemm_fp8_wide(*args))
