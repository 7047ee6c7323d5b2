"""Practice: "what would break if" in a notebook — the understanding checks' mutants of the student's own kernel,
measured on a Hopper GPU once it passes the check (autograder.mutants), or the course solution's recorded outcomes
elsewhere, each behind a click."""

from __future__ import annotations

import html
import json

from .mutants import ROOT, measure_answer
from .mutation import mutate
from kernels.record import device_tag
import secrets
from .harness import run_exercise
from .score import score
from .spec import load


def recorded(slug: str) -> dict | None:
    """The recorded outcomes of the course solution's mutants (kernels/<slug>/mutants_<gpu>.json, from make gpu-test's
    "understanding checks"): this GPU's record, else the first recorded GPU's. None when no GPU recorded them."""
    from kernels.device import gpu

    folder = ROOT / "kernels" / slug
    here = device_tag((gpu() or {}).get("name")) if gpu() else None
    files = sorted(folder.glob("mutants_*.json"), key=lambda p: (p.stem != f"mutants_{here}", p.name))
    for f in files:
        doc = json.loads(f.read_text())
        if (doc.get("answers") or {}).get("solution"):
            return doc
    return None


def _show(rows: list[dict], head: str) -> None:
    """The practice questions, each outcome behind a click (<details>) in a notebook, plain text elsewhere."""
    try:
        from IPython import get_ipython
        from IPython.display import HTML, display

        rich = get_ipython() is not None
    except ImportError:
        rich = False
    if not rich:
        print(head)
        for m in rows:
            print(f"  line {m['line']}: {m['before']}  ->  {m['after']}\n    what happens? {m['outcome']}: "
                  f"{m.get('detail', '')}\n    why: {m['teaches']}")
        return
    parts = [f"<p>{html.escape(head)}</p><ol>"]
    for m in rows:
        parts.append(f"<li><p>line {m['line']} ({html.escape(m['change'])}):</p><pre>{html.escape(m['before'])}\n"
                     f"→ {html.escape(m['after'])}</pre><details><summary>What happens when it runs? (think, then "
                     f"click)</summary><p><b>{html.escape(m['outcome'])}</b>: {html.escape(m.get('detail', ''))}</p>"
                     f"<p>{html.escape(m['teaches'])}</p></details></li>")
    display(HTML("".join(parts) + "</ol>"))


def what_if(slug: str, exercise: str, source) -> list[dict]:
    """Practice: "what would break if". On a Hopper GPU, once `source` passes the check, every mutant of YOUR kernel
    is measured (what it took for the course solutions: autograder/recorded_practice_<gpu>.json) and shown with its
    outcome behind a click. Without a GPU (or before the kernel passes): the recorded outcomes of the course
    solution's mutants, and the sites the same operators find in your kernel. Returns the rows shown."""
    from kernels.device import cpu_mode_reason, is_hopper

    if not isinstance(source, str) or not source.strip():
        print(f"{slug} / {exercise}: write your kernel first: what_if measures what breaks in it")
        return []
    mine = mutate(slug, source, exercise)
    if is_hopper():

        res = score(load(slug).exercises[exercise], run_exercise(slug, exercise, source, seed=secrets.randbits(48)))
        if res.parts["correctness"].points == res.parts["correctness"].max_points:
            got = measure_answer(slug, source, exercise, progress=None)
            _show(got["mutants"], f"Your kernel, {len(got['mutants'])} changes, each measured on this GPU "
                                  f"({got['gpu_s']:.0f} s):")
            return got["mutants"]
        print("your kernel does not pass the check yet: the outcomes below are the course solution's")
    doc = recorded(slug)
    if doc is None:
        print(f"{cpu_mode_reason()}, and no GPU has recorded the outcomes for {slug} yet; the changes the checks "
              f"would measure in your kernel:")
        for m in mine:
            print(f"  line {m.line}: {m.before}  ->  {m.after}  ({m.op.change})")
        return []
    rows = doc["answers"]["solution"]["mutants"]
    _show(rows, f"The course solution's changes, measured on the {doc['device']} ({doc['date']}); your kernel has "
                f"{len(mine)} such sites (lines {', '.join(str(m.line) for m in mine) or 'none'}):")
    return rows
