"""Grader specs: kernels/<slug>/spec.toml, one per topic (data, not code), read by path.

Only the grader reads them (kernels/ never does: a topic's benchmark is handed its exercise and known answers by
autograder.benchmarks). An exercise names its workload module (`module`, a kernels/<slug>/ module): the grader
imports it, the library never imports by a name it read from a spec.

    spec = load("naive_loads")
    ex = spec.exercises["row_bias"]; ex.parts["path"].require; ex.bench_shape; spec.quiz.questions["q1"].grade_id
"""

from __future__ import annotations

import importlib
import math
import tomllib
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from kernels.record import device_tag
from kernels.ncu import QUANTITIES
from kernels.sass import family_count
from kernels.rangeprof import countable_rules
from .operators import OperatorError, parse_operator
from kernels.record import here

KERNELS = Path(__file__).resolve().parents[1] / "kernels"  # a day's folder, kernels/<slug>/, holds its spec.toml


def spec_path(slug: str) -> Path:
    """Where a topic's grader spec lives: in its day's folder (the student's local check reads it too)."""
    return KERNELS / slug / "spec.toml"
PARTS = ("correctness", "path", "throughput")


# Every good answer must clear its bar on a noisy run: the course solution clears it by at least this factor at
# calibration (a bar from the ceiling fraction that leaves less is lowered to solution / SOLUTION_MARGIN).
SOLUTION_MARGIN = 1.08


class SpecError(ValueError):
    pass


@dataclass(frozen=True)
class Rule:
    """A rule of the dynamic path check on what one untimed launch did (measured by kernels.ncu):
    - on bytes: sum(bytes) / (the bytes the workload must read, or write, or — per = "loaded" — every byte the launch
      actually loaded from global memory by any path: TMA, LDG/LD, LDGSTS, atomics) >= at_least, or <= at_most;
    - on an instruction (`opcode`, per = "cta"): its executed warp-level count (every opcode that is it or extends
      it: "UTMALDG.2D.MULTICAST" counts "UTMALDG.2D.MULTICAST.x") / the launch's CTAs — for what no byte counter
      tells apart (a multicast load delivers the same bytes to each SM as per-CTA loads); "A|B" counts the executions
      of either (fp32 adds written as FFMA or as FMUL + FADD are the same promotion)."""

    what: str
    bytes: tuple[str, ...]
    per: str  # "read", "written" or "cta"
    at_least: float | None = None
    at_most: float | None = None
    opcode: str | None = None

    def holds(self, fraction: float, partial: bool = False) -> bool:
        """Full: the bound. Partial (`partial_points`): the mechanism carried at least half of its bound, and other
        paths at most half of the bytes."""
        if self.at_least is not None:
            return fraction >= (self.at_least / 2 if partial else self.at_least)
        return fraction <= (max(self.at_most, 0.5) if partial else self.at_most)

    def bound(self) -> str:
        if self.opcode:
            return f">= {self.at_least:g} per CTA" if self.at_least is not None else f"<= {self.at_most:g} per CTA"
        return f">= {self.at_least:.0%}" if self.at_least is not None else f"<= {self.at_most:.0%}"

    def count(self, executed: dict[str, int]) -> int:
        """An instruction rule's executed count, from a profile's {opcode: warp-level count}."""
        return family_count(executed, self.opcode)


def calibrated_fraction(spec_fraction: float, solution: float, baseline: float) -> float:
    """A GPU kind's fraction of the baseline: the spec's, or the largest fraction (4 decimals, rounded down) that
    leaves the course solution SOLUTION_MARGIN above the bar on that GPU."""
    return min(spec_fraction, math.floor(solution / baseline / SOLUTION_MARGIN * 1e4) / 1e4)


@dataclass(frozen=True)
class Calibration:
    """One GPU kind's calibration of a throughput bar, written by `autograder calibrate` from a record (never typed):
    the bar is `fraction` x the trusted baseline measured in the grading run on that GPU kind. `fraction` is the
    spec's fraction, lowered where the course solution would clear it by less than SOLUTION_MARGIN on that GPU."""

    gpu: str  # the device tag ("h100", "h200")
    fraction: float
    baseline: float  # the baseline's figure in the calibrating run (TB/s or TFLOPS)
    solution: float  # the course solution's figure in the same run
    device: str = ""
    driver: str = ""
    date: str = ""
    source: str = ""  # the record it was computed from

    @property
    def bar(self) -> float:
        return self.fraction * self.baseline

    @property
    def margin(self) -> float:
        return self.solution / self.bar


