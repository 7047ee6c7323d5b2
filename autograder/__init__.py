"""Grading for the Hopper async-memory course.

In a notebook (the student's early verdict; the gradebook's comes from the same harness run outside the notebook):

    autograder.check("naive_loads", "row_bias", ROW_BIAS_CU)          # full report: correctness, path, throughput
    autograder.grade("naive_loads", "row_bias", "path", ROW_BIAS_CU)  # a grade cell: prints why, returns points
    autograder.quiz("naive_loads", "q1", QUIZ)                         # checks the answer is one of the choices
    autograder.what_if("tma", "tma_add", TMA_ADD_CU)                   # practice: what breaks if ... (measured)

What the notebook's interpreter reports is never what the gradebook records: `nbgrader autograde` re-grades every
answer cell (taken out by grade_id) in a separate process — see autograder.nbgrader_plugin. The gradebook reads an
answer cell as text (autograder.answers); so each call here also reads, in a notebook, the newest cell of IPython's
input history that sets the answer variable with the same reader (autograder.answers.local_verdict) and prints
"<VAR>: this will not be graded: <reason>" when the grader could not read it, or would read another value than the
one the notebook holds. Outside IPython (plain Python, tests) there is no history: the value passed is checked.
"""

from __future__ import annotations

import os
import secrets
import sys
import traceback

from .answers import STUB_LINE, Verdict, local_verdict  # STUB_LINE: nbgrader's stub in an answer cell
from .spec import load

__all__ = ["check", "grade", "quiz", "load", "NotAnswered"]

_cache: dict = {}


def _graded_elsewhere() -> bool:
    return os.environ.get("NBGRADER_EXECUTION") in ("autograde", "validate")


def _history() -> list | None:
    """IPython's input history (`In`) when this runs in a notebook's kernel, else None (no IPython imported: plain
    Python, a grading process, tests)."""
    try:
        shell = sys.modules["IPython"].get_ipython()
        history = shell.user_ns.get("In")
    except Exception:  # noqa: BLE001 (no IPython, no shell, a shell without a user namespace)
        return None
    return history if isinstance(history, list) else None


def _seen(var: str, runtime) -> Verdict:
    """What the grader will read of the answer `var` (autograder.answers.local_verdict on this notebook's history)."""
    return local_verdict(var, runtime, _history())


def _not_graded(var: str, seen: Verdict) -> str:
    where = f" (cell {seen.where})" if seen.where else ""
    return f"{var}{where}: this will not be graded: {seen.reason}"


def check(slug: str, exercise: str, source, *, verbose: bool = True):
    """Run the trusted harness on `source` (fresh secret inputs each call) and print the verdict of every part.
    In a notebook whose answer cell the grader could not read, or would read as another value than `source`, the
    first line says so ("this will not be graded: ..."); `source` is still checked (its verdict is worth seeing)."""
    from .harness import run_exercise  # harness pulls the grading machinery: only when a check runs
    from .score import score  # at the package's top it would shadow the submodule of that name

    spec = load(slug)
    if exercise not in spec.exercises:
        raise KeyError(f"{slug} has no exercise {exercise!r}; it has {sorted(spec.exercises)}")
    ex = spec.exercises[exercise]
    if verbose:
        seen = _seen(ex.answer_var, source)
        if not seen.graded:
            print(_not_graded(ex.answer_var, seen))
    key = (slug, exercise, source)
    if key not in _cache:
        if not isinstance(source, str):
            from .score import ExerciseScore, PartScore  # beside score, bound late like it

            msg = (f"{ex.answer_var} is not set: write your kernel in the answer cell and run it"
                   if source is None else f"{ex.answer_var} must be a string of CUDA source")
            _cache[key] = ExerciseScore(exercise, {p: PartScore(pp.grade_id, p, 0, pp.points, msg)
                                                   for p, pp in ex.parts.items()}, [], "not_attempted", {})
        else:
            facts = run_exercise(slug, exercise, source, seed=secrets.randbits(48))
            _cache[key] = score(ex, facts)
    res = _cache[key]
    if verbose:
        print(f"{slug} / {exercise}: {_headline(res)}")
        for name, part in res.parts.items():
            mark = "ok " if part.points == part.max_points else ("-- " if not part.graded else "NO ")
            print(f"  [{mark}] {name} ({part.points:g}/{part.max_points:g}): "
                  + part.feedback.replace("\n", "\n        "))
        for f in res.flags:
            print(f"  FLAG: {f}")
    return res


def what_if(slug: str, exercise: str, source) -> list:
    """Practice after the exercise: what would break in your kernel if one thing the day teaches were changed
    (autograder.practice.what_if: measured on a Hopper GPU, the course solution's recorded outcomes elsewhere)."""
    from .practice import what_if as _what_if  # at the package's top it would shadow the submodule of that name (what_if)

    return _what_if(slug, exercise, source)


