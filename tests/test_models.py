"""The course's performance models say what they fitted (issue 40): each declares its constants by kind, fits at most
one constant per two rows, reproduces its constants from the H100 record, holds out rows of a regime its fit never saw,
and is checked on the H200 record with the H100's constants; kernels.models prints the table, these tests hold its
claims. CPU only: records are read, nothing runs."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from kernels import models
from kernels.models import MODELS, check_of, records, rule_holds, summary

IDS = [m.name for m in MODELS]


@pytest.mark.parametrize("m", MODELS, ids=IDS)
def test_constants_declared_by_kind(m):
    check = check_of(m)
    consts = check.fit["constants"]
    assert consts, m.name
    for name, c in consts.items():
        assert c["kind"] in ("physics", "fitted"), name
        if c["kind"] == "physics":
            assert c.get("source"), name  # a datasheet, guide or measured source, named
        else:
            assert bool(c.get("rows")) != bool(c.get("from")), name  # fitted here on rows, or imported from a fit
            assert set(c.get("rows", ())) <= set(check.fit_rows), name  # on this model's own fit rows
    # every constant its HeldOut reports (what a refit returns) has a declared kind; None is no constant (multicast's
    # L2_TBPS: the model has no L2 term)
    assert {k for k, v in check.constants.items() if v is not None} <= set(consts)
    assert not {k for k, v in check.constants.items() if v is None} & set(consts)


@pytest.mark.parametrize("m", MODELS, ids=IDS)
def test_at_most_one_fitted_constant_per_two_rows(m):
    assert rule_holds(check_of(m).fit), m.name


def test_the_rule_counts_fitted_constants_against_their_rows():
    rows = ("a", "b", "c", "d")
    four_on_four = {"constants": {k: {"kind": "fitted", "rows": rows} for k in "WXYZ"}}
    assert not rule_holds(four_on_four)  # the attention overlap model before issue 40
    two_on_four = {"constants": {"X": {"kind": "fitted", "rows": rows}, "Y": {"kind": "fitted", "rows": rows[:2]},
                                 "P": {"kind": "physics", "source": "datasheet"},
                                 "I": {"kind": "fitted", "from": "another day's fit"}}}
    assert rule_holds(two_on_four)  # physics and imported constants are not fitted here


@pytest.mark.parametrize("m", MODELS, ids=IDS)
def test_the_fit_reproduces_the_constants(m):
    """The module's fitted constants are what its own fit function returns on the H100 record's fit rows."""
    check = check_of(m)
    refit = check.refit(records(m.slug)["h100"])
    for k, v in check.constants.items():
        if v is None:
            assert refit[k] is None, k
        else:
            assert refit[k] == pytest.approx(v, rel=1e-3), k


@pytest.mark.parametrize("m", MODELS, ids=IDS)
def test_held_out_rows_are_named_with_their_regime(m):
    check = check_of(m)
    assert check.held_out and not set(check.held_out) & set(check.fit_rows)
    assert check.fit["held_out_regime"]
    assert set(check.errors(records(m.slug)["h100"])) == set(check.held_out)  # the H100 record measured each one


@pytest.mark.parametrize("m", MODELS, ids=IDS)
def test_table_claims_hold(m):
    """Each model inside +-10 % on its H100 held-out rows and on every row it names on the H200, or the row is a miss
    its own FIT["misses"] names with a reason; no named miss the records do not show."""
    s = summary(m)
    assert s["unnamed"] == {g: [] for g in s["outside"]}, s["unnamed"]
    assert s["stale"] == {g: [] for g in s["outside"]}, s["stale"]
    misses = check_of(m).fit["misses"]
    for g, o in s["outside"].items():
        assert all(misses[g][n] for n in o)
    for g, errs in s["errors"].items():
        assert all(math.isfinite(e) for e in errs.values())
        assert all(abs(e) <= s["band"] or n in misses[g] for n, e in errs.items())


def test_cross_gpu_check_where_an_h200_record_exists():
    for m in MODELS:
        s, recs = summary(m), records(m.slug)
        if "h200" not in recs:
            assert "h200" not in s["errors"] and s["h200_note"] == "no H200 record"
        else:
            assert set(s["errors"]["h200"]) <= set(check_of(m).fit_rows) | set(check_of(m).held_out)
            assert len(s["errors"]["h200"]) >= len(check_of(m).fit_rows), m.name


def test_table_prints_every_model_and_its_worst_errors():
    text = models.table()
    for m in MODELS:
        s = summary(m)
        line = next(ln for ln in text.splitlines() if ln.startswith(m.name + " "))
        worst = max(abs(e) for e in s["errors"]["h100"].values())
        assert f"{worst:.1%}" in line and line.rstrip().endswith("ok"), line
        for g, o in s["outside"].items():
            assert all(f"miss {g} {n} " in text for n in o)
    assert "NOT NAMED" not in text and "BROKEN" not in text


def test_readme_model_table_is_the_generated_one():
    """The README's model table is kernels.models.summary_table() of the records as they are (a record or a model
    changed without regenerating it fails here)."""
    from kernels.models import summary_table

    text = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    a, b = "<!-- models: generated by python -m kernels.models --summary -->\n```\n", "\n```\n<!-- models: end -->"
    assert text[text.index(a) + len(a):text.index(b)] == summary_table()
