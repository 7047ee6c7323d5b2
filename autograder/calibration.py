"""Per-GPU calibration of the throughput bars: `autograder calibrate`.

A spec states each bar as a fraction of a baseline the grading run measures itself (the D2D copy ceiling, or the
vendor library doing the exercise's work on the exercise's own inputs: kernels.runner.exercise_baseline). What a
GPU kind adds is how fast the course solution runs there, relative to that baseline: the calibration of a GPU kind
is the spec's fraction, lowered where the solution would clear the bar by less than SOLUTION_MARGIN on that GPU —

    fraction(gpu) = min(spec fraction, floor(solution / baseline / SOLUTION_MARGIN))

with solution and baseline from one run on that GPU: a topic's record (kernels/<slug>/recorded_<gpu>.json, written
by its benchmark in `make gpu-test`), or a fresh measurement (`--measure`, the grader's own harness). The result is
written into the spec as [exercises.<ex>.throughput.calibration.<gpu>]; nothing else writes it, nobody types it.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
from pathlib import Path

from kernels import record
from autograder.spec import Calibration, load, Spec
from autograder.spec import calibrated_fraction as fraction_for  # the one formula (autograder.spec)
from .answers import _source, cells_by_grade_id, read_answer
from .harness import run_exercise

ROOT = Path(__file__).resolve().parent.parent


class CalibrationError(RuntimeError):
    pass


def _vendor_from_rows(ex, doc: dict) -> tuple[float, str] | None:
    """A record written before the baseline was recorded with the margins: the vendor's row of the same run at the
    exercise's bench shape (the workload's VENDOR_ROW), named as such."""
    wl = ex.workload()
    name, shape = getattr(wl, "VENDOR_ROW", (None, None))
    row = next((r for r in doc.get("rows", []) if r.get("kernel") == name and r.get("shape") == shape), None)
    if row is None:
        return None
    value = row.get("tflops") if ex.metric == "tflops" else row.get("tbps")
    return (value, f"row '{name}' at {shape} of the same run") if value else None


def baseline_of(ex, doc: dict) -> tuple[float, str]:
    """(baseline figure, where it came from) in a record: the one measured beside the solution, else the copy
    ceiling of the same run (copy bars), else the vendor's row of the same run (vendor bars)."""
    m = (doc.get("exercise_margins") or {}).get(ex.name) or {}
    base = m.get("baseline")
    if isinstance(base, dict) and base.get("value"):
        return base["value"], base.get("what", "baseline")
    kind = ex.parts["throughput"].baseline_kind
    if kind == "copy" and (doc.get("ceilings") or {}).get("copy_tbps"):
        return doc["ceilings"]["copy_tbps"], "D2D copy ceiling of the same run"
    if kind == "vendor":
        got = _vendor_from_rows(ex, doc)
        if got:
            return got
    raise CalibrationError(f"{ex.name}: the record has no {kind} baseline beside the solution")


def from_record(spec: Spec, doc: dict, source: str) -> dict[str, Calibration]:
    """Each exercise's calibration for the GPU that wrote `doc` (a topic record)."""
    tag = record.device_tag(doc.get("device"))
    if tag == "unknown":
        raise CalibrationError(f"{source}: the record names no GPU ({doc.get('device')!r})")
    out = {}
    for ex in spec.exercises.values():
        m = (doc.get("exercise_margins") or {}).get(ex.name)
        if not m or not m.get("solution"):
            raise CalibrationError(f"{source}: no timing of {ex.name}'s course solution (exercise_margins)")
        base, what = baseline_of(ex, doc)
        tp = ex.parts["throughput"]
        out[ex.name] = Calibration(
            gpu=tag, fraction=fraction_for(tp.fraction, m["solution"], base), baseline=base, solution=m["solution"],
            device=doc.get("device") or "", driver=doc.get("driver") or "", date=doc.get("date") or "",
            source=f"{source}: {what}")
    return out


