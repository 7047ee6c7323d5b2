"""The block-scaled FP8 GEMM in Triton, for the day's table: the same call shape as the course kernel.

    d = triton_fp8(a, sa_t, b, sb)            # a (M, K), b (N, K) e4m3; sa_t (K/128, M), sb (N/128, K/128) fp32
    d = triton_fp8(..., config=CONFIGS[0])    # one fixed config, no autotuning (what TRITON_INTERPRET=1 runs)

One program per (BM, BN) output tile, tiles walked in grouped order (GROUP_M tile rows per column sweep, as in the bf16
day). Per 128-wide k-block: TMA loads of the (BM, 128) A tile and the (BN, 128) B tile (host-side TensorDescriptor:
UTMALDG on Hopper, zero-filled past the edges), `tl.dot(a, b.T)` on the float8e4nv tiles (wgmma with fp32
accumulation; b is K-major, so `.T` is a descriptor flag, which is also the only layout FP8 wgmma accepts), then the
k-block's partial sum is scaled and added to the fp32 accumulator on the CUDA cores:

    acc += tl.dot(a, b.T) * (s_a[:, None] * s_b[None, :])      # s_a: BM row scales, s_b: BN column scales

Each tl.dot starts from a fresh accumulator, so this is DeepGEMM's promotion too: the tensor cores' FP8 accumulation
(~14 mantissa bits on Hopper; accuracy.py's demo) never runs over more than 128 products (four k32 wgmmas) before the
partial is added in full fp32. That is the "block-scaled matmul" of Triton users on Hopper (vLLM / SGLang's
w8a8_block_fp8_matmul, torch inductor's DeepSeek-style template); Blackwell has tl.dot_scaled for MX formats, whose
scales are per 32 entries and e8m0, not this recipe's.

Scale loads: s_a is BM contiguous fp32 of sa_t's k-block row (the M-major layout: one 4*BM-byte run per k-block);
s_b is loaded as a BN-vector (sb[(n // 128), kb] per column), not a scalar, which also serves BN = 256 tiles that span
two 128-row blocks of B.

Tuning: triton.autotune over CONFIGS (key M, N, K / 128; configs whose tile does not divide M or N are pruned:
shapes are multiples of 128, so a 128-wide tile always survives). Triton's autotuner times without an L2 flush and on
the same inputs each time (the bf16 day measured it keeping a config the course timer found slower); it picks here
because the course timer's picker is the bf16 day's own code (kernels/gemm/baselines.py keep_fastest) and a topic does
not borrow another topic's machinery. Seen on an H200 (torch 2.11.0+cu130, 2026-12-03): the tuner took 2.5 s at
8192^3, kept (128, 128, 4 stages, 8 warps), and the course timer measured 1.46 ms (751 TFLOPS) there, against
cuBLASLt blockwise's 0.82 ms (1340 TFLOPS); `config=` takes one config for a pick made with the course timer.
"""

from __future__ import annotations

import os

import triton
import triton.language as tl

from .workload import BLOCK_K, FP8

GROUP_M = 8
# (BM, BN, stages, warps); BK is the scale block, 128. Shared memory per stage: (BM + BN) x 128 bytes, so the deepest
# ring here is 4 x 32 KiB or 3 x 48 KiB, within 227 KiB. (128, 256) keeps two BM x BN fp32 tiles live (the
# accumulator and the k-block's partial): 256 registers a thread at 8 warps, so it may spill; the tuner decides.
CONFIGS = ((128, 128, 4, 8), (128, 128, 3, 4), (64, 128, 4, 4), (128, 256, 3, 8), (256, 128, 3, 8))


