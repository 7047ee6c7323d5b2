"""The vendor's FP8 GEMMs, in the course kernel's call shape: fn(a, sa_t, b, sb) -> D (M, N) bf16.

    d = cublaslt_blockwise(a, sa_t, b, sb)         # cuBLASLt, the same recipe: 1x128 for A, 128x128 for B
    d = cublaslt_rowwise(a_r, sa_row, b_r, sb_row) # cuBLASLt, one fp32 scale per row of A and per row of B (N, K)
    a_r, sa_row, b_r, sb_row = rowwise_from_blocks(a, sa_t, b, sb)   # the closest rowwise recipe of block inputs
    d = triton_fp8(a, sa_t, b, sb)                 # kernels/fp8_gemm/triton_fp8.py
    supported(), describe()                        # which of these run on this machine, and why not

Both cuBLASLt paths go through torch: `torch.nn.functional.scaled_mm` (the public API, explicit ScalingType recipes;
it came with _scaled_mm_v2, pytorch PR #164141, Oct. 2025, and is in torch 2.11 and 2.13) where torch has it, else
`torch._scaled_mm` (torch 2.9: the recipe is inferred from the scale tensors' shapes and strides). What torch's source
says (pytorch/pytorch, aten/src/ATen/native/cuda/ScaledBlas.cpp; torch 2.13's torch/_meta_registrations.py,
_check_scaled_mm_sizes_v2, repeats the checks in Python):

- DeepSeek-style block scaling is (BlockWise1x128, BlockWise128x128): `_check_deepseek_support()` refuses unless the
  GPU is sm_90 ("DeepSeek style (1x128, 128x128) scaling only supported in CUDA for SM90") and torch was built against
  and runs with cuBLASLt >= 12.9 (CUBLAS_VERSION and cublasLtGetVersion() >= 120900: a CUDA 12.9+ build, e.g. a
  +cu129 or +cu130 wheel). Added in PR #158037 (July 2025, torch 2.9); the scale layouts were tightened in PR #166752
  (Oct. 2025: "causing silent incorrect answers ... where (K // 128) % 4 != 0").
- mat_b must be column-major (K, N): H100's cuBLASLt FP8 takes only row-major x column-major ("TN"), so B (N, K)
  row-major goes in as `b.t()`, a view.
- scale_a for 1x128: shape (M, K/128) with strides (1, M), "outer-dim-major": exactly `sa_t.t()`, no copy.
- scale_b for 128x128 through F.scaled_mm: shape (L4, N/128) with strides (1, L4), L4 = round_up(K/128, 4): sb's
  rows padded to a multiple of 4 k-blocks (cuBLASLt wants the scale's leading dimension 16-byte aligned), then
  transposed. Through torch._scaled_mm (v1) the check is on scale_b.t(): (N/128, K/128) with strides (K/128, 1), so
  `sb.t()` with no padding room; `cublaslt_blockwise` refuses that path when K/128 is not a multiple of 4.
  Seen on an H200 (torch 2.11.0+cu130, 2026-12-03): torch._scaled_mm with sb.t() is right at K/128 = 4 (rel. error
  1.7e-3, the bf16 output's rounding) and silently wrong at K/128 = 5 (rel. error 1.9e2) and 9 (1.8e19), and it
  rejects the padded layout; F.scaled_mm rejects the unpadded one ("scale_b must have shape 8 x 5") and is right
  (1.7e-3) with pad_k_blocks.
- Rowwise: scale_a (M, 1) and scale_b (1, N), fp32, contiguous. On sm_90 with cuBLASLt >= 12.9 this is cuBLASLt;
  on older builds torch runs CUTLASS's f8f8bf16_rowwise instead (the same math, another library).

`use_fast_accum` (cuBLASLt's CUBLASLT_MATMUL_DESC_FAST_ACCUM): False, the default, keeps cuBLASLt's promotion of the
FP8 partial sums to fp32; True lets the tensor cores accumulate all of K in their ~14-bit FP8 accumulator, the error
accuracy.py's demo simulates. `cublaslt_rowwise(..., fast_accum=True)` shows it on the hardware.
"""

from __future__ import annotations

from .triton_fp8 import triton_fp8  # noqa: F401 - one of this module's baselines
from .workload import BLOCK_K, E4M3_MAX, FP8, dequantize_blocks, dequantize_rows

RECIPES = ("cublaslt_blockwise", "cublaslt_rowwise", "triton_fp8")
CHECK_SHAPE = (256, 256, 512)   # supported()'s tiny call
CHECK_RTOL = 8e-3               # ||d - ref|| / ||ref||: one bf16 rounding of the output (kernels.check's bf16 band)


class Unsupported(RuntimeError):
    """This torch / GPU cannot run the recipe; the message names the torch version and what is missing."""


def torch_version() -> str:
    import torch

    return f"torch {torch.__version__} (CUDA {torch.version.cuda or 'none'})"


