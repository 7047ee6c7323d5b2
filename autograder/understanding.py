"""Understanding checks: question sheets drawn from each student's OWN kernel, keyed by what the GPU measured.

    cohort = read_measured(Path("measured"), "week1")   # {student: {slug: mutants.measure_answer(...)}}
    sheets = build_sheets("week1", cohort, secret, per_day=3)
    sheet_html(sheets["ana"])                            # printable, no key (reveal=True: practice mode)
    moodle_xml(sheets.values()); write_key_csv(path, sheets.values())
    guessing_rates(sheets.values())                      # {"always a": {"rate", "chance", "n"}, ...}
    score_answers("answers.csv", "key_week1.csv")        # {student: {"score", "max", "questions"}} (understanding_key)
    autograder understanding sheets week1 --measured DIR [--per-day N] [--out DIR]
    autograder understanding import week1 answers.csv --weight 0.1

1. A question is one mutant of the student's kernel (autograder.mutants: the day's operators applied to the source
   as handed in, each mutant run on a Hopper GPU): "In your kernel, line 67: `before` becomes `after` (the change).
   What happens when it runs?" Its key is the measured outcome class, worded for students (WORDING); a mutant that
   did not compile, whose runs disagreed ("not reproducible"), or whose changed line is not shown to run and reach the
   output ("not in the kernel", "did not run", "not probed", "does not reach the output": autograder.mutants) is
   never asked. Three distractors are drawn first
   from the classes the same day's mutants produced in the cohort (the plausible ones; weighted by how often each
   was produced), then from the rest; the four options are shuffled per (secret seed, student, question). A mutant
   measured "slower" is followed by a numerical question (by how much, in percent) accepted within the measured
   bootstrap interval widened to a symmetric band of at least +-MIN_TOLERANCE_PCT percentage points around the
   median.
2. A sheet holds `per_day` multiple-choice questions of each day (a "slower" one brings its numerical follow-up),
   chosen so that no key class exceeds MAX_SHARE of the sheet's multiple-choice questions where the student's
   pool allows it (an exact max-flow allocation with the smallest cap on a class's count that the pool can meet:
   the most even keys; a sheet whose pool cannot be kept under MAX_SHARE says so in its notes);
   deterministic from (secret seed, student).
3. The feedback of a question (the operator's `teaches` and the measured `detail`) and its key appear only in the
   key CSV, in the Moodle XML (its general feedback: shown once answered) and in a sheet rendered with reveal=True
   (practice mode, or handed back after grading), never in a sheet printed for a test. A numerical follow-up tells
   its multichoice question's key ("it runs correctly, but slower"), so it is printed on a part 2 page of its own,
   handed out once part 1 is in; in the Moodle XML its name starts with "2-" (put it on a later page of the quiz).
"""

from __future__ import annotations

import hashlib
import html
import json
import math
import random
import re
import xml.etree.ElementTree as ET
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from kernels.paths import write_whole

from .understanding_key import score_answers, write_key_csv
from .spec import load
from .quizzes import RULES

# the measured classes a question may have as its key, worded for students (mutants.OUTCOMES less the two never asked)
WORDING = {
    "hangs": "it hangs: a barrier wait never completes",
    "wrong": "it gives wrong results",
    "crashes": "it crashes (a fault)",
    "slower": "it runs correctly, but slower",
    "faster": "it runs correctly, faster",
    "no observable change": "nothing observable changes (correct, same speed)",
}
LETTERS = "abcd"
MAX_SHARE = 0.4  # no key class above this share of a sheet's multiple-choice questions (where the pool allows)
MIN_TOLERANCE_PCT = 5.0  # the numerical question's band: at least this many percentage points either side


def askable(outcome: str) -> bool:
    return outcome in WORDING


def _rng(*parts) -> random.Random:
    """A generator of its own for one use, from the secret seed and what the use is (student, question ...)."""
    return random.Random(hashlib.sha256(json.dumps([str(p) for p in parts]).encode()).digest())


