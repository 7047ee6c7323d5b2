"""Week 2, day 4's graded exercise: gemm_mainloop — C = A . B^T (bf16 in, fp32 accumulate, bf16 out) with a
warp-specialized TMA + WGMMA mainloop: a producer thread, two consumer warpgroups, a STAGES-deep full/empty ring,
(128, 256) tiles of C, a persistent grid.

The workload half of the exercise (inputs, reference, the fixed launch contract, FLOPs): the grader and the notebook
share it. The student writes the two k-loops — the producer's (wait empty, expect_tx, three TMA loads) and the
consumers' (wait full, descriptors, four wgmma m64n256k16 under fence / commit / wait, release) — inside a given
kernel (tile order, accumulator stores, barrier set-up and setmaxnreg are given).

Launch contract
---------------
    extern "C" __global__ void gemm_mainloop(const __grid_constant__ CUtensorMap a_map,
                                             const __grid_constant__ CUtensorMap b_map,
                                             __nv_bfloat16* C, int M, int N, int K)

- A: (M, K) bf16 row-major; B: (N, K) bf16 row-major (B given transposed: both operands K-major, as wgmma reads
  them with no transpose); C: (M, N) bf16 row-major, C = bf16(float(A) @ float(B).T) with fp32 accumulation.
  K % 8 == 0 and N % 8 == 0 (16-byte rows), M, N >= 128, K >= 64 (box <= tensor); otherwise arbitrary: tiles at the
  bottom, the right and the K tail are partial (the TMA zero-fills what lies outside; the given stores clip C).
- a_map, b_map: kernels.tensormap.make_tensor_map(t, BOX, swizzle="128B") — box (128, 64): 128 rows x 64 bf16 =
  128 bytes per row, the 128B-swizzle span; out-of-bounds elements read as zero.
- block = 384 threads = 3 warpgroups (0: producer, 1-2: consumers); grid = min(tiles, SMs): one persistent CTA per
  SM walks tiles blockIdx.x, + gridDim.x, ... of the (ceil(M/128), ceil(N/256)) tile grid in the given order.
- dynamic shared memory = SMEM_BYTES (193 KiB: up to 4 stages of 48 KiB — A box, two B boxes — plus 1 KiB to align
  the base to 1024 bytes).
"""

from __future__ import annotations

import torch

from ..launch import ceil_div, i32

NAME = "gemm_mainloop"
KERNEL = "gemm_mainloop"
BOX = (128, 64)            # (box rows, box cols) of both maps, PyTorch order: 128 rows x 128 bytes
SWIZZLE = "128B"
TILE = (128, 256)          # (BM, BN) of C per CTA
BLOCK = 384                # 1 producer warpgroup + 2 consumer warpgroups
SMEM_BYTES = 193 * 1024    # 4 x 48 KiB + 1 KiB alignment slack
MAX_STAGES = 4             # what SMEM_BYTES holds
# fp32 accumulation of bf16 products, one rounding to bf16: ||out - ref|| / ||ref|| within bf16's rounding (the
# reference accumulates in fp32 in another order; both round once). A wrong k-tile or a stale stage is ~ 1e-1.
CHECK = {"rtol": 8e-3}
ELEMENT_BYTES = 2


def make_inputs(shape, seed: int, device="cuda") -> dict:
    """A (M, K) and B (N, K), bf16, entries ~ N(0, 1) / sqrt(sqrt(K)) so that C's entries are ~ N(0, 1)."""
    m, n, k = shape
    g = torch.Generator(device=device).manual_seed(seed)
    scale = k ** -0.25
    a = (torch.randn(m, k, generator=g, device=device) * scale).to(torch.bfloat16)
    b = (torch.randn(n, k, generator=g, device=device) * scale).to(torch.bfloat16)
    return {"a": a, "b": b}


def reference(inputs: dict) -> torch.Tensor:
    """fp32 product of the bf16 inputs (on the inputs' device), rounded to bf16 once."""
    return (inputs["a"].float() @ inputs["b"].float().T).to(torch.bfloat16)


def make_output(inputs: dict) -> torch.Tensor:
    a, b = inputs["a"], inputs["b"]
    return torch.empty(a.shape[0], b.shape[0], dtype=torch.bfloat16, device=a.device)


def tiles(shape) -> int:
    m, n, _ = shape
    return ceil_div(m, TILE[0]) * ceil_div(n, TILE[1])


def tensor_map(t: torch.Tensor, box=BOX):
    """The map the harness passes for t: kernels.tensormap.make_tensor_map(t, box, swizzle="128B"), cached."""
    from ..tensormap import cached_tensor_map as cached

    return cached(t, box, SWIZZLE)


def grid_for(shape, sm_count: int) -> int:
    return max(1, min(tiles(shape), sm_count))


def launch_args(inputs: dict, out: torch.Tensor) -> dict:
    a, b = inputs["a"], inputs["b"]
    m, k = a.shape
    n = b.shape[0]
    sms = torch.cuda.get_device_properties(a.device).multi_processor_count
    return {"grid": grid_for((m, n, k), sms), "block": BLOCK, "smem": SMEM_BYTES,
            "args": (tensor_map(a), tensor_map(b), out, i32(m), i32(n), i32(k))}


def bytes_moved(shape) -> int:
    m, n, k = shape
    return ELEMENT_BYTES * (m * k + n * k + m * n)  # A and B read once, C written once (compulsory)


def flops(shape) -> int:
    m, n, k = shape
    return 2 * m * n * k


# The trusted baseline of the throughput bar (the grader spec's vendor_fraction): cuBLAS on the exercise's
# own inputs at its bench shape, timed in the grading run (kernels.runner.exercise_baseline). Tensor-core clocks
# depend on the data, so the bar compares like with like only on the inputs the answer is timed on.
VENDOR = "cuBLAS bf16 (torch.matmul) on the exercise's inputs"


# A record written before the baseline was kept beside the margins: the vendor's row of the same run at the bench
# shape (autograder.calibration reads it, and says so).
VENDOR_ROW = ("cublas", "8192x8192x8192")


def vendor(inputs: dict, out: torch.Tensor):
    """A zero-argument call that does the exercise's work with the vendor library (C = A B^T into `out`)."""
    from .launch import gemm

    return lambda: gemm(inputs["a"], inputs["b"], "cublas", out=out)
