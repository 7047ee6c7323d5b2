"""Week 2, day 4: what one SM holds and serves, read from the kernel itself. `resident_ctas` / `ring_occupancy` read
the CTAs per SM: registers from its SASS, shared memory = the launch's dynamic bytes + the cubin's static bytes + 1 KiB
reserved per block, against 228 KiB per SM. `staging_bank_ways` / `_staging_ns`: an overlapped epilogue's staging of
C through the shared-memory banks, at the SM's shared-memory rate (the term E of kernels.gemm.model.predict_config)."""

from __future__ import annotations

import re
import struct
from functools import lru_cache

from ..sass import disassemble
from ..sim import H100
from ..smem import wavefronts
from ..swizzle_map import swizzle_offset

REGS_PER_SM = H100.registers_per_sm
SMEM_PER_SM = H100.smem_per_sm_bytes   # 228 KiB per SM (the H200 has the same SM)
SMEM_PER_BLOCK = H100.smem_per_block_optin_bytes  # 227 KiB per block, opt-in
SMEM_RESERVED = H100.smem_reserved_per_block_bytes


def resident_ctas(block: int, regs_per_thread: int, smem_bytes: int) -> int:
    """CTAs of a kernel that fit on one SM: by registers (allocated per warp, 8-register granularity), by shared
    memory (plus the 1 KiB the system reserves per block), by threads (2048) and the 32-block limit."""
    regs = -(-regs_per_thread // 8) * 8
    by_regs = REGS_PER_SM // (regs * (-(-block // 32) * 32))
    by_smem = SMEM_PER_SM // (smem_bytes + SMEM_RESERVED) if smem_bytes else 32
    return max(0, min(by_regs, by_smem, 2048 // block, 32))


def sass_registers(cubin, kernel: str) -> int:
    """Registers per thread of a compiled kernel, read from its SASS (highest Rn + 1, + 2 the hardware reserves)."""
    ins = disassemble(cubin)[kernel]
    return max((int(x) for i in ins for x in re.findall(r"\bR(\d+)\b", i.text)), default=0) + 3


def _elf_section_sizes(data: bytes) -> dict[str, int]:
    """Section name -> size of an ELF64 little-endian file (a cubin)."""
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    heads = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
    names = heads[shstrndx][4]

    def name(off: int) -> str:
        return data[names + off:data.index(b"\0", names + off)].decode()

    return {name(h[0]): h[5] for h in heads}


def static_smem(cubin, kernel: str) -> int:
    """Static shared memory of a compiled kernel: the size of its .nv.shared.<kernel> section (the mbarriers and what
    the compiler adds), read from the cubin."""
    return _elf_section_sizes(cubin.data).get(f".nv.shared.{kernel}", 0)


def smem_per_cta(variant: str, stages: int | None = None) -> dict:
    """Shared memory one CTA of a rung holds on its SM, from the kernel itself: the dynamic bytes of the launch
    (launch.smem_bytes: stages x stage bytes + 1 KiB alignment slack), the static bytes of the cubin, and the 1 KiB
    the system reserves per resident block."""
    from .launch import KERNELS, cubin, smem_bytes

    dyn = smem_bytes(variant, stages)
    stat = static_smem(cubin(variant, stages) if stages else cubin(variant), KERNELS[variant])
    return {"dynamic": dyn, "static": stat, "reserved": SMEM_RESERVED, "total": dyn + stat + SMEM_RESERVED,
            "fits_a_block": dyn + stat <= SMEM_PER_BLOCK}


def ring_occupancy(stages=(1, 2, 3, 4, 5, 6)) -> list[dict]:
    """Rung 3 (r3_pipelined.cu) at each ring depth: shared memory per CTA, the CTAs per SM that shared memory and
    registers each allow, and the resident CTAs (the smaller) — computed from the compiled kernel."""
    from .launch import CONFIG, KERNELS, cubin

    block = CONFIG["pipelined"]["block"]
    out = []
    for st in stages:
        sm = smem_per_cta("pipelined", st)
        regs = sass_registers(cubin("pipelined", st), KERNELS["pipelined"])
        by_regs = REGS_PER_SM // (-(-regs // 8) * 8 * (-(-block // 32) * 32))
        by_smem = SMEM_PER_SM // sm["total"]
        out.append({"stages": st, "stage_bytes": CONFIG["pipelined"]["stage_bytes"], "smem": sm, "registers": regs,
                    "block": block, "by_smem": by_smem, "by_regs": by_regs,
                    "resident": min(by_smem, by_regs, 2048 // block, 32)})
    return out


@lru_cache(maxsize=None)  # a constant of the SM: predict_config (a fit calls it ~10^5 times) asks for it per tile
def staging_bank_ways(swizzle: bool = True) -> int:
    """Bank-conflict ways of one warp's bf16x2 store of the accumulator into a staging piece with 128-byte rows (64
    bf16): lane l of warp w holds row 16 w + l / 4 (and 8 rows lower), cols 8 j + 2 (l % 4) — 16-byte chunk j, byte
    4 (l % 4) in it. With the 128B swizzle chunk j of row r sits at chunk j ^ (r % 8) (kernels/swizzle_map.py
    swizzle_offset); without, at chunk j. The worst chunk's wavefronts (day 2's counter, kernels.smem.wavefronts:
    a 4-byte access is one phase, so its wavefronts are the most distinct words asked of one bank)."""
    def lane_offset(j: int, lane: int) -> int:
        off = (lane // 4) * 128 + 16 * j + 4 * (lane % 4)
        return swizzle_offset(off, "128B") if swizzle else off

    return max(wavefronts([lane_offset(j, lane) for lane in range(32)], 4) for j in range(8))


def _staging_ns(tile=(128, 256), swizzle: bool = True) -> float:
    """ns per tile the consumers spend on an overlapped epilogue: the tile's bf16 C written to shared memory (each
    warp store replayed once per bank-conflict way) and read back by the TMA, at banks x 4 bytes per clock."""
    c_bytes = tile[0] * tile[1] * 2
    per_clock = H100.smem_banks * H100.bank_bytes
    return (staging_bank_ways(swizzle) + 1) * c_bytes / per_clock / H100.clock_ghz
