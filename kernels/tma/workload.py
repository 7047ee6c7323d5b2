"""Day 5's demo workload: copy a row-major (rows, cols) bf16 tensor box by box through TMA.

Declared once here: inputs, reference, bytes moved, and the shapes / boxes / stage counts the benchmark sweeps.
A copy moves each element once in and once out (kernels.bench counts read + written bytes, like the ceiling).
"""

from __future__ import annotations

import torch

DTYPE = torch.bfloat16
ELEMENT_BYTES = 2
BENCH_SHAPE = (8192, 8192)  # 128 MiB in, 128 MiB out: far beyond the 50 MB L2
# Awkward shapes for the checks: rows and cols not multiples of the box (partial boxes at the bottom / right edge),
# a single box, one box row. cols stays a multiple of 8 (a row must be a multiple of 16 bytes: tensor-map rule) and
# every dimension >= the largest box checked on it (the driver accepts a larger box, a cuda.core built on CCCL
# does not: these shapes are legal for both).
TEST_SHAPES = ((64, 64), (127, 200), (129, 1000), (1031, 264), (300, 4104))
DEFAULT_BOX = (64, 64)
# The benchmark's sweep of the TMA model: box bytes x stages, one block per SM (so stages alone set the
# requests in flight). Boxes are (rows, cols) of bf16: 32x32 = 2 KiB, 64x64 = 8 KiB, 128x128 = 32 KiB.
SWEEP_BOXES = ((32, 32), (64, 64), (128, 128))
SWEEP_STAGES = (1, 2, 3, 4)


def make_inputs(shape, seed: int, device="cuda") -> torch.Tensor:
    rows, cols = shape
    g = torch.Generator(device="cpu").manual_seed(seed)
    return torch.randn(rows, cols, generator=g).to(DTYPE).to(device)


def reference(x: torch.Tensor) -> torch.Tensor:
    return x.clone()


def bytes_moved(shape, element_bytes: int = ELEMENT_BYTES) -> int:
    rows, cols = shape
    return 2 * element_bytes * rows * cols


def box_bytes(box, element_bytes: int = ELEMENT_BYTES) -> int:
    return box[0] * box[1] * element_bytes
