"""The course's shared-memory rules, used from week 1 day 2 on: the bank-conflict wavefront counter.

The counter (any access pattern). Shared memory has 32 banks of 4 bytes; word w (byte address // 4) lives in
bank w % 32. Each bank delivers one 4-byte word per clock, so a warp's access is served in *wavefronts*: in
one wavefront every bank hands out at most one word (any number of lanes may share that word: a broadcast).

    wavefronts(addresses, width) = sum over phases of  max over banks of  |distinct words asked of the bank|

Phases: a warp's 32 lanes x `width` bytes are at most 128 bytes (one wavefront's worth) only for width <= 4.
For 8-byte accesses the hardware serves the two half-warps (lanes 0-15, 16-31) in separate phases; for 16-byte
accesses the four quarter-warps (lanes 0-7, 8-15, 16-23, 24-31). Conflicts only count within a phase, and a
conflict-free LDS.64 / LDS.128 costs 2 / 4 wavefronts. Supported widths: 1, 2, 4, 8, 16 bytes, naturally
aligned; `None` marks an inactive lane. Not modelled: the special cases in which some architectures merge
uniform-address 64/128-bit accesses across phases (they only ever lower the count).
"""

from __future__ import annotations

from .sim import H100

# --------------------------------------------------------------------------------------------- the generic counter
def bank(address: int, banks: int = H100.smem_banks, bank_bytes: int = H100.bank_bytes) -> int:
    """Bank of the byte at `address` (shared-memory byte offset)."""
    return (int(address) // bank_bytes) % banks


def phases(width: int) -> int:
    """How many phases a warp's access of `width` bytes per lane is served in: 1 (<= 4 B), 2 (8 B), 4 (16 B)."""
    if width not in (1, 2, 4, 8, 16):
        raise ValueError(f"access width {width}: shared-memory accesses are 1, 2, 4, 8 or 16 bytes per lane")
    return max(1, width // 4)


def _lanes(addresses, width: int) -> list[int | None]:
    lanes = list(addresses)
    if len(lanes) > H100.warp_size:
        raise ValueError(f"{len(lanes)} addresses: a warp has {H100.warp_size} lanes")
    for i, a in enumerate(lanes):
        if a is None:
            continue
        if int(a) < 0:
            raise ValueError(f"lane {i}: negative address {a}")
        if int(a) % width:
            raise ValueError(f"lane {i}: address {a} is not {width}-byte aligned (a misaligned {width}-byte shared "
                             "access faults on the GPU)")
    return lanes


def wavefronts(addresses, width: int = 4, *, banks: int = H100.smem_banks, bank_bytes: int = H100.bank_bytes) -> int:
    """Shared-memory wavefronts one warp-wide access costs.

    addresses: up to 32 byte addresses, one per lane in lane order (None = lane inactive).
    width: bytes each lane accesses (1, 2, 4, 8 or 16), naturally aligned.
    Per phase (see `phases`): max over banks of the number of distinct 4-byte words the phase's lanes ask of that
    bank (lanes sharing a word cost nothing extra); summed over phases with at least one active lane.
    """
    lanes = _lanes(addresses, width)
    n_ph = phases(width)
    per_phase = H100.warp_size // n_ph
    total = 0
    for p in range(n_ph):
        words_by_bank: dict[int, set[int]] = {}
        for a in lanes[p * per_phase:(p + 1) * per_phase]:
            if a is None:
                continue
            a = int(a)
            for w in range(a // bank_bytes, (a + width - 1) // bank_bytes + 1):
                words_by_bank.setdefault(w % banks, set()).add(w)
        if words_by_bank:
            total += max(len(ws) for ws in words_by_bank.values())
    return total


def ideal_wavefronts(width: int = 4, addresses=None) -> int:
    """The conflict-free cost: one wavefront per phase that has an active lane (all 32 lanes active if
    `addresses` is None)."""
    n_ph = phases(width)
    if addresses is None:
        return n_ph
    lanes = _lanes(addresses, width)
    per_phase = H100.warp_size // n_ph
    return sum(any(a is not None for a in lanes[p * per_phase:(p + 1) * per_phase]) for p in range(n_ph))


def conflict_table(addresses, width: int = 4) -> dict[int, list[int]]:
    """bank -> sorted distinct words asked of it (all phases together): what a notebook prints to show a conflict."""
    out: dict[int, set[int]] = {}
    for a in _lanes(addresses, width):
        if a is None:
            continue
        for w in range(int(a) // 4, (int(a) + width - 1) // 4 + 1):
            out.setdefault(w % H100.smem_banks, set()).add(w)
    return {b: sorted(ws) for b, ws in sorted(out.items())}
