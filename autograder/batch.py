"""A batch's set-up: the assignment as nbgrader's generate_assignment writes it (the template every task's gradebook
starts from, the class gradebook's assignment), and each lane's own: its GPU answers (gpu_healthy), its trusted
figures measured in a process that loads no student code (prepare_lane).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from .children import run_child
from .handin import expected_notebooks
from .release import CONFIG, nbgrader, ROOT
from .task import TEST_WEDGED, _in_hook
from kernels.paths import cache_dir, made_once
from .spec import all_specs


def _assignment_key(week: str) -> str:
    """What nbgrader's generate_assignment of `week` reads: the week's source folder, the course's nbgrader config
    (and the stub line it imports), nbgrader's and nbconvert's versions."""
    import nbconvert
    import nbgrader as nbg


    h = hashlib.sha256()
    stub = (ROOT / "autograder" / "__init__.py").read_text()
    for part in (nbg.__version__, nbconvert.__version__, CONFIG.read_text(), stub):
        h.update(part.encode() + b"\0")
    source = ROOT / "solutions" / week
    for f in sorted(p for p in source.rglob("*") if p.is_file()):
        h.update(str(f.relative_to(source)).encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()[:24]


def _generated(week: str) -> Path:
    """nbgrader's generate_assignment of `week` into an empty gradebook, once per content of what it reads
    (`_assignment_key`), cached under $COURSE_CACHE_DIR/nbgrader/<week>-<key>/: template.db (the assignment, its
    notebooks, cells and checksums, no student) and release/<week>/ (the notebooks it releases)."""
    def generate(tmp: Path) -> None:
        tmp.mkdir()
        nbgrader("generate_assignment", week, "--force", f"--CourseDirectory.db_url=sqlite:///{tmp / 'template.db'}",
                 f"--CourseDirectory.release_directory={tmp / 'release'}")

    # One writer: a second process (a parallel grading run, a test worker) waits for the first's output instead of
    # generating its own.
    return made_once(cache_dir("nbgrader") / f"{week}-{_assignment_key(week)}", generate)


def assignment_template(week: str) -> Path:
    """A gradebook holding the assignment and no student, written by nbgrader itself (`_generated`): the batches of
    one course version, and the test runs' many small classes, share one generate_assignment."""
    return _generated(week) / "template.db"


def assignment_release(week: str) -> Path:
    """The notebooks generate_assignment releases for `week` from the current sources (`_generated`): what weeks/<week>
    must hold."""
    return _generated(week) / "release" / week


def make_template(week: str, batch: Path) -> Path:
    """The batch's template gradebook (every task starts from a copy): `assignment_template`, copied in whole (made
    once: a folder that holds one already keeps it, as a Slurm submission's folder per sources key does)."""
    batch.mkdir(parents=True, exist_ok=True)
    return made_once(batch / "template.db", lambda tmp: shutil.copy(assignment_template(week), tmp))


def class_assignment(week: str, grading: Path) -> None:
    """Make the class gradebook know `week` as generate_assignment writes it. An absent gradebook starts as a copy of
    the template; one that last had the week generated from the same sources (a stamp beside it) and still holds it
    is left as it is; otherwise nbgrader's generate_assignment updates it."""
    key = _assignment_key(week)
    db, stamp = grading / "gradebook.db", grading / f".assignment_{week}"
    if not db.exists():
        grading.mkdir(parents=True, exist_ok=True)
        shutil.copy(assignment_template(week), db)
    elif not (stamp.exists() and stamp.read_text() == key and expected_notebooks(db, week)):
        nbgrader("generate_assignment", week, "--force", f"--CourseDirectory.release_directory={grading / 'release'}")
    stamp.write_text(key)


