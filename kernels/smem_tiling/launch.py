"""Launchers of day 2's kernels. Every rung of a family has the same call shape.

    y = transpose(x)                      # the padded shared-memory tile (the default)
    y = transpose(x, variant="naive")     # "naive" | "smem" | "padded" | "swizzled"
    s = record_sums(x)                    # the demo: s[i] = sum_k x[i, k]^2 for x of shape (n, 32), same variants

The transposes are launched as the exercise's contract says: block (32, 8), grid (ceil(cols / 32), ceil(rows / 32)).
The record sums (records.cu, the demo a student release runs): block 256, grid ceil(n / 256).
"""

from __future__ import annotations

from functools import lru_cache

import torch

from ..compile import compile_cuda, has_kernel_file, kernel_file
from ..launch import ceil_div, i32, launch

VARIANTS = ("naive", "smem", "padded", "swizzled")
# The rungs this copy of the course can run: a student release leaves transpose.cu out (its padded and swizzled
# rungs are the day's exercise answered: autograder.release.INSTRUCTOR_ONLY); the notebook shows their record.
RUNGS = VARIANTS if has_kernel_file("smem_tiling", "transpose.cu") else ()
TILE = 32
BLOCK = (TILE, 8)
MAX_GRID_Y = 65535  # CUDA's limit on gridDim.y: rows <= 65535 * 32
INT_MAX = 2**31 - 1


@lru_cache(maxsize=1)
def cubin():
    return compile_cuda(kernel_file("smem_tiling", "transpose.cu"))


def kernel_name(variant: str) -> str:
    return f"transpose_{variant}"


def grid_for(rows: int, cols: int) -> tuple[int, int]:
    return (ceil_div(cols, TILE), ceil_div(rows, TILE))


def _float32_input(x, variant: str, who: str, why: str) -> None:
    """What both launchers check first: a variant of VARIANTS and x a float32 torch.Tensor (`why`: said after
    "float32" when it is not)."""
    if variant not in VARIANTS:
        raise ValueError(f"variant {variant!r}: choose one of {VARIANTS}")
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{who} wants a torch.Tensor, got {type(x).__name__}")
    if x.dtype != torch.float32:
        raise ValueError(f"{who} wants float32{why}, got {x.dtype}")


def validate(x, variant: str = "padded", out=None) -> None:
    """Raise ValueError / TypeError naming what is wrong; device last, so the checks run on CPU tensors too."""
    _float32_input(x, variant, "transpose", " (one element = one 4-byte bank word)")
    if x.dim() != 2:
        raise ValueError(f"transpose wants a 2-D matrix, got {x.dim()}-D shape {tuple(x.shape)}")
    rows, cols = x.shape
    if rows == 0 or cols == 0:
        raise ValueError(f"transpose wants a non-empty matrix, got shape {tuple(x.shape)}")
    if not x.is_contiguous():
        raise ValueError(f"transpose wants a contiguous (row-major) x, got strides {x.stride()}: call .contiguous()")
    if rows > INT_MAX or cols > INT_MAX:
        raise ValueError(f"rows and cols are passed as int: shape {tuple(x.shape)} is too large")
    if ceil_div(rows, TILE) > MAX_GRID_Y:
        raise ValueError(f"rows = {rows} needs {ceil_div(rows, TILE)} blocks in y; CUDA allows {MAX_GRID_Y} "
                         f"(rows <= {MAX_GRID_Y * TILE})")
    if out is not None:
        if not isinstance(out, torch.Tensor):
            raise TypeError(f"out must be a torch.Tensor, got {type(out).__name__}")
        if out.dtype != x.dtype or tuple(out.shape) != (cols, rows) or not out.is_contiguous():
            raise ValueError(f"out must be a contiguous float32 ({cols}, {rows}) tensor, got {out.dtype} "
                             f"{tuple(out.shape)}{'' if out.is_contiguous() else ' (not contiguous)'}")
        if out.device != x.device:
            raise ValueError(f"out is on {out.device}, x on {x.device}")
        if out.data_ptr() < x.data_ptr() + x.nbytes and x.data_ptr() < out.data_ptr() + out.nbytes:
            raise ValueError("out overlaps x: the transpose is out of place")
    if not x.is_cuda:
        raise ValueError(f"x is on {x.device}: move it to the GPU (x.cuda())")


def transpose(x: torch.Tensor, *, variant: str = "padded", out: torch.Tensor | None = None) -> torch.Tensor:
    """y = x^T (a new contiguous (cols, rows) tensor, or `out`) with the chosen rung of transpose.cu."""
    validate(x, variant, out)
    rows, cols = x.shape
    y = torch.empty(cols, rows, dtype=x.dtype, device=x.device) if out is None else out
    launch(cubin(), kernel_name(variant), grid=grid_for(rows, cols), block=BLOCK,
           args=(x, y, i32(rows), i32(cols)))
    return y


# ------------------------------------------------------------------------------- the demo: sums over records
RECORD = 32           # floats per record (one 128-byte line)
RECORD_THREADS = 256  # 8 warps per block, 32 records per warp


@lru_cache(maxsize=1)
def records_cubin():
    return compile_cuda(kernel_file("smem_tiling", "records.cu"))


def validate_records(x, variant: str = "padded", out=None) -> None:
    """Raise ValueError / TypeError naming what is wrong; device last, so the checks run on CPU tensors too."""
    _float32_input(x, variant, "record_sums", " records")
    if x.dim() != 2 or x.shape[1] != RECORD:
        raise ValueError(f"record_sums wants records of {RECORD} floats: shape (n, {RECORD}), got {tuple(x.shape)}")
    n = x.shape[0]
    if n == 0 or n > INT_MAX:
        raise ValueError(f"record_sums wants 1 <= n <= {INT_MAX} records, got {n}")
    if not x.is_contiguous():
        raise ValueError(f"record_sums wants contiguous records, got strides {x.stride()}: call .contiguous()")
    if out is not None:
        if not isinstance(out, torch.Tensor):
            raise TypeError(f"out must be a torch.Tensor, got {type(out).__name__}")
        if out.dtype != torch.float32 or tuple(out.shape) != (n,) or not out.is_contiguous():
            raise ValueError(f"out must be a contiguous float32 ({n},) tensor, got {out.dtype} {tuple(out.shape)}")
        if out.device != x.device:
            raise ValueError(f"out is on {out.device}, x on {x.device}")
    if not x.is_cuda:
        raise ValueError(f"x is on {x.device}: move it to the GPU (x.cuda())")


def record_sums(x: torch.Tensor, *, variant: str = "padded", out: torch.Tensor | None = None) -> torch.Tensor:
    """s[i] = sum over k of x[i, k]^2 (k in order 0..31) with the chosen rung of records.cu."""
    validate_records(x, variant, out)
    n = x.shape[0]
    s = torch.empty(n, dtype=torch.float32, device=x.device) if out is None else out
    launch(records_cubin(), f"records_{variant}", grid=(ceil_div(n, RECORD_THREADS),), block=(RECORD_THREADS,),
           args=(x, s, i32(n)))
    return s
