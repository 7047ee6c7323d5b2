"""Understanding checks (autograder.understanding): questions from each student's own measured mutants, sheets
with capped key classes, printable HTML without the key, Moodle XML, the key CSV, the guessing check, the read-back.
Every measured dict here is synthetic (generated), of mutants.measure_answer's shape: no claim about a real GPU."""

import csv
import html
import io
import itertools
import json
import math
import random
import xml.etree.ElementTree as ET
from collections import Counter
from dataclasses import replace
from html.parser import HTMLParser
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from autograder import understanding as u
from autograder import understanding_records as ur
from autograder import understanding_key
from autograder.understanding import LETTERS, MAX_SHARE, WORDING

ASKABLE = list(WORDING)
NEVER = ["does not compile", "not reproducible", "not measured", "not in the kernel", "did not run", "not probed",
         "does not reach the output"]
DAYS = ["tma", "pipeline", "ldgsts"]  # week1's days (their specs exist): the order is the week's
# excerpts a student may write: markup, entities, quotes, commas, non-ASCII, control characters
TEXT = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=40)
CODE = st.one_of(TEXT, st.sampled_from(['a < b && c > "d"', "x = 'y' & z;", "</pre><script>alert(1)</script>",
                                        "mbar_wait(smem_addr(&full[s]), 0);", "é, ü — 中"]))
STUDENT = st.one_of(st.from_regex(r"[a-z][a-z0-9_]{0,8}", fullmatch=True),
                    st.sampled_from(["smith, john", 'o"brien', "zoë", "ana maría", "x\ny", "-x"]))


def _mutant(i: int, outcome: str, line: int, before: str, after: str, pct: float = 30.0, half: float = 3.0) -> dict:
    m = {"key": f"op{i}#1", "op": f"op{i}", "site": 1, "line": line, "before": before, "after": after,
         "change": f"change {i} <&>", "teaches": f"TEACHES-{i}", "digest": "0" * 16, "outcome": outcome,
         "detail": f"DETAIL-{i}-{outcome}", "gpu_s": 1.0}
    if outcome == "slower":
        m.update(slower_pct=pct, interval_pct=[pct - half, pct + half], runs=[])
    return m


@st.composite
def measured(draw, slug="tma", outcomes=st.sampled_from(ASKABLE + NEVER), n=(1, 8)):
    k = draw(st.integers(*n))
    ms = [_mutant(i, draw(outcomes), draw(st.integers(1, 400)), draw(CODE), draw(CODE),
                  draw(st.floats(0.5, 300)), draw(st.floats(0, 40))) for i in range(k)]
    return {"slug": slug, "exercise": None, "source_digest": "0" * 16, "gpu_s": 1.0, "mutants": ms}


def _cohort(rng: random.Random, n: int, per_day: int = 7, weights=(35, 20, 5, 15, 5, 20)) -> dict:
    """A realistic synthetic cohort: outcomes skewed towards hangs, as a synchronisation day's are."""
    cohort = {}
    for s in range(n):
        cohort[f"s{s:03d}"] = {d: {"slug": d, "mutants": [
            _mutant(i, rng.choices(ASKABLE + NEVER, weights=list(weights) + [6 / len(NEVER)] * len(NEVER))[0],
                    rng.randint(1, 300),
                    f"line {rng.random()}", f"new {rng.random()}", rng.uniform(5, 80)) for i in range(per_day)]}
            for d in DAYS}
    return cohort


