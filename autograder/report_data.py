"""The class report's data: what it reads of one student and one exercise (ExerciseInfo, Result, Student), the
figures drawn from them (status, maximum, leaderboard, understanding score) and `_clean`, which cuts every message
the report shows (no secret seed, no traceback of the trusted code). autograder.report collects them; its page
(autograder.report_html) and plots (autograder.report_plots) show them."""

from __future__ import annotations

import json
import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

UNITS = {"tbps": "TB/s", "tflops": "TFLOPS"}
MAX_MESSAGE = 300


# --------------------------------------------------------------------------------------------------- what we read
@dataclass
class ExerciseInfo:
    """One graded exercise of the week, as the spec describes it (or as the verdicts show it, without a spec)."""
    key: str  # "<notebook stem>.<exercise>"
    notebook: str  # notebook stem, e.g. day1_naive_loads
    name: str  # exercise name, e.g. row_bias
    grade_ids: tuple[str, ...] = ()
    max_points: float | None = None
    metric: str | None = None
    bar: float | None = None  # the median of the bars the batch applied (a fraction of each run's baseline)
    roofline: dict | None = None  # GPU kind -> datasheet peak (the spec's)
    peak: float | None = None  # the datasheet peak of the GPUs that graded the batch (the highest, if several)

    @property
    def unit(self) -> str:
        return UNITS.get(self.metric or "", self.metric or "")


@dataclass
class Result:
    """One student's figures for one exercise."""
    points: float = 0.0
    max_points: float = 0.0
    graded: bool = False  # a verdict exists
    status: str = ""
    correct: bool | None = None  # None: correctness not graded (no GPU)
    value: float | None = None  # measured throughput, in the exercise's metric
    output_ok: bool = True
    bar: float | None = None  # the bar this student was graded against (its run's baseline x the GPU's fraction)
    roofline: float | None = None  # the datasheet peak of the GPU that timed it


@dataclass
class Student:
    name: str
    submitted: bool = False
    verdicts: dict[str, dict] = field(default_factory=dict)  # notebook stem -> verdict
    gradebook: dict | None = None  # the row of nbgrader's export
    book: dict | None = None  # the class gradebook's figures (_read_gradebook_db), where it has a submission
    batch: dict | None = None  # the batch's entry for this student
    results: dict[str, Result] = field(default_factory=dict)  # exercise key -> result
    notes: list[str] = field(default_factory=list)

    @property
    def verdict_points(self) -> float:
        return sum(_num(v.get("points")) for v in self.verdicts.values())

    @property
    def total(self) -> float:
        """The gradebook's total (nbgrader's: the notebooks' points less a late penalty), else its export's, else the
        verdicts'. With a gradebook it is made of the very figures notebook_points shows, manual scores included."""
        if self.book is not None:
            return max(0.0, sum(p for p, _ in self.book["notebooks"].values()) - self.penalty)
        if self.gradebook is not None and _num(self.gradebook.get("score"), None) is not None:
            return _num(self.gradebook.get("score"))
        return self.verdict_points

    @property
    def penalty(self) -> float:
        """The late-submission penalty nbgrader took off the total (0 without a gradebook)."""
        return _num((self.book or {}).get("penalty"))

    def notebook_points(self, nb: str) -> tuple[float, float] | None:
        """(points, max) of one notebook: the gradebook's where it has the student, else the verdict's, else None."""
        if self.book is not None:
            return self.book["notebooks"].get(nb)
        v = self.verdicts.get(nb)
        return (_num(v.get("points")), _num(v.get("max_points"))) if v is not None else None

    def exercise_points(self, ex: "ExerciseInfo") -> tuple[float, float] | None:
        """(points, max) of one exercise: the sum of its parts' (part_points), None where no part has a figure."""
        got = [p for g in ex.grade_ids if (p := self.part_points(ex.notebook, g)) is not None]
        return (sum(p for p, _ in got), sum(m for _, m in got)) if got else None

    def part_points(self, nb: str, grade_id: str) -> tuple[float, float] | None:
        """(points, max) of one graded part (a grade cell), from the same source as notebook_points."""
        if self.book is not None:
            return self.book["grades"].get((nb, grade_id))
        sc = ((self.verdicts.get(nb) or {}).get("scores") or {}).get(grade_id)
        return (_num(sc.get("points")), _num(sc.get("max_points"))) if isinstance(sc, dict) else None

    @property
    def flags(self) -> list[tuple[str, str]]:
        return [(nb, str(f)) for nb, v in sorted(self.verdicts.items()) for f in v.get("flags") or []]

    @property
    def malformed(self) -> set[str]:
        """Stems of the notebooks the grading command set aside as malformed (its batch entry's "malformed": a
        list of "<name>.ipynb: why" or a {name: why} mapping)."""
        m = (self.batch or {}).get("malformed") or []
        names = m.keys() if isinstance(m, dict) else [str(x).split(":", 1)[0] for x in m if isinstance(x, str)]
        return {Path(n.strip()).stem for n in names}

    @property
    def wall_s(self) -> float | None:
        return _num((self.batch or {}).get("wall_s"), None)

    @property
    def lane(self) -> str:
        """Where the student was graded: a GPU lane of `autograder grade` ("GPU 1"), a Slurm task, or ""."""
        return str((self.batch or {}).get("lane") or "")

    @property
    def retry(self) -> bool:
        """The batch could not grade this student (its grading crashed twice, or its Slurm task did not finish)."""
        return bool((self.batch or {}).get("not_graded")) and not (self.batch or {}).get("permanent")

    @property
    def on_cpu(self) -> bool:
        """Graded on CPU (no GPU in the lane that graded them): no correctness on the GPU, no throughput."""
        return bool((self.batch or {}).get("cpu")) and not (self.batch or {}).get("not_graded")


