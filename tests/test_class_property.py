"""Random classes as people really hand them in, graded on CPU (`autograder grade week1 --gpus none`): whatever the
folder names and the hand-ins, nothing is silently lost or corrupted.

Hypothesis builds a class folder: student folders named with spaces, commas, quotes, accents, bytes that are not
UTF-8 and leading dots; day-1 notebooks saved under their name, renamed by a browser, nested in an unzipped folder,
duplicated with no canonical copy, empty, not JSON, a week-2 notebook in week1/, one with large outputs; the quiz
answered in every form a student writes (a dict, item assignments, `update`, concatenated strings, a form the grader
cannot read). Each class is graded, re-graded for one student, and graded again with a Ctrl-C at a random moment;
after each:

- every student folder is in the class report (HTML and CSV) and in the gradebook export exactly once;
- the export read back with a CSV reader gives the gradebook's ids and scores;
- no report or CSV is ever empty or partial (also after the Ctrl-C);
- the re-grade of one student changes only that student's rows;
- the quiz points in the gradebook are what the local check says the grader reads (autograder.answers.answer_verdict).

`make test` runs COURSE_PROPERTY_EXAMPLES examples (default 2, each about a minute on 2 cores); set it higher for a
longer search, and COURSE_PROPERTY_BIG_MB for the size of the large notebook (default 2; 100 as an instructor sees).
"""
from __future__ import annotations

import csv
import html as html_lib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import sigint_default
from hypothesis import HealthCheck, Phase, given, note, settings
from hypothesis import strategies as st

from autograder.release import ROOT

WEEK = "week1"
DAY1 = "day1_naive_loads.ipynb"
KEYS = {"q1": "d", "q2": "c", "q3": "a", "q4": "c", "q5": "d"}  # read from the hidden tests below, checked there
EXAMPLES = int(os.environ.get("COURSE_PROPERTY_EXAMPLES", "2"))
BIG_MB = float(os.environ.get("COURSE_PROPERTY_BIG_MB", "2"))

# ------------------------------------------------------------------------------------------------ strategies
_PIECES = ["ana", "Ø", "é", "ß", "李", " ", ",", "'", '"', "-", "_", "smith", "john", "0", "#", "?", "%", "+"]


@st.composite
def folder_names(draw) -> bytes:
    """A student's folder name as bytes: pieces people use, sometimes a leading dot, sometimes Latin-1 bytes."""
    text = "".join(draw(st.lists(st.sampled_from(_PIECES), min_size=1, max_size=5))).strip() or "x"
    raw = text.encode()
    if draw(st.booleans()):
        raw += draw(st.sampled_from([b"\xe9", b"\xff\xfe", b"M\xfcller"]))  # not UTF-8 (a Latin-1 zip's names)
    if draw(st.integers(0, 4)) == 0:
        raw = b"." + raw
    return raw


def _quoted_concat(draw, text: str) -> str:
    cut = draw(st.integers(0, len(text)))
    return f"{text[:cut]!r} + {text[cut:]!r}" if draw(st.booleans()) else f"({text[:cut]!r} {text[cut:]!r})"


@st.composite
def quiz_cells(draw) -> str:
    """The quiz answer cell, written in one of the forms students write (and sometimes one the grader refuses)."""
    letters = {q: draw(st.sampled_from("abcd")) for q in draw(st.lists(st.sampled_from(sorted(KEYS)), unique=True))}
    form = draw(st.sampled_from(["dict", "items", "update", "update_kw", "concat", "refused", "blank"]))
    head = "QUIZ = {}  # your answers, one letter each\n"
    if form == "dict":
        return f"QUIZ = {letters!r}\n"
    if form == "items":
        return head + "".join(f"QUIZ[{q!r}] = {a!r}\n" for q, a in letters.items())
    if form == "update":
        return head + f"QUIZ.update({letters!r})\n"
    if form == "update_kw":
        return head + f"QUIZ.update({', '.join(f'{q}={a!r}' for q, a in letters.items())})\n"
    if form == "concat":
        return head + "".join(f"QUIZ[{q!r}] = {_quoted_concat(draw, a)}\n" for q, a in letters.items())
    if form == "refused":  # a computed answer: the local check must say it will not be graded
        return head + "".join(f"QUIZ[{q!r}] = chr(ord({a!r}))\n" for q, a in letters.items())
    return head + "raise NotImplementedError()\n"


HANDINS = ["canonical", "renamed", "nested", "duplicated", "empty", "not_json", "other_week", "big", "nothing"]


