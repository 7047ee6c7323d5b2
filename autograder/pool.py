"""Grading a class: one task per student, each into a gradebook of its own; one writer merges.

    grade_task(week, student, out, submitted=..., template=...)   one student in its own folder (a pool worker's
                                                                  task, and a Slurm array task's: autograder.slurm)
    merge_result(out, grading)                                    the single writer: that folder's gradebook rows,
                                                                  autograded notebooks and verdicts into the class's
    run_pool(week, students, lanes, ...)                          one worker per GPU lane, on this host

A task is `nbgrader autograde --student=<id>` with COURSE_GRADING_DIR pointing at the task's folder (the course's
nbgrader_config.py puts the gradebook, the autograded notebooks and the plugin's verdicts there) and the class's
submitted folder passed as `--CourseDirectory.submitted_directory`. Its gradebook starts as a copy of a template
that `nbgrader generate_assignment` wrote (the assignment, its notebooks and cells, no student; once per content of
the week's sources: `assignment_template`), so nothing but the task writes it, and no task waits on another's lock.
The task's last act is `result.json` ("state": "done" or "failed"); a task that died before writing it left no
result, and its folder is ignored.

The task grades copies (stage_submission): the notebooks the assignment expects, found under their own names or,
when one candidate stands out, under a browser's or an unzipper's (`day1_naive_loads (1).ipynb`, a sub-folder),
named in the notes; a notebook that is not valid JSON is left out (scored 0, its parse error kept); several copies
and none under its name, or a notebook in another week's folder, are named with where they belong and not graded
(misplaced_hand_ins: a student with no folder of the week at all). The student's folder is only read.

A pool worker owns one GPU (CUDA_VISIBLE_DEVICES of its own), measures that GPU's ceilings and the course
references before its first student (`prepare_lane`, in a process that loads no student code), and grades its
students one after another. A task that fails — its process crashed, nbgrader failed, the GPU stopped answering —
is handed back once, to another worker where there is one; a second failure is reported as "not graded, retry".
A worker whose GPU fails a health check, or whose grading process died for two students in a row, stops taking
students.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from kernels.paths import write_whole

from .release import ROOT, grading_dir, nbgrader
from .students import shown_name, student_id, submission_folder

RESULT = "result.json"
STARTED = "started.json"
# Test hooks of the pool's own tests (tests/test_pool.py). COURSE_POOL_TEST_CRASH: comma-separated "lane:<id>"
# (every task on that lane), "first:<student>" (that student's first attempt), "always:<student>": the task process
# dies (SIGKILL) before it grades. COURSE_POOL_TEST_WEDGED: comma-separated lane ids whose GPU "does not answer".
TEST_CRASH = "COURSE_POOL_TEST_CRASH"
TEST_WEDGED = "COURSE_POOL_TEST_WEDGED"


# ------------------------------------------------------------------------------------------------ one student
def _atomic_json(path: Path, data: dict) -> None:
    write_whole(path, json.dumps(data, indent=1, default=str))  # whole or not at all


def _slurm_ids() -> dict:
    keys = {"job": "SLURM_JOB_ID", "array_job": "SLURM_ARRAY_JOB_ID", "array_task": "SLURM_ARRAY_TASK_ID"}
    return {k: os.environ[v] for k, v in keys.items() if os.environ.get(v)}


def _hook_items(var: str) -> set[str]:
    return {x.strip() for x in os.environ.get(var, "").split(",") if x.strip()}


def _in_hook(var: str, lane: str | None) -> bool:
    return lane is not None and lane in _hook_items(var)


def _crash_hook(lane: str | None, student: str, attempt: int) -> bool:
    items = _hook_items(TEST_CRASH)
    return (lane is not None and f"lane:{lane}" in items) or f"always:{student}" in items \
        or (attempt == 0 and f"first:{student}" in items)


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
    never touches a student's files: it grades copies, autograder.pool.stage_submission)."""
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
    import sqlite3

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
    import nbformat

    from .answers import _source, cells_by_grade_id, read_answer
    from .spec import all_specs

    specs = {s.notebook: s for s in all_specs() if s.assignment == week}
    every = _notebooks_under(folder)
    work = {}
    for name in week_notebooks(week):
        src = folder / name
        if not src.is_file():
            cands = [p for p in every if _base_name(p.name) == _base_name(name)]
            if len(cands) != 1:
                continue
            src = cands[0]
        try:
            cells = cells_by_grade_id(nbformat.read(str(src), as_version=4))
        except Exception:  # noqa: BLE001 - a notebook that is not readable costs nothing to grade
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
            cands = [p for p in every if _base_name(p.name) == want and p not in used]
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


def grade_task(week: str, student: str, out: Path, *, submitted: Path, template: Path, lane: str | None = None,
               batch_dir: Path | None = None, timeout: float | None = None, attempt: int = 0,
               figures: dict | None = None, here: bool = False, part: tuple[int, list] | None = None) -> dict:
    """Grade one student into `out` (emptied first): gradebook.db (a copy of `template`), autograded/, verdicts/,
    result.json. The secret seed comes from COURSE_SECRET_SEED in the environment. here=True (a pool task: this
    process grades this one student and nothing else): nbgrader's autograde runs in this process instead of one of
    its own (`release.nbgrader(here=True)`; the notebook still runs in a Jupyter kernel of its own), unless a
    `timeout` asks for a process that can be killed.

    part=(i, split), several parts: only part i of the hand-in (`part_notebooks`), so that one long hand-in is graded
    on several lanes at once. The whole hand-in is staged as always (its notes
    are the same in every part); the other parts' notebooks are then left out of what nbgrader sees, and the result
    names the part's notebooks: merge_result takes only their grades, notebooks and verdicts."""
    from nbgrader.api import Gradebook, MissingEntry

    t0 = time.perf_counter()
    out = Path(out)
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    info = {"student": student, "week": week, "lane": lane, "host": socket.gethostname(), "pid": os.getpid(),
            "gpu": os.environ.get("CUDA_VISIBLE_DEVICES"), "slurm": _slurm_ids(), "attempt": attempt,
            "figures": figures or {}, "started_at": time.time(), "process_born": _BORN}
    _atomic_json(out / STARTED, info)
    if _crash_hook(lane, student, attempt):
        os.kill(os.getpid(), signal.SIGKILL)
    folder = submission_folder(submitted, student, week)
    staged = out / "submitted"
    notes, malformed, ungraded = [], [], []
    expected = expected_notebooks(template, week)
    mine = part_notebooks(expected, part)
    if folder.is_dir():
        notes, malformed, ungraded = stage_submission(folder, staged / student / week, expected, week)
        for nb in (staged / student / week).glob("*.ipynb"):
            if nb.name not in mine:  # another part's
                nb.unlink()
    shutil.copy(template, out / "gradebook.db")
    url = f"sqlite:///{out / 'gradebook.db'}"
    log = ""
    if _in_hook(TEST_WEDGED, lane):
        rc, log = 1, "CUDA error: the GPU does not answer (test hook: wedged lane)"
    elif not folder.is_dir():
        rc, log = 1, f"no submission folder {folder}"
    elif not any((staged / student / week).glob("*.ipynb")):  # nothing gradable: an honest 0, no nbgrader
        import warnings

        from sqlalchemy.exc import SAWarning

        with warnings.catch_warnings(), Gradebook(url) as gb:
            warnings.simplefilter("ignore", SAWarning)
            gb.update_or_create_student(student)
            gb.add_submission(week, student)
        rc, log = 0, "no notebook to grade (none handed in, or every one malformed): scored 0"
    else:
        env = dict(os.environ, COURSE_GRADING_DIR=str(out), COURSE_BATCH_DIR=str(batch_dir or out / "batch"))
        try:
            res = nbgrader("autograde", week, f"--student={student}", "--force",
                           f"--CourseDirectory.submitted_directory={staged.resolve()}", env=env,
                           check=False, timeout=timeout, here=here and timeout is None)
            rc, log = res.returncode, (res.stderr or "")[-4000:]
        except subprocess.TimeoutExpired:
            rc, log = 124, f"nbgrader autograde did not finish in {timeout:.0f} s: killed"
    if rc == 0:
        with Gradebook(url) as gb:
            try:
                gb.find_submission(week, student)
            except MissingEntry:
                rc, log = 1, log + "\nnbgrader exited 0 but wrote no submission for the student"
    # The staged copies were nbgrader's to read: the task folder keeps their digests, not a second copy of the hand-in.
    drop_copies(staged, out / "submitted.json", source=shown_name(str(folder)))
    result = {**info, "state": "done" if rc == 0 else "failed", "returncode": rc,
              "wall_s": time.perf_counter() - t0, "finished_at": time.time(), "malformed": malformed,
              "ungraded": ungraded, "notes": notes, "permanent": not folder.is_dir(), "log_tail": log[-1500:],
              "part": [part[0], len(part[1])] if part and len(part[1]) > 1 else None,
              "notebooks": mine if part and len(part[1]) > 1 else None}
    _atomic_json(out / RESULT, result)
    return result


