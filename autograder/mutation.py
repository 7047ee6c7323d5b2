"""The day's mutation operators applied to a student's own kernel source: each site found by parsing, one mutant per
operator and site (autograder.mutants runs them on the GPU).

    ops = operators("tma")                                    # the spec's [[exercises.tma_add.mutants]]
    for m in mutate("tma", source):                            # one mutant per operator and site
        m.op.id, m.line, m.before, m.after                     # "expect_tx_doubled", 53, "mbar_arrive...", "..."

1. Operators are data, in the grader spec of the day (`[[exercises.<ex>.mutants]]`), each one thing the day teaches
   broken on purpose: the `expect_tx` byte count doubled, the parity not flipped, the proxy fence removed, the ring
   cut to one stage. An operator names where it applies by what the course's kernels call (a helper of
   kernels/include: `mbar_wait`, `fence_proxy_async`, ...), a constant (`#define ..._STAGES`, `constexpr int`), or a
   pattern; the source is read with comments and strings masked, so a commented-out call is no site.
2. Each site is a mutant of its own, shown by its line in the student's answer string and the line as it was and as
   it becomes. A mutant keeps every line number (a removed call becomes `(void)0` on its line).
3. Each mutant carries its probes: the mutant with a trap placed where its change is (`probes`: the places to try, in
   order — the changed expression itself, then the start of the statement that holds it). autograder.mutants
   launches the first that compiles after the mutant's runs and timing: a mutant that changed nothing observable is
   asked only if the trap fired, i.e. the changed line ran in those launches (a decoy copy of the code in a branch
   that never runs takes no question). A constant's mutant (a `define`, or a pattern that edits a `#define` /
   constexpr / const line) has none: a constant reaches every line that uses it.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

from .operators import Operator
from .spec import load

# ------------------------------------------------------------------------------------------------ the operators
# (Operator, parse_operator: autograder.operators, which the spec loader reads them with)
def operators(slug: str, exercise: str | None = None) -> list[Operator]:
    spec = load(slug)
    ex = spec.exercises[exercise] if exercise else next(iter(spec.exercises.values()))
    return list(ex.mutants)


# ------------------------------------------------------------------------------------------------ reading source
_TOKEN = re.compile(r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', re.S)


def mask(source: str) -> str:
    """The source with comments and string / character literals blanked (same length, newlines kept): what is
    searched, so a site in a comment or a string is no site. The text spliced in is always the original's."""
    return _TOKEN.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), source)


_CLOSE = {"(": ")", "[": "]", "{": "}"}


def _match(text: str, i: int, open_: str = "(", close: str | None = None) -> int:
    """Index of the bracket closing the one at text[i] (masked text), or -1."""
    close = close or _CLOSE[open_]
    depth = 0
    for j in range(i, len(text)):
        c = text[j]
        if c == open_:
            depth += 1
        elif c == close:
            depth -= 1
            if depth == 0:
                return j
    return -1


def _match_back(text: str, i: int, close: str = ")") -> int:
    """Index of the bracket opening the one that closes at text[i] (masked text), or -1."""
    open_ = {v: k for k, v in _CLOSE.items()}[close]
    depth = 0
    for j in range(i, -1, -1):
        depth += (text[j] == close) - (text[j] == open_)
        if depth == 0:
            return j
    return -1


def top_level(text: str, lo: int, hi: int):
    """(j, text[j]) for each character of text[lo:hi] (masked) outside the brackets opened within it; a bracket that
    closes one opened before lo is yielded too, and ends the walk."""
    depth = 0
    for j in range(lo, hi):
        c = text[j]
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
            if depth < 0:
                yield j, c
                return
        elif depth == 0:
            yield j, c


def _split_args(text: str, lo: int, hi: int) -> list[tuple[int, int]]:
    """Spans of the top-level comma-separated arguments of text[lo:hi] (masked), white space trimmed."""
    spans, start = [], lo
    for j, c in top_level(text, lo, hi):
        if c == ",":
            spans.append((start, j))
            start = j + 1
    spans.append((start, hi))
    out = []
    for a, b in spans:
        while a < b and text[a].isspace():
            a += 1
        while b > a and text[b - 1].isspace():
            b -= 1
        if b > a:
            out.append((a, b))
    return out


@dataclass(frozen=True)
class Call:
    name: str
    start: int  # the name's first character
    end: int  # one past the closing parenthesis
    args: tuple[tuple[int, int], ...]
    targs: tuple[tuple[int, int], ...]


