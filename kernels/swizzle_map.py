"""The TMA's swizzle map, course-wide: where each swizzle mode (CU_TENSOR_MAP_SWIZZLE_32B / 64B / 128B = CuTe's
Swizzle<1,4,3> / <2,4,3> / <3,4,3>) puts byte `off` of a box — the 16-byte chunk index (address bits 4 .. 4+B-1)
XORed with address bits 7 .. 7+B-1 (B = 1, 2, 3). Week 2 day 1 teaches it (kernels/swizzle/model.py, whose benchmark
reads the GPU's own layout back against it); the GEMM's staging and pictures lay out their boxes with it.
"""

from __future__ import annotations

MODES = ("none", "32B", "64B", "128B")
SPAN = {"none": None, "32B": 32, "64B": 64, "128B": 128}
_BITS = {"none": 0, "32B": 1, "64B": 2, "128B": 3}  # B of Swizzle<B, 4, 3>


def check_mode(mode: str) -> str:
    """`mode` if it is one of MODES, else ValueError naming them."""
    if mode not in MODES:
        raise ValueError(f"swizzle mode {mode!r}: choose one of {MODES}")
    return mode


def repeat_bytes(mode: str) -> int:
    """Bytes after which the pattern repeats (the alignment a destination needs for the offset rule): 256 / 512 /
    1024; 16 for no swizzle (nothing moves)."""
    return 1 << (7 + _BITS[check_mode(mode)]) if mode != "none" else 16


def swizzle_offset(off: int, mode: str) -> int:
    """Where the TMA puts byte `off` of a box (offset from a destination aligned to repeat_bytes(mode))."""
    b = _BITS[check_mode(mode)]
    return off ^ (((off >> 7) & ((1 << b) - 1)) << 4)


def swizzle_address(addr: int, dst: int, mode: str) -> int:
    """The rule on absolute shared-memory addresses: byte `addr - dst` of a box whose destination is `dst` (128-byte
    aligned, not necessarily aligned to the pattern) lands at this address. The XOR is taken from the address."""
    if dst % 128:
        raise ValueError(f"destination 0x{dst:x}: TMA destinations are 128-byte aligned")
    return swizzle_offset(addr, mode)


def swizzle_bitwise(off: int, mode: str) -> int:
    """The same rule spelled out bit by bit, as Swizzle<B, M=4, S=3> is defined: for i in 0..B-1, bit (4 + i) of the
    result = bit (4 + i) XOR bit (7 + i) of the input; every other bit unchanged."""
    b = _BITS[check_mode(mode)]
    out = off
    for i in range(b):
        if (off >> (7 + i)) & 1:
            out ^= 1 << (4 + i)
    return out


def swz_chunk(row: int, chunk: int, mode: str, span: int | None = None) -> int:
    """Physical 16-byte chunk of logical chunk `chunk` in row `row` of a box with `span`-byte rows (default: the
    mode's span; 128 for none) — the chunk form: 128B: chunk ^ (row % 8); 64B: chunk ^ ((row // 2) % 4); 32B:
    chunk ^ ((row // 4) % 2), each on rows as wide as the mode's span."""
    span = span or SPAN[check_mode(mode)] or 128
    return (swizzle_offset(row * span + 16 * chunk, mode) - row * span) // 16


def chunk_layout(mode: str, rows: int = 8, span: int | None = None) -> list[list[int]]:
    """layout[r][p] = the logical chunk the TMA put at physical chunk p of row r (the picture the notebook draws)."""
    span = span or SPAN[check_mode(mode)] or 128
    n = span // 16
    out = []
    for r in range(rows):
        row = [0] * n
        for c in range(n):
            row[swz_chunk(r, c, mode, span)] = c
        out.append(row)
    return out
