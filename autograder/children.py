"""The grading's child processes and interrupts (every child in a session of its own, stopped together on Ctrl-C),
the secret seed's file, and the lock that lets one grading command at a time use a grading folder.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path

from .release import ROOT


STOP = threading.Event()


def _process_born() -> float:
    """When this process started (wall clock, to 10 ms: its start in the kernel's clock ticks against /proc/uptime),
    not when it got here: a task started ahead (_spare_task) is older than its student even while its imports are
    still running. Where /proc cannot say: now."""
    try:
        stat = Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()
        up = float(Path("/proc/uptime").read_text().split()[0])
        return time.time() - (up - int(stat[19]) / os.sysconf("SC_CLK_TCK"))  # stat[19]: field 22, starttime
    except (OSError, ValueError, IndexError):
        return time.time()


_BORN = _process_born()

_CHILDREN: set = set()
_CHILDREN_LOCK = threading.Lock()


class Interrupted(Exception):
    """Ctrl-C (or SIGTERM) during run_pool: every grading child was stopped; `merged` were merged before."""

    def __init__(self, merged: dict, lanes: list):
        super().__init__("interrupted")
        self.merged, self.lanes = merged, lanes


def run_child(cmd: list[str], env: dict, timeout: float | None = None) -> subprocess.CompletedProcess:
    """subprocess.run in a session of its own (a terminal's Ctrl-C reaches this process only; stop_children ends
    the child and everything it started)."""
    p = subprocess.Popen(cmd, env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         start_new_session=True)
    with _CHILDREN_LOCK:
        _CHILDREN.add(p)
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(p)
        p.communicate()
        raise
    finally:
        with _CHILDREN_LOCK:
            _CHILDREN.discard(p)
    return subprocess.CompletedProcess(cmd, p.returncode, out, err)


def _kill_group(p, sig=signal.SIGKILL) -> None:
    try:
        os.killpg(p.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def stop_children(grace: float = 5.0) -> None:
    """SIGTERM every grading child's process group, SIGKILL what is left after `grace` seconds."""
    with _CHILDREN_LOCK:
        kids = list(_CHILDREN)
    for p in kids:
        _kill_group(p, signal.SIGTERM)
    t0 = time.time()
    while time.time() - t0 < grace and any(p.poll() is None for p in kids):
        time.sleep(0.1)
    for p in kids:
        _kill_group(p, signal.SIGKILL)


# ------------------------------------------------------------------------------------------- the seed, the lock
def read_seed_file(path: str | os.PathLike) -> str:
    """The secret seed in a file: refused (one line, SystemExit) when the file cannot be read or holds nothing."""
    f = Path(path).expanduser()
    try:
        text = f.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise SystemExit(f"the seed file {f} cannot be read ({type(exc).__name__}: "
                         f"{getattr(exc, 'strerror', None) or exc})") from None
    if not text.strip():
        raise SystemExit(f"the seed file {f} is empty: write the secret seed into it (e.g. a number); grading "
                         "with no seed could not be reproduced")
    return text.strip()


class grading_lock:
    """One grading command at a time per grading folder (`autograder grade`, `slurm collect`, `forget`): a second
    one is refused with who holds it. An flock: a process that dies releases it."""

    def __init__(self, grading: Path, what: str):
        self.path = Path(grading) / ".autograder.lock"
        self.what = what
        self.f = None

    def __enter__(self):
        import fcntl

        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.f = open(self.path, "a+")
        try:
            fcntl.flock(self.f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            self.f.seek(0)
            held = self.f.read().strip() or "another process"
            self.f.close()
            raise SystemExit(f"{self.path.parent} is busy: {held}. Wait for it to finish (or stop it), then run "
                             "this again; two grading runs at once would overwrite each other's record") from None
        self.f.seek(0)
        self.f.truncate()
        self.f.write(f"`{self.what}` (pid {os.getpid()} on {socket.gethostname()}, since "
                     f"{time.strftime('%Y-%m-%d %H:%M:%S')}) holds it\n")
        self.f.flush()
        return self

    def __exit__(self, *exc):
        import fcntl

        self.f.seek(0)
        self.f.truncate()
        fcntl.flock(self.f, fcntl.LOCK_UN)
        self.f.close()
        return False
