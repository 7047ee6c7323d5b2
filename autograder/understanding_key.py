"""The understanding checks' key (autograder.understanding draws the sheets): one CSV row per question, never part of
a student's sheet, and a session's answers scored against it."""

from __future__ import annotations

import csv
import math
from pathlib import Path

from kernels.paths import write_whole

KEY_COLUMNS = ["student", "question_id", "type", "key", "tolerance", "points", "slug", "mutant", "line"]


def key_rows(sheets) -> list[list[str]]:
    """The key, one row per question (KEY_COLUMNS): never part of a student's sheet."""
    return [[s.student, q.qid, q.kind, q.key, "" if q.tolerance is None else f"{q.tolerance:g}", f"{q.points:g}",
             q.slug, q.mutant, str(q.line)] for s in sheets for q in s.questions]


def write_key_csv(path: Path, sheets) -> Path:
    def make(tmp: Path) -> None:
        with tmp.open("w", newline="", encoding="utf-8", errors="backslashreplace") as f:
            w = csv.writer(f)
            w.writerow(KEY_COLUMNS)
            w.writerows(key_rows(sheets))

    return write_whole(Path(path), make)


# ------------------------------------------------------------------------------------------------ read-back
def _rows(path) -> list[list[str]]:
    with open(path, newline="", encoding="utf-8-sig", errors="surrogateescape") as f:
        rows = [r for r in csv.reader(f) if any(c.strip() for c in r)]
    if rows and len(rows[0]) > 1 and rows[0][0].strip().lower() == "student" and "question" in rows[0][1].lower():
        rows = rows[1:]  # the header (a student named "student" still has their rows)
    return rows


def _number(text: str) -> float | None:
    try:
        v = float(text.strip().removesuffix("%").strip().replace(",", "."))
    except ValueError:
        return None
    return v if math.isfinite(v) else None


def _right(kind: str, key: str, tol: str, answer: str) -> bool:
    if kind == "numerical":
        v = _number(answer)
        return v is not None and abs(v - float(key)) <= float(tol or 0) + 1e-9
    return answer.strip().strip("().").strip().lower() == key.lower()


def score_answers(answers_csv, key_csv) -> dict[str, dict]:
    """Each keyed student's {"score", "max", "questions": {question id: points}} from an answers CSV (student,
    question id, answer; a header row optional; rows in any order). A missing answer scores 0; a letter counts in
    any case and with white space or parentheses around it; a number with or without "%" (its band is the key's
    tolerance). When a student answered one question twice, the last row counts. Answers of unkeyed questions are
    ignored."""
    answers = {(r[0].strip(), r[1].strip()): r[2] for r in _rows(answers_csv) if len(r) >= 3}
    out: dict[str, dict] = {}
    for r in _rows(key_csv):
        student, qid, kind, key, tol, pts = r[0].strip(), *r[1:6]  # ids: students.student_id's, no end spaces
        s = out.setdefault(student, {"score": 0.0, "max": 0.0, "questions": {}})
        got = float(pts) if _right(kind, key, tol, answers.get((student, qid), "")) else 0.0
        s["questions"][qid] = got
        s["score"] += got
        s["max"] += float(pts)
    return out
