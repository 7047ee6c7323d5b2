"""Known answers: submissions with the scores they must get (autograder/submissions/<slug>/expected.toml).

The answers themselves — a `source` (the solution, a `.cu` kernel, a `.py` answer cell) or a `base` + `mutate` (a
kernel with named changes, each old text exactly once) — are data, read and assembled by
kernels.known (its docstring gives the format). This module grades them.

The submission notebook is the solutions notebook with that answer cell replaced, graded by the same code as the
gradebook. Parts that cannot be graded on this machine (no Hopper GPU) are reported, not compared.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

from kernels.known import (SUBMISSIONS, KnownAnswer, MutationError, _exercise, answer_text,  # noqa: F401
                           apply_mutations, base_path, base_text, kernel_source, known_answer, known_answers)

from .answers import cells_by_grade_id
from .grading import NotebookGrade, grade_notebook, solution_notebook
from .spec import load


def answer_cell_source(slug: str, ka: KnownAnswer, var: str) -> str | None:
    text = answer_text(slug, ka)
    if text is None:
        return None
    if ka.base is None and ka.source.endswith(".py"):
        return text
    return f'{var} = r"""\n{text}"""\n'


def submission_notebook(slug: str, ka: KnownAnswer) -> dict:
    spec = load(slug)
    nb = copy.deepcopy(solution_notebook(spec))
    ex = _exercise(spec, ka)
    src = answer_cell_source(slug, ka, ex.answer_var)
    if src is not None:
        cells_by_grade_id(nb)[ex.answer_cell]["source"] = src
    return nb


@dataclass
class KnownResult:
    answer: KnownAnswer
    grade: NotebookGrade
    mismatches: list[str]
    unchecked: list[str]

    @property
    def ok(self) -> bool:
        return not self.mismatches


def check_known(slug: str, *, seed: int = 12345, gpu: bool | None = None, names=None) -> list[KnownResult]:
    spec = load(slug)
    results = []
    for ka in known_answers(slug):
        if names and ka.name not in names:
            continue
        nb = submission_notebook(slug, ka)
        g = grade_notebook(nb, spec, seed=seed, gpu=gpu, student=f"known-{ka.name}")
        ex = _exercise(spec, ka)
        es = g.exercises[ex.name]
        mism, unchecked = [], []
        measured = bool(((es.facts.get("path") or {}).get("executed") or {}).get("measured"))
        ran_ok = bool(es.facts.get("gpu")) and bool((es.facts.get("correctness") or {}).get("ok"))
        for part, want in ka.expected.items():
            got = es.parts[part]
            want_static = want if ka.path_static is None else ka.path_static  # what the SASS alone allows
            if part == "path" and not measured and ran_ok:
                want = want_static  # the SASS holds what never ran: static evidence cannot tell
            if not got.graded:
                if part == "path" and not es.facts.get("gpu"):  # no GPU: the static verdict is what can be checked
                    static = (es.facts.get("path") or {}).get("static_points")
                    if static is not None and abs(static - want_static) > 1e-9:
                        mism.append(f"path (static verdict): got {static:g}, expected {want_static:g}")
                unchecked.append(part)
                continue
            if abs(got.points - want) > 1e-9:
                mism.append(f"{part}: got {got.points:g}, expected {want:g} ({got.feedback.splitlines()[0]})")
        ran = bool(es.facts.get("gpu")) and es.status != "not_attempted"
        allowed = set(ka.gpu_status) if (ran and ka.gpu_status) else {ka.status or "ok"}
        if es.status not in allowed:
            mism.append(f"status: got {es.status!r}, expected {' or '.join(sorted(allowed))}")
        want_flags = ka.flags + (ka.gpu_flags if ran else [])
        for flag in want_flags:
            if not any(flag in f for f in es.flags):
                mism.append(f"flag {flag!r} not raised (flags: {es.flags})")
        extra = [f for f in es.flags if not any(w in f for w in want_flags) and not f.startswith(es.status)
                 # a race may be right on one run and wrong on the next: allowed where correctness must fail
                 and not (f.startswith("inconsistent-results") and ka.expected.get("correctness", 1) == 0)
                 # a kernel allowed to fail ("error") may fault either way
                 and not (f.startswith(("illegal-address", "kernel-fault")) and "error" in allowed)]
        if extra:
            mism.append(f"unexpected flags: {extra}")
        results.append(KnownResult(ka, g, mism, unchecked))
    return results


def table(results: list[KnownResult]) -> str:
    lines = [f"{'answer':<16}{'correct.':>9}{'path':>6}{'thru.':>7}  {'ok':<4} notes"]
    for r in results:
        ex = next(iter(r.grade.exercises.values()))
        static = (ex.facts.get("path") or {}).get("static_points")
        cell = lambda p: (f"{ex.parts[p].points:g}" if ex.parts[p].graded else  # noqa: E731
                          f"({static:g})" if p == "path" and static is not None else "-")
        note = "; ".join(r.mismatches) or (f"not graded here: {', '.join(r.unchecked)}" if r.unchecked else "")
        lines.append(f"{r.answer.name:<16}{cell('correctness'):>9}{cell('path'):>6}{cell('throughput'):>7}  "
                     f"{'yes' if r.ok else 'NO':<4} {note}")
    return "\n".join(lines)
