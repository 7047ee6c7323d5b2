"""Every model's held-out check through the one mechanism (kernels.held_out.HeldOut): on each topic's recorded GPUs the
errors of the held-out rows are the numbers the models' own functions computed before the mechanism replaced them
(tests/data/held_out_errors.json), the same rows in the declared order; the benchmarks declare the check and write
no held-out keys of their own; the records carry the one key set (extra["model"])."""

from __future__ import annotations

import importlib
import json
from pathlib import Path

import pytest

from kernels import held_out, topic

ROOT = Path(__file__).resolve().parents[1]
BEFORE = json.loads((ROOT / "tests" / "data" / "held_out_errors.json").read_text())
TOPICS = sorted(k for k in BEFORE if k != "about")
CASES = [(slug, tag) for slug in TOPICS for tag in sorted(BEFORE[slug])]
KEYS = {"fitted_on", "fit_rows", "held_out_rows", "band", "unit", "held_out", "outside_band"}


def _model(slug):
    return importlib.import_module(f"kernels.{slug}.model")


def _record(slug, tag):
    return json.loads((ROOT / "kernels" / slug / f"recorded_{tag}.json").read_text())


def test_every_recorded_topic_is_guarded():
    """Each topic whose model declares a HeldOut has a fixture row for every recorded GPU, and no other topic does."""
    declared = {p.parent.name for p in (ROOT / "kernels").glob("*/model.py")
                if isinstance(getattr(_model(p.parent.name), "HELD_OUT_CHECK", None), held_out.HeldOut)}
    assert declared == set(TOPICS)
    for slug in TOPICS:
        assert set(BEFORE[slug]) == {p.stem.removeprefix("recorded_") for p in (ROOT / "kernels" / slug).glob(
            "recorded_*.json")}, slug


@pytest.mark.parametrize("slug,tag", CASES)
def test_held_out_errors_of_the_records_do_not_move(slug, tag):
    m, doc, want = _model(slug), _record(slug, tag), BEFORE[slug][tag]
    check = m.HELD_OUT_CHECK
    errs = check.errors(doc)
    assert errs == want["held_out"]  # identical floats, every row
    # every held-out row in the declared order, but the rows a record never timed (gemm's H200 record predates rung 6)
    timed = {check.name(r) for r in doc["rows"] if check.select(r) and topic.measured(r)}
    assert list(errs) == [n for n in m.HELD_OUT if n in timed] and set(m.HELD_OUT) - set(errs) == set(
        m.HELD_OUT) - timed
    assert list(m.HELD_OUT) == list(check.held_out) and not set(check.fit_rows) & set(check.held_out)
    named = m.FIT["held_out_outside_band"][tag]
    assert set(check.outside_band(doc)) == set(named), errs  # the misses model.FIT names, and no others
    text = m.held_out_report(doc)
    assert doc["device"] in text and text.count("named in model.FIT") == len(named) and "NOT named" not in text
    assert all(f"({e:+.1%})" in text for e in errs.values())


@pytest.mark.parametrize("slug,tag", [c for c in CASES if "refit_held_out" in BEFORE[c[0]][c[1]]])
def test_refit_held_out_errors_do_not_move(slug, tag):
    facts = _model(slug).HELD_OUT_CHECK.facts(_record(slug, tag))
    assert facts["refit_held_out"] == BEFORE[slug][tag]["refit_held_out"]


@pytest.mark.parametrize("slug", TOPICS)
def test_benches_declare_the_check_and_write_no_keys_of_their_own(slug):
    bench = importlib.import_module(f"kernels.{slug}.bench")
    assert bench.TOPIC.held_out is _model(slug).HELD_OUT_CHECK
    src = (ROOT / "kernels" / slug / "bench.py").read_text()
    assert "held_out_errors" not in src and '"model_held_out' not in src and '"model_fit_rows"' not in src


@pytest.mark.parametrize("slug,tag", CASES)
def test_records_carry_the_one_key_set(slug, tag):
    """extra["model"] of every record: the scaffold's keys; a record of a run taken before its model's constants were
    last fitted keeps that run's figures (its rows' model_prediction column agrees with them)."""
    doc = _record(slug, tag)
    assert not [k for k in doc if "held_out" in k or k in ("model_fit_rows", "fit_rows", "refit", "model_refit",
                                                          "model_fitted_on")]
    m = doc["model"]
    assert KEYS - {"held_out", "outside_band"} <= set(m) and m["band"] == _model(slug).HELD_OUT_CHECK.band
    if "held_out" in m:  # (the H200's swizzle run recorded the rows it held out, not their errors)
        assert set(m["held_out"]) <= set(m["held_out_rows"]) and m["held_out"]
        assert m["outside_band"] == {k: v for k, v in m["held_out"].items() if abs(v) > m["band"]}
    assert "fitted_on" in m and set(m) <= KEYS | {"refit", "refit_held_out"}


@pytest.mark.parametrize("slug", ["multicast", "warp_specialization", "swizzle"])
def test_a_run_without_some_fit_rows_is_reported_without_a_refit_not_raised(slug):
    """A notebook's own run (bench.measure with no known answers handed in) can lack fit rows a refit needs (day 3's
    answer rows): the held-out report still checks the rows the run has and says which fit rows it lacks."""
    check = _model(slug).HELD_OUT_CHECK
    if check.refit is None:
        pytest.skip("no refit declared")
    doc = _record(slug, "h200")
    gone = check.fit_rows[-1]
    run = {**doc, "rows": [r for r in doc["rows"] if not (check.select(r) and check.name(r) == gone)]}
    assert check.missing_fit_rows(run) == [gone] and check.missing_fit_rows(doc) == []
    text = check.report(run)
    assert f"no refit on this run: it lacks the fit rows {gone}" in text and "its own fit rows refit" not in text
    assert "its own fit rows refit" in check.report(doc)
    facts = check.facts(run)
    assert facts["refit"] is None and facts["refit_missing"] == [gone]