def calls(masked: str, name: str) -> list[Call]:
    """The calls of `name` in the masked source (a definition — `name(...) {` — is no call)."""
    out = []
    for m in re.finditer(rf"(?<![\w.>:]){re.escape(name)}\s*(<)?", masked):
        i = m.end()
        targs: list = []
        if m.group(1):
            close = _match(masked, m.start(1), "<", ">")
            if close < 0:
                continue
            targs = _split_args(masked, m.start(1) + 1, close)
            i = close + 1
        while i < len(masked) and masked[i].isspace():
            i += 1
        if i >= len(masked) or masked[i] != "(":
            continue
        close = _match(masked, i)
        if close < 0:
            continue
        after = masked[close + 1:].lstrip()
        if after.startswith("{") or re.match(r"(const\s*)?(noexcept\s*)?\{", after):
            continue  # a definition
        out.append(Call(name, m.start(), close + 1, tuple(_split_args(masked, i + 1, close)), tuple(targs)))
    return out


def _statement(masked: str, c: Call) -> tuple[int, int]:
    """The statement holding call `c`: from after the previous ; { } to its ;. A braced `if (...) { c; }` whose
    block holds only this statement is taken whole (its guard moves with it)."""
    a = max(masked.rfind(ch, 0, c.start) for ch in ";{}") + 1
    while a < c.start and masked[a].isspace():
        a += 1
    b = masked.find(";", c.end)
    b = len(masked) if b < 0 else b + 1
    if a == c.start:  # alone in a block? then maybe `if (...) { c; }`
        o = max(masked.rfind(ch, 0, a) for ch in ";{}")
        close = _match(masked, o, "{") if masked[o:o + 1] == "{" else -1
        if close > 0 and masked[b:close].strip() == "":
            g = max(masked.rfind(ch, 0, o) for ch in ";{}") + 1
            if re.fullmatch(r"\s*if\s*\(.*\)\s*", masked[g:o], re.S):
                while masked[g].isspace():
                    g += 1
                return g, close + 1
    return a, b


def _line(text: str, i: int) -> int:
    return text.count("\n", 0, i) + 1


# ------------------------------------------------------------------------------------------------ the mutants
@dataclass(frozen=True)
class Mutant:
    op: Operator
    site: int  # 1: the operator's first site in the source, ...
    line: int  # of the student's answer string (1-based)
    before: str  # the lines as written (stripped, joined)
    after: str  # as the mutant has them
    source: str
    probes: tuple[str, ...] = ()  # the mutant with a trap at its change, the places to try in order (see 3.)
    edits: tuple = ()  # the site's edits, in the source's coordinates: (start, end, new text) (autograder.poisons)
    constant: str | None = None  # the #define / constexpr name whose value the site changes

    @property
    def key(self) -> str:
        return f"{self.op.id}#{self.site}"

    @property
    def digest(self) -> str:
        return hashlib.sha256(self.source.encode()).hexdigest()[:16]

    def to_dict(self) -> dict:
        return {"key": self.key, "op": self.op.id, "site": self.site, "line": self.line, "before": self.before,
                "after": self.after, "change": self.op.change, "teaches": self.op.teaches, "digest": self.digest}


def _edit(source: str, edits: list[tuple[int, int, str]]) -> str:
    for a, b, new in sorted(edits, reverse=True):
        source = source[:a] + new + source[b:]
    return source


def _code(line: str) -> str:
    """A line as a question shows it: its comments left out."""
    m = mask(line)
    keep = "".join(c if (m[i] != " " or c.isspace() or not _in_comment(line, i)) else "" for i, c in enumerate(line))
    return " ".join(keep.split())


def _in_comment(line: str, i: int) -> bool:
    """Whether line[i] is inside a comment (not a string)."""
    for t in _TOKEN.finditer(line):
        if t.start() <= i < t.end():
            return t.group(0).startswith("/")
    return False


def _lines(text: str, a: int, b: int) -> str:
    lo = text.rfind("\n", 0, a) + 1
    hi = text.find("\n", b)
    return " ".join(c for ln in text[lo:len(text) if hi < 0 else hi].splitlines() if (c := _code(ln)))


def _blank(text: str) -> str:
    return re.sub(r"[^\n]", " ", text)


