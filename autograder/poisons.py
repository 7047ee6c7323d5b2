"""The poisons of a mutant's site: whether the changed line's effect reaches the output (autograder.mutants asks a
mutant that changed nothing observable only where it does). Built from the unmutated kernel's source with
autograder.mutation's source helpers; measured by autograder.mutants_child._poisoned."""

from __future__ import annotations

import hashlib
import re

from .mutation import (_CONTROL, Mutant, _blank, _match, _match_back, expression_like, mask, statement_start,
                       top_level)
from .operators import Operator


# ------------------------------------------------------------------------------------------------ the poisons
# Whether a changed line's effect reaches the output (a trap shows only that it runs; a decoy that runs and is then
# overwritten passes that): the unmutated kernel with the changed value poisoned, wrong but safe (zero for a number or
# a vector, the negation for a condition; an address is never poisoned: a fault says nothing about the output), or
# with a statement left out. Each poison is (kind, source): "value" and "self" (the changed statement left out)
# decide at once; "near" (the statement a dropped one orders) and "use" (a statement that reads the declared name)
# are tried until one reaches the output. Their verdict: autograder.mutants_child._poisoned, each launched the way the
# instrument launches the unmutated kernel (the test shapes in order, a context of its own): a kernel cannot tell a
# poison's launches from the instrument's by what they launch (tests/test_mutants.py, decoy_senses.cu), nor a poison's
# source from its own at compile time (poison_prelude, decoy_names.cu).
def poison_prelude(source: str) -> tuple[str, str]:
    """(the helpers put above a "value" poison of `source`, the helper's name). The name is drawn from the digest of
    the unmutated source, so no kernel can name it (a kernel that held its own digest would be a fixed point of
    SHA-256), and a `#line 1` after the helpers gives the kernel's lines their own numbers: neither a call that
    compiles only where the helper is declared nor __LINE__ tells a poison from the kernel (decoy_names.cu)."""
    name = "p" + hashlib.sha256(source.encode()).hexdigest()[:20]
    return (f"template <class T> __device__ __forceinline__ T {name}(T) {{ return T{{}}; }}\n"
            f"__device__ __forceinline__ bool {name}(bool v) {{ return !v; }}\n"
            f"template <class T> __device__ T* {name}(T*) = delete;\n#line 1\n"), name


MAX_POISONS = 8


def statement_end(masked: str, s: int) -> int:
    """Where the statement that starts at masked[s] ends (one past its `;` or `}`): a control statement with its body
    (an if with its else), a braced block, a do-while, or a plain statement up to its `;` outside brackets."""
    n, i = len(masked), s
    while i < n and (masked[i].isspace() or masked.startswith("#", i)):
        i = (masked.find("\n", i) + 1 or n) if masked[i] == "#" else i + 1
    m = _CONTROL.match(masked, i)
    if m:
        close = _match(masked, m.end() - 1)
        if close < 0:
            return n
        e = statement_end(masked, close + 1)
        j = e + len(masked[e:]) - len(masked[e:].lstrip())
        return statement_end(masked, j + 4) if m.group(1) == "if" and re.match(r"else\b", masked[j:]) else e
    if re.match(r"do\b", masked[i:]):
        e = statement_end(masked, i + 2)
        return (masked.find(";", e) + 1) or n
    if i < n and masked[i] == "{":
        close = _match(masked, i, "{", "}")
        return n if close < 0 else close + 1
    for j, c in top_level(masked, i, n):
        if c in ")]}":  # the end of the block or argument list the statement stands in
            return j
        if c == ";":
            return j + 1
    return n


def _statement_at(masked: str, i: int) -> tuple[int, int]:
    s = statement_start(masked, i)
    return s, statement_end(masked, s)


def _skip(source: str, s: int, e: int) -> str:
    """The source with the statement source[s:e] left out (an empty statement in its place, lines kept) and nothing
    else: no helper a kernel could test for."""
    return source[:s] + _blank(source[s:e]) + ";" + source[e:]


def _neighbours(masked: str, s: int, e: int) -> list[tuple[int, int]]:
    """The statement after masked[s:e] in its block, then the one before (the work a dropped barrier or fence
    orders: a fence orders the writes before it for the copy after it); none across the block's braces."""
    out = []
    j = e + len(masked[e:]) - len(masked[e:].lstrip())
    if j < len(masked) and masked[j] not in "}":
        out.append(_statement_at(masked, j))
    return out + _before(masked, s)


