"""pyproject.toml and environment.yml must name the same dependencies.

pyproject.toml is what `make venv` installs; environment.yml is the conda route. A package added to one and
forgotten in the other shows up here, not on a student's machine.
"""
from __future__ import annotations

import os
import random
import re
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _normalize(requirement: str) -> str:
    """Distribution name of a requirement line, normalized as in PEP 503 (case, `-`/`_`/`.` runs)."""
    requirement = requirement.split("#", 1)[0].strip()
    name = re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", requirement)
    assert name, f"cannot read a distribution name from {requirement!r}"
    return re.sub(r"[-_.]+", "-", name.group(0)).lower()


def _requirement(requirement: str) -> str:
    """The whole requirement (name + version specifier), normalized, without comments or spaces."""
    requirement = requirement.split("#", 1)[0].strip().replace(" ", "")
    name = _normalize(requirement)
    return name + requirement[len(re.match(r"[A-Za-z0-9._-]*", requirement).group(0)):]


def pyproject_dependencies() -> list[str]:
    with open(ROOT / "pyproject.toml", "rb") as f:
        return tomllib.load(f)["project"]["dependencies"]


def environment_pip_dependencies() -> tuple[list[str], list[str]]:
    """(conda dependencies, pip dependencies) of environment.yml."""
    import yaml  # PyYAML comes with jupyter's dependencies

    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    conda, pip = [], []
    for item in env["dependencies"]:
        if isinstance(item, dict):
            pip.extend(item.get("pip", []))
        else:
            conda.append(str(item))
    return conda, pip


def test_environment_yml_names_the_course_env():
    import yaml

    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    assert env["name"] == "hopper-course"
    conda, _ = environment_pip_dependencies()
    assert "python=3.11" in conda


def test_pip_dependencies_agree_by_name():
    project = {_normalize(r) for r in pyproject_dependencies()}
    _, pip = environment_pip_dependencies()
    env = {_normalize(r) for r in pip} - {"python"}
    assert project == env, (
        f"only in pyproject.toml: {sorted(project - env)}; only in environment.yml: {sorted(env - project)}"
    )


def test_version_pins_agree():
    # Names agreeing is the contract; pins (nbgrader==0.9.6, cuda-core>=1.2) should agree too, or a conda
    # user grades with a different nbgrader than CI. torch is unpinned in both (the CPU pin lives in the Makefile).
    project = {_normalize(r): _requirement(r) for r in pyproject_dependencies()}
    _, pip = environment_pip_dependencies()
    env = {_normalize(r): _requirement(r) for r in pip}
    differing = {k: (project[k], env[k]) for k in project.keys() & env.keys() if project[k] != env[k]}
    assert not differing, f"pyproject.toml vs environment.yml: {differing}"
    assert project["torch"] == "torch", "keep torch unpinned in pyproject.toml: a GPU machine keeps its CUDA torch"


