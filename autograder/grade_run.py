"""One run of `autograder grade` on this host (autograder.cli): the batch graded by the pool with its progress shown,
the feedback pages written as students are merged, the batch record, the CSV export and the report, and the summary
of what was not graded (hand-in mistakes, students to grade again, named as options of the command).
"""

from __future__ import annotations

import json
import shlex
import sys
import time
from pathlib import Path

from kernels.paths import write_whole

from .batch import class_assignment, make_template
from .children import Interrupted
from .handin import misplaced_hand_ins
from .pool import run_pool
from .record import export_week, flag_feedback, problem_feedback, prune_batches, update_batch_record
from .release import nbgrader
from .report import write_report


def students_option(ids: list[str]) -> str:
    """The options that name exactly `ids` in a shell command: plain ids as `--students a,b`, any other (a comma, a
    space, a quote, ...) as `--student 'smith,john'` each (shlex.quote). An option whose value starts with "-" is
    written with "=" (`--student=-x`): argparse would take the value for an option."""
    plain = [s for s in ids if "," not in s and shlex.quote(s) == s]

    def opt(name: str, value: str) -> str:
        return f"{name}={shlex.quote(value)}" if value.startswith("-") else f"{name} {shlex.quote(value)}"

    return " ".join(([opt("--students", ",".join(plain))] if plain else [])
                    + [opt("--student", s) for s in ids if s not in plain])


def _grade(args, week, secret, seed_source, grading, students, lanes) -> int:
    print(f"autograde {week}: {len(students)} student(s); preparing the batch (the gradebook template: nbgrader "
          "generate_assignment, about 10 s when the week's sources changed, while each lane measures its GPU) ...",
          flush=True)
    prune_batches(grading, max(0, args.keep_batches - 1))
    started = time.time()
    run_id = time.strftime("%Y%m%d-%H%M%S")
    batch = grading / "batch" / run_id
    show = None
    template = batch / "template.db"  # make_template's; made by `prepare` while the lanes measure their GPUs

    phases: dict[str, float] = {}  # seconds of each step outside the lanes' grading: batch/<run>/phases.json
    prepare, after_merge = _timed_steps(week, grading, batch, template, phases)
    try:
        t0 = time.perf_counter()
        show = _progress(week, students, lanes)
        per_student, lane_summary = run_pool(week, students, lanes, grading=grading, batch=batch, template=template,
                                             task_timeout=args.task_timeout, progress=show, prepare=prepare,
                                             after_merge=after_merge)
    except (Interrupted, KeyboardInterrupt) as exc:
        if show is not None:
            show.close()
        merged = exc.merged if isinstance(exc, Interrupted) else {}
        if merged:
            update_batch_record(grading, week, {"id": run_id, "where": "pool", "started_at": started,
                                                "wall_s": time.time() - started, "interrupted": True,
                                                "seed_source": seed_source, "lanes": {}}, merged)
        rest = [s for s in students if s not in merged]
        print(f"interrupted: {len(merged)} of {len(students)} merged (kept in the gradebook); the grading processes "
              f"were stopped. Run the same command to finish" + (f" (or only the rest: autograder grade {week} "
                                                                  f"{students_option(rest)})" if merged and rest
                                                                  else ""), flush=True)
        return 130
    show.close()
    wall = time.perf_counter() - t0
    run = {"id": run_id, "where": "pool", "started_at": started, "wall_s": wall, "students": students,
           "seed_source": seed_source, "cpu": all(not lane.figures.get("device") for lane in lanes),
           "lanes": lane_summary}
    phases["pool"] = wall
    t = time.perf_counter()
    if not args.students:  # a student with no <week>/ folder who handed the week's notebooks in elsewhere
        per_student.update(misplaced_hand_ins(grading / "submitted", week, students))
    record = update_batch_record(grading, week, run, per_student)
    try:
        out, report = _pages_export_report(week, grading, record, phases, t)
        write_whole(batch / "phases.json", json.dumps({k: round(v, 2) for k, v in phases.items()}, indent=1))
    except KeyboardInterrupt:
        print(f"interrupted: {len(per_student)} of {len(students)} merged (kept in the gradebook); the feedback, "
              f"the CSV export or the report were not written. Run the same command to finish", flush=True)
        return 130
    missing = sorted(s for s, e in per_student.items() if e.get("not_graded"))
    retry = [s for s in missing if not per_student[s].get("permanent")]
    stuck = [s for s in missing if per_student[s].get("permanent")]
    said, details, misplaced = hand_in_mistakes(week, per_student)
    graded = [s for s in students if s not in missing and s not in misplaced]
    print(f"graded {len(graded)} of {len(students)} submissions in {wall:.0f} s on {len(lanes)} lane(s)"
          f"{' (on CPU: quiz points only)' if run['cpu'] else ''}{''.join(f', {x}' for x in said)}; gradebook CSV: "
          f"{out}; class report: {report}")
    if retry:
        print(f"NOT GRADED ({len(retry)}), retry: autograder grade {week} {students_option(retry)}")
    for s in stuck:
        print(f"NOT GRADED {s}: {per_student[s]['not_graded'][:400]}")
    for line in details:
        print(line)
    if misplaced:
        print(f"HAND-IN MISTAKES ({len(misplaced)}): once the hand-ins are mended, autograder grade {week} "
              f"{students_option(sorted(misplaced))}")
    return 2 if missing or misplaced else 0


