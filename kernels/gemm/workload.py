"""Week 2, day 4's workload: C = A . B^T in bf16 with fp32 accumulation.

Declared once here: inputs, reference, FLOPs and bytes, the shapes the benchmark times and the awkward shapes every
rung is checked on. Layouts (every rung, the exercise, Triton, cuBLAS):

    A: (M, K) bf16 row-major        K contiguous ("K-major")
    B: (N, K) bf16 row-major        B given transposed, K contiguous too (nn.Linear's weight layout)
    C: (M, N) bf16 row-major        C = bf16(float(A) @ float(B).T), accumulated in fp32

Contract: K % 8 == 0 and N % 8 == 0 (16-byte rows: the tensor-map rule for A and B, aligned bf16x2 stores of C),
M, N >= 128 and K >= 64 (a TMA box may not be larger than the tensor under cuda.core's CCCL rules; the boxes are
(128, 64)). Everything else arbitrary: partial tiles at every edge, zero-filled by the TMA.
"""

from __future__ import annotations

import torch

# Inputs, reference, FLOPs and bytes are the graded exercise's, declared once in exercise.py: every rung, Triton,
# cuBLAS and the exercise's answers are timed on make_inputs' distribution (N(0, 1) / K^0.25 in bf16), so that a ratio
# between two rows compares like with like.
from .exercise import ELEMENT_BYTES, bytes_moved, flops, make_inputs, reference  # noqa: F401

DTYPE = torch.bfloat16
# The benchmark's shapes (M, N, K): the square one every GEMM table quotes, a smaller square one (fewer tiles than
# 2 waves of 132 SMs: the tile count matters), and a skinny one (M = 128: one row of tiles, so only N / BN CTAs
# have work — 32 of 132 SMs with (128, 256) tiles).
BENCH_SHAPE = (8192, 8192, 8192)
SMALL_SHAPE = (2048, 2048, 2048)
SKINNY_SHAPE = (128, 8192, 8192)
SHAPES = (BENCH_SHAPE, SMALL_SHAPE, SKINNY_SHAPE)
# Awkward shapes for the checks: M, N, K not multiples of the tiles (128 / 256 / 64): partial tiles at the bottom,
# the right and in K (the TMA's zero fill carries the K tail); one tile; an odd number of tile rows (rung 5 pairs
# tile rows: the second CTA of the last pair has no rows); K far longer than the ring (every stage reused many
# times, so a parity that did not flip shows, and a stage released too early has many chances to be overwritten).
TEST_SHAPES = ((128, 256, 64), (129, 264, 200), (257, 136, 1032), (640, 520, 4104), (1000, 1288, 776),
               (520, 1032, 8192))
# The order the benchmark measures them in: light shapes first, while the GPU is cool (the FMA rung's clock-bound
# rows move by ~ 20 % between a cool and a hot GPU; the table lists SHAPES in their own order).
MEASURE_ORDER = (SMALL_SHAPE, SKINNY_SHAPE, BENCH_SHAPE)


# The one data-effect lesson of the day (kernels/gemm/bench.py, data_effect): the best CUDA rung and cuBLAS timed on
# the exercise's inputs and on plain N(0, 1) entries, the SM clock read during each. A tensor core's clock follows
# the power its operands draw, so "the same GEMM" is not one number; every other row uses the exercise's data.
DATA = ("exercise", "normal")


def make_normal_inputs(shape, seed: int, device="cuda") -> dict:
    """A (M, K) and B (N, K) with plain N(0, 1) bf16 entries (no 1 / K^0.25): the data-effect lesson's other side."""
    m, n, k = shape
    g = torch.Generator(device=device).manual_seed(seed)
    a = torch.randn(m, k, generator=g, device=device).to(DTYPE)
    b = torch.randn(n, k, generator=g, device=device).to(DTYPE)
    return {"a": a, "b": b}


def inputs_for(data: str):
    """The input generator of a data tag: "exercise" -> make_inputs, "normal" -> make_normal_inputs."""
    if data not in DATA:
        raise ValueError(f"data {data!r}: one of {DATA}")
    return make_inputs if data == "exercise" else make_normal_inputs


def shape_name(shape) -> str:
    return "x".join(map(str, shape))
