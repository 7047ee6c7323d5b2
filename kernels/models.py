"""Every performance model of the course in one table: what each one fitted, on which rows, and how it does on rows it
never saw — the H100 record's held-out rows and, where an H200 record exists, every row it names on the H200.

    python -m kernels.models          # prints the table (CPU only: it reads the records, it runs nothing)

What each model declares, in its own model.py (its FIT dict, the one its HeldOut check carries):
    FIT["constants"]        name -> {"kind": "physics", "source": "..."}   a datasheet / PTX / CUDA-guide fact, or a
                                                                            quantity measured in the run (the copy
                                                                            ceiling, cuBLAS, an ncu counter)
                                    name -> {"kind": "fitted", "rows": (...)}  fitted on those rows of this model
                                    name -> {"kind": "fitted", "from": "..."}  another model's fit, imported unchanged
    FIT["held_out_regime"]  what the held-out rows have that no fit row has (another shape class, size or depth)
    FIT["misses"]           GPU tag -> row -> why: each row (fit or held out) outside the +-10 % band, with its reason

The rule (`rule_holds`, held by tests/test_models.py): a model fits at most one constant per two rows it fits them on
(constants fitted on its own rows <= half of those rows). The cross-GPU check predicts the H200 record's rows with the
H100's fitted constants and the H200 run's own measured figures (its copy ceiling); the H200 is the same GH100 die as
the H100 (132 SMs, the same datasheet clock and tensor peak), so DRAM is the one physics term that differs
(`Model.gpu_terms`), with the SM clock a run measured where a model reads it (the GEMM's tensor peak).
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, replace
from pathlib import Path

from .held_out import HeldOut
from .record import device_tag
from .warp_specialization import model as warp_specialization

__all__ = ["Model", "MODELS", "check_of", "records", "kinds", "rule_holds", "summary", "table", "uncovered"]

KERNELS = Path(__file__).resolve().parent


@dataclass(frozen=True)
class Model:
    name: str                      # the table's row
    slug: str                      # kernels/<slug>/model.py, kernels/<slug>/recorded_<gpu>.json
    gpu_terms: str                 # what of a GPU the model takes, and from where
    check: str = "HELD_OUT_CHECK"  # the module's HeldOut


MODELS = (
    Model("smem_tiling", "smem_tiling", "copy ceiling of the run", check="RECORD_CHECK"),
    Model("tma", "tma", "copy ceiling of the run", check="RECORD_CHECK"),
    Model("swizzle", "swizzle", "copy ceiling of the run"),
    Model("warp_specialization", "warp_specialization", "copy ceiling of the run"),
    Model("multicast", "multicast", "copy ceiling of the run"),
    Model("gemm", "gemm", "copy ceiling and SM clock of the run"),
    Model("attention (serial)", "attention", "none (no term reads DRAM)"),
    Model("attention (overlap)", "attention", "none (no term reads DRAM)", check="OVERLAP_CHECK"),
)


def _module(slug: str):
    """The model module of a topic, by a name written here (the library imports no name it reads at run time)."""
    from .attention import model as attention
    from .gemm import model as gemm
    from .multicast import model as multicast
    from .smem_tiling import model as smem_tiling
    from .swizzle import model as swizzle
    from .tma import model as tma

    return {"attention": attention, "gemm": gemm, "multicast": multicast, "smem_tiling": smem_tiling,
            "swizzle": swizzle, "tma": tma, "warp_specialization": warp_specialization}[slug]


def check_of(m: Model) -> HeldOut:
    return getattr(_module(m.slug), m.check)


def records(slug: str) -> dict:
    """GPU tag -> the record of kernels/<slug>/recorded_<tag>.json."""
    return {p.stem.removeprefix("recorded_"): json.loads(p.read_text())
            for p in sorted((KERNELS / slug).glob("recorded_*.json"))}


def kinds(fit: dict) -> dict:
    """{"physics": [...], "fitted": [...] (on this model's rows), "imported": [...] (another model's fit)}."""
    out = {"physics": [], "fitted": [], "imported": []}
    for name, c in fit["constants"].items():
        out["physics" if c["kind"] == "physics" else "fitted" if "rows" in c else "imported"].append(name)
    return out


def rule_holds(fit: dict) -> bool:
    """At most one constant fitted per two rows: the constants fitted on this model's rows <= half of those rows."""
    own = [c for c in fit["constants"].values() if c["kind"] == "fitted" and "rows" in c]
    rows = {r for c in own for r in c["rows"]}
    return 2 * len(own) <= len(rows)


