"""Take the graded answers out of a notebook by grade_id — as data, never by running the notebook.

One reader serves the gradebook (autograder.grading, autograder.calibration) and the notebook's own checks
(`autograder.check`, `grade`, `quiz`): what a student is told at the check is what the gradebook records.

    answer_verdict(source, "QUIZ")   # the verdict of an answer cell's source: Verdict(value, reason, attempted)
    local_verdict("QUIZ", QUIZ, In)  # the same verdict as the local check gives it: the newest cell of IPython's
                                     # input history that sets QUIZ, read alike and compared with QUIZ's runtime value
    read_answer(source, "QUIZ", gid) # the grader's full reading: the verdict, plus flags for any other code in the cell

`Verdict.reason` is None when the answer will be graded as `Verdict.value`, else the one line why it will not be
(the local check prints it as "this will not be graded: <reason>"). `Verdict.attempted` is False for nbgrader's stub
left in place (`raise NotImplementedError()`, as a statement, or inside the kernel's string). Verdicts compare by
(value, reason, attempted): for a cell `src` whose run leaves the variable `v` holding `runtime`,
`local_verdict(v, runtime, ["", src]) == answer_verdict(src, v)` — the notebook and the gradebook agree.

What the reader accepts — the cell is parsed (`ast`), never run, and followed statement by statement as Python would
run it (the last assignment wins):
- literals written out: strings (raw, triple-quoted, implicit concatenation `"a" "b"`, f-strings without fields),
  numbers, and dicts, lists, tuples, sets of them; `+` of strings (parenthesised or not), `X = X + "..."`;
- `X = ...` (also `X: str = ...`, `A = X = "..."` for a string), `X += "..."`, `X |= {...}`;
- `QUIZ["q1"] = "d"` (and `+=` on an item), `QUIZ.update({...})` / `QUIZ.update(q1="d")` (also setdefault, pop,
  clear), `del QUIZ["q1"]`, `del X`, each on a dict the cell set before;
- a top-level `raise` ends the cell, as it does when run: the stub left in place below the answer costs nothing,
  an answer written below it is refused (delete the stub line);
- IPython syntax (`%matplotlib inline`, `!ls`) as IPython runs it: turned into calls by IPython's own transformer,
  as the notebook's history `In` holds them (other code); an answer set under a magic (`%%capture`) is refused.
Anything else that changes the answer variable — a call (`open("k.cu").read()`), another variable, an f-string with
`{...}` fields, a loop or `if` around the assignment, an item set before the dict exists — makes the answer
unreadable: value None, with the reason. Other code in the cell (imports, calls) is never run; it is reported as a
flag (`code-in-answer-cell`, and the named cheats: `torch-instead-of-kernel`, `side-stream`, ...) and otherwise
ignored. The reader follows the answer variable by its name only: a change through an alias or a function it is
passed to is not seen — the local check catches that case by comparing with the runtime value.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field, replace

_STUB = re.compile(r"raise\s+NotImplementedError")
STUB_LINE = "raise NotImplementedError()"  # nbgrader's stub in an answer cell
CODE_STUB = {"python": "# YOUR CODE HERE\n" + STUB_LINE}  # what replaces a solution region (nbgrader ClearSolutions;
# the nbgrader config and autograder.known.release_cell use this one value)


# Named cheats, recognised in answer-cell code (which is never run) by the calls it makes: each gets its own flag on
# top of code-in-answer-cell / torch-instead-of-kernel, so the report says what was tried.
_CHEATS = [
    ("side-stream", re.compile(r"(^|\.)(Stream|stream|ExternalStream|cudaStreamCreate\w*|cuStreamCreate\w*)$")),
    ("side-thread", re.compile(r"(^|\.)(Thread|ThreadPoolExecutor|Process|fork|submit)$")),
    ("cuda-graph", re.compile(r"(^|\.)(CUDAGraph|graph|make_graphed_callables|cudaGraphLaunch|cuGraphLaunch)$")),
    ("cached-result", re.compile(r"(^|\.)(lru_cache|cache)$")),
]

# What a refusal tells the student to do, after the reason (one line in all).
_HOW = "the grader reads the answer cell as text and never runs it: write the value out (strings, dicts, + of strings)"
_MAX_TEXT = 1 << 20  # the longest string an answer may build: `X += X` lines cannot make the grader build gigabytes
_DICT_METHODS = ("update", "setdefault", "pop", "clear")  # followed on a dict the cell set (popitem: order games)
# Methods that change a container in place: a call of one on the answer variable changes it (str has none).
_MUTATORS = {*_DICT_METHODS, "popitem", "append", "extend", "insert", "remove", "sort", "reverse", "add", "discard",
             "__setitem__", "__delitem__", "__ior__", "__iadd__"}
_UNSET = object()  # the answer variable before the cell sets it (or after `del`)


class AnswerError(ValueError):
    pass


class _Refused(Exception):
    """Why the answer variable's value cannot be read from the cell's text (a clause; _reason makes the line).
    how=False: a mistake Python too would stop at (no dict yet, a failing call), not code the grader does not run."""

    def __init__(self, why: str, how: bool = True):
        super().__init__(why)
        self.how = how


@dataclass
class Answer:
    grade_id: str
    value: object = None  # what the cell sets the answer variable to (read, never run), or None
    attempted: bool = True
    flags: list[str] = field(default_factory=list)
    problem: str | None = None  # why no value could be read: the one line "this will not be graded: ..." shows

    def verdict(self) -> "Verdict":
        return Verdict(self.value, self.problem, self.attempted)


@dataclass(frozen=True)
class Verdict:
    """The grader's verdict of an answer: graded as `value` when `reason` is None, else not graded, for `reason`."""
    value: object = None
    reason: str | None = None
    attempted: bool = True
    where: str | None = field(default=None, compare=False)  # the history entry the local check read ("In[7]")

    @property
    def graded(self) -> bool:
        return self.reason is None


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