@dataclass(frozen=True)
class Part:
    name: str
    grade_id: str
    points: float
    require: tuple[str, ...] = ()
    forbid: tuple[str, ...] = ()
    runs: int = 1  # correctness: how many fresh-input runs per shape
    executed: tuple[Rule, ...] = ()  # path: rules on what one launch executed (measured on the GPU)
    partial_points: float = 0.0  # path: points when every rule holds only at its partial bound
    # path: the quantity whose counter the counted launches of the timing loop read (kernels.rangeprof.counted_rules:
    # one fits a pass); None = the first of kernels.rangeprof.TIMED's order that an `at_least` rule names
    counted: str | None = None
    # throughput: the bar is a fraction of the trusted baseline measured in the same run — the D2D copy ceiling
    # (copy_fraction, TB/s exercises) or the vendor library on the exercise's own inputs at its bench shape
    # (vendor_fraction, TFLOPS exercises: the workload's `vendor`) — calibrated per GPU kind (`calibration`).
    copy_fraction: float | None = None
    vendor_fraction: float | None = None
    calibration: tuple[Calibration, ...] = ()
    # throughput: points only for speed through the mechanism — scaled by the path part's share of its points (full
    # path: full throughput points, partial: the same share, none: none). On for every mechanism exercise.
    requires_path: bool = False

    @property
    def fraction(self) -> float | None:
        """The spec's fraction of the baseline (the course's intent, before any calibration lowers it)."""
        return self.copy_fraction if self.copy_fraction is not None else self.vendor_fraction

    @property
    def baseline_kind(self) -> str | None:
        return "copy" if self.copy_fraction is not None else "vendor" if self.vendor_fraction is not None else None

    def calibration_for(self, tag: str | None) -> Calibration | None:
        return next((c for c in self.calibration if c.gpu == tag), None)

    def fraction_for(self, tag: str | None) -> tuple[float | None, Calibration | None, str]:
        """(fraction, calibration used, how it was chosen) on the GPU kind `tag`: that kind's calibration; another
        sm_90 part gets the H100's calibrated fraction (else the spec's) and is told so."""
        cal = self.calibration_for(tag)
        if cal is not None:
            return cal.fraction, cal, f"calibrated on {cal.device or tag} ({cal.date})"
        h100 = self.calibration_for("h100")
        if h100 is not None:
            return h100.fraction, h100, (f"no calibration for this GPU ({tag or 'unknown'}): the H100's fraction "
                                         f"of this run's baseline ({h100.date})")
        return self.fraction, None, "not calibrated on any GPU yet: the spec's fraction of this run's baseline"

    def ceiling_bar(self, ceilings: dict, tag: str | None = "here") -> float | None:
        """A copy-class bar under a run's `ceilings` (kernels.bench.ceilings()) on GPU kind `tag` (default: the GPU
        this process runs on): the fraction for that kind x the run's copy ceiling. None for a vendor bar (its
        baseline is the vendor on the exercise's inputs: kernels.runner.exercise_baseline)."""
        if self.baseline_kind != "copy" or not ceilings.get("copy_tbps"):
            return None
        if tag == "here":

            tag = here()
        return self.bar_on(tag, ceilings["copy_tbps"])

    def bar_on(self, tag: str | None, baseline: float | None) -> float | None:
        """The bar in the exercise's metric on GPU kind `tag`, given the same run's baseline figure."""
        fraction = self.fraction_for(tag)[0]
        return None if fraction is None or not baseline else fraction * baseline


@dataclass(frozen=True)
class Exercise:
    name: str
    module: str
    answer_cell: str
    answer_var: str
    kernel: str
    test_shapes: tuple[tuple[int, ...], ...]
    bench_shape: tuple[int, ...]
    metric: str  # "tbps" or "tflops"
    roofline: dict[str, float]  # GPU kind -> the datasheet peak: figures above it are impossible, fail and flag
    timeout_s: float
    bench_reps: int
    launch_timeout_s: float  # one launch that runs longer is a hang
    parts: dict[str, Part]
    mutants: tuple = ()  # autograder.mutants.Operator: what the day teaches, broken on purpose (understanding checks)

    def workload(self):
        return importlib.import_module(self.module)

    def bar_of_record(self, doc: dict | None) -> tuple[float | None, str]:
        """(bar, a sentence) on the GPU of a record `doc` (kernels.record.load): its calibration's bar, the one a
        notebook draws beside that record's rows. Every figure in the sentence comes from the spec's calibration."""
        tp = self.parts["throughput"]
        unit = "TB/s" if self.metric == "tbps" else "TFLOPS"
        what = "D2D copy ceiling" if tp.baseline_kind == "copy" else self.workload().VENDOR
        tag = device_tag((doc or {}).get("device"))
        fraction, cal, how = tp.fraction_for(tag)
        # the fraction the record's GPU is graded with (its calibration's, else the H100's, else the spec's): the
        # spec's own fraction is the bar only where no GPU is calibrated
        head = f"exercise bar: {fraction:g} x the {what} measured in the grading run"
        if cal is None:
            return None, head + " (not calibrated on any GPU yet)"
        if cal.gpu != tag:
            return None, head + f"; {how}"
        lowered = ("" if fraction == tp.fraction else
                   f", lowered from the spec's {tp.fraction:g} so the course solution clears it")
        where = cal.source.split(": ", 1)[-1]
        src = "" if where == what else f" ({where})"
        return cal.bar, (f"{head}; on the {cal.device} ({cal.date}): {fraction:g} x {cal.baseline:.4g}{src} = "
                         f"{cal.bar:.4g} {unit}{lowered}; the course solution ran {cal.solution:.4g} {unit}, "
                         f"{cal.margin:.2f}x the bar")

    def roofline_for(self, tag: str | None) -> float:
        """The datasheet peak of GPU kind `tag`; on a kind the spec does not list, the highest it lists."""
        return self.roofline.get(tag or "", max(self.roofline.values()))