def _outside(errs: dict, band: float) -> dict:
    return {n: e for n, e in errs.items() if abs(e) > band}


def summary(m: Model) -> dict:
    """One model against its records: constants by kind, its rows, the errors of its H100 held-out rows and of every
    row it names on the H200 (H100 constants, the H200 run's own measured figures), and the rows outside the band:
    named (FIT["misses"]) or not."""
    check, recs = check_of(m), records(m.slug)
    h100 = recs["h100"]
    out = {"name": m.name, "kinds": kinds(check.fit), "rule": rule_holds(check.fit), "fit_rows": check.fit_rows,
           "held_out": check.held_out, "regime": check.fit["held_out_regime"], "band": check.band,
           "gpu_terms": m.gpu_terms, "errors": {"h100": check.errors(h100)}}
    if "h200" in recs:
        out["errors"]["h200"] = replace(check, held_out=check.fit_rows + check.held_out).errors(recs["h200"])
    misses = check.fit.get("misses", {})
    out["outside"] = {g: _outside(e, check.band) for g, e in out["errors"].items()}
    out["unnamed"] = {g: sorted(set(o) - set(misses.get(g, {}))) for g, o in out["outside"].items()}
    # a named miss the record does not show (stale), on the rows this table checks
    out["stale"] = {g: sorted(n for n in misses.get(g, {}) if n in out["errors"].get(g, {}) and n not in o)
                    for g, o in out["outside"].items()}
    out["h200_note"] = ("no H200 record" if "h200" not in recs else
                        "the H200 record has none of its rows" if not out["errors"]["h200"] else "")
    return out


def _worst(errs: dict) -> str:
    if not errs:
        return "-"
    n = max(errs, key=lambda k: abs(errs[k]))
    return f"{abs(errs[n]):.1%}"


def table(models=MODELS) -> str:
    """The table: per model, constants by kind, fit and held-out rows, max |error| on the H100's held-out rows and on
    the H200's rows, and the rows outside +-10 % with why (FIT["misses"])."""
    head = (f"{'model':<21} {'physics':>7} {'fitted':>6} {'imported':>8} {'fit rows':>8} {'held out':>8} "
            f"{'max|err| H100 held out':>22} {'max|err| H200':>13}  rule")
    lines, notes = [head, "-" * len(head)], []
    for m in models:
        s = summary(m)
        k = s["kinds"]
        h200 = _worst(s["errors"].get("h200", {})) if not s["h200_note"] else "-"
        lines.append(f"{s['name']:<21} {len(k['physics']):>7} {len(k['fitted']):>6} {len(k['imported']):>8} "
                     f"{len(s['fit_rows']):>8} {len(s['held_out']):>8} {_worst(s['errors']['h100']):>22} "
                     f"{h200:>13}  {'ok' if s['rule'] else 'BROKEN'}")
        notes.append(f"{s['name']}: fitted {', '.join(k['fitted']) or '-'}; imported {', '.join(k['imported']) or '-'}"
                     f"; physics {', '.join(k['physics'])}")
        notes.append(f"  held out ({len(s['held_out'])}): {s['regime']}; GPU terms: {s['gpu_terms']}"
                     + (f"; H200: {s['h200_note']}" if s["h200_note"] else ""))
        why = _module(m.slug)
        misses = getattr(why, m.check).fit.get("misses", {})
        for g, o in s["outside"].items():
            for n, e in o.items():
                reason = misses.get(g, {}).get(n, "NOT NAMED")
                notes.append(f"  miss {g} {n} {e:+.1%}: {reason}")
    return "\n".join(lines + [""] + notes + [""] + uncovered())


def summary_table(models=MODELS) -> str:
    """The table's first block alone (one line per model), as the README shows it between its markers."""
    return table(models).split("\n\n", 1)[0]


def uncovered(models=MODELS) -> list[str]:
    """The day's models this table does not check row by row, and why: their records' rows carry no `config` the model
    reads (it predicts from the benchmark's own call), so no held-out check declares them."""
    done = {m.slug for m in models}
    out = []
    for p in sorted(KERNELS.glob("*/model.py")):
        slug = p.parent.name
        if slug in done:
            continue
        recs = records(slug)
        configs = sum(1 for r in recs.values() for row in r["rows"] if row.get("config"))
        out.append(f"not in the table: {slug} (records {', '.join(recs) or 'none'}; {configs} rows with a config: "
                   "its constants carry no kinds and no held-out check yet)")
    return out


if __name__ == "__main__":
    print(summary_table() if "--summary" in sys.argv[1:] else table())
