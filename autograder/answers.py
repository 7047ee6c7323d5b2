"""Take the graded answers out of a notebook by grade_id — as data, never by running the notebook.

An answer cell assigns string or dict literals (`ROW_BIAS_CU = r\"\"\"...\"\"\"`, `QUIZ = {"q1": "b"}`). The grader
reads those literals with `ast`; anything else the cell does (calling torch, patching the checker) is reported as a
flag and ignored: only the kernel source is graded.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field

_STUB = re.compile(r"raise\s+NotImplementedError")
_HIDDEN = re.compile(r"###\s*BEGIN HIDDEN TESTS(.*?)###\s*END HIDDEN TESTS", re.S)


# Named cheats, recognised in answer-cell code (which is never run) by the calls it makes: each gets its own flag on
# top of code-in-answer-cell / torch-instead-of-kernel, so the report says what was tried.
_CHEATS = [
    ("side-stream", re.compile(r"(^|\.)(Stream|stream|ExternalStream|cudaStreamCreate\w*|cuStreamCreate\w*)$")),
    ("side-thread", re.compile(r"(^|\.)(Thread|ThreadPoolExecutor|Process|fork|submit)$")),
    ("cuda-graph", re.compile(r"(^|\.)(CUDAGraph|graph|make_graphed_callables|cudaGraphLaunch|cuGraphLaunch)$")),
    ("cached-result", re.compile(r"(^|\.)(lru_cache|cache)$")),
]


class AnswerError(ValueError):
    pass


@dataclass
class Answer:
    grade_id: str
    value: object = None  # the literal, or None
    attempted: bool = True
    flags: list[str] = field(default_factory=list)
    problem: str | None = None  # why no value could be read


def cells_by_grade_id(nb) -> dict[str, dict]:
    cells = {}
    for cell in nb["cells"]:
        gid = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
        if gid:
            cells[gid] = cell
    return cells


def _source(cell) -> str:
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else src


def _describe_call(node: ast.Call) -> str:
    try:
        return ast.unparse(node.func)
    except Exception:  # noqa: BLE001
        return "a function"


def read_literal(source: str, var: str, grade_id: str = "?") -> Answer:
    """The literal assigned to `var` in a cell's source, with flags for any other code in the cell."""
    ans = Answer(grade_id)
    if _STUB.search(source) and f"{var}" not in source.split("raise")[0]:
        ans.attempted = False
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        ans.problem = f"the answer cell is not valid Python (line {exc.lineno}: {exc.msg})"
        if _STUB.search(source):
            ans.attempted = False
        return ans
    found = stub_raise = False
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) \
                and node.targets[0].id == var:
            try:
                ans.value = ast.literal_eval(node.value)
                found = True
            except ValueError:
                ans.problem = f"{var} must be a literal (a string or dict written out), not computed"
            continue
        if isinstance(node, ast.Raise) and _STUB.search(ast.unparse(node)):
            stub_raise = True
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names = ", ".join(a.name for a in node.names)
            ans.flags.append(f"code-in-answer-cell: answer cell imports {names}; only {var} is graded")
            continue
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            continue  # a docstring / comment string
        calls = [_describe_call(n) for n in ast.walk(node) if isinstance(n, ast.Call)]
        what = f"calls {', '.join(sorted(set(calls)))}" if calls else f"runs `{ast.unparse(node)[:60]}`"
        for flag, pattern in _CHEATS:
            hit = sorted({c for c in calls if pattern.search(c)})
            if hit:
                ans.flags.append(f"{flag}: answer cell calls {', '.join(hit)} (never run: the grader launches the "
                                 "kernel itself, on its timed stream)")
        if any(c.startswith(("torch", "F.", "cublas", "cudnn")) for c in calls):
            ans.flags.append(f"torch-instead-of-kernel: answer cell {what}; only the kernel source is graded")
        else:
            ans.flags.append(f"code-in-answer-cell: answer cell {what}; only {var} is graded")
    # The stub's `raise` left in place: not attempted, unless the cell also assigns a non-empty literal (a quiz
    # answered in the `QUIZ = {}` line the release gives, the stub below it forgotten: the answers are graded).
    if stub_raise and not (found and ans.value):
        ans.attempted = False
    if isinstance(ans.value, str) and _STUB.search(ans.value):
        ans.attempted = False
    if not found and ans.problem is None and ans.attempted:
        ans.problem = f"the answer cell does not assign {var} = <literal>"
    return ans


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
