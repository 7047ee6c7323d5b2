"""Attention forward in Triton with tensor descriptors (TMA): the structure of Triton's fused-attention tutorial,
written for this course's (B, H, S, D) bf16 layout and awkward S.

    o = attention_triton(q, k, v, o, causal=False)       # host-side TensorDescriptor over the (B*H, S, D) view
    art = aot_compile(d=128, causal=False)               # sm_90a cubin + PTX without a GPU (SASS: UTMALDG, HGMMA)

One program owns BLOCK_M queries of one head. Descriptors are 3-D (B*H, S, D) with a block (1, BLOCK, D): a K/V box
that runs past S is zero-filled by the TMA *per head* (it never reads the next head), and the O store is clipped
at S. Keys >= S still need a mask (a zero key scores 0, not -inf). The loop runs in two phases, as in the tutorial:
the tiles that need no mask, then the masked ones (the last partial tile; the diagonal tiles when causal).
The online softmax is the CUDA kernel's: scores pre-scaled by log2(e) / sqrt(D), exp2, running max m and sum l,
O rescaled by 2^(m_old - m_new). Triton lowers tl.dot on sm_90 to WGMMA and pipelines the descriptor loads
(num_stages) with mbarriers — the same mechanisms as r1_attention.cu, chosen by the compiler.
"""

from __future__ import annotations

import triton
import triton.language as tl
from ..compile import compile_triton

# (BLOCK_M, BLOCK_N, num_warps, num_stages) per head dim: Triton's tutorial settings for Hopper.
CONFIGS = {64: (128, 128, 8, 3), 128: (128, 128, 8, 2)}


@triton.jit
def _tile(acc, l_i, m_i, q, desc_k, desc_v, bh, start_n, offs_m, S, scale_log2,
          HEAD_DIM: tl.constexpr, BLOCK_N: tl.constexpr, MASK: tl.constexpr, CAUSAL: tl.constexpr):
    offs_n = start_n + tl.arange(0, BLOCK_N)
    k = desc_k.load([bh, start_n, 0]).reshape(BLOCK_N, HEAD_DIM)       # TMA: (1, BLOCK_N, D) box
    qk = tl.dot(q, k.T) * scale_log2
    if MASK:
        keep = offs_n[None, :] < S
        if CAUSAL:
            keep = keep & (offs_n[None, :] <= offs_m[:, None])
        qk = tl.where(keep, qk, float("-inf"))
    m_new = tl.maximum(m_i, tl.max(qk, 1))
    p = tl.math.exp2(qk - m_new[:, None])
    alpha = tl.math.exp2(m_i - m_new)
    l_i = l_i * alpha + tl.sum(p, 1)
    v = desc_v.load([bh, start_n, 0]).reshape(BLOCK_N, HEAD_DIM)
    acc = tl.dot(p.to(tl.bfloat16), v, acc * alpha[:, None])
    return acc, l_i, m_new


@triton.jit
def _attn_fwd(desc_q, desc_k, desc_v, desc_o, S, scale_log2,
              HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr):
    start_m = tl.program_id(0) * BLOCK_M
    bh = tl.program_id(1)
    offs_m = start_m + tl.arange(0, BLOCK_M)
    q = desc_q.load([bh, start_m, 0]).reshape(BLOCK_M, HEAD_DIM)
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], tl.float32)
    hi = tl.minimum(S, start_m + BLOCK_M) if CAUSAL else S
    # tiles with every key < S (and, causal, every key <= every query of the block): no mask
    lo = (tl.minimum(start_m, S) // BLOCK_N) * BLOCK_N if CAUSAL else (S // BLOCK_N) * BLOCK_N
    for start_n in tl.range(0, lo, BLOCK_N):
        acc, l_i, m_i = _tile(acc, l_i, m_i, q, desc_k, desc_v, bh, start_n, offs_m, S, scale_log2,
                              HEAD_DIM, BLOCK_N, False, CAUSAL)
    for start_n in tl.range(lo, hi, BLOCK_N):
        acc, l_i, m_i = _tile(acc, l_i, m_i, q, desc_k, desc_v, bh, start_n, offs_m, S, scale_log2,
                              HEAD_DIM, BLOCK_N, True, CAUSAL)
    acc = acc / l_i[:, None]
    desc_o.store([bh, start_m, 0], acc.to(tl.bfloat16).reshape(1, BLOCK_M, HEAD_DIM))  # clipped at S


def attention_triton(q, k, v, o, causal: bool = False):
    from triton.tools.tensor_descriptor import TensorDescriptor

    b, h, s, d = q.shape
    bm, bn, warps, stages = CONFIGS[d]
    views = [t.view(b * h, s, d) for t in (q, k, v, o)]
    dq = TensorDescriptor.from_tensor(views[0], [1, bm, d])
    dk = TensorDescriptor.from_tensor(views[1], [1, bn, d])
    dv = TensorDescriptor.from_tensor(views[2], [1, bn, d])
    do = TensorDescriptor.from_tensor(views[3], [1, bm, d])
    scale_log2 = 1.4426950408889634 / d ** 0.5
    grid = (triton.cdiv(s, bm), b * h)
    _attn_fwd[grid](dq, dk, dv, do, s, scale_log2, HEAD_DIM=d, BLOCK_M=bm, BLOCK_N=bn, CAUSAL=bool(causal),
                    num_warps=warps, num_stages=stages)
    return o


def aot_compile(d: int = 128, causal: bool = False, capability: int = 90) -> dict:
    """Compile _attn_fwd ahead of time for sm_90a (no GPU): {"name", "cubin", "ptx", "shared", "triton"}."""
    bm, bn, warps, stages = CONFIGS[d]
    sig = {"desc_q": f"tensordesc<bf16[1, {bm}, {d}]>", "desc_k": f"tensordesc<bf16[1, {bn}, {d}]>",
           "desc_v": f"tensordesc<bf16[1, {bn}, {d}]>", "desc_o": f"tensordesc<bf16[1, {bm}, {d}]>",
           "S": "i32", "scale_log2": "fp32", "HEAD_DIM": "constexpr", "BLOCK_M": "constexpr",
           "BLOCK_N": "constexpr", "CAUSAL": "constexpr"}
    return compile_triton(_attn_fwd, sig, {"HEAD_DIM": d, "BLOCK_M": bm, "BLOCK_N": bn, "CAUSAL": bool(causal)},
                          num_warps=warps, num_stages=stages, capability=capability)
