"""The folder a student is handed (`make release`): the week's notebooks, the library and the grader client — no
course solution, no known answer, no reference source, no hidden test (autograder.release_check.release_problems)."""

from __future__ import annotations

import ast
import os
import random
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import run_notebook

from autograder.known import known_dir, release_cell
from autograder.release import INSTRUCTOR_ONLY, ROOT, student_release, weeks
from autograder.release_check import answers_to_hide, release_problems


@pytest.fixture(scope="module")
def releases(tmp_path_factory):
    base = tmp_path_factory.mktemp("release")
    return {week: student_release(week, base / f"course-{week}") for week in weeks()}


def test_student_release_carries_no_answer(releases):
    for week, out in releases.items():
        assert release_problems(out) == [], week
        assert (out.parent / f"course-{week}.zip").stat().st_size > 10_000
        assert sorted(p.name for p in (out / week).glob("*.ipynb")) == \
            sorted(p.name for p in (ROOT / "weeks" / week).glob("*.ipynb"))
        for rel in INSTRUCTOR_ONLY:
            assert not (out / rel).exists(), rel


def _disguise(src: str, rng: random.Random) -> str:
    """What a careless author does to a solution before shipping it as a 'demo': rename every identifier that is
    not CUDA's own, drop the comments, reflow the whitespace."""
    src = re.sub(r"//[^\n]*|/\*.*?\*/", "", src, flags=re.S)
    names = {n for n in re.findall(r"\b[a-z][a-z0-9_]{2,}\b", src) if n not in
             {"const", "int", "float", "for", "if", "else", "return", "void", "extern", "unsigned", "long", "auto",
              "while", "static", "constexpr", "asm", "volatile", "sizeof", "inline", "struct", "char", "bool",
              "double", "break", "continue", "true", "false"}}
    for n in names:
        src = re.sub(rf"\b{n}\b", f"v{rng.randrange(10**6)}_{n[::-1]}", src)
    return re.sub(r"[ \t]+", " ", src)


def test_release_check_catches_what_must_not_ship(releases, tmp_path):
    """The check fails on a disguised course solution, on a hidden-test line and on an instructor-only file."""
    import shutil

    week, out = next(iter(releases.items()))
    planted = tmp_path / "planted"
    shutil.copytree(out, planted)
    rng = random.Random()
    name, src = rng.choice(sorted(answers_to_hide().items()))
    (planted / "kernels" / "demo_kernel.cu").write_text(_disguise(src, rng))
    import nbformat

    nb = nbformat.read(str(rng.choice(sorted((ROOT / "solutions" / week).glob("*.ipynb")))), as_version=4)
    key_line = next(line for c in nb.cells for line in c.source.splitlines() if 'assert QUIZ["q1"] ==' in line)
    (planted / "kernels" / "notes.py").write_text("# " + key_line.strip() + "\n")
    (planted / "kernels" / "tma" / "grading").mkdir(parents=True)
    (planted / "kernels" / "tma" / "grading" / "x.cu").write_text("// nothing")
    problems = "\n".join(release_problems(planted))
    # a near-copy of the kernel, or (where the stub is all but the whole kernel, as week 3 day 1's is) what the answer
    # adds to its stub found in a function: either way the planted file and the answer are named
    assert any(p.startswith("kernels/demo_kernel.cu: ") and (f"of {name} (" in p or f"of what {name} adds" in p)
               for p in problems.splitlines()), (name, problems)
    assert "kernels/notes.py: carries solution or hidden-test text" in problems
    assert "kernels/tma/grading/x.cu: instructor-only" in problems