def file_digests(folder: Path, skip=()) -> dict[str, dict]:
    """{relative path: {"bytes", "sha256"}} of every file under `folder` (sorted; parts named in `skip` left out):
    what a hand-in or a task's notebooks were, by content."""
    files = {}
    for f in sorted(p for p in Path(folder).rglob("*") if p.is_file() and not set(skip) & set(p.parts)):
        h = hashlib.sha256()
        with f.open("rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):  # noqa: B023 - read now, in this iteration
                h.update(chunk)
        files[f.relative_to(folder).as_posix()] = {"bytes": f.stat().st_size, "sha256": h.hexdigest()}
    return files


def drop_copies(folder: Path, manifest: Path, **about) -> None:
    """Replace the files under `folder` (a task's staged hand-in, or its autograded notebooks once merged) by their
    sizes and sha256 digests in `manifest` (JSON, with `about`): a kept batch folder names what was graded by content
    instead of holding a copy of every hand-in (a 100 MB notebook, five runs kept: 500 MB). No folder: nothing."""
    if not Path(folder).is_dir():
        return
    _atomic_json(manifest, {**about, "files": file_digests(folder)})
    shutil.rmtree(folder)


def _link_or_copy(src: str, dst: str) -> None:
    """A hard link where the file system allows (the same data, no second copy), else a copy."""
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def read_result(out: Path) -> dict | None:
    """The task's result, or None when it wrote none (it crashed, was killed, or never ran)."""
    try:
        data = json.loads((Path(out) / RESULT).read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def result_digest(out: Path) -> str:
    """What identifies one task's result: its result.json and gradebook bytes."""
    h = hashlib.sha256()
    for name in (RESULT, "gradebook.db"):
        p = Path(out) / name
        h.update(p.read_bytes() if p.exists() else b"")
    return h.hexdigest()[:20]


# ------------------------------------------------------------------------------------------ the single writer
def merge_result(out: Path, grading: Path | None = None, move: bool = False) -> dict:
    """Write one finished task into the class's grading folder — the only writer of its gradebook. Replaces, never
    adds: the student's submission row is found or created, and each grade and comment of each notebook (keyed by
    assignment, student, notebook and cell) takes the task's value; a manual score already given is kept. The
    task's autograded notebooks and verdicts replace the student's (hard links where the file system allows).
    move=True (a pool task, merged once): the task folder then keeps the autograded notebooks' digests instead of
    the notebooks (`drop_copies`), so an old batch folder holds no copy of a hand-in. Running it twice changes
    nothing (a kind already moved out is left as the class has it)."""
    from nbgrader.api import Gradebook, MissingEntry

    import warnings

    from sqlalchemy.exc import SAWarning

    grading = Path(grading or grading_dir())
    res = read_result(out)
    if res is None or res.get("state") != "done":
        raise ValueError(f"{out}: no finished result to merge")
    week, student = res["week"], res["student"]
    only = {Path(n).stem for n in res["notebooks"]} if res.get("notebooks") is not None else None
    others = {Path(n).stem for n in week_notebooks(week)}
    # nbgrader's add_submission warns under SQLAlchemy 2 about its own relationship cascade; the rows are right.
    with warnings.catch_warnings(), Gradebook(f"sqlite:///{Path(out) / 'gradebook.db'}") as src, \
            Gradebook(f"sqlite:///{grading / 'gradebook.db'}") as dst:
        warnings.simplefilter("ignore", SAWarning)
        s = src.find_submission(week, student)
        dst.update_or_create_student(student)
        try:
            d = dst.find_submission(week, student)
        except MissingEntry:
            d = dst.add_submission(week, student)
        d.timestamp, d.extension = s.timestamp, s.extension
        for nb in s.notebooks:
            if only is not None and nb.name not in only:
                continue  # another part's notebook: that part's task has its grades
            dnb = dst.find_submission_notebook(nb.name, week, student)
            dnb.flagged, dnb.late_submission_penalty = nb.flagged, nb.late_submission_penalty
            for g in nb.grades:
                dg = dst.find_grade(g.name, nb.name, week, student)
                dg.auto_score, dg.needs_manual_grade = g.auto_score, g.needs_manual_grade
                if g.manual_score is not None:
                    dg.manual_score = g.manual_score
            for c in nb.comments:
                dst.find_comment(c.name, nb.name, week, student).auto_comment = c.auto_comment
        dst.db.commit()
    for kind in ("autograded", "verdicts"):
        src_dir = Path(out) / kind / student / week
        dst_dir = grading / kind / student / week
        if not src_dir.exists() and (Path(out) / f"{kind}.json").exists():
            continue  # merged before, with move=True
        if only is not None:
            _merge_part_files(src_dir, dst_dir, only, others)
            continue
        tmp = dst_dir.with_name(f".{week}.merging")
        if tmp.exists():
            shutil.rmtree(tmp)
        if src_dir.is_dir():
            shutil.copytree(src_dir, tmp, copy_function=_link_or_copy)
        if dst_dir.exists():
            shutil.rmtree(dst_dir)
        if tmp.exists():
            tmp.rename(dst_dir)
    if move:
        drop_copies(Path(out) / "autograded", Path(out) / "autograded.json", merged_into=str(grading / "autograded"))
    return res


def _merge_part_files(src_dir: Path, dst_dir: Path, stems: set[str], others: set[str]) -> None:
    """One part's autograded notebooks or verdicts into the student's folder: the files of the part's notebooks
    (`<stem>.ipynb`, `<stem>.json`) replace the student's — one the part no longer has is removed — and the
    hand-in's other files (the same in every part: timestamp.txt) are linked in; the files of the other parts'
    notebooks (`others`) stay as they are."""
    dst_dir.mkdir(parents=True, exist_ok=True)
    for f in list(dst_dir.iterdir()):
        if f.is_file() and f.stem in stems:
            f.unlink()
    for f in sorted(src_dir.iterdir()) if src_dir.is_dir() else []:
        if not f.is_file() or f.stem in others - stems:
            continue
        target = dst_dir / f.name
        if target.exists():
            target.unlink()
        _link_or_copy(str(f), str(target))


def gradebook_rows(grading: Path, week: str) -> dict[tuple[str, str, str], float | None]:
    """Every grade of a week in the class's gradebook: (student, notebook, cell) -> score (for tests and checks)."""
    from nbgrader.api import Gradebook

    rows = {}
    with Gradebook(f"sqlite:///{Path(grading) / 'gradebook.db'}") as gb:
        for sub in gb.assignment_submissions(week):
            for nb in sub.notebooks:
                for g in nb.grades:
                    rows[(sub.student.id, nb.name, g.name)] = g.score
    return rows


# ------------------------------------------------------------------------------------------------ batch set-up
def _assignment_key(week: str) -> str:
    """What nbgrader's generate_assignment of `week` reads: the week's source folder, the course's nbgrader config
    (and the stub line it imports), nbgrader's and nbconvert's versions."""
    import nbconvert
    import nbgrader as nbg

    from .release import CONFIG

    h = hashlib.sha256()
    stub = (ROOT / "autograder" / "__init__.py").read_text()
    for part in (nbg.__version__, nbconvert.__version__, CONFIG.read_text(), stub):
        h.update(part.encode() + b"\0")
    source = ROOT / "solutions" / week
    for f in sorted(p for p in source.rglob("*") if p.is_file()):
        h.update(str(f.relative_to(source)).encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()[:24]


def _generated(week: str) -> Path:
    """nbgrader's generate_assignment of `week` into an empty gradebook, once per content of what it reads
    (`_assignment_key`), cached under $COURSE_CACHE_DIR/nbgrader/<week>-<key>/: template.db (the assignment, its
    notebooks, cells and checksums, no student) and release/<week>/ (the notebooks it releases)."""
    from kernels.paths import cache_dir, made_once

    def generate(tmp: Path) -> None:
        tmp.mkdir()
        nbgrader("generate_assignment", week, "--force", f"--CourseDirectory.db_url=sqlite:///{tmp / 'template.db'}",
                 f"--CourseDirectory.release_directory={tmp / 'release'}")

    # One writer: a second process (a parallel grading run, a test worker) waits for the first's output instead of
    # generating its own.
    return made_once(cache_dir("nbgrader") / f"{week}-{_assignment_key(week)}", generate)


def assignment_template(week: str) -> Path:
    """A gradebook holding the assignment and no student, written by nbgrader itself (`_generated`): the batches of
    one course version, and the test runs' many small classes, share one generate_assignment."""
    return _generated(week) / "template.db"


def assignment_release(week: str) -> Path:
    """The notebooks generate_assignment releases for `week` from the current sources (`_generated`): what weeks/<week>
    must hold."""
    return _generated(week) / "release" / week


def make_template(week: str, batch: Path) -> Path:
    """The batch's template gradebook (every task starts from a copy): `assignment_template`, copied in whole (made
    once: a folder that holds one already keeps it, as a Slurm submission's folder per sources key does)."""
    from kernels.paths import made_once

    batch.mkdir(parents=True, exist_ok=True)
    return made_once(batch / "template.db", lambda tmp: shutil.copy(assignment_template(week), tmp))


def class_assignment(week: str, grading: Path) -> None:
    """Make the class gradebook know `week` as generate_assignment writes it. An absent gradebook starts as a copy of
    the template; one that last had the week generated from the same sources (a stamp beside it) and still holds it
    is left as it is; otherwise nbgrader's generate_assignment updates it."""
    key = _assignment_key(week)
    db, stamp = grading / "gradebook.db", grading / f".assignment_{week}"
    if not db.exists():
        grading.mkdir(parents=True, exist_ok=True)
        shutil.copy(assignment_template(week), db)
    elif not (stamp.exists() and stamp.read_text() == key and expected_notebooks(db, week)):
        nbgrader("generate_assignment", week, "--force", f"--CourseDirectory.release_directory={grading / 'release'}")
    stamp.write_text(key)


def prepare_lane(week: str, batch_dir: Path, env: dict | None = None) -> dict:
    """The trusted figures of one GPU for the batch, measured in a process of their own that loads no student code
    (autograder.harness.prepare_batch with this lane's CUDA_VISIBLE_DEVICES and COURSE_BATCH_DIR). Returns
    {"device", "ceilings"} ({} on a machine that grades on CPU)."""
    e = dict(os.environ if env is None else env, COURSE_BATCH_DIR=str(batch_dir))
    e["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, e.get("PYTHONPATH", "").split(os.pathsep))])
    r = run_child([sys.executable, "-m", "autograder.pool", "prepare", week], env=e, timeout=1800)
    if r.returncode != 0:
        raise RuntimeError(f"the trusted baseline failed: {(r.stderr or r.stdout)[-1500:]}")
    return lane_figures(batch_dir)


def lane_figures(batch_dir: Path) -> dict:
    """The device and ceilings a lane's baseline files hold (the same for every exercise of the batch)."""
    for f in sorted(Path(batch_dir).glob("baseline_*.json")):
        try:
            b = json.loads(f.read_text())
        except (OSError, ValueError):
            continue
        return {"device": b.get("device"), "ceilings": b.get("ceilings")}
    return {}


def _prepare_here(week: str) -> None:
    from .grading import reference_sources
    from .harness import _wants_gpu, prepare_batch
    from .spec import all_specs

    if not _wants_gpu(None):
        print("no Hopper GPU here: no baseline to measure (grading on CPU)")
        return
    items = [(s.slug, name, src) for s in all_specs() if s.assignment == week
             for name, src in reference_sources(s).items()]
    prepare_batch(items, progress=lambda what: print(f"trusted {what}", flush=True))


# A fresh process's check that a GPU answers: 4 MB allocated, filled with 1.0f, synchronized and read back. Through
# the driver API (cuda.bindings, which cuda-core brings), not torch: a process that imports torch and makes its
# context takes seconds, and the check is on a lane's set-up path before its baselines. torch only where
# cuda.bindings is missing.
_HEALTH_CHECK = """
import sys
try:
    from cuda.bindings import driver as d
except ImportError:
    import torch
    x = torch.ones(1 << 20, device="cuda"); torch.cuda.synchronize()
    assert float(x.sum()) == float(1 << 20)
    sys.exit(0)
import numpy as np

def ok(r):
    err, rest = (r[0], r[1:]) if isinstance(r, tuple) else (r, ())
    if err != d.CUresult.CUDA_SUCCESS:
        sys.exit(f"the GPU does not answer: {getattr(err, 'name', err)}")
    return rest

n = 1 << 20
ok(d.cuInit(0))
(dev,) = ok(d.cuDeviceGet(0))
(ctx,) = ok(d.cuDevicePrimaryCtxRetain(dev))
ok(d.cuCtxSetCurrent(ctx))
(ptr,) = ok(d.cuMemAlloc(4 * n))
ok(d.cuMemsetD32(ptr, 0x3F800000, n))
ok(d.cuCtxSynchronize())
host = np.zeros(n, np.float32)
ok(d.cuMemcpyDtoH(host.ctypes.data, ptr, 4 * n))
ok(d.cuMemFree(ptr))
if not (host == 1.0).all():
    sys.exit("the GPU answered wrong: a 4 MB fill read back different")
"""


def gpu_healthy(lane: str | None, env: dict, timeout: float = 120.0) -> tuple[bool, str]:
    """Does this lane's GPU still answer? A 4 MB allocation, a fill, a synchronize and a read-back in a fresh process
    (_HEALTH_CHECK). A CPU lane (no GPU, or COURSE_FORCE_CPU) is always healthy."""
    if _in_hook(TEST_WEDGED, lane):
        return False, "the GPU does not answer (test hook)"
    if lane is None or env.get("COURSE_FORCE_CPU"):
        return True, ""
    try:
        r = subprocess.run([sys.executable, "-c", _HEALTH_CHECK], env=env, capture_output=True, text=True,
                           timeout=timeout)
    except subprocess.TimeoutExpired:
        return False, f"a 4 MB fill did not finish in {timeout:.0f} s"
    if r.returncode != 0:
        return False, (r.stderr or "").strip().splitlines()[-1:][0] if r.stderr.strip() else f"exit {r.returncode}"
    return True, ""



# ------------------------------------------------------------------------------------------ children, interrupts
STOP = threading.Event()
_BORN = time.time()  # when this process imported the pool: a task started ahead (_spare_task) is older than its student

_CHILDREN: set = set()
_CHILDREN_LOCK = threading.Lock()


class Interrupted(Exception):
    """Ctrl-C (or SIGTERM) during run_pool: every grading child was stopped; `merged` were merged before."""

    def __init__(self, merged: dict, lanes: list):
        super().__init__("interrupted")
        self.merged, self.lanes = merged, lanes


def run_child(cmd: list[str], env: dict, timeout: float | None = None) -> subprocess.CompletedProcess:
    """subprocess.run in a session of its own (a terminal's Ctrl-C reaches this process only; stop_children ends
    the child and everything it started)."""
    p = subprocess.Popen(cmd, env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         start_new_session=True)
    with _CHILDREN_LOCK:
        _CHILDREN.add(p)
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(p)
        p.communicate()
        raise
    finally:
        with _CHILDREN_LOCK:
            _CHILDREN.discard(p)
    return subprocess.CompletedProcess(cmd, p.returncode, out, err)


def _kill_group(p, sig=signal.SIGKILL) -> None:
    try:
        os.killpg(p.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def stop_children(grace: float = 5.0) -> None:
    """SIGTERM every grading child's process group, SIGKILL what is left after `grace` seconds."""
    with _CHILDREN_LOCK:
        kids = list(_CHILDREN)
    for p in kids:
        _kill_group(p, signal.SIGTERM)
    t0 = time.time()
    while time.time() - t0 < grace and any(p.poll() is None for p in kids):
        time.sleep(0.1)
    for p in kids:
        _kill_group(p, signal.SIGKILL)


# ------------------------------------------------------------------------------------------- the seed, the lock
def read_seed_file(path: str | os.PathLike) -> str:
    """The secret seed in a file: refused (one line, SystemExit) when the file cannot be read or holds nothing."""
    f = Path(path).expanduser()
    try:
        text = f.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise SystemExit(f"the seed file {f} cannot be read ({type(exc).__name__}: "
                         f"{getattr(exc, 'strerror', None) or exc})") from None
    if not text.strip():
        raise SystemExit(f"the seed file {f} is empty: write the secret seed into it (e.g. a number); grading "
                         "with no seed could not be reproduced")
    return text.strip()


class grading_lock:
    """One grading command at a time per grading folder (`autograder grade`, `slurm collect`, `forget`): a second
    one is refused with who holds it. An flock: a process that dies releases it."""

    def __init__(self, grading: Path, what: str):
        self.path = Path(grading) / ".autograder.lock"
        self.what = what
        self.f = None

    def __enter__(self):
        import fcntl

        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.f = open(self.path, "a+")
        try:
            fcntl.flock(self.f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            self.f.seek(0)
            held = self.f.read().strip() or "another process"
            self.f.close()
            raise SystemExit(f"{self.path.parent} is busy: {held}. Wait for it to finish (or stop it), then run "
                             "this again; two grading runs at once would overwrite each other's record") from None
        self.f.seek(0)
        self.f.truncate()
        self.f.write(f"`{self.what}` (pid {os.getpid()} on {socket.gethostname()}, since "
                     f"{time.strftime('%Y-%m-%d %H:%M:%S')}) holds it\n")
        self.f.flush()
        return self

    def __exit__(self, *exc):
        import fcntl

        self.f.seek(0)
        self.f.truncate()
        fcntl.flock(self.f, fcntl.LOCK_UN)
        self.f.close()
        return False


# -------------------------------------------------------------------------------------------- the batch record
def update_batch_record(grading: Path, week: str, run: dict, per_student: dict) -> dict:
    """Merge one run into <grading>/batch_<week>.json: its students' entries replace theirs, every other student's
    entry is kept (a re-grade of one student leaves the class as it was). A student this run could not grade keeps
    an earlier run's result, with a note. `run` ("id", "where", "lanes", "wall_s", "seed_source", ...) replaces a
    run of the same id. The report reads the newest verdict per student and notebook from it."""
    f = Path(grading) / f"batch_{week}.json"
    try:
        old = json.loads(f.read_text())
    except (OSError, ValueError):
        old = {}
    runs = [r for r in old.get("runs") or [] if isinstance(r, dict) and r.get("id") != run["id"]]
    per = dict(old.get("per_student") or {})
    if old and not old.get("runs"):  # a record of one run, written before runs were kept
        start = f.stat().st_mtime - float(old.get("wall_s") or 0) - 60
        runs.append({"id": "earlier", "where": old.get("where"), "lanes": old.get("lanes") or {},
                     "wall_s": old.get("wall_s"), "started_at": start})
        per = {k: dict(v, run="earlier", started_at=v.get("started_at") or start) for k, v in per.items()
               if isinstance(v, dict)}
    for student, e in per_student.items():
        e = dict(e, run=run["id"])
        if not e.get("started_at"):
            e["started_at"] = run.get("started_at")
        prev = per.get(student)
        if e.get("not_graded") and prev and not prev.get("not_graded"):
            what = "is queued" if e.get("queued") else "failed"
            e = dict(prev, later_failure=f"a later grading ({run['id']}) {what}: {e['not_graded'][:300]}")
        per[student] = e
    runs.append(run)
    lanes = {}
    for r in runs:
        latest = r is run
        for label, lane in (r.get("lanes") or {}).items():
            mine = [s for s in lane.get("students") or [] if (per.get(s) or {}).get("run") == r["id"]]
            if mine or latest:
                lanes[label if latest else f"{label} ({r['id']})"] = dict(lane, students=mine, run=r["id"])
    record = {"week": week, "students": len(per), "wall_s": run.get("wall_s"), "where": run.get("where"),
              "started_at": run.get("started_at"), "seed_source": run.get("seed_source"),
              "runs": runs[-50:], "lanes": lanes, "per_student": dict(sorted(per.items()))}
    f.parent.mkdir(parents=True, exist_ok=True)
    _atomic_json(f, record)
    return record


def prune_batches(grading: Path, keep: int) -> list[Path]:
    """Keep the newest `keep` batch folders (<grading>/batch/<yyyymmdd-hhmmss>/: templates, task folders,
    baselines, only read to debug a run); remove the others. Returns what was removed."""
    folders = sorted(p for p in (Path(grading) / "batch").glob("*") if p.is_dir())
    gone = folders[:-keep] if keep > 0 else folders
    for p in gone:
        shutil.rmtree(p, ignore_errors=True)
    return gone


def export_week(week: str, grading: Path) -> Path:
    """grades_<week>.csv: `nbgrader export` of this week only (the gradebook holds every released week), through the
    course's export plugin (autograder/nbgrader_config.py: quoted by csv.writer, written whole). An export that
    fails leaves the previous CSV as it was and says so on stderr."""
    out = Path(grading) / f"grades_{week}.csv"
    r = nbgrader("export", f"--to={out}", f"--assignment={week}", check=False,
                 env=dict(os.environ, COURSE_GRADING_DIR=str(grading)), here=True)
    if r.returncode != 0:
        last = (r.stderr or "").strip().splitlines()[-1:] or [f"exit {r.returncode}"]
        print(f"the gradebook CSV {out} was not written again (nbgrader export: {last[0][:300]})", file=sys.stderr)
    return out


def flag_feedback(grading: Path, week: str, students) -> int:
    """Put the flags of each trusted verdict (deleted-cell, torch-instead-of-kernel, ...) at the top of the student's
    feedback page for that notebook (nbgrader's page shows the grade cells only). Returns how many pages."""
    import html

    from .report_data import _clean, _secrets

    secrets, n = _secrets(), 0
    for student in students:
        for v in sorted((Path(grading) / "verdicts" / student / week).glob("*.json")):
            page = Path(grading) / "feedback" / student / week / f"{v.stem}.html"
            try:
                flags = json.loads(v.read_text()).get("flags") or []
                text = page.read_text()
            except (OSError, ValueError):
                continue
            if not flags or "id='course-flags'" in text:
                continue
            box = ("<div id='course-flags' style='margin:1em auto;max-width:60em;padding:.6em 1em;border:1px solid "
                   "#e0c36a;background:#fff3cd'><strong>What the grader noticed in this notebook</strong><ul>"
                   + "".join(f"<li><code>{html.escape(_clean(f, secrets))}</code></li>" for f in flags)
                   + "</ul></div>")
            at = text.find("<body")
            at = text.find(">", at) + 1 if at >= 0 else 0
            page.write_text(text[:at] + box + text[at:])
            n += 1
    return n


def problem_feedback(grading: Path, week: str, per_student: dict) -> list[Path]:
    """Feedback for what nbgrader has none for: a notebook set aside as malformed, one handed in but not graded as
    placed (several copies and none under its name, found in another week's folder), with the hand-in's notes. One
    small HTML page per such notebook, beside nbgrader's, in feedback/<student>/<week>/ — for every student, a
    student with nothing graded included. A page already saying the same is left as it is (a re-grade of another
    student touches nobody else's); one saying something else (nbgrader's, from a run that graded it) is replaced."""
    import html

    written = []
    for student, e in per_student.items():
        if not isinstance(e, dict):
            continue
        d = Path(grading) / "feedback" / student / week
        notes = "".join(f"<li>{html.escape(str(n))}</li>" for n in e.get("notes") or [])
        pages = [(m, "The file you handed in is not a notebook that can be read: {why}</p><p>Open it in JupyterLab, "
                     "save it again, and hand it in.") for m in e.get("malformed") or []]
        pages += [(m, "It was handed in, but not where the grader takes it from: {why}.</p><p>Nothing of it was "
                      "graded; put it in place and hand it in again.") for m in e.get("ungraded") or []]
        for m, says in pages:
            name, _, why = str(m).partition(":")
            stem = Path(name.strip()).stem
            page = d / f"{stem}.html"
            text = (f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(stem)}</title></head>"
                    f"<body><h1>{html.escape(name.strip())}: not graded (0 points)</h1><p>"
                    + says.format(why=html.escape(why.strip())) + "</p>"
                    + (f"<ul>{notes}</ul>" if notes else "") + "</body></html>\n")
            if page.exists() and page.read_text() == text:
                continue
            d.mkdir(parents=True, exist_ok=True)
            page.write_text(text)
            written.append(page)
    return written


def forget_target(grading: Path, name: str) -> tuple[str, str | None]:
    """(id, folder name under submitted/ or None) of the student `forget` is given: an id (`student_id`: what the
    report and the gradebook show), or the name of the student's folder, whatever its bytes (a name that is not UTF-8
    arrives surrogate-escaped from the command line). An id wins over a folder of the same name."""
    sub = Path(grading) / "submitted"
    folders = {sid: d.name for d in (sub.iterdir() if sub.is_dir() else []) if (sid := student_id(d.name))}
    if name in folders:
        return name, folders[name]
    sid = student_id(name)
    if sid is not None and folders.get(sid) == name:
        return sid, name
    return name, None


def forget(grading: Path, students: list[str], week: str | None = None, keep_submission: bool = False) -> list[str]:
    """Remove students from a grading folder (a trial cohort graded in the class's folder, a student who left):
    `withdraw` each, then each affected week's CSV export and report are written again. A student is named by id or
    by folder name (`forget_target`). Their Slurm state is slurm.forget's (`autograder forget` calls both: slurm
    imports pool)."""
    grading = Path(grading)
    said, weeks = [], set()
    for name in students:
        student, folder = forget_target(grading, name)
        said += withdraw(grading, student, week, weeks, folder=None if keep_submission else folder)
    from .report import write_report

    for w in sorted(weeks):
        if (grading / f"grades_{w}.csv").exists():
            export_week(w, grading)
        write_report(w, grading)
        said.append(f"{w}: gradebook CSV and report written again")
    return said


def withdraw(grading: Path, student: str, week: str | None, weeks: set, folder: str | None = None) -> list[str]:
    """One student's grades out of a grading folder, the CSV export and report left to the caller (`forget`, and
    Slurm's collect for a grade of an earlier hand-in): their gradebook rows (nbgrader's remove_submission /
    remove_student), autograded/, feedback/, verdicts/ (of `week`, or all), submitted/<folder> when a folder is
    named, their entries in batch_<week>.json. Adds the weeks touched to `weeks`; returns what was done."""
    said = _forget_grades(grading, student, week, weeks)
    kinds = [("autograded", student), ("feedback", student), ("verdicts", student)]
    if folder is not None:
        kinds.append(("submitted", folder))
    for kind, sub in kinds:
        d = grading / kind / sub
        target = d / week if week else d
        if target.exists():
            shutil.rmtree(target)
            said.append(f"{student}: {kind}/{shown_name(str(target.relative_to(grading / kind)))} removed")
            if week and d.exists() and not any(d.iterdir()):
                d.rmdir()
    for bf in grading.glob(f"batch_{week or '*'}.json"):
        # ...and under the folder's own name, which a record written before ids were mapped may hold
        if any([_forget_in_record(bf, s) for s in {student, folder or student}]):
            weeks.add(bf.stem[len("batch_"):])
    if not any(x.startswith(f"{student}:") for x in said):
        said.append(f"{student}: nothing to forget in {grading}")
    return said


def _forget_grades(grading: Path, student: str, week: str | None, weeks: set) -> list[str]:
    """The student's submissions (of `week`, or every week and then the student) out of the class's gradebook."""
    import warnings

    from nbgrader.api import Gradebook, MissingEntry
    from sqlalchemy.exc import SAWarning

    db, said = Path(grading) / "gradebook.db", []
    if not db.exists():
        return said
    with warnings.catch_warnings(), Gradebook(f"sqlite:///{db}") as gb:
        warnings.simplefilter("ignore", SAWarning)
        try:
            subs = [sb.assignment.name for sb in gb.find_student(student).submissions]
        except MissingEntry:
            return said
        for w in subs:
            if week is None or w == week:
                gb.remove_submission(w, student)
                weeks.add(w)
                said.append(f"{student}: {w} removed from the gradebook")
        if week is None:
            gb.remove_student(student)
    return said


def _forget_in_record(bf: Path, student: str) -> bool:
    """The student out of one batch record (per-student entry, lanes' lists). Returns whether it held them."""
    try:
        rec = json.loads(bf.read_text())
    except (OSError, ValueError):
        return False
    if student not in (rec.get("per_student") or {}):
        return False
    del rec["per_student"][student]
    for lane in (rec.get("lanes") or {}).values():
        if isinstance(lane, dict) and student in (lane.get("students") or []):
            lane["students"] = [x for x in lane["students"] if x != student]
    rec["students"] = len(rec["per_student"])
    _atomic_json(bf, rec)
    return True


# ------------------------------------------------------------------------------------------------ the pool
@dataclass
class Job:
    student: str
    attempts: list[dict] = field(default_factory=list)  # {"lane", "why"} of each failed attempt
    part: int = 0  # this job grades part `part` of the student's hand-in: split[part] (part_notebooks)
    split: tuple = ()  # the hand-in's notebooks, one list per part (plan_jobs); () = graded whole
    expected_s: float = 0.0  # its expected grading time (plan_jobs)

    @property
    def parts(self) -> int:
        return max(1, len(self.split))

    @property
    def label(self) -> str:
        return self.student if self.parts == 1 else f"{self.student} (part {self.part + 1} of {self.parts})"

    @property
    def avoid(self) -> set:
        return {a["lane"] for a in self.attempts}


@dataclass
class Lane:
    id: str | None  # the GPU id as this process sees it ("0", "1"), or None: one lane on CPU / the visible GPU
    env: dict
    label: str
    state: str = "starting"  # starting, grading, done, wedged, retired
    why: str = ""
    students: list[str] = field(default_factory=list)
    figures: dict = field(default_factory=dict)
    wall_s: float = 0.0
    ready_s: float = 0.0  # seconds from the lane's start until its GPU answered and its baselines were measured
    phases: dict = field(default_factory=dict)  # seconds of each step of the lane's set-up (_lane_ready)
    died_for: list = field(default_factory=list)  # the students whose task process died since its last success
    spare: object = None  # the lane's next task process, started ahead (_spare_task); None until the first task


def lanes_for(gpus: str, env: dict | None = None) -> list[Lane]:
    """--gpus all | none | 0,1,... -> one lane per GPU, each with the CUDA_VISIBLE_DEVICES its processes see. Ids
    index the GPUs this process sees (an inherited CUDA_VISIBLE_DEVICES=4,5 makes "0" physical GPU 4). With
    COURSE_FORCE_CPU (CPU mode, the tests) the ids are lanes only and need no GPU, and `all` is refused as where
    there is no GPU."""
    env = dict(os.environ if env is None else env)
    visible = [v.strip() for v in env.get("CUDA_VISIBLE_DEVICES", "").split(",") if v.strip()]
    count = _gpu_count() if not env.get("COURSE_FORCE_CPU") else 0
    if gpus == "all" and count == 0:  # COURSE_FORCE_CPU included: it pretends there is no GPU, never grades on CPU
        from .score import CPU_GRADING

        raise SystemExit(f"--gpus all: no GPU here ({no_gpu_diagnosis(env)}). Grade on a GPU machine, or on CPU on "
                         f"purpose with --gpus none ({CPU_GRADING})")
    if gpus == "none":
        return [Lane(None, dict(env), "cpu")]
    ids = [str(i) for i in range(count)] if gpus == "all" else [g.strip() for g in gpus.split(",") if g.strip()]
    if not ids or len(set(ids)) != len(ids):
        raise SystemExit(f"--gpus {gpus!r}: give all, none, or distinct GPU ids like 0,1")
    if not env.get("COURSE_FORCE_CPU"):
        bad = [i for i in ids if not i.isdigit() or int(i) >= count]
        if bad:
            raise SystemExit(f"--gpus {gpus}: GPU {', '.join(bad)} not visible here ({count} GPU(s) visible)")
    lanes = []
    for i in ids:
        phys = visible[int(i)] if visible and i.isdigit() and int(i) < len(visible) else i
        lanes.append(Lane(i, dict(env, CUDA_VISIBLE_DEVICES=phys, COURSE_POOL_LANE=i), f"GPU {i}"))
    return lanes


def no_gpu_diagnosis(env: dict | None = None) -> str:
    """What was found when torch sees no GPU: torch's build, the driver (nvidia-smi), CUDA_VISIBLE_DEVICES."""
    env = dict(os.environ if env is None else env)
    if env.get("COURSE_FORCE_CPU"):
        return f"COURSE_FORCE_CPU={env['COURSE_FORCE_CPU']} is set: it makes the course act as if there were no GPU"
    parts = []
    try:
        import torch

        cuda = getattr(torch.version, "cuda", None)
        parts.append(f"torch {torch.__version__} is a CPU-only build (no CUDA)" if not cuda else
                     f"torch {torch.__version__} (built for CUDA {cuda}) sees no CUDA device")
    except Exception as exc:  # noqa: BLE001
        parts.append(f"torch cannot be imported ({type(exc).__name__})")
    smi = shutil.which("nvidia-smi")
    if not smi:
        parts.append("no nvidia-smi on PATH (no NVIDIA driver?)")
    else:
        try:
            r = subprocess.run([smi, "--query-gpu=name,driver_version", "--format=csv,noheader"],
                               capture_output=True, text=True, timeout=30)
            found = "; ".join(x.strip() for x in r.stdout.splitlines() if x.strip())
            parts.append(f"nvidia-smi lists {found}" if r.returncode == 0 and found else
                         f"nvidia-smi fails: {(r.stderr or r.stdout).strip()[:200] or f'exit {r.returncode}'}")
        except (OSError, subprocess.TimeoutExpired) as exc:
            parts.append(f"nvidia-smi fails ({type(exc).__name__})")
    if "CUDA_VISIBLE_DEVICES" in env:
        parts.append(f"CUDA_VISIBLE_DEVICES={env['CUDA_VISIBLE_DEVICES']!r}")
    return "; ".join(parts)


def _gpu_count() -> int:
    try:
        import torch

        return torch.cuda.device_count() if torch.cuda.is_available() else 0
    except Exception:  # noqa: BLE001
        return 0


NOTEBOOK_WORK = 0.1  # a notebook's cost to grade beyond its attempted exercises, in exercises (measured on one
# H200: the five unattempted notebooks of the release took 1.2 s, one attempted exercise 5 to 17 s)


def expected_seconds(grading: Path, week: str, students: list[str]) -> dict[str, tuple[float, dict, int]]:
    """{student: (expected seconds, {notebook: work}, bytes handed in)}. Work: the hand-in's attempted exercises
    per notebook (hand_in_work) plus NOTEBOOK_WORK per notebook. Expected: the student's wall time in the last run
    that graded them (the batch record, batch_<week>.json: update_batch_record keeps a graded entry through a later
    failure); else their work at the recorded seconds per unit of work (the median over the recorded students; 1 s
    when none is recorded)."""
    try:
        per = json.loads((Path(grading) / f"batch_{week}.json").read_text()).get("per_student")
    except (OSError, ValueError, AttributeError):
        per = None
    per = per if isinstance(per, dict) else {}
    work, size = {}, {}
    for s in students:
        folder = Path(grading) / "submitted" / s / week
        work[s] = {n: w + NOTEBOOK_WORK for n, w in hand_in_work(folder, week).items()} if folder.is_dir() else {}
        size[s] = sum(p.stat().st_size for p in _notebooks_under(folder))
    units = {s: sum(w.values()) for s, w in work.items()}
    recorded = {s: float(e["wall_s"]) for s, e in per.items() if s in units and isinstance(e, dict)
                and not e.get("not_graded") and isinstance(e.get("wall_s"), (int, float)) and e["wall_s"] > 0}
    rates = sorted(recorded[s] / units[s] for s in recorded if units[s])
    rate = rates[len(rates) // 2] if rates else 1.0
    return {s: (recorded.get(s, rate * units[s]), work[s], size[s]) for s in students}


def longest_first(grading: Path, week: str, students: list[str]) -> list[str]:
    """`students` in the order the pool hands them out: the longest expected grading first (expected_seconds), so
    that a long hand-in is not started last and left as the batch's critical path (longest-processing-time-first);
    ties: the larger hand-in first, then the given order."""
    exp = expected_seconds(grading, week, students)
    order = {s: i for i, s in reversed(list(enumerate(students)))}
    return sorted(dict.fromkeys(students), key=lambda s: (-exp[s][0], -exp[s][2], order[s]))


# A hand-in expected to take more than PART_SHARE of a lane's share of the class (the class's expected time / lanes)
# is graded in parts. Longest-first balances the lanes well while every job is below a lane's share; a part is not
# free (measured on 4 H200s: the solutions' hand-in took 62.9 s whole and 72.6 s in three parts), so no more parts
# than that bound needs.
PART_SHARE = 0.75


def split_hand_in(work: dict[str, float], k: int) -> list[list[str]]:
    """The notebooks of a hand-in in k parts of about equal work (longest first, each to the lightest part)."""
    parts: list[list] = [[0.0, []] for _ in range(k)]
    for name, w in sorted(work.items(), key=lambda x: (-x[1], x[0])):
        light = min(parts, key=lambda p: p[0])
        light[0] += w
        light[1].append(name)
    return [sorted(names) for _, names in parts]


def plan_jobs(grading: Path, week: str, students: list[str], lanes: int) -> list[Job]:
    """The pool's jobs, longest expected first. On one lane, one job per student. On several, a hand-in of several
    notebooks expected to take more than PART_SHARE × the class's expected time / lanes is graded in parts on
    different lanes at once (each part its own nbgrader run of some of its notebooks, `grade_task(part=...)`, the
    notebooks shared out by their work): one long hand-in would otherwise be the batch's critical path however many
    lanes there are (measured on 4 H200s, the solutions' five notebooks took 58 s of a 98 s run). Each part costs a
    task's start, so no more parts than needed to bring a part under that share, and none smaller than a notebook."""
    order = longest_first(grading, week, students)
    exp = expected_seconds(grading, week, students)
    if lanes < 2:
        return [Job(s, expected_s=exp[s][0]) for s in order]
    share = PART_SHARE * sum(t for t, _, _ in exp.values()) / lanes
    jobs = []
    for s in order:
        t, work, _ = exp[s]
        k = min(len(work), int(-(-t // share))) if share > 0 and t > share else 1
        if k < 2:
            jobs.append(Job(s, expected_s=t))
            continue
        split = split_hand_in(work, k)
        total = sum(work.values()) or 1.0
        jobs += [Job(s, part=i, split=tuple(tuple(p) for p in split),
                     expected_s=t * sum(work[n] for n in p) / total) for i, p in enumerate(split)]
    rank = {s: i for i, s in enumerate(order)}
    return sorted(jobs, key=lambda j: (-j.expected_s, rank[j.student], j.part))


class _Queue:
    """The jobs still to grade (students, or parts of their hand-ins), handed to workers in the order given (run_pool:
    plan_jobs): a job handed back avoids the lane it failed on while another lane is working. gated=True: no job is
    handed out before open() (the batch's one-off set-up, run_pool's `prepare`, runs while the lanes measure their
    GPUs)."""

    def __init__(self, students: list, lanes: list[Lane], gated: bool = False):
        self.pending = [j if isinstance(j, Job) else Job(j) for j in students]
        self.in_flight = 0
        self.live = {id(lane) for lane in lanes}
        self.cond = threading.Condition()
        self.opened = not gated

    def open(self) -> None:
        with self.cond:
            self.opened = True
            self.cond.notify_all()

    def take(self, lane: Lane) -> Job | None:
        with self.cond:
            while True:
                if STOP.is_set():
                    return None
                others_live = self.live - {id(lane)}
                for j in self.pending if self.opened else []:
                    if id(lane) not in j.avoid or not others_live:
                        self.pending.remove(j)
                        self.in_flight += 1
                        return j
                if self.opened and not self.pending and not self.in_flight:
                    return None
                self.cond.wait(timeout=1.0)

    def finish(self, job: Job | None = None, requeue: bool = False) -> None:
        with self.cond:
            self.in_flight -= 1
            if requeue and job is not None:
                self.pending.insert(0, job)
            self.cond.notify_all()

    def retire(self, lane: Lane) -> None:
        with self.cond:
            self.live.discard(id(lane))
            self.cond.notify_all()

    def left(self) -> list[Job]:
        with self.cond:
            out, self.pending = self.pending, []
            return out


def run_pool(week: str, students: list[str], lanes: list[Lane], *, grading: Path, batch: Path, template: Path,
             task_timeout: float | None = None, progress=None, prepare=None, after_merge=None) -> tuple[dict, dict]:
    """Grade `students` with one worker per lane, the longest expected first, a long hand-in in parts on several
    lanes (plan_jobs); merge each finished task into `grading` (this thread is the only writer). A student is graded
    once every part of their hand-in is merged (one entry, its parts listed); a part that fails twice leaves the
    student not graded, like a whole hand-in. Returns (per_student, lanes_summary) for the batch record.

    What a run pays once, not per lane, and overlapped with what it can be: `prepare()` (the class gradebook's
    assignment and the batch's `template`, which must exist when it returns) runs in this thread while every lane
    checks its GPU and measures its trusted baseline — per lane by necessity, since each lane's bars are fractions
    of its own GPU's ceilings; no student is handed out before it is done. `after_merge(entries, alone)` (the
    feedback pages) runs in this thread with the entries of the students merged since its last call, while the
    lanes grade on (alone=False: other threads are running), or, for those merged last, once every lane's thread
    has stopped (alone=True)."""
    import queue as queue_mod

    events: queue_mod.Queue = queue_mod.Queue()
    parts = _Parts()
    todo = _Queue(plan_jobs(grading, week, students, len(lanes)), lanes, gated=prepare is not None)
    per_student: dict[str, dict] = {}
    STOP.clear()
    threads = [threading.Thread(target=_work, args=(lane, week, todo, events),
                                kwargs={"grading": grading, "batch": batch, "template": template,
                                        "task_timeout": task_timeout}, daemon=True) for lane in lanes]
    for t in threads:
        t.start()
    show = progress or (lambda *a: None)
    try:
        try:
            if prepare is not None:
                prepare()
                todo.open()
        except Exception:
            STOP.set()
            stop_children()
            raise
        _merge_events(threads, events, grading, per_student, show, after_merge, parts)
    except KeyboardInterrupt:
        STOP.set()
        stop_children()
        for t in threads:
            t.join(timeout=10)
        while not events.empty():  # results that finished before the interrupt are kept
            kind, lane, job, data = events.get()
            if kind == "done":
                merge_result(data[0], grading, move=True)
                if (whole := parts.add(job, lane, data[1])) is not None:
                    per_student[job.student] = whole
        raise Interrupted(per_student, lanes) from None
    for job in todo.left():  # every lane stopped before these were graded
        job.attempts.append({"label": "—", "why": "no working GPU lane was left"})
        per_student[job.student] = _not_graded(job, "no working lane left")
        show("failed", None, job, per_student[job.student])
    return per_student, _lanes_summary(lanes)


class _Parts:
    """The parts of each student's hand-in merged so far: a student's entry once all of them are (run_pool)."""

    def __init__(self):
        self.done: dict[str, list] = {}
        self.failed: set[str] = set()

    def add(self, job: Job, lane, res: dict) -> dict | None:
        """The student's entry when this was their last part (None before, and for a student with a failed part)."""
        got = self.done.setdefault(job.student, [])
        got.append(_entry(res, lane, job))
        if len(got) < job.parts or job.student in self.failed:
            return None
        return got[0] if job.parts == 1 else _whole_entry(got)


def _whole_entry(parts: list[dict]) -> dict:
    """One student's entry from their parts' entries: the time is the sum (what grading them cost, the next run's
    expectation), the notes said once, each part's lane and time kept."""
    first = min(parts, key=lambda e: e.get("started_at") or 0)
    once = lambda key: list(dict.fromkeys(x for e in parts for x in e.get(key) or []))  # noqa: E731
    base = {k: v for k, v in first.items() if k not in ("part", "notebooks")}
    return {**base, "wall_s": sum(e.get("wall_s") or 0.0 for e in parts),
            "lane": ", ".join(dict.fromkeys(str(e.get("lane")) for e in parts)),
            "finished_at": max(e.get("finished_at") or 0 for e in parts),
            "malformed": once("malformed"), "ungraded": once("ungraded"), "notes": once("notes"),
            "attempts": [a for e in parts for a in e.get("attempts") or []],
            "parts": [{k: e.get(k) for k in ("notebooks", "lane", "gpu", "wall_s", "started_at", "finished_at")}
                      for e in sorted(parts, key=lambda e: e.get("part") or [0])]}


def _merge_events(threads: list, events, grading: Path, per_student: dict, show, after_merge=None,
                  parts: _Parts | None = None) -> None:
    """The single writer: merge each finished task as its worker reports it, until every worker has stopped; hand
    the students merged in full to `after_merge` whenever no event waits (run_pool)."""
    import queue as queue_mod

    parts = parts if parts is not None else _Parts()
    fresh: dict[str, dict] = {}
    while any(t.is_alive() for t in threads) or not events.empty():
        try:
            kind, lane, job, data = events.get(timeout=0.2)
        except queue_mod.Empty:
            continue
        if kind == "done":
            out, res = data
            merge_result(out, grading, move=True)  # the single writer; the task keeps digests, not the notebooks
            whole = parts.add(job, lane, res)
            if whole is None:
                kind = "part"
            else:
                per_student[job.student] = fresh[job.student] = whole
        elif kind == "failed":
            parts.failed.add(job.student)
            fresh.pop(job.student, None)
            per_student[job.student] = _not_graded(job, "failed twice")
        show(kind, lane, job, per_student.get(job.student) if job else None)
        if after_merge is not None and fresh and events.empty() and any(t.is_alive() for t in threads):
            after_merge(dict(fresh), False)
            fresh.clear()
    if after_merge is not None and fresh:
        after_merge(dict(fresh), True)


def _lanes_summary(lanes: list[Lane]) -> dict:
    return {lane.label: {"gpu": lane.id, "cuda_visible_devices": lane.env.get("CUDA_VISIBLE_DEVICES"),
                         "state": lane.state, "why": lane.why, "students": lane.students,
                         "device": lane.figures.get("device"), "ceilings": lane.figures.get("ceilings"),
                         "wall_s": lane.wall_s, "ready_s": round(lane.ready_s, 1),
                         "ready_phases_s": {k: round(v, 1) for k, v in lane.phases.items()}} for lane in lanes}


def _work(lane: Lane, week: str, todo: _Queue, events, *, grading: Path, batch: Path, template: Path,
          task_timeout: float | None) -> None:
    """One worker: ready its lane, then grade the students it takes one after another until none is left for it,
    its lane fails, or the pool stops."""
    t0 = time.perf_counter()
    lane_dir = batch / (f"gpu{lane.id}" if lane.id is not None else "lane")
    ok, why = _lane_ready(week, lane, lane_dir)
    lane.ready_s = time.perf_counter() - t0
    if not ok:
        _end_spare(lane)
        lane.state, lane.why = "wedged", why
        todo.retire(lane)
        events.put(("lane", lane, None, None))
        return
    lane.state = "grading"
    events.put(("lane", lane, None, None))
    while True:
        job = todo.take(lane)
        if job is None:
            break
        events.put(("start", lane, job, None))
        part = f".p{job.part + 1}of{job.parts}" if job.parts > 1 else ""
        out = batch / "tasks" / f"{task_folder(job.student)}{part}.{len(job.attempts)}"
        cmd = _task_cmd(week, lane, job, out, grading=grading, template=template, lane_dir=lane_dir)
        code, tail = _run_task(cmd, lane, task_timeout)
        if STOP.is_set():
            break
        res = read_result(out)
        if res is not None and res.get("state") == "done":
            lane.died_for = []
            if job.student not in lane.students:
                lane.students.append(job.student)
            events.put(("done", lane, job, (out, res)))
            todo.finish()
            continue
        if not _failed_attempt(lane, job, out, res, code, tail, todo, events):
            break
    _end_spare(lane)
    if STOP.is_set():
        lane.state, lane.why = "interrupted", "interrupted"
    if lane.state == "grading":
        lane.state = "done"
    lane.wall_s = time.perf_counter() - t0
    events.put(("lane", lane, None, None))


def task_folder(student: str) -> str:
    """The name of a student's task folder: the id where it is letters, digits and `_.,@=-`, else those characters
    of it and a digest of the id. nbgrader matches a folder's whole path as a regular expression it does not escape
    (`smith (john)` is a group, `caf\\xe9` an escape), and the task's folder is part of that path."""
    if re.fullmatch(r"[\w.,@=-]+", student, re.ASCII):
        return student
    return re.sub(r"[^\w.,@=-]+", "_", student, flags=re.ASCII)[:40] + "-" + \
        hashlib.sha256(student.encode("utf-8", "surrogatepass")).hexdigest()[:10]


def _lane_ready(week: str, lane: Lane, lane_dir: Path) -> tuple[bool, str]:
    """(ok, why): the lane's GPU answers and its ceilings and the course references were measured. The lane's first
    task process is started first (_spare_task: its imports overlap the measurement, as a spare's do a student's
    grading); the seconds of each step go to `lane.phases`."""
    t0 = time.perf_counter()
    if lane.spare is None and not STOP.is_set():
        lane.spare = _spare_task(lane)
    ok, why = gpu_healthy(lane.id, lane.env)
    lane.phases["gpu_check"] = time.perf_counter() - t0
    if ok:
        t1 = time.perf_counter()
        try:
            lane.figures = prepare_lane(week, lane_dir / "baseline", lane.env)
        except Exception as exc:  # noqa: BLE001 - a lane that cannot measure its GPU grades nobody
            ok, why = False, str(exc)[:500]
        lane.phases["baselines"] = time.perf_counter() - t1
    return ok, why


def _task_cmd(week: str, lane: Lane, job: Job, out: Path, *, grading: Path, template: Path,
              lane_dir: Path) -> list[str]:
    cmd = [sys.executable, "-m", "autograder.pool", "task", "--out", str(out),
           "--submitted", str(grading / "submitted"), "--template", str(template),
           "--batch-dir", str(lane_dir / "baseline")]
    if lane.id is not None:
        cmd += ["--lane", lane.id]
    # the positionals after "--": a student id may start with "-" (a folder named "-%" grades as -\x25)
    if job.parts > 1:
        cmd += ["--part", json.dumps({"part": job.part, "split": job.split})]
    return cmd + ["--attempt", str(len(job.attempts)), "--", week, job.student]


def _run_task(cmd: list[str], lane: Lane, task_timeout: float | None) -> tuple[int, str]:
    """(exit code, stderr tail) of one task process; 124 when it ran out of time.

    Still one process per student, but started ahead: the lane's spare (_spare_task) has done its imports (nbgrader,
    the grader, torch: seconds a student) while the previous student was graded; it is handed this student's arguments
    and the next spare starts at once. Measured on one H200, the gap between two students of a lane was about 4 s."""
    p = lane.spare if lane.spare is not None and lane.spare.poll() is None else _spare_task(lane)
    lane.spare = None if STOP.is_set() else _spare_task(lane)
    try:
        _, err = p.communicate(input=json.dumps(cmd[4:]) + "\n", timeout=task_timeout)
        code, tail = p.returncode, (err or "")[-1500:]
    except subprocess.TimeoutExpired:
        _kill_group(p)
        p.communicate()
        code, tail = 124, f"the task did not finish in {task_timeout:.0f} s: killed"
    finally:
        with _CHILDREN_LOCK:
            _CHILDREN.discard(p)
    return code, tail


def _spare_task(lane: Lane) -> subprocess.Popen:
    """A task process of the lane (its environment, a session of its own, known to stop_children) that imports what
    grading needs, then waits for one student's `task` arguments on its standard input (`python -m autograder.pool
    spare`); end of input, and it exits having graded nobody."""
    env = dict(lane.env)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, env.get("PYTHONPATH", "").split(os.pathsep))])
    p = subprocess.Popen([sys.executable, "-m", "autograder.pool", "spare"], env=env, cwd=ROOT, stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    with _CHILDREN_LOCK:
        _CHILDREN.add(p)
    return p


def _end_spare(lane: Lane) -> None:
    """The lane's spare, no longer needed: its input closed (it exits at once), killed if it does not."""
    p, lane.spare = lane.spare, None
    if p is None:
        return
    try:
        p.communicate(input="", timeout=30)
    except (subprocess.TimeoutExpired, OSError, ValueError):
        _kill_group(p)
    with _CHILDREN_LOCK:
        _CHILDREN.discard(p)


def _failed_attempt(lane: Lane, job: Job, out: Path, res: dict | None, code: int, tail: str, todo: _Queue,
                    events) -> bool:
    """Record a failed attempt, hand the student back (once) or give up on them, and judge the lane. Returns
    whether the lane goes on grading."""
    # A failed attempt: the task process died (no result) or nbgrader failed.
    if res is None:
        sig = -code if code < 0 else None
        why = (f"the grading process died ({signal.Signals(sig).name})" if sig else
               f"the grading process exited {code} without a result") + (f": {tail}" if tail.strip() else "")
    else:
        why = f"nbgrader autograde exited {res.get('returncode')}: {res.get('log_tail', '')[-600:]}"
    job.attempts.append({"lane": id(lane), "label": lane.label, "why": why[-800:], "out": str(out)})
    drop_copies(out / "autograded", out / "autograded.json")  # what nbgrader wrote, by digest (the log says why)
    # A process that died or ran out of time for two different students in a row says something about the lane;
    # nbgrader failing on a student's notebook does not, nor one student's task dying twice (that student is given
    # up on, the lane goes on with the others).
    if res is None:
        lane.died_for.append(job.student)
    healthy, hwhy = gpu_healthy(lane.id, lane.env)
    if not healthy:
        lane.state, lane.why = "wedged", hwhy
    elif len(set(lane.died_for)) >= 2:
        lane.state, lane.why = "retired", "its grading process died for two students in a row"
    if lane.state != "grading":
        todo.retire(lane)
    if len(job.attempts) < 2:
        events.put(("handback", lane, job, None))
        todo.finish(job, requeue=True)
    else:
        events.put(("failed", lane, job, None))
        todo.finish()
    return lane.state == "grading"


def _entry(res: dict, lane: Lane | None, job: Job) -> dict:
    device = (res.get("figures") or {}).get("device") or (lane.figures.get("device") if lane else None)
    entry = {"returncode": res.get("returncode"), "wall_s": res.get("wall_s"), "gpu": lane.id if lane else None,
             "lane": lane.label if lane else res.get("lane"), "host": res.get("host"), "device": device,
             "cpu": not device, "started_at": res.get("started_at"), "finished_at": res.get("finished_at"),
             "process_born": res.get("process_born"), "malformed": res.get("malformed") or [],
             "ungraded": res.get("ungraded") or [], "notes": res.get("notes") or [],
             "log_tail": res.get("log_tail", ""),
             "attempts": [{"lane": a.get("label"), "why": a.get("why")} for a in job.attempts]}
    if res.get("part"):  # one part of a hand-in graded in parts (_whole_entry folds them)
        entry.update(part=res["part"], notebooks=res.get("notebooks"))
    return entry


def _not_graded(job: Job, what: str) -> dict:
    last = job.attempts[-1]["why"] if job.attempts else ""
    # nbgrader failing on the same hand-in twice (no process died): retrying the same files will fail the same way
    permanent = len(job.attempts) >= 2 and all(a.get("why", "").startswith("nbgrader autograde exited")
                                                for a in job.attempts)
    text = (f"not graded (nbgrader failed on this hand-in twice; retrying as is will fail again — look at the "
            f"notebook): {last[:300]}" if permanent else f"not graded, retry ({what}): {last[:300]}")
    return {"returncode": None, "gpu": None, "lane": None, "not_graded": text, "permanent": permanent,
            "attempts": [{"lane": a.get("label"), "why": a.get("why")} for a in job.attempts]}


def main(argv: list[str] | None = None) -> int:
    import argparse

    ap = argparse.ArgumentParser(prog="python -m autograder.pool")
    sub = ap.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("task", help="grade one student into a folder of its own")
    t.add_argument("week")
    t.add_argument("student")
    t.add_argument("--out", required=True, type=Path)
    t.add_argument("--submitted", required=True, type=Path)
    t.add_argument("--template", required=True, type=Path)
    t.add_argument("--batch-dir", type=Path)
    t.add_argument("--lane")
    t.add_argument("--timeout", type=float)
    t.add_argument("--attempt", type=int, default=0)
    t.add_argument("--part", help='{"part": i, "split": [[notebooks], ...]}: grade only part i of the hand-in')
    p = sub.add_parser("prepare", help="measure this GPU's trusted baseline into $COURSE_BATCH_DIR")
    p.add_argument("week")
    sub.add_parser("spare", help="import what grading needs, then grade the task whose arguments come on stdin")
    args = ap.parse_args(argv)
    if args.cmd == "spare":  # a lane's next task, started ahead (_spare_task): its imports done before its student
        import nbgrader.api  # noqa: F401
        import nbgrader.apps  # noqa: F401

        from . import grading, harness  # noqa: F401
        line = sys.stdin.readline()
        return main(["task", *json.loads(line)]) if line.strip() else 0
    if args.cmd == "prepare":
        _prepare_here(args.week)
        return 0
    res = grade_task(args.week, args.student, args.out, submitted=args.submitted, template=args.template,
                     lane=args.lane, batch_dir=args.batch_dir, timeout=args.timeout, attempt=args.attempt,
                     figures=lane_figures(args.batch_dir) if args.batch_dir else None, here=True,
                     part=_part_arg(args.part))
    return 0 if res["state"] == "done" else 1


def _part_arg(text: str | None) -> tuple[int, list] | None:
    if not text:
        return None
    d = json.loads(text)
    return int(d["part"]), [list(p) for p in d["split"]]


if __name__ == "__main__":
    sys.exit(main())
