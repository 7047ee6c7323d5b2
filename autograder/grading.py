"""Grade one notebook from its answer cells (taken out by grade_id), with the trusted harness.

    result = grade_notebook(submitted_nb, spec, seed=secret, source_nb=solution_nb)
    result.scores["row_bias_path"].points, result.flags, result.feedback()

Used by the nbgrader preprocessor (autograder.nbgrader_plugin) during `nbgrader autograde`, by the known-answer
tests, and by `autograder check-known`. The notebook's own outputs are never read.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from kernels.runner import derive

from .answers import cells_by_grade_id, read_answer, _source
from .harness import run_exercise
from .quizzes import quiz_key, quiz_reason
from .score import ExerciseScore, PartScore, score
from .spec import Spec

ROOT = Path(__file__).resolve().parent.parent


def derive_seed(secret: int | str, *parts) -> int:
    """A student's (and an exercise's) seed from the instructor's secret: kernels.runner.derive of the secret."""
    return derive(str(secret), *parts)


def solution_notebook(spec: Spec) -> dict:
    path = ROOT / "solutions" / spec.assignment / spec.notebook
    return nbformat.read(str(path), as_version=4)


def reference_sources(spec: Spec, source_nb: dict | None = None) -> dict[str, str]:
    """The course solution of every exercise of a topic (its answer cell in the solutions notebook): what the
    trusted baseline times beside a student's kernel."""
    cells = cells_by_grade_id(source_nb if source_nb is not None else solution_notebook(spec))
    out = {}
    for ex in spec.exercises.values():
        if ex.answer_cell in cells:
            value = read_answer(_source(cells[ex.answer_cell]), ex.answer_var).value
            if isinstance(value, str):
                out[ex.name] = value
    return out


@dataclass
class NotebookGrade:
    slug: str
    scores: dict[str, PartScore] = field(default_factory=dict)  # grade_id -> score
    exercises: dict[str, ExerciseScore] = field(default_factory=dict)
    flags: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    @property
    def points(self) -> float:
        return sum(s.points for s in self.scores.values())

    @property
    def max_points(self) -> float:
        return sum(s.max_points for s in self.scores.values())

    def feedback(self) -> str:
        lines = [f"{self.slug}: {self.points:g} / {self.max_points:g} points"]
        for p in self.problems:
            lines.append(f"  problem: {p}")
        for f in self.flags:
            lines.append(f"  FLAG: {f}")
        for gid, s in self.scores.items():
            first = s.feedback.splitlines()[0] if s.feedback else ""
            lines.append(f"  {gid}: {s.points:g}/{s.max_points:g} — {first}")
        return "\n".join(lines)

    def as_dict(self) -> dict:
        return {"slug": self.slug, "points": self.points, "max_points": self.max_points, "flags": self.flags,
                "problems": self.problems,
                "scores": {g: {"points": s.points, "max_points": s.max_points, "part": s.part, "graded": s.graded,
                               "feedback": s.feedback} for g, s in self.scores.items()},
                "facts": {n: _public_facts(e.facts) for n, e in self.exercises.items()}}


def _public_facts(facts: dict) -> dict:
    """What feedback may show: figures and evidence, no traceback of the trusted code, no secret."""
    keep = {k: v for k, v in facts.items() if k not in ("traceback",)}
    return json.loads(json.dumps(keep, default=str))


def grade_notebook(nb: dict, spec: Spec, *, seed: int, source_nb: dict | None = None, gpu: bool | None = None,
                   student: str = "", with_reference: bool = True, progress=None) -> NotebookGrade:
    source_nb = source_nb if source_nb is not None else solution_notebook(spec)
    cells = cells_by_grade_id(nb)
    src_cells = cells_by_grade_id(source_nb)
    refs = reference_sources(spec, source_nb) if with_reference else {}
    result = NotebookGrade(spec.slug)
    for gid in spec.grade_cells():
        if gid not in cells:
            result.flags.append(f"deleted-cell: grade cell {gid!r} is missing from the submission")
    for ex in spec.exercises.values():
        if progress:
            progress(f"{spec.slug}.{ex.name}")
        cell = cells.get(ex.answer_cell)
        extra: list[str] = []
        if cell is None:
            facts = {"status": "error", "error": f"answer cell {ex.answer_cell!r} is missing from the notebook",
                     "compile": {"ok": False, "not_attempted": True,
                                 "error": f"answer cell {ex.answer_cell!r} was deleted"}}
            extra.append(f"deleted-cell: {ex.answer_cell}")
        else:
            ans = read_answer(_source(cell), ex.answer_var, ex.answer_cell)
            extra += ans.flags
            ref_src = refs.get(ex.name)
            if not ans.attempted:
                facts = {"compile": {"ok": False, "not_attempted": True,
                                     "error": "exercise not attempted: the stub `raise NotImplementedError()` is "
                                              "still there"}}
            elif ans.problem or not isinstance(ans.value, str):
                why = f"not graded: {ans.problem}" if ans.problem else \
                    f"{ex.answer_var} must be a string of CUDA source"
                facts = {"compile": {"ok": False, "not_attempted": False, "error": why}}
            else:
                facts = run_exercise(spec.slug, ex.name, ans.value, seed=derive_seed(seed, student, ex.name),
                                     reference_source=ref_src, gpu=gpu)
        es = score(ex, facts, extra)
        result.exercises[ex.name] = es
        result.flags += [f"{ex.name}: {f}" for f in es.flags]
        for part in es.parts.values():
            result.scores[part.grade_id] = part
    if spec.quiz:
        _grade_quiz(spec, cells, src_cells, result)
    return result


def _grade_quiz(spec: Spec, cells: dict, src_cells: dict, result: NotebookGrade) -> None:
    quiz = spec.quiz
    cell = cells.get(quiz.answer_cell)
    answers: dict = {}
    why = ""
    if cell is None:
        why = f"quiz answer cell {quiz.answer_cell!r} is missing"
        result.flags.append(f"deleted-cell: {quiz.answer_cell}")
    else:
        ans = read_answer(_source(cell), quiz.answer_var, quiz.answer_cell)
        result.flags += [f"quiz: {f}" for f in ans.flags]
        if not ans.attempted:
            why = "quiz not attempted"
        elif not isinstance(ans.value, dict):
            why = f"not graded: {ans.problem}" if ans.problem else \
                f"{quiz.answer_var} must be a dict like {{'q1': 'b', ...}}"
        else:
            answers = ans.value
    for q in quiz.questions.values():
        grade_src = _source(src_cells.get(q.grade_id, {"source": ""}))
        key = quiz_key(grade_src, quiz.answer_var, q.name)
        if key is None:
            result.problems.append(f"no key for {q.name} in the instructor's notebook")
            pts, text = 0.0, "no key"
        elif why:
            pts, text = 0.0, why
        else:
            given = answers.get(q.name)
            if given is None:
                pts, text = 0.0, f"{q.name} not answered"
            elif str(given).strip().lower() == str(key).strip().lower():
                pts, text = q.points, f"{q.name}: correct"
            else:
                pts, text = 0.0, f"{q.name}: answered {given!r}, not the right choice"
                reason = quiz_reason(grade_src, quiz.answer_var, q.name)
                if reason:
                    text += f". {reason}"
        result.scores[q.grade_id] = PartScore(q.grade_id, q.name, pts, q.points, text)
