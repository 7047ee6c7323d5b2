"""Facts from the harness -> points per grade cell, with the reason for every point lost.

Throughput: the bar is a fraction of the trusted baseline measured in the same grading run on the same GPU (the D2D
copy ceiling, or the vendor library doing the exercise's work on its own inputs), the fraction calibrated per GPU
kind (autograder.spec.Part.fraction_for): on a Hopper GPU with no calibration of its own, the H100's fraction, and the
feedback says so. Figures above the GPU's datasheet peak fail and are flagged.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kernels.rangeprof import counted_rules

from .spec import Exercise


# What grading without a GPU (`autograder grade --gpus none`) awards, in the words every message about it uses (the
# refusal of --gpus all where there is no GPU, the grade command's lines, the report's banner): score() below gives
# every exercise part 0 where no Hopper GPU ran the kernel (correctness and throughput are not graded, and path points
# need a kernel correct on the GPU), so the quiz is all that counts; the compile and SASS verdicts are only reported.
CPU_GRADING = ("CPU grading awards the quiz points only: every exercise part (correctness, hardware path, "
               "throughput) needs the kernel run on a Hopper GPU and scores 0 without one; the compile and SASS "
               "verdicts are reported, for no points")


@dataclass
class PartScore:
    grade_id: str
    part: str
    points: float
    max_points: float
    feedback: str
    graded: bool = True  # False: could not be graded here (no GPU)


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


def bar_for(ex: Exercise, tp_facts: dict) -> tuple[float | None, str]:
    """(bar, how it was set) for the throughput facts of one run: the fraction for the GPU kind that ran it, times
    the baseline measured in that run."""
    tp = ex.parts["throughput"]
    base = (tp_facts.get("baseline") or {}).get("value")
    bar = tp.bar_on(tp_facts.get("gpu"), base)
    if bar is None:
        return None, "no baseline was measured"
    fraction, _cal, how = tp.fraction_for(tp_facts.get("gpu"))
    unit = "TB/s" if ex.metric == "tbps" else "TFLOPS"
    what = (tp_facts.get("baseline") or {}).get("what", "the baseline")
    return bar, f"{fraction:.3f} x {what} in this run ({base:.3f} {unit}; {how})"


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
        return _score_not_compiled(ex, facts, comp, status, flags, put, out)

    pts, text, flag = path_points(ex, facts)
    put("path", pts, text, graded=bool(facts.get("gpu")))
    if flag:
        flags.append(flag)

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
            "poisoned outputs)" + _printed(facts))
    else:
        bad = next((s for s in corr.get("shapes", []) if not s["ok"]), {})
        put("correctness", 0, f"wrong at shape {tuple(bad.get('shape', ()))}: {bad.get('message', '')}"
            + _printed(facts))

    _put_throughput(ex, facts, put, out)
    return ExerciseScore(ex.name, out, flags, status, facts)


def _score_not_compiled(ex: Exercise, facts: dict, comp: dict | None, status: str, flags: list[str], put,
                        out: dict[str, PartScore]) -> ExerciseScore:
    """No kernel to run (not compiled, or not attempted): 0 on every part, the reason under the first."""
    parts = ex.parts
    why = (comp or {}).get("error") or facts.get("error") or "no verdict"
    if comp and comp.get("not_attempted"):
        why = "exercise not attempted: " + why.split(": ", 1)[-1] if "not attempted" not in why else why
        status = "not_attempted"
    first = next(iter(parts))
    for part in parts:  # the compiler's log once, under the first part; the others point at it
        put(part, 0, why if part == first else
            f"0: {'not attempted' if status == 'not_attempted' else 'the kernel did not compile'} "
            f"(the {first} part says why)")
    return ExerciseScore(ex.name, out, flags, status, facts)


def _put_throughput(ex: Exercise, facts: dict, put, out: dict[str, PartScore]) -> None:
    """The throughput part: not graded (why, with the figure if one was measured), or measured against the bar,
    the roofline, the timed output and (where the spec requires it) the path part's share."""
    parts = ex.parts
    tp = facts.get("throughput", {})
    if not tp.get("graded"):
        reason = tp.get("reason", "")
        mine = tp.get("student") or {}
        if mine.get("value"):
            unit = "TB/s" if ex.metric == "tbps" else "TFLOPS"
            stale = "" if mine.get("output_ok", True) else "; its timed runs' output was wrong (stale or skipped work)"
            put("throughput", 0, f"measured {mine['value']:.3f} {unit}{stale}; not graded: {reason}", graded=False)
        else:
            put("throughput", 0, f"not timed: {reason}", graded="not correct" in reason)
        return
    mine = tp["student"]
    ref = tp.get("reference") or {}
    bar, how = bar_for(ex, tp)
    unit = "TB/s" if ex.metric == "tbps" else "TFLOPS"
    value = mine.get("value") or 0.0
    roof = ex.roofline_for(tp.get("gpu"))
    text = (f"measured {value:.3f} {unit} ({mine['ms']:.4f} ms median, p20 {mine['p20_ms']:.4f}, p80 "
            f"{mine['p80_ms']:.4f})" + (f" on {tp['device']}" if tp.get("device") else "")
            + (f"; course reference in this run {ref['value']:.3f} {unit}" if ref.get("value") else ""))
    if bar is None:
        put("throughput", 0, text + f"; not graded: {how}", graded=False)
    elif value > roof:
        put("throughput", 0, text + f"; ABOVE the roofline ({roof} {unit}): impossible, flagged")
    elif not mine.get("output_ok", True):
        put("throughput", 0, text + f"; {mine.get('wrong_launches', 'some')} of {mine.get('verified', 'the')} verified "
            "launches left a wrong output (stale, skipped or cached work): no throughput points")
    elif value >= bar and parts["throughput"].requires_path and out["path"].points < parts["path"].points:
        share = out["path"].points / parts["path"].points
        put("throughput", parts["throughput"].points * share, text + f"; bar {bar:.3f} {unit} = {how}: passed, but "
            f"speed counts only through the mechanism: the path part scored {out['path'].points:g} of "
            f"{parts['path'].points:g}, so {share:.0%} of the throughput points")
    elif value >= bar:
        put("throughput", parts["throughput"].points, text + f"; bar {bar:.3f} {unit} = {how}: passed")
    else:
        put("throughput", 0, text + f"; bar {bar:.3f} {unit} = {how}: {value / bar:.2f}x of the bar")
    facts.setdefault("throughput", {})["bar"] = bar