def _num(x, default: float | None = 0.0) -> float | None:
    try:
        v = float(x)
    except (TypeError, ValueError):
        return default
    return v if math.isfinite(v) else default


def _natural(s: str):
    return [int(t) if t.isdigit() else t.lower() for t in re.split(r"(\d+)", s)]


def _read_json(path: Path) -> tuple[dict | None, str | None]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        return None, f"{path.name}: unreadable ({type(exc).__name__})"
    if not isinstance(data, dict):
        return None, f"{path.name}: not a verdict object"
    return data, None


def _secrets() -> list[str]:
    """The grading secret, if this process can see it: scrubbed from every message the report shows."""
    out = []
    if os.environ.get("COURSE_SECRET_SEED"):
        out.append(os.environ["COURSE_SECRET_SEED"].strip())
    f = os.environ.get("COURSE_SECRET_SEED_FILE")
    if f:
        try:
            out.append(Path(f).expanduser().read_text().strip())
        except OSError:
            pass
    return [s for s in out if s]


def _clean(text, secrets: list[str] = ()) -> str:
    """One message fit for the report: no traceback, no hidden-test block, no secret, one short paragraph."""
    text = str(text or "")
    text = re.sub(r"#+\s*BEGIN HIDDEN TESTS.*?(#+\s*END HIDDEN TESTS|$)", "[hidden tests removed]", text, flags=re.S)
    text = text.replace("HIDDEN TESTS", "hidden tests")
    kept = []
    in_tb = False
    for line in text.splitlines():
        if line.startswith("Traceback (most recent call last)") or re.match(r"\s*File \"", line):
            in_tb = True
            continue
        if in_tb:
            # a traceback ends with an unindented "Type: message" line: keep that line only
            if line and not line[0].isspace():
                in_tb = False
                kept.append(line)
            continue
        kept.append(line)
    text = " ".join(s.strip() for s in kept if s.strip())
    text = text.replace("Traceback", "traceback")
    for s in secrets:
        text = text.replace(s, "[secret]")
    return text if len(text) <= MAX_MESSAGE else text[:MAX_MESSAGE - 3] + "..."


def understanding_of(meta: dict, student: str) -> tuple[float, float] | None:
    """(score, max) of a student's understanding check, None where none was imported for them."""
    got = ((meta.get("understanding") or {}).get("students") or {}).get(student)
    return (_num(got.get("score")), _num(got.get("max"))) if isinstance(got, dict) else None


def status_of(s: Student, notebooks: list[str]) -> str:
    if not s.submitted:
        return "no submission"
    if (s.batch or {}).get("queued"):
        return "queued (Slurm)"
    if s.retry:
        return "not graded, retry"
    if (s.batch or {}).get("not_graded"):
        return "not graded"
    rc = (s.batch or {}).get("returncode")
    if not s.verdicts:
        return "not graded"
    if rc not in (None, 0) or any(nb not in s.verdicts for nb in notebooks):
        return "partly graded"
    return "graded"


def max_total(exercises: list[ExerciseInfo], roster: list[Student]) -> float:
    """The week's maximum: the gradebook's, else the specs', else the verdicts'."""
    for s in roster:
        if s.book and s.book["max_score"]:
            return s.book["max_score"]
        if s.gradebook and _num(s.gradebook.get("max_score"), None):
            return _num(s.gradebook["max_score"])
    m = sum(e.max_points or 0 for e in exercises)
    if m:
        return m
    return max((sum(_num(v.get("max_points")) for v in s.verdicts.values()) for s in roster), default=0.0)


def leaderboard(ex: ExerciseInfo, roster: list[Student]) -> list[tuple[Student, Result]]:
    """Correct submissions with a measured throughput, fastest first (impossible or stale figures left out)."""
    rows = []
    for s in roster:
        r = s.results.get(ex.key)
        if r is None or r.value is None or r.correct is not True or not r.output_ok:
            continue
        if r.roofline and r.value > r.roofline:
            continue
        rows.append((s, r))
    return sorted(rows, key=lambda sr: (-sr[1].value, _natural(sr[0].name)))
