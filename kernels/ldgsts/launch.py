"""Launchers of day 3's kernels (kernels/ldgsts/stencil.cu). Every stencil rung has the same call shape:

    y = stencil(x, w)                                  # the cp.async rung (the default)
    y = stencil(x, w, variant="direct")                # "direct" | "smem_sync" | "ldgsts" | "ldgsts_db"
    y = stencil(x, w, variant="ldgsts", blocks_per_sm=1)   # occupancy held at one block per SM
    y = stage_copy(x, size=8, cache="ca")              # y = x through shared memory with 8-byte cp.async.ca
    y = stage_copy(x, size=16, cache="primitives")     # ... with __pipeline_memcpy_async

Launch: 256-thread blocks; one block per 1024-output tile (grid = ceil(n / 1024)), except ldgsts_db, whose
persistent grid is (blocks per SM) x (SMs) blocks that walk the tiles.

`blocks_per_sm` caps how many blocks share an SM by asking for unused dynamic shared memory: with S bytes per
block (static + dynamic + the 1 KB the system reserves per block) an SM of 228 KB holds floor(228 KB / S) blocks.
It is how the benchmark shows what latency hiding is worth when occupancy cannot hide the latency for you.
"""

from __future__ import annotations

from functools import lru_cache

import torch

from ..compile import compile_cuda, kernel_file
from ..launch import ceil_div, i64, launch
from ..sim import H100
from .workload import BLOCK, TAPS, TILE

VARIANTS = ("direct", "smem_sync", "ldgsts", "ldgsts_db")
COPY_KERNELS = {(4, "ca"): "stage_copy_4", (8, "ca"): "stage_copy_8", (16, "ca"): "stage_copy_16_ca",
                (16, "cg"): "stage_copy_16", (16, "primitives"): "stage_copy_16_primitives"}
COPY_TILE = 1024  # floats per block of stage_copy_*

# Static shared memory of each kernel, bytes (the tile buffers of stencil.cu; a test checks these against the
# compiled cubin). The occupancy arithmetic below needs them before a launch.
STATIC_SMEM = {"direct": 0, "smem_sync": 258 * 16, "ldgsts": 258 * 16, "ldgsts_db": 2 * 258 * 16}
SMEM_PER_SM = H100.smem_per_sm_bytes  # the SM's shared-memory limits (kernels.sim: cc 9.0, sourced)
RESERVED_SMEM_PER_BLOCK = H100.smem_reserved_per_block_bytes
MAX_DYNAMIC_SMEM = 227 * 1024  # per block, opt-in (static + dynamic)
MAX_BLOCKS_PER_SM = 2048 // BLOCK  # 8: the 2048-thread limit of an SM with 256-thread blocks


@lru_cache(maxsize=1)
def cubin():
    return compile_cuda(kernel_file("ldgsts", "stencil.cu"))


def kernel_name(variant: str) -> str:
    if variant not in VARIANTS:
        raise ValueError(f"variant {variant!r}: choose one of {VARIANTS}")
    return f"stencil_{variant}"


def occupancy_smem(static_bytes: int, blocks_per_sm: int, smem_per_sm: int = SMEM_PER_SM) -> int:
    """Dynamic shared memory (bytes, a multiple of 1 KB) that lets exactly `blocks_per_sm` blocks of a kernel with
    `static_bytes` of static shared memory share one SM:
        blocks_per_sm x (static + dynamic + 1 KB) <= 228 KB < (blocks_per_sm + 1) x (static + dynamic + 1 KB)."""
    if not 1 <= blocks_per_sm <= MAX_BLOCKS_PER_SM:
        raise ValueError(f"blocks_per_sm must be 1..{MAX_BLOCKS_PER_SM} (256-thread blocks), got {blocks_per_sm}")
    per_block = smem_per_sm // blocks_per_sm
    dyn = (per_block - static_bytes - RESERVED_SMEM_PER_BLOCK) // 1024 * 1024
    if dyn < 0:
        raise ValueError(f"{static_bytes} B of static shared memory already allow fewer than {blocks_per_sm} "
                         "blocks per SM")
    dyn = min(dyn, MAX_DYNAMIC_SMEM - static_bytes)
    total = static_bytes + dyn + RESERVED_SMEM_PER_BLOCK
    assert blocks_per_sm * total <= smem_per_sm < (blocks_per_sm + 1) * total, (blocks_per_sm, total)
    return dyn


def n_tiles(n: int) -> int:
    return ceil_div(n, TILE)


def launch_config(variant: str, n: int, *, blocks_per_sm: int | None = None, sms: int = 132,
                  resident_blocks: int | None = None) -> dict:
    """grid, block and dynamic shared memory of one launch. `resident_blocks`: blocks per SM the hardware allows
    at full occupancy (sizes ldgsts_db's persistent grid when blocks_per_sm is None; default 8)."""
    kernel_name(variant)
    smem = 0 if blocks_per_sm is None else occupancy_smem(STATIC_SMEM[variant], blocks_per_sm)
    if variant == "ldgsts_db":
        per_sm = blocks_per_sm or resident_blocks or MAX_BLOCKS_PER_SM
        grid = max(1, min(n_tiles(n), per_sm * sms))
    else:
        grid = n_tiles(n)
    return {"grid": grid, "block": BLOCK, "smem": smem}


def _is_f32_vector(t, name: str, n: int | None = None) -> None:
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    if t.dtype != torch.float32:
        raise ValueError(f"{name} must be float32, got {t.dtype}")
    if t.dim() != 1:
        raise ValueError(f"{name} must be 1-D, got shape {tuple(t.shape)}")
    if n is not None and t.numel() != n:
        raise ValueError(f"{name} must hold {n} elements, got {t.numel()}")
    if not t.is_contiguous():
        raise ValueError(f"{name} must be contiguous, got stride {t.stride()}: call .contiguous()")


