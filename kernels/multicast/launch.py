"""Launchers of week 2, day 3's cluster demos. Every rung of a demo has the same call shape; the cluster size and
the variant are arguments.

    y = rotate(x, cluster=2)                        # DSMEM pull: mapa + ld.shared::cluster
    y = rotate(x, cluster=4, variant="stas")        # DSMEM push: st.async + mbarrier complete_tx
    s = broadcast_sum(table, cluster=1)             # every CTA loads every tile itself (TMA)
    s = broadcast_sum(table, cluster=4)             # rank 0 multicasts each tile into the 4 CTAs of its cluster

Inputs are checked here, before anything touches a GPU, with errors that say the rule.
"""

from __future__ import annotations


import torch

from ..compile import day_kernel
from ..launch import i32, launch
from ..tensormap import cached_tensor_map as tensor_map, validate_tensor
from .workload import BLOCK_WORDS, SUM_CTAS_PER_SM, SUM_STAGES, TILE, TILE_BYTES

ROTATE_VARIANTS = ("ld", "stas")
CLUSTER_SIZES = (1, 2, 4, 8)  # 8: the portable maximum cluster size
MAX_STAGES = 8                # cluster_demo.cu: MAX_STAGES barriers of each kind
BLOCK = 128
SMEM_SLACK = 128


cubin, source = day_kernel("multicast", "cluster_demo.cu")  # cubin(): compiled once; source(start, end): for the notebook


def _cluster(cluster: int) -> None:
    if cluster not in CLUSTER_SIZES:
        raise ValueError(f"cluster = {cluster}: choose one of {CLUSTER_SIZES} (8 is the portable maximum)")


def rotate(x: torch.Tensor, cluster: int = 2, variant: str = "ld", *, out: torch.Tensor | None = None) -> torch.Tensor:
    """out[block b] = x[block of rank (r + 1) % cluster in b's cluster], blocks of 1024 fp32, through DSMEM."""
    if variant not in ROTATE_VARIANTS:
        raise ValueError(f"variant {variant!r}: choose one of {ROTATE_VARIANTS}")
    _cluster(cluster)
    if not isinstance(x, torch.Tensor) or x.dtype != torch.float32 or x.dim() != 1 or not x.is_contiguous():
        raise ValueError("rotate wants a contiguous 1-D float32 tensor")
    if x.numel() == 0 or x.numel() % (BLOCK_WORDS * cluster):
        raise ValueError(f"x has {x.numel()} elements: a multiple of {BLOCK_WORDS} x cluster ({cluster}) is needed "
                         "(one block of 1024 per CTA, whole clusters)")
    if not x.is_cuda:
        raise ValueError(f"rotate runs on an sm_90 GPU; x is on {x.device}")
    y = torch.empty_like(x) if out is None else out
    launch(cubin(), f"dsmem_rotate_{variant}", grid=x.numel() // BLOCK_WORDS, block=BLOCK, cluster=cluster,
           args=(x, y))
    return y


def sum_smem_bytes(stages: int = SUM_STAGES) -> int:
    return stages * TILE_BYTES + SMEM_SLACK


def sum_ctas(sms: int, cluster: int, ctas_per_sm: int = SUM_CTAS_PER_SM) -> int:
    """CTAs of broadcast_sum: ctas_per_sm x SMs, rounded down to whole clusters."""
    return (ctas_per_sm * sms) // cluster * cluster


def broadcast_sum(table: torch.Tensor, cluster: int = 1, *, stages: int = SUM_STAGES, ctas: int | None = None,
                  out: torch.Tensor | None = None) -> torch.Tensor:
    """Every CTA sums all (64, 64) tiles of `table` ((K x 64, 64) bf16) into one (64, 64) fp32 tile: out is
    (ctas, 64, 64). cluster = 1: each CTA loads each tile itself; cluster = N: one multicast load per cluster."""
    _cluster(cluster)
    if not isinstance(table, torch.Tensor) or table.dtype != torch.bfloat16 or table.dim() != 2:
        raise ValueError("broadcast_sum wants a 2-D bf16 table of shape (K x 64, 64)")
    if table.shape[1] != TILE or table.shape[0] % TILE or table.shape[0] == 0:
        raise ValueError(f"table shape {tuple(table.shape)}: (K x 64, 64) — whole 64 x 64 tiles")
    if not 1 <= stages <= MAX_STAGES:
        raise ValueError(f"stages = {stages}: 1..{MAX_STAGES}")
    validate_tensor(table, (TILE, TILE))
    if not table.is_cuda:
        raise ValueError(f"broadcast_sum runs on an sm_90 GPU; table is on {table.device}")
    sms = torch.cuda.get_device_properties(table.device).multi_processor_count
    n = ctas or sum_ctas(sms, cluster)
    if n % cluster:
        raise ValueError(f"ctas = {n} is not a multiple of the cluster size {cluster}")

    y = torch.empty(n, TILE, TILE, dtype=torch.float32, device=table.device) if out is None else out
    launch(cubin(), "broadcast_sum", grid=n, block=BLOCK, cluster=cluster, smem=sum_smem_bytes(stages),
           args=(tensor_map(table, (TILE, TILE)), y, i32(table.shape[0] // TILE), i32(stages)))
    return y


__all__ = ["rotate", "broadcast_sum", "cubin", "source", "sum_ctas", "sum_smem_bytes", "ROTATE_VARIANTS"]
