"""Launchers of day 4's kernels.

The streaming sum (stream.cu): every rung has the same call shape,

    total = stream_sum(x, variant="pipe", stages=4)        # variant: "prim" | "pipe" | "roles"; stages 1..4
    partials = stream_partials(x, variant="roles", stages=2, blocks_per_sm=1)   # what the kernel writes

The resample exercise (the kernel source is yours, or the course's known answers):

    out = resample(src_times, src_feats, tgt_times, source=RESAMPLE_CU)

launched with the exercise's fixed contract (kernels/pipeline/exercise.py).
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import torch

from ..compile import Cubin, compile_cuda, kernel_file
from ..launch import i64, launch
from . import exercise
from .workload import STAGE_CHOICES, VARIANTS

THREADS = {"prim": 256, "pipe": 256, "roles": 160}  # roles: 1 producer warp + 4 consumer warps
MAX_STAGES = 8


@lru_cache(maxsize=None)
def cubin(stages: int) -> Cubin:
    """stream.cu compiled with STAGES = `stages` (one module holds all three variants)."""
    return compile_cuda(kernel_file("pipeline", "stream.cu"), defines={"STAGES": int(stages)})


def kernel_name(variant: str) -> str:
    return f"stream_sum_{variant}"


def sm_count(device=None) -> int:
    return torch.cuda.get_device_properties(device or torch.cuda.current_device()).multi_processor_count


def validate_stream(x, variant: str = "pipe", stages: int = 4, blocks_per_sm: int = 1) -> None:
    """Raise ValueError / TypeError naming what is wrong (device last: the checks run on CPU tensors too)."""
    if variant not in VARIANTS:
        raise ValueError(f"variant {variant!r}: choose one of {VARIANTS}")
    if not isinstance(stages, int) or not 1 <= stages <= MAX_STAGES:
        raise ValueError(f"stages = {stages!r}: an int in 1..{MAX_STAGES} (the course measures {STAGE_CHOICES})")
    if not isinstance(blocks_per_sm, int) or not 1 <= blocks_per_sm <= 8:
        raise ValueError(f"blocks_per_sm = {blocks_per_sm!r}: an int in 1..8")
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"stream_sum wants a torch.Tensor, got {type(x).__name__}")
    if x.dtype != torch.float32 or x.dim() != 1:
        raise ValueError(f"stream_sum wants a 1-D float32 tensor, got {x.dtype} of shape {tuple(x.shape)}")
    if not x.is_contiguous():
        raise ValueError("stream_sum wants a contiguous x (tiles are copied 16 bytes at a time)")
    if x.data_ptr() % 16:
        raise ValueError(f"x must be 16-byte aligned for 16-byte cp.async (its address is {x.data_ptr() % 16} "
                         "bytes past a 16-byte boundary): pass a fresh allocation, not an offset view")
    if not x.is_cuda:
        raise ValueError(f"x is on {x.device}: move it to the GPU (x.cuda())")


def stream_partials(x: torch.Tensor, *, variant: str = "pipe", stages: int = 4, blocks_per_sm: int = 1,
                    out: torch.Tensor | None = None) -> torch.Tensor:
    """Launch one stream.cu kernel: a persistent grid of blocks_per_sm x SMs blocks; returns the float32 partial sum
    of every block (block b owns the 4 KiB tiles b, b + grid, ...)."""
    validate_stream(x, variant, stages, blocks_per_sm)
    grid = blocks_per_sm * sm_count(x.device)
    if out is None:
        out = torch.empty(grid, dtype=torch.float32, device=x.device)
    elif out.shape != (grid,) or out.dtype != torch.float32 or not out.is_cuda:
        raise ValueError(f"out must be a float32 CUDA tensor of shape ({grid},), got {out.dtype} {tuple(out.shape)}")
    launch(cubin(stages), kernel_name(variant), grid=grid, block=THREADS[variant], args=(x, out, i64(x.numel())))
    return out


def stream_sum(x: torch.Tensor, *, variant: str = "pipe", stages: int = 4, blocks_per_sm: int = 1) -> torch.Tensor:
    """The sum of x (a 0-dim float64 tensor): the kernel's per-block partials, added up by torch."""
    return stream_partials(x, variant=variant, stages=stages, blocks_per_sm=blocks_per_sm).double().sum()


