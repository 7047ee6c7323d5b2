"""Week 3, day 1's workload: D = A . B^T with FP8 (e4m3) operands, block scales, fp32 accumulation, bf16 out.

The recipe (DeepSeek-V3's, the one DeepGEMM implements on Hopper):

    A: (M, K) activations   scale per row and per 128-wide block of K   ("1x128")     sa (M, K/128) fp32
    B: (N, K) weights       scale per 128 x 128 block                   ("128x128")   sb (N/128, K/128) fp32
    a = e4m3(x / sa)        scale = amax(block) / 448, so each block's largest entry lands on e4m3's largest
                            finite value, 448
    D[m, n] = sum over k-blocks kb of  sa[m, kb] * sb[n // 128, kb] * (a[m, kb-block] . b[n, kb-block])

The GEMM multiplies the e4m3 tiles on the tensor cores, one 128-wide k-block at a time, and applies the two scales
to each k-block's partial sum in fp32 (one scale per row of A times one per column of B: the block's scale is constant
across the 128 columns of a B tile, so the product of the two is a rank-1 outer product per k-block).

Why those granularities (DeepSeek-V3 Technical Report, arXiv:2412.19437, section 3.3.2 "fine-grained quantization";
DeepGEMM, github.com/deepseek-ai/DeepGEMM): e4m3 keeps 3 mantissa bits (a relative step of 2^-3, so round to nearest
is within 2^-4 of the value) and spans 2^-9 (smallest subnormal) .. 448, about 18 binades. One scale per tensor lets
a single outlier push every other entry down into the subnormals. Activations carry outliers per token (row), so each
row gets its own scale, per 128 entries of K; a 1x128 group lives in one row of one k-tile, so the kernel needs one
scale per row per k-block. Weights are smoother and are quantized once, offline; a 128x128 block shares one scale,
which makes B's scale one number per (N-tile, k-block) in the kernel and lets the same quantized weight serve the
transposed GEMM of the backward pass (1x128 groups along K would not survive the transpose; 128x128 blocks do).

Layouts (every implementation: the course kernel, cuBLASLt through torch, Triton):

    a:    (M, K) float8_e4m3fn, row-major (K-major)
    b:    (N, K) float8_e4m3fn, row-major (K-major; nn.Linear's weight layout)
    sa:   (M, K/128) fp32 row-major                 (the natural layout; the reference's)
    sa_t: (K/128, M) fp32 row-major = sa.t().contiguous(): one k-block's M row scales contiguous, so a CTA loads the
          BM scales of its tile for a k-block as one contiguous run (the kernel's layout; also cuBLASLt's: its
          1x128 scale is "outer-dim major", sa_t.t() is the strided (M, K/128) view it wants)
    sb:   (N/128, K/128) fp32 row-major
    D:    (M, N) bf16 row-major

Contract: M, N, K multiples of 128 (whole scale blocks; the make_inputs / quantize_* checks raise ValueError otherwise).
"""

from __future__ import annotations

import torch

BLOCK_K = 128      # scale granularity along K (and along N for B)
E4M3_MAX = 448.0   # largest finite float8_e4m3fn (0b0_1111_110 = 1.75 * 2^8); 0b0_1111_111 is NaN, there is no inf
# The smallest amax a block's scale is computed from: an all-zero block gets scale AMAX_FLOOR / 448 (not 0, so no
# 0 / 0 = NaN when quantizing and no division by zero when dequantizing), and its entries quantize to exact zeros.
# Far below any real data, so every nonzero block gets exactly amax / 448; large enough that the product of two scales
# (sa * sb, formed in fp32 by the kernels) stays a normal fp32: (1e-12 / 448)^2 ~ 5e-30 > 1.2e-38. (DeepGEMM's
# quantizers clamp amax at 1e-4, which gives blocks of smaller magnitude too large a scale: their entries then fall
# into e4m3's subnormals and lose precision. Quantizing as x / scale, not x * (448 / amax), never overflows.)
AMAX_FLOOR = 1e-12
FP8 = torch.float8_e4m3fn

# Shapes the checks use (M, N, K), all multiples of 128: one tile; the GPU test's shape; an odd number of k-blocks
# (5: not a multiple of 4, so cuBLASLt's padded 128x128 scale layout matters) with N = 640 (2.5 tiles of 256: a
# partial N tile for a BN = 256 kernel); M = 640 with K = 1152 (9 k-blocks); a long K.
TEST_SHAPES = ((128, 128, 128), (256, 256, 512), (384, 640, 640), (640, 384, 1152), (1024, 1024, 4096))
BENCH_SHAPE = (8192, 8192, 8192)