def _code(node: ast.AST, width: int = 50) -> str:
    text = " ".join(ast.unparse(node).split())
    return text if len(text) <= width else text[:width - 3] + "..."


def _kind(value) -> str:
    return "not set" if value is _UNSET else f"a {type(value).__name__}"


# --------------------------------------------------------------------------------------- reading values written out
def _value(node: ast.expr, var: str, current):
    """The value of an expression written out (see the module docstring for the forms), else _Refused. `current`:
    the answer variable's value so far, which `X + "..."` may use while it is a string (immutable: no value can
    come to hold itself, so nothing the reader builds is larger than the text and _MAX_TEXT allow)."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.JoinedStr) and all(isinstance(v, ast.Constant) for v in node.values):
        return "".join(v.value for v in node.values)  # an f-string without fields (or `f"a" "b"`)
    if isinstance(node, ast.Name) and node.id == var:
        if isinstance(current, str):
            return current
        raise _Refused(f"`{var}` is used before this cell sets it" if current is _UNSET
                       else f"`{var}` ({_kind(current)}) is used in its own value")
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _value(node.left, var, current), _value(node.right, var, current)
        if isinstance(left, str) and isinstance(right, str):
            return _joined(left, right)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        number = _value(node.operand, var, current)
        if type(number) in (int, float, complex):
            return -number if isinstance(node.op, ast.USub) else number
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)) and not any(isinstance(e, ast.Starred) for e in node.elts):
        items = [_value(e, var, current) for e in node.elts]
        kind = {ast.List: list, ast.Tuple: tuple, ast.Set: set}[type(node)]
        return _safely(lambda: kind(items), node)  # a set of unhashable items fails in Python too
    if isinstance(node, ast.Dict) and None not in node.keys:
        out: dict = {}
        for k, v in zip(node.keys, node.values):  # evaluated in order; a repeated key keeps the last value
            key, item = _value(k, var, current), _value(v, var, current)
            _safely(lambda: out.__setitem__(key, item), node)
        return out
    raise _Refused(_describe(node))


def _describe(node: ast.expr) -> str:
    if isinstance(node, ast.Call):
        return f"`{_code(node)}` is a call"
    if isinstance(node, ast.Name):
        return f"`{node.id}` is a variable"
    if isinstance(node, ast.JoinedStr):
        return f"`{_code(node)}` is an f-string with {{...}} fields"
    return f"`{_code(node)}` is computed"


def _joined(left: str, right: str) -> str:
    if len(left) + len(right) > _MAX_TEXT:
        raise _Refused(f"the answer builds a string longer than {_MAX_TEXT} characters", how=False)
    return left + right


def _safely(op, node: ast.AST):
    """op() on values the reader built (builtin literals only: nothing of the student's runs), or _Refused when
    Python too would raise."""
    try:
        return op()
    except (TypeError, KeyError, IndexError, ValueError, AttributeError) as exc:
        raise _Refused(f"`{_code(node)}` fails when run ({type(exc).__name__}: {exc})", how=False) from None


# ---------------------------------------------------------------------------- following the answer variable's changes
def _root(node: ast.AST) -> ast.AST:
    while isinstance(node, (ast.Subscript, ast.Attribute, ast.Starred)):
        node = node.value
    return node


def _touches(node: ast.AST, var: str) -> bool:
    """Whether a statement may change `var`: binds or deletes it (anywhere inside, a loop's target included), stores
    into it (`var[...] = `, `var.x = `), calls a method of it that changes a container, or imports or defines it."""
    for n in ast.walk(node):
        if isinstance(n, ast.Name) and n.id == var and isinstance(n.ctx, (ast.Store, ast.Del)):
            return True
        if isinstance(n, (ast.Subscript, ast.Attribute)) and isinstance(n.ctx, (ast.Store, ast.Del)) \
                and isinstance(_root(n), ast.Name) and _root(n).id == var:
            return True
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in _MUTATORS \
                and isinstance(_root(n.func), ast.Name) and _root(n.func).id == var:
            return True
        if isinstance(n, ast.alias) and (n.asname or n.name.split(".")[0]) == var:
            return True
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and n.name == var:
            return True
        if _magic_body(n) is not None and any(_touches(m, var) for m in _magic_body(n)):
            return True
    return False


def _magic_body(node: ast.AST) -> list[ast.stmt] | None:
    """The statements an IPython magic runs as Python (`%time X = ...`, `%%capture` over the cell: IPython's
    `get_ipython().run_line_magic(name, text)` / `run_cell_magic(name, line, body)`), else None."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
            and node.func.attr in ("run_line_magic", "run_cell_magic") and node.args \
            and isinstance(node.args[-1], ast.Constant) and isinstance(node.args[-1].value, str):
        try:
            return ast.parse(node.args[-1].value).body
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return None
    return None


def _is_item(target: ast.AST, var: str) -> bool:
    """`var[key]`, one level deep."""
    return isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name) and target.value.id == var


def _dict_of(var: str, current, what: str) -> dict:
    if isinstance(current, dict):
        return current
    raise _Refused(f"{what} needs {var} to be a dict set above it in this cell; {var} is {_kind(current)} here"
                   + (f" (start with {var} = {{}})" if current is _UNSET else ""), how=False)


def _assign(target: ast.AST, value, var: str, current):
    """`target = value` in the answer variable's terms: its new value."""
    if isinstance(target, ast.Name):
        return value if target.id == var else current
    if _is_item(target, var):
        d = _dict_of(var, current, f"`{_code(target)} = ...`")
        key = _value(target.slice, var, current)
        _safely(lambda: d.__setitem__(key, value), target)
        return current
    if _touches(target, var):
        raise _Refused(f"`{_code(target)} = ...` sets {var} in a way the grader does not follow")
    return current  # another name or attribute: not the answer


def _apply(node: ast.stmt, var: str, current):
    """The answer variable's value after one top-level statement that touches it (_touches), else _Refused."""
    if isinstance(node, ast.Assign):
        value = _value(node.value, var, current)
        names = [t for t in node.targets if isinstance(t, ast.Name)]
        if isinstance(value, (dict, list, set)) and len(names) > 1 and any(t.id == var for t in names):
            raise _Refused(f"`{_code(node)}` binds {var} and another name to one {type(value).__name__}",
                           how=False)
        for target in node.targets:
            current = _assign(target, value, var, current)
        return current
    if isinstance(node, ast.AnnAssign):
        return current if node.value is None else _assign(node.target, _value(node.value, var, current), var, current)
    if isinstance(node, ast.AugAssign) and isinstance(node.op, (ast.Add, ast.BitOr)) \
            and (isinstance(node.target, ast.Name) and node.target.id == var or _is_item(node.target, var)):
        return _augment(node, var, current)
    if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call) and isinstance(node.value.func, ast.Attribute) \
            and isinstance(node.value.func.value, ast.Name) and node.value.func.value.id == var \
            and node.value.func.attr in _DICT_METHODS:
        return _method(node.value, var, current)
    if isinstance(node, ast.Delete):
        for target in node.targets:
            if isinstance(target, ast.Name) and target.id == var:
                current = _UNSET
            elif _is_item(target, var):
                d = _dict_of(var, current, f"`del {_code(target)}`")
                key = _value(target.slice, var, current)
                _safely(lambda: d.__delitem__(key), node)
            elif _touches(target, var):
                raise _Refused(f"`{_code(node)}` changes {var} in a way the grader does not follow")
        return current
    if isinstance(node, ast.Expr) and _magic_body(node.value) is not None:
        name = node.value.args[0].value if isinstance(node.value.args[0], ast.Constant) else "..."
        cell = "%" if node.value.func.attr == "run_cell_magic" else ""
        raise _Refused(f"{var} is set under the IPython magic %{cell}{name}")
    raise _Refused(f"`{_code(node)}` changes {var} in a way the grader does not follow")


