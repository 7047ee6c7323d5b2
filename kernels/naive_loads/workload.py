"""Day 1's demo workload: copy n float32 words. Bytes declared once: each word read once and written once."""

from __future__ import annotations

import torch

BENCH_N = 1 << 28  # 256 Mi words = 1 GiB in, 1 GiB out: far beyond the 50 MB L2
STRIDED_COLS = 32  # copy_strided walks a (n/32, 32) view by columns: threads 128 bytes apart
TEST_NS = (4, 1 << 12, (1 << 20) + 4, 3 * 2048 * 4 + 36)  # multiples of 4 (float4) and of 32 (strided) where needed


def make_inputs(n: int, seed: int, device="cuda") -> torch.Tensor:
    g = torch.Generator(device=device).manual_seed(seed)
    return torch.randn(n, device=device, generator=g)


def reference(x: torch.Tensor) -> torch.Tensor:
    return x.clone()


def bytes_moved(n: int) -> int:
    return 2 * 4 * n