def test_the_release_runs_on_its_own(releases):
    """Everything shipped imports from the release alone, and the notebooks' calls answer: the one-call check of
    an unattempted exercise, a quiz answer."""
    week, out = next(iter(releases.items()))
    code = """
import importlib, pkgutil, kernels, autograder
mods = [m.name for p in (kernels, autograder) for m in pkgutil.walk_packages(p.__path__, p.__name__ + ".")]
for m in mods:
    importlib.import_module(m)
assert kernels.__file__.startswith(ROOT) and autograder.__file__.startswith(ROOT), (kernels.__file__, ROOT)
from autograder.spec import all_specs
spec = all_specs()[0]
ex = next(iter(spec.exercises.values()))
res = autograder.check(spec.slug, ex.name, None)
assert res.points == 0 and "not set" in next(iter(res.parts.values())).feedback
autograder.quiz(spec.slug, "q1", {"q1": spec.quiz.questions["q1"].choices[0]})
print("modules", len(mods))
"""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = str(out)
    res = subprocess.run([sys.executable, "-c", f"ROOT = {str(out)!r}\n" + code], cwd=out, env=env,
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-4000:]
    assert "answer 'a' recorded" in res.stdout or "recorded" in res.stdout
    assert int(res.stdout.split("modules")[-1]) > 20


