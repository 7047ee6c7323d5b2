"""Facts from the harness -> points per grade cell, with the reason for every point lost.

Throughput (COURSE.md): the bar is an absolute H100 figure; the course's reference solution is timed in the same
run, and if the machine runs slower than at calibration the bar is scaled down by that ratio (never up). Not an
H100: no throughput points, and the feedback says why. Figures above the roofline fail and are flagged.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .spec import Exercise


@dataclass
class PartScore:
    grade_id: str
    part: str
    points: float
    max_points: float
    feedback: str
    graded: bool = True  # False: could not be graded here (no GPU / no H100)


@dataclass
class ExerciseScore:
    exercise: str
    parts: dict[str, PartScore]
    flags: list[str] = field(default_factory=list)
    status: str = "ok"
    facts: dict = field(default_factory=dict)

    @property
    def points(self) -> float:
        return sum(p.points for p in self.parts.values())


def bar_for(ex: Exercise, reference_value: float | None) -> tuple[float | None, float]:
    """(effective bar, scale): the bar scaled down when the reference runs slower than at calibration."""
    tp = ex.parts["throughput"]
    if tp.bar is None:
        return None, 1.0
    scale = 1.0
    if reference_value and tp.reference_value:
        scale = min(1.0, reference_value / tp.reference_value)
    return tp.bar * scale, scale


def score(ex: Exercise, facts: dict, extra_flags: list[str] = ()) -> ExerciseScore:
    parts = ex.parts
    flags = list(facts.get("flags", [])) + list(extra_flags)
    status = facts.get("status", "ok")
    out: dict[str, PartScore] = {}

    def put(part, pts, text, graded=True):
        p = parts[part]
        out[part] = PartScore(p.grade_id, part, max(0.0, min(float(pts), p.points)), p.points, text, graded)

    comp = facts.get("compile")
    if status in ("timeout", "crash") and not comp:
        for part in parts:
            put(part, 0, facts.get("error", status))
        return ExerciseScore(ex.name, out, flags + [f"{status}: {facts.get('error', '')}"], status, facts)
    if not comp or not comp.get("ok"):
        why = (comp or {}).get("error") or facts.get("error") or "no verdict"
        if comp and comp.get("not_attempted"):
            why = "exercise not attempted: " + why.split(": ", 1)[-1] if "not attempted" not in why else why
            status = "not_attempted"
        for part in parts:
            put(part, 0, why)
        return ExerciseScore(ex.name, out, flags, status, facts)

    path = facts.get("path", {})
    if path.get("ok"):
        put("path", parts["path"].points, "hardware path used:\n" + path.get("summary", ""))
    else:
        put("path", 0, "required instructions missing from the kernel's SASS:\n" + path.get("summary", ""))

    corr = facts.get("correctness", {})
    if status in ("timeout", "crash", "error"):
        err = facts.get("error", status)
        if not corr.get("graded"):
            put("correctness", 0, f"the kernel did not run to completion: {err}")
        else:
            put("correctness", parts["correctness"].points if corr.get("ok") else 0, err)
        put("throughput", 0, f"not timed: {err}")
        flags.append(f"{status}: {err.splitlines()[0] if err else status}")
        return ExerciseScore(ex.name, out, flags, status, facts)
    if not corr.get("graded"):
        put("correctness", 0, f"not graded here: {corr.get('reason', '')}", graded=False)
    elif corr.get("ok"):
        n = len(corr.get("shapes", []))
        put("correctness", parts["correctness"].points, f"correct on all {n} runs (fresh inputs, awkward shapes, "
            "poisoned outputs)")
    else:
        bad = next((s for s in corr.get("shapes", []) if not s["ok"]), {})
        put("correctness", 0, f"wrong at shape {tuple(bad.get('shape', ()))}: {bad.get('message', '')}")

    tp = facts.get("throughput", {})
    if not tp.get("graded"):
        reason = tp.get("reason", "")
        put("throughput", 0, f"not timed: {reason}", graded="not correct" in reason)
        return ExerciseScore(ex.name, out, flags, status, facts)
    mine = tp["student"]
    ref = tp.get("reference") or {}
    bar, scale = bar_for(ex, ref.get("value"))
    unit = "TB/s" if ex.metric == "tbps" else "TFLOPS"
    value = mine.get("value") or 0.0
    ceil = (mine.get("ceilings") or {}).get("copy_tbps" if ex.metric == "tbps" else "cublas_bf16_tflops")
    text = (f"measured {value:.3f} {unit} ({mine['ms']:.4f} ms median, p20 {mine['p20_ms']:.4f}, p80 "
            f"{mine['p80_ms']:.4f})" + (f"; ceiling in this run {ceil:.3f} {unit}" if ceil else "")
            + (f"; course reference in this run {ref['value']:.3f} {unit}" if ref.get("value") else ""))
    if bar is None:
        put("throughput", 0, text + "; no bar calibrated for this exercise yet", graded=False)
    elif value > ex.roofline:
        put("throughput", 0, text + f"; ABOVE the roofline ({ex.roofline} {unit}): impossible, flagged")
    elif not mine.get("output_ok", True):
        put("throughput", 0, text + "; the timed runs' output was wrong (stale or cached work)")
    elif value >= bar:
        put("throughput", parts["throughput"].points, text + f"; bar {bar:.3f} {unit}"
            + (f" (scaled by {scale:.3f}: this machine is slower than at calibration)" if scale < 1 else "")
            + ": passed")
    else:
        put("throughput", 0, text + f"; bar {bar:.3f} {unit}" + (f" (scaled by {scale:.3f})" if scale < 1 else "")
            + f": {value / bar:.2f}x of the bar")
    return ExerciseScore(ex.name, out, flags, status, facts)
