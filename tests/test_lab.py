"""`python -m autograder.lab` serves weeks/ with a token and nbgrader's formgrader loaded.

Starts a real JupyterLab on a free loopback port, asks its contents API for week1, and stops it. Bounded:
the server gets 45 s to answer, the test 90 s in all, and the server's process group is killed on the way out.
"""
from __future__ import annotations

import json
import socket
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from autograder.lab import COURSE_ROOT, start_lab, stop_lab

STARTUP_S = 45.0


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(url: str, timeout: float = 3.0) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


@pytest.mark.timeout(90)
def test_lab_serves_week1(tmp_path: Path):
    port, token = _free_port(), "course-test-token"
    log_path = tmp_path / "lab.log"
    base = f"http://127.0.0.1:{port}"
    with open(log_path, "w") as log:
        proc = start_lab(port, "weeks", token, log=log)
        try:
            deadline = time.monotonic() + STARTUP_S
            status, body = None, b""
            while time.monotonic() < deadline:
                assert proc.poll() is None, f"the lab exited with {proc.returncode}:\n{log_path.read_text()[-3000:]}"
                try:
                    status, body = _get(f"{base}/api/contents/week1?token={token}")
                    break
                except (urllib.error.URLError, ConnectionError, TimeoutError, socket.timeout):
                    time.sleep(0.5)
            assert status is not None, f"no answer in {STARTUP_S:.0f} s:\n{log_path.read_text()[-3000:]}"
            assert status == 200, f"/api/contents/week1 answered {status}: {body[:500]!r}"
            names = {item["name"] for item in json.loads(body)["content"]}
            assert "day1_naive_loads.ipynb" in names, f"week1 lists {sorted(names)}"

            # The token is enforced (the server is not open to any local process).
            status, _ = _get(f"{base}/api/contents/week1?token=wrong")
            assert status == 403
        finally:
            stop_lab(proc)
    text = log_path.read_text()
    assert "formgrader" in text, f"nbgrader's formgrader extension was not loaded:\n{text[-3000:]}"
    assert proc.returncode is not None


def test_lab_environment_stays_inside_the_course():
    from autograder.lab import lab_environment

    env = lab_environment({"PATH": "/usr/bin", "PYTHONPATH": "/elsewhere"})
    for name in ("JUPYTER_DATA_DIR", "JUPYTER_RUNTIME_DIR", "JUPYTER_CONFIG_DIR", "IPYTHONDIR", "MPLCONFIGDIR",
                 "XDG_CACHE_HOME", "TRITON_CACHE_DIR", "COURSE_CACHE_DIR"):
        assert Path(env[name]).is_relative_to(COURSE_ROOT / "build" / "cache"), name
    assert env["PYTHONPATH"].split(":") == [str(COURSE_ROOT), "/elsewhere"]
    assert env["JUPYTER_CONFIG_PATH"].split(":")[0] == str(COURSE_ROOT / "autograder")
