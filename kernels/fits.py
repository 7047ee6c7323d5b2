"""A slow model fit, computed once per input and per version of the library: `kept` wraps a least-squares fit (seconds
to half a minute on a CPU: the attention overlap model's pattern search) so that the tests, the notebooks and the
bench of one machine, in one process or many, compute it once per record rather than once per caller.

    @kept
    def fit_overlap(rows, fit_rows=OVERLAP_FIT_ROWS, sms=132) -> dict: ...

The key is the function's module and name, its arguments (their repr: only plain data — str, int, float, bool, None
and lists, tuples and dicts of them; a call with anything else is not kept) and the text of every Python file of
kernels/ (`library_hash`: any change to the library's code is another key). The result is kept in the process and on
disk under $COURSE_CACHE_DIR/fits as JSON, written once among processes (kernels.paths.made_once: a second process
waits for the first's result); a result JSON does not give back exactly (a tuple, a NaN, a key that is no string) is
kept in the process only, as is every result where the cache folder cannot be written. Each caller gets its own copy.

Only for functions whose result follows from their arguments and the library's Python code alone: no file read (a
cubin, a record), no module state a caller may change (a test that patches a constant the function reads would get
the unpatched result). A caller that patches the kept function itself (monkeypatch.setattr(model, "fit_overlap", ..))
replaces the wrapper and is unaffected.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import json
from pathlib import Path
from typing import Callable

from .paths import cache_dir, made_once

__all__ = ["kept", "library_hash", "plain_repr"]

LIBRARY = Path(__file__).resolve().parent
_PLAIN = (str, int, float, bool, type(None))
_MEMORY: dict[str, object] = {}
_HASHED: dict[tuple, str] = {}


def plain_repr(x) -> str | None:
    """repr(x) where x is plain data (exact types: str, int, float, bool, None; list, tuple and dict of them), whose
    repr says all of it (a float's repr gives it back exactly; dict order counts: another order is only another
    key); None otherwise (an object's repr may name its address, reused by another object later)."""
    def plain(v) -> bool:
        if type(v) in _PLAIN:
            return True
        if type(v) in (list, tuple):
            return all(plain(e) for e in v)
        if type(v) is dict:
            return all(plain(k) and plain(e) for k, e in v.items())
        return False

    return repr(x) if plain(x) else None


def library_hash() -> str:
    """SHA-256 of the path and text of every Python file of kernels/, read again whenever a file's size or
    modification time changes (an edit in a running notebook's session counts from its next call)."""
    files = sorted(p for p in LIBRARY.rglob("*.py") if "__pycache__" not in p.parts)
    stamp = tuple((str(p), st.st_size, st.st_mtime_ns) for p in files for st in (p.stat(),))
    if stamp not in _HASHED:
        h = hashlib.sha256()
        for p in files:
            h.update(str(p.relative_to(LIBRARY)).encode() + b"\0" + p.read_bytes() + b"\0")
        _HASHED.clear()
        _HASHED[stamp] = h.hexdigest()
    return _HASHED[stamp]


def _gives_back(value) -> bool:
    try:
        return json.loads(json.dumps(value)) == value
    except (TypeError, ValueError):
        return False


def _on_disk(key: str, compute: Callable[[], object]):
    """compute()'s result, from $COURSE_CACHE_DIR/fits/<key>.json where a process wrote it, else computed (and
    written there when JSON gives it back exactly)."""
    made: list = []

    def make(tmp: Path) -> None:
        made.append(compute())
        if not _gives_back(made[0]):
            raise _NotKept
        tmp.write_text(json.dumps(made[0]))

    try:
        path = made_once(cache_dir("fits") / f"{key}.json", make)
    except _NotKept:
        return made[0]
    except OSError:  # no cache folder to write (a read-only copy of the course)
        return made[0] if made else compute()
    if made:
        return made[0]
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return compute()


class _NotKept(Exception):
    """The result is not one JSON gives back exactly: returned, not written."""


def kept(fn: Callable) -> Callable:
    """`fn`, its results kept per arguments and library version (see the module's docstring)."""
    name = f"{fn.__module__}.{fn.__qualname__}"

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        text = plain_repr((args, sorted(kwargs.items())))
        if text is None:
            return fn(*args, **kwargs)
        key = hashlib.sha256("\0".join((name, text, library_hash())).encode()).hexdigest()[:32]
        if key not in _MEMORY:
            _MEMORY[key] = _on_disk(key, lambda: fn(*args, **kwargs))
        return copy.deepcopy(_MEMORY[key])

    wrapper.uncached = fn
    return wrapper
