"""Where the course keeps its files and caches (inside the repository, never in $HOME)."""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def cache_dir(kind: str) -> Path:
    """A cache folder under $COURSE_CACHE_DIR (default: <repo>/build/cache/<kind>)."""
    base = Path(os.environ.get("COURSE_CACHE_DIR") or ROOT / "build" / "cache")
    path = base / kind
    path.mkdir(parents=True, exist_ok=True)
    return path
