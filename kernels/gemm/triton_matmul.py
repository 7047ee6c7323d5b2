"""The same GEMM in Triton: a persistent matmul on TMA tensor descriptors (Triton 3.6+), for the day's table.

    c = matmul_tma(a, b, c)               # a (M, K), b (N, K) bf16 -> c = a @ b.T, host-side TensorDescriptor
    art = aot_compile()                   # sm_90a cubin + PTX, compiled ahead of time (no GPU needed)

One program per SM walks output tiles in the same grouped order as rung 4 (GROUP_M tile rows per column sweep). Per
tile: `a_desc.load` / `b_desc.load` become TMA loads (UTMALDG) into a NUM_STAGES-deep ring that Triton's software
pipeliner builds, `tl.dot(a, b.T)` becomes wgmma (HGMMA) on the shared-memory tiles (b is K-major, so `.T` is a
descriptor flag, not a data movement), and the bf16 tile leaves through a TMA store. What Triton decides for us:
the ring, the barriers and their parities, the wgmma issue/wait pattern — rungs 2-5 spell each of those out.
"""

from __future__ import annotations

import triton
import triton.language as tl
from ..compile import compile_triton

BM, BN, BK = 128, 256, 64   # the tile of rungs 4-5
GROUP_M = 8
NUM_STAGES = 3              # 3 x 48 KiB ring + the 64 KiB epilogue tile
NUM_WARPS = 8               # two consumer warpgroups' worth of threads


def _matmul_tma(a_desc, b_desc, c_desc, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
                GROUP_M: tl.constexpr, NUM_SMS: tl.constexpr):
    pid = tl.program_id(0)
    num_m = tl.cdiv(M, BM)
    num_n = tl.cdiv(N, BN)
    k_tiles = tl.cdiv(K, BK)
    per_group = GROUP_M * num_n
    for tile in range(pid, num_m * num_n, NUM_SMS):
        first_m = (tile // per_group) * GROUP_M
        height = min(num_m - first_m, GROUP_M)
        pm = first_m + (tile % per_group) % height
        pn = (tile % per_group) // height
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for kt in range(k_tiles):
            a = a_desc.load([pm * BM, kt * BK])      # TMA: (BM, BK) box, zero-filled past the edges
            b = b_desc.load([pn * BN, kt * BK])      # TMA: (BN, BK) box of B (N, K)
            acc = tl.dot(a, b.T, acc)                # wgmma, fp32 accumulate
        c_desc.store([pm * BM, pn * BN], acc.to(tl.bfloat16))  # TMA store, clipped at the edges


matmul_tma_kernel = triton.jit(_matmul_tma)
LAST_COMPILED: dict = {}


def matmul_tma(a, b, c, *, num_stages: int = NUM_STAGES, num_warps: int = NUM_WARPS, bm: int = BM, bn: int = BN,
               bk: int = BK, group_m: int = GROUP_M):
    """c = a @ b.T with a persistent grid of one program per SM; the tile (bm, bn, bk), ring depth and warps are the
    day's fixed choice unless given (kernels/gemm/baselines.py times other choices)."""
    import torch
    from triton.tools.tensor_descriptor import TensorDescriptor

    m, k = a.shape
    n = b.shape[0]
    sms = torch.cuda.get_device_properties(a.device).multi_processor_count
    grid = (min(sms, triton.cdiv(m, bm) * triton.cdiv(n, bn)),)
    kern = matmul_tma_kernel[grid](TensorDescriptor.from_tensor(a, [bm, bk]), TensorDescriptor.from_tensor(b, [bn, bk]),
                                   TensorDescriptor.from_tensor(c, [bm, bn]), m, n, k, BM=bm, BN=bn, BK=bk,
                                   GROUP_M=group_m, NUM_SMS=sms, num_stages=num_stages, num_warps=num_warps)
    if hasattr(kern, "asm"):
        LAST_COMPILED["matmul"] = kern
    return c


def aot_compile(*, num_sms: int = 132, capability: int = 90) -> dict:
    """Compile the Triton matmul ahead of time for sm_90a (no GPU) -> {"name", "cubin", "ptx", "shared", "triton"}."""
    from triton.runtime.jit import JITFunction


    sig = {"a_desc": f"tensordesc<bf16[{BM}, {BK}]>", "b_desc": f"tensordesc<bf16[{BN}, {BK}]>",
           "c_desc": f"tensordesc<bf16[{BM}, {BN}]>", "M": "i32", "N": "i32", "K": "i32", "BM": "constexpr",
           "BN": "constexpr", "BK": "constexpr", "GROUP_M": "constexpr", "NUM_SMS": "constexpr"}
    return compile_triton(JITFunction(_matmul_tma), sig,
                          {"BM": BM, "BN": BN, "BK": BK, "GROUP_M": GROUP_M, "NUM_SMS": num_sms},
                          num_warps=NUM_WARPS, num_stages=NUM_STAGES, capability=capability)
