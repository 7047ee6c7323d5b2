"""Day 1's graded exercise: row_bias — y[r, c] = bf16(float(x[r, c]) + float(bias[c])) on a 2-D bf16 tensor.

The workload half of the exercise (inputs, reference, the fixed launch contract, bytes): the grader and the
notebook share it. The student writes only the CUDA kernel; the harness launches it with the contract below.

Launch contract: block = 256 threads, grid = ceil(n / 2048) with n = rows * cols: thread t owns the 8 consecutive
elements [8t, 8t + 8) of the flattened tensor (16 bytes of x and 16 of y). x, bias and y are 16-byte aligned;
cols may be any value >= 1, so a thread's 8 elements can straddle a row boundary and the last thread may own
fewer than 8.
"""

from __future__ import annotations

import torch

from ..launch import ceil_div, i32, i64

NAME = "row_bias"
KERNEL = "row_bias"  # extern "C" __global__ void row_bias(const __nv_bfloat16* x, const __nv_bfloat16* bias,
#                                                          __nv_bfloat16* y, long long n, int cols)
BLOCK = 256
ELEMS_PER_THREAD = 8
CHECK = {"exact": True}  # one fp32 add, one round to bf16: the reference is bit-exact


def make_inputs(shape, seed: int, device="cuda") -> dict:
    rows, cols = shape
    g = torch.Generator(device=device).manual_seed(seed)
    x = torch.randn(rows, cols, generator=g, device=device).to(torch.bfloat16)
    bias = (torch.randn(cols, generator=g, device=device) * 4).to(torch.bfloat16)
    return {"x": x, "bias": bias}


def reference(inputs: dict) -> torch.Tensor:
    return (inputs["x"].float() + inputs["bias"].float()).to(torch.bfloat16)


def make_output(inputs: dict) -> torch.Tensor:
    return torch.empty_like(inputs["x"])


def launch_args(inputs: dict, out: torch.Tensor) -> dict:
    x = inputs["x"]
    n = x.numel()
    return {"grid": ceil_div(n, BLOCK * ELEMS_PER_THREAD), "block": BLOCK, "smem": 0,
            "args": (x, inputs["bias"], out, i64(n), i32(x.shape[1]))}


def bytes_moved(shape) -> int:
    rows, cols = shape
    return 2 * (2 * rows * cols + cols)  # read x once, write y once, read bias once (bf16 = 2 bytes)


def flops(shape) -> int:
    rows, cols = shape
    return rows * cols
