"""Week 3, day 1's graded exercise: fp8_promote — the promotion step of a block-scaled FP8 GEMM (DeepSeek-V3's "1x128 x
128x128" recipe, kernels/fp8_gemm/workload.py) on a given warp-specialized TMA + FP8 wgmma mainloop.

    D (M, N) = bf16( sum over k-blocks kb of  (A[:, kb] . B[:, kb]^T) * sa[m, kb] * sb[n // 128, kb] )

The workload half of the exercise (inputs, reference, the fixed launch contract, FLOPs): the grader and the notebook
share it, and it is workload.py's (make_inputs, reference, flops, bytes_moved). Given in the answer cell: rung 1's
design (kernels/fp8_gemm/r1_block_scaled.cu) — a producer thread whose TMA loads bring each k-block's A and B tiles and
the tile's 128 row scales of A into a STAGES-deep full/empty ring, two consumer warpgroups that run each k-block's
4 wgmma m64n128k32 e4m3 into a fresh fp32 fragment tmp[64] and wait for them, and a plain-store epilogue. The
student's: the device function `promote` each consumer calls after that wait, once per k-block — it folds tmp into
the fp32 accumulator with the k-block's scales, acc[i] += tmp[i] * sa[row(i), kb] * sb[n_tile, kb], reading the row
scales from the stage's slot of the scale ring in shared memory and sb from global memory, and choosing for each
fragment register its row (m64nNk32: thread l of warp w holds rows 16 w + l / 4 and 8 below).

Launch contract
---------------
    extern "C" __global__ void fp8_promote(const __grid_constant__ CUtensorMap a_map,
                                           const __grid_constant__ CUtensorMap b_map,
                                           const __grid_constant__ CUtensorMap sa_map,
                                           __nv_bfloat16* D, const float* sb, int M, int N, int K)

- a: (M, K) float8_e4m3fn, b: (N, K) float8_e4m3fn, both K-major (FP8 wgmma reads no other layout); sa_t: (K / 128, M)
  fp32 (the 1 x 128 row scales of A, stored M-major: one k-block's scales of a 128-row tile are one 512-byte run);
  sb: (N / 128, K / 128) fp32 row-major (one scale per 128 x 128 block of B); D: (M, N) bf16 row-major. M, N, K
  multiples of 128 (whole tiles and whole scale blocks: nothing to clip).
- a_map, b_map: kernels.tensormap maps over a and b seen as uint8 (the TMA moves bytes; kernels/fp8_gemm/launch.py
  map_views), box AB_BOX = (128, 128) — 128 rows x 128 e4m3 = 128 bytes, the 128B-swizzle span — 128B swizzle;
  sa_map: over sa_t, box SA_BOX = (1, 128), no swizzle.
- grid = (N / 128, M / 128): CTA (x, y) computes D[128 y .., 128 x ..]; block = 384 threads = 3 warpgroups (0:
  producer, 1-2: consumers, rows 0..63 and 64..127 of the tile); dynamic shared memory = SMEM_BYTES (196 KiB: the
  given ring of 6 stages x 32 KiB, its scale slots (6 x 512 B, padded to 3 KiB) and 1 KiB to align the base to
  1024 bytes; the given code's static_assert checks that its layout fits).
"""

from __future__ import annotations

import torch

from ..launch import i32
from ..tensormap import cached_tensor_map
from . import workload
from .launch import map_views
from .workload import bytes_moved, flops, make_inputs, make_output, reference  # noqa: F401 - the exercise's workload

NAME = "fp8_promote"
KERNEL = "fp8_promote"
BM = BN = BK = 128                # the tile of D per CTA, and the k-block (= the scale block along K)
STAGES = 6                        # the given ring's depth
AB_BOX = (BM, BK)                 # A and B maps: 128 rows x 128 e4m3 (128 bytes: the 128B-swizzle span)
SA_BOX = (1, BM)                  # sa_t map: one k-block's 128 row scales (512 contiguous bytes), no swizzle
SWIZZLE = "128B"
BLOCK = 384                       # 1 producer warpgroup + 2 consumer warpgroups
STAGE_TILES = BM * BK + BN * BK   # 32 KiB of A + B tiles per stage
SA_BYTES = BM * 4                 # 512 B of row scales per stage
SMEM_BYTES = 1024 + STAGES * STAGE_TILES + -(-STAGES * SA_BYTES // 1024) * 1024  # 200704 B = 196 KiB
# ||D - ref|| / ||ref|| against the fp32 (GPU) / float64 (CPU) product of the dequantized operands: D's bf16
# rounding alone is 1.5-1.7e-3 (kernels/fp8_gemm/bench.py RTOL). A k-block's row scales taken from another k-block
# (they differ by ~ 10 % between blocks of N(0, 1) data), one row's scale used for the row 8 below, or sb forgotten
# (~ 100x) are errors of 1e-2 and more: far above it on every test shape but one — scales of k-block 0 for every
# k-block are right where there is one k-block (K = 128), and only there.
CHECK = {"rtol": 2e-3}


def tensor_maps(inputs: dict) -> tuple:
    """The three maps the harness passes: A and B (as uint8) with AB_BOX and the 128B swizzle, sa_t with SA_BOX."""
    a8, b8, sa_v = map_views(inputs["a"], inputs["sa_t"], inputs["b"])
    return (cached_tensor_map(a8, AB_BOX, SWIZZLE), cached_tensor_map(b8, AB_BOX, SWIZZLE),
            cached_tensor_map(sa_v, SA_BOX))


def grid_for(shape) -> tuple[int, int]:
    m, n, _ = workload.check_shape(shape)
    return (n // BN, m // BM)


def launch_args(inputs: dict, out: torch.Tensor) -> dict:
    a, b = inputs["a"], inputs["b"]
    m, k = a.shape
    n = b.shape[0]
    return {"grid": grid_for((m, n, k)), "block": BLOCK, "smem": SMEM_BYTES,
            "args": (*tensor_maps(inputs), out, inputs["sb"], i32(m), i32(n), i32(k))}


# The trusted baseline of the throughput bar (the grader spec's vendor_fraction): cuBLASLt's FP8 GEMM with the same
# block scaling on the exercise's own inputs at its bench shape, timed in the grading run (kernels.runner.
# exercise_baseline). Tensor-core clocks depend on the data, so the bar compares like with like only on the inputs
# the answer is timed on.
VENDOR = "cuBLASLt FP8 block-scaled GEMM (1x128 x 128x128, torch scaled_mm) on the exercise's inputs"

# A record written before the baseline was kept beside the margins: the vendor's row of the same run at the bench
# shape (autograder.calibration reads it, and says so).
VENDOR_ROW = ("cublaslt_blockwise", "8192x8192x8192")


def vendor(inputs: dict, out: torch.Tensor):
    """A zero-argument call that does the exercise's work with the vendor library: D = the block-scaled product by
    cuBLASLt (kernels/fp8_gemm/baselines.cublaslt_blockwise, into a tensor of its own: torch's scaled mm takes no
    output), its padded scale layout made once, here, outside the timed calls."""
    from .baselines import cublaslt_blockwise, pad_k_blocks

    a, sa_t, b, sb = inputs["a"], inputs["sa_t"], inputs["b"], inputs["sb"]
    sb_padded = pad_k_blocks(sb)
    return lambda: cublaslt_blockwise(a, sa_t, b, sb, sb_padded=sb_padded)
