"""The `autograder` command (instructors).

    autograder grade week1 [--seed-file F | --seed N]   nbgrader autograde + feedback + gradebook CSV, every student
               [--gpus all|none|0,1]                       one worker per GPU on this host (autograder.pool)
               [--students a,b] [--student ID]... [--students-file F]   only these students
    autograder slurm submit|collect|resubmit week1       the class as a Slurm job array (autograder.slurm)
    autograder forget <student>... [--week week1]        remove students (a trial cohort) from gradebook and folder
    autograder known [naive_loads ...] [--cpu]           known answers vs their expected scores (table)
    autograder calibrate naive_loads [--write]           per-GPU bars from the topic's records (or --measure here)
    autograder release [week1]                           weeks/ from solutions/ (nbgrader generate_assignment)
    autograder understanding measure week1 [--gpus all]   each student's mutants measured on the GPUs (the keys)
    autograder understanding sheets week1 [--measured DIR] [--per-day N] [--out DIR]  understanding checks, keyed
    autograder understanding import week1 answers.csv --weight W      scored into <grading>/understanding_week1.json

The secret seed is read from --seed-file (default: $COURSE_SECRET_SEED_FILE) or --seed, given at grading time and
never stored in the course (an empty or unreadable seed is refused; the batch record says where it came from).
`grade` exits 0 when every student was graded, 2 when some were not (their grading failed, or a hand-in could not be
graded as handed in: a notebook not readable, several copies and none under its name, one in another week's folder),
130 when interrupted, 1 when refused;
`slurm collect` 0 when every student is graded, 3 when the rest are still queued, 2 when some are not graded. Submissions live in nbgrader's layout: build/grading/submitted/<student>/<week>/.

A student's id is their folder's name, or a safe id where nbgrader cannot take the name as it is (not UTF-8, a
glob or control character, spaces at an end, a % or \\: those bytes written \\xe9-style;
autograder.students.student_id); a hidden folder (.name) is not a student. --students a,b takes plain ids;
--student ID (repeatable) and --students-file F (one id a line) take any id, or a folder's own name.
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import signal
import sys
from pathlib import Path

from .children import grading_lock, read_seed_file
from .grade_run import _grade, hand_in_mistakes, students_option
from .handin import set_aside_malformed  # noqa: F401 - it lives with the hand-ins; the name stays importable here
from .plan import lanes_for
from .record import forget, forget_target
from .release import grading_dir, main as release_main
from .students import class_roster, shown_name
from . import slurm, slurm_collect, understanding as u
from .known import check_known, table
from .spec import all_specs
from .calibration import calibrate
from .mutants import measure_class
from .score import CPU_GRADING
from .understanding_records import measured_from_cohort_record, measured_from_records


def _secret(args) -> str:
    return _seed(args)[0]


def _seed(args) -> tuple[str, str]:
    """(the secret seed, where it came from: "--seed", "--seed-file F", "COURSE_SECRET_SEED_FILE=F" or
    "COURSE_SECRET_SEED"). An empty, blank or unreadable seed is refused in one line."""
    if args.seed is not None:
        return str(args.seed), "--seed"
    if args.seed_file:
        return read_seed_file(args.seed_file), f"--seed-file {args.seed_file}"
    f = os.environ.get("COURSE_SECRET_SEED_FILE")
    if f:
        return read_seed_file(f), f"COURSE_SECRET_SEED_FILE={f}"
    if "COURSE_SECRET_SEED" in os.environ:
        if not os.environ["COURSE_SECRET_SEED"].strip():
            raise SystemExit("COURSE_SECRET_SEED is empty: give the secret seed (grading with no seed could not be "
                             "reproduced)")
        return os.environ["COURSE_SECRET_SEED"].strip(), "COURSE_SECRET_SEED"
    raise SystemExit("grading needs the secret seed: --seed-file FILE (kept outside the course), --seed N, or "
                     "COURSE_SECRET_SEED")


def _on_sigterm(signum, frame):
    raise KeyboardInterrupt


def cmd_grade(args) -> int:
    """Grade every submission of a week on this host: one worker per GPU lane (autograder.pool), each student in a
    gradebook of its own, merged into the class's gradebook by this process alone.

    Exit status: 0 every student graded; 2 some not graded — their grading failed, or a hand-in could not be graded
    as handed in (hand_in_mistakes) — the command prints whom and what to run; 130
    interrupted (what finished is merged); 1 nothing to grade or a refused command."""
    week = args.week
    secret, seed_source = _seed(args)
    grading = grading_dir()
    submitted = grading / "submitted"
    students = _roster(args, submitted, week)
    if students is None:
        return 1
    if not students:
        print(f"no submissions under {submitted}/<student>/{week}/")
        return 1
    lanes = lanes_for(args.gpus, dict(os.environ, COURSE_SECRET_SEED=secret))
    if args.gpus == "none" or os.environ.get("COURSE_FORCE_CPU"):  # said before the batch, in the words of the spec

        why = "--gpus none" if args.gpus == "none" else f"COURSE_FORCE_CPU is set, lanes {args.gpus}"
        print(f"grading on CPU ({why}): {CPU_GRADING}", flush=True)
    cmdline = f"autograder grade {week}" + (f" {students_option(students)}" if _named(args) else "")
    with grading_lock(grading, cmdline):
        old_term = signal.signal(signal.SIGTERM, _on_sigterm)
        try:
            return _grade(args, week, secret, seed_source, grading, students, lanes)
        finally:
            signal.signal(signal.SIGTERM, old_term)


def _named(args) -> list[str] | None:
    """The students named on the command line, in order, once each (--students a,b; --student ID, repeatable;
    --students-file F, one id a line, white space around it dropped); None when none was named."""
    if not (args.students or args.student or args.students_file):
        return None
    names = [s.strip() for s in (args.students or "").split(",") if s.strip()] + list(args.student or [])
    if args.students_file:  # surrogateescape: a folder's own name that is not UTF-8 may be written there too
        text = Path(args.students_file).read_text(encoding="utf-8", errors="surrogateescape")
        names += [line.strip() for line in text.splitlines() if line.strip()]
    return list(dict.fromkeys(names))


def _roster(args, submitted: Path, week: str) -> list[str] | None:
    """The ids to grade: every student of the week (students.class_roster: folders mapped to safe ids or left out are
    named), or those named (by id or by folder name). None (after saying whom) when a named one handed nothing in."""
    roster, notes = class_roster(submitted, week)
    for note in notes:
        print(note)
    named = _named(args)
    if named is None:
        return list(roster)
    by_folder = {folder: sid for sid, folder in roster.items()}
    ids = [n if n in roster else by_folder.get(n) for n in named]
    unknown = [shown_name(n) for n, sid in zip(named, ids) if sid is None]
    if unknown:
        print(f"no submission of {week} from: {', '.join(unknown)}")
        return None
    return list(dict.fromkeys(ids))


def cmd_slurm(args) -> int:
    keys = ("chunk", "partition", "time", "account", "gres", "cpus_per_task", "mem", "max_parallel", "sbatch_args")
    given = {k: getattr(args, k) for k in keys if getattr(args, k) is not None}
    if args.action == "collect":
        res = slurm_collect.collect(args.week)
        said, details, misplaced = hand_in_mistakes(args.week, res["per_student"])
        if said:
            print("  hand-ins: " + "; ".join(said))
        for line in details:
            print(f"  {line}")
        if misplaced:
            print(f"  HAND-IN MISTAKES ({len(misplaced)}): once the hand-ins are mended, autograder slurm submit "
                  f"{args.week} {students_option(sorted(misplaced))}")
        return 2 if res["missing"] or misplaced else 3 if res["queued"] else 0
    secret = None if args.dry_run else (None if args.seed_file else _secret(args))
    if args.action == "resubmit":
        slurm_collect.resubmit(args.week, given, secret=secret, seed_file=args.seed_file, dry_run=args.dry_run)
        return 0
    submitted = grading_dir() / "submitted"
    students = _roster(args, submitted, args.week)
    if students is None:
        return 1
    if not students:
        print(f"no submissions under {submitted}/<student>/{args.week}/")
        return 1
    slurm.submit(args.week, students, {**slurm.DEFAULTS, **given}, secret=secret, seed_file=args.seed_file,
                 dry_run=args.dry_run)
    return 0


def cmd_forget(args) -> int:
    """Remove students (by id or folder name) from the grading folder: gradebook rows, submitted/autograded/feedback/
    verdicts folders, batch-record entries (record.forget), their Slurm results, merged digests and roster places
    (slurm.forget); then the week's CSV export and report again."""
    grading = grading_dir()
    with grading_lock(grading, f"autograder forget {' '.join(shlex.quote(shown_name(s)) for s in args.students)}"):
        ids = [forget_target(grading, s)[0] for s in args.students]  # before the folders go
        done = forget(grading, args.students, week=args.week, keep_submission=args.keep_submission)
        done += slurm.forget(grading, ids, args.week)  # out of the Slurm arrays too: `slurm collect` no longer names them
    for line in done:
        print(line)
    return 0


