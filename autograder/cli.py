"""The `autograder` command (instructors).

    autograder grade week1 [--seed-file F | --seed N]   nbgrader autograde + feedback + gradebook CSV, every student
    autograder known [naive_loads ...] [--cpu]           known answers vs their expected scores (table)
    autograder calibrate naive_loads [--write]           on an H100: time the course solution, set the spec's bar
    autograder release [week1]                           weeks/ from solutions/ (nbgrader generate_assignment)

The secret seed is read from --seed-file (default: $COURSE_SECRET_SEED_FILE) or --seed, given at grading time and
never stored in the course. Submissions live in nbgrader's layout: build/grading/submitted/<student>/<week>/.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import re
import sys
import time
from pathlib import Path

from .release import grading_dir, nbgrader


def _secret(args) -> str:
    if args.seed is not None:
        return str(args.seed)
    f = args.seed_file or os.environ.get("COURSE_SECRET_SEED_FILE")
    if f:
        return Path(f).read_text().strip()
    if os.environ.get("COURSE_SECRET_SEED"):
        return os.environ["COURSE_SECRET_SEED"]
    raise SystemExit("grading needs the secret seed: --seed-file FILE (kept outside the course), --seed N, or "
                     "COURSE_SECRET_SEED")


def cmd_grade(args) -> int:
    from tqdm import tqdm

    week = args.week
    secret = _secret(args)
    submitted = grading_dir() / "submitted"
    students = sorted(p.parent.name for p in submitted.glob(f"*/{week}") if p.is_dir())
    if not students:
        print(f"no submissions under {submitted}/<student>/{week}/")
        return 1
    # the gradebook must know the assignment and its checksums: generate the release into the grading folder
    nbgrader("generate_assignment", week, "--force", f"--CourseDirectory.release_directory={grading_dir() / 'release'}")
    batch = grading_dir() / "batch" / time.strftime("%Y%m%d-%H%M%S")
    env = dict(os.environ, COURSE_SECRET_SEED=secret, COURSE_BATCH_DIR=str(batch))
    results = {}
    t0 = time.perf_counter()
    gpus = _gpu_count()
    prepare_baselines(week, batch, gpus)
    workers = max(1, gpus)
    bar = tqdm(total=len(students), desc=f"autograde {week} ({workers} worker{'s' * (workers > 1)})",
               unit="student", file=sys.stdout)

    def grade_one(student: str, gpu: int | None) -> None:
        s0 = time.perf_counter()
        malformed = set_aside_malformed(submitted / student / week)
        wenv = dict(env, CUDA_VISIBLE_DEVICES=str(gpu)) if gpu is not None and gpus > 1 else env
        res = None
        for _ in range(3):  # concurrent workers share one sqlite gradebook: retry a locked database
            res = nbgrader("autograde", week, f"--student={student}", "--force", env=wenv, check=False)
            if res.returncode == 0 or "database is locked" not in (res.stderr or ""):
                break
            time.sleep(1.0)
        results[student] = {"returncode": res.returncode, "wall_s": time.perf_counter() - s0, "gpu": gpu,
                            "malformed": malformed, "log_tail": (res.stderr or "")[-1500:]}
        if malformed:
            tqdm.write(f"{student}: malformed notebook(s) graded 0: " + "; ".join(malformed))
        bar.set_postfix_str(student)
        bar.update(1)

    if workers == 1:
        for student in students:
            grade_one(student, 0 if gpus else None)
    else:  # one worker per GPU, each with its own CUDA_VISIBLE_DEVICES
        import queue
        import threading

        todo: queue.Queue = queue.Queue()
        for student in students:
            todo.put(student)

        def worker(gpu: int) -> None:
            while True:
                try:
                    student = todo.get_nowait()
                except queue.Empty:
                    return
                grade_one(student, gpu)

        threads = [threading.Thread(target=worker, args=(g,)) for g in range(workers)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    bar.close()
    ensure_rows(week, students)
    nbgrader("generate_feedback", week, "--force", check=False)
    out = grading_dir() / f"grades_{week}.csv"
    nbgrader("export", f"--to={out}", check=False)
    summary = {"week": week, "students": len(students), "wall_s": time.perf_counter() - t0, "per_student": results}
    (grading_dir() / f"batch_{week}.json").write_text(json.dumps(summary, indent=1))
    from .report import write_report

    report = write_report(week, grading_dir())
    print(f"graded {len(students)} submissions in {summary['wall_s']:.0f} s; gradebook CSV: {out}; "
          f"class report: {report}")
    return 0


def prepare_baselines(week: str, batch: Path, gpus: int) -> None:
    """The trusted figures of the batch — every GPU's ceilings and the course reference of every exercise of the
    week — measured before any student's code runs, each in a process that loads no student code
    (autograder.harness.baseline). Students' harness processes only read them."""
    from .grading import reference_sources
    from .harness import _wants_gpu, prepare_batch
    from .spec import all_specs

    if not gpus or not _wants_gpu(None):
        return
    items = [(s.slug, name, src) for s in all_specs() if s.assignment == week
             for name, src in reference_sources(s).items()]
    saved = {k: os.environ.get(k) for k in ("COURSE_BATCH_DIR", "CUDA_VISIBLE_DEVICES")}
    os.environ["COURSE_BATCH_DIR"] = str(batch)
    try:
        for g in range(gpus) if gpus > 1 else [None]:
            if g is not None:
                os.environ["CUDA_VISIBLE_DEVICES"] = str(g)
            prepare_batch(items, progress=lambda what, g=g: print(f"trusted {what}" + (f" (GPU {g})" if g is not None
                                                                                       else ""), flush=True))
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _gpu_count() -> int:
    try:
        import torch

        return torch.cuda.device_count() if torch.cuda.is_available() else 0
    except Exception:  # noqa: BLE001
        return 0


