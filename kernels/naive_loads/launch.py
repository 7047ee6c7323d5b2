"""Launchers of day 1's copy kernels. Every rung has the same call shape: copy(x, variant=...) -> y."""

from __future__ import annotations

from functools import lru_cache

import torch

from ..compile import compile_cuda, kernel_file
from ..launch import ceil_div, i32, i64, launch
from .workload import STRIDED_COLS

VARIANTS = ("strided", "scalar", "vec16", "grid_stride", "triton")
BLOCK = 256


@lru_cache(maxsize=1)
def cubin():
    return compile_cuda(kernel_file("naive_loads", "copy.cu"))


def _check(x: torch.Tensor, variant: str) -> None:
    if variant not in VARIANTS:
        raise ValueError(f"variant {variant!r}: choose one of {VARIANTS}")
    if x.dtype != torch.float32 or not x.is_cuda or not x.is_contiguous() or x.dim() != 1:
        raise ValueError(f"copy wants a contiguous 1-D float32 CUDA tensor, got {x.dtype} {tuple(x.shape)} "
                         f"on {x.device}{'' if x.is_contiguous() else ' (not contiguous)'}")
    if variant in ("vec16", "grid_stride"):
        if x.data_ptr() % 16 or x.numel() % 4:
            raise ValueError(f"{variant} moves 16-byte float4s: x must be 16-byte aligned (offset "
                             f"{x.data_ptr() % 16}) and hold a multiple of 4 floats (got {x.numel()})")
    if variant == "strided" and x.numel() % STRIDED_COLS:
        raise ValueError(f"strided walks a (n/{STRIDED_COLS}, {STRIDED_COLS}) view: n must be a multiple of "
                         f"{STRIDED_COLS} (got {x.numel()})")


def copy(x: torch.Tensor, variant: str = "vec16", out: torch.Tensor | None = None) -> torch.Tensor:
    _check(x, variant)
    y = torch.empty_like(x) if out is None else out
    n = x.numel()
    if variant == "triton":
        from .triton_copy import copy_triton

        return copy_triton(x, y)
    if variant == "strided":
        launch(cubin(), "copy_strided", grid=ceil_div(n, BLOCK), block=BLOCK, args=(x, y, i64(n), i32(STRIDED_COLS)))
    elif variant == "scalar":
        launch(cubin(), "copy_scalar", grid=ceil_div(n, BLOCK), block=BLOCK, args=(x, y, i64(n)))
    elif variant == "vec16":
        launch(cubin(), "copy_vec16", grid=ceil_div(n // 4, BLOCK), block=BLOCK, args=(x, y, i64(n // 4)))
    else:
        sms = torch.cuda.get_device_properties(x.device).multi_processor_count
        grid = min(sms * 8, ceil_div(n // 4, BLOCK))  # 8 blocks of 256 threads = 2048 threads: a full SM
        launch(cubin(), "copy_grid_stride", grid=grid, block=BLOCK, args=(x, y, i64(n // 4)))
    return y
