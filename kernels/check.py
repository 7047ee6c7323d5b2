"""The course's one checker: poison outputs, compare bit-exactly (copies) or within a dtype tolerance (math).

    out = poison(torch.empty_like(ref))      # NaN (or a bit pattern for integers): unwritten elements fail
    run(out)
    report = compare(out, ref, exact=True)   # or rtol=... / default tolerance of the dtype
    report.ok, report.message                # count of mismatches and the first five "(index) got / expected"

NaN never passes. Tolerance is on ||out - ref|| / ||ref|| computed in float64.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

# ||out - ref|| / ||ref|| bands for one rounding of the output (METHOD: bf16 operands land between 1e-3 and 1e-2).
DEFAULT_RTOL = {torch.bfloat16: 8e-3, torch.float16: 1e-3, torch.float32: 1e-5, torch.float64: 1e-12}
_INT_VIEW = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


def bf16_randn(*size: int, generator: torch.Generator, scale: float = 1.0) -> torch.Tensor:
    """N(0, scale^2) drawn in fp32 on the generator's device, rounded to bf16: an exercise's inputs (the same draws,
    in the same order, as torch.randn(..., generator=g, device=g.device) * scale)."""
    x = torch.randn(*size, generator=generator, device=generator.device)
    return (x if scale == 1.0 else x * scale).to(torch.bfloat16)


def poison(t: torch.Tensor) -> torch.Tensor:
    """Fill with NaN (floats) or 0x5A5A... (integers) so that elements a kernel never writes are caught."""
    if t.is_floating_point():
        return t.fill_(float("nan"))
    return t.view(torch.uint8).fill_(0x5A).view(t.dtype) if t.numel() else t


@dataclass
class CheckReport:
    ok: bool
    exact: bool
    numel: int
    mismatches: int
    nan_count: int
    rel_err: float | None
    rtol: float | None
    samples: list[str] = field(default_factory=list)

    @property
    def message(self) -> str:
        if self.ok:
            how = "bit-exact" if self.exact else f"rel. error {self.rel_err:.2e} <= {self.rtol:.0e}"
            return f"correct: {self.numel} elements, {how}"
        head = f"WRONG: {self.mismatches} of {self.numel} elements differ"
        if self.nan_count:
            head += f" ({self.nan_count} NaN: never written, or NaN produced)"
        if self.rel_err is not None and not self.exact:
            head += f"; rel. error {self.rel_err:.2e} > {self.rtol:.0e}"
        return head + ("\n  first mismatches (index) got / expected:\n  " + "\n  ".join(self.samples)
                       if self.samples else "")

    def as_dict(self) -> dict:
        return {"ok": self.ok, "exact": self.exact, "numel": self.numel, "mismatches": self.mismatches,
                "nan_count": self.nan_count, "rel_err": self.rel_err, "rtol": self.rtol, "samples": self.samples}


def _samples(bad: torch.Tensor, out: torch.Tensor, ref: torch.Tensor, k: int = 5) -> list[str]:
    idx = torch.nonzero(bad)[:k].tolist()
    res = []
    for i in idx:
        t = tuple(i)
        res.append(f"{t} {out[t].item()!r} / {ref[t].item()!r}")
    return res


def compare(out: torch.Tensor, ref: torch.Tensor, *, exact: bool = False, rtol: float | None = None) -> CheckReport:
    if out.shape != ref.shape:
        return CheckReport(False, exact, ref.numel(), ref.numel(), 0, None, rtol,
                           [f"shape {tuple(out.shape)} != expected {tuple(ref.shape)}"])
    # Compared where the tensors live (on the GPU for the grader's timed runs: one compare per launch stays cheap);
    # only the first mismatches travel to the host.
    out = out.detach()
    ref = ref.detach().to(out.device)
    n = ref.numel()
    nan = int(torch.isnan(out).sum()) if out.is_floating_point() else 0
    if exact:
        if out.dtype != ref.dtype:
            return CheckReport(False, True, n, n, nan, None, None, [f"dtype {out.dtype} != expected {ref.dtype}"])
        view = _INT_VIEW[out.element_size()]
        bad = out.contiguous().view(view) != ref.contiguous().view(view)
        if out.is_floating_point():
            bad |= torch.isnan(out)
        m = int(bad.sum())
        return CheckReport(m == 0, True, n, m, nan, None, None, _samples(bad, out, ref) if m else [])
    rtol = rtol if rtol is not None else DEFAULT_RTOL.get(ref.dtype, 1e-5)
    o, r = out.double(), ref.double()
    denom = float(torch.linalg.vector_norm(r)) or 1.0
    finite = torch.isfinite(o)
    rel = float(torch.linalg.vector_norm(torch.where(finite, o - r, torch.zeros_like(o)))) / denom
    bad = ~finite | ((o - r).abs() > (rtol * 4) * r.abs().clamp_min(denom / max(n, 1) ** 0.5))
    m = int(bad.sum())
    ok = nan == 0 and bool(finite.all()) and rel <= rtol
    return CheckReport(ok, False, n, m if not ok else 0, nan, rel, rtol, _samples(bad, out, ref) if not ok else [])


def assert_match(out: torch.Tensor, ref: torch.Tensor, **kw) -> CheckReport:
    report = compare(out, ref, **kw)
    if not report.ok:
        raise AssertionError(report.message)
    return report
