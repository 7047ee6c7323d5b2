"""Staging a hand-in: what of a student's folder a task grades, and under which names.

The task grades copies (stage_submission): the notebooks the assignment expects, found under their own names or,
when one candidate stands out, under a browser's or an unzipper's (`day1_naive_loads (1).ipynb`, a sub-folder),
named in the notes; a notebook that is not valid JSON is left out (scored 0, its parse error kept); several copies
and none under its name, or a notebook in another week's folder, are named with where they belong and not graded
(misplaced_hand_ins: a student with no folder of the week at all). The student's folder is only read.
"""

from __future__ import annotations

import json
import re
import shutil
import sqlite3
from pathlib import Path

from .release import ROOT
from .students import shown_name, student_id
from .answers import _source, cells_by_grade_id, read_answer
from .spec import all_specs


def notebook_problem(path: Path) -> str | None:
    """Why a file is not a valid notebook (nbformat), or None."""
    import nbformat

    try:
        nbformat.validate(nbformat.read(str(path), as_version=4))
    except Exception as exc:  # noqa: BLE001 - any reading error is the student's malformed file
        return f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}"
    return None


def set_aside_malformed(folder: Path) -> list[str]:
    """The notebooks of `folder` that are not valid nbformat JSON, as "<name>: why". Nothing is renamed (the grader
    never touches a student's files: it grades copies, stage_submission)."""
    return [f"{nb.name}: {why}" for nb in sorted(Path(folder).glob("*.ipynb")) if (why := notebook_problem(nb))]


malformed_notebooks = set_aside_malformed

_COPY_SUFFIX = re.compile(r"(\s*\(\d+\)|[\s_-]*-?\s*copy\d*|-Copy\d+)+$", re.I)


def _base_name(name: str) -> str:
    """`day1_naive_loads (1).ipynb`, `day1_naive_loads-Copy1.ipynb`, `Day1_naive_loads copy.ipynb` -> day1_naive_loads"""
    stem = name[:-len(".ipynb")] if name.lower().endswith(".ipynb") else name
    while stem.lower().endswith(".ipynb"):
        stem = stem[:-len(".ipynb")]
    return _COPY_SUFFIX.sub("", stem.strip()).strip().lower()


def expected_notebooks(template: Path, week: str) -> list[str]:
    """The notebook file names of `week` in a gradebook (the batch's template)."""
    con = sqlite3.connect(f"file:{template}?mode=ro", uri=True)
    try:
        rows = con.execute("select n.name from notebook n join assignment a on n.assignment_id = a.id "
                           "where a.name = ?", (week,)).fetchall()
    finally:
        con.close()
    return sorted(f"{r[0]}.ipynb" for r in rows)


def part_notebooks(expected: list[str], part: tuple[int, list] | None) -> list[str]:
    """The notebooks part (i, split) of a hand-in grades: split[i] (lists of notebook names, one per part), and in
    part 0 every expected notebook that no part names, so that the parts cover the week once whatever `split` says.
    No part, or a split of one: all of them."""
    if not part or len(part[1]) <= 1:
        return sorted(expected)
    i, split = part
    if not 0 <= i < len(split):
        raise ValueError(f"part {i} of {len(split)}: no such part")
    named = {n for names in split for n in names}
    return sorted(n for n in expected if n in split[i] or (i == 0 and n not in named))


def hand_in_work(folder: Path, week: str) -> dict[str, float]:
    """{week notebook: its graded exercises the hand-in attempted} — what grading it will cost on the GPU, read
    without running anything (autograder.answers: a kernel answer that is a string and not the stub). A notebook
    found under another name or in a sub-folder counts as stage_submission would grade it; one not readable as
    0."""
    specs = {s.notebook: s for s in all_specs() if s.assignment == week}
    every = _notebooks_under(folder)
    work = {}
    for name in week_notebooks(week):
        src = folder / name
        if not src.is_file():
            cands = _candidates(every, name)
            if len(cands) != 1:
                continue
            src = cands[0]
        try:  # plain JSON, not validated: an estimate, read for every hand-in before the class is graded
            cells = cells_by_grade_id(json.loads(src.read_bytes()))
        except (OSError, ValueError, TypeError, KeyError, AttributeError):  # not readable: costs nothing to grade
            work[name] = 0.0
            continue
        spec = specs.get(name)
        work[name] = float(sum(1 for ex in (spec.exercises.values() if spec else ())
                               if (c := cells.get(ex.answer_cell)) is not None
                               and (a := read_answer(_source(c), ex.answer_var)).attempted
                               and isinstance(a.value, str)))
    return work


def week_notebooks(week: str) -> list[str]:
    """The notebook file names of `week`, from the nbgrader sources (solutions/<week>/*.ipynb)."""
    return sorted(f"{b}.ipynb" for b, w in notebook_weeks().items() if w == week)


def notebook_weeks() -> dict[str, str]:
    """Which week each course notebook belongs to, by base name (`_base_name`): the nbgrader source folders,
    solutions/<week>/*.ipynb ("day1_naive_loads" -> "week1")."""
    return {_base_name(p.name): p.parent.name for p in sorted((ROOT / "solutions").glob("*/*.ipynb"))}


def _candidates(every: list[Path], name: str, used=()) -> list[Path]:
    """The notebooks of a hand-in (`every`, _notebooks_under) that may stand for the expected `name`: the same base
    name (a copy suffix, another case, a sub-folder), not already taken (`used`)."""
    want = _base_name(name)
    return [p for p in every if _base_name(p.name) == want and p not in used]