def _printed(facts: dict) -> str:
    text = facts.get("kernel_output")
    if not text:
        return ""
    return "\nyour kernel printed (ignored by the grader):\n  " + text[:600].replace("\n", "\n  ")


def path_points(ex: Exercise, facts: dict) -> tuple[float, str, str | None]:
    """(points, feedback, flag) of the hardware-path part.

    Path points need a kernel that is correct on a Hopper GPU. Where no GPU ran it, the part is not graded here (the
    static verdict is reported, as correctness is, and kept in facts["path"]["static_points"]). Static evidence (the
    kernel's SASS) is necessary: a required instruction missing or a forbidden one present scores 0. Then what ran
    decides: one untimed launch profiled by Nsight Compute (the spec's `executed` rules on the bytes each memory
    path carried; every rule at its bound scores full, every rule at its partial bound scores `partial_points`,
    anything else 0), and the launches of the timing loop, counted by CUPTI's range profiler while it ran
    (autograder.harness: as many counted launches as timed ones, interleaved with them at secret positions, the
    mechanism's own counter per counted launch, held to the same rule). A kernel whose timing-loop launches did not
    run what its profiled launch ran gets no path points and the flag "timed-path"."""
    pp = ex.parts["path"]
    path = facts.get("path", {}) or {}
    summary = path.get("summary", "")
    static = pp.points if path.get("ok") else 0.0
    path["static_points"] = static
    if not facts.get("gpu"):
        verdict = ("the required instructions are in the SASS" if static else
                   "required instructions missing from (or forbidden ones present in) the SASS: 0 on a GPU too")
        return 0.0, ("not graded here (no sm_90 GPU ran the kernel; path points need a kernel that is correct on "
                     f"a GPU): {verdict}\n" + summary), None
    if not path.get("ok"):
        return 0.0, "required instructions missing from (or forbidden ones present in) the kernel's SASS:\n" + summary, None
    corr = facts.get("correctness") or {}
    if facts.get("status", "ok") != "ok" or not (corr.get("graded") and corr.get("ok")):
        why = facts.get("error") or ("it was not correct" if corr.get("graded") else "it did not run to completion")
        return 0.0, ("no path points: they need a kernel that is correct on the GPU, and this one was not ("
                     + str(why).splitlines()[0][:300] + "); the SASS alone proves nothing about what runs\n" + summary), None
    dyn = path.get("executed")
    if not pp.executed:
        return pp.points, "hardware path (static evidence: the kernel's SASS):\n" + summary, None
    if dyn is None:
        return pp.points, "static evidence only (the executed path was not measured): the required instructions " \
            "are in the SASS\n" + summary, "path-not-measured: no profile of the kernel was taken"
    if not dyn.get("measured") and not dyn.get("unavailable", True):
        # The profiler works here but the kernel's profiled launch did not complete: a kernel that behaves
        # differently when measured must not fall back to its SASS.
        return (0.0, f"the profiled launch did not complete ({dyn.get('reason')}): no path points\n" + summary,
                f"path-not-measured: {dyn.get('reason')}")
    if not dyn.get("measured"):
        return (pp.points, f"static evidence only: the executed path could not be measured ({dyn.get('reason')})\n"
                + summary, f"path-not-measured: {dyn.get('reason')}")
    if not dyn.get("output_ok"):
        return 0.0, f"the profiled launch's output was wrong ({dyn.get('output_message')}): no path points", None
    b = dyn.get("bytes", {})
    loaded = sum(b.get(q, 0.0) for q in LOADED)
    lines, full, partial = [], True, True
    for rule in pp.executed:
        if rule.opcode:  # an instruction rule: executed count per CTA of the launch
            num, den = rule.count(dyn.get("executed_counts") or {}), dyn.get("ctas") or 0
        else:
            num = sum(b.get(q, 0.0) for q in rule.bytes)
            den = loaded if rule.per == "loaded" else dyn.get(f"{rule.per}_bytes") or 0
        frac = num / den if den else 0.0
        ok = rule.holds(frac)
        full &= ok
        partial &= rule.holds(frac, partial=True)
        if rule.opcode:
            seen = f"{rule.opcode} executed {frac:.2f} times per CTA ({rule.bound()}; {num} in {den} CTAs)"
        else:
            what = {"read": "the bytes it must read", "written": "the bytes it must write",
                    "loaded": "all the bytes it loaded from global memory"}[rule.per]
            seen = f"{frac:.0%} of {what} ({rule.bound()}; {num / 1e6:.1f} of {den / 1e6:.1f} MB)"
        lines.append(f"  {'ok ' if ok else 'NO '} {rule.what}: {seen}")
    head = (f"measured on the GPU (one untimed launch at shape {tuple(dyn.get('shape', ()))}, launch "
            f"{dyn.get('launch')}): executed {', '.join(dyn.get('executed', [])[:6]) or 'no memory instruction'}")
    body = head + "\n" + "\n".join(lines)
    if not (full or (partial and pp.partial_points)):
        return 0.0, "the hardware path did not carry the work, " + body, None
    held, tline, flag = timed_check(pp, path.get("timed"), partial=not full)
    body += "\n" + tline
    if not held:
        return 0.0, "the timing loop's launches did not run the path the profiled launch proved: no path points; " + body, flag
    if full:
        return pp.points, "hardware path used and carrying the work, " + body, flag
    return pp.partial_points, \
        f"partial use of the hardware path ({pp.partial_points:g} of {pp.points:g}), " + body, flag


