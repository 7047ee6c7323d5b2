"""The understanding checks' recorded keys — the outcome tables of the answers make gpu-test measured
(kernels/<slug>/mutants_<gpu>.json) and the cohort it measured (autograder/recorded_understanding_<gpu>.json) — as
measured dicts the sheets read, and what measuring them cost on the GPU:

    python -m autograder.understanding_records --markdown     # the README's cost table (a test holds it)
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from kernels.paths import write_whole
from .mutants import ATTACK_ANSWERS
from .spec import all_specs
from .release import ROOT

COST_BAR_S = 60  # GPU seconds per student per exercise on one GPU, at most (the understanding checks' budget)


def measured_from_records(out: Path, week: str | None = None, tag: str | None = None) -> list[Path]:
    """The answers make gpu-test measured (kernels/<slug>/mutants_<gpu>.json: the course solution, the known slow
    answer and the coding assistant's, see tools/gpu_check.understanding_checks) as measured dicts under
    <out>/<answer>/<slug>.json, the layout read_measured reads: one "student" per answer ("solution", "slow",
    "assistant", and each attack on the checks: autograder.mutants.ATTACK_ANSWERS), so their sheets are built like a class's. `week`: its days only; `tag`: that GPU's records only
    (else each topic's first). Returns the files written."""
    from kernels.record import KERNELS

    days = {s.slug for s in all_specs() if week is None or s.assignment == week}

    written = []
    for d in sorted(p for p in KERNELS.iterdir() if p.is_dir() and p.name in days):
        files = sorted(d.glob(f"mutants_{tag or '*'}.json"))
        if not files:
            continue
        doc = json.loads(files[0].read_text())
        for name, res in doc["answers"].items():
            who = name if name in ("solution", "assistant", *ATTACK_ANSWERS.get(d.name, {})) else "slow"
            f = Path(out) / who / f"{d.name}.json"
            f.parent.mkdir(parents=True, exist_ok=True)
            write_whole(f, json.dumps({**res, "slug": d.name, "answer": name, "device": doc["device"],
                                       "date": doc["date"]}))
            written.append(f)
    return written


def measured_from_cohort_record(out: Path, week: str | None = None, tag: str | None = None) -> list[Path]:
    """The cohort make gpu-test measured (autograder/recorded_understanding_<gpu>.json: every member's kernels of the
    week, their mutants measured on that GPU, see tools/gpu_mutants.understanding_cohort) as measured dicts under
    <out>/<student>/<slug>.json. `week`: that week's record only; `tag`: that GPU's (else the first). Returns the files
    written (none where nothing is recorded)."""

    files = sorted((ROOT / "autograder").glob(f"recorded_understanding_{tag or '*'}.json"))
    written = []
    for rec in files[:1]:
        doc = json.loads(rec.read_text())
        if week is not None and doc.get("week") != week:
            continue
        for student, days in doc["measured"].items():
            for slug, res in days.items():
                f = Path(out) / student / f"{slug}.json"
                f.parent.mkdir(parents=True, exist_ok=True)
                write_whole(f, json.dumps({**res, "slug": slug, "device": doc["device"], "date": doc["date"]}))
                written.append(f)
    return written



def cost_rows() -> list[dict]:
    """GPU seconds that measured each recorded answer's keys, per exercise: {"gpu", "date", "who", "slug", "gpu_s",
    "mutants"} for every answer of every outcome table and every student-day of every recorded cohort."""
    from kernels.record import KERNELS

    rows = []
    for f in sorted(KERNELS.glob("*/mutants_*.json")):
        doc = json.loads(f.read_text())
        for name, res in doc["answers"].items():
            rows.append({"gpu": doc["device"], "date": doc["date"], "who": f"answer {name}", "slug": f.parent.name,
                         "gpu_s": res.get("gpu_s") or 0.0, "mutants": len(res.get("mutants") or [])})
    for f in sorted((ROOT / "autograder").glob("recorded_understanding_*.json")):
        doc = json.loads(f.read_text())
        for student, days in doc["measured"].items():
            for slug, res in days.items():
                rows.append({"gpu": doc["device"], "date": doc["date"], "who": f"{doc['cohort']} {student}",
                             "slug": slug, "gpu_s": res.get("gpu_s") or 0.0,
                             "mutants": len(res.get("mutants") or [])})
    return rows


def cost_markdown() -> str:
    """Per GPU and record date: how many answers' keys, the median and the largest GPU seconds per student and
    exercise, the exercise where the largest was spent, against COST_BAR_S."""
    groups: dict = {}
    for r in cost_rows():
        kind = "cohort" if not r["who"].startswith("answer ") else "answers"
        groups.setdefault((r["gpu"], r["date"], kind), []).append(r)
    lines = ["| GPU | date | keys of | student-exercises | mutants | median GPU s | max GPU s (exercise) |"
             f" within {COST_BAR_S} s |", "|---|---|---|---|---|---|---|---|"]
    for (gpu, date, kind), rs in sorted(groups.items()):
        s = sorted(r["gpu_s"] for r in rs)
        top = max(rs, key=lambda r: r["gpu_s"])
        what = "the recorded answers (solution, slow, assistant; decoy)" if kind == "answers" else rs[0]["who"].split()[0] + \
            " cohort"
        lines.append(f"| {gpu} | {date} | {what} | {len(rs)} | {sum(r['mutants'] for r in rs)} | {s[len(s) // 2]:.1f} "
                     f"| {top['gpu_s']:.1f} ({top['slug']}) | {'yes' if s[-1] <= COST_BAR_S else 'no'} |")
    return "\n".join(lines)


if __name__ == "__main__":  # python -m autograder.understanding_records --markdown
    if "--markdown" in sys.argv:
        print(cost_markdown())
    else:
        for r in cost_rows():
            print(f"{r['gpu']} {r['date']} {r['who']:40s} {r['slug']:20s} {r['mutants']:3d} mutants "
                  f"{r['gpu_s']:7.1f} s")