# ------------------------------------------------------------------------------------------------ questions
@dataclass(frozen=True)
class Question:
    qid: str  # "<slug>.<mutant key>" ("tma.parity_not_flipped#1"); its numerical follow-up adds ".pct"
    kind: str  # "multichoice" | "numerical"
    slug: str
    mutant: str  # the mutant's key in the measured dict
    line: int
    before: str
    after: str
    change: str
    outcome: str  # the measured class (the key of a multichoice question)
    options: tuple[str, ...] = ()  # multichoice: outcome classes in the order shown, lettered a, b, c, d
    value: float | None = None  # numerical: the measured median, percent slower
    tolerance: float | None = None  # numerical: accepted within value +- tolerance (percentage points)
    feedback: str = ""  # the operator's lesson and the measured detail: after grading or in practice mode only
    points: float = 1.0

    @property
    def key(self) -> str:
        """The letter of the measured class (multichoice) or the value (numerical), as the key CSV writes it."""
        if self.kind == "numerical":
            return f"{self.value:g}"
        return LETTERS[self.options.index(self.outcome)]

    @property
    def text(self) -> str:
        if self.kind == "numerical":
            return f"By how much is it slower (percent)? (Line {self.line}: `{self.before}` becomes `{self.after}`.)"
        return (f"In your kernel, line {self.line}: `{self.before}` becomes `{self.after}` ({self.change}). "
                "What happens when it runs?")


def day_classes(cohort: dict) -> dict[str, Counter]:
    """Per day (slug), how many of its mutants produced each askable class, over every student of the cohort."""
    out: dict[str, Counter] = {}
    for by_slug in cohort.values():
        for slug, measured in by_slug.items():
            out.setdefault(slug, Counter()).update(m.get("outcome") for m in measured.get("mutants") or []
                                                   if askable(m.get("outcome")))
    return out


def _options(outcome: str, produced: Counter, rng: random.Random) -> tuple[str, ...]:
    """The key and three distractors, shuffled. The distractors come first from the classes the day produced, drawn
    without replacement with weights their counts (Efraimidis-Spirakis), then from the rest: a class keys questions
    about as often as it is offered, so "pick that class whenever offered" (or an option's length, which picks one
    class) gains little over chance. Uniform draws offered a common class ("hangs" on a synchronisation day) too
    seldom as a distractor: a generated cohort had "most words" (= hangs, else no change) at chance + 18 %."""
    first = sorted((c for c in produced if c != outcome and produced[c] > 0),
                   key=lambda c: rng.random() ** (1 / produced[c]), reverse=True)
    rest = sorted(set(WORDING) - set(first) - {outcome})
    rng.shuffle(rest)
    opts = [outcome] + (first + rest)[:len(LETTERS) - 1]
    rng.shuffle(opts)
    return tuple(opts)


def _tolerance(m: dict) -> float:
    """Half-width of the accepted band around the median: the measured interval, at least MIN_TOLERANCE_PCT."""
    med = float(m["slower_pct"])
    lo, hi = (m.get("interval_pct") or [med, med])[:2]
    return round(max(MIN_TOLERANCE_PCT, med - float(lo), float(hi) - med), 1)


def questions(measured: dict, student: str, seed, produced: Counter | None = None) -> list[Question]:
    """Every question one measured dict (mutants.measure_answer) asks a student: one multichoice per askable mutant,
    a numerical one after each "slower". `produced`: how often the day's mutants produced each class in the cohort
    (day_classes; default: in this student's kernel; a set counts each class once)."""
    slug = measured.get("slug") or "?"
    ms = [m for m in measured.get("mutants") or [] if askable(m.get("outcome"))]
    produced = Counter(produced if produced is not None else [m["outcome"] for m in ms])
    out = []
    for m in ms:
        qid = f"{slug}.{m['key']}"
        fb = " ".join(x for x in (str(m.get("teaches") or ""), f"Measured: {m['detail']}" if m.get("detail") else "")
                      if x)
        common = dict(slug=slug, mutant=str(m["key"]), line=int(m.get("line") or 0), before=str(m.get("before", "")),
                      after=str(m.get("after", "")), change=str(m.get("change", "")), outcome=m["outcome"],
                      feedback=fb)
        out.append(Question(qid, "multichoice", options=_options(m["outcome"], produced, _rng(seed, student, qid)),
                            **common))
        if m["outcome"] == "slower" and isinstance(m.get("slower_pct"), (int, float)) \
                and math.isfinite(m["slower_pct"]):
            out.append(Question(f"{qid}.pct", "numerical", value=round(float(m["slower_pct"]), 1),
                                tolerance=_tolerance(m), **common))
    return out


