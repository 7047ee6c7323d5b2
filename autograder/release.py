"""The student release: weeks/<week>/ generated from solutions/<week>/ (`nbgrader generate_assignment`), and the
folder a student is handed (`make release`): those notebooks, the library they import and the grader client of the
one-call check — never a course solution, a known answer, a reference source or a hidden test.

    python -m autograder.release                    # regenerate weeks/ (every week in solutions/)
    python -m autograder.release week1
    python -m autograder.release --student week1    # build/release/course-week1/ and course-week1.zip

weeks/ is never edited by hand; tests/test_release.py fails when it is stale, tests/test_student_release.py when a
student release would carry an answer.
"""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import subprocess
import sys
import traceback
from pathlib import Path

from .release_check import INSTRUCTOR_ONLY, release_problems

ROOT = Path(__file__).resolve().parent.parent
CONFIG = ROOT / "autograder" / "nbgrader_config.py"


def grading_dir() -> Path:
    """Where grading state lives (submissions, gradebook, feedback): $COURSE_GRADING_DIR (a relative path is taken
    from the current folder) or build/grading."""
    return Path(os.environ.get("COURSE_GRADING_DIR") or ROOT / "build" / "grading").expanduser().resolve()


def _nbgrader_env(env: dict | None) -> dict:
    e = dict(os.environ if env is None else env)
    e["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, e.get("PYTHONPATH", "").split(os.pathsep))])
    # nbgrader finds nbgrader_config.py through the Jupyter config path (it has no --config alias).
    e["JUPYTER_CONFIG_PATH"] = os.pathsep.join([str(CONFIG.parent), *filter(None, e.get("JUPYTER_CONFIG_PATH", "").split(os.pathsep))])
    # nbgrader calls the `alembic` script by name: the interpreter's bin folder goes first on PATH.
    e["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), e.get("PATH", "")])
    return e


def nbgrader(*args: str, cwd: Path = ROOT, env: dict | None = None, check: bool = True,
             timeout: float | None = None, here: bool = False) -> subprocess.CompletedProcess:
    """Run the nbgrader command line with the course's config from the course root. here=True: in this process
    (`_nbgrader_here`), for a grading command that has imported nbgrader already and runs a step of its own
    (feedback, the CSV export), or a pool task that grades one student and nothing else (autograde: the notebook
    runs in a Jupyter kernel of its own either way); never where one process grades several students."""
    e = _nbgrader_env(env)
    cmd = [sys.executable, "-m", "nbgrader", *args]
    res = _nbgrader_here(list(args), e, cwd) if here else subprocess.run(cmd, cwd=cwd, env=e, capture_output=True,
                                                                         text=True, timeout=timeout)
    if check and res.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd[2:4])} failed ({res.returncode}):\n{res.stdout[-3000:]}\n{res.stderr[-5000:]}")
    return res


def _nbgrader_here(args: list[str], env: dict, cwd: Path) -> subprocess.CompletedProcess:
    """nbgrader's command line in this process: the same application, argv and config files (the environment and the
    folder are this process's for the call, so no other thread of the process may be running), its log captured as
    the stderr of a CompletedProcess. Saves starting a Python and importing nbgrader again (about 2 s a step on a
    2-core machine)."""
    from jupyter_core.application import NoStart
    from nbgrader.apps import NbGraderApp

    err = io.StringIO()
    changed = {k: v for k, v in env.items() if os.environ.get(k) != v}
    saved, here = {k: os.environ.get(k) for k in changed}, os.getcwd()
    sub = NbGraderApp.subcommands.get(args[0], (None,))[0] if args else None
    code = 0
    try:
        os.environ.update(changed)
        os.chdir(cwd)
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(err):
            app = NbGraderApp()  # a new one, not the singleton: its log handler writes to `err`
            try:
                app.initialize(args)
                app.start()
            except NoStart:  # what a Jupyter application raises once its subcommand has run (launch_instance: exit 0)
                code = 0
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
            except Exception:  # noqa: BLE001 - a failed step is a return code, as from the command line
                err.write(traceback.format_exc())
                code = 1
    finally:
        os.chdir(here)
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        for cls in (NbGraderApp, sub):
            if isinstance(cls, type):
                cls.clear_instance()  # the next call builds its application from its own argv and config
    return subprocess.CompletedProcess(["nbgrader", *args], code, "", err.getvalue())


def weeks() -> list[str]:
    return sorted(p.name for p in (ROOT / "solutions").iterdir() if p.is_dir() and any(p.glob("*.ipynb")))


def release(week: str) -> Path:
    nbgrader("generate_assignment", week, "--force")
    return ROOT / "weeks" / week


SHIPPED = ("kernels", "autograder", "pyproject.toml", "environment.yml")
SKIP_NAMES = ("__pycache__", ".ipynb_checkpoints")

STUDENT_README = """# Hopper async-memory course: {week}

The notebooks of {week} (`{week}/dayN_<topic>.ipynb`), the `kernels` library they import and the grader client
behind each notebook's one-call check (`autograder.check(...)`).

    python -m venv .venv && .venv/bin/pip install -e .     # a CPU-only machine: pip install torch==2.13.0 first
    .venv/bin/jupyter lab {week}/

On a machine without a Hopper GPU the notebooks run in CPU mode: kernels compile and their SASS is read, models and
quizzes work, and the recorded numbers (each names the GPU it came from) stand in for your own measurements. On a
Hopper GPU (H100, H200) the check also runs your kernel, times it and measures which hardware path carried the work. The gradebook's verdict comes from your
instructor's run of the same harness, with inputs you never see.
"""


def student_release(week: str, out: Path | None = None, *, archive: bool = True) -> Path:
    """Build the folder a student is handed for `week` (and a .zip of it): see INSTRUCTOR_ONLY for what stays out."""
    src_nbs = ROOT / "weeks" / week
    if not any(src_nbs.glob("*.ipynb")):
        raise FileNotFoundError(f"weeks/{week} has no notebooks: run `make weeks` first")
    out = Path(out or ROOT / "build" / "release" / f"course-{week}")
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)

    def ignore(folder: str, names: list[str]) -> set[str]:
        rel = Path(folder).resolve().relative_to(ROOT)
        return {n for n in names if n in SKIP_NAMES or (rel / n).as_posix() in INSTRUCTOR_ONLY}

    for name in SHIPPED:
        p = ROOT / name
        if p.is_dir():
            shutil.copytree(p, out / name, ignore=ignore)
        else:
            shutil.copy2(p, out / name)
    shutil.copytree(src_nbs, out / week, ignore=shutil.ignore_patterns(*SKIP_NAMES))
    (out / "README.md").write_text(STUDENT_README.format(week=week))
    if archive:
        shutil.make_archive(str(out), "zip", root_dir=out.parent, base_dir=out.name)
    return out


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "--student":
        for week in argv[1:] or weeks():
            out = student_release(week)
            bad = release_problems(out)
            if bad:
                raise SystemExit(f"the student release of {week} would carry answers:\n  " + "\n  ".join(bad))
            print(f"student release of {week} -> {out} (+ {out.name}.zip); left out: {', '.join(INSTRUCTOR_ONLY)}")
        return
    for week in argv or weeks():
        out = release(week)
        print(f"released {week} -> {out.relative_to(ROOT)}: {', '.join(p.name for p in sorted(out.glob('*.ipynb')))}")


if __name__ == "__main__":
    main()