def _fp8_block_scaled(a_desc, b_desc, sa_t_ptr, sb_ptr, d_ptr, M, N, K_BLOCKS: tl.constexpr, BM: tl.constexpr,
                      BN: tl.constexpr, BK: tl.constexpr, GROUP_M: tl.constexpr):
    # K_BLOCKS = K / 128 is a constexpr, not a run-time argument: Triton 3.6's interpreter turns a run-time scalar into
    # a 1-element numpy array, and `range()` of it fails with numpy >= 2.4 (int() of a 1-d array). On a GPU this
    # costs one compile per K, which the autotuner, keyed on K, pays anyway.
    pid = tl.program_id(0)
    num_m = tl.cdiv(M, BM)
    num_n = tl.cdiv(N, BN)
    per_group = GROUP_M * num_n
    first_m = (pid // per_group) * GROUP_M
    height = min(num_m - first_m, GROUP_M)
    pm = first_m + (pid % per_group) % height
    pn = (pid % per_group) // height
    offs_m = pm * BM + tl.arange(0, BM)
    offs_n = pn * BN + tl.arange(0, BN)
    sb_rows = sb_ptr + (offs_n // BK) * K_BLOCKS            # (BN,) each column's row of sb (its 128-row block of B)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for kb in range(K_BLOCKS):
        a = a_desc.load([pm * BM, kb * BK])                 # TMA: (BM, 128) e4m3 box of A (M, K)
        b = b_desc.load([pn * BN, kb * BK])                 # TMA: (BN, 128) e4m3 box of B (N, K)
        s_a = tl.load(sa_t_ptr + kb * M + offs_m)           # (BM,) contiguous: sa_t[kb, rows of the tile]
        s_b = tl.load(sb_rows + kb)                         # (BN,) sb[n // 128, kb]
        partial = tl.dot(a, b.T)                            # wgmma on e4m3, fresh fp32 accumulator (the promotion)
        acc += partial * (s_a[:, None] * s_b[None, :])      # the k-block's scales, in fp32 on the CUDA cores
    tl.store(d_ptr + offs_m[:, None] * N + offs_n[None, :], acc.to(tl.bfloat16))


def _set_boxes(nargs):
    """Config pre-hook: the TMA boxes follow the config's tile."""
    bm, bn, bk = nargs["BM"], nargs["BN"], nargs["BK"]
    nargs["a_desc"].block_shape = [bm, bk]
    nargs["b_desc"].block_shape = [bn, bk]


def _prune(configs, named_args, **kwargs):
    m, n = named_args["M"], named_args["N"]
    kept = [c for c in configs if m % c.kwargs["BM"] == 0 and n % c.kwargs["BN"] == 0]
    return kept or configs[:1]


fp8_block_scaled_kernel = triton.jit(_fp8_block_scaled)
fp8_block_scaled_tuned = triton.autotune(
    configs=[triton.Config({"BM": bm, "BN": bn}, num_stages=s, num_warps=w, pre_hook=_set_boxes)
             for bm, bn, s, w in CONFIGS],
    key=["M", "N", "K_BLOCKS"], prune_configs_by={"early_config_prune": _prune})(fp8_block_scaled_kernel)


def _interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


def _check(a, sa_t, b, sb):
    if a.dtype != FP8 or b.dtype != FP8:
        raise ValueError(f"a and b must be float8_e4m3fn, got {a.dtype} and {b.dtype}")
    m, k = a.shape
    n = b.shape[0]
    if b.shape[1] != k:
        raise ValueError(f"a {tuple(a.shape)} and b {tuple(b.shape)} disagree on K")
    for name, v in (("M", m), ("N", n), ("K", k)):
        if v % BLOCK_K:
            raise ValueError(f"{name} = {v} is not a multiple of {BLOCK_K}")
    if tuple(sa_t.shape) != (k // BLOCK_K, m) or tuple(sb.shape) != (n // BLOCK_K, k // BLOCK_K):
        raise ValueError(f"sa_t must be (K/128, M) = {(k // BLOCK_K, m)} and sb (N/128, K/128) = "
                         f"{(n // BLOCK_K, k // BLOCK_K)}, got {tuple(sa_t.shape)} and {tuple(sb.shape)}")
    for name, t in (("a", a), ("b", b), ("sa_t", sa_t), ("sb", sb)):
        if not t.is_contiguous():
            raise ValueError(f"{name} must be contiguous (row-major)")
    return m, n, k


def triton_fp8(a, sa_t, b, sb, *, config: tuple | None = None, out=None):
    """D (M, N) bf16 = sum over k-blocks of sa * sb * (a . b^T) per block (module docstring). `config`:
    (BM, BN, stages, warps) to skip the autotuner; under TRITON_INTERPRET=1 the first config that divides M and N is
    used (the interpreter times nothing)."""
    import torch
    from triton.tools.tensor_descriptor import TensorDescriptor

    m, n, k = _check(a, sa_t, b, sb)
    d = torch.empty(m, n, dtype=torch.bfloat16, device=a.device) if out is None else out
    if config is None and _interpreting():
        config = next(c for c in CONFIGS if m % c[0] == 0 and n % c[1] == 0)
    bm, bn = (config[0], config[1]) if config else (BLOCK_K, BLOCK_K)
    a_desc = TensorDescriptor.from_tensor(a, [bm, BLOCK_K])   # boxes re-set per config by _set_boxes when tuning
    b_desc = TensorDescriptor.from_tensor(b, [bn, BLOCK_K])
    if config is not None:
        bm, bn, stages, warps = config
        grid = (triton.cdiv(m, bm) * triton.cdiv(n, bn),)
        fp8_block_scaled_kernel[grid](a_desc, b_desc, sa_t, sb, d, m, n, K_BLOCKS=k // BLOCK_K, BM=bm, BN=bn,
                                      BK=BLOCK_K, GROUP_M=GROUP_M, num_stages=stages, num_warps=warps)
    else:
        def grid(meta):
            return (triton.cdiv(m, meta["BM"]) * triton.cdiv(n, meta["BN"]),)
        fp8_block_scaled_tuned[grid](a_desc, b_desc, sa_t, sb, d, m, n, K_BLOCKS=k // BLOCK_K, BK=BLOCK_K,
                                     GROUP_M=GROUP_M)
    return d


def chosen_config(shape) -> dict | None:
    """The autotuner's pick for `shape` in this process (after a call at that shape), or None."""
    m, n, k = shape
    for key, cfg in fp8_block_scaled_tuned.cache.items():
        if tuple(key[:3]) == (m, n, k // BLOCK_K):
            return {**cfg.kwargs, "num_stages": cfg.num_stages, "num_warps": cfg.num_warps}
    return None
