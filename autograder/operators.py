"""Mutation operators: what a day teaches, broken on purpose (data in the day's grader spec, read by autograder.spec;
applied to a student's kernel by autograder.mutants)."""

from __future__ import annotations

import re
from dataclasses import dataclass

MAX_SITES = 2  # mutants per operator: the first sites in the source (a kernel rarely has more of one kind)


@dataclass(frozen=True)
class Operator:
    """One mutation a day teaches by. Exactly one of `call`, `define`, `pattern`, `swap` says where it applies:

    - call = "mbar_wait", arg = 1, to = "0"         the call's argument 1 (0-based) becomes `to` ({} = as written)
    - call = "bulk_wait_read", targ = 0, to = "..."  its template argument
    - call = "fence_proxy_async", drop = true        the call becomes (void)0
    - call = "mbar_arrive", move_after = "mbar_wait" the call's statement moved to just after the nearest earlier
                                                      call of `move_after` (a release before the reads)
    - define = "STAGES$", to = "1"                   a #define / constexpr / const integer whose name matches
    - pattern = "regex", to = "replacement"          any text (masked source; \\1 groups)
    - swap = ["setmaxnreg_inc", "setmaxnreg_dec"]    the template arguments of the first call of each swapped
    `where` (a regex) keeps only the sites whose text matches it (e.g. "empty" for the empty barrier's calls)."""

    id: str
    change: str  # what the question says was changed: "the byte count given to mbar_arrive_expect_tx doubled"
    teaches: str  # the lesson the measured outcome illustrates
    call: str | None = None
    arg: int | None = None
    targ: int | None = None
    to: str | None = None
    drop: bool = False
    move_after: str | None = None
    define: str | None = None
    pattern: str | None = None
    swap: tuple[str, str] | None = None
    where: str | None = None
    max_sites: int = MAX_SITES


class OperatorError(ValueError):
    pass


def parse_operator(d: dict, where: str) -> Operator:
    """An operator from its spec table, checked: one kind of site, the fields that kind needs."""
    kinds = [k for k in ("call", "define", "pattern", "swap") if d.get(k)]
    if len(kinds) != 1:
        raise OperatorError(f"{where}: give exactly one of call / define / pattern / swap (got {kinds or 'none'})")
    for k in ("id", "change", "teaches"):
        if not d.get(k):
            raise OperatorError(f"{where}: missing '{k}'")
    unknown = set(d) - set(Operator.__dataclass_fields__)
    if unknown:
        raise OperatorError(f"{where}: unknown field(s) {sorted(unknown)}")
    if d.get("call"):
        how = [k for k in ("arg", "targ") if d.get(k) is not None] + ["drop"] * (d.get("drop") is True) \
            + ["move_after"] * bool(d.get("move_after"))
        if len(how) != 1:
            raise OperatorError(f"{where}: a call operator rewrites one of arg / targ, or drops, or moves (got {how})")
        if how[0] in ("arg", "targ") and d.get("to") is None:
            raise OperatorError(f"{where}: '{how[0]}' needs 'to' (the new text; {{}} stands for the old)")
    if (d.get("define") or d.get("pattern")) and d.get("to") is None:
        raise OperatorError(f"{where}: needs 'to'")
    for k in ("define", "pattern", "where"):
        if d.get(k):
            try:
                re.compile(d[k])
            except re.error as exc:
                raise OperatorError(f"{where}: {k} is not a regular expression: {exc}") from None
    if d.get("swap") is not None and (not isinstance(d["swap"], (list, tuple)) or len(d["swap"]) != 2):
        raise OperatorError(f"{where}: swap names two calls")
    return Operator(**{**d, "swap": tuple(d["swap"]) if d.get("swap") else None})


