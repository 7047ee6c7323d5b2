"""How accurate is each FP8 GEMM, and why the tensor cores' FP8 accumulation needs promotion.

    rows = accuracy_table({"course": gemm_fp8, **baselines.implementations()})   # GPU: the day's table
    rows = fp8_accumulation_demo()                                               # CPU: the simulation

accuracy_table: each implementation fn(a, sa_t, b, sb) on make_inputs' block-scaled inputs, against two references:
rel_err_vs_fp32 = ||D - ref|| / ||ref|| with ref = workload.reference (the dequantized operands multiplied in fp32:
what the GEMM's arithmetic costs, ~ one bf16 rounding, 2^-9, when it is done right) and rel_err_vs_unquantized with ref
= x @ w.T of the fp32 operands before quantization (what the recipe costs: e4m3's 3 mantissa bits, a few percent).
Seen on an H200 (torch 2.11.0+cu130, 2026-12-03, one seed at 4096^3): cuBLASLt blockwise and triton_fp8 1.67e-3 vs fp32
and 3.69e-2 vs unquantized; the rowwise recipe requantized from the blocks 3.7e-2 and 5.2e-2 (it rounds to e4m3 a
second time, with one scale per row), with fast_accum the same to three digits (its rounding hides the accumulator's).

fp8_accumulation_demo: DeepSeek-V3's technical report (arXiv:2412.19437, section 3.3.2, "Increasing Accumulation
Precision") measured that the FP8 GEMM accumulation of the H800's tensor cores (a Hopper, as the H100 / H200) keeps
"around 14 bits", far below fp32's 24, and that for K = 4096 this alone gave a maximum relative error near 2 %. Its fix,
which DeepGEMM implements: every N_C = 128 entries of K ("4 WGMMAs" of k = 32), the partial sum is promoted, i.e. added
into an fp32 accumulator on the CUDA cores (where the block scales are applied anyway), and the tensor cores start the
next 128 from zero. SageAttention2's report describes the same accumulator as "FP22" (8 exponent, 13 mantissa bits).

The simulation (a model, not the hardware's exact datapath): e4m3 operands; each k32 step's 32 products summed exactly
(float64; they are exact there), then added to the accumulator, which keeps MANTISSA_BITS = 13 explicit bits (14
significant) and truncates (rounds toward zero) what falls below them, as an aligned fixed-point adder drops the
shifted-out bits. Without promotion the accumulator runs over all of K: K / 32 truncations, each biased the same way,
so the relative error grows ~ linearly with K. With promotion every 128 it runs over 4 steps, then joins an fp32 sum:
the error stays at 4 steps' worth, whatever K.
"""

from __future__ import annotations

import torch

DEMO_KS = (512, 1024, 4096, 8192, 16384)
MANTISSA_BITS = 13      # explicit mantissa bits kept by the simulated FP8 accumulator: 14 significant bits
WGMMA_K = 32            # one m64nNk32 FP8 wgmma adds 32 products per output into the accumulator
PROMOTE_EVERY = 128     # DeepSeek-V3 / DeepGEMM's N_C: 4 wgmma k32 steps, one scale block


def _rel(out: torch.Tensor, ref: torch.Tensor) -> float:
    o, r = out.double(), ref.double()
    return float(torch.linalg.vector_norm(o - r) / torch.linalg.vector_norm(r))


def accuracy_table(impls: dict, shape=(4096, 4096, 4096), seed: int = 0, runs: int = 3, device="cuda") -> list[dict]:
    """[{name, rel_err_vs_fp32, max_abs_err, rel_err_vs_unquantized, runs}] for each fn(a, sa_t, b, sb) of `impls`,
    the worst over `runs` seeds (seed, seed + 1, ...). An implementation that raises gets a row with "error" instead.
    NaN or inf in an output makes its errors inf (never a small number)."""
    from .workload import make_inputs, make_unquantized, reference

    rows = {name: {"name": name, "rel_err_vs_fp32": 0.0, "max_abs_err": 0.0, "rel_err_vs_unquantized": 0.0,
                   "runs": 0} for name in impls}
    for r in range(runs):
        inp = make_inputs(shape, seed + r, device=device)
        ref = reference(inp)
        x, w = make_unquantized(shape, seed + r, device=device)
        exact = x.double() @ w.double().T if x.device.type == "cpu" else x @ w.T
        for name, fn in impls.items():
            row = rows[name]
            if "error" in row:
                continue
            try:
                out = fn(inp["a"], inp["sa_t"], inp["b"], inp["sb"])
            except Exception as e:  # noqa: BLE001 - a row that says why, not a table that stops
                row["error"] = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
                continue
            finite = bool(torch.isfinite(out).all())
            inf = float("inf")
            row["rel_err_vs_fp32"] = max(row["rel_err_vs_fp32"], _rel(out, ref) if finite else inf)
            row["max_abs_err"] = max(row["max_abs_err"],
                                     float((out.double() - ref.double()).abs().max()) if finite else inf)
            row["rel_err_vs_unquantized"] = max(row["rel_err_vs_unquantized"], _rel(out, exact) if finite else inf)
            row["runs"] += 1
    return list(rows.values())


