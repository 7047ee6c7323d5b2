"""A new day from the template: one command writes a day's folder, its notebook and its tests, and `make test` passes.

    python tools/new_day.py <slug> --week weekN --day N --title "..."     (or: make new-day SLUG=... WEEK=... DAY=...)

Writes, from the files of tools/day_template/ ({slug}, {week}, {day}, {title}, ... filled in; nothing else in them
is touched):
  kernels/<slug>/             __init__.py, <slug>.cu (a small correct stub kernel), launch.py, exercise.py, bench.py,
                              spec.toml, grading/known/ (expected.toml: the solution, one wrong answer, the stub)
  solutions/<week>/dayN_<slug>.ipynb   the course's notebook skeleton (a jupytext percent file, read by jupytext)
  tests/test_<slug>.py        the day's CPU tests
and then weeks/ (`python -m autograder.release <week>`) unless --no-weeks. Refuses a bad slug, a slug that exists, a
week and day whose notebook exists.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

import jupytext
import nbformat

ROOT = Path(__file__).resolve().parent.parent
TEMPLATE = Path(__file__).resolve().parent / "day_template"
SLUG = re.compile(r"[a-z][a-z0-9_]*")
WEEK = re.compile(r"week[1-9][0-9]*")
# template file -> where it goes (relative to the repository root), {slug} etc. filled in
FILES = {
    "__init__.py.tmpl": "kernels/{slug}/__init__.py",
    "kernel.cu": "kernels/{slug}/{slug}.cu",
    "launch.py.tmpl": "kernels/{slug}/launch.py",
    "exercise.py.tmpl": "kernels/{slug}/exercise.py",
    "bench.py.tmpl": "kernels/{slug}/bench.py",
    "spec.toml": "kernels/{slug}/spec.toml",
    "known/expected.toml": "kernels/{slug}/grading/known/expected.toml",
    "test_day.py.tmpl": "tests/test_{slug}.py",
}
NOTEBOOK = "notebook.pct.tmpl"


def fill(text: str, values: dict[str, str]) -> str:
    """`text` with each {name} of `values` replaced; every other brace (C++, f-strings, TOML) left as it is."""
    return re.sub(r"\{(" + "|".join(map(re.escape, values)) + r")\}", lambda m: values[m.group(1)], text)


def problems(root: Path, slug: str, week: str, day: int) -> list[str]:
    out = []
    if not SLUG.fullmatch(slug):
        out.append(f"bad slug {slug!r}: lower case, [a-z][a-z0-9_]*")
    elif (root / "kernels" / slug).exists() or (root / "tests" / f"test_{slug}.py").exists():
        out.append(f"slug {slug!r} exists (kernels/{slug}/ or tests/test_{slug}.py)")
    if not WEEK.fullmatch(week):
        out.append(f"bad week {week!r}: week1, week2, ...")
    if day < 1:
        out.append(f"bad day {day}: 1, 2, ...")
    taken = sorted((root / "solutions" / week).glob(f"day{day}_*.ipynb")) if WEEK.fullmatch(week) else []
    if taken:
        out.append(f"{week} day {day} exists: {taken[0].relative_to(root)}")
    return out


def notebook(values: dict[str, str]):
    """The solutions notebook from the skeleton: read as jupytext percent (nbgrader metadata in the cell headers),
    with stable cell ids and no jupytext metadata."""
    nb = jupytext.reads(fill((TEMPLATE / NOTEBOOK).read_text(), values), fmt="py:percent")
    nb.metadata = {"kernelspec": {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}}
    nb.nbformat, nb.nbformat_minor = 4, 5
    for i, cell in enumerate(nb.cells):
        cell["id"] = f"{values['slug'][:20]}-{i:02d}"
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    nbformat.validate(nb)
    return nb


def create(root: Path, slug: str, week: str, day: int, title: str) -> list[Path]:
    """Write the day under `root`; returns the files written."""
    bad = problems(root, slug, week, day)
    if bad:
        raise SystemExit("new_day: " + "; ".join(bad))
    nb_name = f"day{day}_{slug}.ipynb"
    values = {"slug": slug, "week": week, "day": str(day), "title": title, "notebook": nb_name,
              "week_title": week[0].upper() + week[1:4] + " " + week[4:]}
    written = []
    for src, dst in FILES.items():
        path = root / fill(dst, values)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(fill((TEMPLATE / src).read_text(), values))
        written.append(path)
    nb_path = root / "solutions" / week / nb_name
    nb_path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(notebook(values), str(nb_path))
    return written + [nb_path]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("slug")
    ap.add_argument("--week", required=True)
    ap.add_argument("--day", type=int, required=True)
    ap.add_argument("--title", required=True)
    ap.add_argument("--root", type=Path, default=ROOT, help="the repository to write into (default: this one)")
    ap.add_argument("--no-weeks", action="store_true", help="leave weeks/ alone (run `make weeks` later)")
    a = ap.parse_args(argv)
    for path in create(a.root, a.slug, a.week, a.day, a.title):
        print(f"wrote {path.relative_to(a.root)}")
    if not a.no_weeks:
        subprocess.run([sys.executable, "-m", "autograder.release", a.week], cwd=a.root, check=True)
        print(f"wrote weeks/{a.week}/ (nbgrader generate_assignment)")
    print(f"""
next steps:
  1. make test                                   (the new day passes as written)
  2. write the day: kernels/{a.slug}/{a.slug}.cu and its rungs, the exercise, the notebook's prose
     (solutions/{a.week}/day{a.day}_{a.slug}.ipynb), known answers in kernels/{a.slug}/grading/known/
  3. make weeks                                  (after every notebook edit: weeks/ is generated)
  4. on a Hopper GPU: make gpu-test, then `autograder calibrate` for the throughput bar""")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