def prepare_lane(week: str, batch_dir: Path, env: dict | None = None) -> dict:
    """The trusted figures of one GPU for the batch, measured in a process of their own that loads no student code
    (autograder.harness.prepare_batch with this lane's CUDA_VISIBLE_DEVICES and COURSE_BATCH_DIR). Returns
    {"device", "ceilings"} ({} on a machine that grades on CPU)."""
    e = dict(os.environ if env is None else env, COURSE_BATCH_DIR=str(batch_dir))
    e["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, e.get("PYTHONPATH", "").split(os.pathsep))])
    r = run_child([sys.executable, "-m", "autograder.pool", "prepare", week], env=e, timeout=1800)
    if r.returncode != 0:
        raise RuntimeError(f"the trusted baseline failed: {(r.stderr or r.stdout)[-1500:]}")
    return lane_figures(batch_dir)


def lane_figures(batch_dir: Path) -> dict:
    """The device and ceilings a lane's baseline files hold (the same for every exercise of the batch)."""
    for f in sorted(Path(batch_dir).glob("baseline_*.json")):
        try:
            b = json.loads(f.read_text())
        except (OSError, ValueError):
            continue
        return {"device": b.get("device"), "ceilings": b.get("ceilings")}
    return {}


def _prepare_here(week: str) -> None:
    from .grading import reference_sources
    from .harness import _wants_gpu, prepare_batch

    if not _wants_gpu(None):
        print("no Hopper GPU here: no baseline to measure (grading on CPU)")
        return
    items = [(s.slug, name, src) for s in all_specs() if s.assignment == week
             for name, src in reference_sources(s).items()]
    prepare_batch(items, progress=lambda what: print(f"trusted {what}", flush=True))


# A fresh process's check that a GPU answers: 4 MB allocated, filled with 1.0f, synchronized and read back. Through
# the driver API (cuda.bindings, which cuda-core brings), not torch: a process that imports torch and makes its
# context takes seconds, and the check is on a lane's set-up path before its baselines. torch only where
# cuda.bindings is missing.
_HEALTH_CHECK = """
import sys
try:
    from cuda.bindings import driver as d
except ImportError:
    import torch
    x = torch.ones(1 << 20, device="cuda"); torch.cuda.synchronize()
    assert float(x.sum()) == float(1 << 20)
    sys.exit(0)
import numpy as np

def ok(r):
    err, rest = (r[0], r[1:]) if isinstance(r, tuple) else (r, ())
    if err != d.CUresult.CUDA_SUCCESS:
        sys.exit(f"the GPU does not answer: {getattr(err, 'name', err)}")
    return rest

n = 1 << 20
ok(d.cuInit(0))
(dev,) = ok(d.cuDeviceGet(0))
(ctx,) = ok(d.cuDevicePrimaryCtxRetain(dev))
ok(d.cuCtxSetCurrent(ctx))
(ptr,) = ok(d.cuMemAlloc(4 * n))
ok(d.cuMemsetD32(ptr, 0x3F800000, n))
ok(d.cuCtxSynchronize())
host = np.zeros(n, np.float32)
ok(d.cuMemcpyDtoH(host.ctypes.data, ptr, 4 * n))
ok(d.cuMemFree(ptr))
if not (host == 1.0).all():
    sys.exit("the GPU answered wrong: a 4 MB fill read back different")
"""


def gpu_healthy(lane: str | None, env: dict, timeout: float = 120.0) -> tuple[bool, str]:
    """Does this lane's GPU still answer? A 4 MB allocation, a fill, a synchronize and a read-back in a fresh process
    (_HEALTH_CHECK). A CPU lane (no GPU, or COURSE_FORCE_CPU) is always healthy."""
    if _in_hook(TEST_WEDGED, lane):
        return False, "the GPU does not answer (test hook)"
    if lane is None or env.get("COURSE_FORCE_CPU"):
        return True, ""
    try:
        r = subprocess.run([sys.executable, "-c", _HEALTH_CHECK], env=env, capture_output=True, text=True,
                           timeout=timeout)
    except subprocess.TimeoutExpired:
        return False, f"a 4 MB fill did not finish in {timeout:.0f} s"
    if r.returncode != 0:
        return False, (r.stderr or "").strip().splitlines()[-1:][0] if r.stderr.strip() else f"exit {r.returncode}"
    return True, ""
