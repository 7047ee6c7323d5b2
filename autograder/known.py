"""Known answers: kernels/<slug>/grading/known/expected.toml, the kernels it names and the scores they must get.

Each entry names its answer in one of two ways:

- `source`: "solution" (the answer cell of the solutions notebook), "release" (that cell as the student release has
  it: weeks/, generated from the solutions notebook by nbgrader — the given code and the stub), a `.cu` file (the
  kernel source, put into the answer variable) or a `.py` file (the whole answer cell, as a student might write it).
  The given code of an exercise is stored once, in the solutions notebook: the course solution and the release's
  cell are read from there, never kept as copies;
- `base` + `mutate`: a kernel that is another kernel with a few named changes — "a missing wait" is literally the
  solution with that wait deleted. `base` is "solution" (the solutions notebook's answer, nbgrader markers removed),
  a file name without a slash (a file of the topic's known answers: "plain_loads.cu"), a path with a slash,
  relative to the repository root ("kernels/pipeline/grading/known/rungs/block_scope.cu"), or the name of another
  known answer of the same expected.toml (no dot, no slash: "plain_loads"; its kernel, itself a file or a base with
  changes). `mutate` is a list of
  ["old text", "new text"] pairs applied in order to the base without its leading comment block; each old text
  must occur exactly once in the text it is applied to, so that an edit of the base under a mutation fails loudly
  (MutationError) instead of silently grading another kernel. The answer's source is the mutated text under a
  generated header: which answer it is, from which base, and its `about` (what changed and why it must score so).

Only the grader reads them: a topic's benchmark times known answers it is handed (autograder.benchmarks builds the
kernels.topic.Answers it runs with). The second half of this module grades them: the submission notebook is the
solutions notebook with that answer cell replaced, graded by the same code as the gradebook. Parts that cannot be
graded on this machine (no Hopper GPU) are reported, not compared.
"""

from __future__ import annotations

import copy
import json
import re
import textwrap
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from .spec import load
from .answers import _source, cells_by_grade_id, CODE_STUB, read_answer

if TYPE_CHECKING:
    from .grading import NotebookGrade

ROOT = Path(__file__).resolve().parents[1]
KERNELS = ROOT / "kernels"


def known_dir(slug: str) -> Path:
    """A topic's known answers (expected.toml, the kernels it names, rungs/): kernels/<slug>/grading/known/, in the
    day's folder, read only by the grader and left out of a student release."""
    return KERNELS / slug / "grading" / "known"


def known_cu_files() -> list[Path]:
    """Every known answer's own .cu file, of every topic (rungs/ included)."""
    return sorted(KERNELS.glob("*/grading/known/**/*.cu"))


def assistant_path(slug: str) -> Path:
    """The answer a coding assistant wrote from the release alone (kernels/<slug>/grading/assistant.cu)."""
    return KERNELS / slug / "grading" / "assistant.cu"
_MARKER = re.compile(r"^\s*###\s*(BEGIN|END)\s+SOLUTION\s*$")


def solution_literal(spec, answer_cell: str, var: str):
    """The answer `var` of the solutions notebook's cell `answer_cell`, read as the grader reads a student's
    (autograder.answers.read_answer); None if there is none."""
    nb = json.loads((ROOT / "solutions" / spec.assignment / spec.notebook).read_text())
    cell = cells_by_grade_id(nb).get(answer_cell)
    return None if cell is None else read_answer(_source(cell), var, answer_cell).value


class MutationError(ValueError):
    """A known answer's `mutate` does not apply to its base (an old text missing or repeated, or no change)."""


@dataclass
class KnownAnswer:
    name: str
    about: str
    source: str  # "solution", a file of the topic's folder, or for a mutated answer "<base> + N change(s)"
    expected: dict  # exercise part -> points
    status: str | None = None
    flags: list[str] = field(default_factory=list)
    exercise: str | None = None
    gpu_status: tuple[str, ...] = ()  # statuses allowed when the kernel really runs ("timeout": a hang by design)
    gpu_flags: list[str] = field(default_factory=list)  # flags that only a run on the GPU can raise
    base: str | None = None  # a mutated answer: the kernel it changes (see the module docstring)
    mutate: tuple[tuple[str, str], ...] = ()  # its changes, (old, new), applied in order
    path_static: float | None = None  # path points where only static evidence exists (no executed path measured)
    toml: str = "expected.toml"  # where it is declared, in the topic's submissions folder (RUNGS: a measured rung)


# Measured rungs of a lesson (an earlier answer, timed by the topic's benchmark, never graded) given as base + mutate,
# in the format of expected.toml without scores; a rung may also be a file, rungs/<name>.cu (rung_source).
RUNGS = "rungs/rungs.toml"


def known_answers(slug: str) -> list[KnownAnswer]:
    return _entries(slug, "expected.toml")


def rungs(slug: str) -> list[KnownAnswer]:
    """The measured rungs of the topic declared as base + mutate (RUNGS); none where it has no such file."""
    if not (known_dir(slug) / RUNGS).is_file():
        return []
    out = _entries(slug, RUNGS)
    for r in out:
        if r.base is None or r.expected:
            raise MutationError(f"{slug}/{RUNGS} [{r.name}]: a rung there is a base + mutate, with no scores")
    return out


