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


# --------------------------------------------------------------------- the demo: sums of squares over records
# x: (n, 32) float32, one record per 128-byte line; out[i] = sum_k x[i, k]^2 (records.cu). A different task from
# the exercise with the same mechanism: a warp's lanes each need a row, so the rows cross the warp through a tile.
RECORD = 32
DEMO_N = 2**21  # 2 M records: 256 MiB in (like the transpose's x), 8 MiB out
# Awkward counts: less than a warp, one short of a warp, a partial warp in a partial block, a partial block.
DEMO_TEST_NS = (1, 31, 33, 257, 1000, 65537)


def make_records(n: int, seed: int, device="cuda") -> torch.Tensor:
    g = torch.Generator(device=device).manual_seed(seed)
    return torch.randn(n, RECORD, generator=g, device=device, dtype=torch.float32)


def records_reference(x: torch.Tensor) -> torch.Tensor:
    """sum_k x[i, k]^2 in float64, rounded to float32 once (the kernels sum in float32: compare with a tolerance)."""
    return x.double().square().sum(dim=1).float()


def records_bytes(n: int) -> int:
    return ELEMENT_BYTES * RECORD * n + ELEMENT_BYTES * n  # each record read once, one float written per record
