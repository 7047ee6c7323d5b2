"""A synthetic cohort: submissions with known scores and flags, to grade the grader at scale.

    .venv/bin/python -m autograder.cohort [--out build/grading-cohort/submitted] [--set all|gpu20|gpu9|rest] [--week week1]

Each member is a student folder in nbgrader's layout (<out>/<student>/<week>/*.ipynb) built from the course's own
material — never hand-written notebooks:
- good: every solution notebook of the week;
- blank: the release, untouched (0);
- malformed: a notebook that is not JSON (reported, 0, the batch goes on);
- tamper: day 1 with a scalar kernel, a grade cell rewritten to print full marks, the in-notebook checker patched,
  a quiz grade cell deleted (flagged; earns what its kernel is worth);
- one student per known answer of every topic (kernels/<slug>/grading/known/expected.toml), submitting that one
  notebook: slow, wrong, racy, hanging, crashing and cheating kernels with the scores they must get.
`expected.json` beside the students holds every member's expected score (on a Hopper GPU and without one) and flags.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
from dataclasses import asdict, dataclass, field
from pathlib import Path

import nbformat

from .grading import solution_notebook
from .known import known_answers, known_dir, submission_notebook
from .release import ROOT
from .spec import all_specs

# The ≥ 20-member cohort run on the GPU: every kind of failure once, within one device call.
GPU20 = [
    "good", "blank", "malformed", "tamper",
    "naive_loads-scalar_loads", "naive_loads-off_by_one", "naive_loads-torch_call", "naive_loads-cached_result",
    "naive_loads-trap", "naive_loads-side_stream",
    "smem_tiling-unpadded", "smem_tiling-no_sync",
    "ldgsts-race_no_wait", "ldgsts-misaligned", "ldgsts-plain_loads",
    "pipeline-not_pipelined", "pipeline-off_by_one",
    "tma-wrong_expect_tx", "tma-plain_loads", "tma-seed_barrier_count", "tma-stub",
]

# A smaller cohort for a short GPU call: the solutions, the blank release, a malformed and a tampered notebook, and
# one hard case per topic (cached results, a race, an illegal address, no pipeline, a hang).
GPU9 = ["good", "blank", "malformed", "tamper", "naive_loads-cached_result", "smem_tiling-no_sync",
        "ldgsts-misaligned", "pipeline-not_pipelined", "tma-wrong_expect_tx"]




# The grader-integrity cohort: the solutions beside one hostile answer per family (a kernel that prints a verdict,
# counts its launches, rewrites its inputs, hides its path in a dead branch or in generic loads, includes the
# environment file, runs TMA only while young — the profiled process — or holds its whole path behind a return every
# launch takes), graded through nbgrader so that their feedback can be read for the secret.
INTEGRITY = ["good", "naive_loads-forged_verdict", "naive_loads-launch_counter", "naive_loads-dead_branch_vec",
             "naive_loads-include_environ", "naive_loads-include_macro", "ldgsts-dead_branch_ldgsts",
             "ldgsts-zeroes_weights", "tma-generic_loads", "tma-watched_only", "tma-dead_path"]


def cohort_grading_dir() -> Path:
    """The synthetic cohort's own grading folder, never the class's (autograder.release.grading_dir()):
    $COURSE_COHORT_GRADING_DIR or build/grading-cohort. Grade it with COURSE_GRADING_DIR set to this folder."""
    return Path(os.environ.get("COURSE_COHORT_GRADING_DIR") or ROOT / "build" / "grading-cohort")


def members_of(name: str, week: str = "week1") -> list[str] | None:
    """A named cohort: "all" (None: everyone), "gpu20", "gpu9", or "rest" — the solutions and every known answer
    that gpu20 leaves out, so that gpu20 + rest grade every known answer of the week under nbgrader in two calls
    that each fit one GPU command."""
    if name == "all":
        return None
    if name == "gpu20":
        return GPU20
    if name == "gpu9":
        return GPU9
    if name == "integrity":
        return INTEGRITY
    if name == "rest":
        every = []
        for s in (s for s in all_specs() if s.assignment == week):
            answers = known_answers(s.slug)
            entry = _solution_entry(answers)
            every += [f"{s.slug}-{ka.name}" for ka in answers if ka.name != entry and len(ka.expected) == 3]
        return ["good"] + [m for m in every if m not in GPU20 + INTEGRITY]
    raise ValueError(f"no cohort named {name!r} (all, gpu20, gpu9, rest, integrity)")


def _solution_entry(answers) -> str:
    """Of a day's known answers, the one that stands for its solutions notebook cell, which "good" hands in:
    "solution" where the day has one, else "correct" (day 1). Every other entry — the day's "correct" beside its
    "solution" too — is a member of its own."""
    return "solution" if any(ka.name == "solution" for ka in answers) else "correct"


@dataclass
class Member:
    student: str
    kind: str
    expected_gpu: float  # points on a Hopper GPU (every part graded; bars calibrated per GPU kind)
    expected_cpu: float  # points with no GPU (the quiz only: correctness, path and throughput need a Hopper GPU)
    flags: list[str] = field(default_factory=list)
    gpu_flags: list[str] = field(default_factory=list)
    about: str = ""


def _quiz(spec) -> float:
    return sum(q.points for q in spec.quiz.questions.values()) if spec.quiz else 0.0


def _parts(spec, names) -> float:
    return sum(p.points for ex in spec.exercises.values() for n, p in ex.parts.items() if n in names)


def tampered_day1(week: str = "week1") -> dict:
    """Day 1 with a scalar kernel, a rewritten grade cell, a patched checker and a deleted quiz grade cell."""
    nb = nbformat.read(str(ROOT / "solutions" / week / "day1_naive_loads.ipynb"), as_version=4)
    scalar = (known_dir("naive_loads") / "scalar_loads.cu").read_text()
    keep = []
    for cell in nb.cells:
        gid = cell.metadata.get("nbgrader", {}).get("grade_id")
        if gid == "row_bias_answer":
            cell.source = f'ROW_BIAS_CU = r"""\n{scalar}"""\nautograder.grade = lambda *a, **k: 2.0\n'
        elif gid == "row_bias_path":
            cell.source = "2.0"
        elif gid == "quiz_q1":
            continue
        keep.append(cell)
    nb.cells = keep
    return nb


def build(out: Path, week: str = "week1", members: list[str] | None = None) -> list[Member]:
    """Write the cohort's submissions under `out` and return its members with their expected scores."""
    specs = [s for s in all_specs() if s.assignment == week and (ROOT / "solutions" / week / s.notebook).exists()]
    made: list[Member] = []

    def want(name):
        return members is None or name in members

    def folder(student):
        d = out / student / week
        if d.exists():
            shutil.rmtree(d)
        d.mkdir(parents=True)
        return d

    if want("good"):
        d = folder("good")
        for s in specs:
            nbformat.write(solution_notebook(s), str(d / s.notebook))
        made.append(Member("good", "good", sum(_parts(s, ("correctness", "path", "throughput")) + _quiz(s)
                                               for s in specs),
                           sum(_quiz(s) for s in specs), about="every solution notebook"))
    if want("blank"):
        d = folder("blank")
        for s in specs:
            shutil.copy(ROOT / "weeks" / week / s.notebook, d / s.notebook)
        made.append(Member("blank", "stub", 0, 0, about="the release, untouched"))
    if want("malformed"):
        d = folder("malformed")
        (d / specs[0].notebook).write_text('{"cells": [ this is not a notebook')
        made.append(Member("malformed", "malformed", 0, 0, about="not JSON"))
    if want("tamper") and week == "week1":  # built from week 1's day 1 (its tampered cells are day-1 cells)
        d = folder("tamper")
        nbformat.write(tampered_day1(week), str(d / "day1_naive_loads.ipynb"))
        day1 = next(s for s in specs if s.slug == "naive_loads")
        q = _quiz(day1) - 1  # one quiz grade cell deleted
        made.append(Member("tamper", "cheat", 3 + q, q, ["deleted-cell", "code-in-answer-cell"],
                           about="scalar kernel; grade cell rewritten; checker patched; quiz cell deleted"))
    for s in specs:
        answers = known_answers(s.slug)
        entry = _solution_entry(answers)
        for ka in answers:
            name = f"{s.slug}-{ka.name}"
            if ka.name == entry or not want(name) or len(ka.expected) < 3:
                continue  # (an answer with an unpinned part cannot have an expected total)
            d = folder(name.replace("_", "-"))
            nbformat.write(submission_notebook(s.slug, ka), str(d / s.notebook))
            e = ka.expected
            q = _quiz(s)
            # no GPU: only the quiz is graded (correctness, path and throughput need a Hopper GPU)
            made.append(Member(name.replace("_", "-"), "known", sum(e.values()) + q, q,
                               list(ka.flags), list(ka.gpu_flags), ka.about))
    (out / "expected.json").write_text(json.dumps([asdict(m) for m in made], indent=1))
    return made


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=str(cohort_grading_dir() / "submitted"),
                    help="default: build/grading-cohort/submitted (the cohort's own grading folder, not the class's)")
    ap.add_argument("--week", default="week1")
    ap.add_argument("--set", choices=("all", "gpu20", "gpu9", "rest", "integrity"), default="all")
    args = ap.parse_args(argv)
    made = build(Path(args.out), args.week, members_of(args.set, args.week))
    print(f"{len(made)} submissions under {args.out}")
    grading = Path(args.out).parent
    print(f"grade them: COURSE_GRADING_DIR={grading} .venv/bin/autograder grade {args.week} --seed 7 --gpus none")
    for m in made:
        print(f"  {m.student:<34} GPU {m.expected_gpu:>5g}  CPU {m.expected_cpu:>5g}  {m.about}")


if __name__ == "__main__":
    main()