def rung_source(slug: str, name: str) -> str:
    """A measured rung's CUDA source: an entry of RUNGS (its base with the changes) or the file rungs/<name>.cu."""
    for r in rungs(slug):
        if r.name == name:
            return answer_text(slug, r)
    path = known_dir(slug) / "rungs" / f"{name}.cu"
    if path.is_file():
        return path.read_text()
    raise KeyError(f"no rung {name!r} in kernels/{slug}/grading/known/rungs/")


def _entries(slug: str, toml: str) -> list[KnownAnswer]:
    with (known_dir(slug) / toml).open("rb") as f:
        data = tomllib.load(f)
    out = []
    for name, d in data.items():
        parts = {k: d[k] for k in ("correctness", "path", "throughput") if k in d}
        gs = d.get("gpu_status", ())
        base, mutate = d.get("base"), d.get("mutate")
        where = f"{slug}/{toml} [{name}]"
        if (base is None) != (mutate is None):
            raise MutationError(f"{where}: `base` and `mutate` go together (a base with no change is a copy: "
                                "name it with `source`)")
        if base is not None:
            if "source" in d:
                raise MutationError(f"{where}: give either `source` or `base` + `mutate`, not both")
            if not mutate or not all(isinstance(m, list) and len(m) == 2 and all(isinstance(s, str) for s in m)
                                     for m in mutate):
                raise MutationError(f"{where}: `mutate` must be a non-empty list of [\"old text\", \"new text\"]")
            source = f"{base} + {len(mutate)} change{'s' if len(mutate) > 1 else ''}"
        else:
            source = d["source"]
        out.append(KnownAnswer(name, d.get("about", ""), source, parts, d.get("status"), list(d.get("flags", [])),
                               d.get("exercise"), tuple([gs] if isinstance(gs, str) else gs),
                               list(d.get("gpu_flags", [])), base,
                               tuple((old, new) for old, new in mutate or ()), d.get("path_static"), toml))
    return out


def known_answer(slug: str, name: str) -> KnownAnswer:
    for ka in known_answers(slug):
        if ka.name == name:
            return ka
    raise KeyError(f"no known answer {name!r} in kernels/{slug}/grading/known/expected.toml")


def _exercise(spec, ka: KnownAnswer):
    return spec.exercises[ka.exercise] if ka.exercise else next(iter(spec.exercises.values()))


def names_answer(base: str) -> bool:
    """A `base` that names another known answer of the topic (no dot, no slash, not "solution")."""
    return base != "solution" and "/" not in base and "." not in base


def base_path(slug: str, base: str) -> Path:
    """Where a `base` lives: a file name without a slash in the topic's submissions folder, a path with one from the
    repository root, a known answer's name in the topic's expected.toml."""
    if names_answer(base):
        return known_dir(slug) / "expected.toml"
    return (known_dir(slug) / base) if "/" not in base else (ROOT / base)


def base_text(slug: str, ka: KnownAnswer, _chain: tuple[str, ...] = ()) -> str:
    """The base kernel of a mutated answer, without its leading comment block (the answer's header replaces it)."""
    if names_answer(ka.base):
        chain = _chain + (ka.name,)
        try:
            other = known_answer(slug, ka.base)
        except KeyError:
            raise MutationError(f"{slug}/{ka.name}: base {ka.base!r} is no known answer of {slug}") from None
        if other.name in chain:
            raise MutationError(f"{slug}/{ka.name}: bases go round in a circle: {' -> '.join(chain + (other.name,))}")
        if other.base is not None:
            text = apply_mutations(base_text(slug, other, chain), other.mutate, who=f"{slug}/{other.name}",
                                   base=other.base)
        elif other.source.endswith(".cu"):
            text = (known_dir(slug) / other.source).read_text()
        else:
            raise MutationError(f"{slug}/{ka.name}: base {ka.base!r} is not a kernel ({other.source})")
    elif ka.base == "solution":
        spec = load(slug)
        ex = _exercise(spec, ka)
        value = solution_literal(spec, ex.answer_cell, ex.answer_var)
        if not isinstance(value, str):
            raise MutationError(f"{slug}/{ka.name}: the solutions notebook's {ex.answer_cell} holds no "
                                f"{ex.answer_var} string literal to mutate")
        text = "".join(line for line in value.splitlines(keepends=True) if not _MARKER.match(line))
    else:
        path = base_path(slug, ka.base)
        if not path.is_file():
            raise MutationError(f"{slug}/{ka.name}: base {ka.base!r} is not a file ({path})")
        text = path.read_text()
    lines = text.splitlines(keepends=True)
    while lines and (lines[0].startswith("//") or not lines[0].strip()):
        lines.pop(0)
    return "".join(lines)


