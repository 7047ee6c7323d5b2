"""Day 2's demo workload: y = x^T for a row-major float32 matrix x of shape (rows, cols).

Declared once here (the launchers, the benchmark, the model's byte count and the tests all use it): inputs,
the reference, the bytes a transpose must move and its FLOPs (none).
"""

from __future__ import annotations

import torch

BENCH_SHAPE = (8192, 8192)  # 256 MiB in, 256 MiB out: 10x the 50 MB L2, so every byte comes from and goes to DRAM
# Awkward shapes: not multiples of the 32x32 tile (partial tiles on the right and bottom edges), a single row, a
# single column, tall and wide, and one large enough (17 M elements, 16 K blocks) that a missing barrier shows.
TEST_SHAPES = ((127, 129), (128, 128), (129, 127), (1, 4097), (4097, 1), (33, 8191), (8191, 33), (4095, 4097))
TILE = 32
ELEMENT_BYTES = 4


def make_inputs(shape, seed: int, device="cuda") -> torch.Tensor:
    rows, cols = shape
    g = torch.Generator(device=device).manual_seed(seed)
    return torch.randn(rows, cols, generator=g, device=device, dtype=torch.float32)


def reference(x: torch.Tensor) -> torch.Tensor:
    """x^T as a new contiguous (cols, rows) tensor: a copy, so bit-exact comparison applies."""
    return x.t().contiguous()


def bytes_moved(shape) -> int:
    rows, cols = shape
    return 2 * ELEMENT_BYTES * rows * cols  # every element read once and written once


def flops(shape) -> int:
    return 0  # a transpose moves data and computes nothing
