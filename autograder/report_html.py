"""The class report's page (autograder.report): self-contained HTML, CSS inline, plots inline; each field chosen from
the verdicts, never dumped, every message passed through `_clean`."""

from __future__ import annotations

import html
import statistics
import time
import urllib.parse
from collections import Counter
from pathlib import Path

from .report_data import (ExerciseInfo, Student, _clean, _natural, _num, leaderboard, max_total, status_of,
                          understanding_of)
from .report_plots import score_histogram, throughput_plot
from .score import CPU_GRADING


# --------------------------------------------------------------------------------------------------------- HTML
CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif;margin:2em auto;max-width:72em;
     padding:0 1em;color:#222}
h1{margin-bottom:.2em} h2{border-bottom:1px solid #ccc;padding-bottom:.2em;margin-top:1.6em}
table{border-collapse:collapse;margin:.6em 0 1.2em 0;font-size:.92em}
th,td{border:1px solid #ddd;padding:.25em .6em;text-align:left;vertical-align:top}
th{background:#f3f3f3} td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
.plots{display:flex;flex-wrap:wrap;gap:1em} .plots img{border:1px solid #eee}
.muted{color:#777} .bad{color:#b00020} .ok{color:#1b7f3b} .flag{color:#b00020;font-family:monospace}
.wide{overflow-x:auto;max-width:100%} .wide td:last-child{min-width:18em;max-width:40em;overflow-wrap:anywhere}
.banner{background:#fff3cd;border:1px solid #e0c36a;padding:.6em 1em}
dl.summary{display:grid;grid-template-columns:max-content auto;gap:.2em 1.2em} dl.summary dt{font-weight:600}
"""


def _e(x) -> str:
    return html.escape(str(x), quote=True)


def _fmt(x: float | None, digits: int = 3) -> str:
    return "—" if x is None else f"{x:.{digits}g}"


def _img(b64: str, alt: str) -> str:
    return f'<img alt="{_e(alt)}" src="data:image/png;base64,{b64}">'


def _table(head: list[str], rows: list[list[str]], num: set[int] = frozenset()) -> str:
    out = ["<table><thead><tr>" + "".join(f"<th>{_e(h)}</th>" for h in head) + "</tr></thead><tbody>"]
    for r in rows:
        out.append("<tr>" + "".join(f'<td class="num">{c}</td>' if i in num else f"<td>{c}</td>"
                                    for i, c in enumerate(r)) + "</tr>")
    out.append("</tbody></table>")
    return "\n".join(out)


def render_html(meta: dict, notebooks: list[str], exercises: list[ExerciseInfo], roster: list[Student]) -> str:
    week = meta["week"]
    secrets = meta["secrets"]
    top = max_total(exercises, roster)
    totals = [s.total for s in roster if s.submitted]
    source = ("the class gradebook (manual scores given in the formgrader included)" if meta.get("has_book")
              else "nbgrader's gradebook export where it has the student, else the trusted verdicts"
              if meta["has_gradebook"] else "the trusted verdicts")
    parts = [f"<!doctype html>\n<html lang='en'><head><meta charset='utf-8'>"
             f"<title>Class report — {_e(week)}</title><style>{CSS}</style></head><body>",
             f"<h1>Class report — {_e(week)}</h1>",
             f"<p class='muted'>Generated {_e(time.strftime('%Y-%m-%d %H:%M'))} from the grading folder's verdicts"
             f"{', gradebook' if meta.get('has_book') or meta['has_gradebook'] else ''} and batch record. Points "
             f"and totals are {_e(source)}; a student's points link to their feedback pages.</p>"]

    cpu = [s.name for s in roster if s.on_cpu]
    if cpu:
        parts.append(_cpu_banner_html(cpu, roster))

    # --- summary
    parts += _summary_html(meta, notebooks, roster, totals, top)

    # --- per exercise
    parts.append("<h2 id='exercises'>Exercises</h2>")
    for ex in exercises:
        parts += _exercise_html(ex, roster)

    # --- flags
    parts.append("<h2 id='flags'>Flags</h2>")
    parts.append(_flags_html(roster, secrets))

    # --- every student
    parts.append("<h2 id='students'>Students</h2>")
    parts.append(_students_html(meta, notebooks, roster, top))
    parts.append("<h2 id='parts'>Points by part</h2>")
    parts.append(_parts_html(meta, exercises, roster))
    parts.append("</body></html>\n")
    return "\n".join(parts)


def _cpu_banner_html(cpu: list[str], roster: list[Student]) -> str:
    """The warning that some students were graded without a GPU, so their totals are not comparable; what CPU
    grading awards in the words of autograder.score.CPU_GRADING."""
    return ("<p class='banner'><strong>Graded on CPU</strong>: "
            f"{len(cpu)} of {sum(s.submitted for s in roster)} students ({_e(', '.join(cpu[:20]))}"
            f"{', ...' if len(cpu) > 20 else ''}) were graded without a GPU (<code>--gpus none</code>). "
            f"{_e(CPU_GRADING)}. Their totals are not comparable with a GPU grading: grade them again on a "
            "Hopper GPU for the real score.</p>")


def _summary_html(meta: dict, notebooks: list[str], roster: list[Student], totals: list[float],
                  top: float) -> list[str]:
    """The summary section: the figures of the batch, the histogram of totals (if any), the lanes (if recorded)."""
    week = meta["week"]
    secrets = meta["secrets"]
    wall = meta["batch_wall_s"]
    n_flags = sum(len(s.flags) for s in roster)
    mean = statistics.fmean(totals) if totals else None
    median = statistics.median(totals) if totals else None
    status = [status_of(s, notebooks) for s in roster]
    counts = ", ".join(f"{status.count(k)} {k}" for k in ("graded", "partly graded", "not graded",
                                                          "not graded, retry", "queued (Slurm)", "no submission")
                       if status.count(k))
    summary = [("students", f"{sum(s.submitted for s in roster)} submitted ({counts})"),
               ("notebooks", ", ".join(notebooks) or "—"),
               ("mean score", f"{_fmt(mean)} / {top:g}" if mean is not None else "—"),
               ("median score", f"{_fmt(median)} / {top:g}" if median is not None else "—"),
               ("flags", str(n_flags)),
               ("batch wall time", f"{wall:.1f} s" + (f" ({wall / max(1, len(totals)):.1f} s per student)"
                                                      if totals else "") if wall is not None else "—")]
    if meta.get("seed_source"):
        summary.append(("secret seed from", str(meta["seed_source"])))
    if meta.get("batch_error"):
        summary.append(("batch record", _clean(meta["batch_error"], secrets)))
    if meta.get("book_error"):
        summary.append(("gradebook", _clean(meta["book_error"], secrets)))
    for note in meta.get("left_out", []):
        summary.append(("folder left out", note))
    parts = ["<h2 id='summary'>Summary</h2><dl class='summary'>"
             + "".join(f"<dt>{_e(k)}</dt><dd>{_e(v)}</dd>" for k, v in summary) + "</dl>"]
    if totals:
        parts.append("<div class='plots'>" + _img(score_histogram(totals, top, f"{week}: total score"),
                                                  "histogram of total scores") + "</div>")
    if meta.get("lanes"):
        parts.append(lanes_html(meta["lanes"], meta.get("where")))
    return parts


def _exercise_html(ex: ExerciseInfo, roster: list[Student]) -> list[str]:
    """One exercise's section: its figures, its plots, and (for a timed exercise) its leaderboard or why none."""
    parts = []
    res = [(s, s.results[ex.key]) for s in roster if s.submitted]
    pts = [p for s, r in res for p, _ in [s.exercise_points(ex) or (r.points, r.max_points)]]
    mx = ex.max_points or max((r.max_points for _, r in res), default=0.0)
    parts.append(f"<h3 id='ex-{_e(ex.key)}'>{_e(ex.notebook)} · {_e(ex.name)}</h3>")
    info = [f"max {mx:g} points", f"mean {_fmt(statistics.fmean(pts)) if pts else '—'}"]
    if ex.metric:
        info.append(f"metric {ex.unit}")
        info.append(f"bar {ex.bar:.4g} {ex.unit} (median of the bars applied: a fraction of each run's baseline)"
                    if ex.bar else "no bar applied (nothing timed)")
    parts.append(f"<p class='muted'>{_e('; '.join(info))}</p>")
    plots = []
    if pts:
        plots.append(_img(score_histogram(pts, mx, f"{ex.name}: points"), f"{ex.name} score histogram"))
    board = leaderboard(ex, roster) if ex.metric else []
    on_board = {s.name for s, _ in board}
    timed_bad = [r.value for s, r in res if r.value is not None and s.name not in on_board]
    if board or timed_bad:
        plots.append(_img(throughput_plot(ex, [r.value for _, r in board], timed_bad),
                          f"{ex.name} throughput distribution"))
    parts.append("<div class='plots'>" + "".join(plots) + "</div>")
    if ex.metric:
        if board:
            rows = [[str(i), _e(s.name), _fmt(r.value, 4),
                     _fmt(r.value / (r.bar or ex.bar), 3) + "×" if (r.bar or ex.bar) else "—",
                     "{:g} / {:g}".format(*(s.exercise_points(ex) or (r.points, r.max_points)))]
                    for i, (s, r) in enumerate(board, 1)]
            parts.append(f"<h4>Leaderboard — {_e(ex.name)}</h4>"
                         + _table(["rank", "student", f"throughput ({ex.unit})", "of the bar", "points"], rows,
                                  {0, 2, 3, 4}))
        else:
            parts.append("<p class='muted'>No leaderboard: no correct submission was timed (throughput is "
                         "measured on a Hopper GPU only).</p>")
    return parts


def _flags_html(roster: list[Student], secrets: list[str]) -> str:
    """The table of every flag raised, or a line saying there is none."""
    frows = [[_e(s.name), _e(nb), f"<span class='flag'>{_e(_clean(f, secrets))}</span>"]
             for s in roster for nb, f in s.flags]
    return _table(["student", "notebook", "flag"], frows) if frows else "<p class='muted'>No flags.</p>"


def _students_html(meta: dict, notebooks: list[str], roster: list[Student], top: float) -> str:
    """The table of every student: status, total, points per notebook (linked to the student's feedback page for it;
    or malformed, or none), flags, lane, notes (each once, with its count). The points per notebook and the total
    come from one source (Student.notebook_points, Student.total): with a gradebook, they add up."""
    und = meta.get("understanding")  # beside the kernel's points, when imported (autograder understanding import)
    k = 1 if und else 0
    head = (["student", "status", "total"] + ([f"understanding (weight {_num(und.get('weight')):g})"] if und else [])
            + notebooks + ["flags", "wall (s)", "graded on", "notes"])
    srows = []
    for s in roster:
        st = status_of(s, notebooks)
        cls = "ok" if st == "graded" else "bad"
        late = f" <span class='muted'>(late: −{s.penalty:g})</span>" if s.penalty else ""
        cells = [_e(s.name), f"<span class='{cls}'>{_e(st)}</span>", f"{s.total:g} / {top:g}{late}"]
        if und:
            u = understanding_of(meta, s.name)
            cells.append(f"{u[0]:g} / {u[1]:g}" if u else "—")
        bad = s.malformed
        for nb in notebooks:
            pts = s.notebook_points(nb)
            text = (f"{pts[0]:g} / {pts[1]:g}" if pts is not None and (nb in s.verdicts or nb not in bad)
                    else "<span class='bad'>malformed</span>" if nb in bad else "—")
            href = _feedback_href(meta, s.name, nb)
            cells.append(f"<a href=\"{_e(href)}\">{text}</a>" if href else text)
        cells += [str(len(s.flags)), _fmt(s.wall_s, 3), _e(s.lane) or "—",
                  "<br>".join(_e(n) for n in _counted(_clean(n, meta["secrets"]) for n in s.notes))]
        srows.append(cells)
    n = k + len(notebooks)
    return "<div class='wide'>" + _table(head, srows, {2, *range(3, 3 + n), 3 + n, 4 + n}) + "</div>"


def _feedback_href(meta: dict, student: str, nb: str) -> str | None:
    """The link from the report (<grading>/report_<week>.html) to nbgrader's feedback page of a student's notebook
    (<grading>/feedback/<student>/<week>/<nb>.html), if it was written: relative (the folder can move, or be opened
    through file://), each part percent-encoded so that any id works (spaces, commas, quotes, accents, '#', '?')."""
    parts = ["feedback", student, meta["week"], f"{nb}.html"]
    if not (Path(meta["grading"]).joinpath(*parts)).is_file():
        return None
    return "/".join(urllib.parse.quote(p, safe="") for p in parts)


def _counted(notes) -> list[str]:
    """Each note once, in the order first seen, with how many times it was made ("... ×3")."""
    n = Counter(notes := list(notes))
    return [f"{x} ×{n[x]}" if n[x] > 1 else x for x in dict.fromkeys(notes)]


def _parts_html(meta: dict, exercises: list[ExerciseInfo], roster: list[Student]) -> str:
    """Per student, the points of each part of each exercise (correctness / path / throughput; a quiz as one), from
    the same source as the totals (the gradebook's, manual scores included, else the verdicts'); a part that earned
    nothing of what it could is marked. The student's name links to their first feedback page."""
    cols: list[tuple[ExerciseInfo, str, tuple[str, ...]]] = []  # (exercise, part label, its grade ids)
    for ex in exercises:
        if ex.name == "quiz" or not ex.grade_ids:
            cols.append((ex, "points", ex.grade_ids))
        else:
            cols += [(ex, g[len(ex.name) + 1:] if g.startswith(f"{ex.name}_") else g, (g,)) for g in ex.grade_ids]
    top = ["<th rowspan='2'>student</th>"] + [
        f"<th colspan='{sum(c[0] is ex for c in cols)}'>{_e(ex.notebook)} · {_e(ex.name)}</th>" for ex in exercises]
    sub = [f"<th>{_e(label)}</th>" for _, label, _ in cols]
    rows = []
    for s in roster:
        cells = []
        for ex, _, gids in cols:
            got = [p for g in gids if (p := s.part_points(ex.notebook, g)) is not None]
            if not got:
                cells.append("<td class='num muted'>—</td>")
                continue
            pts, mx = sum(p for p, _ in got), sum(m for _, m in got)
            cls = " bad" if mx and not pts else ""
            cells.append(f"<td class='num{cls}' title='{pts:g} of {mx:g}'>{pts:g}</td>")
        first = next((h for nb in dict.fromkeys(e.notebook for e in exercises)
                      if (h := _feedback_href(meta, s.name, nb))), None)
        name = f"<a href=\"{_e(first)}\">{_e(s.name)}</a>" if first else _e(s.name)
        rows.append(f"<tr><td>{name}</td>" + "".join(cells) + "</tr>")
    return ("<div class='wide'><table><thead><tr>" + "".join(top) + "</tr><tr>" + "".join(sub)
            + "</tr></thead><tbody>" + "\n".join(rows) + "</tbody></table></div>")


def lanes_html(lanes: dict, where: str | None = None) -> str:
    """Which GPU lane (or Slurm task) graded whom, and the ceilings that lane measured before its first student:
    each student's throughput bar was scaled by the ceilings of the GPU that graded them."""
    rows = []
    for label in sorted(lanes, key=_natural):
        lane = lanes[label] if isinstance(lanes[label], dict) else {}
        c = lane.get("ceilings") if isinstance(lane.get("ceilings"), dict) else {}
        state = str(lane.get("state") or "")
        why = _clean(lane.get("why") or "")
        students = [str(x) for x in lane.get("students") or []]
        rows.append([_e(label), _e(lane.get("device") or "—"),
                     _fmt(_num(c.get("copy_tbps"), None), 4), _fmt(_num(c.get("cublas_bf16_tflops"), None), 4),
                     str(len(students)), _e(", ".join(students)) or "—", _fmt(_num(lane.get("wall_s"), None), 3),
                     f"<span class='{'ok' if state in ('done', 'grading') else 'bad'}'>{_e(state)}</span>"
                     + (f" — {_e(why)}" if why else "")])
    what = "Slurm tasks" if where == "slurm" else "GPU lanes"
    return (f"<h2 id='lanes'>{what}</h2><p class='muted'>Each lane measured its GPU's ceilings and the course "
            "references before its first student (— : graded on CPU, nothing timed).</p>"
            + _table(["lane", "device", "copy ceiling (TB/s)", "cuBLAS bf16 (TFLOPS)", "students", "graded",
                      "wall (s)", "state"], rows, {2, 3, 4, 6}))
