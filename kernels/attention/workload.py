"""Week 2, day 5's workload: attention forward, O = softmax(Q K^T / sqrt(D)) V (optionally causal), bf16 (B, H, S, D).

Declared once here: the shape convention, inputs (with large logits on purpose), the reference, FLOPs and bytes.
A shape is (B, H, S, D, causal) with causal 0 or 1.

FLOPs (the course's one definition, also the one FlashAttention and cuDNN report): two GEMMs of 2 * S * S * D each per
head, 4 * B * H * S * S * D in all; causal attention does half of the score matrix, so half of that.
"""

from __future__ import annotations

import torch

DTYPE = torch.bfloat16
ELEMENT_BYTES = 2
BM, BN = 128, 128                # query rows per block, keys per K/V tile (r1_attention.cu and the exercise)
DIMS = (64, 128)                 # head dimensions of the CUDA kernel
BENCH_SHAPE = (4, 32, 4096, 128, 0)
# Awkward shapes for the checks: S not a multiple of the 128-key tile (the last tile runs into the next head, which
# must be masked), S smaller than one tile, one head, odd head counts, both head dims, causal and not. B * H * S >= 128
# (a K/V box of 128 rows must fit in the 2-D (B*H*S, D) view the tensor maps describe).
TEST_SHAPES = ((1, 2, 200, 128, 0), (1, 2, 200, 128, 1), (2, 1, 129, 64, 0), (1, 3, 77, 64, 1),
               (1, 2, 1000, 128, 1), (2, 2, 1031, 64, 0))
# Large logits: every odd head draws q 30x larger, so its scores reach ~100 (exp(100) overflows fp32 at 3.4e38 =
# e^88.7): a softmax that does not subtract the running max produces inf / NaN there, and one that does not rescale
# O and l when the max grows is off by factors e^(m_new - m_old) >> 1. The even heads keep ordinary scores (~N(0, 1)).
LARGE_LOGIT_SCALE = 30.0


def flops(shape) -> int:
    b, h, s, d, causal = shape
    f = 4 * b * h * s * s * d
    return f // 2 if causal else f


def bytes_moved(shape) -> int:
    """Q, K, V read once and O written once (the compulsory traffic; K/V tiles are re-read from L2 per block)."""
    b, h, s, d, _ = shape
    return 4 * b * h * s * d * ELEMENT_BYTES


def make_inputs(shape, seed: int, device="cuda") -> dict:
    b, h, s, d, causal = shape
    g = torch.Generator(device=device).manual_seed(seed)
    q = torch.randn(b, h, s, d, generator=g, device=device)
    q[:, 1::2] *= LARGE_LOGIT_SCALE
    k = torch.randn(b, h, s, d, generator=g, device=device)
    v = torch.randn(b, h, s, d, generator=g, device=device)
    return {"q": q.to(DTYPE), "k": k.to(DTYPE), "v": v.to(DTYPE), "causal": int(causal)}


# The one data-effect lesson of the day (kernels/attention/bench.py, data_effect): the best CUDA rung and cuDNN timed
# on the exercise's inputs (make_inputs: odd heads with large logits, a nearly one-hot softmax there) and on plain
# N(0, 1) q, k, v, the SM clock read during each. Every other row (rungs, cuDNN, FA2, Triton, the exercise's answers)
# uses make_inputs, the exercise's generator (kernels/attention/exercise.py re-exports it).
DATA = ("exercise", "normal")


def make_normal_inputs(shape, seed: int, device="cuda") -> dict:
    """q, k, v with plain N(0, 1) entries on every head (no large logits): the data-effect lesson's other side."""
    b, h, s, d, causal = shape
    g = torch.Generator(device=device).manual_seed(seed)
    q, k, v = (torch.randn(b, h, s, d, generator=g, device=device).to(DTYPE) for _ in range(3))
    return {"q": q, "k": k, "v": v, "causal": int(causal)}


def inputs_for(data: str):
    """The input generator of a data tag: "exercise" -> make_inputs, "normal" -> make_normal_inputs."""
    if data not in DATA:
        raise ValueError(f"data {data!r}: one of {DATA}")
    return make_inputs if data == "exercise" else make_normal_inputs


def reference(inputs: dict) -> torch.Tensor:
    """torch's math SDPA in fp32 on the bf16 inputs, rounded to bf16; one batch at a time (the bench shape's fp32
    score matrix is 2 GiB per batch)."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    import torch.nn.functional as F

    q, k, v = inputs["q"], inputs["k"], inputs["v"]
    out = torch.empty_like(q)
    with sdpa_kernel(SDPBackend.MATH):
        for i in range(q.shape[0]):
            out[i] = F.scaled_dot_product_attention(q[i].float(), k[i].float(), v[i].float(),
                                                    is_causal=bool(inputs["causal"])).to(q.dtype)
    return out


def shape_name(shape) -> str:
    b, h, s, d, causal = shape
    return f"B{b} H{h} S{s} D{d}" + (" causal" if causal else "")