# ------------------------------------------------------------------------------------------------ questions
@given(measured())
@settings(max_examples=60, deadline=None)
def test_one_question_per_askable_mutant_keyed_by_its_measured_class(m):
    qs = u.questions(m, "ana", "secret")
    mc = [q for q in qs if q.kind == "multichoice"]
    assert [q.mutant for q in mc] == [x["key"] for x in m["mutants"] if x["outcome"] in WORDING]
    for q in mc:
        x = next(x for x in m["mutants"] if x["key"] == q.mutant)
        assert len(q.options) == 4 and len(set(q.options)) == 4 and set(q.options) <= set(WORDING)
        assert q.options[LETTERS.index(q.key)] == x["outcome"] == q.outcome
        assert q.text == (f"In your kernel, line {x['line']}: `{x['before']}` becomes `{x['after']}` "
                          f"({x['change']}). What happens when it runs?")
        assert x["teaches"] in q.feedback and x["detail"] in q.feedback
    num = [q for q in qs if q.kind == "numerical"]
    assert [q.mutant for q in num] == [x["key"] for x in m["mutants"] if x["outcome"] == "slower"]
    for q in num:  # the measured interval, widened to a band of at least +-5 points around the median
        x = next(x for x in m["mutants"] if x["key"] == q.mutant)
        lo, hi = x["interval_pct"]
        assert q.tolerance >= 5 and q.value - q.tolerance <= lo + 0.1 and hi - 0.1 <= q.value + q.tolerance
        assert abs(q.value - x["slower_pct"]) <= 0.05 + 1e-9  # rounded to 0.1: half a step, in floating point


def test_distractors_come_first_from_what_the_day_produced():
    m = {"slug": "tma", "mutants": [_mutant(0, "hangs", 10, "a", "b")]}
    for student in ("a", "b", "c", "d", "e"):
        (q,) = u.questions(m, student, "s", produced={"hangs", "wrong", "slower", "crashes"})
        assert set(q.options) == {"hangs", "wrong", "slower", "crashes"}
        (q,) = u.questions(m, student, "s", produced={"hangs", "wrong"})
        assert {"hangs", "wrong"} <= set(q.options)


def test_option_order_is_per_student_and_seed_and_reproducible():
    m = {"slug": "tma", "mutants": [_mutant(i, ASKABLE[i % 6], 10 + i, "a", "b") for i in range(6)]}
    orders = {(s, seed): tuple(q.options for q in u.questions(m, s, seed)) for s in "abcdef" for seed in (1, 2)}
    assert orders[("a", 1)] == tuple(q.options for q in u.questions(m, "a", 1))
    assert len(set(orders.values())) > 6  # not one order for everyone
    keys = Counter(q.key for s in map(str, range(60)) for q in u.questions(m, s, 1) if q.kind == "multichoice")
    assert set(keys) == set(LETTERS) and max(keys.values()) < 0.4 * sum(keys.values())


# ------------------------------------------------------------------------------------------------ sheets
def _best_cap(mc_pools: dict, per_day: int) -> int:
    """The smallest reachable maximum class count of a sheet, by enumeration (independent of the flow)."""
    per_day_choices = []
    for qs in mc_pools.values():
        avail = Counter(q.outcome for q in qs)
        n = min(per_day, len(qs))
        cls = sorted(avail)
        opts = [c for c in itertools.product(*[range(avail[k] + 1) for k in cls]) if sum(c) == n]
        per_day_choices.append([Counter(dict(zip(cls, c))) for c in opts])
    return min(max((sum(combo, Counter()) or Counter({None: 0})).values())
               for combo in itertools.product(*per_day_choices))


@given(st.lists(measured(outcomes=st.sampled_from(ASKABLE[:4] + NEVER), n=(0, 6)), min_size=1, max_size=3),
       st.integers(1, 4), st.integers(0, 10**6))
@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_a_sheet_has_the_most_even_keys_its_pool_allows_so_no_class_over_40_percent_where_it_can(days, per_day, seed):
    by_slug = {DAYS[i]: {**d, "slug": DAYS[i]} for i, d in enumerate(days)}
    sheet = u.build_sheet("ana", "week1", by_slug, seed, per_day)
    pools = {s: [q for q in u.questions(d, "ana", seed) if q.kind == "multichoice"] for s, d in by_slug.items()}
    for s, qs in pools.items():  # per_day a day (all where fewer), each from that day's pool
        got = [q for q in sheet.multichoice if q.slug == s]
        assert len(got) == min(per_day, len(qs)) and {q.qid for q in got} <= {q.qid for q in qs}
    total = len(sheet.multichoice)
    if not total:
        return
    top = max(Counter(q.outcome for q in sheet.multichoice).values())
    best = _best_cap(pools, per_day)
    # the most even choice the pool allows: at most 40 % wherever a choice gets there (at least one question)
    assert top == best
    assert top <= max(1, math.floor(MAX_SHARE * total + 1e-9)) or best > MAX_SHARE * total
    assert any("no sheet with every key class" in n for n in sheet.notes) == (top > max(1, MAX_SHARE * total))
    for q in sheet.multichoice:  # a "slower" one brings its follow-up right after it
        i = sheet.questions.index(q)
        if q.outcome == "slower":
            assert sheet.questions[i + 1].kind == "numerical" and sheet.questions[i + 1].mutant == q.mutant


