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
