"""Week 2, day 2's graded exercise: ws_axpy — z = bf16(a * float(x) + float(y)) on 2-D bf16 tensors, through a
warp-specialized TMA pipeline (one producer warp, two consumer warpgroups, a full and an empty mbarrier per stage).

The workload half of the exercise (inputs, reference, the fixed launch contract, bytes): the grader and the notebook
share it. The student writes the hand-over of the pipeline (the producer's loop, the consumers' wait and release);
the harness builds the tensor maps and launches the kernel with the contract below.

Launch contract
---------------
    extern "C" __global__ void ws_axpy(const __grid_constant__ CUtensorMap x_map,
                                       const __grid_constant__ CUtensorMap y_map,
                                       const __nv_bfloat16* x, const __nv_bfloat16* y, __nv_bfloat16* z,
                                       float a, int rows, int cols)

- x, y, z: row-major (rows, cols) bf16, contiguous, 16-byte aligned; cols is a multiple of 8 (a row is a multiple
  of 16 bytes: the tensor-map rule for strides) and rows, cols >= 64 (box <= tensor); otherwise arbitrary: the
  last row / column of tiles is partial.
- x_map, y_map: kernels.tensormap.make_tensor_map(t, BOX) — box (64, 64) = 8 KiB of bf16, no swizzle,
  out-of-bounds elements read as zero. z is written by the consumer threads with 16-byte stores (in-bounds only).
- block = 384 threads = 3 warpgroups (0: producer, 1-2: consumers); grid = min(tiles, SMs): one persistent block
  per SM walks tiles blockIdx.x, blockIdx.x + gridDim.x, ... of the row-major (ceil(rows/64), ceil(cols/64)) grid.
- dynamic shared memory = SMEM_BYTES (161 KiB: up to 10 stages of an x box and a y box, 16 KiB each, plus 128 bytes
  to align the base to 128 bytes).
- a: a runtime fp32 scalar; z = bf16_rn(fp32(a * x) + y), the multiply and the add each rounded to fp32 (no fused
  multiply-add: __fmul_rn / __fadd_rn), so the reference is bit-exact.

The pointers x and y are passed so that a plain-load kernel can be written against the same contract (it scores no
path points: the path part requires UTMALDG and USETMAXREG in ws_axpy and forbids LDG, and on the GPU >= 90 % of
the bytes read must come through TMA).
"""

from __future__ import annotations

import torch

from ..launch import box_count, f32, i32
from ..tensormap import cached_tensor_map as cached

NAME = "ws_axpy"
KERNEL = "ws_axpy"
BOX = (64, 64)            # (box rows, box cols) of both maps, PyTorch order
BLOCK = 384               # 1 producer warpgroup + 2 consumer warpgroups
SMEM_BYTES = 161 * 1024   # dynamic shared memory per block
MAX_STAGES = 10           # what SMEM_BYTES holds: 10 x 16 KiB + 128 <= 161 KiB
CHECK = {"exact": True}   # one fp32 multiply, one fp32 add, one rounding to bf16: the reference is bit-exact
ELEMENT_BYTES = 2
BENCH_SHAPE = (8192, 8192)  # the grader spec's bench_shape (a test holds them equal)


def make_inputs(shape, seed: int, device="cuda") -> dict:
    rows, cols = shape
    g = torch.Generator(device=device).manual_seed(seed)
    x = torch.randn(rows, cols, generator=g, device=device).to(torch.bfloat16)
    y = torch.randn(rows, cols, generator=g, device=device).to(torch.bfloat16)
    a = float(torch.empty((), device="cpu").uniform_(0.5, 2.0, generator=torch.Generator().manual_seed(seed)))
    return {"x": x, "y": y, "a": a}


def reference(inputs: dict) -> torch.Tensor:
    a = torch.tensor(inputs["a"], dtype=torch.float32, device=inputs["x"].device)
    ax = inputs["x"].float() * a  # fp32 multiply, rounded
    return (ax + inputs["y"].float()).to(torch.bfloat16)  # fp32 add, rounded, then one rounding to bf16


def make_output(inputs: dict) -> torch.Tensor:
    return torch.empty_like(inputs["x"])


def tiles(shape) -> int:
    return box_count(shape, BOX)


def tensor_map(t: torch.Tensor, box=BOX):
    """The map the harness passes for t: kernels.tensormap.make_tensor_map(t, box), cached (kernels.tensormap.cached_tensor_map)."""
    return cached(t, box)


def grid_for(shape, sm_count: int) -> int:
    return max(1, min(tiles(shape), sm_count))


def launch_args(inputs: dict, out: torch.Tensor) -> dict:
    x, y = inputs["x"], inputs["y"]
    rows, cols = x.shape
    sms = torch.cuda.get_device_properties(x.device).multi_processor_count
    return {"grid": grid_for((rows, cols), sms), "block": BLOCK, "smem": SMEM_BYTES,
            "args": (tensor_map(x), tensor_map(y), x, y, out, f32(inputs["a"]), i32(rows), i32(cols))}


def bytes_moved(shape) -> int:
    rows, cols = shape
    return 3 * ELEMENT_BYTES * rows * cols  # read x and y once, write z once


def flops(shape) -> int:
    rows, cols = shape
    return 2 * rows * cols