def test_a_sheet_spreads_its_keys_evenly_not_merely_under_40_percent():
    """Three days of two mutants of each of four classes, four questions a day: 3 of each class is reachable (40 %
    would let one class have 4 of 12)."""
    day = {"mutants": [_mutant(i, ASKABLE[i % 4], 10 + i, "a", "b") for i in range(8)]}
    for student in ("ana", "ben", "cy", "dee"):
        sheet = u.build_sheet(student, "week1", {d: {**day, "slug": d} for d in DAYS}, "s", per_day=4)
        assert Counter(q.outcome for q in sheet.multichoice) == Counter({c: 3 for c in ASKABLE[:4]})
        assert not sheet.notes


def test_sheets_are_deterministic_per_seed_and_student_and_differ_between_kernels():
    cohort = _cohort(random.Random(3), 6)
    a, b = u.build_sheets("week1", cohort, "seed-1"), u.build_sheets("week1", cohort, "seed-1")
    assert a == b
    c = u.build_sheets("week1", cohort, "seed-2")
    assert any(a[s].questions != c[s].questions for s in a)
    texts = {s: u.sheet_html(sh) for s, sh in a.items()}
    assert len(set(texts.values())) == len(texts)  # different kernels, different questions
    assert all(len(sh.multichoice) == 9 for sh in a.values())