def _check_2d(name: str, t: torch.Tensor, *, rows_multiple: int, finite: bool = True) -> None:
    if not isinstance(t, torch.Tensor) or t.dim() != 2:
        raise ValueError(f"{name} must be a 2-D tensor, got {getattr(t, 'shape', type(t).__name__)}")
    r, c = t.shape
    if r == 0 or c == 0:
        raise ValueError(f"{name} has shape {tuple(t.shape)}: both dimensions must be positive")
    if c % BLOCK_K:
        raise ValueError(f"{name} has shape {tuple(t.shape)}: K = {c} is not a multiple of BLOCK_K = {BLOCK_K}")
    if r % rows_multiple:
        raise ValueError(f"{name} has shape {tuple(t.shape)}: its {r} rows are not a multiple of {rows_multiple} "
                         f"(one 128x128 scale block per 128 rows)")
    if not t.is_floating_point():
        raise ValueError(f"{name} must be a floating-point tensor, got {t.dtype}")
    bad = int((~torch.isfinite(t)).sum()) if finite else 0
    if bad:
        raise ValueError(f"{name} has {bad} NaN/inf entries: an FP8 block scale (amax / 448) cannot represent them; "
                         "clean the input before quantizing")


def _quantize(x: torch.Tensor, amax: torch.Tensor, expand) -> tuple[torch.Tensor, torch.Tensor]:
    scale = amax.clamp_min(AMAX_FLOOR) / E4M3_MAX                       # fp32, one per block
    # x / scale can come out a hair above 448 in fp32 (amax / (amax / 448)); clamp so it rounds to 448, not to NaN
    q = (x / expand(scale)).clamp(-E4M3_MAX, E4M3_MAX).to(FP8)
    return q, scale


