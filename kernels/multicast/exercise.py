"""Week 2, day 3's graded exercise: bcast_add — z = bf16(float(x) + float(W[r % 64])) for every 64-row tile of x.

A (64, cols) table W is added to every 64-row block of a (rows, cols) tensor x — a position table added to a batch of
64-token sequences: z[64 b + t, c] = x[64 b + t, c] + W[t, c]. Every CTA needs the W tile of its column block, the
same tile for every row block: the CTAs of a cluster (consecutive row blocks, one column block) load it ONCE, by TMA
multicast, instead of once each. The workload half of the exercise (inputs, reference, the fixed launch contract,
bytes): the grader and the notebook share it. The student writes only the CUDA kernel.

Launch contract
---------------
    extern "C" __global__ void bcast_add(const __grid_constant__ CUtensorMap x_map,
                                         const __grid_constant__ CUtensorMap w_map,
                                         const __grid_constant__ CUtensorMap z_map,
                                         const __nv_bfloat16* x, const __nv_bfloat16* w, __nv_bfloat16* z,
                                         int rows, int cols)

- x, z: row-major (rows, cols) bf16; w: row-major (64, cols) bf16; contiguous, 16-byte aligned; cols a multiple of 8
  (a row is a multiple of 16 bytes: the tensor-map rule), rows >= 64, cols >= 128 (box <= tensor). rows and cols are
  otherwise arbitrary: the last row / column of tiles is partial.
- x_map, z_map: kernels.tensormap.make_tensor_map(t, BOX), BOX = (64, 128) = 16 KiB of bf16; w_map: box
  (64 // CLUSTER, 128) — one slice of the W tile per CTA of the cluster. No swizzle; out-of-bounds elements read as
  zero; a TMA store writes nothing out of bounds.
- cluster = (CLUSTER, 1, 1), CLUSTER = 2; grid = (round_up(ceil(rows / 64), CLUSTER), ceil(cols / 128)) blocks:
  blockIdx.x is the row tile, blockIdx.y the column tile, so a cluster's CTAs are consecutive row tiles of one
  column tile and need the same W tile. When ceil(rows / 64) is odd the last CTA's row tile lies wholly past the
  end: it must still take part (receive the W slices sent to it, send its own, stay for the cluster barrier).
- block = 128 threads; dynamic shared memory = SMEM_BYTES (33 KiB: x tile + W tile + 128 bytes of alignment slack;
  6 CTAs fit on an SM).

The pointers are there so that a plain-load kernel can be written against the same contract (it scores no path
points). The benchmark also launches the course solution with CLUSTER = 4 (`launch_args(..., cluster=4)`).
"""

from __future__ import annotations

import torch

from ..check import bf16_randn
from ..launch import ceil_div, i32
from ..tensormap import cached_tensor_map as cached

NAME = "bcast_add"
KERNEL = "bcast_add"
BOX = (64, 128)          # (rows, cols) of the x / z maps' box, PyTorch order
W_ROWS = 64              # W is (64, cols): one tile high
CLUSTER = 2              # CTAs per cluster in the launch contract
BLOCK = 128
SMEM_BYTES = 33 * 1024   # dynamic shared memory per CTA: 2 x 16 KiB + slack
CHECK = {"exact": True}  # one fp32 add, one rounding to bf16: the reference is bit-exact
ELEMENT_BYTES = 2


def make_inputs(shape, seed: int, device="cuda") -> dict:
    rows, cols = shape
    g = torch.Generator(device=device).manual_seed(seed)
    return {"x": bf16_randn(rows, cols, generator=g), "w": bf16_randn(W_ROWS, cols, generator=g, scale=2)}


def reference(inputs: dict) -> torch.Tensor:
    x, w = inputs["x"], inputs["w"]
    rows = x.shape[0]
    idx = torch.arange(rows, device=x.device) % W_ROWS
    return (x.float() + w.float()[idx]).to(torch.bfloat16)


def make_output(inputs: dict) -> torch.Tensor:
    return torch.empty_like(inputs["x"])


def grid_for(shape, cluster: int = CLUSTER) -> tuple[int, int]:
    rows, cols = shape
    return (ceil_div(ceil_div(rows, BOX[0]), cluster) * cluster, ceil_div(cols, BOX[1]))


def w_box(cluster: int = CLUSTER) -> tuple[int, int]:
    if cluster not in (1, 2, 4, 8) or W_ROWS % cluster:
        raise ValueError(f"cluster {cluster}: the W tile's 64 rows split into 1, 2, 4 or 8 slices")
    return (W_ROWS // cluster, BOX[1])


def tensor_map(t: torch.Tensor, box=BOX):
    """The map the harness passes for t: kernels.tensormap.make_tensor_map(t, box), cached (kernels.tensormap.cached_tensor_map)."""
    return cached(t, box)


def launch_args(inputs: dict, out: torch.Tensor, cluster: int = CLUSTER) -> dict:
    x, w = inputs["x"], inputs["w"]
    rows, cols = x.shape
    return {"grid": grid_for((rows, cols), cluster), "block": BLOCK, "smem": SMEM_BYTES, "cluster": cluster,
            "args": (tensor_map(x), tensor_map(w, w_box(cluster)), tensor_map(out), x, w, out, i32(rows),
                     i32(cols))}


def bytes_moved(shape) -> int:
    rows, cols = shape
    return 2 * ELEMENT_BYTES * rows * cols + ELEMENT_BYTES * W_ROWS * cols  # x in, z out, W in once


def flops(shape) -> int:
    rows, cols = shape
    return rows * cols


def ctas(shape, cluster: int = CLUSTER) -> int:
    gx, gy = grid_for(shape, cluster)
    return gx * gy
