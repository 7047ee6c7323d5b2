"""Generate the student release weeks/<week>/ from solutions/<week>/ with `nbgrader generate_assignment`.

    python -m autograder.release            # every week in solutions/
    python -m autograder.release week1

weeks/ is never edited by hand; tests/test_release.py fails when it is stale.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CONFIG = ROOT / "autograder" / "nbgrader_config.py"


def grading_dir() -> Path:
    """Where grading state lives (submissions, gradebook, feedback): $COURSE_GRADING_DIR or build/grading."""
    return Path(os.environ.get("COURSE_GRADING_DIR") or ROOT / "build" / "grading")


def nbgrader(*args: str, cwd: Path = ROOT, env: dict | None = None, check: bool = True,
             timeout: float | None = None) -> subprocess.CompletedProcess:
    """Run the nbgrader command line with the course's config from the course root."""
    e = dict(os.environ if env is None else env)
    e["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, e.get("PYTHONPATH", "").split(os.pathsep))])
    # nbgrader finds nbgrader_config.py through the Jupyter config path (it has no --config alias).
    e["JUPYTER_CONFIG_PATH"] = os.pathsep.join([str(CONFIG.parent), *filter(None, e.get("JUPYTER_CONFIG_PATH", "").split(os.pathsep))])
    # nbgrader calls the `alembic` script by name: the interpreter's bin folder goes first on PATH.
    e["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), e.get("PATH", "")])
    cmd = [sys.executable, "-m", "nbgrader", *args]
    res = subprocess.run(cmd, cwd=cwd, env=e, capture_output=True, text=True, timeout=timeout)
    if check and res.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd[2:4])} failed ({res.returncode}):\n{res.stdout[-3000:]}\n{res.stderr[-5000:]}")
    return res


def weeks() -> list[str]:
    return sorted(p.name for p in (ROOT / "solutions").iterdir() if p.is_dir() and any(p.glob("*.ipynb")))


def release(week: str) -> Path:
    nbgrader("generate_assignment", week, "--force")
    return ROOT / "weeks" / week


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    for week in argv or weeks():
        out = release(week)
        print(f"released {week} -> {out.relative_to(ROOT)}: {', '.join(p.name for p in sorted(out.glob('*.ipynb')))}")


if __name__ == "__main__":
    main()