def _notebooks_under(folder: Path) -> list[Path]:
    """Every notebook file under `folder`, sub-folders included, checkpoints left out."""
    return [p for p in sorted(Path(folder).rglob("*.ipynb*")) if p.is_file() and ".ipynb_checkpoints" not in p.parts
            and p.name.lower().endswith(".ipynb")]


def _elsewhere(folder: Path, want: str) -> list[Path]:
    """The student's notebooks named like `want` (a base name) in their other folders (another week's: a week-1
    notebook handed in under week2/)."""
    folder = Path(folder)
    if not folder.parent.is_dir():
        return []
    return [p for d in sorted(folder.parent.iterdir()) if d.is_dir() and d != folder
            for p in _notebooks_under(d) if _base_name(p.name) == want]


def stage_submission(folder: Path, dest: Path, expected: list[str], week: str
                     ) -> tuple[list[str], list[str], list[str]]:
    """Copy what nbgrader grades of a student's hand-in into `dest`, under the names the assignment expects; the
    student's folder is only read. A notebook missing at the top of the folder is looked for under another name
    (`day1_naive_loads (1).ipynb`, `...-Copy1.ipynb`) and in sub-folders (an unzipped hand-in): one candidate is
    graded in its place and named in the notes; several are named and none graded. One found only in another week's
    folder is named with where it belongs and not graded (it is moved by the student, not guessed by the grader); a
    notebook of another week in this week's folder is named with the folder it belongs in.
    Returns (notes, malformed, ungraded): malformed = "<name>: why" for each notebook that is not valid nbformat
    (scored 0, the parse error kept); ungraded = "<name>: why" for each expected notebook that was handed in but not
    graded as placed (several copies, another week's folder)."""
    folder, dest = Path(folder), Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    notes, malformed, ungraded, used = [], [], [], set()
    every = _notebooks_under(folder)
    student = folder.parent.name
    rel = lambda p: str(p.relative_to(folder.parent))  # noqa: E731 - "week1/course-week1/x.ipynb"
    for name in expected:
        src = folder / name
        if not src.is_file():
            want = _base_name(name)
            cands = _candidates(every, name, used)
            if not cands:
                for p in _elsewhere(folder, want)[:1]:
                    notes.append(f"no {name}; found {p.name} in {Path(rel(p)).parent}/: it is a {week} notebook — "
                                 f"move it to {student}/{week}/ (not graded)")
                    ungraded.append(f"{name}: found in {Path(rel(p)).parent}/, not in {week}/ — move it to "
                                    f"{student}/{week}/")
                continue
            if len(cands) > 1:
                found = ", ".join(repr(rel(p)) for p in cands)
                notes.append(f"no {name}; found several candidates ({found}): none graded — hand in one, named "
                             f"{name}, at the top of {week}/")
                ungraded.append(f"{name}: several copies and none named {name} ({found}): none graded — hand in "
                                f"one, named {name}, at the top of {week}/")
                continue
            src = cands[0]
            where = f"found {rel(src)!r}" if src.parent == folder else f"found it under {rel(src)}"
            notes.append(f"no {name}; {where} — graded it as {name}; rename it / move it to the top of {week}/ "
                         "next time")
        used.add(src)
        why = notebook_problem(src)
        if why:
            malformed.append(f"{name}: {why}")
            continue
        shutil.copy2(src, dest / name)
    weeks, named = notebook_weeks(), {_base_name(n) for n in expected}
    for p in sorted(folder.iterdir()):
        if p.is_file() and not p.name.lower().endswith(".ipynb"):
            shutil.copy2(p, dest / p.name)  # timestamp.txt and the like
        elif p.is_file() and p not in used and p.name not in expected and _base_name(p.name) not in named:
            other = weeks.get(_base_name(p.name))
            notes.append(f"{p.name} is a {other} notebook, found in {week}/: move it to {student}/{other}/"
                         if other and other != week else
                         f"{p.name}: not a notebook of {week} (expected: {', '.join(expected)}); ignored")
    # names of folders and files as a person reads them (a byte that is not UTF-8 as \xe9): these lines are printed,
    # recorded in JSON and shown in HTML
    return [shown_name(n) for n in notes], [shown_name(m) for m in malformed], [shown_name(u) for u in ungraded]


def misplaced_hand_ins(submitted: Path, week: str, skip) -> dict[str, dict]:
    """Students with no <week>/ folder who handed in a notebook of `week` in another week's folder (`skip`: the
    students graded anyway). Their batch entries: not graded — nothing of `week` was handed in where it belongs —
    and each such notebook named with where it was found and where it belongs."""
    mine = {b for b, w in notebook_weeks().items() if w == week}
    out = {}
    skip = set(skip)
    for d in sorted(p for p in Path(submitted).glob("*") if p.is_dir()):
        sid = student_id(d.name)  # the batch record is keyed by id (autograder.students)
        if sid is None or sid in skip or (d / week).exists():
            continue
        found = [p for p in _notebooks_under(d) if _base_name(p.name) in mine]
        if not found:
            continue
        where = [f"{p.name} in {p.parent.relative_to(d)}/" for p in found]
        out[sid] = {"returncode": None, "no_submission": True,
                    "notes": [shown_name(f"no submission; found {w}: it is a {week} notebook — move it to "
                                         f"{d.name}/{week}/ (not graded)") for w in where],
                    "ungraded": [shown_name(f"{_base_name(p.name)}.ipynb: found in {p.parent.relative_to(d)}/, not "
                                            f"in {week}/ — move it to {d.name}/{week}/") for p in found]}
    return out