def test_gemm_rung6_is_left_out_and_says_why(releases):
    """Rung 6 of the GEMM ladder answers day 4's exercise: the release has no r6_store_warp.cu, its launcher lists
    the rung as not runnable and refuses it with the reason, and the model and bench of the day work without it."""
    week, out = next(iter(releases.items()))
    assert not (out / "kernels" / "gemm" / "r6_store_warp.cu").exists()
    code = """
import torch
from kernels.gemm.launch import KERNELS, RUNGS, VARIANTS, gemm
from kernels.gemm import bench, model
assert "store_warp" in VARIANTS and "store_warp" not in RUNGS and "store_warp" not in KERNELS, RUNGS
a = torch.zeros(256, 128, dtype=torch.bfloat16)
try:
    gemm(a, a, "store_warp")
except RuntimeError as exc:
    assert "answers the day's exercise" in str(exc) and "instructor-only" in str(exc), exc
else:
    raise AssertionError("rung 6 ran without its source")
assert "store_warp" not in {r["rung"] for r in model.bound_table()}
assert "store_warp" not in {c["variant"] for c in bench.configs(quick=True)}
print("rung 6 left out")
"""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = str(out)
    res = subprocess.run([sys.executable, "-c", code], cwd=out, env=env, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0 and "rung 6 left out" in res.stdout, res.stdout[-2000:] + res.stderr[-4000:]


def test_a_capstone_stub_ships_but_its_solution_does_not(releases, tmp_path):
    """A capstone's answer cell gives most of its kernel, so the stub every student gets is itself close to the
    solution: the check measures a shipped kernel against that stub. The stub passes; the solution (the stub with the
    student's part filled in), renamed and re-commented, does not."""
    import shutil

    from autograder.release_check import (NEAR_COPY, STUB_MARGIN, answers_to_hide, cuda_kernels, release_stubs,
                                          similarity)

    stubs, answers = release_stubs(), answers_to_hide()
    slug, base = max(((s, max(similarity(st, t) for st in stubs[s] for t in cuda_kernels(answers[f"{s}/correct"])
                                  .values())) for s in stubs if f"{s}/correct" in answers), key=lambda x: x[1])
    week, out = next(iter(releases.items()))
    planted = tmp_path / "planted"
    shutil.copytree(out, planted)
    tree = ast.parse(release_cell(slug))
    stub_src = next(v.value for v in ast.walk(tree)
                    if isinstance(v, ast.Constant) and isinstance(v.value, str) and "__global__" in v.value)
    (planted / "kernels" / "given.cu").write_text(stub_src)
    assert not [p for p in release_problems(planted) if "given.cu" in p], (slug, base)
    (planted / "kernels" / "solved.cu").write_text(_disguise(answers[f"{slug}/correct"], random.Random(3)))
    hits = [p for p in release_problems(planted) if "kernels/solved.cu" in p]
    assert hits and f"{slug}/correct" in "\n".join(hits), (slug, base, hits)
    if base + STUB_MARGIN > 1:  # the stub is all but the whole kernel: what the answer adds to it is what is caught
        assert any(f"of what {slug}/correct adds to its stub" in h for h in hits), hits
    elif base >= NEAR_COPY:  # the case the stub baseline exists for
        assert "the release's stub is" in hits[0]


def _errors(nb) -> list[tuple[int, str, list[str]]]:
    return [(i, o["ename"], o["traceback"]) for i, c in enumerate(nb.cells) for o in c.get("outputs", [])
            if o.get("output_type") == "error"]


@pytest.mark.slow
def test_a_blank_notebook_run_top_to_bottom_says_not_attempted_in_one_line_per_cell(releases):
    """A student who runs a fresh notebook top to bottom (no GPU, nothing answered) sees one "not attempted" line
    for the answer cell and each quiz question — no traceback, no NameError — and nothing else fails."""
    import nbformat

    week = random.choice(sorted(releases))
    out = releases[week]
    path = random.choice(sorted((out / week).glob("*.ipynb")))
    nb = run_notebook(nbformat.read(str(path), as_version=4), path.parent, out, allow_errors=True)
    errors = _errors(nb)
    assert errors, f"{path.name}: a blank notebook must fail its quiz cells"
    for i, ename, tb in errors:
        assert len(tb) == 1 and tb[0].startswith("not attempted:"), (path.name, i, ename, tb[-3:])
    assert {e for _, e, _ in errors} <= {"NotImplementedError", "NotAnswered"}, (path.name, errors)


def test_only_the_stub_is_shortened(tmp_path):
    """The one-line rendering is for nbgrader's stub and unanswered quiz questions only: a NotImplementedError raised
    anywhere else keeps its traceback, and every one of them is still an error (nbgrader needs the cell to fail)."""
    import nbformat

    from autograder.spec import all_specs

    slug = random.choice([s.slug for s in all_specs() if s.quiz])
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(src) for src in (
        "import autograder",
        "# YOUR CODE HERE\nraise NotImplementedError()",
        "def helper():\n    raise NotImplementedError('a library gap')\nhelper()",
        f"autograder.quiz({slug!r}, 'q1', {{}})",
        f"autograder.quiz({slug!r}, 'q1', {{'q1': 'z'}})",
    )])
    nb = run_notebook(nb, tmp_path, ROOT, allow_errors=True)
    errors = {i: (e, tb) for i, e, tb in _errors(nb)}
    assert set(errors) == {1, 2, 3, 4}
    assert errors[1][1] == [errors[1][1][0]] and errors[1][1][0].startswith("not attempted: this answer cell")
    assert len(errors[2][1]) > 1 and any("a library gap" in line for line in errors[2][1])
    assert errors[3][0] == "NotAnswered" and errors[3][1][0].startswith("not attempted: q1 is not answered")
    assert errors[4][0] == "ValueError" and len(errors[4][1]) > 1  # a malformed answer: the full story


def _shipped_cuda(out: Path) -> dict[str, str]:
    import nbformat

    sources = {p.relative_to(out).as_posix(): p.read_text() for p in out.rglob("*") if p.suffix in (".cu", ".cuh")}
    for p in out.rglob("*.ipynb"):
        for i, c in enumerate(nbformat.read(str(p), as_version=4).cells):
            if c.cell_type == "code" and ("__global__" in c.source or "__device__" in c.source):
                sources[f"{p.relative_to(out).as_posix()} cell {i}"] = c.source
    return sources


