"""tools/new_day.py: a day made from the template passes, at once, the checks every day must pass. Run in a fresh
worktree of this commit with the tools of this tree copied in (no .venv, no build/), then pytest inside it."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import new_day  # noqa: E402

CHECKS = ["tests/test_demo_day.py", "tests/test_structure.py", "tests/test_layers.py", "tests/test_prose.py",
          "tests/test_solutions.py", "tests/test_course_claims.py"]
# Of test_course_claims, the new day's tests only (those parametrized by its spec): the others hold named days of the
# course (day 4's GEMM compiles, the copy days' rounds...) to their statements, which the new day does not touch and
# the suite checks on this tree already. The other files' checks cut across the whole tree (a function's length, the
# layers, the README map) and run whole.
ONLY_THE_NEW_DAY = "not test_course_claims or demo_day"


def test_the_command_refuses_a_bad_slug_an_existing_one_and_a_taken_day():
    assert new_day.problems(ROOT, "Bad-Slug", "week1", 9)
    assert any("exists" in p for p in new_day.problems(ROOT, "naive_loads", "week1", 9))
    assert any("day 1 exists" in p for p in new_day.problems(ROOT, "fresh_slug", "week1", 1))
    assert new_day.problems(ROOT, "fresh_slug", "week9", 9) == []
    assert new_day.fill("{slug} {x} { y }", {"slug": "s"}) == "s {x} { y }"


@pytest.fixture(scope="module")
def copy(tmp_path_factory):
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    where = tmp_path_factory.mktemp("new-day") / "repo"
    subprocess.run(["git", "worktree", "add", "-q", "--detach", str(where), "HEAD"], cwd=ROOT, check=True)
    shutil.rmtree(where / "tools")
    shutil.copytree(ROOT / "tools", where / "tools", ignore=shutil.ignore_patterns("__pycache__"))
    for f in ("README.md", "Makefile"):
        shutil.copy(ROOT / f, where / f)
    yield where
    subprocess.run(["git", "worktree", "remove", "--force", str(where)], cwd=ROOT)


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_a_new_day_passes_the_checks_every_day_must_pass(copy):
    r = subprocess.run([sys.executable, "tools/new_day.py", "demo_day", "--week", "week2", "--day", "9", "--title",
                        "A demo day", "--no-weeks"], cwd=copy, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "wrote solutions/week2/day9_demo_day.ipynb" in r.stdout and "next steps" in r.stdout
    again = subprocess.run([sys.executable, "tools/new_day.py", "demo_day", "--week", "week2", "--day", "10",
                            "--title", "x", "--no-weeks"], cwd=copy, capture_output=True, text=True)
    assert again.returncode != 0 and "exists" in again.stderr
    probe = ("from autograder.spec import all_specs; from autograder.known import known_answers; "
             "assert 'demo_day' in {s.slug for s in all_specs()}; print(len(known_answers('demo_day')))")
    env = dict(os.environ, PYTHONPATH=str(copy))
    p = subprocess.run([sys.executable, "-c", probe], cwd=copy, env=env, capture_output=True, text=True)
    assert p.returncode == 0 and p.stdout.strip() == "3", p.stderr
    t = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rfEp", "-p", "no:cacheprovider", "-p", "no:xdist",
                        "-k", ONLY_THE_NEW_DAY, *CHECKS],
                       cwd=copy, env=env, capture_output=True, text=True, timeout=850)
    failed = "\n".join(ln for ln in t.stdout.splitlines() if ln.startswith(("FAILED", "ERROR")))
    assert t.returncode == 0, (failed or t.stdout[-4000:]) + t.stderr[-2000:]
    # the filter kept the new day's course claims (-rfEp lists each test passed): a renamed test cannot drop them
    assert re.search(r"PASSED tests/test_course_claims\.py::\S+\[demo_day\]", t.stdout), t.stdout[-4000:]
