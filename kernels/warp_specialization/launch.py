"""Launchers of week 2, day 2's demo: three rungs of one TMA ring, one call shape.

    out = rowsum(x)                                  # rung 3: warp-specialized + setmaxnreg, 4 stages
    out = rowsum(x, "uniform", stages=2)             # rung 1: no specialization (256 threads, thread 0 issues)
    out = rowsum(x, "ws", stages=8)                  # rung 2: producer warp + 2 consumer warpgroups (384 threads)

Inputs are checked before anything touches a GPU; the tensor-map rules come from kernels.tensormap.
"""

from __future__ import annotations


import torch

from ..compile import day_kernel
from ..launch import expect_tensor, i32, launch
from ..tensormap import cached_tensor_map, validate_tensor
from .workload import BLOCK, KERNELS, TILE, TILE_BYTES, VARIANTS, tiles

MAX_STAGES = 8           # ws_rowsum.cu: MAX_STAGES barriers per ring
SMEM_SLACK = 128         # the kernel re-aligns the dynamic shared-memory base to 128 bytes
DEFAULT_STAGES = 4
DEFAULT_VARIANT = "ws_regs"

def tensor_map(x: torch.Tensor):
    """The TILE-box map of x (kernels.tensormap.cached_tensor_map)."""
    return cached_tensor_map(x, TILE)


cubin, source = day_kernel("warp_specialization", "ws_rowsum.cu")  # cubin(): compiled once; source(start, end): for the notebook


def smem_bytes(stages: int) -> int:
    return stages * TILE_BYTES + SMEM_SLACK


def _check(x, variant: str, stages: int) -> None:
    if variant not in VARIANTS:
        raise ValueError(f"variant {variant!r}: choose one of {VARIANTS}")
    expect_tensor("x", x, 2)  # (rows, cols), row-major
    if not (isinstance(stages, int) and 1 <= stages <= MAX_STAGES):
        raise ValueError(f"stages = {stages!r}: the ring has 1..{MAX_STAGES} stages")
    validate_tensor(x, TILE)  # alignment, 16-byte row strides, box <= tensor: the rule that breaks, by name
    if not x.is_cuda:
        raise ValueError(f"rowsum runs on an sm_90 GPU; x is on {x.device} (the tensor-map rules above passed)")


def rowsum(x: torch.Tensor, variant: str = DEFAULT_VARIANT, *, stages: int = DEFAULT_STAGES,
           out: torch.Tensor | None = None) -> torch.Tensor:
    """out[r] = sum_c x[r, c] (fp32), through a ring of `stages` TMA stages of (32, 256) bf16 tiles."""
    _check(x, variant, stages)
    rows, cols = x.shape
    out = torch.zeros(rows, dtype=torch.float32, device=x.device) if out is None else out.zero_()
    sms = torch.cuda.get_device_properties(x.device).multi_processor_count
    launch(cubin(), KERNELS[variant], grid=min(tiles((rows, cols)), sms), block=BLOCK[variant],
           smem=smem_bytes(stages), args=(tensor_map(x), out, i32(rows), i32(cols), i32(stages)))
    return out


__all__ = ["rowsum", "cubin", "source", "smem_bytes", "MAX_STAGES", "VARIANTS"]
