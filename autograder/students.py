"""Student ids: decided once, from the names of the folders under submitted/ (autograder.pool's collection, the
report, `autograder grade --student`, `autograder forget`).
"""

from __future__ import annotations

import os
import unicodedata
from pathlib import Path

# A student's id is decided once, from the name of their folder under submitted/, by `student_id`: the grade and
# Slurm commands' roster (`class_roster`), each task (`submission_folder`: the id back to its folder), the report and
# `forget` all call it. The folder is never renamed; everything the grader writes (gradebook rows, task folders,
# autograded/, verdicts/, feedback/, the batch record, the CSVs) is keyed by the id.
_MAPPED = set("*?[]%\\")  # nbgrader's --student is a file glob (*?[]); sqlite URLs decode % and cut at ?; \ escapes


def student_id(name: str) -> str | None:
    r"""The id a submitted folder named `name` grades under; None for a folder that is not a student's.

    - A name starting with "." is not a student: a hidden folder is an editor's or a file manager's (.ipynb_checkpoints,
      .Trash-1000, .DS_Store), and nbgrader's own `*` globs (generate_feedback) skip it. Left out, with a note.
    - A plain name is its own id: any UTF-8 text, spaces, commas, quotes and non-ASCII letters included.
    - A name nbgrader cannot take as it is gets a safe id, the bytes at fault written `\xe9`-style: a name that is not
      valid UTF-8 (the file system hands it over surrogate-escaped; the gradebook, JSON and HTML are UTF-8: `caf\xe9`),
      one with a control or format character (a newline would split CSV rows and log lines; a right-to-left override
      would disguise it), one with a glob character `*?[]` (`--student=[ab]` would grade another folder, or none),
      with `%` (SQLAlchemy decodes it in the gradebook's sqlite:/// path: `caf%E9` opened another file) or `\`, and
      one with white space at either end (nbgrader strips it from --student), and the name `--` (argparse drops it as
      an option's value, even written `--student=--`: `\x2d\x2d`). A plain id holds no `\` and a mapped
      one decodes to its folder's bytes, so no two folders share an id."""
    if not name or name.startswith("."):
        return None
    if name == "--":
        return "\\x2d\\x2d"

    def plain(c: str) -> bool:  # a lone surrogate (a byte that is not UTF-8) is category Cs
        return c not in _MAPPED and unicodedata.category(c)[0] != "C"

    lead, tail = len(name) - len(name.lstrip()), len(name.rstrip())
    return "".join(c if plain(c) and lead <= i < tail else "".join(f"\\x{b:02x}" for b in os.fsencode(c))
                   for i, c in enumerate(name))


def shown_name(name: str) -> str:
    """A folder name as a person can read it: bytes that are not UTF-8 as \\xe9, control characters escaped (the
    name as it is, not an id: `student_id`)."""
    text = os.fsencode(name).decode("utf-8", "backslashreplace")
    return "".join(c if c.isprintable() else ascii(c)[1:-1] for c in text)


def class_roster(submitted: Path, week: str) -> tuple[dict[str, str], list[str]]:
    """The students who handed in `week`: ({id: folder name} for every submitted/<folder>/<week>/, sorted by id), and
    one note per folder mapped to a safe id or left out (`student_id`)."""
    roster, notes = {}, []
    folders = sorted(Path(submitted).iterdir(), key=lambda p: os.fsencode(p.name)) if Path(submitted).is_dir() else []
    for d in folders:
        if not (d / week).is_dir():
            continue
        sid = student_id(d.name)
        if sid is None:
            notes.append(f"submitted/{shown_name(d.name)}: a hidden folder (its name starts with '.'), not a "
                         "student: ignored")
        else:
            roster[sid] = d.name
            if sid != d.name:
                notes.append(mapped_note(d.name, sid))
    return dict(sorted(roster.items())), notes


def mapped_note(folder: str, sid: str) -> str:
    return (f"submitted folder '{shown_name(folder)}' graded as student id {sid} (its name is not UTF-8, or has a "
            "character nbgrader cannot take in a student id)")


def submission_folder(submitted: Path, student: str, week: str) -> Path:
    """submitted/<folder>/<week> of the student with id `student` (`student_id`): the folder of that name for a plain
    id, else the folder whose name maps to it. A student with no folder gets the plain path, which does not exist."""
    direct = Path(submitted) / student / week
    if "\\" in student and Path(submitted).is_dir():  # a mapped id (`student_id`): find the folder it came from
        for d in Path(submitted).iterdir():
            if student_id(d.name) == student:
                return d / week
    return direct
