"""A child process of the grader's in a process group of its own, its output kept in a file and its records on a
private channel no kernel printf can reach (autograder.hangs and autograder.mutants run their GPU work this way)."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import tempfile
import time

from kernels.paths import cache_dir, ROOT

from .harness import _kill_group


# ------------------------------------------------------------------------------------------ on the GPU (parent)
RECORDS_FD = "COURSE_RECORDS_FD"  # the child's private channel: a descriptor no kernel printf can reach


def _spawn(cmd: list[str], timeout_s: float, *, env: dict | None = None, stop_on: str | None = None,
           private_records: bool = False, idle_s: float | None = None) -> dict:
    """Run `cmd` in a process group of its own; kill the group at the timeout, or 2 s after `stop_on` appears in its
    records (a child that reported a hang for good cannot exit while its kernel runs: autograder.mutants). Output kept
    in a file (it survives the kill). `env`: the child's environment (default: this one), the course root on its
    PYTHONPATH. private_records: the child writes its records to the descriptor named by $COURSE_RECORDS_FD (see
    emit_record), a file of the parent's that a kernel's printf (stdout only) cannot reach — they come back as
    "private", and `stop_on` is looked for there. idle_s: the group is also killed (timed out) when its records have
    not grown for that long (a child that measures several things in turn, each bounded). {"rc", "timed_out",
    "wall_s", "text", "records", "private"}."""
    base = dict(os.environ if env is None else env)
    base["PYTHONPATH"] = f"{ROOT}{os.pathsep}{base.get('PYTHONPATH', '')}"
    with tempfile.TemporaryFile(mode="w+", encoding="utf-8", errors="replace") as log, \
            tempfile.TemporaryFile(mode="w+", encoding="utf-8", errors="replace") as private:
        fds = (private.fileno(),) if private_records else ()
        if private_records:
            base[RECORDS_FD] = str(private.fileno())
        watched = private if private_records else log
        t0 = time.perf_counter()
        p = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT, start_new_session=True, env=base,
                             pass_fds=fds)
        timed_out, seen_at, size, active = False, None, 0, t0
        while p.poll() is None:
            time.sleep(0.1)
            if idle_s is not None:
                now_size = os.fstat(watched.fileno()).st_size
                if now_size != size:
                    size, active = now_size, time.perf_counter()
            if stop_on is not None and seen_at is None:
                watched.seek(0)
                if stop_on in watched.read():
                    seen_at = time.perf_counter()
            if seen_at is not None and time.perf_counter() - seen_at > 2:
                _kill_group(p)
            elif time.perf_counter() - t0 > timeout_s or (idle_s is not None and time.perf_counter() - active > idle_s):
                timed_out = True
                _kill_group(p)  # the grader's: the whole process group, whatever the child forked
        rc = p.wait()
        wall = time.perf_counter() - t0
        log.seek(0)
        text = log.read()
        private.seek(0)
        records_text = private.read() if private_records else ""
    records = [json.loads(line[6:]) for line in text.splitlines() if line.startswith("HANGS {")]
    return {"rc": rc, "timed_out": timed_out, "wall_s": round(wall, 1), "text": text, "records": records,
            "private": records_text}


def emit_record(line: str) -> None:
    """One record line of a child: on its private channel when the parent gave one ($COURSE_RECORDS_FD), else on
    stdout (a command run by hand)."""
    fd = os.environ.get(RECORDS_FD)
    if fd:
        os.write(int(fd), (line + "\n").encode())
    else:
        print(line, flush=True)


def _as_file(source: str) -> str:
    """A kernel's source text saved under build/cache (the child process compiles files and known answers)."""
    path = cache_dir("hangs") / f"kernel_{hashlib.sha256(source.encode()).hexdigest()[:16]}.cu"
    path.write_text(source)
    return str(path)