def _api():
    """(name, fn): torch.nn.functional.scaled_mm where it exists (torch 2.10+), else torch._scaled_mm (2.9)."""
    import torch
    import torch.nn.functional as F

    if hasattr(F, "scaled_mm") and hasattr(F, "ScalingType"):
        return "torch.nn.functional.scaled_mm", F.scaled_mm
    if hasattr(torch, "_scaled_mm"):
        return "torch._scaled_mm", torch._scaled_mm
    raise Unsupported(f"{torch_version()} has neither torch.nn.functional.scaled_mm nor torch._scaled_mm")


def _cuda_at_least(major: int, minor: int) -> bool:
    import torch

    v = torch.version.cuda
    if not v:
        return False
    parts = [int(p) for p in v.split(".")[:2]]
    return tuple(parts + [0] * (2 - len(parts))) >= (major, minor)


def _operands(a, b):
    if a.dtype != FP8 or b.dtype != FP8:
        raise ValueError(f"a and b must be float8_e4m3fn, got {a.dtype} and {b.dtype}")
    if a.dim() != 2 or b.dim() != 2 or a.shape[1] != b.shape[1]:
        raise ValueError(f"a (M, K) and b (N, K) must agree on K, got {tuple(a.shape)} and {tuple(b.shape)}")
    if not (a.is_contiguous() and b.is_contiguous()):
        raise ValueError("a and b must be contiguous (row-major, K-major)")
    return a.shape[0], b.shape[0], a.shape[1]