@st.composite
def classes(draw) -> list[dict]:
    names = draw(st.lists(folder_names(), min_size=1, max_size=3, unique_by=lambda b: b.lower()))
    return [{"folder": n, "handin": draw(st.sampled_from(HANDINS)), "quiz": draw(quiz_cells())} for n in names]


# ------------------------------------------------------------------------------------------------ building a class
def _day1(quiz_cell: str, big_mb: float = 0.0) -> bytes:
    """The released day-1 notebook with the quiz cell replaced (and, for `big`, a cell output of big_mb MB)."""
    nb = json.loads((ROOT / "weeks" / WEEK / DAY1).read_text())
    for cell in nb["cells"]:
        if cell.get("metadata", {}).get("nbgrader", {}).get("grade_id") == "quiz_answers":
            cell["source"] = quiz_cell
            if big_mb:
                cell["outputs"] = [{"output_type": "stream", "name": "stdout",
                                    "text": "x" * int(big_mb * 2**20)}]
    return json.dumps(nb).encode()


def _write_handin(root: bytes, s: dict) -> None:
    week = os.path.join(root, s["folder"], WEEK.encode())
    os.makedirs(week, exist_ok=True)
    kind, body = s["handin"], _day1(s["quiz"])
    put = {"canonical": {DAY1: body}, "renamed": {"day1_naive_loads (1).ipynb": body},
           "nested": {"course-week1/" + DAY1: body},
           "duplicated": {"day1_naive_loads (1).ipynb": body, "day1_naive_loads-Copy1.ipynb": body},
           "empty": {DAY1: b""}, "not_json": {DAY1: b"{\"cells\": [\x00 not json"},
           "other_week": {"day1_swizzle.ipynb": (ROOT / "weeks" / "week2" / "day1_swizzle.ipynb").read_bytes()},
           "big": {DAY1: _day1(s["quiz"], BIG_MB)}, "nothing": {}}[kind]
    for rel, data in put.items():
        path = os.path.join(week, rel.encode())
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(data)


def _env(grading: Path) -> dict:
    env = dict(os.environ, COURSE_GRADING_DIR=str(grading), PYTHONPATH=str(ROOT), MPLCONFIGDIR=str(grading / "mpl"))
    for k in ("COURSE_SECRET_SEED", "COURSE_SECRET_SEED_FILE", "COURSE_FORCE_CPU"):
        env.pop(k, None)
    return env


def _grade(grading: Path, *extra: str, interrupt_after: float | None = None) -> subprocess.CompletedProcess | None:
    cmd = [sys.executable, "-m", "autograder.cli", "grade", WEEK, "--seed", "424242", "--gpus", "none", *extra]
    if interrupt_after is None:
        return subprocess.run(cmd, cwd=ROOT, env=_env(grading), capture_output=True, text=True, timeout=900)
    p = subprocess.Popen(cmd, cwd=ROOT, env=_env(grading), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                         start_new_session=True, preexec_fn=sigint_default)
    time.sleep(interrupt_after)
    if p.poll() is None:
        os.killpg(p.pid, signal.SIGINT)  # Ctrl-C in the instructor's terminal reaches the whole process group
    try:
        p.wait(timeout=300)
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
    return None


# ------------------------------------------------------------------------------------------------ reading it back
def _csv_rows(path: Path) -> list[dict]:
    text = path.read_text(encoding="utf-8")
    assert text.strip(), f"{path.name} is empty"
    rows = list(csv.DictReader(text.splitlines(keepends=True)))
    header = next(csv.reader(text.splitlines()[:1]))
    assert all(None not in r and len(r) == len(header) for r in rows), f"{path.name}: a row with the wrong width"
    return rows


def _gradebook(grading: Path) -> dict[str, float]:
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{grading / 'gradebook.db'}") as gb:
        return {s.student.id: s.score for s in gb.assignment_submissions(WEEK)}


def _id_of(folder: bytes) -> str | None:
    """The id the folder grades under (autograder.students); None: a hidden folder, not a student's."""
    from autograder.students import student_id

    return student_id(os.fsdecode(folder))


