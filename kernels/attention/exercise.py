"""Week 2, day 5's graded exercise: attn_kv — the K and V pipelines of an attention forward (TMA rings + WGMMA).

The workload half of the exercise (inputs, reference, the fixed launch contract, FLOPs): the grader and the notebook
share it. K and V travel in rings of their own, each stage with its own full (bytes landed) and empty (consumers
done) barrier, FlashAttention-3's way. The student writes the producer (K one tile ahead of V; each ring's empty wait
with that ring's use count and parity; expect_tx of one tile on that ring's full barrier; the TMA boxes) and the
consumers' hand-over around three given pieces — wait k_full, QK^T, wgmma_wait, release K (before the softmax), the
softmax, wait v_full, PV, wgmma_wait, release V; the harness builds the tensor maps and launches it with the contract
below.

Launch contract
---------------
    extern "C" __global__ void attn_kv(const __grid_constant__ CUtensorMap q_map,
                                       const __grid_constant__ CUtensorMap k_map,
                                       const __grid_constant__ CUtensorMap v_map,
                                       const __nv_bfloat16* q, const __nv_bfloat16* k,
                                       const __nv_bfloat16* v, __nv_bfloat16* out, int seq, int causal)

- q, k, v, out: (B, H, S, 128) bf16, contiguous; D = 128 only (the exercise's one head dim; the demo kernel in
  kernels/attention/r1_attention.cu also does 64). B * H * S >= 128.
- the maps describe the 2-D (B*H*S, 128) view (row bh * S + s = query / key s of head bh), 128B swizzle, zero fill:
  q_map box (64, 64) — a warpgroup's 64 queries x one 64-column slice; k_map and v_map box (128, 64).
- block = 384 threads (warpgroup 0 produces, 1 and 2 consume); grid = (ceil(S / 128), B * H).
- dynamic shared memory = SMEM_BYTES (231424 B = 226 KiB): 1 KiB to align the base to 1024 bytes for the 128B
  swizzle + Q 32 KiB + (K_STAGES + V_STAGES) tiles of 32 KiB (one K or V tile of 128 keys x 128 x 2 B each): at most
  MAX_TILES = 6 tiles in both rings together (the course solution: K_STAGES 3 + V_STAGES 2 = 5, 193 KiB).
- causal: 0 or 1 (a query attends to keys <= itself). Scale 1 / sqrt(128).
- q, k, v pointers: the same tensors, so that a plain-load kernel can be written against the same contract.
The path part requires UTMALDG and HGMMA in attn_kv (static hint); on the GPU, the bytes the kernel must read (Q, K, V)
come >= 90 % through TMA and <= 5 % any other way, and HGMMA executes >= 1024 times per CTA.
"""

from __future__ import annotations

import torch

from ..launch import ceil_div, i32
from . import workload
from .workload import make_inputs, reference  # noqa: F401 - part of the exercise's interface

NAME = "attn_kv"
KERNEL = "attn_kv"
D = 128
BLOCK = 384
BM = 128
Q_BOX, KV_BOX = (64, 64), (128, 64)
SMEM_BYTES = 225 * 1024 + 1024       # 231424 <= 227 KiB (232448), the opt-in maximum per block
Q_BYTES = BM * D * 2                  # 32 KiB: the block's 128 queries
TILE_BYTES = 128 * D * 2              # 32 KiB: one K or one V tile of 128 keys = one stage of its ring
ALIGN_SLACK = 1024                    # the base rounded up to 1024 B (128B swizzle)
MAX_TILES = (SMEM_BYTES - ALIGN_SLACK - Q_BYTES) // TILE_BYTES  # 6: K_STAGES + V_STAGES at most
# bf16 output, bf16 P in the second GEMM, fp32 everything else: ||out - ref|| / ||ref|| stays near 4e-3.
CHECK = {"rtol": 1e-2}
ELEMENT_BYTES = 2


def make_output(inputs: dict) -> torch.Tensor:
    return torch.empty_like(inputs["q"])


def tensor_map(t: torch.Tensor, box):
    """The map the harness passes: make_tensor_map over the (B*H*S, D) view, 128B swizzle (cached)."""
    from .launch import tensor_map as cached

    b, h, s, d = t.shape
    return cached(t.view(b * h * s, d), box)


def launch_args(inputs: dict, out: torch.Tensor) -> dict:
    q, k, v = inputs["q"], inputs["k"], inputs["v"]
    b, h, s, d = q.shape
    if d != D:
        raise ValueError(f"attn_kv is built for D = {D}, got {d}")
    return {"grid": (ceil_div(s, BM), b * h), "block": BLOCK, "smem": SMEM_BYTES,
            "args": (tensor_map(q, Q_BOX), tensor_map(k, KV_BOX), tensor_map(v, KV_BOX), q, k, v, out, i32(s),
                     i32(int(inputs["causal"])))}


def bytes_moved(shape) -> int:
    return workload.bytes_moved(shape)


def flops(shape) -> int:
    """4 * B * H * S^2 * D, halved when causal (declared once: kernels.attention.workload.flops)."""
    return workload.flops(shape)


# The trusted baseline of the throughput bar (the grader spec's vendor_fraction): cuDNN's SDPA forward
# on the exercise's own inputs at its bench shape, timed in the grading run (kernels.runner.exercise_baseline).
VENDOR = "cuDNN SDPA forward (torch) on the exercise's inputs"


# A record written before the baseline was kept beside the margins: the vendor's row of the same run at the bench
# shape (autograder.calibration reads it, and says so).
VENDOR_ROW = ("cudnn d128", "B4 H32 S4096 D128")


def vendor(inputs: dict, out: torch.Tensor):
    """A zero-argument call that does the exercise's work with the vendor library. cuDNN writes an output of its own
    (`out` is not used: copying into it would time a copy the student's kernel does not make)."""
    from .launch import attention

    return lambda: attention(inputs["q"], inputs["k"], inputs["v"], bool(inputs["causal"]), "cudnn")