def _venv_install():
    """tools/venv_install.py, loaded from its file (tools/ is a folder of scripts, not a package)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("venv_install", ROOT / "tools" / "venv_install.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _make(*args, env: dict | None = None):
    """`make ARGS` in the course root (skipped where there is no make), its output captured."""
    import shutil
    import subprocess

    if not shutil.which("make"):
        pytest.skip("no make")
    return subprocess.run(["make", *args], cwd=ROOT, capture_output=True, text=True, env=env)


def _make_venv_dry(*args) -> str:
    """What `make venv` would run (make -n: nothing runs, nvidia-smi or not), as one text."""
    r = _make("-n", "-B", "venv", *args, env={**os.environ, "PATH": "/usr/bin:/bin"})
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_makefile_installs_the_cpu_torch_with_the_course():
    makefile = (ROOT / "Makefile").read_text()
    assert re.search(r"^TORCH_CPU \?= torch==2\.13\.0$", makefile, re.M), "the CPU pin is torch==2.13.0"
    dry = _make_venv_dry()
    assert '--torch "torch==2.13.0"' in dry and "tools/venv_install.py" in dry, dry
    assert "--torch-index" not in dry, "no index given: pip's own configuration"


def test_torch_index_reaches_the_cpu_torch_install():
    """TORCH_INDEX (README: a laptop takes PyTorch's CPU index) is the index of the torch install, and only of it;
    left empty, pip's own configuration decides."""
    plan = _venv_install().plan

    url = f"https://example.invalid/whl/cpu{random.randint(0, 10**6)}"
    assert f'--torch-index "{url}"' in _make_venv_dry(f"TORCH_INDEX={url}")
    for tool in (["uv", "pip", "install"], ["py", "-m", "pip", "install"]):
        first, second = plan(tool, "torch==2.13.0", url)
        assert first == [*tool, "--index-url", url, "torch==2.13.0"] and second == [*tool, "-e", "."]
        (one,) = plan(tool, "torch==2.13.0", "")
        assert one == [*tool, "torch==2.13.0", "-e", "."], "one resolution: the pin holds for the course's `torch`"
        assert plan(tool, "", "") == [[*tool, "-e", "."]], "a GPU machine keeps its CUDA torch"


def test_uv_installs_from_where_pip_is_configured_to():
    """uv reads none of pip's configuration: every index, find-links and constraint pip has is handed over, from any
    section (a file's global/install, or a PIP_* variable), each once; cert and timeout become uv's variables."""
    vi = _venv_install()
    pip_settings, uv_options = vi.pip_settings, vi.uv_options

    n = random.randint(0, 10**6)
    idx, extra1, extra2 = f"https://mirror{n}.invalid/simple", f"file:///opt/p{n}/simple", f"file:///opt/q{n}/simple"
    listing = "\n".join([
        f":env:.find-links='/opt/wheels{n}'",
        "global.cert='/etc/ssl/ca.crt'",
        f"global.constraint='/etc/xdg/pip/c{n}.txt'",
        f"global.extra-index-url='{extra1} {extra2}'",
        f"install.extra-index-url='{extra2}'",
        f"global.index-url='{idx}'",
        ":env:.timeout='180'",
        "global.disable-pip-version-check='1'",
        "not a setting",
    ])
    args, env = uv_options(pip_settings(listing))
    pairs = list(zip(args[::2], args[1::2]))
    assert ("--index-strategy", "unsafe-best-match") in pairs, "the best version across indexes, as pip picks"
    assert ("--index-url", idx) in pairs and ("--find-links", f"/opt/wheels{n}") in pairs
    assert ("--constraint", f"/etc/xdg/pip/c{n}.txt") in pairs
    assert [v for f, v in pairs if f == "--extra-index-url"] == [extra1, extra2]
    assert env == {"SSL_CERT_FILE": "/etc/ssl/ca.crt", "UV_HTTP_TIMEOUT": "180"}
    assert "--no-index" not in args
    assert "--no-index" in uv_options(pip_settings(":env:.no-index='true'"))[0]
    assert uv_options(pip_settings("")) == (["--index-strategy", "unsafe-best-match"], {})


def test_pip_does_the_installs_when_uv_fails(monkeypatch):
    vi = _venv_install()
    ran = []

    def fake_run(cmd, env=None):
        ran.append(cmd)
        return not (cmd[0].endswith("/uv") and "-e" in cmd)  # uv itself installs, then fails on the course

    monkeypatch.setattr(vi, "_run", fake_run)
    monkeypatch.setattr(vi.subprocess, "run", lambda *a, **k: type("R", (), {"stdout": "global.find-links='/w'"})())
    assert vi.main(["--python", "/v/bin/python", "--torch", "torch==2.13.0"]) == 0
    assert ran[0] == ["/v/bin/python", "-m", "pip", "install", "-q", "uv"]
    assert ran[1][:2] == ["/v/bin/uv", "pip"] and ("--find-links", "/w") in zip(ran[1], ran[1][1:])
    assert ran[2] == ["/v/bin/python", "-m", "pip", "install", "torch==2.13.0", "-e", "."]
    ran.clear()
    assert vi.main(["--python", "/v/bin/python", "--installer", "pip"]) == 0
    assert ran == [["/v/bin/python", "-m", "pip", "install", "-e", "."]]
    monkeypatch.setattr(vi, "_run", lambda cmd, env=None: False)
    assert vi.main(["--python", "/v/bin/python"]) == 1, "nothing installed is a failure"


def test_self_test_names_a_version_the_record_did_not_use():
    """The recorded H100 numbers name the versions they were measured with; a different one is said (on a GPU)."""
    import json
    import random

    from kernels.device import recorded_version_drift
    from kernels.record import KERNELS

    rec = json.loads(next(KERNELS.glob("*/recorded_h100.json")).read_text())
    same = {"triton": rec["triton"], "cuda.core": rec["cuda_core"], "torch": rec["torch"] + "+cu130"}
    assert recorded_version_drift(same) == []
    other = f"{random.randint(4, 9)}.{random.randint(0, 9)}.0"
    assert recorded_version_drift({**same, "triton": other}) == [f"triton {other} (recorded with {rec['triton']})"]


def test_make_test_keeps_pythons_bytecode_cache():
    """make test lets Python write __pycache__ even where the machine sets PYTHONDONTWRITEBYTECODE (the suite's
    processes would otherwise each compile the course's modules again): make's own test recipe, run with a probe as
    its interpreter, sees sys.dont_write_bytecode off; the same interpreter outside make sees it on."""
    import shlex
    import subprocess

    probe = f"{shlex.quote(sys.executable)} -c {shlex.quote('import sys; print(sys.dont_write_bytecode)')}"
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    made = _make("-s", "-o", "venv", "-o", ".venv/.installed", "test", f"VPY={probe}", env=env)
    plain = subprocess.run(["bash", "-c", probe], cwd=ROOT, env=env, capture_output=True, text=True)
    assert (made.stdout.strip(), plain.stdout.strip()) == ("False", "True"), (made.stderr, plain.stderr)