# ------------------------------------------------------------------------------------------------ HTML
class _Pre(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.pre, self.inside, self.tags = [], False, []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        if tag == "pre":
            self.inside = True
            self.pre.append("")

    def handle_endtag(self, tag):
        self.inside = self.inside and tag != "pre"

    def handle_data(self, data):
        if self.inside:
            self.pre[-1] += data


@given(measured(n=(1, 8)), STUDENT)
@settings(max_examples=60, deadline=None)
def test_the_printed_sheet_shows_the_excerpts_escaped_and_never_the_key(m, student):
    sheet = u.build_sheet(student, "week1", {"tma": m}, "s", per_day=8)
    page = u.sheet_html(sheet)
    p = _Pre()
    p.feed(page)
    mc = sheet.multichoice
    assert p.pre == [t for q in mc for t in (q.before, q.after)]  # exactly the student's text, markup and all
    assert "script" not in p.tags
    for q in sheet.questions:
        assert q.feedback not in page and f"DETAIL-" not in page and "TEACHES-" not in page
    # the page does not depend on the keys: other keys (among the same options), other feedback, no follow-ups
    other = replace(sheet, questions=tuple(replace(q, outcome=q.options[(q.options.index(q.outcome) + 1) % 4],
                                                   feedback="x") for q in mc))
    assert u.sheet_html(other) == page
    assert all(html.escape(WORDING[o]) in page for q in mc for o in q.options)
    if mc:  # practice mode shows both (so the check above can fail)
        shown = u.sheet_html(sheet, reveal=True)
        assert html.escape(mc[0].feedback) in shown and f"Key: {mc[0].key})" in shown
    part2 = u.sheet_html(sheet, part=2)
    assert all(q.qid in part2 for q in sheet.questions if q.kind == "numerical")
    assert all(f"({html.escape(q.qid)})" not in part2 for q in mc)


# ------------------------------------------------------------------------------------------------ Moodle XML, key CSV
@given(st.lists(st.tuples(STUDENT, measured(n=(1, 5))), min_size=1, max_size=4, unique_by=lambda t: t[0]))
@settings(max_examples=40, deadline=None)
def test_moodle_xml_parses_and_keys_every_question(pairs):
    sheets = [u.build_sheet(s, "week1", {"tma": m}, "s", per_day=5) for s, m in pairs]
    root = ET.fromstring(u.moodle_xml(sheets).encode("utf-8"))
    qs = root.findall("question")
    cats = [q for q in qs if q.get("type") == "category"]
    assert len(cats) == len(sheets)
    got = [q for q in qs if q.get("type") != "category"]
    want = [q for s in sheets for q in s.questions]
    assert len(got) == len(want)
    for el, q in zip(got, want):
        assert el.get("type") == q.kind
        answers = el.findall("answer")
        if q.kind == "multichoice":
            assert [a.get("fraction") for a in answers] == ["100" if o == q.outcome else "0" for o in q.options]
            assert [a.findtext("text") for a in answers] == [html.escape(WORDING[o]) for o in q.options]
        else:
            (a,) = answers
            assert a.get("fraction") == "100" and float(a.findtext("tolerance")) == q.tolerance
            assert float(a.findtext("text")) == q.value


@given(st.lists(st.tuples(STUDENT, measured(n=(1, 4))), min_size=1, max_size=4, unique_by=lambda t: t[0]))
@settings(max_examples=40, deadline=None)
def test_the_key_csv_reads_back_whatever_the_ids_and_scores_a_perfect_answer_sheet(tmp_path_factory, pairs):
    tmp = tmp_path_factory.mktemp("key")
    sheets = [u.build_sheet(s, "week1", {"tma": m}, "s", per_day=4) for s, m in pairs]
    understanding_key.write_key_csv(tmp / "key.csv", sheets)
    with open(tmp / "key.csv", newline="", encoding="utf-8") as f:
        rows = list(csv.reader(f))
    assert rows[0] == understanding_key.KEY_COLUMNS and rows[1:] == understanding_key.key_rows(sheets)
    # the key's answers, written as students do (upper case, spaces, a "%"), in reverse order: full marks
    with open(tmp / "answers.csv", "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["student", "question", "answer"])
        for r in reversed(rows[1:]):
            w.writerow([r[0], r[1], f" {r[3].upper()} " if r[2] == "multichoice" else f"{r[3]} %"])
    scores = understanding_key.score_answers(tmp / "answers.csv", tmp / "key.csv")
    assert set(scores) == {s.student for s in sheets if s.questions}
    for s in sheets:
        if s.questions:
            assert scores[s.student]["score"] == scores[s.student]["max"] == len(s.questions)


def test_score_answers_missing_wrong_and_tolerance(tmp_path):
    key = tmp_path / "key.csv"
    key.write_text("student,question_id,type,key,tolerance,points,slug,mutant,line\n"
                   'ana,tma.a#1,multichoice,c,,1,tma,a#1,3\nana,tma.b#1,multichoice,a,,1,tma,b#1,4\n'
                   'ana,tma.b#1.pct,numerical,41.3,6.5,1,tma,b#1,4\n"smith, john",tma.a#1,multichoice,b,,1,tma,a#1,9\n')
    ans = tmp_path / "answers.csv"
    ans.write_text('tma.b#1.pct is ignored,x,y\nana,tma.b#1.pct,47.8%\nana,tma.a#1, (C) \n"smith, john",tma.a#1,a\n')
    s = understanding_key.score_answers(ans, key)
    assert s["ana"] == {"score": 2.0, "max": 3.0, "questions": {"tma.a#1": 1.0, "tma.b#1": 0.0, "tma.b#1.pct": 1.0}}
    assert s["smith, john"]["score"] == 0 and s["smith, john"]["max"] == 1
    ans.write_text("ana,tma.b#1.pct,47.9\n")
    assert understanding_key.score_answers(ans, key)["ana"]["questions"]["tma.b#1.pct"] == 0.0
    key.write_text("student,tma.a#1,multichoice,c,,1,tma,a#1,3\n")  # a student named "student": no header here
    ans.write_text("student,question id,answer\n student ,tma.a#1,c\n")
    assert understanding_key.score_answers(ans, key) == {"student": {"score": 1.0, "max": 1.0,
                                                                  "questions": {"tma.a#1": 1.0}}}


# ------------------------------------------------------------------------------------------------ guessing
@given(st.integers(0, 10**6))
@example(4249)  # uniform distractor draws: "most words" (= hangs, else no change) at 43 %
@settings(max_examples=5, deadline=None)
def test_no_content_free_strategy_beats_chance_by_more_than_15_percent(seed):
    cohort = _cohort(random.Random(seed), 40)
    rates = u.guessing_rates(u.build_sheets("week1", cohort, seed).values())
    assert {"always a", "always d", "always 'hangs'", "uniform random"} <= set(rates)
    over = {k: r["rate"] for k, r in rates.items() if r["rate"] > r["chance"] + 0.15}
    assert not over, over
    assert all(r["n"] == 40 * 9 and r["chance"] == 0.25 for r in rates.values())


def test_the_guessing_check_catches_a_guessable_sheet():
    cohort = _cohort(random.Random(1), 10, weights=(90, 2, 2, 2, 2, 2))
    sheets = list(u.build_sheets("week1", cohort, 1).values())
    assert u.guessing_rates(sheets)["always 'hangs'"]["rate"] > 0.4  # the pool allows no cap: caught
    first = [replace(s, questions=tuple(replace(q, options=(q.outcome,) + tuple(o for o in q.options if o != q.outcome))
                                        if q.kind == "multichoice" else q for q in s.questions)) for s in sheets]
    assert u.guessing_rates(first)["always a"]["rate"] == 1.0


# ------------------------------------------------------------------------------------------------ the command
def test_cli_writes_sheets_moodle_and_key_apart_and_imports_answers(tmp_path, monkeypatch, capsys):
    from autograder.cli import main

    monkeypatch.setenv("COURSE_GRADING_DIR", str(tmp_path / "grading"))
    cohort = _cohort(random.Random(5), 4)
    cohort["smith, zoë"] = cohort.pop("s000")
    for s, days in cohort.items():
        for d, m in days.items():
            (tmp_path / "m" / s).mkdir(parents=True, exist_ok=True)
            doc = {"solution": m} if s == "s002" else m  # as `python -m autograder.mutants --out` writes it
            (tmp_path / "m" / s / f"{d}.json").write_text(json.dumps(doc))
    (tmp_path / "m" / "s001" / "swizzle.json").write_text(json.dumps({"slug": "swizzle", "mutants": []}))
    out = tmp_path / "out"
    assert main(["understanding", "sheets", "week1", "--measured", str(tmp_path / "m"), "--out", str(out),
                 "--seed", "7", "--per-day", "2", "--practice"]) == 0
    said = capsys.readouterr().out
    assert "always 'hangs'" in said and "swizzle is not a day of week1" in said
    sheets = sorted(p.name for p in (out / "sheets_week1").glob("*.html"))
    assert sheets == sorted(f"{s}.html" for s in cohort)
    assert not any("key" in p.name for p in (out / "sheets_week1").rglob("*"))
    ET.parse(out / "moodle_week1.xml")
    practice = (out / "practice_week1" / "s001.html").read_text(encoding="utf-8")
    assert "Key: " in practice and "TEACHES-" in practice and "DETAIL-" in practice
    assert all("Key: " not in p.read_text(encoding="utf-8") for p in (out / "sheets_week1").rglob("*.html"))
    rows = list(csv.reader(io.StringIO((out / "key_week1.csv").read_text(encoding="utf-8"))))[1:]
    assert {r[0] for r in rows} == set(cohort) and all(sum(r[0] == s and r[2] == "multichoice" for r in rows) == 6
                                                       for s in cohort)
    (tmp_path / "answers.csv").write_text("".join(f'"{r[0]}",{r[1]},{r[3]}\n' for r in rows if r[0] == "s001"))
    assert main(["understanding", "import", "week1", str(tmp_path / "answers.csv"), "--weight", "0.25",
                 "--out", str(out)]) == 0
    doc = json.loads((tmp_path / "grading" / "understanding_week1.json").read_text())
    assert doc["weight"] == 0.25
    assert doc["students"]["s001"]["score"] == doc["students"]["s001"]["max"] > 0
    assert doc["students"]["smith, zoë"]["score"] == 0


@given(st.lists(st.sampled_from(ASKABLE + NEVER), min_size=7, max_size=7), st.integers(0, 99))
@settings(max_examples=10, deadline=None)
def test_questions_quote_the_students_own_lines_as_mutants_shows_them(outcomes, seed):
    """The course's TMA solution as a student's hand-in, mutated by the spec's operators (no GPU); outcomes made up
    (of measure_answer's shape): each question shows its mutant's line and the code before and after, escaped."""
    from autograder.known import kernel_source
    from autograder.mutation import mutate

    ms = mutate("tma", kernel_source("tma", "solution"))
    measured = {"slug": "tma", "exercise": None, "source_digest": "x", "gpu_s": 0.0,
                "mutants": [{**m.to_dict(), "outcome": o, "detail": "made up", "slower_pct": 20.0,
                             "interval_pct": [18.0, 23.0]} for m, o in zip(ms, outcomes)]}
    sheet = u.build_sheet("ana", "week1", {"tma": measured}, seed, per_day=7)
    page = u.sheet_html(sheet)
    assert len(sheet.multichoice) == sum(o in WORDING for o in outcomes[:len(ms)])
    for q in sheet.multichoice:
        m = next(m for m in ms if m.key == q.mutant)
        assert (q.line, q.before, q.after) == (m.line, m.before, m.after)
        assert f"line {m.line}:</p><pre>{html.escape(m.before)}</pre><p>becomes</p><pre>{html.escape(m.after)}</pre>" \
            in page


@pytest.mark.parametrize("week", ["week1", "week2"])
def test_sheets_of_the_recorded_answers_are_keyed_by_what_the_gpu_did(tmp_path, week):
    """The answers make gpu-test measured on a GPU (kernels/<slug>/mutants_<gpu>.json: the course solution, the
    known slow answer, the assistant's, and each attack on the checks, asked only what went wrong) become one sheet each:
    every multichoice key is the outcome recorded for
    that answer's mutant at that line; the assistant's sheet and the solution's ask about different lines or
    differently; the guessing rates come out for the sheets."""
    from autograder.mutants import ATTACK_ANSWERS
    from autograder.spec import all_specs

    attacks = {a for s in all_specs() if s.assignment == week for a in ATTACK_ANSWERS.get(s.slug, {})}
    files = ur.measured_from_records(tmp_path, week)
    assert files and {f.parent.name for f in files} == {"solution", "slow", "assistant", *attacks}
    cohort, notes = u.read_measured(tmp_path, week)
    assert not notes
    sheets = u.build_sheets(week, cohort, seed=99)
    recorded = {}
    for who, days in cohort.items():
        for slug, res in days.items():
            for m in res["mutants"]:
                recorded[(who, slug, m["line"], m["before"], m["after"])] = m["outcome"]
    for who, sheet in sheets.items():
        # an attack on the checks is asked only what the GPU showed going wrong in it (never a key its author chose)
        assert bool(sheet.multichoice) if who not in attacks else \
            all(q.outcome in ("crashes", "wrong", "hangs") for q in sheet.multichoice), who
        for q in sheet.questions:
            assert recorded[(who, q.slug, q.line, q.before, q.after)] == q.outcome and u.askable(q.outcome)
    asked = {who: {(q.slug, q.line, q.before) for q in s.questions} for who, s in sheets.items()}
    assert asked["assistant"] != asked["solution"]
    rates = u.guessing_rates(sheets.values())
    assert rates["uniform random"]["rate"] == pytest.approx(rates["uniform random"]["chance"])


def test_the_sheets_command_on_the_recorded_answers_prints_each_ones_gpu_seconds(tmp_path, monkeypatch, capsys):
    """`autograder understanding sheets week2 --recorded`: one sheet per recorded answer, the key beside the sheets'
    folder, and the GPU seconds that measured each sheet's keys: the sum of its days' recorded measurements."""
    from autograder import cli

    monkeypatch.setenv("COURSE_GRADING_DIR", str(tmp_path / "grading"))
    assert cli.main(["understanding", "sheets", "week2", "--recorded", "--seed", "5", "--out", str(tmp_path)]) == 0
    text = capsys.readouterr().out
    cohort, _ = u.read_measured(tmp_path / "week2" / "recorded_measured", "week2")
    assert sorted(p.stem for p in (tmp_path / "sheets_week2").glob("*.html")) == sorted(cohort)
    assert (tmp_path / "key_week2.csv").is_file()
    for who, days in cohort.items():
        assert f"  {who}: {sum(d['gpu_s'] for d in days.values()):.0f} s (" in text