def _headline(res) -> str:
    """check()'s first line: the points; where no GPU ran a kernel that compiled, what passed here and that the
    points are decided on a Hopper GPU (its parts are not graded here: "0 of 7 points" would read as a wrong kernel)."""
    total = sum(p.max_points for p in res.parts.values())
    if res.facts.get("gpu", True) or not (res.facts.get("compile") or {}).get("ok"):
        return f"{res.points:g} of {total:g} points"
    sass = ("the SASS holds the required instructions" if (res.facts.get("path") or {}).get("ok") else
            "the SASS lacks a required instruction (or holds a forbidden one): no path points on a GPU either")
    return (f"compiles; {sass}; not run (no GPU here): its {total:g} points (correctness, path, throughput) are "
            "decided on a Hopper GPU")


def grade(slug: str, exercise: str, part: str, source) -> float:
    """A grade cell's body: print the part's verdict and return its points (nbgrader reads the number)."""
    if _graded_elsewhere():
        print("graded by the trusted harness outside this notebook")
        return 0.0
    ex = load(slug).exercises.get(exercise)
    seen = _seen(ex.answer_var, source) if ex is not None else Verdict(source)  # (no such exercise: check says so)
    if not seen.graded:
        print(_not_graded(ex.answer_var, seen))
        if seen.value is None:  # the gradebook's points for a cell it cannot read
            print(f"{part}: 0/{ex.parts[part].points:g}")
            return 0.0
    res = check(slug, exercise, seen.value, verbose=False)
    p = res.parts[part]
    print(f"{part}: {p.points:g}/{p.max_points:g} — {p.feedback}")
    return float(p.points)


class NotAnswered(ValueError):
    """A quiz question with no answer yet. In a notebook it shows as its one line, not as a traceback: an unattempted
    notebook run top to bottom says what is left to do, once per question."""

    def _render_traceback_(self):  # IPython shows this instead of the traceback
        return [f"not attempted: {self}"]


def quiz(slug: str, question: str, answers) -> None:
    """Check that a quiz answer is well formed (the key is not in the release: hidden tests grade it). In a notebook
    the answer checked is the one the grader will read from the quiz cell's text; "recorded" is said of no other."""
    spec_quiz = load(slug).quiz
    q = spec_quiz.questions[question]
    seen = _seen(spec_quiz.answer_var, answers)
    if not seen.graded:
        if not isinstance(seen.value, dict):
            print(f"{question}: {_not_graded(spec_quiz.answer_var, seen)}")
            return
        ran = answers.get(question) if isinstance(answers, dict) else None
        if seen.value.get(question) != ran:
            print(f"{question}: this will not be graded as {ran!r}: the grader will read {seen.value.get(question)!r}"
                  f", from the text of the cell {seen.where} ({spec_quiz.answer_var} was changed here by code the "
                  "grader does not run)")
    answers = seen.value
    if not isinstance(answers, dict):
        raise TypeError("QUIZ must be a dict like {'q1': 'b', ...}")
    given = answers.get(question)
    if given is None:
        raise NotAnswered(f"{question} is not answered yet: set QUIZ[{question!r}] to one of {list(q.choices)} "
                          "in the quiz answer cell")
    if str(given).strip().lower() not in q.choices:
        raise ValueError(f"{question}: {given!r} is not one of {list(q.choices)}")
    print(f"{question}: answer {given!r} recorded")


def _stub_handler(shell, etype, value, tb, tb_offset=None):
    """An answer cell that still raises nbgrader's stub shows one line saying so; any other NotImplementedError
    keeps its full traceback. Either way the cell fails (the error is still sent), as nbgrader needs."""
    frames = traceback.extract_tb(tb)
    if frames and (frames[-1].line or "").strip() == STUB_LINE:
        stb = ["not attempted: this answer cell still holds its stub `raise NotImplementedError()` — "
               "write your answer in its place"]
    else:
        stb = shell.InteractiveTB.structured_traceback(etype, value, tb, tb_offset=tb_offset)
    shell._showtraceback(etype, value, stb)
    return stb


def _friendly_stubs() -> None:
    """In a notebook (IPython), show an unattempted answer cell as one line (_stub_handler)."""
    if "IPython" not in sys.modules:  # no IPython shell in this process (a notebook's kernel has it imported already):
        return  # nothing to set, and no import of IPython (most of a second) in every grading process
    try:
        from IPython import get_ipython
    except ImportError:
        return
    shell = get_ipython()
    if shell is not None and hasattr(shell, "set_custom_exc"):
        shell.set_custom_exc((NotImplementedError,), _stub_handler)


_friendly_stubs()