def _augment(node: ast.AugAssign, var: str, current):
    """`var += "..."` (strings), `var |= {...}` (dicts), and the same on `var[key]`."""
    value = _value(node.value, var, current)
    if isinstance(node.target, ast.Name):
        old = current
    else:
        d = _dict_of(var, current, f"`{_code(node)}`")
        key = _value(node.target.slice, var, current)
        old = _safely(lambda: d[key], node)
    if isinstance(node.op, ast.Add) and isinstance(old, str) and isinstance(value, str):
        new = _joined(old, value)
    elif isinstance(node.op, ast.BitOr) and isinstance(old, dict) and isinstance(value, dict):
        old.update(value)  # `|=` changes the dict in place
        new = old
    else:
        raise _Refused(f"`{_code(node)}` on {_kind(old)} and {_kind(value)} is not a + of strings nor a |= of dicts")
    if isinstance(node.target, ast.Name):
        return new
    d[key] = new
    return current


def _method(call: ast.Call, var: str, current):
    """`var.update({...})`, `var.update(q1="d")`, `var.setdefault(k, v)`, `var.pop(k)`, `var.clear()` on a dict."""
    name = call.func.attr
    d = _dict_of(var, current, f"`{var}.{name}(...)`")
    if any(isinstance(a, ast.Starred) for a in call.args):
        raise _Refused(f"`{_code(call)}` unpacks arguments")
    args = [_value(a, var, current) for a in call.args]
    kwargs: dict = {}
    for kw in call.keywords:
        given = _value(kw.value, var, current)
        if kw.arg is None and not isinstance(given, dict):
            raise _Refused(f"`{_code(call)}` unpacks something other than a dict")
        more = given if kw.arg is None else {kw.arg: given}
        if set(more) & set(kwargs):
            raise _Refused(f"`{_code(call)}` gives one keyword twice", how=False)
        kwargs.update(more)
    _safely(lambda: getattr(d, name)(*args, **kwargs), call)
    return current