def apply_mutations(text: str, mutations, *, who: str = "answer", base: str = "its base") -> str:
    """`text` with each (old, new) applied in order. Every old text must occur exactly once in the text it is
    applied to; a change that changes nothing, or changes that cancel out, are errors too."""
    if not mutations:
        raise MutationError(f"{who}: no changes to {base}")
    out = text
    for i, (old, new) in enumerate(mutations, 1):
        if not old:
            raise MutationError(f"{who}: change {i} has an empty old text")
        if old == new:
            raise MutationError(f"{who}: change {i} changes nothing (old text = new text: {old!r})")
        n = out.count(old)
        if n != 1:
            raise MutationError(f"{who}: change {i}'s old text occurs {n} times in {base}"
                                f"{' (after changes 1..' + str(i - 1) + ')' if i > 1 else ''}, "
                                f"it must occur exactly once: {old!r}")
        out = out.replace(old, new)
    if out == text:
        raise MutationError(f"{who}: the changes leave {base} as it was")
    return out


def _header(slug: str, ka: KnownAnswer) -> str:
    n = len(ka.mutate)
    base = "the solution (the solutions notebook's answer)" if ka.base == "solution" else ka.base
    what = "Known answer" if ka.toml == "expected.toml" else "Measured rung"
    first = (f'{what} "{ka.name}" = {base} with {n} change{"s" if n > 1 else ""} '
             f"(kernels/{slug}/grading/known/{ka.toml}): {ka.about}.")
    lines = textwrap.wrap(first, 117, break_on_hyphens=False)
    if ka.expected:
        lines.append("Expected: " + ", ".join(f"{part} {points:g}" for part, points in ka.expected.items()) + ".")
    return "".join(f"// {line}\n" for line in lines)


def answer_text(slug: str, ka: KnownAnswer) -> str | None:
    """The answer as it goes into the answer cell: a kernel's CUDA source, or a `.py` answer cell's whole text;
    None for "solution" (the solutions notebook's own cell)."""
    if ka.base is not None:
        body = apply_mutations(base_text(slug, ka), ka.mutate, who=f"{slug}/{ka.name}", base=ka.base)
        return _header(slug, ka) + body
    if ka.source == "solution":
        return None
    if ka.source == "release":
        return release_cell(slug, ka.exercise)
    return (known_dir(slug) / ka.source).read_text()


def release_cell(slug: str, exercise: str | None = None) -> str:
    """The answer cell of the day's exercise as the student release hands it out: the solutions notebook's cell
    through nbgrader's own ClearSolutions with the course's stub (what `make weeks` writes into weeks/), the given code
    with the stub where the answer goes."""
    import nbformat
    from nbgrader.preprocessors import ClearSolutions


    spec = load(slug)
    ex = spec.exercises[exercise] if exercise else next(iter(spec.exercises.values()))
    nb = nbformat.reads((ROOT / "solutions" / spec.assignment / spec.notebook).read_text(), as_version=4)
    cell = copy.deepcopy(cells_by_grade_id(nb)[ex.answer_cell])
    cell, _ = ClearSolutions(code_stub=CODE_STUB).preprocess_cell(cell, {"language": "python"}, 0)
    return cell.source


def solution_kernel(slug: str, exercise: str | None = None) -> str:
    """The course solution as CUDA: the solutions notebook's answer, its nbgrader markers removed (what a mutated
    known answer with base "solution" starts from, and what compiles)."""
    return "".join(line for line in course_solution(slug, exercise).splitlines(keepends=True)
                   if not _MARKER.match(line))


def course_solution(slug: str, exercise: str | None = None) -> str:
    """The course solution of a day's exercise: the answer cell of its solutions notebook (whatever its known answer
    is called: "solution" on most days, "correct" on day 1)."""
    spec = load(slug)
    ex = spec.exercises[exercise] if exercise else next(iter(spec.exercises.values()))
    return solution_literal(spec, ex.answer_cell, ex.answer_var)


def kernel_source(slug: str, name: str) -> str:
    """The CUDA source of a known answer given as a kernel (a `.cu` file, a base with changes, or the solutions
    notebook's cell: solution_kernel); "solution": the course solution as the notebook has it (course_solution, its
    nbgrader markers in place: the lines the understanding checks number), on every day."""
    if name == "solution":
        return course_solution(slug)
    ka = known_answer(slug, name)
    if ka.base is None and ka.source == "solution":  # the solutions notebook's answer cell, as CUDA (no markers)
        return solution_kernel(slug, ka.exercise)
    if ka.base is None and not ka.source.endswith(".cu"):
        raise ValueError(f"{slug}/{name} is not a kernel of its own ({ka.source})")
    return answer_text(slug, ka)


# --- grading them ----------------------------------------------------------------------------------------------

def answer_cell_source(slug: str, ka: KnownAnswer, var: str) -> str | None:
    text = answer_text(slug, ka)
    if text is None:
        return None
    if ka.base is None and (ka.source.endswith(".py") or ka.source == "release"):
        return text
    return f'{var} = r"""\n{text}"""\n'


def submission_notebook(slug: str, ka: KnownAnswer) -> dict:
    from .grading import solution_notebook

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
    from .grading import grade_notebook

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