@dataclass(frozen=True)
class Question:
    name: str
    grade_id: str
    points: float
    choices: tuple[str, ...]


@dataclass(frozen=True)
class Quiz:
    answer_cell: str
    answer_var: str
    questions: dict[str, Question]


@dataclass(frozen=True)
class Spec:
    slug: str
    title: str
    assignment: str
    notebook: str
    exercises: dict[str, Exercise]
    quiz: Quiz | None
    path: Path = field(compare=False, default=Path())

    def grade_cells(self) -> dict[str, tuple[str, str]]:
        """grade_id -> (exercise or "quiz", part or question)."""
        cells = {}
        for ex in self.exercises.values():
            for part in ex.parts.values():
                cells[part.grade_id] = (ex.name, part.name)
        if self.quiz:
            for q in self.quiz.questions.values():
                cells[q.grade_id] = ("quiz", q.name)
        return cells


def _need(d: dict, key: str, where: str):
    if key not in d:
        raise SpecError(f"{where}: missing '{key}'")
    return d[key]


def _rule(r: dict, where: str) -> Rule:
    names = tuple(r.get("bytes", ()))
    if ("at_least" in r) == ("at_most" in r):
        raise SpecError(f"{where}: give exactly one of at_least / at_most")
    if "opcode" in r:
        if names or r.get("per") != "cta":
            raise SpecError(f"{where}: an instruction rule (opcode) counts per CTA: per = 'cta', no bytes")
        return Rule(_need(r, "what", where), (), "cta", r.get("at_least"), r.get("at_most"), str(r["opcode"]))
    bad = [n for n in names if n not in QUANTITIES]
    if not names or bad:
        raise SpecError(f"{where}: bytes must name measured quantities ({', '.join(QUANTITIES)}), not {bad or names}")
    if r.get("per") not in ("read", "written", "loaded"):
        raise SpecError(f"{where}: per must be 'read', 'written' or 'loaded', not {r.get('per')!r}")
    if ("at_least" in r) == ("at_most" in r):
        raise SpecError(f"{where}: give exactly one of at_least / at_most")
    return Rule(_need(r, "what", where), names, r["per"], r.get("at_least"), r.get("at_most"))


CALIBRATION_KEYS = ("fraction", "baseline", "solution")


def _roofline(r, where: str) -> dict[str, float]:
    if not isinstance(r, dict) or not r or not all(isinstance(v, (int, float)) and v > 0 for v in r.values()):
        raise SpecError(f"{where}: roofline is a table of datasheet peaks per GPU kind, e.g. {{ h100 = 3.35 }}")
    return {k: float(v) for k, v in r.items()}


def _throughput(p: dict, pname: str, where: str) -> dict:
    """A throughput part's bar: exactly one fraction, and the per-GPU calibrations `autograder calibrate` wrote."""
    stale = [k for k in ("bar", "reference_value", "calibrated", "cublas_fraction") if k in p]
    if stale:
        raise SpecError(f"{where}: {stale} are no longer spec fields: a bar is copy_fraction or vendor_fraction of "
                        "the same run's baseline, calibrated per GPU under [...throughput.calibration.<gpu>]")
    if pname != "throughput":
        return {}
    if ("copy_fraction" in p) == ("vendor_fraction" in p):
        raise SpecError(f"{where}: give exactly one of copy_fraction / vendor_fraction")
    cals = []
    for tag, c in p.get("calibration", {}).items():
        missing = [k for k in CALIBRATION_KEYS if k not in c]
        if missing:
            raise SpecError(f"{where}.calibration.{tag}: missing {missing}")
        cals.append(Calibration(gpu=tag, **{k: c[k] for k in ("fraction", "baseline", "solution", "device", "driver",
                                                                 "date", "source") if k in c}))
    return {"copy_fraction": p.get("copy_fraction"), "vendor_fraction": p.get("vendor_fraction"),
            "calibration": tuple(cals), "requires_path": bool(p.get("throughput_requires_path", False))}