def _check_outputs(grading: Path, cls: list[dict]) -> dict:
    """Every folder once in the report (CSV and HTML) and in the export; the export equals the gradebook."""
    from autograder.students import shown_name

    ids = [i for s in cls if (i := _id_of(s["folder"])) is not None]
    assert len(set(ids)) == len(ids), f"two folders share an id: {ids}"
    report = _csv_rows(grading / f"report_{WEEK}.csv")
    names = [r["student"] for r in report]
    for i in ids:
        assert names.count(i) == 1, f"{i!r} is {names.count(i)} times in report_{WEEK}.csv: {names}"
    html = (grading / f"report_{WEEK}.html").read_text(encoding="utf-8")
    assert html.rstrip().endswith("</html>"), "the HTML report is partial"
    for s in cls:  # a hidden folder is no student's: the report names it as left out, once
        if _id_of(s["folder"]) is None:
            shown = html_lib.escape(f"submitted/{shown_name(os.fsdecode(s['folder']))}:", quote=True)
            assert html.count(shown) == 1, f"{s['folder']!r} is not named once as left out"
    export = _csv_rows(grading / f"grades_{WEEK}.csv")
    book = _gradebook(grading)
    got = {r["student_id"]: float(r["score"]) for r in export if r.get("assignment") == WEEK}
    assert got == pytest.approx(book), "the export read back with a CSV reader is not the gradebook"
    return {r["student"]: r for r in report}


def _quiz_points(quiz_cell: str) -> int:
    """What the local check says the grader reads from this cell, scored against the keys."""
    from autograder.answers import answer_verdict

    v = answer_verdict(quiz_cell, "QUIZ")
    value = v.value if isinstance(v.value, dict) else {}
    return sum(str(value.get(q, "")).strip().lower() == k for q, k in KEYS.items())


def test_the_keys_here_are_the_notebooks():
    from autograder.answers import _source, cells_by_grade_id
    from autograder.quizzes import quiz_key

    cells = cells_by_grade_id(json.loads((ROOT / "solutions" / WEEK / DAY1).read_text()))
    assert {q: quiz_key(_source(cells[f"quiz_{q}"]), "QUIZ", q) for q in KEYS} == KEYS


@pytest.mark.slow
# No shrinking: each example is three grading runs (a shrunk example would cost minutes per step); a failing
# example is printed as it was drawn.
@settings(max_examples=EXAMPLES, deadline=None, database=None, derandomize=os.environ.get("CI") == "true",
          suppress_health_check=list(HealthCheck), phases=[Phase.explicit, Phase.generate])
@given(cls=classes(), pick=st.integers(0, 2), interrupt_after=st.floats(0.5, 12.0))
def test_any_class_is_graded_whole(tmp_path_factory, cls, pick, interrupt_after):
    note(f"class: {cls!r}")
    grading = tmp_path_factory.mktemp("class")
    sub = os.path.join(os.fsencode(grading), b"submitted")
    for s in cls:
        _write_handin(sub, s)
    r = _grade(grading)
    if all(_id_of(s["folder"]) is None for s in cls):  # only hidden folders: nobody to grade, each one named
        from autograder.students import shown_name

        assert r.returncode == 1 and "no submissions under" in r.stdout, r.stdout[-3000:] + r.stderr[-3000:]
        for s in cls:
            assert f"submitted/{shown_name(os.fsdecode(s['folder']))}: a hidden folder" in r.stdout, r.stdout
        return
    assert r.returncode in (0, 2), r.stdout[-3000:] + r.stderr[-3000:]
    first = _check_outputs(grading, cls)
    book = _gradebook(grading)
    for s in cls:  # the quiz: what the local check reads is what the gradebook scored (every other part is 0 on CPU)
        sid = _id_of(s["folder"])
        if sid is None:
            continue
        if s["handin"] in ("canonical", "renamed", "nested", "big"):
            assert book[sid] == _quiz_points(s["quiz"]), (sid, s["handin"], s["quiz"])
        else:
            assert book.get(sid, 0.0) == 0.0, (sid, s["handin"])
    # a re-grade of one student changes only that student's rows
    students = [s for s in cls if _id_of(s["folder"]) is not None]
    one = students[pick % len(students)]
    export_before = {r["student_id"]: r for r in _csv_rows(grading / f"grades_{WEEK}.csv")}
    r = _grade(grading, "--student", _id_of(one["folder"]))
    assert r.returncode in (0, 2), r.stdout[-3000:] + r.stderr[-3000:]
    second = _check_outputs(grading, cls)
    export_after = {r["student_id"]: r for r in _csv_rows(grading / f"grades_{WEEK}.csv")}
    for s in students:
        sid = _id_of(s["folder"])
        if s is not one:
            assert second[sid] == first[sid], f"re-grading {_id_of(one['folder'])!r} changed {sid!r}'s report row"
            assert export_after.get(sid) == export_before.get(sid), f"... and {sid!r}'s export row"
    # Ctrl-C at a random moment of a full run: what is on disk is whole (the last complete one or the new one)
    _grade(grading, interrupt_after=interrupt_after)
    _check_outputs(grading, cls)
    shutil.rmtree(grading, ignore_errors=True)
