"""Launchers of week 2, day 1's demo kernels. Every rung has the same call shape: colsum(x, swizzle) -> sums.

    s = colsum(x)                          # SWIZZLE_128B boxes of 64 rows x 128 B, one pass over each tile
    s = colsum(x, "none")                  # the same tile with no swizzle: a chunk column is 8-way conflicted
    s = colsum(x, "none", span=32)         # no swizzle, boxes of 64 x 32 B (2-way)
    s = colsum(x, "64B", passes=32)        # SWIZZLE_64B, each tile read 32 times (shared-memory bound)
    layout = probe("128B")                 # where the TMA put each element of a (16, 64) box

Inputs are checked here, before anything touches a GPU, with errors that name the field; the tensor-map rules
(swizzled box inner dimension <= the swizzle span, 16-byte aligned rows, ...) come from kernels.tensormap.
"""

from __future__ import annotations


import torch

from ..compile import day_kernel
from ..launch import ceil_div, i32, launch
from ..tensormap import TensorMapError, make_tensor_map, validate_tensor  # noqa: F401
from ..tensormap import cached_tensor_map as tensor_map  # the one descriptor cache
from ..tensormap_rules import SWIZZLE_SPAN
from .workload import LAYOUTS, MAX_PASSES, TILE, layout_name

SWIZZLES = ("none", "32B", "64B", "128B")
STAGES = 4                 # colsum.cu: STAGES
THREADS = 256              # colsum.cu: THREADS (8 warps: warp w reads chunk column w)
TILE_BYTES = TILE[0] * TILE[1] * 2
ALIGN_SLACK = 1024         # colsum.cu aligns its dynamic shared memory to 1024 bytes
SMEM_BYTES = STAGES * TILE_BYTES + ALIGN_SLACK
PROBE_SHAPE = (16, 64)     # probe(): a (16, 64) int16 tensor, each element holding its own code r * 64 + c


cubin, source = day_kernel("swizzle", "colsum.cu")  # cubin(): compiled once; source(start, end): for the notebook


def kernel_name(swizzle: str, span: int) -> str:
    return f"colsum_{layout_name(swizzle, span)}"


def box(span: int) -> tuple[int, int]:
    """The map's box for a layout: 64 rows x `span` bytes of bf16."""
    return (TILE[0], span // 2)


def _span(swizzle: str, span: int | None) -> int:
    if swizzle not in SWIZZLES:
        raise ValueError(f"swizzle {swizzle!r}: choose one of {SWIZZLES}")
    if span is None:
        return 128 if swizzle == "none" else SWIZZLE_SPAN[swizzle]
    if swizzle != "none" and span != SWIZZLE_SPAN[swizzle]:
        raise ValueError(f"span = {span} with swizzle {swizzle}: a {swizzle}-swizzled box has rows of exactly "
                         f"{SWIZZLE_SPAN[swizzle]} bytes here (the mode allows at most that; colsum tiles 64 columns "
                         "with 128 / span boxes)")
    if span not in (32, 64, 128):
        raise ValueError(f"span = {span}: boxes of 32, 64 or 128 bytes per row")
    return span


def _check(x, swizzle: str, span: int, passes: int) -> None:
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"colsum wants a torch.Tensor, got {type(x).__name__}")
    if x.dim() != 2:
        raise ValueError(f"colsum wants a 2-D (rows, cols) tensor, got {x.dim()}-D shape {tuple(x.shape)}")
    if x.dtype != torch.bfloat16:
        raise ValueError(f"colsum reads bf16; got {x.dtype}")
    if not x.is_contiguous():
        raise ValueError(f"x must be row-major contiguous (strides {x.stride()} for shape {tuple(x.shape)})")
    if not (isinstance(passes, int) and 1 <= passes <= MAX_PASSES):
        raise ValueError(f"passes = {passes!r}: 1..{MAX_PASSES} (the kernel's bf16 partial sums stay exact up to "
                         f"{MAX_PASSES} passes of the workload's integers)")
    rows, cols = x.shape
    if rows < TILE[0] or cols < TILE[1]:
        raise ValueError(f"shape {tuple(x.shape)}: rows and cols >= {TILE[0]} (a box may not exceed the tensor)")
    # The tensor-map rules (alignment, row stride a multiple of 16 bytes, box inner bytes <= swizzle span, ...).
    validate_tensor(x, box(span), swizzle=swizzle)
    if not x.is_cuda:
        raise ValueError(f"colsum runs on an sm_90 GPU; x is on {x.device} (the tensor-map rules above passed)")


def colsum(x: torch.Tensor, swizzle: str = "128B", *, span: int | None = None, passes: int = 1,
           out: torch.Tensor | None = None) -> torch.Tensor:
    """passes x the column sums of x (fp32), x read through TMA tiles stored with `swizzle` (span: the box's row
    in bytes, only to choose for swizzle "none": 128, 64 or 32)."""
    span = _span(swizzle, span)
    _check(x, swizzle, span, passes)
    rows, cols = x.shape
    y = torch.empty(cols, dtype=torch.float32, device=x.device) if out is None else out
    if y.shape != (cols,) or y.dtype != torch.float32 or not y.is_contiguous() or y.device != x.device:
        raise ValueError(f"out must be a contiguous float32 tensor of shape ({cols},) on {x.device}")
    launch(cubin(), kernel_name(swizzle, span), grid=ceil_div(cols, TILE[1]), block=THREADS, smem=SMEM_BYTES,
           args=(tensor_map(x, box(span), swizzle), y, i32(rows), i32(cols), i32(passes)))
    return y


def probe(swizzle: str = "128B", offset: int = 0, *, span: int | None = None) -> torch.Tensor:
    """Where the TMA put each element: a (16, span / 2) int16 tensor whose element (r, c) is the code
    (row * 64 + col) of the element the box's byte layout holds at r * span + 2 c bytes from the destination —
    the destination being a 1024-byte aligned shared-memory address + `offset` (a multiple of 128)."""
    span = _span(swizzle, span)
    if offset % 128 or not 0 <= offset < 1024:
        raise ValueError(f"offset = {offset}: a multiple of 128 in 0..896 (TMA destinations are 128-byte aligned)")
    t = (torch.arange(PROBE_SHAPE[0] * PROBE_SHAPE[1], dtype=torch.int32) % 32768).to(torch.int16)
    t = t.view(PROBE_SHAPE).cuda()
    pbox = (PROBE_SHAPE[0], span // 2)
    nbytes = pbox[0] * span
    out = torch.full((nbytes,), 255, dtype=torch.uint8, device="cuda")
    launch(cubin(), "swizzle_probe", grid=1, block=32, smem=1024 + offset + nbytes,
           args=(make_tensor_map(t, pbox, swizzle=swizzle), out, i32(offset), i32(nbytes)))
    torch.cuda.synchronize()
    return out.view(torch.int16).view(pbox).cpu()


def layouts() -> list[tuple[str, int]]:
    return list(LAYOUTS)


__all__ = ["SWIZZLES", "colsum", "probe", "cubin", "source", "kernel_name", "box", "SMEM_BYTES", "TensorMapError"]