_DECL = re.compile(r"(?:constexpr|const)\s+(?:static\s+)?(?:unsigned\s+int|unsigned|int|long|size_t|uint32_t|int32_t)\s+")


def _constants(masked: str) -> list[tuple[str, int, int]]:
    """(name, value start, value end) of every `#define NAME value` and every declarator of a constexpr / const
    integer declaration (`constexpr int K_STAGES = 3, V_STAGES = 2;` is two)."""
    out = [(m.group(1), m.start(2), m.start(2) + len(m.group(2).rstrip()))
           for m in re.finditer(r"#\s*define\s+(\w+)[ \t]+([^\n]+)", masked)]
    for m in _DECL.finditer(masked):
        end = masked.find(";", m.end())
        for a, b in _split_args(masked, m.end(), len(masked) if end < 0 else end):
            d = re.match(r"(\w+)\s*=\s*", masked[a:b])
            if d:
                out.append((d.group(1), a + d.end(), b))
    return sorted(out, key=lambda t: t[1])


def _sites(op: Operator, source: str, masked: str) -> list[list[tuple[int, int, str]]]:
    """The edits of each site of `op` (a site: a list of (start, end, new text))."""
    sites = []
    if op.call and op.move_after is None:
        for c in calls(masked, op.call):
            if op.drop:
                sites.append([(c.start, c.end, "(void)0")])
                continue
            spans = c.args if op.arg is not None else c.targs
            k = op.arg if op.arg is not None else op.targ
            if k is None or k >= len(spans):
                continue
            a, b = spans[k]
            sites.append([(a, b, op.to.replace("{}", source[a:b]))])
    elif op.call:
        waits = calls(masked, op.move_after)
        for c in calls(masked, op.call):
            a, b = _statement(masked, c)
            earlier = [w for w in waits if w.end <= a]
            if not earlier:
                continue
            w = earlier[-1]
            _, wb = _statement(masked, w)
            if wb > a:
                continue
            moved = " ".join(source[a:b].split())
            sites.append([(a, b, _blank(source[a:b])), (wb, wb, f" {moved}")])
    elif op.define:
        for name, a, b in _constants(masked):
            if re.search(op.define, name):
                sites.append([(a, b, op.to.replace("{}", source[a:b]))])
    elif op.pattern:  # the groups' text is the source's (the match is found on the masked text: comments kept)
        for m in re.finditer(op.pattern, masked):
            def group(r, m=m):
                g = r.group(1) or r.group(2)
                g = int(g) if g.isdigit() else g
                return source[m.start(g):m.end(g)] if m.start(g) >= 0 else ""
            sites.append([(m.start(), m.end(), re.sub(r"\\(\d+)|\\g<(\w+)>", group, op.to))])
    elif op.swap:
        first = [next(iter(calls(masked, n)), None) for n in op.swap]
        if all(f is not None and f.targs for f in first):
            (a1, b1), (a2, b2) = first[0].targs[0], first[1].targs[0]
            sites.append([(a1, b1, source[a2:b2]), (a2, b2, source[a1:b1])])
    if op.where:  # the site's own lines (for a move: the moved statement's)
        sites = [s for s in sites if re.search(op.where, _lines(source, s[0][0], s[0][1]))]
    return sites


# ------------------------------------------------------------------------------------------------ the probes
# The trap a probe places: the launch that reaches it faults (the context is gone: it is the last launch of its
# process). An int, so that it fits an expression (`(course_probe_trap(), e)`) as well as a statement.
PROBE_PRELUDE = '__device__ __forceinline__ int course_probe_trap() { asm volatile("trap;"); return 0; }\n'
_CONTROL = re.compile(r"(if|while|for|switch)\s*\(")


def statement_start(masked: str, i: int) -> int:
    """Where the innermost statement that holds masked[i] starts: after the last `;`, `{` or `}` outside brackets
    before it, then into the unbraced body of an if / while / for / switch / else / do when i lies there (a trap placed
    at the start runs exactly when that statement is reached). A preprocessor line just before it (`#pragma unroll`)
    stays with its statement: the start is then right after the `;` / `{` / `}`, before that line."""
    stack, start = [], 0
    for j in range(i):
        c = masked[j]
        if c in "([":
            stack.append(c)
        elif c in ")]":
            if stack:
                stack.pop()
        elif not stack and c in ";{}":
            start = j + 1
    while True:
        raw, pre = start, False
        while start < i and (masked[start].isspace() or masked.startswith("#", start)):
            if masked[start] == "#":  # a #pragma (or a marker line) before it: the trap goes before that line
                pre, start = True, (masked.find("\n", start) + 1 or i)
            else:
                start += 1
        here = raw if pre else start
        m = _CONTROL.match(masked, start)
        kw = re.match(r"(else|do)\b", masked[start:])
        if m:
            close = _match(masked, m.end() - 1)
            if close < 0 or i <= close:
                return here  # in the condition (or the header): evaluated whenever the statement is reached
            start = close + 1
        elif kw:
            start += kw.end()
        else:
            return here