def _aligned16(t: torch.Tensor, name: str) -> None:
    if t.data_ptr() % 16:
        raise ValueError(f"{name} must be 16-byte aligned (16-byte cp.async / float4 accesses): its address is "
                         f"{t.data_ptr() % 16} mod 16 — a slice that starts at an element not a multiple of 4?")


def _check_out(out, x: torch.Tensor) -> None:
    if out is None:
        return
    _is_f32_vector(out, "out", x.numel())
    _aligned16(out, "out")
    if out.device != x.device:
        raise ValueError(f"out is on {out.device}, x on {x.device}")
    if out.data_ptr() < x.data_ptr() + x.nbytes and x.data_ptr() < out.data_ptr() + out.nbytes:
        raise ValueError("out overlaps x: the stencil reads neighbours of what it writes, it cannot run in place")


def validate(x, w, variant: str = "ldgsts", blocks_per_sm: int | None = None, out=None) -> None:
    """Raise ValueError / TypeError naming what is wrong; the device last, so the checks run on CPU tensors too."""
    kernel_name(variant)
    _is_f32_vector(x, "x")
    if x.numel() == 0:
        raise ValueError("x is empty: the stencil needs n >= 1")
    if n_tiles(x.numel()) > 2**31 - 1:
        raise ValueError(f"n = {x.numel()} needs more than 2^31 - 1 blocks")
    _aligned16(x, "x")
    _is_f32_vector(w, "w", TAPS)
    if blocks_per_sm is not None:
        if not isinstance(blocks_per_sm, int) or isinstance(blocks_per_sm, bool):
            raise TypeError(f"blocks_per_sm must be an int or None, got {blocks_per_sm!r}")
        occupancy_smem(STATIC_SMEM[variant], blocks_per_sm)  # raises for values out of range
    _check_out(out, x)
    if w.device != x.device:
        raise ValueError(f"w is on {w.device}, x on {x.device}")
    if not x.is_cuda:
        raise ValueError(f"x is on {x.device}: move it to the GPU (x.cuda())")


@lru_cache(maxsize=8)
def _sms(device_index: int) -> int:
    return torch.cuda.get_device_properties(device_index).multi_processor_count


@lru_cache(maxsize=16)
def resident_blocks(variant: str, blocks_per_sm: int | None = None) -> int:
    """Blocks of `variant` one SM holds at once, from the driver's occupancy calculator (needs a GPU)."""
    from ..launch import get_kernel, set_max_dynamic_smem

    smem = 0 if blocks_per_sm is None else occupancy_smem(STATIC_SMEM[variant], blocks_per_sm)
    kernel = get_kernel(cubin(), kernel_name(variant))
    set_max_dynamic_smem(kernel, smem)  # the calculator counts dynamic smem only up to the kernel's opt-in limit
    return int(kernel.occupancy.max_active_blocks_per_multiprocessor(BLOCK, smem))


def stencil(x: torch.Tensor, w: torch.Tensor, *, variant: str = "ldgsts", blocks_per_sm: int | None = None,
            out: torch.Tensor | None = None) -> torch.Tensor:
    """y[i] = sum_k w[k] x[i + k - 3] (zero outside [0, n)) with the chosen rung of stencil.cu."""
    validate(x, w, variant, blocks_per_sm, out)
    n = x.numel()
    y = torch.empty_like(x) if out is None else out
    cfg = launch_config(variant, n, blocks_per_sm=blocks_per_sm, sms=_sms(x.device.index or 0),
                        resident_blocks=resident_blocks(variant) if variant == "ldgsts_db" else None)
    launch(cubin(), kernel_name(variant), grid=cfg["grid"], block=cfg["block"], smem=cfg["smem"],
           args=(x, w, y, i64(n)))
    return y


def copy_kernel_name(size: int, cache: str) -> str:
    if (size, cache) not in COPY_KERNELS:
        if cache == "cg" and size in (4, 8):
            raise ValueError(f"cp.async.cg copies only 16 bytes (ptxas rejects size {size} with .cg): use "
                             "cache='ca' for 4- and 8-byte copies")
        raise ValueError(f"size must be 4, 8 or 16 and cache 'ca' or 'cg' (or size 16 with cache='primitives': "
                         f"__pipeline_memcpy_async), got size={size!r}, cache={cache!r}")
    return COPY_KERNELS[(size, cache)]


def validate_copy(x, size: int = 16, cache: str = "cg", out=None) -> None:
    copy_kernel_name(size, cache)
    _is_f32_vector(x, "x")
    if x.numel() == 0:
        raise ValueError("x is empty")
    if x.numel() % 4:
        raise ValueError(f"stage_copy moves whole 16-byte pieces at the tile's end: n must be a multiple of 4 "
                         f"floats, got {x.numel()}")
    _aligned16(x, "x")
    _check_out(out, x)
    if not x.is_cuda:
        raise ValueError(f"x is on {x.device}: move it to the GPU (x.cuda())")


def stage_copy(x: torch.Tensor, *, size: int = 16, cache: str = "cg", out: torch.Tensor | None = None) -> torch.Tensor:
    """y = x, staged through shared memory with `size`-byte cp.async (.ca, .cg, or the pipeline primitives)."""
    validate_copy(x, size, cache, out)
    y = torch.empty_like(x) if out is None else out
    launch(cubin(), copy_kernel_name(size, cache), grid=ceil_div(x.numel(), COPY_TILE), block=BLOCK,
           args=(x, y, i64(x.numel())))
    return y
