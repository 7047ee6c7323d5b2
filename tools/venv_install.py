"""Install the course into a venv (what `make venv` runs): with uv when it can be had, with pip otherwise.

    python tools/venv_install.py --python .venv/bin/python --torch torch==2.13.0 [--torch-index URL]

uv resolves, downloads and unpacks in parallel: measured on 2 cores, its install step took about 20 s where pip's took about 50,
both compiling every package's bytecode; uv without that, 2 s. Nothing is compiled ahead: the Makefile's targets let
Python write __pycache__ for what they import (even where PYTHONDONTWRITEBYTECODE is set), a few seconds once instead of
about 14 s of the install for modules never imported. uv reads none of
pip's configuration, so the places pip is configured to install from (`pip config list`: files and PIP_* variables;
index-url, extra-index-url, find-links, constraint, no-index, cert, timeout) are handed to it, and it picks the best
version across them as pip does: both install the same versions from the same places. Where uv cannot be installed
or fails, pip does the same installs.

--torch is the CPU torch a machine with no GPU takes first (empty: a GPU machine keeps whatever torch pip resolves).
Without --torch-index it goes into the same resolution as the course (`torch==2.13.0 -e .`), so nothing resolves the
unpinned `torch` of pyproject.toml to a CUDA build; with one, torch is installed alone from that index, then the
course.
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys

# pip's settings (any section: global, install, :env:) and what uv calls them. Values split on whitespace.
_UV_FLAGS = {
    "index-url": "--index-url",
    "extra-index-url": "--extra-index-url",
    "find-links": "--find-links",
    "constraint": "--constraint",
}


def pip_settings(listing: str) -> dict[str, list[str]]:
    """`pip config list` output ("global.find-links='/opt/wheels'", ":env:.timeout='180'") as {key: [values]};
    a key set in several places keeps every value once, in order."""
    out: dict[str, list[str]] = {}
    for line in listing.splitlines():
        name, sep, value = line.partition("=")
        if not sep or "." not in name:
            continue
        key = name.rsplit(".", 1)[1].strip()
        for v in shlex.split(value)[0].split() if value.strip() else []:
            if v not in out.setdefault(key, []):
                out[key].append(v)
    return out


def uv_options(settings: dict[str, list[str]]) -> tuple[list[str], dict[str, str]]:
    """The uv command-line options and environment that install from where pip's settings say."""
    args = ["--index-strategy", "unsafe-best-match"]  # pip's rule: the best version across every index
    for key, flag in _UV_FLAGS.items():
        for v in settings.get(key, []):
            args += [flag, v]
    if any(v.lower() in ("1", "true", "yes", "on") for v in settings.get("no-index", [])):
        args.append("--no-index")
    env = {}
    if settings.get("cert"):
        env["SSL_CERT_FILE"] = settings["cert"][-1]
    if settings.get("timeout"):
        env["UV_HTTP_TIMEOUT"] = settings["timeout"][-1]
    return args, env


def plan(tool: list[str], torch: str, torch_index: str) -> list[list[str]]:
    """The install commands (each `tool` + arguments): the CPU torch first or with the course, never after it."""
    if torch and torch_index:
        return [[*tool, "--index-url", torch_index, torch], [*tool, "-e", "."]]
    return [[*tool, *([torch] if torch else []), "-e", "."]]


def _run(cmd: list[str], env: dict[str, str] | None = None) -> bool:
    print("+", shlex.join(cmd), flush=True)
    return subprocess.run(cmd, env={**os.environ, **(env or {})}).returncode == 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--python", required=True, help="the venv's interpreter")
    ap.add_argument("--torch", default="", help="the CPU torch to take first (empty: none)")
    ap.add_argument("--torch-index", default="", help="the index that torch alone comes from")
    ap.add_argument("--installer", choices=("uv", "pip"), default=os.environ.get("COURSE_INSTALLER", "uv"))
    a = ap.parse_args(argv)
    pip = [a.python, "-m", "pip", "install"]
    if a.installer == "uv" and _run([*pip, "-q", "uv"]):
        listing = subprocess.run([a.python, "-m", "pip", "config", "list"], capture_output=True, text=True).stdout
        opts, env = uv_options(pip_settings(listing))
        uv = [os.path.join(os.path.dirname(a.python), "uv"), "pip", "install", "--python", a.python,
              *opts]
        if all(_run(cmd, env) for cmd in plan(uv, a.torch, a.torch_index)):
            return 0
        print("uv could not install the course; pip does the same installs", file=sys.stderr)
    ok = all(_run(cmd) for cmd in plan(pip, a.torch, a.torch_index))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
