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

# How `make test` spreads the suite over its workers (pytest-xdist, `-n auto --dist loadfile`): the scheduler below
# (pytest_xdist_make_scheduler) hands out units of work. A unit is one test file, as with plain loadfile (its module
# fixtures are built once, on one worker), except:
#  - a file named in SPREAD: each of its tests is a unit of its own (its slow tests hold no module fixture worth
#    sharing, and one worker would otherwise run them one after the other while the other waits at the end);
#  - GROUPS: tests (or files) that share a session fixture form one unit, so that one worker builds it once.
# Units that hold tests marked `slow` start first, most slow tests first, so that no long unit is left for the end;
# the rest keep their order. (Compiled cubins and their SASS are cached on disk, build/cache/course/{nvrtc,sass}:
# a kernel that two workers both need is compiled and disassembled once.) xdist's own `--dist loadgroup` is not
# used: with pytest 9 its xdist_group marks are ignored (it rewrites a node id attribute pytest 9 no longer reads).
SPREAD = {"tests/test_release.py", "tests/test_student_release.py", "tests/test_slurm.py", "tests/test_pipeline.py",
          "tests/test_known_mutations.py", "tests/test_hangs.py"}
GROUPS = {"tests/test_instructor_workflow.py": "graded_class",  # both read conftest.graded_class
          "tests/test_release.py::test_nbgrader_autograde_round_trip_on_cpu": "graded_class"}


def work_unit(nodeid: str) -> str:
    path = nodeid.split("::")[0]
    for key in (nodeid.split("[")[0], path):
        if key in GROUPS:
            return GROUPS[key]
    return nodeid if path in SPREAD else path


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: ten seconds or more on a 2-core machine (a grading run, a notebook run, "
                                       "a release check); `make test` starts these first (see above)")


