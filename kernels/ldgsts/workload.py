"""Day 3's demo workloads, declared once (launchers, benchmark, model byte counts and tests all use them).

1. The stencil: y[i] = sum_{k=0..6} w[k] * x[i + k - 3] over a float32 array x of length n, zero outside [0, n).
   Every rung of stencil.cu computes it; the reference sums in float64 and rounds once to float32.
2. stage_copy: y = x through shared memory (bit-exact), to read the SASS of each cp.async size.

Inputs live inside NaN guard bands: x is a view into a larger buffer whose GUARD elements before x[0] and after
x[n-1] are NaN. A kernel that reads outside [0, n) — a halo that was not zero-filled, an off-by-one at the last
chunk — pulls a NaN into its sums and fails the check, instead of reading whatever the allocator left there (often
zeros, which would hide the bug). x stays 16-byte aligned (GUARD * 4 bytes is a multiple of 16).
The graded exercise's 2-D image (kernels/ldgsts/exercise.py) is guarded the same way: guarded_image puts NaN in the
padding columns of every row and in whole rows above and below it.
"""

from __future__ import annotations

import torch

R = 3  # stencil radius: 7 taps
TAPS = 2 * R + 1
BLOCK = 256  # threads per block of every rung
VEC = 4  # floats per 16-byte chunk
TILE = BLOCK * VEC  # 1024 outputs per block (per tile)
HALO = VEC  # floats copied on each side of a tile: one 16-byte chunk (>= R, keeps every copy 16-byte aligned)
ELEMENT_BYTES = 4
GUARD = 32  # NaN elements on each side of x (128 bytes)

BENCH_N = 1 << 28  # 1 GiB in, 1 GiB out: 20x the 50 MB L2, the same size as day 1's copies
# Awkward sizes: a single element, sizes around the 4-float chunk and the 1024-float tile, a partial last chunk
# (n % 4 != 0), and two large ones (hundreds / thousands of blocks, several waves on 132 SMs).
TEST_NS = (1, 3, 5, 1023, 1024, 1025, 4099, (1 << 16) + 2, (1 << 20) + 3, 3 * (1 << 20) + 7)
# stage_copy moves whole BYTES-wide pieces: sizes that are multiples of 4 floats (the 16-byte variants need it).
COPY_TEST_NS = (4, 1024, 1028, 4096 + 12, (1 << 20) + 4, 3 * (1 << 20) + 36)


def guarded(n: int, dtype: torch.dtype, device, guard: int = GUARD) -> torch.Tensor:
    """An uninitialised length-n tensor whose `guard` elements on either side (outside the view) are NaN."""
    buf = torch.full((n + 2 * guard,), float("nan"), dtype=dtype, device=device)
    return buf[guard:guard + n]


def guarded_image(h: int, w: int, ld: int, dtype: torch.dtype, device, guard_rows: int = 2) -> torch.Tensor:
    """An uninitialised (h, w) view with row pitch ld (elements) into a NaN buffer: the columns w .. ld-1 of every
    row (the padding) and `guard_rows` whole rows above row 0 and below row h-1 are NaN, outside the view. Row 0
    starts guard_rows * ld elements into the buffer (16-byte aligned when ld * element size is a multiple of 16)."""
    buf = torch.full(((h + 2 * guard_rows) * ld,), float("nan"), dtype=dtype, device=device)
    return buf.view(h + 2 * guard_rows, ld)[guard_rows:guard_rows + h, :w]


def stencil2d_reference(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """y[r][c] = sum_{dr,dc in -1..1} w[3(dr+1) + dc+1] * x[r+dr][c+dc] in float64, zero outside the (h, w) image
    x (any strides: the padding beyond its columns is never touched); rounded once to float32, contiguous."""
    h, wd = x.shape
    xp = torch.zeros(h + 2, wd + 2, dtype=torch.float64, device=x.device)
    xp[1:h + 1, 1:wd + 1] = x.double()
    k = w.double()
    y = torch.zeros(h, wd, dtype=torch.float64, device=x.device)
    for dr in range(3):
        for dc in range(3):
            y += k[3 * dr + dc] * xp[dr:dr + h, dc:dc + wd]
    return y.float()


def make_inputs(n: int, seed: int, device="cuda") -> dict:
    """x ~ N(0, 1) (float32, inside NaN guard bands) and 7 positive weights that sum to 1."""
    g = torch.Generator(device=device).manual_seed(seed)
    x = guarded(n, torch.float32, device)
    x.copy_(torch.randn(n, generator=g, device=device))
    w = torch.rand(TAPS, generator=g, device=device) + 0.25
    return {"x": x, "w": w / w.sum()}


def stencil_reference(x: torch.Tensor, w: torch.Tensor, radius: int) -> torch.Tensor:
    """y[i] = sum_k w[k] * x[i + k - radius] in float64, zero outside [0, n); rounded once to float32."""
    n = x.numel()
    xp = torch.zeros(n + 2 * radius, dtype=torch.float64, device=x.device)
    xp[radius:radius + n] = x.double()
    wd = w.double()
    y = torch.zeros(n, dtype=torch.float64, device=x.device)
    for k in range(2 * radius + 1):
        y += wd[k] * xp[k:k + n]
    return y.float()


def reference(inputs: dict) -> torch.Tensor:
    return stencil_reference(inputs["x"], inputs["w"], R)


def make_copy_input(n: int, seed: int, device="cuda") -> torch.Tensor:
    g = torch.Generator(device=device).manual_seed(seed)
    x = guarded(n, torch.float32, device)
    return x.copy_(torch.randn(n, generator=g, device=device))


def bytes_moved(n: int) -> int:
    """Each x element read once, each y element written once (the halo re-reads, 8 floats per 1024, are not
    counted: they are the kernel's overhead, not the work)."""
    return 2 * ELEMENT_BYTES * n


def flops(n: int) -> int:
    return 2 * TAPS * n  # one multiply-add per tap
