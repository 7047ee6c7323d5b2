"""The single writer: one finished task's gradebook rows, autograded notebooks and verdicts merged into the class's
grading folder (merge_result, the only writer of the class's gradebook), and the class's grades read back
(gradebook_rows)."""

from __future__ import annotations

import shutil
import warnings
from pathlib import Path

from .handin import week_notebooks
from .release import grading_dir
from .task import _link_or_copy, drop_copies, read_result


def merge_result(out: Path, grading: Path | None = None, move: bool = False) -> dict:
    """Write one finished task into the class's grading folder — the only writer of its gradebook. Replaces, never
    adds: the student's submission row is found or created, and each grade and comment of each notebook (keyed by
    assignment, student, notebook and cell) takes the task's value; a manual score already given is kept. The
    task's autograded notebooks and verdicts replace the student's (hard links where the file system allows).
    move=True (a pool task, merged once): the task folder then keeps the autograded notebooks' digests instead of
    the notebooks (`drop_copies`), so an old batch folder holds no copy of a hand-in. Running it twice changes
    nothing (a kind already moved out is left as the class has it)."""
    from nbgrader.api import Gradebook, MissingEntry


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
