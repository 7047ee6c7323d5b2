"""Week 2, day 2's demo workload: the row sums of a row-major (rows, cols) bf16 matrix, out[r] = sum_c x[r, c] in
fp32, streamed tile by tile through a ring of TMA stages (kernels/warp_specialization/ws_rowsum.cu).

Declared once here: inputs, reference, bytes moved, tile shape, and the variants x stages the benchmark sweeps. The
kernels read every byte of x once and write rows x 4 bytes (partial sums added with atomics).
"""

from __future__ import annotations

import torch

DTYPE = torch.bfloat16
ELEMENT_BYTES = 2
TILE = (32, 256)                 # (BM, BN): the TMA box, 32 rows x 256 cols of bf16 = 16 KiB
TILE_BYTES = TILE[0] * TILE[1] * ELEMENT_BYTES
BENCH_SHAPE = (8192, 8192)       # 128 MiB read: far beyond the 50 MB L2; 32 x 256 = 8192 tiles, 62 per block
# Awkward shapes for the checks: partial tiles at the bottom and right edges (rows not multiples of 32, cols not
# multiples of 256), one tile, one tile row, and one shape with many tiles per block (4160 tiles: >= 31 per block
# at 132 blocks, every stage of an 8-stage ring reused >= 3 times, so a parity that does not flip shows).
# cols is a multiple of 8 (a row must be a multiple of 16 bytes) and every dimension >= the box (box <= tensor).
TEST_SHAPES = ((32, 256), (33, 264), (129, 1000), (1031, 520), (2080, 16384))
VARIANTS = ("uniform", "ws", "ws_regs")  # rung 1, 2, 3
KERNELS = {"uniform": "rowsum_uniform", "ws": "rowsum_ws", "ws_regs": "rowsum_ws_regs"}
BLOCK = {"uniform": 256, "ws": 384, "ws_regs": 384}
SWEEP_STAGES = (1, 2, 4, 8)
RTOL = 1e-4  # fp32 sums in another order than the float64 reference: ||out - ref|| / ||ref|| <= 1e-4


def make_inputs(shape, seed: int, device="cuda") -> torch.Tensor:
    rows, cols = shape
    g = torch.Generator(device="cpu").manual_seed(seed)
    return torch.randn(rows, cols, generator=g).to(DTYPE).to(device)


def reference(x: torch.Tensor) -> torch.Tensor:
    return x.double().sum(dim=1).float()


def bytes_moved(shape) -> int:
    rows, cols = shape
    return ELEMENT_BYTES * rows * cols + 4 * rows  # x read once, out written once


def tiles(shape) -> int:
    rows, cols = shape
    return -(-rows // TILE[0]) * -(-cols // TILE[1])