def truncate_mantissa(x: torch.Tensor, bits: int = MANTISSA_BITS) -> torch.Tensor:
    """x rounded toward zero to `bits` explicit mantissa bits (bits + 1 significant), exponent unbounded (float64)."""
    m, e = torch.frexp(x.double())                     # x = m * 2^e, 0.5 <= |m| < 1
    scale = 2.0 ** (bits + 1)
    return torch.ldexp(torch.trunc(m * scale) / scale, e)


def simulate_fp8_gemm(a8: torch.Tensor, b8: torch.Tensor, *, promote_every: int | None = PROMOTE_EVERY,
                      bits: int = MANTISSA_BITS, step: int = WGMMA_K) -> torch.Tensor:
    """a8 (M, K) @ b8 (N, K).T of e4m3 operands with the simulated tensor-core accumulator (module docstring):
    `promote_every` = None accumulates all of K in it; an int (a multiple of `step`) adds the accumulator into an fp32
    sum and clears it every `promote_every` entries of K. Returns float64 (M, N)."""
    m, k = a8.shape
    n = b8.shape[0]
    if k % step or (promote_every and promote_every % step):
        raise ValueError(f"K = {k} and promote_every = {promote_every} must be multiples of step = {step}")
    steps = k // step
    # every k32 step's exact partial products, (steps, M, N): e4m3 x e4m3 products and sums of 32 of them are exact
    # in float64 (8 + 8 significant bits, exponents within ~40 binades)
    parts = torch.bmm(a8.double().view(m, steps, step).transpose(0, 1),          # (steps, M, step)
                      b8.double().view(n, steps, step).permute(1, 2, 0))          # (steps, step, N)
    acc = torch.zeros(m, n, dtype=torch.float64)
    outer = torch.zeros(m, n, dtype=torch.float32)
    per = (promote_every // step) if promote_every else steps + 1
    for s in range(steps):
        acc = truncate_mantissa(acc + parts[s], bits)
        if (s + 1) % per == 0:
            outer = outer + acc.float()                # promotion: fp32 add on the CUDA cores
            acc.zero_()
    return outer.double() + acc if promote_every else acc


def fp8_accumulation_demo(ks=DEMO_KS, *, rows: int = 64, cols: int = 64, seed: int = 0, bits: int = MANTISSA_BITS,
                          promote_every: int = PROMOTE_EVERY) -> list[dict]:
    """[{"K", "rel_err_no_promotion", "rel_err_promoted"}] for each K of `ks` (an int is one K): e4m3 operands
    (N(0, 1) quantized, one scale per tensor: the scale does not change the relative error), (rows, cols) outputs,
    ||D - ref|| / ||ref|| against the float64 product of the same e4m3 values."""
    ks = (ks,) if isinstance(ks, int) else tuple(ks)
    g = torch.Generator().manual_seed(seed)
    out = []
    for k in ks:
        a8 = torch.randn(rows, k, generator=g).clamp(-448, 448).to(torch.float8_e4m3fn)
        b8 = torch.randn(cols, k, generator=g).clamp(-448, 448).to(torch.float8_e4m3fn)
        ref = a8.double() @ b8.double().T
        out.append({"K": k,
                    "rel_err_no_promotion": _rel(simulate_fp8_gemm(a8, b8, promote_every=None, bits=bits), ref),
                    "rel_err_promoted": _rel(simulate_fp8_gemm(a8, b8, promote_every=promote_every, bits=bits), ref)})
    return out


def format_rows(rows: list[dict]) -> str:
    """A plain-text table of accuracy_table's or fp8_accumulation_demo's rows."""
    if not rows:
        return ""
    keys = list(dict.fromkeys(k for r in rows for k in r))
    fmt = (lambda v: f"{v:.3e}" if isinstance(v, float) else str(v))
    table = [keys] + [[fmt(r.get(k, "")) for k in keys] for r in rows]
    widths = [max(len(row[i]) for row in table) for i in range(len(keys))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(row, widths)) for row in table)


if __name__ == "__main__":
    print(format_rows(fp8_accumulation_demo()))
