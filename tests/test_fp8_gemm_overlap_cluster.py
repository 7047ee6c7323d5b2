"""Week 3 day 1 (fp8_gemm), rung 5 (r5_overlap_cluster.cu, kernels/fp8_gemm/launch.py gemm_fp8_overlap_cluster): rung
4's 128 x 128 tiles and overlapped promotion (promote_overlap.cuh) in clusters of 2 CTAs along M, each multicasting
half of the B tile (64 rows) into both.

On CPU: the kernel compiles for sm_90a with no ptxas advisory; its SASS holds rung 4's wgmmas and waits (the shared
consumer) and what the cluster adds: one multicast TMA load of this CTA's half of B beside the plain loads of A and
sa, a remote release of each stage beside the local one, the cluster barriers; no HGMMA, no spills; registers and
shared memory within budget; the launcher's constants (the half box of B among them) match the source; the walk over
tile pairs covers every tile once (odd M / 128: one drained CTA per tile column); bad inputs refused on CPU tensors,
naming the argument; the source left out of a student release, and the header's measured answer held to the record.
On an sm_90 GPU: bit for bit rung 1's product (output poisoned, guard rows), with odd tile rows, few clusters walking
many tile pairs, every step of the tail, and scales that differ block to block.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import pytest
import torch

from conftest import requires_hopper
from kernels.compile import ARCH, CompileError, advisories, compile_cuda, kernel_file
from kernels.fp8_gemm import launch as fp8
from kernels.gemm.occupancy import SMEM_PER_BLOCK, sass_registers, static_smem
from kernels.sass import disassemble, opcodes
from kernels.sass import family_count as _n  # an opcode's family, counted

ROOT = Path(__file__).resolve().parents[1]
SOURCE = kernel_file("fp8_gemm", "r5_overlap_cluster.cu", left_out=fp8.LEFT_OUT_RUNG5)
F8 = torch.float8_e4m3fn
KERNEL = fp8.OVERLAP_CLUSTER_KERNEL


@pytest.fixture(scope="module")
def ops() -> Counter:
    return Counter(opcodes(fp8.overlap_cluster_cubin(), KERNEL))


def test_the_kernel_compiles_for_sm90a_without_a_ptxas_advisory():
    cub = fp8.overlap_cluster_cubin()
    assert ARCH == "sm_90a" and KERNEL in cub.kernels
    assert advisories(cub) == [], advisories(cub)


def test_the_sass_is_rung_4s_consumer_with_the_clusters_loads_and_releases(ops):
    rung4 = Counter(opcodes(fp8.overlap_cubin(), fp8.OVERLAP_KERNEL))
    for op in ("QGMMA.64x128x32.F32.E4M3.E4M3", "WARPGROUP.ARRIVE", "WARPGROUP.DEPBAR.LE", "F2FP.BF16.F32.PACK_AB",
               "STG.E", "SYNCS.EXCH.64"):
        assert ops[op] == rung4[op], op  # the shared consumer (promote_overlap.cuh), the ring, rung 1's epilogue
    waits = Counter(i.text.split()[-1] for i in disassemble(fp8.overlap_cluster_cubin())[KERNEL] if "DEPBAR" in i.text)
    assert waits == {"0x1": 26, "0x0": 5}
    assert ops["UTMALDG.2D"] == 2 and ops["UTMALDG.2D.MULTICAST"] == 1 and _n(ops, "UTMALDG") == 3  # A, sa; B's half
    # each release (31 retirements of the consumer, one of a drained k-block) arrives here and on the peer
    assert ops["SYNCS.ARRIVE.TRANS64.A1T0"] == ops["SYNCS.ARRIVE.TRANS64.RED.A1T0"] == 32
    assert ops["UCGABAR_ARV"] == ops["UCGABAR_WAIT"] == 2  # after the barriers' init, before exit
    assert _n(ops, "HGMMA") == 0 and _n(ops, "LDGSTS") == 0 and _n(ops, "LDL") == 0 and _n(ops, "STL") == 0
    regs = sass_registers(fp8.overlap_cluster_cubin(), KERNEL)
    assert 192 <= regs <= 232, regs


def test_the_launcher_constants_and_the_byte_budget_match_the_source():
    text = SOURCE.read_text()
    assert int(re.search(r"#define FP8_STAGES (\d+)", text).group(1)) == fp8.OVERLAP_STAGES == 6
    assert int(re.search(r"#define FP8_UNROLL (\d+)", text).group(1)) == fp8.OVERLAP_UNROLL
    assert int(re.search(r"#define FP8_GROUP_M (\d+)", text).group(1)) == fp8.OVERLAP_GROUP_M
    assert "constexpr int BM = 128, BN = 128, BK = 128, STAGES = FP8_STAGES;" in text
    assert "constexpr int CLUSTER = 2;" in text and fp8.CLUSTER_SIZE == 2 and "ctaMask 0b11" in text
    assert "constexpr int HALF_ROWS = BN / CLUSTER;" in text and fp8.HALF_B_BOX == (64, 128)
    assert "EMPTY_ARRIVALS = CLUSTER * CONSUMER_WARPS;" in text and "init count\n//     16" in text
    assert "= 33280 bytes" in text and "16384, the B halves only" in text
    assert "__launch_bounds__(384, 1)" in text and f"{KERNEL}(" in text
    static = static_smem(fp8.overlap_cluster_cubin(), KERNEL)
    assert fp8.smem_bytes(fp8.OVERLAP_STAGES) == 200704 and "= 200704 B" in text
    assert fp8.smem_bytes(fp8.OVERLAP_STAGES) + static <= SMEM_PER_BLOCK


def test_bad_builds_are_refused():
    with pytest.raises(ValueError, match="^stages: got 7, needs 3 .. 6"):
        fp8.overlap_cluster_cubin(stages=7)
    with pytest.raises(ValueError, match="^group_m: got 3, needs a positive multiple of 2"):
        fp8.overlap_cluster_cubin(group_m=3)
    with pytest.raises(ValueError, match="^unroll: got 12, needs a power of two"):
        fp8.overlap_cluster_cubin(unroll=12)
    with pytest.raises(CompileError, match="FP8_GROUP_M: a positive multiple of the cluster"):
        compile_cuda(SOURCE, defines={"FP8_GROUP_M": 5})


def _unit_coords(u: int, pairs_m: int, tiles_n: int, rank: int, group: int) -> tuple[int, int]:
    """r5_overlap_cluster.cu's unit_coords in Python (block_scaled.cuh's grouped_order over tile pairs)."""
    pairs = group // 2
    per_group = pairs * tiles_n
    g = u // per_group
    first = g * pairs
    rows = min(pairs, pairs_m - first)
    r = u - g * per_group
    return (2 * (first + r % rows) + rank) * 128, (r // rows) * 128


def test_the_walk_over_tile_pairs_covers_every_tile_once():
    text = SOURCE.read_text()
    for line in ("grouped_order(u, pairs_m, tiles_n, GROUP_PAIRS, p, q);",
                 "m0 = (CLUSTER * p + static_cast<int>(rank)) * BM;", "n0 = q * BN;",
                 "for (int u = blockIdx.x / CLUSTER; u < units; u += gridDim.x / CLUSTER)"):
        assert line in text, line
    for m, n in ((128, 128), (384, 640), (2304, 640), (1152, 384)):
        tiles_m, tiles_n = m // 128, n // 128
        units = fp8.overlap_cluster_units((m, n, 128))
        assert units == -(-tiles_m // 2) * tiles_n
        for group in (2, 16):
            seen = [_unit_coords(u, -(-tiles_m // 2), tiles_n, r, group) for u in range(units) for r in (0, 1)]
            live = [t for t in seen if t[0] < m]
            assert sorted(live) == [(i * 128, j * 128) for i in range(tiles_m) for j in range(tiles_n)], (m, n, group)
            assert len(seen) - len(live) == (tiles_m % 2) * tiles_n  # the drained CTAs: rank 1 below M


def test_the_grid_is_clusters_of_two_and_persistent():
    assert fp8.overlap_cluster_units((8192, 8192, 8192)) == 2048
    assert fp8.overlap_cluster_grid((8192, 8192, 8192), 132) == (132,)
    assert fp8.overlap_cluster_grid((8192, 8192, 8192), 133) == (132,)  # whole clusters only
    assert fp8.overlap_cluster_grid((128, 128, 128), 132) == (2,)  # one tile: a live CTA and a drained one
    for sms in (0, 1):
        with pytest.raises(ValueError, match=f"^sms: got {sms}, needs at least 2"):
            fp8.overlap_cluster_grid((256, 256, 128), sms)


def test_the_release_check_keeps_the_source_and_the_shared_consumer_out():
    from autograder.release_check import INSTRUCTOR_ONLY

    assert fp8.HAS_RUNG5 and "student release leaves its source out" in fp8.LEFT_OUT_RUNG5
    assert {"kernels/fp8_gemm/r5_overlap_cluster.cu", "kernels/include/promote_overlap.cuh"} <= set(INSTRUCTOR_ONLY)


def test_gemm_fp8_overlap_cluster_refuses_bad_inputs_before_the_gpu(monkeypatch):
    def no_gpu(*a, **k):
        raise AssertionError("reached the GPU before the checks refused the inputs")

    for name in ("launch", "cached_tensor_map", "overlap_cluster_cubin", "sm_count"):
        monkeypatch.setattr(fp8, name, no_gpu)
    a, sa_t = torch.zeros(256, 512).to(F8), torch.ones(4, 256)
    b, sb = torch.zeros(384, 512).to(F8), torch.ones(3, 4)
    with pytest.raises(ValueError, match="^a: .*torch.bfloat16, needs torch.float8_e4m3fn"):
        fp8.gemm_fp8_overlap_cluster(a.to(torch.bfloat16), sa_t, b, sb)
    with pytest.raises(ValueError, match="^sms: got 1, needs at least 2"):
        fp8.gemm_fp8_overlap_cluster(a, sa_t, b, sb, sms=1)
    monkeypatch.setattr(fp8, "launch", lambda *a, **k: pytest.fail("launched with CPU tensors"))
    with pytest.raises(ValueError, match="on the CPU, needs CUDA tensors: gemm_fp8_overlap_cluster"):
        fp8.gemm_fp8_overlap_cluster(a, sa_t, b, sb)


def test_the_headers_answer_is_the_records():
    # "on an H200 this rung is BEHIND rung 4", held to the claims rounds it names
    assert "on an H200 this rung is BEHIND rung 4" in SOURCE.read_text()
    (lad,) = json.loads((ROOT / "kernels" / "fp8_gemm" / "rounds_h200.json").read_text())["rows"]
    r4, r5 = lad["ratios"]["overlap"], lad["ratios"]["overlap_cluster"]
    assert lad["kernels"]["overlap_cluster"] == [KERNEL] and r5["rounds"] >= 18
    assert r5["median"] < r4["median"] and r5["hi"] < 1, (r5["says"], r4["says"])


# ------------------------------------------------------------------------------------------------ on an sm_90 GPU
def _check(shape, seed=3, **kw):
    from kernels.check import poison  # imports torch's CUDA side: GPU tests only
    from kernels.fp8_gemm import workload  # the day's workload (inputs), used by the GPU tests only

    x = workload.make_inputs(shape, seed=seed)
    m, n, _ = shape
    buf = poison(torch.empty(m + 2, n, dtype=torch.bfloat16, device="cuda"))
    out = buf[1:m + 1]
    got = fp8.gemm_fp8_overlap_cluster(x["a"], x["sa_t"], x["b"], x["sb"], out=out, **kw)
    torch.cuda.synchronize()
    assert got is out and int(torch.isnan(out).sum()) == 0, "elements of D left unwritten"
    assert bool(torch.isnan(buf[0]).all()) and bool(torch.isnan(buf[m + 1]).all()), "stores outside D"
    # the same tiles, k-blocks and promotions as rung 1: only who loads B and when each promotion runs changed
    assert torch.equal(out, fp8.gemm_fp8(x["a"], x["sa_t"], x["b"], x["sb"]))


@requires_hopper
@pytest.mark.parametrize("shape, sms", [
    ((256, 128, 128), None),    # one tile pair, one k-block
    ((384, 256, 640), 2),       # M / 128 = 3: a drained CTA; one cluster walks 4 pairs; tail steps 4 + 1
    ((128, 128, 1152), 2),      # one tile: a live CTA and a drained one for all 9 k-blocks
    ((640, 1152, 3968), 6),     # 31 k-blocks (a body step and every tail step), 27 pairs on 3 clusters
    ((2048, 2048, 4096), None),  # 128 pairs on 66 clusters
])
def test_gemm_fp8_overlap_cluster_is_rung_1s_product(shape, sms):
    _check(shape, sms=sms)


@requires_hopper
def test_every_scale_lands_on_its_block():
    from kernels.check import compare, poison  # imports torch's CUDA side: GPU tests only
    from kernels.fp8_gemm import workload  # the day's workload (inputs, reference), used by the GPU tests only

    x = workload.make_scale_varied_inputs((384, 640, 1152), seed=5)
    out = poison(torch.empty(384, 640, dtype=torch.bfloat16, device="cuda"))
    fp8.gemm_fp8_overlap_cluster(x["a"], x["sa_t"], x["b"], x["sb"], out=out, sms=4)
    report = compare(out, workload.reference(x), rtol=2e-3)
    assert report.ok, report.message