def _before(masked: str, s: int) -> list[tuple[int, int]]:
    k = len(masked[:s].rstrip()) - 1
    if k >= 0 and masked[k] == ";":
        return [_statement_at(masked, k)]
    if k >= 0 and masked[k] == "}":  # a braced statement before it (an if's block, a loop's): from its head
        o = _match_back(masked, k, "}")
        head = len(masked[:o].rstrip())
        if head and masked[head - 1] == ")":  # a header: back over its brackets to the keyword
            c = _match_back(masked, head - 1)
            kw = re.search(r"\b(if|for|while|switch)\s*$", masked[:c])
            head = kw.start() if kw else o
        else:
            head = o
        lo = masked.rfind("\n", 0, masked.rfind("\n", 0, head))  # a #pragma on the line before goes with it
        if masked[lo + 1:head].strip().startswith("#pragma") and not masked[lo + 1:head].strip().count("\n"):
            head = lo + 1
        if o >= 0 and statement_end(masked, head) == k + 1:
            return [(head, k + 1)]
    return []


def _uses(masked: str, name: str, not_in: tuple[int, int]) -> list[tuple[int, int]]:
    """The statements that name `name` (in order, outside preprocessor lines and outside not_in)."""
    out = []
    for m in re.finditer(rf"\b{re.escape(name)}\b", masked):
        line = masked[masked.rfind("\n", 0, m.start()) + 1:m.start()]
        if not_in[0] <= m.start() < not_in[1] or line.lstrip().startswith("#"):
            continue
        span = _statement_at(masked, m.start())
        if span not in out and not (span[0] <= not_in[0] < span[1]):
            out.append(span)
    return out


def _use_poisons(source: str, masked: str, name: str, decl: tuple[int, int]) -> list[tuple[str, str]]:
    """Each statement that names `name` left out ("use"); then, for a use that itself declares a name (leaving it out
    does not compile), the statements that name that one."""
    first = _uses(masked, name, decl)
    out = [("use", _skip(source, s, e)) for s, e in first if not _declares(masked[s:e])]
    for s, e in first:
        d = _declares(masked[s:e])
        if d and d != name:
            out += [("use", _skip(source, us, ue)) for us, ue in _uses(masked, d, (s, e))]
    return out


_DECLARES = re.compile(r"[^=;\[{(]*?\b(\w+)\s*(?:\[|=|;|\{)")  # the name a declaration statement declares


def _declares(stmt: str) -> str | None:
    """The name a declaration statement declares (`const unsigned base = ...;`, `__shared__ float t[32][33];`), None
    for any other statement (an assignment, a call, a return, a control statement)."""
    stmt = "\n".join(ln for ln in stmt.splitlines() if not ln.lstrip().startswith("#")).strip()  # a pragma, a marker
    d = _DECLARES.match(stmt)
    if not d or _CONTROL.match(stmt):
        return None
    head = stmt[:d.start(1)].split()
    return d.group(1) if head and re.fullmatch(r"[\w:<>,*&()\s]+", " ".join(head)) \
        and head[0] not in ("return", "delete", "goto", "case", "else", "do") else None
_REMOVED = re.compile(r"[\s;]*(?:\(void\)0)?[\s;]*")  # an edit that leaves a statement out


def poison_sources(op: Operator, source: str, edits: list[tuple[int, int, str]],
                   constant: str | None = None) -> tuple[tuple[str, str], ...]:
    """The poisons of one site of `op` in the unmutated `source` (its edits in the source's coordinates), in the
    order to try: see the section's head. `constant`: the name whose value the site changes (a #define, a constexpr).
    A site whose change leaves a statement out (a dropped fence or barrier: leaving it out is the mutant) is poisoned
    by the statement next to it, the work it orders."""
    masked, out = mask(source), []
    a, b, new = edits[0]
    if op.move_after:  # the moved statement left out where it stands
        out.append(("self", _skip(source, a, b)))
    elif constant is not None:
        lo = masked.rfind("\n", 0, a) + 1
        decl = (lo, (masked.find("\n", a) + 1) or len(masked)) if masked[lo:a].lstrip().startswith("#") \
            else _statement_at(masked, a)
        out += _use_poisons(source, masked, constant, decl)
    else:
        s, e = _statement_at(masked, a)
        if op.drop or _REMOVED.fullmatch(new):
            out += [("near", _skip(source, ns, ne)) for ns, ne in _neighbours(masked, s, e)]
        else:
            text, m = source[a:b], masked[a:b]
            if expression_like(m):
                prelude, name = poison_prelude(source)
                out.append(("value", prelude + source[:a] + f"{name}({text})" + source[b:]))
            out.append(("self", _skip(source, s, e)))
            d = _declares(masked[s:e])
            if d:  # a declaration (leaving it out does not compile): the statements that read what it declares
                out += _use_poisons(source, masked, d, (s, e))
    return tuple(dict.fromkeys(out))[:MAX_POISONS]


def poisons_of(m: Mutant, base: str) -> tuple[tuple[str, str], ...]:
    """The poisons of mutant `m` of the unmutated source `base`."""
    return poison_sources(m.op, base, list(m.edits), m.constant)