def quantize_rows(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """x (M, K) float -> (a, sa): a float8_e4m3fn (M, K), sa fp32 (M, K/128), one scale per row per 128-wide K block:
    sa = amax(|block|) / 448 (amax floored at AMAX_FLOOR), a = e4m3(x / sa). NaN/inf in x raise ValueError."""
    _check_2d("x", x, rows_multiple=1)
    m, k = x.shape
    xf = x.float()
    amax = xf.abs().view(m, k // BLOCK_K, BLOCK_K).amax(dim=2)        # (M, K/128)
    return _quantize(xf, amax, lambda s: s.repeat_interleave(BLOCK_K, dim=1))


def quantize_blocks(w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """w (N, K) float -> (b, sb): b float8_e4m3fn (N, K), sb fp32 (N/128, K/128), one scale per 128x128 block:
    sb = amax(|block|) / 448 (amax floored at AMAX_FLOOR), b = e4m3(w / sb). NaN/inf in w raise ValueError."""
    _check_2d("w", w, rows_multiple=BLOCK_K)
    n, k = w.shape
    wf = w.float()
    amax = wf.abs().view(n // BLOCK_K, BLOCK_K, k // BLOCK_K, BLOCK_K).amax(dim=(1, 3))   # (N/128, K/128)
    return _quantize(wf, amax, _expand_blocks)


def _expand_blocks(s: torch.Tensor) -> torch.Tensor:
    return s.repeat_interleave(BLOCK_K, dim=0).repeat_interleave(BLOCK_K, dim=1)


def _check_scales(name: str, q: torch.Tensor, s: torch.Tensor, expected: tuple[int, int]) -> None:
    if q.dtype != FP8:
        raise ValueError(f"{name} must be float8_e4m3fn, got {q.dtype}")
    if tuple(s.shape) != expected:
        raise ValueError(f"the scales of {name} {tuple(q.shape)} must have shape {expected}, got {tuple(s.shape)}")


def dequantize_rows(a: torch.Tensor, sa: torch.Tensor, dtype=torch.float32) -> torch.Tensor:
    """a (M, K) e4m3, sa (M, K/128) -> (M, K) = a * sa per 1x128 group, in `dtype` (float32; float64 is exact)."""
    _check_2d("a", a, rows_multiple=1, finite=False)
    _check_scales("a", a, sa, (a.shape[0], a.shape[1] // BLOCK_K))
    return a.to(dtype) * sa.to(dtype).repeat_interleave(BLOCK_K, dim=1)


def dequantize_blocks(b: torch.Tensor, sb: torch.Tensor, dtype=torch.float32) -> torch.Tensor:
    """b (N, K) e4m3, sb (N/128, K/128) -> (N, K) = b * sb per 128x128 block, in `dtype` (float32; float64 is
    exact)."""
    _check_2d("b", b, rows_multiple=BLOCK_K, finite=False)
    _check_scales("b", b, sb, (b.shape[0] // BLOCK_K, b.shape[1] // BLOCK_K))
    return b.to(dtype) * _expand_blocks(sb.to(dtype))


def check_shape(shape) -> tuple[int, int, int]:
    """(M, N, K) as ints, each a positive multiple of 128; ValueError naming the one that is not."""
    try:
        m, n, k = (int(v) for v in shape)
    except (TypeError, ValueError):
        raise ValueError(f"shape must be (M, N, K), got {shape!r}") from None
    for name, v in (("M", m), ("N", n), ("K", k)):
        if v <= 0 or v % BLOCK_K:
            raise ValueError(f"shape {tuple(shape)}: {name} = {v} is not a positive multiple of {BLOCK_K} "
                             "(whole 1x128 / 128x128 scale blocks)")
    return m, n, k


def make_unquantized(shape, seed: int, device="cuda") -> tuple[torch.Tensor, torch.Tensor]:
    """The fp32 operands before quantization: x (M, K) and w (N, K), entries N(0, 1), drawn with a torch.Generator
    on `device` (make_inputs quantizes exactly these; accuracy.py compares each recipe against x @ w.T)."""
    m, n, k = check_shape(shape)
    g = torch.Generator(device=device).manual_seed(seed)
    x = torch.randn(m, k, generator=g, device=device)
    w = torch.randn(n, k, generator=g, device=device)
    return x, w


def make_inputs(shape, seed: int, device="cuda") -> dict:
    """{"a", "sa", "sa_t", "b", "sb"}: make_unquantized's x and w quantized, A per 1x128 group and B per 128x128 block;
    sa_t = sa.t().contiguous(), (K/128, M), the kernel's M-major layout (module docstring)."""
    x, w = make_unquantized(shape, seed, device)
    a, sa = quantize_rows(x)
    b, sb = quantize_blocks(w)
    return {"a": a, "sa": sa, "sa_t": sa.t().contiguous(), "b": b, "sb": sb}


def make_scale_varied_inputs(shape, seed: int, device="cuda") -> dict:
    """make_inputs' dict for operands whose scale blocks differ by powers of two (2^-6 .. 2^6, at random): each 1 x 128
    group of x and each 128 x 128 block of w scaled by its own factor before quantization, so that a scale read for the
    wrong row, k-block or tile column is off by 2x or more somewhere (the rungs' tests)."""
    m, n, k = check_shape(shape)
    g = torch.Generator(device=device).manual_seed(seed)
    row = 2.0 ** torch.randint(-6, 7, (m, k // 128), generator=g, device=device).float()
    blk = 2.0 ** torch.randint(-6, 7, (n // 128, k // 128), generator=g, device=device).float()
    x = torch.randn(m, k, generator=g, device=device) * row.repeat_interleave(128, 1)
    w = torch.randn(n, k, generator=g, device=device) * blk.repeat_interleave(128, 0).repeat_interleave(128, 1)
    a, sa = quantize_rows(x)
    b, sb = quantize_blocks(w)
    return {"a": a, "sa": sa, "sa_t": sa.t().contiguous(), "b": b, "sb": sb}


def reference(inputs: dict) -> torch.Tensor:
    """dequantize_rows(a, sa) @ dequantize_blocks(b, sb).T, (M, N): in fp32 on a GPU, in float64 on the CPU (returned
    as float64 there: the dequantized entries, 4 significant bits times a 24-bit scale, are exact in float64, and the
    sums round at 2^-53). On a GPU the fp32 dequantization rounds each entry once (2^-24 relative) and the fp32
    accumulation adds its own, both far below the bf16 output's 2^-9."""
    a, b = inputs["a"], inputs["b"]
    dtype = torch.float64 if a.device.type == "cpu" else torch.float32
    return dequantize_rows(a, inputs["sa"], dtype) @ dequantize_blocks(b, inputs["sb"], dtype).T


def make_output(inputs: dict) -> torch.Tensor:
    a, b = inputs["a"], inputs["b"]
    return torch.empty(a.shape[0], b.shape[0], dtype=torch.bfloat16, device=a.device)


def flops(shape) -> int:
    m, n, k = check_shape(shape)
    return 2 * m * n * k


def bytes_moved(shape) -> int:
    """Compulsory bytes: A and B read once (1 byte an entry), both scale tensors read once (4 bytes an entry),
    D written once (bf16)."""
    m, n, k = check_shape(shape)
    kb = k // BLOCK_K
    return m * k + n * k + 4 * (m * kb + (n // BLOCK_K) * kb) + 2 * m * n


def shape_name(shape) -> str:
    return "x".join(map(str, shape))