def _counted(q: str | None, executed: tuple, where: str) -> str | None:
    """The path part's `counted` quantity: one that a rule a counter beside the timing can hold names
    (kernels.rangeprof.countable_rules)."""
    named = {r.bytes[0] for r in countable_rules(executed)}
    if q is not None and q not in named:
        raise SpecError(f"{where}: counted = {q!r} must be a quantity that a countable rule of `executed` names "
                        f"({sorted(named) or 'none'}: `at_least`, one quantity a counter beside the timing measures, "
                        f"per read or written bytes)")
    return q


def _mutants(e: dict, where: str) -> tuple:
    ops = []
    for i, m in enumerate(e.get("mutants", ())):
        try:
            ops.append(parse_operator(m, f"{where}.mutants[{i}]"))
        except OperatorError as exc:
            raise SpecError(str(exc)) from None
    ids = [o.id for o in ops]
    if len(set(ids)) != len(ids):
        raise SpecError(f"{where}: a mutant id used twice: {sorted({i for i in ids if ids.count(i) > 1})}")
    return tuple(ops)


def parse(data: dict, path: Path = Path("<spec>")) -> Spec:
    slug = _need(data, "slug", str(path))
    exercises = {}
    for name, e in data.get("exercises", {}).items():
        where = f"{path} [exercises.{name}]"
        parts = {}
        for pname in PARTS:
            if pname not in e:
                raise SpecError(f"{where}: missing part [{pname}]")
            p = e[pname]
            executed = tuple(_rule(r, f"{where}.{pname}.executed") for r in p.get("executed", ()))
            parts[pname] = Part(
                name=pname, grade_id=_need(p, "grade_id", f"{where}.{pname}"), points=float(_need(p, "points", where)),
                require=tuple(p.get("require", ())), forbid=tuple(p.get("forbid", ())), runs=int(p.get("runs", 1)),
                executed=executed, partial_points=float(p.get("partial_points", 0.0)),
                counted=_counted(p.get("counted"), executed, f"{where}.{pname}"),
                **_throughput(p, pname, f"{where}.{pname}"))
        metric = _need(e, "metric", where)
        if metric not in ("tbps", "tflops"):
            raise SpecError(f"{where}: metric must be 'tbps' or 'tflops', not {metric!r}")
        exercises[name] = Exercise(
            name=name, module=_need(e, "module", where), answer_cell=_need(e, "answer_cell", where),
            answer_var=_need(e, "answer_var", where), kernel=_need(e, "kernel", where),
            test_shapes=tuple(tuple(s) for s in _need(e, "test_shapes", where)),
            bench_shape=tuple(_need(e, "bench_shape", where)), metric=metric, roofline=_roofline(_need(e, "roofline", where), where),
            timeout_s=float(e.get("timeout_s", 180)), bench_reps=int(e.get("bench_reps", 20)),
            launch_timeout_s=float(e.get("launch_timeout_s", 10)), parts=parts, mutants=_mutants(e, where))
    quiz = None
    if "quiz" in data:
        q = data["quiz"]
        questions = {n: Question(n, _need(v, "grade_id", f"{path} [quiz.questions.{n}]"), float(v.get("points", 1)),
                                 tuple(v.get("choices", ("a", "b", "c", "d"))))
                     for n, v in _need(q, "questions", f"{path} [quiz]").items()}
        quiz = Quiz(_need(q, "answer_cell", f"{path} [quiz]"), _need(q, "answer_var", f"{path} [quiz]"), questions)
    spec = Spec(slug=slug, title=data.get("title", slug), assignment=_need(data, "assignment", str(path)),
                notebook=_need(data, "notebook", str(path)), exercises=exercises, quiz=quiz, path=path)
    ids = [gid for ex in exercises.values() for gid in (p.grade_id for p in ex.parts.values())]
    ids += [q.grade_id for q in (quiz.questions.values() if quiz else ())]
    dup = {i for i in ids if ids.count(i) > 1}
    if dup:
        raise SpecError(f"{path}: grade_id used twice: {sorted(dup)}")
    return spec


@lru_cache(maxsize=None)
def load(slug: str) -> Spec:
    path = spec_path(slug)
    if not path.exists():
        known = ", ".join(sorted(p.parent.name for p in KERNELS.glob("*/spec.toml")))
        raise SpecError(f"no grader spec for topic {slug!r} (known: {known})")
    with path.open("rb") as f:
        return parse(tomllib.load(f), path)


def all_specs() -> list[Spec]:
    return [load(p.parent.name) for p in sorted(KERNELS.glob("*/spec.toml"))]


def for_notebook(assignment: str, notebook: str) -> Spec | None:
    name = Path(notebook).name
    for spec in all_specs():
        if spec.assignment == assignment and spec.notebook == name:
            return spec
    return None
