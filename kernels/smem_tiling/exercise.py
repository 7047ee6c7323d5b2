"""Day 2's graded exercise: transpose — a conflict-free tiled transpose through shared memory.

The workload half of the exercise (inputs, reference, the fixed launch contract, bytes): the grader and the
notebook share it. The student writes only the CUDA kernel; the harness launches it with the contract below.

Kernel: extern "C" __global__ void transpose(const float* x, float* y, int rows, int cols)
    x: row-major (rows, cols) float32; y: row-major (cols, rows) float32; y[c][r] = x[r][c] bit-exactly.

Launch contract: block = (32, 8) = 256 threads; grid = (ceil(cols / 32), ceil(rows / 32)); no dynamic shared
memory (a static `__shared__` tile is the student's to declare). Block (bx, by) owns the 32x32 tile of x whose
top-left element is (32 * by, 32 * bx); a thread moves 4 elements of it. rows and cols are any values >= 1, so the
tiles on the right and bottom edges are partial. x and y are distinct, contiguous, 256-byte-aligned allocations.
"""

from __future__ import annotations

import torch

from ..launch import ceil_div, i32
from . import workload

NAME = "transpose"
KERNEL = "transpose"  # extern "C" __global__ void transpose(const float* x, float* y, int rows, int cols)
TILE = 32
BLOCK = (TILE, 8)
CHECK = {"exact": True}  # a transpose copies bits: nothing but the exact value is right


def make_inputs(shape, seed: int, device="cuda") -> dict:
    return {"x": workload.make_inputs(shape, seed, device=device)}


def reference(inputs: dict) -> torch.Tensor:
    return workload.reference(inputs["x"])


def make_output(inputs: dict) -> torch.Tensor:
    x = inputs["x"]
    return torch.empty(x.shape[1], x.shape[0], dtype=x.dtype, device=x.device)


def launch_args(inputs: dict, out: torch.Tensor) -> dict:
    x = inputs["x"]
    rows, cols = x.shape
    return {"grid": (ceil_div(cols, TILE), ceil_div(rows, TILE)), "block": BLOCK, "smem": 0,
            "args": (x, out, i32(rows), i32(cols))}


def bytes_moved(shape) -> int:
    return workload.bytes_moved(shape)


def flops(shape) -> int:
    return workload.flops(shape)
