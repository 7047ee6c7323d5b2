"""pyproject.toml and environment.yml must name the same dependencies.

pyproject.toml is what `make venv` installs; environment.yml is the conda route. A package added to one and
forgotten in the other shows up here, not on a student's machine.
"""
from __future__ import annotations

import os
import random
import re
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


def test_makefile_pins_cpu_torch_before_editable_install():
    makefile = (ROOT / "Makefile").read_text()
    assert re.search(r"^TORCH_CPU \?= torch==2\.13\.0$", makefile, re.M), "the CPU pin is torch==2.13.0"
    recipe = [line.strip() for line in makefile.splitlines() if line.startswith("\t")]
    cpu = next(i for i, line in enumerate(recipe) if 'pip install' in line and '"$(TORCH_CPU)"' in line)
    editable = next(i for i, line in enumerate(recipe) if line.endswith("pip install -e ."))
    assert cpu < editable, "the CPU torch must be installed before `pip install -e .`, or pip pulls a CUDA torch"


def test_torch_index_reaches_the_cpu_torch_install():
    """TORCH_INDEX (README: a laptop takes PyTorch's CPU index) is the index of the torch install, and only of it;
    left empty, pip's own configuration decides."""
    import shutil
    import subprocess

    if not shutil.which("make"):
        pytest.skip("no make")
    url = f"https://example.invalid/whl/cpu{random.randint(0, 10**6)}"

    def dry(*args):
        r = subprocess.run(["make", "-n", "-B", "venv", *args], cwd=ROOT, capture_output=True, text=True,
                           env={**os.environ, "PATH": "/usr/bin:/bin"})  # -n: nothing runs, nvidia-smi or not
        return [line for line in r.stdout.splitlines() if "pip install" in line]

    with_index = dry(f"TORCH_INDEX={url}")
    assert any(f'--index-url "{url}"' in line and "torch==2.13.0" in line for line in with_index), with_index
    assert sum(url in line for line in with_index) == 1, "only the torch install uses the index"
    assert not any("--index-url" in line for line in dry()), "no index given: pip's own configuration"


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