LOADED = ("tma_load", "global_load", "ldgsts", "global_atomic")  # every path a launch loads global memory by


def timed_check(pp, timed: dict | None, partial: bool) -> tuple[bool, str, str | None]:
    """(held, feedback line, flag) of the counters taken in the timing loop (autograder.harness: one CUPTI range per
    counted launch, interleaved with the timed ones). Each rule with `at_least` on one quantity the ranges counted is
    held by *every* counted launch
    at the level the profiled launch earned (full, or partial); where nothing was counted, the line says why."""
    if not timed:
        return True, "  (the timing loop: no counter of this exercise's mechanism fits one profiling pass)", None
    if not timed.get("measured"):
        why = timed.get("reason", "not measured")
        return True, f"  (the timing loop's launches were not counted: {why})", f"timed-path-not-measured: {why}"
    per_launch, den = timed.get("per_launch") or {}, timed.get("den") or {}
    lines, held = [], True
    for rule in counted_rules(pp):
        q = rule.bytes[0]
        if q not in per_launch:  # left out of the one pass (timed["skipped"] says why)
            continue
        d = den.get(rule.per) or 0
        fracs = [v / d if d else 0.0 for v in per_launch[q]]
        worst = min(fracs) if fracs else 0.0
        ok = rule.holds(worst, partial=partial)
        held &= ok
        lines.append(f"  {'ok ' if ok else 'NO '} every counted launch: {rule.what}: the lowest of {len(fracs)} "
                     f"counted launches {worst:.0%} ({rule.bound()}{', partial bound' if partial else ''}; "
                     f"{timed.get('what', {}).get(q, q)})")
    if not lines:
        return True, "  (the timing loop: none of this exercise's rules has a counter that fits one pass)", None
    n, ms, cms = timed.get("launches"), timed.get("timed_ms"), timed.get("counted_ms")
    slowed = f"; counted launches {cms:.4f} ms median vs timed {ms:.4f} ms" if ms and cms else ""
    text = (f"counted in the timing loop (CUPTI range profiler: {n} counted launches interleaved with the timed ones "
            f"at secret positions, one range each, not timed{slowed}):\n" + "\n".join(lines))
    flag = None if held else ("timed-path: the launches of the timing loop did not carry the work by the path the "
                              "profiled launch proved")
    return held, text, flag