def _reason(why: _Refused, node: ast.stmt) -> str:
    return f"line {node.lineno}: {why}" + (f" — {_HOW}" if why.how else "")


# ------------------------------------------------------------------------------------------------------ the reader
def read_answer(source: str, var: str, grade_id: str = "?") -> Answer:
    """What the grader reads from an answer cell's source: the value it sets `var` to (the forms of the module
    docstring), or the one-line problem why it cannot be read; flags for any other code in the cell."""
    ans = Answer(grade_id)
    try:
        tree = _parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        where = f"line {exc.lineno}: {exc.msg}" if isinstance(exc, SyntaxError) else type(exc).__name__
        ans.problem = f"the answer cell is not valid Python ({where})"
        ans.attempted = not _STUB.search(source)
        return ans
    current, stop, stub_raise = _UNSET, None, False
    for node in tree.body:
        if stop is not None:  # below a top-level raise: never runs
            if _touches(node, var):
                ans.problem = ans.problem or (f"line {node.lineno} sets {var} below `{_code(stop)}` (line "
                                              f"{stop.lineno}), which ends the cell before it: delete that line")
            else:
                _flag_code(node, var, ans)
            continue
        if isinstance(node, ast.Raise):
            stop, stub_raise = node, bool(_STUB.search(ast.unparse(node)))
            if not stub_raise:
                _flag_code(node, var, ans)
        elif not _touches(node, var):
            _flag_code(node, var, ans)
        elif ans.problem is None:
            try:
                current = _apply(node, var, current)
            except _Refused as why:
                ans.problem = _reason(why, node)
            except RecursionError:
                ans.problem = _reason(_Refused("the value is nested too deep", how=False), node)
    # The stub's `raise` left in place: not attempted, unless the cell set a non-empty answer above it (a quiz
    # answered in the `QUIZ = {}` line the release gives, the stub below it forgotten: the answers are graded).
    if stub_raise and ans.problem is None and not (current is not _UNSET and current):
        ans.attempted = False
    if ans.problem is None and current is _UNSET and ans.attempted:
        ans.problem = f"the answer cell does not set {var} (write {var} = ... in it)"
    ans.value = None if ans.problem is not None or current is _UNSET else current
    if isinstance(ans.value, str) and _STUB.search(ans.value):
        ans.attempted = False
    return ans


