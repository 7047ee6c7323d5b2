"""Day 5's graded exercise: tma_add — z = bf16(float(x) + float(y)) on 2-D bf16 tensors, through TMA.

The workload half of the exercise (inputs, reference, the fixed launch contract, bytes): the grader and the
notebook share it. The student writes only the CUDA kernel; the harness builds the three tensor maps and launches
it with the contract below.

Launch contract
---------------
    extern "C" __global__ void tma_add(const __grid_constant__ CUtensorMap x_map,
                                       const __grid_constant__ CUtensorMap y_map,
                                       const __grid_constant__ CUtensorMap z_map,
                                       const __nv_bfloat16* x, const __nv_bfloat16* y, __nv_bfloat16* z,
                                       int rows, int cols)

- x, y, z: row-major (rows, cols) bf16, contiguous, 16-byte aligned; cols is a multiple of 8 (a row is a multiple
  of 16 bytes: the tensor-map rule for strides) and rows, cols >= 64 (the driver accepts a box larger than the
  tensor, a cuda.core built on CCCL does not: the graded shapes stay legal for both). rows and cols are otherwise
  arbitrary: the last row / column of boxes is partial.
- x_map, y_map, z_map: kernels.tensormap.make_tensor_map(t, BOX) — box (64, 64) = 64 rows x 64 columns = 8 KiB,
  no swizzle, no interleave, out-of-bounds elements read as zero; a TMA store writes nothing out of bounds.
- block = 128 threads; grid = min(number of boxes, BLOCKS_PER_SM x SMs): a persistent grid, so each block walks
  boxes blockIdx.x, blockIdx.x + gridDim.x, ... (row-major over the (ceil(rows/64), ceil(cols/64)) box grid);
- dynamic shared memory = SMEM_BYTES (97 KiB; the kernel aligns its base to 128 bytes itself: keep 128 bytes of
  slack). Two blocks fit on an SM (2 x (97 KiB + 1 KiB reserved) <= 228 KiB).

The pointers are there so that a plain-load kernel can be written against the same contract (it scores no path
points: the path part requires UTMALDG / UTMASTG and forbids LDG / STG in tma_add).
"""

from __future__ import annotations

import torch

from ..check import bf16_randn
from ..launch import box_count, i32

NAME = "tma_add"
KERNEL = "tma_add"
BOX = (64, 64)          # (box rows, box cols) of all three maps, PyTorch order
BLOCK = 128
BLOCKS_PER_SM = 2
SMEM_BYTES = 97 * 1024  # dynamic shared memory per block
CHECK = {"exact": True}  # one fp32 add, one rounding to bf16: the reference is bit-exact
ELEMENT_BYTES = 2


def make_inputs(shape, seed: int, device="cuda") -> dict:
    rows, cols = shape
    # Drawn on the device that uses them: the grader makes fresh 8192 x 8192 inputs before every launch it times.
    g = torch.Generator(device=device).manual_seed(seed)
    return {"x": bf16_randn(rows, cols, generator=g), "y": bf16_randn(rows, cols, generator=g, scale=3)}


def reference(inputs: dict) -> torch.Tensor:
    return (inputs["x"].float() + inputs["y"].float()).to(torch.bfloat16)


def make_output(inputs: dict) -> torch.Tensor:
    return torch.empty_like(inputs["x"])


def boxes(shape) -> int:
    return box_count(shape, BOX)


def tensor_map(t: torch.Tensor, box=BOX):
    """The map the harness passes for t: kernels.tensormap.make_tensor_map(t, box), cached (kernels.tensormap.cached_tensor_map)."""
    from .launch import tensor_map as cached

    return cached(t, box)


def grid_for(shape, sm_count: int) -> int:
    return max(1, min(boxes(shape), BLOCKS_PER_SM * sm_count))


def launch_args(inputs: dict, out: torch.Tensor) -> dict:
    x, y = inputs["x"], inputs["y"]
    rows, cols = x.shape
    sms = torch.cuda.get_device_properties(x.device).multi_processor_count
    return {"grid": grid_for((rows, cols), sms), "block": BLOCK, "smem": SMEM_BYTES,
            "args": (tensor_map(x), tensor_map(y), tensor_map(out), x, y, out, i32(rows), i32(cols))}


def bytes_moved(shape) -> int:
    rows, cols = shape
    return 3 * ELEMENT_BYTES * rows * cols  # read x and y once, write z once


def flops(shape) -> int:
    rows, cols = shape
    return rows * cols
