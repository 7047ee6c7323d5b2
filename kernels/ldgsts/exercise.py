"""Day 3's graded exercise: blur2d_bf16 — a 3x3 weighted stencil over a pitch-linear bf16 image, staged with cp.async.

    y[r][c] = sum_{dr,dc in -1..1} w[3(dr+1) + (dc+1)] * float(x[r+dr][c+dc])    (x = 0 outside [0,H) x [0,W))

accumulated and stored in fp32. The workload half of the exercise (inputs, reference, the fixed launch contract,
bytes): the grader and the notebook share it. The student writes only the CUDA kernel; the harness launches it with
the contract below.

Kernel: extern "C" __global__ void blur2d_bf16(const __nv_bfloat16* x, const float* w, float* y, int H, int W, int ld)

Memory layout (pitch-linear, shape = (H, W, ld)): element (r, c) of x is x[r * ld + c], of y is y[r * ld + c]: the
same pitch ld (in elements) for both. ld % 8 == 0, so every row of x starts on a 16-byte boundary (and of y on a
32-byte one); 1 <= W <= ld. The columns W .. ld-1 of every row of x are padding and hold NaN, and x lies between NaN
guard rows (two whole rows above row 0 and below row H-1): reading any element outside the image puts a NaN into
the output. The columns W .. ld-1 of y are not the kernel's to write.

Launch contract: block = 256 threads, grid = (ceil(W / 128), ceil(H / 16)), no dynamic shared memory (a static
__shared__ tile is the student's to declare). Block (bx, by) owns the 16 x 128 outputs whose top-left is
(16 by, 128 bx); it needs x rows 16 by - 1 .. 16 by + 16 and columns 128 bx - 1 .. 128 bx + 128 — a one-row halo
above and below, and, for 16-byte copies that stay aligned, one 8-element chunk left and right. H and W are any
values >= 1, so tiles on the right and bottom edges are partial.

Check: fp32 accumulation against a float64 reference rounded once to fp32; ||y - ref|| / ||ref|| <= 1e-5 (an fp32
sum of 9 products is off by a few ulp; one wrong element of the largest test shape already fails it:
tests/test_ldgsts.py).
Hardware path: LDGSTS (cp.async) in blur2d_bf16's SASS.
"""

from __future__ import annotations

import torch

from ..launch import ceil_div, i32
from .workload import guarded_image, stencil2d_reference

NAME = "blur2d_bf16"
KERNEL = "blur2d_bf16"
TAPS = 9  # 3 x 3
BLOCK = 256
TILE_ROWS, TILE_COLS = 16, 128
TILE = TILE_ROWS * TILE_COLS  # 2048 outputs per block: 8 per thread
VEC = 8  # bf16 per 16-byte chunk: ld must be a multiple of it
GUARD_ROWS = 2  # NaN rows above and below the image
# 8192 x 16384 visible, pitch 16448 (64 padding columns): 256 MiB of bf16 in, 512 MiB of fp32 out (L2: 50 MB)
BENCH_SHAPE = (8192, 16384, 16448)
CHECK = {"rtol": 1e-5}


def _shape(shape) -> tuple[int, int, int]:
    h, w, ld = (int(v) for v in tuple(shape))
    if h < 1 or w < 1:
        raise ValueError(f"shape (H, W, ld) = {(h, w, ld)}: H and W must be >= 1")
    if w > ld:
        raise ValueError(f"shape (H, W, ld) = {(h, w, ld)}: the visible width W exceeds the row pitch ld")
    if ld % VEC:
        raise ValueError(f"shape (H, W, ld) = {(h, w, ld)}: ld must be a multiple of {VEC} (rows 16-byte aligned)")
    return h, w, ld


def make_inputs(shape, seed: int, device="cuda") -> dict:
    """x ~ N(0, 1) in bf16, an (H, W) view of pitch ld inside NaN padding and NaN guard rows; 9 positive fp32 weights
    that sum to 1."""
    h, w, ld = _shape(shape)
    g = torch.Generator(device=device).manual_seed(seed)
    x = guarded_image(h, w, ld, torch.bfloat16, device, GUARD_ROWS)
    x.copy_(torch.randn(h, w, generator=g, device=device).to(torch.bfloat16))
    k = torch.rand(TAPS, generator=g, device=device) + 0.25
    return {"x": x, "w": k / k.sum()}


def reference(inputs: dict) -> torch.Tensor:
    return stencil2d_reference(inputs["x"], inputs["w"])


def make_output(inputs: dict) -> torch.Tensor:
    """y: (H, W) fp32 with x's pitch ld (a view of an H x ld buffer)."""
    x = inputs["x"]
    h, w = x.shape
    ld = x.stride(0)
    return torch.empty(h * ld, dtype=torch.float32, device=x.device).view(h, ld)[:, :w]


def launch_args(inputs: dict, out: torch.Tensor) -> dict:
    x, w = inputs["x"], inputs["w"]
    if x.dtype != torch.bfloat16 or x.dim() != 2 or x.stride(1) != 1:
        raise ValueError(f"x must be a 2-D bf16 image with unit column stride (got {x.dtype}, {tuple(x.shape)}, "
                         f"strides {x.stride()})")
    h, wd = x.shape
    ld = x.stride(0)
    _shape((h, wd, ld))
    if x.data_ptr() % 16:
        raise ValueError(f"x must start on a 16-byte boundary (data_ptr % 16 = {x.data_ptr() % 16})")
    if w.dtype != torch.float32 or w.numel() != TAPS or not w.is_contiguous():
        raise ValueError(f"w must be {TAPS} contiguous float32 weights")
    if out.dtype != torch.float32 or tuple(out.shape) != (h, wd) or out.stride() != (ld, 1) or out.data_ptr() % 16:
        raise ValueError(f"y must be an ({h}, {wd}) float32 view with x's pitch ({ld}, 1), 16-byte aligned "
                         f"(got {tuple(out.shape)}, strides {out.stride()})")
    grid = (ceil_div(wd, TILE_COLS), ceil_div(h, TILE_ROWS))
    if grid[1] > 65535:
        raise ValueError(f"H = {h}: at most {65535 * TILE_ROWS} rows (grid.y <= 65535)")
    return {"grid": grid, "block": BLOCK, "smem": 0, "args": (x, w, out, i32(h), i32(wd), i32(ld))}


def bytes_moved(shape) -> int:
    h, w, _ = _shape(shape)
    return 2 * h * w + 4 * h * w + 4 * TAPS  # read x's visible part (bf16) once, write y (fp32) once, the 9 weights


def flops(shape) -> int:
    h, w, _ = _shape(shape)
    return 2 * TAPS * h * w
