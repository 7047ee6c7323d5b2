"""Day 3's graded exercise: smooth_bf16 — a 9-point weighted stencil over a bf16 signal, staged with cp.async.

    y[i] = sum_{k=0..8} w[k] * float(x[i + k - 4])      (x = 0 outside [0, n)), accumulated and stored in fp32

The workload half of the exercise (inputs, reference, the fixed launch contract, bytes): the grader and the
notebook share it. The student writes only the CUDA kernel; the harness launches it with the contract below.

Kernel: extern "C" __global__ void smooth_bf16(const __nv_bfloat16* x, const float* w, float* y, long long n)

Launch contract: block = 256 threads, grid = ceil(n / 2048), no dynamic shared memory (a static __shared__ tile
is the student's to declare). Block b owns the 2048 outputs [2048 b, 2048 b + 2048): its tile of x plus a halo of
4 elements on each side. x and y are 16-byte aligned; n is any value >= 1, so the last block's tile is partial.
x lies between NaN guard bands: reading any x[j] with j < 0 or j >= n puts a NaN into the output — the halo of the
first and last tiles must be zero-filled, not loaded.

Check: fp32 accumulation against a float64 reference rounded once to fp32; ||y - ref|| / ||ref|| <= 1e-5 (an fp32
sum of 9 products is off by a few ulp; one wrong element of a 100k-element output already costs ~3e-3).
Hardware path: LDGSTS (cp.async) in smooth_bf16's SASS.
"""

from __future__ import annotations

import torch

from ..launch import ceil_div, i64
from .workload import guarded, stencil_reference

NAME = "smooth_bf16"
KERNEL = "smooth_bf16"
R = 4  # radius: 9 taps
TAPS = 2 * R + 1
BLOCK = 256
TILE = 2048  # outputs per block: 8 bf16 (one 16-byte chunk) per thread
BENCH_N = 1 << 27  # 256 MB of bf16 in, 512 MB of fp32 out: far beyond the 50 MB L2
CHECK = {"rtol": 1e-5}


def make_inputs(shape, seed: int, device="cuda") -> dict:
    """x ~ N(0, 1) in bf16 inside NaN guard bands; 9 positive fp32 weights that sum to 1."""
    (n,) = tuple(shape)
    g = torch.Generator(device=device).manual_seed(seed)
    x = guarded(n, torch.bfloat16, device)
    x.copy_(torch.randn(n, generator=g, device=device).to(torch.bfloat16))
    w = torch.rand(TAPS, generator=g, device=device) + 0.25
    return {"x": x, "w": w / w.sum()}


def reference(inputs: dict) -> torch.Tensor:
    return stencil_reference(inputs["x"], inputs["w"], R)


def make_output(inputs: dict) -> torch.Tensor:
    x = inputs["x"]
    return torch.empty(x.numel(), dtype=torch.float32, device=x.device)


def launch_args(inputs: dict, out: torch.Tensor) -> dict:
    x = inputs["x"]
    n = x.numel()
    return {"grid": ceil_div(n, TILE), "block": BLOCK, "smem": 0, "args": (x, inputs["w"], out, i64(n))}


def bytes_moved(shape) -> int:
    (n,) = tuple(shape)
    return 2 * n + 4 * n + 4 * TAPS  # read x (bf16) once, write y (fp32) once, read the 9 weights


def flops(shape) -> int:
    (n,) = tuple(shape)
    return 2 * TAPS * n