def set_aside_malformed(folder: Path) -> list[str]:
    """Notebooks that are not valid nbformat JSON are renamed <name>.ipynb.malformed (nbgrader skips them, so the
    student's other notebooks are graded) and reported; the notebook scores 0."""
    import nbformat

    problems = []
    for nb in sorted(folder.glob("*.ipynb")):
        try:
            nbformat.validate(nbformat.read(str(nb), as_version=4))
        except Exception as exc:  # noqa: BLE001 - any reading error is the student's malformed file
            problems.append(f"{nb.name}: {type(exc).__name__}: {str(exc).splitlines()[0][:200]}")
            nb.rename(nb.with_name(nb.name + ".malformed"))
    return problems


def ensure_rows(week: str, students: list[str]) -> None:
    """Every student of the batch has a gradebook row, even one whose every notebook was malformed."""
    from nbgrader.api import Gradebook, MissingEntry

    from .release import grading_dir

    with Gradebook(f"sqlite:///{grading_dir() / 'gradebook.db'}") as gb:
        for student in students:
            try:
                gb.find_submission(week, student)
            except MissingEntry:
                gb.update_or_create_student(student)
                gb.add_submission(week, student)


def cmd_known(args) -> int:
    from .known import check_known, table
    from .spec import all_specs

    slugs = args.slugs or [s.slug for s in all_specs()]
    bad = 0
    for slug in slugs:
        res = check_known(slug, gpu=False if args.cpu else None)
        print(f"== {slug}\n{table(res)}")
        bad += sum(not r.ok for r in res)
    return 1 if bad else 0


from kernels.spec import SOLUTION_MARGIN  # noqa: E402 - the calibration margin lives with the spec data


def calibrate(slug: str, write: bool = False) -> dict:
    """Time the course solution on this H100 beside the copy ceiling; bar = copy_fraction x ceiling (tbps), at most
    the solution's figure / SOLUTION_MARGIN."""
    from kernels.bench import ceilings

    from .answers import cells_by_grade_id, read_literal, _source
    from .grading import solution_notebook
    from .harness import run_exercise
    from .spec import load

    spec = load(slug)
    sol = cells_by_grade_id(solution_notebook(spec))
    out = {}
    text = spec.path.read_text()
    for ex in spec.exercises.values():
        src = read_literal(_source(sol[ex.answer_cell]), ex.answer_var).value
        facts = run_exercise(slug, ex.name, src, seed=int.from_bytes(os.urandom(6), "little"))
        tp = facts.get("throughput", {})
        if not tp.get("graded"):
            why = tp.get("reason") or facts.get("error") or (facts.get("correctness") or {}).get("reason")
            raise RuntimeError(f"{slug}.{ex.name}: the solution could not be timed: {why}")
        value = tp["student"]["value"]
        ceil = tp["student"]["ceilings"]
        bar = ex.parts["throughput"].ceiling_bar(ceil) or _field(text, ex.name, "solution_fraction", 0.9) * value
        bar = min(bar, value / SOLUTION_MARGIN)
        out[ex.name] = {"value": value, "bar": bar, "ceilings": ceil, "solution_over_bar": value / bar}
        if write:
            text = _set(text, ex.name, "bar", f"{bar:.4g}")
            text = _set(text, ex.name, "reference_value", f"{value:.4g}")
            text = _set(text, ex.name, "calibrated", f'"{dt.date.today().isoformat()}"')
    if write:
        spec.path.write_text(text)
    _ = ceilings
    return out


def _section(text: str, ex: str) -> tuple[int, int]:
    start = text.index(f"[exercises.{ex}.throughput]")
    nxt = text.find("\n[", start + 1)
    return start, (len(text) if nxt < 0 else nxt)


def _field(text: str, ex: str, key: str, default=None):
    a, b = _section(text, ex)
    m = re.search(rf"^{key}\s*=\s*([0-9.eE+-]+)", text[a:b], re.M)
    return float(m.group(1)) if m else default


def _set(text: str, ex: str, key: str, value: str) -> str:
    a, b = _section(text, ex)
    sec = text[a:b]
    pat = re.compile(rf"^{key}\s*=.*$", re.M)
    line = f"{key} = {value}"
    sec = pat.sub(line, sec, count=1) if pat.search(sec) else sec.rstrip("\n") + f"\n{line}\n"
    return text[:a] + sec + text[b:]


def cmd_calibrate(args) -> int:
    for slug in args.slugs:
        res = calibrate(slug, write=args.write)
        print(json.dumps({slug: res}, indent=1, default=str))
    return 0


def cmd_release(args) -> int:
    from .release import main as release_main

    release_main(args.weeks)
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="autograder", description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    g = sub.add_parser("grade", help="autograde every submission of a week")
    g.add_argument("week")
    g.add_argument("--seed", type=int)
    g.add_argument("--seed-file")
    g.set_defaults(fn=cmd_grade)
    k = sub.add_parser("known", help="check the known answers")
    k.add_argument("slugs", nargs="*")
    k.add_argument("--cpu", action="store_true", help="grade as if no GPU were present")
    k.set_defaults(fn=cmd_known)
    c = sub.add_parser("calibrate", help="time the course solution on an H100 and set the bar")
    c.add_argument("slugs", nargs="+")
    c.add_argument("--write", action="store_true")
    c.set_defaults(fn=cmd_calibrate)
    r = sub.add_parser("release", help="generate weeks/ from solutions/")
    r.add_argument("weeks", nargs="*")
    r.set_defaults(fn=cmd_release)
    args = ap.parse_args(argv)
    return args.fn(args)


if __name__ == "__main__":
    sys.exit(main())