def _parse(source: str) -> ast.Module:
    """The cell's statements. A cell with IPython syntax (`%time ...`, `!ls`, `%%capture`) is read as IPython runs it:
    turned into calls by IPython's own transformer — the text the notebook's input history (`In`) holds, so the
    notebook's check reads the same statements. Python's error for a cell that is not valid either way."""
    try:
        return ast.parse(source)
    except SyntaxError as exc:
        error = exc
    if re.search(r"^\s*[%!]", source, re.M):
        try:
            from IPython.core.inputtransformer2 import TransformerManager

            return ast.parse(TransformerManager().transform_cell(source))
        except Exception:  # noqa: BLE001 (no IPython, or not valid as IPython either: Python's error says why)
            pass
    raise error


read_literal = read_answer  # its name while it read `var = <literal>` lines only (tests and tools still call it)


def answer_verdict(source: str, var: str) -> Verdict:
    """The verdict of an answer cell's source: what the gradebook grades (`value`), or the one line why it will not
    grade it (`reason`). The local check gives the same verdict for the same cell (local_verdict)."""
    return read_answer(source, var).verdict()


def _flag_code(node: ast.stmt, var: str, ans: Answer) -> None:
    """Flag a statement of the answer cell that is not the answer (never run: named for the report)."""
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        names = ", ".join(a.name for a in node.names)
        ans.flags.append(f"code-in-answer-cell: answer cell imports {names}; only {var} is graded")
        return
    if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
        return  # a docstring / comment string
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


# ----------------------------------------------------------------------------- the same verdict, in the notebook
def latest_answer_cell(history, var: str) -> tuple[int, str] | None:
    """(n, source) of the newest entry of an IPython input history (`In`: In[n] is what execution n ran, magics
    already turned into calls) that sets `var` (_touches), or None. The cell being run is in it already."""
    for n in range(len(history) - 1, -1, -1):
        src = history[n]
        if not isinstance(src, str) or var not in src:
            continue
        try:
            tree = ast.parse(src)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            continue
        if any(_touches(node, var) for node in tree.body):
            return n, src
    return None


def local_verdict(var: str, runtime, history=None) -> Verdict:
    """The verdict the notebook's check gives the answer `var`, which holds `runtime` in the notebook's
    interpreter: the verdict of the newest cell of `history` (IPython's `In`) that sets it, read as the grader reads
    an answer cell — with a reason when the grader would read another value than `runtime`. Without a history
    (plain Python, tests) or a cell that sets `var`: the runtime value, graded."""
    found = latest_answer_cell(history, var) if history else None
    if found is None:
        return Verdict(runtime)
    n, src = found
    verdict = replace(answer_verdict(src, var), where=f"In[{n}]")
    if verdict.graded and not _same(verdict.value, runtime):
        verdict = replace(verdict, reason=f"the grader reads {var} from the text of the cell In[{n}] as "
                                          f"{_short(verdict.value)}, but here {var} is {_short(runtime)} "
                                          "(changed by code the grader does not run)")
    return verdict


def _same(a, b) -> bool:
    try:
        return type(a) is type(b) and bool(a == b)
    except Exception:  # noqa: BLE001 (a runtime value of the student's that cannot be compared: not the same)
        return False


def _short(value) -> str:
    if isinstance(value, str) and len(value) > 40:
        return f"a string of {len(value)} characters ({value[:24]!r}...)"
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."