def _timed_steps(week: str, grading: Path, batch: Path, template: Path, phases: dict):
    """run_pool's `prepare` (the class gradebook's assignment, the batch's template) and `after_merge` (the feedback
    pages as students are merged), each timing itself into `phases`: set_up, last_feedback (the pages written once
    the lanes have stopped)."""
    feed = _feedback_as_merged(week, grading)

    def prepare() -> None:
        t = time.perf_counter()
        class_assignment(week, grading)  # the gradebook must know the assignment and its checksums
        if make_template(week, batch) != template:
            raise RuntimeError(f"the batch's template is not {template}")
        phases["set_up"] = time.perf_counter() - t

    def after_merge(entries: dict, alone: bool) -> None:
        t = time.perf_counter()
        feed(entries, alone)
        if alone:
            phases["last_feedback"] = phases.get("last_feedback", 0.0) + time.perf_counter() - t

    return prepare, after_merge


def _pages_export_report(week: str, grading: Path, record: dict, phases: dict, t: float) -> tuple[Path, Path]:
    """A run's last steps, each timed into `phases` (from `t`): the pages of what the record holds besides the
    graded students' (theirs were written as they were merged, _feedback_as_merged: a student with no folder of the
    week), the CSV export, the class report. Returns (CSV, report)."""
    problem_feedback(grading, week, record["per_student"])
    flag_feedback(grading, week, record["per_student"])  # a page already right is left as it is
    phases["record_and_pages"], t = time.perf_counter() - t, time.perf_counter()
    out = export_week(week, grading)
    phases["csv_export"], t = time.perf_counter() - t, time.perf_counter()
    report = write_report(week, grading)
    phases["report"] = time.perf_counter() - t
    return out, report


def hand_in_mistakes(week: str, per_student: dict) -> tuple[list[str], list[str], list[str]]:
    """What the summary line says of hand-ins that were not graded as handed in, and the lines after it.
    Returns (clauses of the summary line, one line per mistake, the students whose hand-in of `week` was not graded
    in full: a notebook not readable, several copies, one in another week's folder — exit status 2). A notebook of
    another week found in this week's folder is named too, but costs this week's grading nothing."""
    kinds = {"malformed": "not readable", "ungraded": "not graded as placed"}
    said, details, misplaced = [], [], []
    for key, what in kinds.items():
        hits = [(s, str(m).split(":", 1)[0]) for s, e in sorted(per_student.items()) if isinstance(e, dict)
                for m in e.get(key) or []]
        if hits:
            said.append(f"{len(hits)} hand-in{'s' * (len(hits) > 1)} {what}: "
                        + ", ".join(f"{s}/{week}/{nb}" for s, nb in hits[:8]) + (" ..." if len(hits) > 8 else ""))
            misplaced += [s for s, _ in hits if s not in misplaced]
    other = [(s, n) for s, e in sorted(per_student.items()) if isinstance(e, dict) for n in e.get("notes") or []
             if " notebook, found in " in str(n)]
    if other:
        said.append(f"{len(other)} notebook{'s' * (len(other) > 1)} of another week in {week}/")
    for s in misplaced:
        e = per_student[s]
        for m in e.get("malformed") or []:
            details.append(f"NOT READABLE {s}: {m} (scored 0; a copy saved again in JupyterLab is graded)")
        details += [f"HAND-IN {s}: {n}" for n in e.get("notes") or []]
    details += [f"HAND-IN {s}: {n}" for s, n in other if s not in misplaced]
    return said, details, misplaced


