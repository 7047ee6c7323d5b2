"""Day 4's demo workload: a streaming sum of n float32 values, tile by tile, through an N-stage pipeline.

Declared once here (the launchers, the benchmark, the model and the tests use it): inputs, the reference, the
bytes the kernels must move and their FLOPs.

The kernels of stream.cu return one partial sum per block of a persistent grid: block b owns the 4 KiB tiles
b, b + G, b + 2G, ... (G = grid size) and block 0 also adds the n % 4 floats after the last float4.
`reference_partials` computes exactly those partial sums in float64, so every block's work is checked, not only
the total.
"""

from __future__ import annotations

import torch

TILE_FLOATS = 1024  # 256 float4 = 4 KiB per tile (TILE_VEC in stream.cu)
TILE_BYTES = 4 * TILE_FLOATS
BENCH_N = 1 << 26   # 64 Mi floats = 256 MiB: 5x the 50 MB L2, so every tile comes from DRAM
# Awkward sizes: nothing, fewer than one float4, a ragged float4 tail, a partial last tile, fewer tiles than blocks,
# and one with a few tiles per block of a 132-block grid plus a ragged tail.
TEST_NS = (0, 3, 4, 1023, 1029, 5 * TILE_FLOATS + 7, 132 * 3 * TILE_FLOATS + 4 * 77 + 2, (1 << 20) + 1)
STAGE_CHOICES = (1, 2, 3, 4)   # the stage curve the notebook and the model walk through
COMPILED_STAGES = (1, 2, 3, 4, 8)  # every STAGES the benchmark compiles (8: past the knee)
VARIANTS = ("prim", "pipe", "roles")


def make_inputs(n: int, seed: int, device="cuda") -> torch.Tensor:
    """x ~ U[0, 1): positive values, so a partial sum has no cancellation and float32 accumulation is accurate
    to ~1e-6 relative (the check's tolerance is 1e-5)."""
    g = torch.Generator(device=device).manual_seed(seed)
    return torch.rand(n, generator=g, device=device, dtype=torch.float32)


def reference(x: torch.Tensor) -> torch.Tensor:
    """The sum of x in float64 (0-dim)."""
    return x.double().sum()


def reference_partials(x: torch.Tensor, grid: int) -> torch.Tensor:
    """The per-block partial sums the kernels write (float64, length `grid`): block b sums tiles b, b+grid, ...;
    block 0 also sums the n % 4 trailing floats."""
    n = x.numel()
    n4 = n // 4 * 4
    xd = x.double()
    tiles = (n4 + TILE_FLOATS - 1) // TILE_FLOATS
    padded = torch.zeros(tiles * TILE_FLOATS, dtype=torch.float64, device=x.device)
    padded[:n4] = xd[:n4]
    per_tile = padded.view(tiles, TILE_FLOATS).sum(1)
    rounds = (tiles + grid - 1) // grid  # tile t goes to block t % grid
    per_block = torch.zeros(max(rounds, 1) * grid, dtype=torch.float64, device=x.device)
    per_block[:tiles] = per_tile
    out = per_block.view(-1, grid).sum(0)
    out[0] += xd[n4:].sum()
    return out


def bytes_moved(n: int) -> int:
    """Each float read once (the partial sums written are a few hundred bytes: not counted)."""
    return 4 * n


def flops(n: int) -> int:
    return n  # one add per element