# ------------------------------------------------------------------------------------------------ the exercise
def validate_resample(src_times, src_feats, tgt_times, out=None) -> tuple[int, int, int, int]:
    """Shapes, dtypes, contiguity, alignment and the contract's limits on D; returns (B, S, T, D)."""
    for name, t in (("src_times", src_times), ("src_feats", src_feats), ("tgt_times", tgt_times)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
        if not t.is_contiguous():
            raise ValueError(f"{name} must be contiguous: call .contiguous()")
    if src_times.dtype != torch.float32 or tgt_times.dtype != torch.float32:
        raise ValueError(f"times must be float32, got src_times {src_times.dtype}, tgt_times {tgt_times.dtype}")
    if src_feats.dtype != torch.bfloat16:
        raise ValueError(f"src_feats must be bfloat16, got {src_feats.dtype}")
    if src_times.dim() != 2 or src_feats.dim() != 3 or tgt_times.dim() != 2:
        raise ValueError(f"want src_times [B, S], src_feats [B, S, D], tgt_times [B, T]; got "
                         f"{tuple(src_times.shape)}, {tuple(src_feats.shape)}, {tuple(tgt_times.shape)}")
    B, S, D = src_feats.shape
    if tuple(src_times.shape) != (B, S) or tgt_times.shape[0] != B:
        raise ValueError(f"shapes disagree: src_times {tuple(src_times.shape)}, src_feats {tuple(src_feats.shape)}, "
                         f"tgt_times {tuple(tgt_times.shape)}")
    T = tgt_times.shape[1]
    exercise.validate_shape((B, S, T, D))
    for name, t in (("src_feats", src_feats), ("out", out)):
        if t is not None and t.data_ptr() % 16:
            raise ValueError(f"{name} must be 16-byte aligned (rows move as 16-byte vectors)")
    if out is not None:
        if out.dtype != torch.bfloat16 or tuple(out.shape) != (B, T, D) or not out.is_contiguous():
            raise ValueError(f"out must be a contiguous bfloat16 ({B}, {T}, {D}) tensor, got {out.dtype} "
                             f"{tuple(out.shape)}")
    devs = {t.device for t in (src_times, src_feats, tgt_times) + ((out,) if out is not None else ())}
    if len(devs) != 1 or not next(iter(devs)).type == "cuda":
        raise ValueError(f"all tensors must be on one CUDA device, got {sorted(map(str, devs))}")
    return B, S, T, D


@lru_cache(maxsize=16)
def _compile_source(source: str, name: str) -> Cubin:
    return compile_cuda(source, name=name)


def resample(src_times: torch.Tensor, src_feats: torch.Tensor, tgt_times: torch.Tensor, *, source,
             out: torch.Tensor | None = None) -> torch.Tensor:
    """Run a `resample` kernel (CUDA source text, a .cu Path or a compiled Cubin) with the exercise's contract."""
    validate_resample(src_times, src_feats, tgt_times, out)
    if isinstance(source, Cubin):
        cub = source
    elif isinstance(source, Path):
        cub = _compile_source(source.read_text(), source.name)
    else:
        cub = _compile_source(str(source), "RESAMPLE_CU")
    inputs = {"src_times": src_times, "src_feats": src_feats, "tgt_times": tgt_times}
    if out is None:
        out = exercise.make_output(inputs)
    la = exercise.launch_args(inputs, out)
    launch(cub, exercise.KERNEL, grid=la["grid"], block=la["block"], args=la["args"], smem=la["smem"])
    return out