# ------------------------------------------------------------------------------------------------ sheets
@dataclass(frozen=True)
class Sheet:
    student: str
    week: str
    questions: tuple[Question, ...]
    notes: tuple[str, ...] = field(default=())  # for the instructor: a short pool, a cap not reachable

    @property
    def multichoice(self) -> list[Question]:
        return [q for q in self.questions if q.kind == "multichoice"]


def _flow(avail: dict[str, Counter], need: dict[str, int], cap: int, order: list[str]) -> dict | None:
    """{(day, class): count} giving each day need[day] questions within its pool, each class at most `cap` in all;
    None when there is none. A max flow source -> day -> class -> sink by unit augmenting paths (a sheet is small)."""
    res: dict[tuple, int] = {}
    adj: dict = {}

    def edge(a, b, c):
        res[(a, b)] = res.get((a, b), 0) + c
        res.setdefault((b, a), 0)
        adj.setdefault(a, []).append(b)
        adj.setdefault(b, []).append(a)

    for d, n in need.items():
        edge("S", ("d", d), n)
        for c in order:
            if avail[d][c]:
                edge(("d", d), ("c", c), avail[d][c])
    for c in order:
        edge(("c", c), "T", cap)
    total = 0
    while True:
        prev, todo = {"S": None}, ["S"]
        while todo and "T" not in prev:
            u = todo.pop(0)
            for v in adj.get(u, []):
                if v not in prev and res[(u, v)] > 0:
                    prev[v] = u
                    todo.append(v)
        if "T" not in prev:
            break
        v = "T"
        while prev[v] is not None:
            res[(prev[v], v)] -= 1
            res[(v, prev[v])] += 1
            v = prev[v]
        total += 1
    if total < sum(need.values()):
        return None
    return {(d, c): res[(("c", c), ("d", d))] for d in need for c in order if (("c", c), ("d", d)) in res}


def _order(slugs) -> list[str]:
    """Days in the week's order (the spec's notebook name: day1_..., day2_...), unknown slugs last by name."""
    def key(slug):
        try:
            return (0, load(slug).notebook, slug)
        except Exception:  # noqa: BLE001 - a slug with no spec (synthetic data): after the known days
            return (1, "", slug)

    return sorted(slugs, key=key)


def build_sheet(student: str, week: str, measured: dict[str, dict], seed, per_day: int = 3,
                produced: dict[str, Counter] | None = None) -> Sheet:
    """One student's sheet from their measured dicts of the week ({slug: measure_answer(...)}): per_day multichoice
    questions a day (fewer where the pool is smaller), key classes capped at MAX_SHARE where the pool allows."""
    rng = _rng(seed, student, week, "sheet")
    pools = {slug: questions(measured[slug], student, seed, (produced or {}).get(slug)) for slug in _order(measured)}
    mc = {d: [q for q in qs if q.kind == "multichoice"] for d, qs in pools.items()}
    need = {d: min(per_day, len(qs)) for d, qs in mc.items()}
    notes = [f"{d}: {len(mc[d])} askable mutant(s), {per_day} asked for" for d in mc if len(mc[d]) < per_day]
    total = sum(need.values())
    classes = sorted(WORDING)
    rng.shuffle(classes)
    avail = {d: Counter(q.outcome for q in qs) for d, qs in mc.items()}
    # the most even sheet the pool allows: the smallest cap on any class's count that a choice meets (so at most
    # MAX_SHARE wherever the pool allows it; content-free strategies gain least on even keys)
    present = {c for d in avail for c in avail[d] if avail[d][c]}
    cap = max(1, math.ceil(total / max(1, len(present))))
    alloc = None
    while alloc is None and total:
        alloc = _flow(avail, need, cap, classes)
        cap += alloc is None
    if total and cap > max(1, math.floor(MAX_SHARE * total + 1e-9)):
        notes.append(f"the pool allows no sheet with every key class <= {MAX_SHARE:.0%}: at most {cap} of {total}")
    chosen: list[Question] = []
    for d in mc:
        picked = []
        for c in classes:
            of_c = [q for q in mc[d] if q.outcome == c]
            picked += rng.sample(of_c, (alloc or {}).get((d, c), 0))
        rng.shuffle(picked)
        for q in picked:
            chosen += [q] + [f for f in pools[d] if f.kind == "numerical" and f.mutant == q.mutant]
    return Sheet(student, week, tuple(chosen), tuple(notes))


