"""Launchers of day 5's TMA copies. Every rung has the same call shape: copy(x, variant=...) -> y.

    y = copy(x)                                        # persistent, 3-stage CUDA TMA copy, box (64, 64)
    y = copy(x, "tile", box=(128, 128))                # one box per block
    y = copy(x, "pipelined", box=(32, 32), stages=4, blocks_per_sm=1)
    y = copy(x, "triton")                              # Triton, host-side TensorDescriptor
    y = copy(x, "triton_device")                       # Triton, tl.make_tensor_descriptor in the kernel

Inputs are checked here, before anything touches a GPU, with errors that name the field: the tensor-map rules come
from kernels.tensormap (a TensorMapError names the dimension, the value and the rule).
"""

from __future__ import annotations


import torch

from ..compile import day_kernel
from ..launch import box_count, ceil_div, i32, launch
from ..sim import H100
from ..tensormap import TensorMapError, cached_tensor_map, make_tensor_map, validate_tensor
from .workload import DEFAULT_BOX

VARIANTS = ("tile", "pipelined", "triton", "triton_device")
CUDA_VARIANTS = ("tile", "pipelined")
DTYPES = (torch.bfloat16, torch.float16, torch.float32)
MAX_STAGES = 8            # tma_copy.cu: MAX_STAGES barriers
COPY_BLOCK = 32           # one warp; lane 0 issues everything
SMEM_SLACK = 128          # the kernel re-aligns the dynamic shared-memory base to 128 bytes
SMEM_PER_SM = H100.smem_per_sm_bytes              # the SM's shared-memory limits (kernels.sim: cc 9.0, sourced)
SMEM_RESERVED = H100.smem_reserved_per_block_bytes
SMEM_OPTIN = H100.smem_per_block_optin_bytes       # largest dynamic shared memory a block may opt in to
STATIC_SMEM = 8 * MAX_STAGES  # the barriers
DEFAULT_STAGES = 3
DEFAULT_BLOCKS_PER_SM = 2


# the launchers' descriptor cache: kernels.tensormap.cached_tensor_map (tensor_map, below, for this topic's notebook)
tensor_map = cached_tensor_map


cubin, source = day_kernel("tma", "tma_copy.cu")  # cubin(): compiled once; source(start, end): for the notebook


def stage_bytes(box, element_bytes: int) -> int:
    return -(-box[0] * box[1] * element_bytes // 128) * 128


def smem_bytes(box, element_bytes: int, stages: int) -> int:
    """Dynamic shared memory of one block of the CUDA copies (stages x 128-aligned boxes + alignment slack)."""
    return stages * stage_bytes(box, element_bytes) + SMEM_SLACK


def resident_blocks(box, element_bytes: int, stages: int) -> int:
    """Blocks of the CUDA copies that fit on one SM by shared memory (at most 32, the H100's block limit)."""
    per_block = smem_bytes(box, element_bytes, stages) + STATIC_SMEM + SMEM_RESERVED
    return max(0, min(32, SMEM_PER_SM // per_block))


def _check(x, variant: str, box, stages: int, blocks_per_sm: int | None) -> None:
    if variant not in VARIANTS:
        raise ValueError(f"variant {variant!r}: choose one of {VARIANTS}")
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"copy wants a torch.Tensor, got {type(x).__name__}")
    if x.dim() != 2:
        raise ValueError(f"copy wants a 2-D (rows, cols) tensor, got {x.dim()}-D shape {tuple(x.shape)}")
    if x.dtype not in DTYPES:
        raise ValueError(f"copy moves {', '.join(str(d) for d in DTYPES)}; got {x.dtype}")
    if not x.is_contiguous():
        raise ValueError(f"x must be row-major contiguous (strides {x.stride()} for shape {tuple(x.shape)}): the "
                         "output is allocated contiguous and both maps share one box; call .contiguous() first")
    if len(box) != 2 or not all(isinstance(b, int) and b > 0 for b in box):
        raise ValueError(f"box must be two positive ints (box rows, box cols), got {box!r}")
    if variant in CUDA_VARIANTS:
        if variant == "pipelined" and not (1 <= stages <= MAX_STAGES):
            raise ValueError(f"stages = {stages}: the pipelined copy has 1..{MAX_STAGES} stages")
        st = stages if variant == "pipelined" else 1
        need = smem_bytes(box, x.element_size(), st)
        if need > SMEM_OPTIN:
            raise ValueError(f"box {tuple(box)} x {st} stage(s) needs {need} bytes of shared memory; a block may "
                             f"have at most {SMEM_OPTIN} (227 KiB): fewer stages or a smaller box")
        if blocks_per_sm is not None and not (1 <= blocks_per_sm <= resident_blocks(box, x.element_size(), st)):
            raise ValueError(f"blocks_per_sm = {blocks_per_sm}: between 1 and "
                             f"{resident_blocks(box, x.element_size(), st)} blocks of {need} bytes fit on an SM")
    else:
        if any(b & (b - 1) for b in box):
            raise ValueError(f"box {tuple(box)}: Triton block shapes must be powers of two")
    # The tensor-map rules (alignment, strides, box limits, box <= tensor): named field, value and rule.
    validate_tensor(x, box)
    if not x.is_cuda:
        raise ValueError(f"copy runs on an sm_90 GPU; x is on {x.device} (the tensor-map rules above passed)")


def copy(x: torch.Tensor, variant: str = "pipelined", *, box=DEFAULT_BOX, stages: int = DEFAULT_STAGES,
         blocks_per_sm: int | None = None, out: torch.Tensor | None = None) -> torch.Tensor:
    """y = x, moved box by box with TMA. box = (box rows, box cols) in elements; stages / blocks_per_sm apply to
    the persistent CUDA variant (blocks_per_sm=None: 2, or 1 when only one block of that size fits an SM)."""
    box = tuple(box)
    _check(x, variant, box, stages, blocks_per_sm)
    y = torch.empty_like(x) if out is None else out
    if y.shape != x.shape or y.dtype != x.dtype or not y.is_contiguous() or y.device != x.device:
        raise ValueError(f"out must be a contiguous {x.dtype} tensor of shape {tuple(x.shape)} on {x.device}")
    if variant in ("triton", "triton_device"):
        from .triton_tma import copy_triton

        return copy_triton(x, y, box=box, device_descriptors=variant == "triton_device")
    rows, cols = x.shape
    esize = x.element_size()
    nbox = box[0] * box[1] * esize
    src, dst = tensor_map(x, box), tensor_map(y, box)
    if variant == "tile":
        grid = (ceil_div(cols, box[1]), ceil_div(rows, box[0]))
        launch(cubin(), "tma_copy_tile", grid=grid, block=COPY_BLOCK, smem=smem_bytes(box, esize, 1),
               args=(src, dst, i32(box[0]), i32(box[1]), i32(nbox)))
    else:
        sms = torch.cuda.get_device_properties(x.device).multi_processor_count
        per_sm = blocks_per_sm or min(DEFAULT_BLOCKS_PER_SM, resident_blocks(box, esize, stages))
        nboxes = box_count((rows, cols), box)
        launch(cubin(), "tma_copy_pipelined", grid=min(nboxes, per_sm * sms), block=COPY_BLOCK,
               smem=smem_bytes(box, esize, stages),
               args=(src, dst, i32(rows), i32(cols), i32(box[0]), i32(box[1]), i32(nbox), i32(stages)))
    return y


__all__ = ["VARIANTS", "copy", "cubin", "tensor_map", "smem_bytes", "resident_blocks", "TensorMapError"]