def measure(spec: Spec) -> dict[str, Calibration]:
    """Each exercise's calibration for this GPU, measured now with the grader's own harness: the course solution
    graded (timed) beside the trusted baseline of the same run."""
    from kernels.device import gpu

    from .grading import solution_notebook

    g = gpu() or {}
    tag = record.device_tag(g.get("name"))
    sol = cells_by_grade_id(solution_notebook(spec))
    out = {}
    for ex in spec.exercises.values():
        src = read_answer(_source(sol[ex.answer_cell]), ex.answer_var).value
        facts = run_exercise(spec.slug, ex.name, src, seed=int.from_bytes(os.urandom(6), "little"))
        tp = facts.get("throughput", {})
        if not tp.get("graded"):
            why = tp.get("reason") or facts.get("error") or (facts.get("correctness") or {}).get("reason")
            raise CalibrationError(f"{spec.slug}.{ex.name}: the solution could not be timed: {why}")
        value, base = tp["student"]["value"], tp["baseline"]
        out[ex.name] = Calibration(
            gpu=tag, fraction=fraction_for(ex.parts["throughput"].fraction, value, base["value"]),
            baseline=base["value"], solution=value, device=g.get("name", ""), driver=g.get("driver") or "",
            date=dt.date.today().isoformat(), source=f"measured by autograder calibrate --measure: {base['what']}")
    return out


# ---------------------------------------------------------------------------------------------- the spec's text
def _table_name(ex: str, tag: str) -> str:
    return f"[exercises.{ex}.throughput.calibration.{tag}]"


def render(ex: str, cal: Calibration, unit: str) -> str:
    """The TOML table of one calibration, with what it means in a comment."""
    lines = [f"# {cal.device}: bar = {cal.fraction} x the baseline of the grading run ({cal.bar:.4g} {unit} at "
             f"calibration); the course solution {cal.margin:.3f}x above it. Written by `autograder calibrate`.",
             _table_name(ex, cal.gpu)]
    for key in ("fraction", "baseline", "solution"):
        lines.append(f"{key} = {getattr(cal, key):.6g}")
    for key in ("device", "driver", "date", "source"):
        lines.append(f"{key} = {json.dumps(getattr(cal, key))}")
    return "\n".join(lines) + "\n"


def write(spec: Spec, cals: dict[str, Calibration]) -> str:
    """The spec's text with each exercise's calibration table for its GPU replaced, or added at the end of the
    exercise's throughput part (after the tables already there); every other line kept as it was."""
    text = spec.path.read_text()
    for ex, cal in cals.items():
        table = re.compile(r"(?:# [^\n]*\n)?" + re.escape(_table_name(ex, cal.gpu)) + r"\n(?:[a-z_]+ = [^\n]*\n)*\n?")
        text = table.sub("", text)
        at = text.index(f"[exercises.{ex}.throughput]")
        # the next table that is not one of this part's calibrations, with the comment lines above it
        nxt = re.compile(r"^(?:#[^\n]*\n)*\[(?!exercises\." + re.escape(ex) + r"\.throughput\.calibration\.)", re.M)
        m = nxt.search(text, text.index("\n", at) + 1)
        end = len(text) if m is None else m.start()
        head, tail = text[:end].rstrip("\n"), text[end:]
        unit = "TB/s" if spec.exercises[ex].metric == "tbps" else "TFLOPS"
        text = head + "\n\n" + render(ex, cal, unit) + ("\n" + tail if tail else "")
    spec.path.write_text(text)
    return text


def calibrate(slug: str, *, records: list[Path] | None = None, measure_here: bool = False,
              write_spec: bool = False) -> dict:
    """Calibrations of `slug`'s exercises: from each record given (default: every kernels/<slug>/recorded_*.json),
    or measured on this GPU. Returns {gpu: {exercise: {fraction, bar, baseline, solution, margin, source}}}."""
    spec = load(slug)
    per_gpu: dict[str, dict[str, Calibration]] = {}
    if measure_here:
        cals = measure(spec)
        per_gpu[next(iter(cals.values())).gpu] = cals
    else:
        paths = records if records is not None else sorted((record.KERNELS / slug).glob("recorded_*.json"))
        if not paths:
            raise CalibrationError(f"{slug}: no record to calibrate from (run `make gpu-test` on a Hopper GPU)")
        for p in paths:
            p = Path(p)
            try:
                shown = str(p.resolve().relative_to(ROOT))
            except ValueError:
                shown = p.name
            cals = from_record(spec, json.loads(p.read_text()), shown)
            per_gpu[next(iter(cals.values())).gpu] = cals
    if write_spec:
        for cals in per_gpu.values():
            write(spec, cals)
            load.cache_clear()
            spec = load(slug)
    return {tag: {ex: {"fraction": c.fraction, "spec_fraction": spec.exercises[ex].parts["throughput"].fraction,
                       "bar": c.bar, "baseline": c.baseline, "solution": c.solution, "margin": c.margin,
                       "device": c.device, "date": c.date, "source": c.source}
                  for ex, c in cals.items()}
            for tag, cals in per_gpu.items()}