def cmd_known(args) -> int:
    slugs = args.slugs or [s.slug for s in all_specs()]
    bad = 0
    for slug in slugs:
        res = check_known(slug, gpu=False if args.cpu else None)
        print(f"== {slug}\n{table(res)}")
        bad += sum(not r.ok for r in res)
    return 1 if bad else 0


def cmd_calibrate(args) -> int:
    for slug in args.slugs:
        res = calibrate(slug, records=[Path(r) for r in args.record] if args.record else None,
                        measure_here=args.measure, write_spec=args.write)
        for tag, exs in res.items():
            for ex, c in exs.items():
                print(f"{slug}.{ex} on {c['device']} ({c['date']}): fraction {c['fraction']} (spec {c['spec_fraction']})"
                      f" -> bar {c['bar']:.4g}, solution {c['solution']:.4g}, margin {c['margin']:.3f}x"
                      f"{'' if args.write else '  (not written: --write)'}")
    return 0


def cmd_release(args) -> int:
    release_main(args.weeks)
    return 0


def _measure_understanding(args, measured: Path) -> int:
    """Every student's mutants of the week measured on the GPU lanes (mutants.measure_class); CPU: refused (the
    outcomes are what the GPU does)."""
    if args.gpus == "none":
        print("understanding checks are measured on a Hopper GPU: their keys are what the GPU does (--gpus all)")
        return 1
    lanes = lanes_for(args.gpus)
    submitted = grading_dir() / "submitted"
    students = _roster(args, submitted, args.week)
    if not students:
        print(f"no submissions of {args.week} under {submitted}")
        return 1
    print(f"measuring the mutants of {len(students)} student(s)' kernels of {args.week} on {len(lanes)} lane(s) ...",
          flush=True)
    res = measure_class(grading_dir(), args.week, students, lanes, runs=args.runs, rounds=args.rounds, out=measured)
    per = sorted(res["gpu_s"].values())
    print(f"measured {res['jobs']} kernel(s) in {res['wall_s']:.0f} s; GPU seconds per student and day: median "
          f"{per[len(per) // 2] if per else 0:.0f}, max {per[-1] if per else 0:.0f}; into {res['out']}; then: "
          f"autograder understanding sheets {args.week}")
    return 0


