"""One task: one student graded into a folder of its own (a pool worker's task, and a Slurm array task's).

A task is `nbgrader autograde --student=<id>` with COURSE_GRADING_DIR pointing at the task's folder (the course's
nbgrader_config.py puts the gradebook, the autograded notebooks and the plugin's verdicts there) and the class's
submitted folder passed as `--CourseDirectory.submitted_directory`. Its gradebook starts as a copy of a template
that `nbgrader generate_assignment` wrote (the assignment, its notebooks and cells, no student; once per content of
the week's sources: `assignment_template`), so nothing but the task writes it, and no task waits on another's lock.
The task's last act is `result.json` ("state": "done" or "failed"); a task that died before writing it left no
result, and its folder is ignored.
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
import time
from pathlib import Path

from kernels.paths import write_whole

from .children import _BORN
from .handin import expected_notebooks, part_notebooks, stage_submission
from .release import nbgrader
from .students import shown_name, submission_folder
import warnings

RESULT = "result.json"
STARTED = "started.json"
# Test hooks of the pool's own tests (tests/test_pool.py). COURSE_POOL_TEST_CRASH: comma-separated "lane:<id>"
# (every task on that lane), "first:<student>" (that student's first attempt), "always:<student>": the task process
# dies (SIGKILL) before it grades. COURSE_POOL_TEST_WEDGED: comma-separated lane ids whose GPU "does not answer".
TEST_CRASH = "COURSE_POOL_TEST_CRASH"
TEST_WEDGED = "COURSE_POOL_TEST_WEDGED"


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


def task_folder(student: str) -> str:
    """The name of a student's task folder: the id where it is letters, digits and `_.,@=-`, else those characters
    of it and a digest of the id. nbgrader matches a folder's whole path as a regular expression it does not escape
    (`smith (john)` is a group, `caf\\xe9` an escape), and the task's folder is part of that path."""
    if re.fullmatch(r"[\w.,@=-]+", student, re.ASCII):
        return student
    return re.sub(r"[^\w.,@=-]+", "_", student, flags=re.ASCII)[:40] + "-" + \
        hashlib.sha256(student.encode("utf-8", "surrogatepass")).hexdigest()[:10]
