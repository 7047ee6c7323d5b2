"""Week 2, day 1's graded exercise: swizzle_transpose — y = x^T for a bf16 matrix, read from 128B-swizzled TMA tiles.

The workload half of the exercise (inputs, reference, the fixed launch contract, bytes): the grader and the notebook
share it. The student writes only the CUDA kernel; the harness builds both tensor maps and launches it so.

Launch contract
---------------
    extern "C" __global__ void swizzle_transpose(const __grid_constant__ CUtensorMap x_map,
                                                 const __grid_constant__ CUtensorMap y_map,
                                                 const __nv_bfloat16* x, __nv_bfloat16* y, int rows, int cols)

- x: row-major (rows, cols) bf16; y: row-major (cols, rows) bf16; y[c][r] = x[r][c], bit-exactly. Both contiguous,
  16-byte aligned; rows and cols are multiples of 8 (a row of x AND a row of y must be a multiple of 16 bytes: the
  tensor-map rule for strides) and >= 64 (a box may not exceed the tensor), otherwise arbitrary: tiles at the right
  and bottom edges are partial.
- x_map = make_tensor_map(x, (64, 64), swizzle="128B"), y_map = make_tensor_map(y, (64, 64), swizzle="128B"): boxes
  of 64 rows x 64 bf16 = 64 rows of 128 bytes (8 KiB), CU_TENSOR_MAP_SWIZZLE_128B, out-of-bounds elements read as
  zero; a TMA store writes nothing out of bounds. In shared memory, row r of a box lies at r * 128 and its logical
  16-byte chunk j at chunk j ^ (r % 8) — if the box starts on a 1024-byte boundary (align the buffers yourself).
- block = 128 threads; grid = min(number of tiles, BLOCKS_PER_SM x SMs): persistent — block b handles tiles
  b, b + gridDim.x, ... of the row-major (ceil(rows / 64), ceil(cols / 64)) tile grid of x.
- dynamic shared memory = SMEM_BYTES (65 KiB: eight 8 KiB tiles and 1 KiB of slack to align to 1024 bytes). Two
  blocks fit on an SM.

The pointers are there so that a plain-load kernel can be written against the same contract (it scores no path
points: the path part requires UTMALDG and forbids LDG / LD / LDGSTS in swizzle_transpose, and on the GPU the TMA
must carry >= 90% of the bytes read).
"""

from __future__ import annotations

import torch

from ..launch import box_count, i32
from ..tensormap import cached_tensor_map as cached

NAME = "swizzle_transpose"
KERNEL = "swizzle_transpose"
BOX = (64, 64)            # (rows, cols) of both maps' box, PyTorch order: 64 rows x 128 bytes
SWIZZLE = "128B"
BLOCK = 128
BLOCKS_PER_SM = 2
SMEM_BYTES = 65 * 1024    # dynamic shared memory per block (8 tiles of 8 KiB + 1 KiB alignment slack)
CHECK = {"exact": True}   # a transpose moves bits
ELEMENT_BYTES = 2


def make_inputs(shape, seed: int, device="cuda") -> dict:
    rows, cols = shape
    g = torch.Generator(device=device).manual_seed(seed)
    return {"x": torch.randn(rows, cols, generator=g, device=device).to(torch.bfloat16)}


def reference(inputs: dict) -> torch.Tensor:
    return inputs["x"].t().contiguous()


def make_output(inputs: dict) -> torch.Tensor:
    x = inputs["x"]
    return torch.empty(x.shape[1], x.shape[0], dtype=x.dtype, device=x.device)


def tiles(shape) -> int:
    return box_count(shape, BOX)


def tensor_map(t: torch.Tensor):
    """The map the harness passes for t: make_tensor_map(t, BOX, swizzle="128B"), cached (kernels.tensormap.cached_tensor_map)."""
    return cached(t, BOX, SWIZZLE)


def grid_for(shape, sm_count: int) -> int:
    return max(1, min(tiles(shape), BLOCKS_PER_SM * sm_count))


def launch_args(inputs: dict, out: torch.Tensor) -> dict:
    x = inputs["x"]
    rows, cols = x.shape
    sms = torch.cuda.get_device_properties(x.device).multi_processor_count
    return {"grid": grid_for((rows, cols), sms), "block": BLOCK, "smem": SMEM_BYTES,
            "args": (tensor_map(x), tensor_map(out), x, out, i32(rows), i32(cols))}


def bytes_moved(shape) -> int:
    rows, cols = shape
    return 2 * ELEMENT_BYTES * rows * cols  # read x once, write y once


def flops(shape) -> int:
    return 0