def cmd_understanding(args) -> int:
    """Understanding checks (autograder.understanding). `sheets`: each student's sheet from <measured>/<student>/
    <slug>.json, the Moodle XML and the key CSV, then the guessing rates; `import`: an answers CSV scored against the
    key into <grading>/understanding_<week>.json."""
    out = Path(args.out) if args.out else grading_dir() / "understanding"
    measured = Path(args.measured) if args.measured else out / args.week / "measured"  # where `measure` writes
    if (args.action == "import") != bool(args.answers):
        print("autograder understanding measure WEEK [--gpus all] | sheets WEEK [--measured DIR] | import WEEK "
              "ANSWERS.csv --weight W")
        return 1
    if args.action == "measure":
        return _measure_understanding(args, measured)
    if args.action == "import":
        key = Path(args.key) if args.key else out / f"key_{args.week}.csv"
        if not key.is_file() or not Path(args.answers).is_file():
            print(f"no {'key' if not key.is_file() else 'answers'} at {key if not key.is_file() else args.answers}")
            return 1
        path = u.import_answers(args.week, args.answers, key, args.weight, grading_dir())
        print(f"understanding scores of {args.week} (weight {args.weight:g}): {path}")
        return 0
    if args.recorded:  # the answers make gpu-test measured, one sheet each (no GPU needed: their outcomes are recorded)
        measured = out / args.week / "recorded_measured"
        shutil.rmtree(measured, ignore_errors=True)

        measured_from_records(measured, args.week)
        measured_from_cohort_record(measured, args.week)  # and the cohort make gpu-test measured, where recorded
    cohort, notes = u.read_measured(measured, args.week)
    if not cohort:
        print(f"no measured dicts of {args.week} under {measured}/<student>/<slug>.json (autograder understanding "
              f"measure {args.week} on a GPU machine writes them)", *notes, sep="\n")
        return 1
    res = u.write_sheets(args.week, cohort, _secret(args), out, args.per_day, practice=args.practice)
    for line in notes + res["notes"]:
        print(line)
    print(f"{len(cohort)} sheet(s): {res['sheets']}/; Moodle: {res['moodle']}; key (keep it from students): "
          f"{res['key']}\nguessing (multichoice, {next(iter(res['rates'].values()), {}).get('n', 0)} questions):")
    for name, r in res["rates"].items():
        print(f"  {name:32s} {r['rate']:6.1%}  (chance {r['chance']:.1%})")
    print("GPU seconds that measured each sheet's keys (every mutant of the student's kernels, as measured):")
    for student, days in sorted(cohort.items()):
        per = ", ".join(f"{slug} {d.get('gpu_s') or 0:.0f}" for slug, d in sorted(days.items()))
        print(f"  {student}: {sum(d.get('gpu_s') or 0 for d in days.values()):.0f} s ({per})")
    return 0


