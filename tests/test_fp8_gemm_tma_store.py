"""Week 3 day 1 (fp8_gemm), rung 6 (r6_tma_store.cu, kernels/fp8_gemm/launch.py gemm_fp8_tma_store): rung 4 with D
written through a 128B-swizzled staging area in shared memory by TMA stores, one stage less in the ring.

On CPU: the kernel compiles for sm_90a with no ptxas advisory; its SASS is rung 4's mainloop (the shared producer and
consumer: the same wgmmas and waits) with the epilogue swapped: 8 stmatrix.x4 per thread, the proxy fence, two TMA
stores and their commit, no st.global at all; registers and shared memory within budget; the launcher's constants
(stages, D's box, the staging bytes) match the source; bad builds and inputs refused before a GPU is touched; the
source left out of a student release; the header's measured reason and the claims record held to the records. On an
sm_90 GPU: bit for bit rung 1's product (output poisoned with NaN inside guard rows), on awkward shapes, few CTAs,
every step of the tail, and block-varied scales.
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
SOURCE = kernel_file("fp8_gemm", "r6_tma_store.cu", left_out=fp8.LEFT_OUT_RUNG6)
F8 = torch.float8_e4m3fn
KERNEL = fp8.TMA_STORE_KERNEL
RECORDS = ROOT / "kernels" / "fp8_gemm"


@pytest.fixture(scope="module")
def ops() -> Counter:
    return Counter(opcodes(fp8.tma_store_cubin(), KERNEL))


def test_the_kernel_compiles_for_sm90a_without_a_ptxas_advisory():
    cub = fp8.tma_store_cubin()
    assert ARCH == "sm_90a" and KERNEL in cub.kernels
    assert advisories(cub) == [], advisories(cub)


def test_the_sass_is_rung_4s_mainloop_with_a_tma_store_epilogue(ops):
    rung4 = Counter(opcodes(fp8.overlap_cubin(), fp8.OVERLAP_KERNEL))
    for op in ("QGMMA.64x128x32.F32.E4M3.E4M3", "WARPGROUP.ARRIVE", "WARPGROUP.DEPBAR.LE", "UTMALDG.2D",
               "SYNCS.ARRIVE.TRANS64.A1T0", "F2FP.BF16.F32.PACK_AB"):
        assert ops[op] == rung4[op], op  # the shared producer and consumer; the same bf16 packing
    ins = disassemble(fp8.tma_store_cubin())[KERNEL]
    waits = Counter(i.text.split()[-1] for i in ins if "WARPGROUP.DEPBAR" in i.text)
    assert waits == {"0x1": 26, "0x0": 5}
    assert ops["SYNCS.EXCH.64"] == 2 * fp8.TMA_STORE_STAGES  # one stage less than rung 4
    # the epilogue: 2 pieces x 4 chunk pairs of stmatrix.x4, the proxy fence, 2 TMA stores, one commit
    assert ops["STSM.16.M88.4"] == 8 and ops["FENCE.VIEW.ASYNC.S"] >= 1
    assert ops["UTMASTG.2D"] == 2 and ops["UTMACMDFLUSH"] == 1
    assert _n(ops, "STG") == 0 and _n(ops, "STS") == 0  # no st.global, no plain st.shared
    assert _n(ops, "HGMMA") == 0 and _n(ops, "LDL") == 0 and _n(ops, "STL") == 0
    assert 192 <= sass_registers(fp8.tma_store_cubin(), KERNEL) <= 232


def test_the_launcher_constants_and_the_byte_budget_match_the_source():
    text = SOURCE.read_text()
    assert int(re.search(r"#define FP8_STAGES (\d+)", text).group(1)) == fp8.TMA_STORE_STAGES == 5
    assert int(re.search(r"#define FP8_UNROLL (\d+)", text).group(1)) == fp8.OVERLAP_UNROLL
    assert "constexpr int PIECE_COLS = 64, PIECES = BN / PIECE_COLS;" in text and fp8.D_BOX == (64, 64)
    assert "constexpr int STAGING_BYTES = 2 * PIECES * PIECE_BYTES;" in text and fp8.STAGING_BYTES == 32768
    assert f"{KERNEL}(FP8_GEMM_ARGS, const __grid_constant__ CUtensorMap d_map)" in text
    assert fp8.tma_store_smem_bytes() == 200704 and "= 200704 B" in text
    static = static_smem(fp8.tma_store_cubin(), KERNEL)
    assert fp8.tma_store_smem_bytes() + static <= SMEM_PER_BLOCK < fp8.tma_store_smem_bytes(6) + static


def test_bad_builds_are_refused():
    with pytest.raises(ValueError, match="^stages: got 6, needs 3 .. 5"):
        fp8.tma_store_cubin(stages=6)
    with pytest.raises(ValueError, match="^stages: got 2, needs 3 .. "):
        fp8.tma_store_cubin(stages=2)
    with pytest.raises(ValueError, match="^unroll: got 3, needs a power of two"):
        fp8.tma_store_cubin(unroll=3)
    with pytest.raises(CompileError, match="FP8_STAGES: 3..5"):
        compile_cuda(SOURCE, defines={"FP8_STAGES": 6})


def test_a_smaller_ring_builds():
    ops3 = Counter(opcodes(fp8.tma_store_cubin(stages=3), KERNEL))
    assert ops3["SYNCS.EXCH.64"] == 6 and ops3["UTMASTG.2D"] == 2 and _n(ops3, "LDL") == 0


def test_the_release_check_keeps_the_source_out():
    from autograder.release_check import INSTRUCTOR_ONLY

    assert fp8.HAS_RUNG6 and "student release leaves its source out" in fp8.LEFT_OUT_RUNG6
    assert "kernels/fp8_gemm/r6_tma_store.cu" in INSTRUCTOR_ONLY


def test_gemm_fp8_tma_store_refuses_bad_inputs_before_the_gpu(monkeypatch):
    def no_gpu(*a, **k):
        raise AssertionError("reached the GPU before the checks refused the inputs")

    for name in ("launch", "cached_tensor_map", "tma_store_cubin", "sm_count"):
        monkeypatch.setattr(fp8, name, no_gpu)
    a, sa_t = torch.zeros(256, 512).to(F8), torch.ones(4, 256)
    b, sb = torch.zeros(384, 512).to(F8), torch.ones(3, 4)
    with pytest.raises(ValueError, match="^out: .*torch.float32, needs torch.bfloat16"):
        fp8.gemm_fp8_tma_store(a, sa_t, b, sb, out=torch.empty(256, 384))
    with pytest.raises(ValueError, match="^sms: got 0, needs at least 1"):
        fp8.gemm_fp8_tma_store(a, sa_t, b, sb, sms=0)
    monkeypatch.setattr(fp8, "launch", lambda *a, **k: pytest.fail("launched with CPU tensors"))
    with pytest.raises(ValueError, match="on the CPU, needs CUDA tensors: gemm_fp8_tma_store"):
        fp8.gemm_fp8_tma_store(a, sa_t, b, sb)


def test_the_headers_reason_is_the_ablations_record():
    # "rung 4 built with its stores never run is ahead of rung 4 itself by more than this rung's one stage less
    # costs it", held to the record the header names (python -m kernels.fp8_gemm.rounds --ablations)
    text = SOURCE.read_text()
    assert "kernels/fp8_gemm/epilogue_rounds_h200.json" in text and "--ablations" in text
    doc = json.loads((RECORDS / "epilogue_rounds_h200.json").read_text())
    assert doc["device"] == "NVIDIA H200" and doc["rounds"] >= 18 and "--ablations" in doc["what"]
    x = {k: v["median"] for k, v in doc["ratios"].items()}
    assert x["overlap_no_store"] - x["overlap"] > x["overlap"] - x["overlap_s5"] > -0.05, x
    assert doc["accuracy"]["overlap_no_store"] != doc["accuracy"]["overlap_no_store"]  # NaN: D never written
    assert doc["accuracy"]["tma_store"] < 2e-3 and doc["kernels"]["tma_store"] == [KERNEL]


def test_the_claims_record_names_the_rung_and_its_interval():
    (lad,) = json.loads((RECORDS / "rounds_h200.json").read_text())["rows"]
    r6 = lad["ratios"]["tma_store"]
    assert lad["kernels"]["tma_store"] == [KERNEL] and r6["rounds"] >= 18 and r6["lo"] <= r6["median"] <= r6["hi"]
    assert lad["accuracy"]["tma_store"] == lad["accuracy"]["block_scaled"]  # bit for bit rung 1's product


# ------------------------------------------------------------------------------------------------ on an sm_90 GPU
@requires_hopper
@pytest.mark.parametrize("shape, sms", [
    ((128, 128, 128), None),      # one tile, one k-block
    ((384, 256, 640), 3),         # 6 tiles on 3 CTAs: the staging reused (its wait_read) every tile
    ((128, 128, 1152), 1),        # 9 k-blocks: tail steps 8 + 1; one CTA
    ((640, 1152, 3968), 5),       # 31 k-blocks (every step), 45 tiles on 5 CTAs
    ((2048, 2048, 4096), None),   # 256 tiles on every SM
])
def test_gemm_fp8_tma_store_is_rung_1s_product(shape, sms):
    from kernels.check import poison  # imports torch's CUDA side: GPU tests only
    from kernels.fp8_gemm import workload  # the day's workload (inputs), used by the GPU tests only

    x = workload.make_inputs(shape, seed=3)
    m, n, _ = shape
    buf = poison(torch.empty(m + 2, n, dtype=torch.bfloat16, device="cuda"))
    out = buf[1:m + 1]
    got = fp8.gemm_fp8_tma_store(x["a"], x["sa_t"], x["b"], x["sb"], out=out, sms=sms)
    torch.cuda.synchronize()
    assert got is out and int(torch.isnan(out).sum()) == 0, "elements of D left unwritten"
    assert bool(torch.isnan(buf[0]).all()) and bool(torch.isnan(buf[m + 1]).all()), "stores outside D"
    assert torch.equal(out, fp8.gemm_fp8(x["a"], x["sa_t"], x["b"], x["sb"]))


@requires_hopper
def test_every_scale_lands_on_its_block():
    from kernels.check import compare, poison  # imports torch's CUDA side: GPU tests only
    from kernels.fp8_gemm import workload  # the day's workload (inputs, reference), used by the GPU tests only

    x = workload.make_scale_varied_inputs((384, 640, 1152), seed=5)
    out = poison(torch.empty(384, 640, dtype=torch.bfloat16, device="cuda"))
    fp8.gemm_fp8_tma_store(x["a"], x["sa_t"], x["b"], x["sb"], out=out, sms=4, unroll=4)
    report = compare(out, workload.reference(x), rtol=2e-3)
    assert report.ok, report.message


def test_the_shape_records_hold_rung_6_and_rung_1_to_the_same_accuracy():
    # other shapes than the claim's (python -m kernels.fp8_gemm.rounds --shape M N K): each a whole rounds record of
    # the ladder and the baselines, on the GPU it names, every rung's error the same as rung 1's
    files = sorted(RECORDS.glob("shape_rounds_*_h200.json"))
    assert len(files) >= 2
    for f in files:
        doc = json.loads(f.read_text())
        assert doc["device"] == "NVIDIA H200" and doc["driver"] and doc["date"] and "--shape" in doc["what"]
        assert f.name == f"shape_rounds_{'x'.join(map(str, doc['shape']))}_h200.json"
        assert doc["rounds"] >= 18 and doc["baseline"] == "cublaslt_blockwise"
        assert doc["kernels"]["tma_store"] == [KERNEL]
        x = doc["ratios"]["tma_store"]
        assert x["lo"] <= x["median"] <= x["hi"] and x["rounds"] == doc["rounds"]
        assert doc["accuracy"]["tma_store"] == doc["accuracy"]["block_scaled"] < 2e-3
