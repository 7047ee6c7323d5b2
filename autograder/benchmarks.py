"""A topic's benchmark with the grader's half: the exercise's known answers handed in, and what grading holds their
timings to. `make gpu-test` runs every topic's benchmark this way:

    python -m autograder.benchmarks ldgsts --out build/gpu [--quick]

kernels/<slug>/bench.py declares the topic (a kernels.topic.Topic: its kernels, checks, rows, model, claims). The
library never reads grading data, so this module reads it and hands it over: the spec's exercises with their
workload modules and the known answers' CUDA sources (kernels.topic.Answers, from each day's spec.toml and
grading/known/), and `grading` — each course solution's margin over the bar it is graded with on this GPU
kind (exercise_margins: what `autograder calibrate` turns into the spec's calibration), and the bars this run's
timed answers must reach or stay below (REACH, BELOW).
"""

from __future__ import annotations

import importlib
import sys
from functools import partial

from kernels import record, topic

from .known import kernel_source, known_answers, known_dir, rung_source
from .spec import SOLUTION_MARGIN, calibrated_fraction, load
from kernels.runner import exercise_baseline

# Calibration may lower a spec's fraction on a GPU kind (the solution must clear its bar there by SOLUTION_MARGIN),
# but by at most this factor: below it the course solution is far slower than the course says it is on that GPU.
CALIBRATION_FLOOR = 0.90
# Timed known answers that must reach this run's bar (expected.toml gives them the throughput points; the course
# solution then by SOLUTION_MARGIN too), and those that must stay below it (expected.toml gives them none).
REACH = {"ldgsts": ("correct", "plain_loads"), "pipeline": ("correct",)}
BELOW = {"naive_loads": ("scalar_loads",)}
# Topics whose answer rows carry this run's bar (bar_tbps) in the record.
ROW_BARS = ("pipeline",)


def answers(slug: str) -> topic.Answers | None:
    """The topic's known answers for its benchmark: each exercise of the spec with its workload module, and an
    answer's CUDA source by name — a known answer of expected.toml, or a measured rung of the lesson kept beside them
    (autograder.known.rung_source: an earlier answer, timed, never graded). None where the known answers are not
    here (a student release)."""
    if not (known_dir(slug) / "expected.toml").is_file():
        return None
    spec = load(slug)
    names = {ka.name for ka in known_answers(slug)}

    def source(name: str) -> str:
        if name in names:
            return kernel_source(slug, name)
        try:
            return rung_source(slug, name)
        except KeyError:
            raise KeyError(f"no known answer or rung {name!r} in kernels/{slug}/grading/known/") from None

    return topic.Answers({ex.name: (ex, ex.workload()) for ex in spec.exercises.values()}, source)


def exercise_margins(slug: str, rows: list[dict], ceilings: dict, device: str | None) -> tuple[dict, list[str]]:
    """For each exercise whose course solution ("correct") was timed: the exercise's baseline measured in this run
    (kernels.runner.exercise_baseline: the copy ceiling, or the vendor library on the exercise's inputs), the
    solution's fraction of it, and its margin over the bar this GPU kind is graded with (autograder.spec.Part.
    fraction_for). `autograder calibrate` turns these into the spec's per-GPU calibration; a solution that could not
    clear SOLUTION_MARGIN over the spec's own fraction on this GPU is reported (the calibration lowers the bar)."""
    out, problems = {}, []
    tag = record.device_tag(device)
    for ex in load(slug).exercises.values():
        sol = next((r for r in rows if r.get("exercise") == ex.name and r.get("answer") == "correct"), None)
        tp = ex.parts["throughput"]
        if sol is None or topic.measured(sol) is None:
            continue
        value = topic.measured(sol)
        base = topic.attempt(f"{ex.name} baseline", lambda ex=ex: exercise_baseline(ex, ex.workload()), problems,
                             None)
        if not base:
            continue
        fraction, cal, how = tp.fraction_for(tag)
        most = calibrated_fraction(1.0, value, base["value"])  # the largest fraction calibration could give this GPU
        out[ex.name] = {"solution": value, "baseline": base, "solution_fraction": value / base["value"],
                        "spec_fraction": tp.fraction, "fraction_graded_here": fraction, "how": how,
                        "over_bar_here": value / (fraction * base["value"]), "required": SOLUTION_MARGIN}
        if most < CALIBRATION_FLOOR * tp.fraction:
            problems.append(f"{ex.name}: the course solution reached {value / base['value']:.3f}x of its baseline "
                            f"({base['what']}) on this GPU: calibration would have to lower the spec's fraction "
                            f"{tp.fraction} to {most:.3f} (< {CALIBRATION_FLOOR} x it) to keep {SOLUTION_MARGIN}x; "
                            "make the solution faster or state a lower fraction in the spec")
    return out, problems