def _feedback_as_merged(week: str, grading: Path):
    """run_pool's after_merge: the feedback pages of the students just merged, while the lanes grade the rest (so the
    last student's pages are all that is left when grading ends). The pages of these students are written again
    (--force: a re-grade of the same hand-in keeps its timestamp, which nbgrader would take as up to date); every other
    student's stay as they are, so a re-grade of one student converts that student's notebooks, not the class's
    (about 0.5 s a notebook). nbgrader runs in a process of its own while the lanes' threads run (`alone`=False: its
    in-process form changes the environment and folder of the whole process), in this one once they have stopped."""
    def feed(entries: dict, alone: bool) -> None:
        names = sorted(entries)
        nbgrader("generate_feedback", week, "--force", *feedback_scope(grading, week, names), check=False,
                 here=alone)
        problem_feedback(grading, week, entries)
        flag_feedback(grading, week, names)

    return feed


def feedback_scope(grading: Path, week: str, students: list[str]) -> list[str]:
    """generate_feedback's options that leave out every student with autograded work of `week` but `students`
    (nbgrader splits the list on commas: an id holding one is written again rather than left out)."""
    graded = set(students)
    others = sorted(p.parent.name for p in Path(grading).glob(f"autograded/*/{week}") if p.parent.name not in graded)
    return [f"--CourseDirectory.student_id_exclude={','.join(others)}"] if others else []


class _progress:
    """The batch's progress: on a terminal one bar for the class and one per GPU lane (the student it grades, how
    many it graded); otherwise (a log, a Slurm job) one line per event."""

    def __init__(self, week: str, students: list[str], lanes):
        from tqdm import tqdm

        self.tty = sys.stdout.isatty()
        self.total = tqdm(total=len(students), desc=f"autograde {week} ({len(lanes)} lane{'s' * (len(lanes) > 1)})",
                          unit="student", file=sys.stdout, position=0, disable=not self.tty)
        self.bars = {id(lane): tqdm(total=None, desc=f"  {lane.label}", unit="student", file=sys.stdout,
                                    position=i + 1, bar_format="{desc}: {n} graded{postfix}", disable=not self.tty)
                     for i, lane in enumerate(lanes)}
        self.done = 0
        self.failed: set[str] = set()
        self.n = len(students)
        if not self.tty:
            print(f"autograde {week}: {len(students)} students on {len(lanes)} lane(s): "
                  + ", ".join(lane.label for lane in lanes), flush=True)

    def _say(self, text: str) -> None:
        from tqdm import tqdm

        if self.tty:
            tqdm.write(text, file=sys.stdout)
        else:
            print(text, flush=True)

    def __call__(self, kind, lane, job, entry) -> None:
        bar = self.bars.get(id(lane)) if lane is not None else None
        label = lane.label if lane is not None else "—"
        if kind == "lane":
            if lane.state in ("wedged", "retired"):
                self._say(f"[{label}] {lane.state}: {lane.why[:300]} (takes no more students)")
            elif lane.state == "grading" and lane.figures.get("ceilings"):
                c = lane.figures["ceilings"]
                self._say(f"[{label}] trusted baseline of {lane.figures.get('device')}: copy "
                          f"{c.get('copy_tbps', 0):.2f} TB/s, cuBLAS {c.get('cublas_bf16_tflops', 0):.0f} TFLOPS")
            if bar is not None:
                bar.set_postfix_str(lane.state)
        elif kind == "start":
            if bar is not None:
                bar.set_postfix_str(job.label)
        elif kind == "part":  # one part of a hand-in graded in parts; the student counts once all are merged
            if bar is not None:
                bar.set_postfix_str("")
            if not self.tty:
                self._say(f"[{label}] {job.label}: graded")
        elif kind == "handback":
            self._say(f"[{label}] {job.label}: not graded here ({job.attempts[-1]['why'][:200]}); handed back once")
        elif kind == "failed":
            if job.student in self.failed:  # a second part of the same hand-in
                return
            self.failed.add(job.student)
            self.done += 1
            self.total.update(1)
            self._say(f"[{label}] {job.student}: {entry.get('not_graded', 'not graded, retry')[:300]}")
        elif kind == "done":
            self.done += 1
            self.total.update(1)
            if bar is not None:
                bar.set_postfix_str("")
                bar.update(1)
            if entry.get("malformed"):
                self._say(f"{job.student}: malformed notebook(s) graded 0: " + "; ".join(entry["malformed"]))
            for note in entry.get("notes") or []:
                self._say(f"{job.student}: {note}")
            if not self.tty:
                self._say(f"[{label}] {job.student}: graded in {entry.get('wall_s') or 0:.0f} s "
                          f"({self.done}/{self.n})")

    def close(self) -> None:
        for b in self.bars.values():
            b.close()
        self.total.close()
