"""Week 2, day 1's demo workload: the column sums of a row-major (rows, cols) bf16 matrix, read through TMA tiles
in four shared-memory layouts (kernels/swizzle/colsum.cu).

Declared once here: inputs, reference, bytes moved, and the configurations the benchmark sweeps.

The inputs are small integers (-4 .. 4) stored as bf16: every partial sum the kernels form is an integer that bf16
(|n| <= 256) and fp32 (|n| < 2^24) hold exactly, so any order of additions gives the same bits and the check is
bit-exact (CHECK). `passes` multiplies the sum: the kernel reads each tile `passes` times.
"""

from __future__ import annotations

import torch

DTYPE = torch.bfloat16
ELEMENT_BYTES = 2
VALUE_RANGE = 4          # inputs are integers in [-VALUE_RANGE, VALUE_RANGE]
TILE = (64, 64)          # rows x bf16 columns of one tile (8 KiB, 128 bytes per row), every mode
MAX_PASSES = 32          # colsum.cu: 2 rows x 32 passes x 4 = 256, the largest integer bf16 holds exactly
CHECK = {"exact": True}
# 264 column strips of 64 = 2 blocks per SM on a 132-SM H100, 64 tiles each; 138 MB in, far beyond the 50 MB L2.
BENCH_SHAPE = (4096, 16896)
# Awkward shapes: rows not a multiple of 64 (the last tile is zero-filled below the edge), cols not a multiple of 64
# (the last strip's boxes are partial, or wholly outside: 200 = 3 x 64 + 8), one tile. cols is a multiple of 8 (a
# row must be a multiple of 16 bytes: tensor-map rule); rows >= 64 and cols >= 64 (box <= tensor).
TEST_SHAPES = ((64, 64), (127, 200), (200, 72), (1031, 264), (4100, 1096))
# The benchmark's sweep: every layout, a memory-bound pass count and a shared-memory-bound one.
SWEEP_PASSES = (1, 32)
LAYOUTS = (("none", 128), ("none", 64), ("none", 32), ("32B", 32), ("64B", 64), ("128B", 128))


def make_inputs(shape, seed: int, device="cuda") -> torch.Tensor:
    rows, cols = shape
    g = torch.Generator(device="cpu").manual_seed(seed)
    x = torch.randint(-VALUE_RANGE, VALUE_RANGE + 1, (rows, cols), generator=g, dtype=torch.int16)
    return x.to(DTYPE).to(device)


def reference(x: torch.Tensor, passes: int = 1) -> torch.Tensor:
    """passes x the column sums, computed in float64 (exact: integers) and stored as fp32."""
    return (x.double().sum(0) * passes).float()


def bytes_moved(shape, element_bytes: int = ELEMENT_BYTES) -> int:
    """Bytes read and written: the matrix once, the fp32 sums once (re-reads of shared memory are not traffic)."""
    rows, cols = shape
    return element_bytes * rows * cols + 4 * cols


def layout_name(swizzle: str, span: int) -> str:
    return f"{'none' if swizzle == 'none' else 'swz'}{span}"
