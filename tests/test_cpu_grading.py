"""Grading without a GPU happens only when asked, and every message about it says what it awards.

`--gpus none` (`make autograde GPUS=none`) grades on CPU; `--gpus all` where there is no GPU — COURSE_FORCE_CPU=1
included, the tests' way to act as if there were none — is refused in one line saying what to pass and what CPU
grading awards. That sentence (autograder.score.CPU_GRADING) is held to the scorer here: without a GPU no exercise
part scores, so the quiz is all that counts. On the student side, a kernel checked where there is no GPU is told what
passed here and that its points are decided on a Hopper GPU, not "0 of 7 points".
"""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from autograder.release import ROOT
from autograder.score import CPU_GRADING

WEEK = "week1"


def test_cpu_grading_awards_what_its_sentence_says():
    """Every exercise part of every spec scores 0 where no GPU ran a kernel that compiled and whose SASS holds the
    required instructions (the best a CPU can see), so CPU_GRADING's "quiz points only" is the scorer's own rule."""
    from autograder.score import score
    from autograder.spec import all_specs

    facts = {"gpu": False, "status": "ok", "compile": {"ok": True}, "path": {"ok": True, "summary": ""},
             "correctness": {"graded": False, "reason": "needs an sm_90 GPU"},
             "throughput": {"graded": False, "reason": "not timed here"}}
    for spec in all_specs():
        assert spec.quiz and spec.quiz.questions, f"{spec.slug}: no quiz, nothing for CPU grading to award"
        for ex in spec.exercises.values():
            res = score(ex, {k: dict(v) if isinstance(v, dict) else v for k, v in facts.items()})
            assert res.points == 0 and all(not p.graded for p in res.parts.values() if p.part != "throughput"), \
                (spec.slug, ex.name, {p.part: p.points for p in res.parts.values()})
    assert "quiz points only" in CPU_GRADING and "\n" not in CPU_GRADING


def test_gpus_all_under_course_force_cpu_is_refused_in_one_line():
    from autograder.plan import lanes_for

    with pytest.raises(SystemExit) as e:
        lanes_for("all", {"COURSE_FORCE_CPU": "1"})
    msg = str(e.value)
    assert "COURSE_FORCE_CPU" in msg and "--gpus none" in msg and CPU_GRADING in msg and "\n" not in msg, msg
    assert [lane.label for lane in lanes_for("none", {"COURSE_FORCE_CPU": "1"})] == ["cpu"], "asked: CPU grading"


def test_the_grade_command_refuses_then_says_what_cpu_grading_awards(tmp_path, monkeypatch, capsys):
    """`autograder grade` under COURSE_FORCE_CPU=1 without --gpus exits 1 with the one line and grades nothing;
    with --gpus none it says, before the batch, that it grades on CPU and what that awards."""
    from autograder import cli

    grading = tmp_path / "grading"
    (grading / "submitted" / "ann" / WEEK).mkdir(parents=True)
    env = dict(os.environ, COURSE_GRADING_DIR=str(grading), PYTHONPATH=str(ROOT), COURSE_FORCE_CPU="1")
    r = subprocess.run([sys.executable, "-m", "autograder.cli", "grade", WEEK, "--seed", "7"], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 1 and "--gpus none" in r.stderr and len(r.stderr.strip().splitlines()) == 1, \
        r.stdout[-2000:] + r.stderr[-2000:]
    assert not (grading / "gradebook.db").exists(), "nothing was graded"

    monkeypatch.setenv("COURSE_GRADING_DIR", str(grading))
    monkeypatch.setenv("COURSE_FORCE_CPU", "1")
    monkeypatch.setattr(cli, "_grade", lambda *a: 0)  # the batch itself: not what this test is about
    assert cli.main(["grade", WEEK, "--seed", "7", "--gpus", "none"]) == 0
    assert f"grading on CPU (--gpus none): {CPU_GRADING}" in capsys.readouterr().out


def test_every_cpu_message_says_what_cpu_grading_awards():
    """The report's banner and the README's grading section say what the scorer awards on CPU (quiz points only),
    never the "compile, SASS and quiz points" they used to claim."""
    from autograder.report_data import Student
    from autograder.report_html import _cpu_banner_html

    banner = _cpu_banner_html(["ann"], [Student("ann", submitted=True)])
    assert CPU_GRADING in banner, banner
    readme = " ".join((ROOT / "README.md").read_text().split())
    assert "CPU grading awards the quiz points only" in readme and "make autograde GPUS=none" in readme
    for text in (banner, readme):
        assert "compile, SASS and quiz points" not in text


@pytest.mark.skipif(not __import__("shutil").which("make"), reason="no make here")
def test_make_autograde_passes_gpus():
    def recipe(*args):
        r = subprocess.run(["make", "-n", "autograde", f"WEEK={WEEK}", *args], cwd=ROOT, capture_output=True,
                           text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        return next(ln for ln in r.stdout.splitlines() if "autograder grade" in ln)

    assert recipe("GPUS=none").endswith(f"grade {WEEK} --gpus none")
    assert recipe().endswith(f"grade {WEEK}"), "no GPUS: the command's default (--gpus all)"


def test_check_without_a_gpu_says_what_passed_not_zero_points(monkeypatch, capsys):
    """A correct kernel checked where there is no GPU: compiles, its SASS holds the required instructions, and its
    points are decided on a Hopper GPU; a kernel with the wrong instructions is told so. Neither reads "0 of 7"."""
    import autograder
    from autograder.known import kernel_source

    monkeypatch.setenv("COURSE_FORCE_CPU", "1")
    autograder.check("naive_loads", "row_bias", kernel_source("naive_loads", "correct"))
    first = capsys.readouterr().out.splitlines()[0]
    assert "compiles" in first and "the SASS holds the required instructions" in first, first
    assert "decided on a Hopper GPU" in first and "0 of 7 points" not in first, first
    autograder.check("naive_loads", "row_bias", kernel_source("naive_loads", "scalar_loads"))
    first = capsys.readouterr().out.splitlines()[0]
    assert "lacks a required instruction" in first and "0 of 7 points" not in first, first
    autograder.check("naive_loads", "row_bias", None)  # not attempted: 0 points is the truth
    assert "0 of 7 points" in capsys.readouterr().out.splitlines()[0]
