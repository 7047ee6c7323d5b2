"""Week 3 day 2's workload: the projections of two public LLMs at the rows an inference server runs them with.

    for shape in sweep(): ...            # (M, N, K) for every M in ROWS and every projection in PROJECTIONS
    a, b = make_inputs(shape, seed)      # bf16 A (M, K) and B (N, K), N(0, 1) / sqrt(K) so C stays O(1)

A projection y = x W^T with x (M, K) the rows (tokens) and W (N, K) the weights; M is the number of tokens in flight:
64 and 128 while decoding a batch, 512 to 8192 in a prefill. The sizes are the models' published configurations
(hidden size, attention heads of 128 dims, key/value heads, MLP width):
  Llama 3 8B:  hidden 4096, 32 heads, 8 kv heads, MLP 14336;  Llama 3 70B: hidden 8192, 64 heads, 8 kv heads, MLP 28672.
QKV: N = (heads + 2 kv heads) x 128, K = hidden; O: N = K = hidden; gate+up (one GEMM, both halves): N = 2 x MLP,
K = hidden; down: N = hidden, K = MLP.
"""

from __future__ import annotations

import math

ROWS = (64, 128, 512, 2048, 8192)
MODELS = {"llama3_8b": {"hidden": 4096, "heads": 32, "kv_heads": 8, "mlp": 14336},
          "llama3_70b": {"hidden": 8192, "heads": 64, "kv_heads": 8, "mlp": 28672}}
HEAD_DIM = 128


def projections(model: str) -> dict[str, tuple[int, int]]:
    """{projection: (N, K)} of one model of MODELS."""
    c = MODELS[model]
    h = c["hidden"]
    return {"qkv": ((c["heads"] + 2 * c["kv_heads"]) * HEAD_DIM, h), "o": (h, h), "gate_up": (2 * c["mlp"], h),
            "down": (h, c["mlp"])}


PROJECTIONS = {f"{m}.{p}": nk for m in MODELS for p, nk in projections(m).items()}


def sweep(rows=ROWS) -> list[tuple[int, int, int]]:
    """Every (M, N, K) of the day's sweep: each M of `rows` with each projection (N, K), in that order."""
    return [(m, n, k) for m in rows for (n, k) in PROJECTIONS.values()]


def names(shape) -> list[str]:
    """The projections a shape is (several models may share one (N, K))."""
    m, n, k = shape
    return [p for p, nk in PROJECTIONS.items() if nk == (n, k)]


def flops(shape) -> float:
    m, n, k = shape
    return 2.0 * m * n * k


def bytes_moved(shape) -> float:
    """The bytes a GEMM must move at least: A and B read once, C written once (bf16)."""
    m, n, k = shape
    return 2.0 * (m * k + n * k + m * n)


def make_inputs(shape, seed: int = 0, device: str = "cuda"):
    """A (M, K) and B (N, K) bf16 drawn from N(0, 1) / K^(1/4) each (C = A B^T then has unit variance), one draw per
    seed, drawn on `device` (the sweep's largest B is 57344 x 8192: seconds on a CPU, milliseconds on the GPU)."""
    import torch

    m, n, k = shape
    g = torch.Generator(device=device).manual_seed(seed)
    s = 1.0 / math.sqrt(math.sqrt(k))
    a = (torch.randn(m, k, generator=g, device=device) * s).to(torch.bfloat16)
    b = (torch.randn(n, k, generator=g, device=device) * s).to(torch.bfloat16)
    return a, b


def shape_name(shape) -> str:
    return "x".join(str(int(v)) for v in shape)
