import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("COURSE_CACHE_DIR", str(ROOT / "build" / "cache" / "course"))

from kernels.device import cpu_mode_reason, is_hopper  # noqa: E402

# The one GPU marker of the course: GPU-only tests skip with a one-line reason.
requires_hopper = pytest.mark.skipif(not is_hopper(), reason=f"needs an sm_90 GPU: {cpu_mode_reason()}")


def run_notebook(nb, cwd: Path, pythonpath: Path, allow_errors: bool = False):
    """Execute a notebook (nbformat) top to bottom in a fresh kernel whose PYTHONPATH is `pythonpath` alone (e.g. a
    student release: not the course repository), in folder `cwd`. Returns the executed notebook."""
    from nbclient import NotebookClient

    env_before = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = str(pythonpath)  # the kernel nbclient starts inherits it
    try:
        NotebookClient(nb, timeout=600, allow_errors=allow_errors, kernel_name="python3",
                       resources={"metadata": {"path": str(cwd)}}).execute()
    finally:
        if env_before is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = env_before
    return nb
