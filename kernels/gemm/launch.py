"""Launchers of week 2, day 4's GEMM ladder. Every rung has the same call shape: gemm(a, b, variant) -> c.

    c = gemm(a, b)                          # a (M, K), b (N, K) bf16 -> c = a @ b.T (M, N) bf16; rung 5 by default
    c = gemm(a, b, "tiled")                 # rung 1: shared-memory tiles + FMA
    c = gemm(a, b, "wgmma")                 # rung 2: TMA + wgmma, one warpgroup, one stage
    c = gemm(a, b, "pipelined")             # rung 3: STAGES-deep ring, producer warp + consumer warpgroup
    c = gemm(a, b, "persistent")            # rung 4: 2 consumer warpgroups, (128, 256) tiles, persistent grid
    c = gemm(a, b, "cluster")               # rung 5: rung 4 + cluster of 2 sharing B by TMA multicast
    c = gemm(a, b, "triton")                # Triton: persistent matmul on tensor descriptors (triton_matmul.py)
    c = gemm(a, b, "cublas")                # torch.matmul(a, b.T): cuBLAS, the ceiling

Inputs are checked here, before anything touches a GPU, with errors that name the rule.
"""

from __future__ import annotations

from functools import lru_cache

import torch

from ..compile import compile_cuda, excerpt, kernel_file
from ..launch import ceil_div, i32, launch
from ..tensormap import validate_tensor

VARIANTS = ("tiled", "wgmma", "pipelined", "persistent", "cluster", "triton", "cublas")
CUDA_VARIANTS = ("tiled", "wgmma", "pipelined", "persistent", "cluster")
BOX = (128, 64)             # every tensor map: 128 rows x 64 bf16 (128 bytes: the 128B-swizzle span)
SWIZZLE = "128B"
STAGE_SLACK = 1024          # the wgmma kernels align their shared-memory base to 1024 bytes themselves
FILES = {"tiled": "gemm_tiled.cu", "wgmma": "gemm_wgmma.cu", "pipelined": "gemm_pipelined.cu",
         "persistent": "gemm_persistent.cu", "cluster": "gemm_persistent.cu"}
KERNELS = {"tiled": "gemm_tiled", "wgmma": "gemm_wgmma", "pipelined": "gemm_pipelined",
           "persistent": "gemm_persistent", "cluster": "gemm_cluster"}
# Per rung: (BM, BN) tile of C per CTA, threads per block, stages, bytes per stage (the .cu files' constants;
# tests/test_gemm.py reads them back from the sources).
CONFIG = {
    "tiled": {"tile": (64, 64), "block": 256, "stages": 1, "stage_bytes": 0, "cluster": 1},
    "wgmma": {"tile": (128, 128), "block": 128, "stages": 1, "stage_bytes": 32 * 1024, "cluster": 1},
    "pipelined": {"tile": (128, 128), "block": 160, "stages": 4, "stage_bytes": 32 * 1024, "cluster": 1},
    "persistent": {"tile": (128, 256), "block": 384, "stages": 4, "stage_bytes": 48 * 1024, "cluster": 1},
    "cluster": {"tile": (128, 256), "block": 384, "stages": 4, "stage_bytes": 48 * 1024, "cluster": 2},
}


MAX_STAGES = {"pipelined": 6}  # 6 x 32 KiB + 1 KiB <= 227 KiB


@lru_cache(maxsize=None)
def cubin(variant: str, stages: int | None = None):
    """The rung's compiled module; `stages` (rung 3 only) recompiles gemm_pipelined.cu with GEMM_STAGES."""
    defines = {"GEMM_STAGES": stages} if stages is not None else None
    return compile_cuda(kernel_file("gemm", FILES[variant]), defines=defines)


def source(variant: str, start: str | None = None, end: str | None = None) -> str:
    """The rung's .cu file, or the lines from the first containing `start` up to (not including) the first later
    line containing `end` (for the notebook)."""
    return excerpt(kernel_file("gemm", FILES[variant]), start, end)


def tensor_map(t: torch.Tensor):
    """The (128, 64)-box, 128B-swizzled map of a K-major operand (kernels.tensormap.cached_tensor_map)."""
    from ..tensormap import cached_tensor_map as cached

    return cached(t, BOX, SWIZZLE)


def smem_bytes(variant: str, stages: int | None = None) -> int:
    cfg = CONFIG[variant]
    return (stages or cfg["stages"]) * cfg["stage_bytes"] + STAGE_SLACK if cfg["stage_bytes"] else 0


