"""The quizzes as data: each question's options and key, read from the solutions notebook (the markdown that asks,
the hidden test that holds the key), and how far a content-free rule would get by guessing.

    qs = questions(spec)                 # [Question(slug, "q1", key="b", options={"a": "...", ...}), ...]
    guess_scores(qs)                     # {"always b": 5, "longest": 2, ...}: the count each rule gets right

`quiz_key` and `quiz_reason` read one question's key and the instructor's reason from its hidden test (what the
grader reads too).

A quiz that a rule such as "the longest option, else b" passes teaches nothing; tests/test_quiz_guessing.py holds
every week under chance + 15 % for every rule here.
"""

from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass
from pathlib import Path

from .answers import cells_by_grade_id

ROOT = Path(__file__).resolve().parent.parent
_QUESTION = re.compile(r"\*\*(q\d+)\.\*\*(.*?)(?=\*\*q\d+\.\*\*|\Z)", re.S)
_OPTION = re.compile(r"\*\*([a-d])\)\*\*(.*?)(?=\*\*[a-d]\)\*\*|\Z)", re.S)
_HIDDEN = re.compile(r"###\s*BEGIN HIDDEN TESTS(.*?)###\s*END HIDDEN TESTS", re.S)


@dataclass(frozen=True)
class Question:
    slug: str
    name: str
    key: str | None
    options: dict[str, str]  # letter -> the option's text, whitespace collapsed


def questions(spec) -> list[Question]:
    nb = json.loads((ROOT / "solutions" / spec.assignment / spec.notebook).read_text())
    cells = cells_by_grade_id(nb)
    text = "\n".join("".join(c["source"]) for c in nb["cells"]
                     if c["cell_type"] == "markdown" and "**q1.**" in "".join(c["source"]))
    out = []
    for name, body in _QUESTION.findall(text):
        q = spec.quiz.questions.get(name)
        key = quiz_key("".join(cells[q.grade_id]["source"]), spec.quiz.answer_var, name) if q else None
        out.append(Question(spec.slug, name, key, {k: " ".join(t.split()) for k, t in _OPTION.findall(body)}))
    return out


def _specific(text: str) -> int:
    """How specific an option sounds: numbers, code and units, clauses after a colon or a dash."""
    return (len(re.findall(r"\d+", text)) + 2 * text.count("`") // 2 + text.count(":") + text.count(" — ")
            + len(re.findall(r"\b(?:bytes?|KiB|MiB|registers?|cycles?|warps?)\b", text)))


def _pick(options: dict[str, str], score, prefer: str = "b") -> str:
    """The letter a rule picks: the highest score, ties to `prefer`, then to the first letter."""
    best = max(score(t) for t in options.values())
    tied = [k for k, t in options.items() if score(t) == best]
    return prefer if prefer in tied else tied[0]


RULES = {
    **{f"always {c}": (lambda c: lambda o: c)(c) for c in "abcd"},
    "longest": lambda o: _pick(o, len),
    "shortest": lambda o: _pick(o, lambda t: -len(t)),
    "most words": lambda o: _pick(o, lambda t: len(t.split())),
    "most specific": lambda o: _pick(o, _specific),
}


def guess_scores(qs: list[Question]) -> dict[str, int]:
    """How many keys each content-free rule picks (a tie goes to b, the letter guessers favour)."""
    return {name: sum(rule(q.options) == q.key for q in qs if q.options) for name, rule in RULES.items()}


def chance(qs: list[Question]) -> float:
    return sum(1 / len(q.options) for q in qs if q.options)


# ------------------------------------------------------------------------------------------------- quiz keys
def _quiz_assert(grade_cell_source: str, var: str, question: str) -> ast.Assert | None:
    """The hidden test's `assert QUIZ["q<n>"] == "<key>"[, "Why ..."]` of one question (between ### BEGIN HIDDEN
    TESTS / ### END HIDDEN TESTS of the instructor's grade cell), or None."""
    m = _HIDDEN.search(grade_cell_source)
    if not m:
        return None
    for node in ast.walk(ast.parse(m.group(1))):
        test = getattr(node, "test", None)
        if isinstance(node, ast.Assert) and isinstance(test, ast.Compare) and len(test.ops) == 1 \
                and isinstance(test.ops[0], ast.Eq):
            left = test.left
            if isinstance(left, ast.Subscript) and isinstance(left.value, ast.Name) and left.value.id == var \
                    and ast.literal_eval(left.slice) == question:
                return node
    return None


def quiz_key(grade_cell_source: str, var: str, question: str) -> str | None:
    """The key of one quiz question, read from its hidden test: `assert QUIZ["q<n>"] == "<key>"`."""
    node = _quiz_assert(grade_cell_source, var, question)
    return None if node is None else ast.literal_eval(node.test.comparators[0])


def quiz_reason(grade_cell_source: str, var: str, question: str) -> str | None:
    """The reason the instructor gave for one quiz key: the message of its hidden test's assert,
    `assert QUIZ["q<n>"] == "<key>", "Why (<key>): ..."`. None when the assert carries no (literal) message."""
    node = _quiz_assert(grade_cell_source, var, question)
    if node is None or node.msg is None:
        return None
    try:
        return str(ast.literal_eval(node.msg)).strip() or None
    except ValueError:
        return None
