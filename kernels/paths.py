"""Where the course keeps its files and caches (inside the repository, never in $HOME)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parent.parent


def cache_dir(kind: str) -> Path:
    """A cache folder under $COURSE_CACHE_DIR (default: <repo>/build/cache/<kind>)."""
    base = Path(os.environ.get("COURSE_CACHE_DIR") or ROOT / "build" / "cache")
    path = base / kind
    path.mkdir(parents=True, exist_ok=True)
    return path


def made_once(path: Path, make: Callable[[Path], None]) -> Path:
    """`path` (a file or a folder), made once among every process that shares it (parallel test workers, grading
    lanes and runs): `make(tmp)` writes what `path` must hold at `tmp`, which is then renamed to `path`, so no reader
    sees half of it; a process that finds another making it waits (an flock on a file beside it, released by a process
    that dies) and takes its result. Nothing is left when `make` raises. Returns `path`."""
    import fcntl

    if path.exists():
        return path
    with open(path.with_name(f".{path.name}.lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if path.exists():  # made by the process we waited for
            return path
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        try:
            make(tmp)
            tmp.replace(path)
        finally:
            if tmp.is_dir():
                shutil.rmtree(tmp, ignore_errors=True)
            else:
                tmp.unlink(missing_ok=True)
    return path


def write_whole(path: Path, make) -> Path:
    """Write `path` whole or not at all: `make` (text, or a function that writes the file it is given) writes a
    temporary file in the same folder (the same file system: os.replace is atomic), which then replaces `path`. A
    crash, an exception or Ctrl-C inside `make` removes the temporary file and leaves what `path` held before (a
    killed process leaves only a `.<name>.<pid>.tmp` beside it): a reader never sees an empty or partial report, CSV
    or record. Text is UTF-8; a character that cannot be encoded (a surrogate-escaped byte of a file name) is written
    as its escape (\\udcff) instead of failing half-way. The one helper for this (made_once is its write-once
    sibling)."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        if callable(make):
            make(tmp)
        else:
            tmp.write_text(make, encoding="utf-8", errors="backslashreplace")
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path


def cuda_tool(name: str, env: str | None = None) -> str | None:
    """A CUDA toolkit program (nvdisasm, cuobjdump, ncu, compute-sanitizer): $env if set, then cuda.pathfinder (the
    pip wheels and CUDA_HOME), PATH, /usr/local/cuda/bin and any /usr/local/cuda-*/bin. None if none has it."""
    cands = [os.environ.get(env) if env else None]
    try:
        import cuda.pathfinder as pf

        cands.append(pf.find_nvidia_binary_utility(name))
    except Exception:  # noqa: BLE001 - not installed, or a name it does not know: the other places remain
        pass
    cands += [shutil.which(name), f"/usr/local/cuda/bin/{name}",
              *sorted(str(p) for p in Path("/usr/local").glob(f"cuda-*/bin/{name}"))]
    return next((str(c) for c in cands if c and Path(c).is_file()), None)