def grid(variant: str, shape, sms: int):
    """The launch grid of a rung for (M, N, K) on a GPU with `sms` SMs."""
    m, n, _ = shape
    bm, bn = CONFIG[variant]["tile"]
    if variant == "persistent":
        return max(1, min(ceil_div(m, bm) * ceil_div(n, bn), sms))
    if variant == "cluster":
        pairs = ceil_div(ceil_div(m, bm), 2) * ceil_div(n, bn)
        return 2 * max(1, min(pairs, sms // 2))
    return (ceil_div(n, bn), ceil_div(m, bm))


def check_inputs(a, b, out=None) -> tuple[int, int, int]:
    for name, t in (("a", a), ("b", b)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
        if t.dim() != 2 or t.dtype != torch.bfloat16 or not t.is_contiguous():
            raise ValueError(f"{name} must be a contiguous 2-D bf16 tensor, got {t.dtype} {tuple(t.shape)} "
                             f"strides {t.stride()}")
    (m, k), (n, kb) = a.shape, b.shape
    if k != kb:
        raise ValueError(f"a is (M, K) = {tuple(a.shape)} and b is (N, K) = {tuple(b.shape)}: K differs. b is given "
                         "transposed (N rows of K): pass w, not w.T, for c = a @ w.T")
    if k % 8 or n % 8:
        raise ValueError(f"K = {k} and N = {n} must be multiples of 8 (16-byte rows: the tensor-map stride rule)")
    if m < BOX[0] or n < BOX[0] or k < BOX[1]:
        raise ValueError(f"(M, N, K) = {(m, n, k)}: M, N >= {BOX[0]} and K >= {BOX[1]} (a TMA box may not be "
                         "larger than the tensor)")
    if out is not None and (out.shape != (m, n) or out.dtype != torch.bfloat16 or not out.is_contiguous()):
        raise ValueError(f"out must be a contiguous bf16 ({m}, {n}) tensor")
    return m, n, k


def gemm(a: torch.Tensor, b: torch.Tensor, variant: str = "cluster", *, out: torch.Tensor | None = None,
         stages: int | None = None):
    """c = a @ b.T (bf16, fp32 accumulate) with the rung `variant` (`stages`: rung 3's ring depth, 1..6)."""
    if variant not in VARIANTS:
        raise ValueError(f"variant {variant!r}: choose one of {VARIANTS}")
    if stages is not None and not (variant in MAX_STAGES and 1 <= stages <= MAX_STAGES[variant]):
        raise ValueError(f"stages = {stages}: only 'pipelined' takes a ring depth, 1..{MAX_STAGES['pipelined']}")
    m, n, k = check_inputs(a, b, out)
    if variant in ("wgmma", "pipelined", "persistent", "cluster", "triton"):
        validate_tensor(a, BOX, swizzle=SWIZZLE)
        validate_tensor(b, BOX, swizzle=SWIZZLE)
    if not a.is_cuda or not b.is_cuda:
        raise ValueError("gemm runs on an sm_90 GPU; the inputs are on the CPU (the layout checks above passed)")
    c = torch.empty(m, n, dtype=torch.bfloat16, device=a.device) if out is None else out
    if variant == "cublas":
        return torch.matmul(a, b.T, out=c)
    if variant == "triton":
        from .triton_matmul import matmul_tma

        return matmul_tma(a, b, c)
    sms = torch.cuda.get_device_properties(a.device).multi_processor_count
    cfg = CONFIG[variant]
    if variant == "tiled":
        args = (a, b, c, i32(m), i32(n), i32(k))
    else:
        args = (tensor_map(a), tensor_map(b), c, i32(m), i32(n), i32(k))
    launch(cubin(variant, stages), KERNELS[variant], grid=grid(variant, (m, n, k), sms), block=cfg["block"],
           smem=smem_bytes(variant, stages), args=args, cluster=2 if variant == "cluster" else None)
    return c


def release_order(cubin, kernel: str) -> list[str]:
    """The two instructions that follow the consumer's last HGMMA in `kernel`'s SASS, among the group wait
    (WARPGROUP.DEPBAR) and the stage release (SYNCS.ARRIVE.TRANS64.A1T0): ["WARPGROUP.DEPBAR.LE",
    "SYNCS.ARRIVE.TRANS64.A1T0"] when the tensor core is done with the stage before it goes back."""
    from ..sass import disassemble

    seq = [i.opcode for i in disassemble(cubin)[kernel]
           if i.opcode.startswith(("HGMMA", "WARPGROUP.DEPBAR", "SYNCS.ARRIVE.TRANS64.A1T0"))]
    last = max(k for k, o in enumerate(seq) if o.startswith("HGMMA"))
    return seq[last + 1:last + 3]


__all__ = ["release_order", "VARIANTS", "CUDA_VARIANTS", "CONFIG", "gemm", "cubin", "source", "grid", "smem_bytes", "tensor_map"]