def build_sheets(week: str, cohort: dict[str, dict[str, dict]], seed, per_day: int = 3) -> dict[str, Sheet]:
    """Every student's sheet; distractors drawn from what each day produced across the cohort."""
    produced = day_classes(cohort)
    return {s: build_sheet(s, week, cohort[s], seed, per_day, produced) for s in sorted(cohort)}


def read_measured(folder: Path, week: str | None = None) -> tuple[dict[str, dict[str, dict]], list[str]]:
    """({student: {slug: measured dict}}, notes) from <folder>/<student>/<slug>.json (hidden folders skipped). A file
    written by `python -m autograder.mutants --out` ({answer: measured}) holding one answer is taken as that answer.
    With `week`, a slug whose spec belongs to another week is left out (named in the notes)."""
    cohort: dict[str, dict[str, dict]] = {}
    notes = []
    for f in sorted(Path(folder).glob("*/*.json")):
        student = f.parent.name
        if student.startswith("."):
            continue
        try:
            data = json.loads(f.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            notes.append(f"{student}/{f.name}: unreadable ({type(exc).__name__}), left out")
            continue
        if isinstance(data, dict) and "mutants" not in data and len(data) == 1:
            data = next(iter(data.values()))
        if not isinstance(data, dict) or not isinstance(data.get("mutants"), list):
            notes.append(f"{student}/{f.name}: not a measured dict (mutants.measure_answer), left out")
            continue
        slug = data.get("slug") or f.stem
        try:
            other = week is not None and load(slug).assignment != week
        except Exception:  # noqa: BLE001 - no spec for this slug: kept (the measured dict says what it is)
            other = False
        if other:
            notes.append(f"{student}/{f.name}: {slug} is not a day of {week}, left out")
            continue
        cohort.setdefault(student, {})[slug] = {**data, "slug": slug}
    return cohort, notes


# ------------------------------------------------------------------------------------------------ exports
_STYLE = ("body{font-family:sans-serif;max-width:48em;margin:2em auto}pre{background:#f4f4f4;padding:.4em;"
          "white-space:pre-wrap}.q{break-inside:avoid;margin-bottom:1.5em}.opt{margin:.2em 0 .2em 1em}"
          ".muted{color:#666}.key{color:#060}")


def _stem_html(q: Question) -> str:
    """What a question asks, as HTML: the excerpts before and after in <pre> (escaped: student text may hold <, &,
    quotes)."""
    e = html.escape
    code = (f"<p>In your kernel, line {q.line}:</p><pre>{e(q.before)}</pre><p>becomes</p><pre>{e(q.after)}</pre>"
            f"<p>({e(q.change)}).")
    if q.kind == "numerical":
        return code + " It runs correctly, but slower. By how much (percent)?</p>"
    return code + " What happens when it runs?</p>"


def _question_html(n: int, q: Question, reveal: bool) -> str:
    """One question as the sheet prints it: its stem, the options lettered (or a blank for the number). What is
    shown depends on the question's text and options only; its key and feedback with reveal=True only."""
    e = html.escape
    body = _stem_html(q)
    if q.kind == "numerical":
        body += "<p>Answer: ____________ %</p>"
    else:
        body += "".join(f"<p class='opt'><b>{LETTERS[i]})</b> {e(WORDING[o])}</p>" for i, o in enumerate(q.options))
    if reveal:
        key = f"{q.key} ± {q.tolerance:g} %" if q.kind == "numerical" else f"{q.key}) {WORDING[q.outcome]}"
        body += f"<p class='key'>Key: {e(key)}</p><p class='key'>{e(q.feedback)}</p>"
    return f"<section class='q'><h3>{n}. <span class='muted'>({e(q.qid)})</span></h3>{body}</section>"


def sheet_html(sheet: Sheet, part: int | None = 1, reveal: bool = False) -> str:
    """A printable page of one student's sheet (self-contained). Part 1: the multichoice questions; part 2: the
    numerical follow-ups ("by how much slower?"), handed out once part 1 is in (a follow-up says its multichoice
    question's key); None: both. reveal=True (practice mode, or after grading) adds each question's key and
    feedback; without it the page holds neither."""
    e = html.escape
    title = f"Understanding check {sheet.week}: {sheet.student}" + (" (part 2)" if part == 2 else "")
    qs = [q for q in sheet.questions if part is None or (q.kind == "numerical") == (part == 2)]
    body = "\n".join(_question_html(i + 1, q, reveal) for i, q in enumerate(qs))
    return (f"<!doctype html><html lang='en'><head><meta charset='utf-8'><title>{e(title)}</title>"
            f"<style>{_STYLE}</style></head><body><h1>{e(title)}</h1>"
            "<p>Each question changes one thing in <b>your own kernel</b>, as you handed it in, and asks what the "
            "changed kernel does on a Hopper GPU: write the letter (or the number) next to the question's id on "
            "your answer sheet.</p>" + (body or "<p>No question.</p>") + "</body></html>\n")


_XML_BAD = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def _x(text: str) -> str:
    """Text XML 1.0 can hold: a control character (a student's source may have one) becomes U+FFFD."""
    return _XML_BAD.sub("\ufffd", str(text))


def _sub(parent, tag: str, text: str | None = None, **attrs):
    el = ET.SubElement(parent, tag, {k: _x(v) for k, v in attrs.items()})
    if text is not None:
        ET.SubElement(el, "text").text = _x(text)
    return el


def _moodle_question(quiz, n: int, q: Question) -> None:
    qe = _sub(quiz, "question", type=q.kind)
    _sub(qe, "name", f"{1 + (q.kind == 'numerical')}-{n:02d} {q.qid}")  # part 2 (follow-ups) sorts after part 1
    _sub(qe, "questiontext", _stem_html(q), format="html")
    _sub(qe, "generalfeedback", html.escape(q.feedback), format="html")
    ET.SubElement(qe, "defaultgrade").text = f"{q.points:g}"
    if q.kind == "numerical":
        a = _sub(qe, "answer", f"{q.value:g}", fraction="100")
        ET.SubElement(a, "tolerance").text = f"{q.tolerance:g}"
        _sub(a, "feedback", "")
        return
    ET.SubElement(qe, "single").text = "true"
    ET.SubElement(qe, "shuffleanswers").text = "0"  # the printed order (the letters) stays the order
    ET.SubElement(qe, "answernumbering").text = "abc"
    for o in q.options:
        a = _sub(qe, "answer", html.escape(WORDING[o]), fraction="100" if o == q.outcome else "0", format="html")
        _sub(a, "feedback", "")


def moodle_xml(sheets, category: str = "understanding") -> str:
    """Moodle XML of every sheet: one <question type="category"> per student ($course$/<category>/<week>/<student>),
    then its questions: multichoice with fraction 100 on the key and 0 elsewhere, numerical with <tolerance>."""
    quiz = ET.Element("quiz")
    for sheet in sheets:
        cat = _sub(quiz, "question", type="category")
        _sub(cat, "category", f"$course$/{category}/{sheet.week}/{sheet.student.replace('/', '//')}")
        for i, q in enumerate(sheet.questions):
            _moodle_question(quiz, i + 1, q)
    ET.indent(quiz)
    return "<?xml version='1.0' encoding='UTF-8'?>\n" + ET.tostring(quiz, encoding="unicode") + "\n"


# ------------------------------------------------------------------------------------------------ guessing
def guessing_rates(sheets) -> dict[str, dict]:
    """How far content-free strategies get on the multichoice questions of a cohort: {strategy: {"rate", "chance",
    "n"}}. Strategies: every rule of autograder.quizzes (always one letter, the longest option, ...), always the
    same outcome (the option worded so when offered, else a uniform guess: scored as its expectation), and a uniform
    random guess (its expectation). `chance` is the mean of 1 / options."""
    qs = [q for s in sheets for q in s.multichoice]
    if not qs:
        return {}
    chance = sum(1 / len(q.options) for q in qs) / len(qs)
    got: dict[str, float] = {}
    for name, rule in RULES.items():
        got[name] = sum(rule({LETTERS[i]: WORDING[o] for i, o in enumerate(q.options)}) == q.key for q in qs)
    for o in WORDING:
        got[f"always '{o}'"] = sum(float(q.outcome == o) if o in q.options else 1 / len(q.options) for q in qs)
    got["uniform random"] = chance * len(qs)
    return {k: {"rate": v / len(qs), "chance": chance, "n": len(qs)} for k, v in got.items()}


# ------------------------------------------------------------------------------------------------ files
def write_sheets(week: str, cohort: dict, seed, out: Path, per_day: int = 3, practice: bool = False) -> dict:
    """<out>/sheets_<week>/<student>.html (one a student, no key; the follow-ups of its "slower" questions in
    sheets_<week>/part2/<student>.html), <out>/moodle_<week>.xml (every sheet, keyed) and
    <out>/key_<week>.csv (beside the sheets' folder, never in it), each written whole; with practice=True also
    <out>/practice_<week>/<student>.html (both parts, keys and feedback shown). Returns {"sheets", "moodle",
    "key", "rates", "notes"}."""
    out = Path(out)
    sheets = build_sheets(week, cohort, seed, per_day)
    folder = out / f"sheets_{week}"
    (folder / "part2").mkdir(parents=True, exist_ok=True)
    for s in sheets.values():  # a student id is a folder name of the measured folder: a file name here too
        write_whole(folder / f"{s.student}.html", sheet_html(s))
        if any(q.kind == "numerical" for q in s.questions):  # handed out once part 1 is in
            write_whole(folder / "part2" / f"{s.student}.html", sheet_html(s, part=2))
    moodle = write_whole(out / f"moodle_{week}.xml", moodle_xml(sheets.values()))
    key = write_key_csv(out / f"key_{week}.csv", sheets.values())
    if practice:  # keyed, with the feedback: for practice, or to hand back after grading (never with the sheets)
        (out / f"practice_{week}").mkdir(exist_ok=True)
        for s in sheets.values():
            write_whole(out / f"practice_{week}" / f"{s.student}.html", sheet_html(s, part=None, reveal=True))
    notes = [f"{s.student}: {n}" for s in sheets.values() for n in s.notes]
    return {"sheets": folder, "moodle": moodle, "key": key, "rates": guessing_rates(sheets.values()), "notes": notes}


def import_answers(week: str, answers_csv, key_csv, weight: float, grading: Path) -> Path:
    """<grading>/understanding_<week>.json (written whole): each student's score against the key, and the weight
    the instructor gives the checks beside the kernel's points (the class report shows them)."""
    scores = score_answers(answers_csv, key_csv)
    Path(grading).mkdir(parents=True, exist_ok=True)
    doc = {"week": week, "weight": weight, "answers": str(answers_csv), "key": str(key_csv), "students": scores}
    return write_whole(Path(grading) / f"understanding_{week}.json", json.dumps(doc, indent=1, ensure_ascii=False))