@pytest.hookimpl(tryfirst=True, optionalhook=True)  # before xdist's own; without xdist, never called
def pytest_xdist_make_scheduler(config, log):
    if config.getvalue("dist") not in ("loadfile", "loadgroup"):
        return None
    from xdist.scheduler import LoadScopeScheduling

    class Units(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return work_unit(nodeid)

    config.option.loadscopereorder = False  # the order is pytest_collection_modifyitems's
    return Units(config, log)


def pytest_collection_modifyitems(config, items):
    units = [work_unit(item.nodeid) for item in items]
    slow: dict[str, int] = {}
    first: dict[str, int] = {}
    for i, (u, item) in enumerate(zip(units, items)):
        slow[u] = slow.get(u, 0) + (item.get_closest_marker("slow") is not None)
        first.setdefault(u, i)
    order = sorted(range(len(items)), key=lambda i: (-slow[units[i]], first[units[i]], i))
    items[:] = [items[i] for i in order]


def sigint_default() -> None:
    """preexec_fn of a child a test interrupts: SIGINT's default action, whatever the suite was started from. A shell
    starts a background job (`make test &`) with SIGINT ignored, an ignored signal stays ignored across exec, and a
    Python started so never raises KeyboardInterrupt: the Ctrl-C the test sends would be lost."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_DFL)


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


HOSTILE_MARKUP = ('<script>document.title = "owned"</script> <img src="x" onerror="alert(1)"> '
                  '<a href="javascript:alert(2)">notes</a> {{ 7 * 7 }}')


@pytest.fixture(scope="session")
def graded_class(tmp_path_factory):
    """One class of week 1 graded once (`autograder grade week1 --seed-file ... --gpus none`, CPU mode), for every
    test that reads a graded class: tests/test_instructor_workflow.py (on a copy it may change) and the nbgrader round
    trip of tests/test_release.py. Its students: the synthetic cohort's `blank`, `malformed` and `tamper`; `renamed`
    (tamper's day-1 notebook saved by a browser as `day1_naive_loads (1).ipynb`); `nested` (the same notebook in a
    sub-folder: an unzipped hand-in); `solution` (the week's solutions notebooks as they are). The gradebook also knows
    week 2, with no submission (as after `make release`). Tests that use it are one unit of work (GROUPS), so that
    one worker grades the class once for all of them."""
    import shutil
    import subprocess
    import warnings

    from nbgrader.api import Gradebook

    from autograder.cohort import build

    week, day1 = "week1", "day1_naive_loads.ipynb"
    root = tmp_path_factory.mktemp("graded-class")
    grading = root / "grading"
    sub = grading / "submitted"
    build(sub, week, ["blank", "malformed", "tamper"])
    (sub / "renamed" / week).mkdir(parents=True)
    shutil.copy(sub / "tamper" / week / day1, sub / "renamed" / week / "day1_naive_loads (1).ipynb")
    (sub / "nested" / week / "course-week1").mkdir(parents=True)
    shutil.copy(sub / "tamper" / week / day1, sub / "nested" / week / "course-week1" / day1)
    # ...with markup of the student's own that would run in whoever opens the feedback page (an instructor too)
    import nbformat

    page = sub / "nested" / week / "course-week1" / day1
    nb = nbformat.read(str(page), as_version=4)
    nb.cells.insert(0, nbformat.v4.new_markdown_cell(HOSTILE_MARKUP))
    nbformat.write(nb, str(page))
    (sub / "solution" / week).mkdir(parents=True)
    for nb in (ROOT / "solutions" / week).glob("*.ipynb"):
        shutil.copy(nb, sub / "solution" / week / nb.name)
    path = os.environ["PATH"]
    os.environ["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), path])  # nbgrader runs `alembic`
    try:
        with warnings.catch_warnings(), Gradebook(f"sqlite:///{grading / 'gradebook.db'}") as gb:
            warnings.simplefilter("ignore")
            gb.add_assignment("week2")
    finally:
        os.environ["PATH"] = path
    seed = "918273645"
    seed_file = root / "secret_seed"
    seed_file.write_text(seed + "\n")
    env = dict(os.environ, COURSE_GRADING_DIR=str(grading), PYTHONPATH=str(ROOT), COURSE_FORCE_CPU="1",
               MPLCONFIGDIR=str(root / "mpl"))
    for k in ("COURSE_SECRET_SEED", "COURSE_SECRET_SEED_FILE"):
        env.pop(k, None)
    r = subprocess.run([sys.executable, "-m", "autograder.cli", "grade", week, "--seed-file", str(seed_file), "--gpus",
                        "none"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert (grading / f"batch_{week}.json").exists(), r.stdout[-3000:] + r.stderr[-3000:]
    return {"grading": grading, "run": r, "seed_file": seed_file, "seed": seed, "week": week}


@pytest.fixture
def fake_claims_step(monkeypatch, tmp_path):
    """make gpu-test's 'claims rounds' step (tools/gpu_claims.py) with its GPU work faked, writing under tmp_path
    (tests/test_claims_rounds.py, tests/test_copy_rounds.py): fake_claims_step(measured, device) -> (asked, fake),
    fake the step's measure_rounds (measured[slug], each slug asked for appended to asked), on a GPU named `device`,
    with COURSE_RECORD set."""
    monkeypatch.syspath_prepend(str(ROOT / "tools"))
    import gpu_claims  # tools/ is not a package: importable only once on sys.path

    def setup(measured: dict, device: str):
        asked: list = []

        def fake(slug, rounds=None, datas=gpu_claims.DATAS):
            asked.append(slug)
            return measured[slug]

        monkeypatch.setattr(gpu_claims, "measure_rounds", fake)
        monkeypatch.setattr(gpu_claims, "gpu", lambda: {"name": device, "driver": "580.test"})
        monkeypatch.setattr(gpu_claims, "ROOT", tmp_path)
        monkeypatch.setenv("COURSE_RECORD", "1")
        return asked, fake

    return setup