def expression_like(m: str) -> bool:
    """Whether masked text may be an expression (so wrapping it in a call can compile): brackets balanced, not a
    statement's end, not a control statement's head."""
    return bool(m.strip()) and all(m.count(o) == m.count(c) for o, c in ("()", "[]", "{}")) \
        and not m.rstrip().endswith((";", "}")) and not _CONTROL.match(m.lstrip())


def probe_sources(new: str, at: int, text: str, expression: bool = True) -> tuple[str, ...]:
    """The mutant `new` with a trap where its change `text` starts (index `at`): the changed text wrapped as an
    expression, then a statement placed at the start of the statement that holds it. The first that compiles is
    used (an expression in a template argument or an array bound does not compile wrapped)."""
    out, m = [], mask(text)
    if expression and expression_like(m):
        out.append(PROBE_PRELUDE + new[:at] + f"(course_probe_trap(), {text})" + new[at + len(text):])
    line_start = new.rfind("\n", 0, at) + 1
    if not new[line_start:at].lstrip().startswith("#"):
        s = statement_start(mask(new), at)
        out.append(PROBE_PRELUDE + new[:s] + "course_probe_trap(); " + new[s:])
    return tuple(dict.fromkeys(out))


def _new_spans(edits: list[tuple[int, int, str]]) -> list[tuple[int, str]]:
    """(start in the mutant, new text) of each edit, in source order."""
    out, delta = [], 0
    for a, b, new in sorted(edits):
        out.append((a + delta, new))
        delta += len(new) - (b - a)
    return out


def mutate(slug: str, source: str, exercise: str | None = None, ops: list[Operator] | None = None) -> list[Mutant]:
    """Every mutant of `source` (the student's kernel as handed in) under the day's operators: one per operator and
    site (at most the operator's max_sites), in operator order. A site whose edit changes nothing is skipped."""
    masked = mask(source)
    # a compile-time constant's change has no probe (see 3.): the lines of a #define or a constexpr
    const_lines = {_line(source, m.start()) for m in re.finditer(r"#\s*define\b|\bconstexpr\b", masked)}
    constants = _constants(masked)
    out = []
    for op in ops if ops is not None else operators(slug, exercise):
        n = 0
        for edits in _sites(op, source, masked):
            new = _edit(source, edits)
            if new == source:
                continue
            n += 1
            ea, eb = edits[0][0], max(edits[0][1], edits[0][0] + 1)  # the constant whose value the edit touches
            const = next((c for c, a, b in constants if a < eb and ea < b and masked[a:b].strip()), None)
            where = (tuple(edits), const)
            if op.move_after:  # (removed statement, insertion after the wait): shown at the moved statement's line
                (a, b, _), (w, _, text) = edits
                wa = max(masked.rfind(ch, 0, w - 1) for ch in ";{}") + 1
                out.append(Mutant(op, n, _line(source, a), _code(source[a:b]),
                                  f"moved up to line {_line(source, w)}, right after {_code(source[wa:w])}", new,
                                  probe_sources(new, w + 1, text[1:], expression=False), *where))
            else:  # shown by the lines that differ (a pattern may match more than it changes)
                old_l, new_l = source.splitlines(), new.splitlines()
                diff = [i for i, (x, y) in enumerate(zip(old_l, new_l)) if x != y] or [len(old_l) - 1]
                lo, hi = diff[0], diff[-1] + 1
                show = lambda ls: " ".join(c for ln in ls[lo:hi] if (c := _code(ln)))  # noqa: E731
                at, text = _new_spans(edits)[0]
                out.append(Mutant(op, n, lo + 1, show(old_l), show(new_l), new,
                                  () if op.define or _line(source, edits[0][0]) in const_lines
                                  else probe_sources(new, at, text), *where))
            if n >= op.max_sites:
                break
    return out