def bar_checks(slug: str, rows: list[dict], ceilings: dict) -> tuple[dict, list[str]]:
    """The timed answers against this run's bar (the throughput part's fraction x this run's copy ceiling): REACH
    answers at or above it (the course solution by SOLUTION_MARGIN), BELOW answers under it. Returns (the bar's
    facts for the record, the contradictions)."""
    ex = next(iter(load(slug).exercises.values()))
    tp = ex.parts["throughput"]
    bar = tp.ceiling_bar(ceilings)
    if bar is None or not (REACH.get(slug) or BELOW.get(slug) or slug in ROW_BARS):
        return {}, []
    by = {r["answer"]: topic.measured(r) for r in rows if r.get("exercise") == ex.name and r.get("answer")}
    bad = []
    for name in REACH.get(slug, ()):
        got = by.get(name)
        if got is None:
            bad.append(f"{ex.name} ({name}) was not timed: its bar is unchecked")
        elif got < bar:
            bad.append(f"{ex.name} ({name}) at {got:.3f} TB/s is below the bar ({bar:.3f} TB/s, {tp.copy_fraction}x "
                       "of the copy ceiling): expected.toml gives it the throughput points")
        elif name == "correct" and got < SOLUTION_MARGIN * bar:
            bad.append(f"the course solution at {got:.3f} TB/s clears the bar ({bar:.3f} TB/s) by less than "
                       f"{SOLUTION_MARGIN}x: run-to-run noise will fail it")
    for name in BELOW.get(slug, ()):
        got = by.get(name)
        if got is not None and got >= bar:
            bad.append(f"{ex.name} ({name}) at {got:.3f} TB/s reaches the bar of this run ({bar:.3f}): the bar would "
                       "not separate it (expected.toml gives it no throughput points)")
    if slug in ROW_BARS:
        for r in rows:
            if r.get("exercise") == ex.name:
                r["bar_tbps"] = bar
    return {"bar_copy_fraction": tp.copy_fraction, "suggested_bar_tbps": bar}, bad


def grading(slug: str, rows: list[dict], ceilings: dict, device: str | None) -> tuple[dict, list[str]]:
    """What the grader holds a topic's run to (kernels.topic.run's `grading`): (facts for the record, failures)."""
    margins, problems = exercise_margins(slug, rows, ceilings, device)
    bars, bad = bar_checks(slug, rows, ceilings)
    return {"exercise_margins": margins, **bars}, problems + bad


def topic_of(slug: str):
    """The topic a spec names (kernels/<slug>/bench.py's TOPIC): the grader imports the library, never the reverse."""
    return importlib.import_module(f"kernels.{slug}.bench").TOPIC


def run_topic(slug: str, out, quick: bool = False) -> dict:
    """The topic's benchmark (kernels.topic.run) with its known answers and the grader's checks of their timings."""
    return topic_of(slug).run(out, quick, answers=answers(slug), grading=partial(grading, slug))


def main(argv=None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0].startswith("-"):
        raise SystemExit("usage: python -m autograder.benchmarks <slug> [--out DIR] [--quick]")
    slug = argv.pop(0)
    topic.main(topic_of(slug), __doc__, argv, answers=answers(slug), grading=partial(grading, slug))


if __name__ == "__main__":
    main()
