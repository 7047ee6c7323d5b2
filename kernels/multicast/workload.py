"""Week 2, day 3's demo workloads (the exercise's is kernels/multicast/exercise.py — a different task).

- rotate: out[block b] = x[block of rank (r + 1) % N in b's cluster], blocks of BLOCK_WORDS fp32 (the DSMEM demos:
  each CTA hands its block to its neighbour through distributed shared memory).
- broadcast_sum: every CTA sums the same K tiles (64 x 64 bf16 = 8 KiB each) of a table into one 64 x 64 fp32
  tile. The table's entries are small integers, so every fp32 sum is exact (bit-exact check) whatever the order.

Declared once here: inputs, references, the bytes each moves and the configurations the benchmark sweeps.
"""

from __future__ import annotations

import torch

BLOCK_WORDS = 1024        # cluster_demo.cu: fp32 per CTA in the DSMEM demos
TILE = 64                 # broadcast_sum: (TILE, TILE) bf16 tiles
TILE_BYTES = TILE * TILE * 2
CLUSTERS = (1, 2, 4)      # the cluster sizes every demo runs with
ROTATE_SHAPE = 1 << 22    # fp32 words of the rotate demo's benchmark (16 MiB)
ROTATE_TEST_SIZES = (4 * BLOCK_WORDS, 12 * BLOCK_WORDS, 1000 * BLOCK_WORDS)  # multiples of 4 blocks
# broadcast_sum: K tiles of 8 KiB = 2 MiB table (stays in the 50 MB L2: the traffic is L2 -> SM), 2 CTAs per SM
SUM_TILES = 256
SUM_TEST_TILES = (1, 3, 9, 40)  # fewer tiles than stages, not a multiple of the stages, several uses per stage
SUM_STAGES = 4
SUM_CTAS_PER_SM = 2


def make_rotate_input(n: int, seed: int, device="cuda") -> torch.Tensor:
    g = torch.Generator(device="cpu").manual_seed(seed)
    return torch.randn(n, generator=g).to(device)


def rotate_reference(x: torch.Tensor, cluster: int) -> torch.Tensor:
    """out block (c, r) = x block (c, (r + 1) % cluster)."""
    b = x.view(-1, cluster, BLOCK_WORDS)
    return torch.roll(b, shifts=-1, dims=1).reshape(-1).clone()


def make_table(k_tiles: int, seed: int, device="cuda") -> torch.Tensor:
    g = torch.Generator(device="cpu").manual_seed(seed)
    return torch.randint(-8, 9, (k_tiles * TILE, TILE), generator=g).to(torch.bfloat16).to(device)


def sum_reference(table: torch.Tensor, ctas: int) -> torch.Tensor:
    s = table.double().view(-1, TILE, TILE).sum(0).float()  # exact: |sum| <= 8 x K < 2^24
    return s.unsqueeze(0).expand(ctas, TILE, TILE).contiguous()


def sum_delivered_bytes(k_tiles: int, ctas: int) -> int:
    """Bytes landed in shared memory: every CTA receives every tile (the benchmark's TB/s counts these)."""
    return k_tiles * TILE_BYTES * ctas
