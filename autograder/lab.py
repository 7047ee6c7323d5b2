"""Start JupyterLab on the course notebooks: `python -m autograder.lab [--port N] [--no-browser] [--root weeks]`.

What `make lab` runs. The server:
- serves `weeks/` (students) by default; `--root .` serves the whole course, which the formgrader needs
  (nbgrader requires the course root, where solutions/ and weeks/ live, to lie inside the server's root);
- has nbgrader's formgrader server extension enabled and finds the course's autograder/nbgrader_config.py
  (autograder/ is put on JUPYTER_CONFIG_PATH);
- keeps every runtime, data, config and cache dir inside build/cache/ (unless the caller already set one);
- puts the course root on the kernels' PYTHONPATH, so `import kernels` works from any notebook folder;
- fetches nothing: JupyterLab's news feed and update check are off.

`start_lab(port, root, token)` is shared by the command line and tests/test_lab.py.
"""
from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import IO, Sequence

COURSE_ROOT = Path(__file__).resolve().parent.parent
CACHE = COURSE_ROOT / "build" / "cache"

# The same dirs the Makefile exports; set here too so `python -m autograder.lab` alone stays inside build/.
_CACHE_DIRS = {
    "JUPYTER_DATA_DIR": CACHE / "jupyter" / "data",
    "JUPYTER_RUNTIME_DIR": CACHE / "jupyter" / "runtime",
    # Lab settings and workspaces live under the config dir: keep them out of ~/.jupyter as well.
    "JUPYTER_CONFIG_DIR": CACHE / "jupyter" / "config",
    "IPYTHONDIR": CACHE / "ipython",
    "MPLCONFIGDIR": CACHE / "matplotlib",
    "XDG_CACHE_HOME": CACHE / "xdg",
    "TRITON_CACHE_DIR": CACHE / "triton",
    "COURSE_CACHE_DIR": CACHE / "course",
}


def _prepend(value: str, existing: str | None) -> str:
    parts = [p for p in (existing or "").split(os.pathsep) if p]
    return os.pathsep.join([value] + [p for p in parts if p != value])


def lab_environment(base: dict[str, str] | None = None) -> dict[str, str]:
    """The environment the server (and so every kernel it starts) runs with."""
    env = dict(os.environ if base is None else base)
    for name, path in _CACHE_DIRS.items():
        env.setdefault(name, str(path))
        Path(env[name]).mkdir(parents=True, exist_ok=True)
    env["PYTHONPATH"] = _prepend(str(COURSE_ROOT), env.get("PYTHONPATH"))
    # nbgrader's formgrader finds nbgrader_config.py on the Jupyter config path ...
    env["JUPYTER_CONFIG_PATH"] = _prepend(str(COURSE_ROOT / "autograder"), env.get("JUPYTER_CONFIG_PATH"))
    # ... and runs the `alembic` script by name: the interpreter's scripts must be on PATH.
    env["PATH"] = _prepend(str(Path(sys.executable).parent), env.get("PATH"))
    return env


def lab_command(port: int, root: Path, token: str | None, open_browser: bool = False) -> list[str]:
    cmd = [
        sys.executable, "-m", "jupyterlab",
        f"--ServerApp.port={port}",
        "--ServerApp.port_retries=0",  # a busy port is an error, not a silent move to another one
        "--ServerApp.ip=127.0.0.1",
        f"--ServerApp.root_dir={root}",
        f"--ServerApp.open_browser={open_browser}",
        # nbgrader's formgrader (installed with nbgrader, named here so it is on even without its config.d file)
        "--ServerApp.jpserver_extensions={'nbgrader.server_extensions.formgrader': True}",
        # No network from the lab: no announcements feed, no update check.
        "--LabApp.news_url=None",
        "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
        # ... and no "get notified about Jupyter news?" pop-up in a fresh profile
        f"--LabApp.app_settings_dir={Path(__file__).resolve().parent / 'lab_settings'}",
    ]
    if token is not None:
        cmd.append(f"--IdentityProvider.token={token}")
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        cmd.append("--ServerApp.allow_root=True")  # containers and CI run as root; Jupyter refuses otherwise
    return cmd


def start_lab(
    port: int = 8888,
    root: str | os.PathLike[str] = "weeks",
    token: str | None = None,
    *,
    open_browser: bool = False,
    log: IO[str] | int | None = None,
) -> subprocess.Popen:
    """Start JupyterLab serving `root` (relative to the course root) on 127.0.0.1:`port`; return the process.

    token None lets Jupyter make one (it prints the URL with it); "" turns authentication off (local use only).
    `log` takes the server's stdout and stderr (a file, subprocess.DEVNULL); None leaves them on the terminal.
    The server runs in its own process group: `stop_lab` ends it with the kernels it started.
    """
    root_path = Path(root)
    if not root_path.is_absolute():
        root_path = COURSE_ROOT / root_path
    root_path = root_path.resolve()
    if not root_path.is_dir():
        raise FileNotFoundError(f"nothing to serve: {root_path} is not a folder (run `make weeks` first?)")
    return subprocess.Popen(
        lab_command(port, root_path, token, open_browser),
        cwd=COURSE_ROOT,
        env=lab_environment(),
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=subprocess.STDOUT if log is not None else None,
        start_new_session=True,
    )


def stop_lab(proc: subprocess.Popen, timeout: float = 10.0) -> int:
    """Stop the server started by `start_lab` (SIGTERM to its group, SIGKILL after `timeout` s)."""
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait(timeout)
    return proc.returncode


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m autograder.lab", description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, default=int(os.environ.get("COURSE_LAB_PORT", "8888")))
    parser.add_argument("--root", default="weeks",
                        help="folder to serve, relative to the course root (default: weeks; '.' for the formgrader)")
    parser.add_argument("--token", default=os.environ.get("COURSE_LAB_TOKEN"),
                        help="server token (default: $COURSE_LAB_TOKEN, else one Jupyter makes and prints)")
    parser.add_argument("--no-browser", action="store_true", help="do not open a browser")
    args = parser.parse_args(argv)

    proc = start_lab(args.port, args.root, args.token, open_browser=not args.no_browser)
    try:
        return proc.wait()
    except KeyboardInterrupt:
        return stop_lab(proc)


if __name__ == "__main__":
    sys.exit(main())