def test_the_transcription_check_finds_an_answer_hidden_in_a_demo():
    """autograder.release_check.transcription_problems: an answer's own work (what it adds to its stub), renamed and
    pasted into a shipped demo function, is found; ten of its own lines in code no device function holds are found
    by the 10-line windows; a demo that does not hold them is not flagged."""
    from autograder.release_check import (_KEYWORDS, _lines, given_lines, known_good_sources, release_stub_sources,
                                    transcription_problems)

    answers, stubs = known_good_sources(), release_stub_sources()
    given = given_lines(stubs)

    def rename(line):  # every identifier gets a prefix (the check reads tokens, not names)
        return re.sub(r"\b([A-Za-z_]\w*)\b", lambda m: m.group(1) if m.group(1) in _KEYWORDS else "q_" + m.group(1),
                      line)

    def own_lines(name):
        src, stub = answers[name], stubs[name.split("/")[0]]
        stub_lines = set(stub.splitlines())
        return [line for line in src.splitlines() if line.strip() and line not in stub_lines and "{" not in line
                and "}" not in line and not line.strip().startswith(("//", "#"))]

    name = random.choice(sorted(a for a in answers if a.endswith("/solution")))
    src = answers[name]
    demo = "__global__ void demo(float* out) {\n" + "\n".join(map(rename, own_lines(name))) + "\n}\n"
    clean = "__global__ void other(float* out) {\n" + "\n".join(f"    out[{i}] = {i}.0f * out[{i + 1}];"
                                                                for i in range(40)) + "\n}\n"
    found = transcription_problems({"kernels/x/demo.cu": demo, "kernels/x/clean.cu": clean}, {name: src}, stubs)
    assert any(p.startswith("kernels/x/demo.cu:") for p in found), (name, found)
    assert not any(p.startswith("kernels/x/clean.cu:") for p in found), found
    # ten lines of an answer's own (not in any stub or header) in a host function among unrelated code
    mine = {a: [rename(x) for x in own_lines(a) if _lines(x) and _lines(x)[0] not in given] for a in sorted(answers)}
    name = random.choice([a for a, m in mine.items() if len(m) >= 10])
    ten = mine[name][:10]
    filler = [f"    out[{i}] = out[{i}] * {i}.5f + out[{i + 3}];" for i in range(60)]
    thin = "void host_side(float* out) {\n" + "\n".join(filler[:20] + ten + filler[20:]) + "\n}\n"
    found = transcription_problems({"kernels/x/thin.cu": thin}, {name: answers[name]}, stubs)
    assert found and all("10-line window" in p for p in found), (name, found)
    gone = thin.replace("\n".join(ten), "")
    assert not transcription_problems({"kernels/x/thin.cu": gone}, {name: answers[name]}, stubs)


def test_every_answer_the_near_copy_check_cannot_see_is_looked_for():
    """Each answer a release must not carry whose stub is all but its whole kernel (the near-copy check cannot tell a
    solution from such a stub), renamed, stripped of comments and reflowed, is found by the transcription check as
    release_problems calls it: fp8_gemm/bf16_path, full correctness and short path points, was once missed."""
    from autograder.release_check import (STUB_MARGIN, answers_to_hide, cuda_kernels, release_stubs, stub_similarity,
                                          transcription_problems)

    rng, stubs = random.Random(), release_stubs()
    blind = {n: src for n, src in answers_to_hide().items()
             if max((stub_similarity(t, stubs.get(n.split("/")[0], [])) for t in cuda_kernels(src).values()),
                    default=0.0) + STUB_MARGIN > 1}
    assert "fp8_gemm/bf16_path" in blind, sorted(blind)
    demos = {f"kernels/demo_{i}.cu": _disguise(src, rng) for i, src in enumerate(blind.values())}
    found = transcription_problems(demos)  # the answers it looks for by default
    missed = [n for i, n in enumerate(blind) if not any(p.startswith(f"kernels/demo_{i}.cu: ") and f"of what {n} adds"
                                                        in p for p in found)]
    assert not missed, missed


def test_no_shipped_source_hands_out_an_exercise(releases):
    from autograder.release_check import transcription_problems

    problems = []
    for week, out in releases.items():
        problems += [f"{week}: {p}" for p in transcription_problems(_shipped_cuda(out))]
    assert not problems, "\n".join(problems)