def parser() -> argparse.ArgumentParser:
    """The command line (main's; tests parse the commands the course prints with it)."""
    ap = argparse.ArgumentParser(prog="autograder", description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    g = sub.add_parser("grade", help="autograde every submission of a week")
    g.add_argument("week")
    g.add_argument("--seed", type=int)
    g.add_argument("--seed-file")
    g.add_argument("--gpus", default="all",
                   help="all (one worker per visible GPU; refused where there is none), none (one worker, CPU "
                        "grading: quiz points only), or ids like 0,1")
    g.add_argument("--students", help="grade only these students (comma-separated plain ids), e.g. to retry")
    g.add_argument("--student", action="append", help="grade only this student (any id: a comma, a space, ...; "
                   "repeatable)")
    g.add_argument("--students-file", help="grade only the students of this file (one id or folder name a line)")
    g.add_argument("--task-timeout", type=float, default=None,
                   help="seconds one student's grading may take before it is killed and handed back")
    g.add_argument("--keep-batches", type=int, default=5,
                   help="batch folders (build/grading/batch/<time>/, for debugging a run) kept: the newest N (default 5)")
    g.set_defaults(fn=cmd_grade)
    fg = sub.add_parser("forget", help="remove students (e.g. a trial cohort) from the gradebook and grading folder")
    fg.add_argument("students", nargs="+", help="ids (as the report shows them) or folder names under submitted/")
    fg.add_argument("--week", help="only this week's grades and files (default: every week)")
    fg.add_argument("--keep-submission", action="store_true", help="keep submitted/<student>/ (grades only)")
    fg.set_defaults(fn=cmd_forget)
    sl = sub.add_parser("slurm", help="grade a week as a Slurm job array: submit, collect, resubmit")
    sl.add_argument("action", choices=("submit", "collect", "resubmit"))
    sl.add_argument("week")
    sl.add_argument("--seed", type=int)
    sl.add_argument("--seed-file")
    sl.add_argument("--students", help="submit only these students (comma-separated plain ids)")
    sl.add_argument("--student", action="append", help="submit only this student (any id; repeatable)")
    sl.add_argument("--students-file", help="submit only the students of this file (one id a line)")
    sl.add_argument("--chunk", type=int, help="students per array task (default 1)")
    sl.add_argument("--partition")
    sl.add_argument("--time", help="time limit of one task (default 01:00:00)")
    sl.add_argument("--account")
    sl.add_argument("--gres", help="generic resources of one task (default gpu:1; '' for a CPU-only task)")
    sl.add_argument("--cpus-per-task", type=int)
    sl.add_argument("--mem")
    sl.add_argument("--max-parallel", type=int, help="at most this many tasks at once (--array=...%%N)")
    sl.add_argument("--sbatch-arg", action="append", dest="sbatch_args",
                    help="one more #SBATCH line, e.g. --sbatch-arg=--qos=short (repeatable)")
    sl.add_argument("--dry-run", action="store_true", help="print the script and the roster; submit nothing")
    sl.set_defaults(fn=cmd_slurm)
    k = sub.add_parser("known", help="check the known answers")
    k.add_argument("slugs", nargs="*")
    k.add_argument("--cpu", action="store_true", help="grade as if no GPU were present")
    k.set_defaults(fn=cmd_known)
    c = sub.add_parser("calibrate", help="per-GPU bars from a record (default: every recorded GPU) or measured here")
    c.add_argument("slugs", nargs="+")
    c.add_argument("--record", action="append", help="a recorded_<gpu>.json to calibrate from (repeatable)")
    c.add_argument("--measure", action="store_true", help="time the course solution and its baseline on this GPU")
    c.add_argument("--write", action="store_true", help="write the calibration tables into the spec")
    c.set_defaults(fn=cmd_calibrate)
    r = sub.add_parser("release", help="generate weeks/ from solutions/")
    r.add_argument("weeks", nargs="*")
    r.set_defaults(fn=cmd_release)
    _understanding_parser(sub)
    return ap


def _understanding_parser(sub) -> None:
    """`autograder understanding measure | sheets | import`."""
    u = sub.add_parser("understanding", help="understanding checks from each student's measured mutants")
    u.add_argument("action", choices=("measure", "sheets", "import"))
    u.add_argument("week")
    u.add_argument("answers", nargs="?", help="import: the answers CSV (student, question id, answer)")
    u.add_argument("--measured", help="the folder of <student>/<slug>.json (default: <out>/<week>/measured, where "
                   "measure writes them)")
    u.add_argument("--gpus", default="all", help="measure: all, or GPU ids like 0,1 (one lane each)")
    u.add_argument("--runs", type=int, default=3, help="measure: runs of each mutant (a class that differs between "
                   "runs is not asked)")
    u.add_argument("--rounds", type=int, default=8, help="measure: interleaved rounds of a correct mutant's timing")
    u.add_argument("--students", help="measure: only these students (comma-separated plain ids)")
    u.add_argument("--student", action="append", help="measure: only this student (any id; repeatable)")
    u.add_argument("--students-file", help="measure: only the students of this file")
    u.add_argument("--recorded", action="store_true", help="sheets: for the answers make gpu-test measured (course "
                   "solution, known slow answer, the assistant's: kernels/<slug>/mutants_<gpu>.json) and the cohort it "
                   "measured (autograder/recorded_understanding_<gpu>.json), one sheet each")
    u.add_argument("--per-day", type=int, default=3, help="sheets: multiple-choice questions a day (default 3)")
    u.add_argument("--out", help="sheets and key folder (default: <grading dir>/understanding)")
    u.add_argument("--practice", action="store_true", help="sheets: also <out>/practice_<week>/, keys and feedback "
                   "shown (practice mode, or to hand back after grading)")
    u.add_argument("--key", help="import: the key CSV (default: <out>/key_<week>.csv)")
    u.add_argument("--weight", type=float, default=1.0, help="import: the checks' weight beside the kernel's points")
    u.add_argument("--seed", type=int)
    u.add_argument("--seed-file")
    u.set_defaults(fn=cmd_understanding)


def main(argv: list[str] | None = None) -> int:
    for stream in (sys.stdout, sys.stderr):  # a folder name that is not UTF-8, should one reach a message: \xe9, in
        if hasattr(stream, "reconfigure"):  # any locale (never a raw byte a log reader chokes on, never a crash)
            stream.reconfigure(errors="backslashreplace")
    ap = parser()
    args = ap.parse_args(argv)
    if os.environ.get("COURSE_GRADING_DIR"):  # relative to where the command runs; its children run in the course root
        os.environ["COURSE_GRADING_DIR"] = str(grading_dir())
    return args.fn(args)


if __name__ == "__main__":
    sys.exit(main())