def pad_k_blocks(sb):
    """sb (N/128, K/128) -> (N/128, L4) contiguous, L4 = round_up(K/128, 4), the padding ones (never read: there is
    no k-block there). `pad_k_blocks(sb).t()` is the (L4, N/128), strides (1, L4) tensor cuBLASLt's 128x128 scale
    layout wants."""
    import torch

    nb, kb = sb.shape
    l4 = -(-kb // 4) * 4
    if l4 == kb:
        return sb.contiguous()
    out = torch.ones(nb, l4, dtype=sb.dtype, device=sb.device)
    out[:, :kb] = sb
    return out


def cublaslt_blockwise(a, sa_t, b, sb, *, sb_padded=None):
    """D = the block-scaled GEMM through cuBLASLt (recipe BlockWise1x128 for A, BlockWise128x128 for B), bf16 out.

    Needs an sm_90 GPU and torch >= 2.9 built with CUDA >= 12.9 (cuBLASLt >= 12.9); a torch with
    torch.nn.functional.scaled_mm (2.11 and 2.13 have it) goes through it, an older one through torch._scaled_mm,
    which cannot take K/128 not a multiple of 4 (module docstring). `sb_padded`: pad_k_blocks(sb), made once
    outside a timed loop (else made per call, a small copy of N/128 x L4 floats). Raises Unsupported naming the
    torch version where it cannot run."""
    import torch

    m, n, k = _operands(a, b)
    kb = k // BLOCK_K
    if tuple(sa_t.shape) != (kb, m) or tuple(sb.shape) != (n // BLOCK_K, kb):
        raise ValueError(f"sa_t must be (K/128, M) = {(kb, m)} and sb (N/128, K/128) = {(n // BLOCK_K, kb)}, "
                         f"got {tuple(sa_t.shape)} and {tuple(sb.shape)}")
    if not a.is_cuda:
        raise Unsupported(f"cuBLASLt block scaling needs an sm_90 GPU; the operands are on {a.device}")
    if not _cuda_at_least(12, 9):
        raise Unsupported(f"{torch_version()}: cuBLASLt's 1x128 / 128x128 block scaling needs a CUDA 12.9+ build")
    name, fn = _api()
    scale_a = sa_t.t()                                             # (M, K/128), strides (1, M): outer-dim major
    if name == "torch.nn.functional.scaled_mm":
        import torch.nn.functional as F

        scale_b = (pad_k_blocks(sb) if sb_padded is None else sb_padded).t()   # (L4, N/128), strides (1, L4)
        return fn(a, b.t(), scale_a, F.ScalingType.BlockWise1x128, scale_b, F.ScalingType.BlockWise128x128,
                  output_dtype=torch.bfloat16)
    if kb % 4:
        raise Unsupported(f"{torch_version()}: torch._scaled_mm takes the 128x128 scales unpadded (scale_b.t() "
                          f"contiguous), which cuBLASLt misreads when K/128 = {kb} is not a multiple of 4 (pytorch "
                          "PR #166752; silently wrong on an H200 with torch 2.11); torch.nn.functional.scaled_mm "
                          "(torch 2.11+) takes the padded layout")
    return fn(a, b.t(), scale_a, sb.t(), out_dtype=torch.bfloat16)


def quantize_rowwise(x):
    """x (R, K) float -> (q e4m3 (R, K), s fp32 (R,)): one scale per row, amax / 448 (floored as in workload)."""
    from .workload import AMAX_FLOOR

    xf = x.float()
    s = xf.abs().amax(dim=1).clamp_min(AMAX_FLOOR) / E4M3_MAX
    return (xf / s[:, None]).clamp(-E4M3_MAX, E4M3_MAX).to(FP8), s


def rowwise_from_blocks(a, sa_t, b, sb):
    """The closest rowwise recipe of block-scaled inputs: dequantize, then quantize again with one scale per row of
    A and per row of B (N, K) -> (a_r, sa_row (M,), b_r, sb_row (N,)). Exact (the same dequantized values) where a
    row's amax is its blocks' amax in every block (all its block scales equal and, for B, the row reaching its blocks'
    amax); elsewhere entries are rounded to e4m3 again with another scale, and a row's small blocks lose precision to
    the one shared scale, which is the point of block scaling. For timing, make these once, outside the timed loop."""
    a_r, sa_row = quantize_rowwise(dequantize_rows(a, sa_t.t()))
    b_r, sb_row = quantize_rowwise(dequantize_blocks(b, sb))
    return a_r, sa_row, b_r, sb_row


def cublaslt_rowwise(a, sa_row, b, sb_row, *, fast_accum: bool = False):
    """D = diag(sa_row) (a . b^T) diag(sb_row) through torch's rowwise scaled mm (recipe RowWise x RowWise), bf16 out:
    sa_row (M,) or (M, 1), sb_row (N,) or (1, N), fp32.

    On an sm_90 GPU with torch >= 2.9 built with CUDA >= 12.9 this is cuBLASLt (older builds: CUTLASS's rowwise kernel,
    torch's fallback); on a CPU torch runs it too (oneDNN), which the CPU tests use. `fast_accum`: cuBLASLt's FP8 fast
    accumulation (no promotion; module docstring)."""
    import torch

    m, n, _ = _operands(a, b)
    scale_a = sa_row.reshape(m, 1).float().contiguous()
    scale_b = sb_row.reshape(1, n).float().contiguous()
    name, fn = _api()
    if name == "torch.nn.functional.scaled_mm":
        import torch.nn.functional as F

        return fn(a, b.t(), scale_a, F.ScalingType.RowWise, scale_b, F.ScalingType.RowWise,
                  output_dtype=torch.bfloat16, use_fast_accum=fast_accum)
    return fn(a, b.t(), scale_a, scale_b, out_dtype=torch.bfloat16, use_fast_accum=fast_accum)


def cublaslt_rowwise_requantized(a, sa_t, b, sb, *, fast_accum: bool = False):
    """rowwise_from_blocks then cublaslt_rowwise, in the course call shape: for accuracy tables, not for timing (the
    requantization runs inside the call)."""
    return cublaslt_rowwise(*rowwise_from_blocks(a, sa_t, b, sb), fast_accum=fast_accum)


def rowwise_reference(a_r, sa_row, b_r, sb_row):
    """The rowwise recipe's own exact product, fp32 on a GPU (float64 on a CPU), (M, N)."""
    da = a_r.float() * sa_row.reshape(-1, 1).float()
    db = b_r.float() * sb_row.reshape(-1, 1).float()
    if a_r.device.type == "cpu":
        return da.double() @ db.double().T
    return da @ db.T


def implementations() -> dict:
    """{name: fn(a, sa_t, b, sb)} of the baselines that take the block-scaled inputs (accuracy.accuracy_table's)."""
    return {"cublaslt_blockwise": cublaslt_blockwise, "cublaslt_rowwise_requantized": cublaslt_rowwise_requantized,
            "triton_fp8": triton_fp8}


def _try(recipe: str) -> tuple[bool, str]:
    from ..check import compare
    from .workload import make_inputs, reference

    inp = make_inputs(CHECK_SHAPE, seed=0)
    args = (inp["a"], inp["sa_t"], inp["b"], inp["sb"])
    if recipe == "cublaslt_rowwise":
        rows = rowwise_from_blocks(*args)
        out, ref = cublaslt_rowwise(*rows), rowwise_reference(*rows)
    else:
        out, ref = {"cublaslt_blockwise": cublaslt_blockwise, "triton_fp8": triton_fp8}[recipe](*args), reference(inp)
    rep = compare(out, ref, rtol=CHECK_RTOL)
    return rep.ok, ("works" if rep.ok else "runs but is WRONG") + f" at {CHECK_SHAPE}: {rep.message.splitlines()[0]}"


def supported() -> dict[str, dict]:
    """{recipe: {"ok": bool, "why": str}} for each of RECIPES on this machine: a tiny call at CHECK_SHAPE checked
    against the reference on an sm_90 GPU; elsewhere ok False with "needs an sm_90 GPU: ..."."""
    from ..device import cpu_mode_reason, is_hopper

    if not is_hopper():
        why = f"needs an sm_90 GPU: {cpu_mode_reason()}"
        return {r: {"ok": False, "why": why} for r in RECIPES}
    api = _api()[0]
    res = {}
    for r in RECIPES:
        try:
            ok, why = _try(r)
            if r != "triton_fp8":
                why += f" ({api}, {torch_version()})"
        except Exception as e:  # noqa: BLE001 - any failure is "not supported here", with its message
            ok, why = False, f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''} ({torch_version()})"
        res[r] = {"ok": ok, "why": why}
    return res


def describe() -> str:
    """One line per recipe: what runs on this machine, and why the others do not."""
    return "\n".join(f"{r:<20} {'yes' if v['ok'] else 'no '}  {v['why']}" for r, v in supported().items())


if __name__ == "__main__":
    print(describe())
