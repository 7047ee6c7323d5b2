"""The notebooks' prose against the record: a bandwidth typed into markdown must be one the H100 recorded, and
"day 1's fastest" must name day 1's fastest recorded row. (Numbers should be printed by cells from the record;
where prose does type one, it must not drift from it.)"""

import json
import re
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "solutions" / "week1").glob("day*_*.ipynb"))
TBPS = re.compile(r"(\d+\.\d+)\s*TB/s")
FASTEST = re.compile(r"day 1's fastest", re.I)


def _slug(path: Path) -> str:
    return path.stem.split("_", 1)[1]


def _record(slug: str) -> dict | None:
    p = ROOT / "kernels" / slug / "recorded_h100.json"
    return json.loads(p.read_text()) if p.exists() else None


def recorded_tbps(doc: dict | None) -> set[float]:
    """Every bandwidth a record holds: each row's measured tbps and model prediction, and the copy ceiling."""
    if not doc:
        return set()
    vals = {doc.get("ceilings", {}).get("copy_tbps")}
    for r in doc.get("rows", []):
        vals |= {r.get("tbps"), r.get("model_prediction")}
    return {float(v) for v in vals if isinstance(v, (int, float))}


def all_recorded_tbps() -> set[float]:
    out = set()
    for p in NOTEBOOKS:
        out |= recorded_tbps(_record(_slug(p)))
    return out


def unrecorded_tbps(markdown: str, topic_values: set[float], any_values: set[float]) -> list[str]:
    """The decimal TB/s figures of `markdown` that match no recorded value to their printed precision (±0.005)."""
    bad = []
    for m in TBPS.finditer(markdown):
        text = m.group(1)
        x = float(text)
        tol = max(0.5 * 10 ** -len(text.split(".")[1]), 0.005)
        if not any(abs(x - v) <= tol for v in topic_values | any_values):
            bad.append(m.group(0))
    return bad


def fastest_claims_wrong(markdown: str, naive_record: dict | None) -> list[str]:
    """Each "day 1's fastest ..." that does not name the fastest row of day 1's record (within the sentence's
    next 80 characters)."""
    if naive_record is None:
        return [m.group(0) for m in FASTEST.finditer(markdown)]
    best = max(naive_record["rows"], key=lambda r: r["tbps"])["kernel"]
    return [markdown[m.start():m.end() + 80] for m in FASTEST.finditer(markdown)
            if best not in markdown[m.end():m.end() + 80]]


def _prose(path: Path) -> list[str]:
    """Markdown cells a student reads as claims (the quiz poses hypothetical numbers on purpose: excluded)."""
    nb = nbformat.read(str(path), as_version=4)
    return [c.source for c in nb.cells if c.cell_type == "markdown" and not c.source.lstrip().startswith("### Quiz")]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_every_typed_bandwidth_is_a_recorded_one(path):
    topic = recorded_tbps(_record(_slug(path)))
    others = all_recorded_tbps()
    for md in _prose(path):
        assert not unrecorded_tbps(md, topic, others), (path.name, unrecorded_tbps(md, topic, others))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_day1_fastest_names_the_fastest_row(path):
    naive = _record("naive_loads")
    for md in _prose(path):
        assert not fastest_claims_wrong(md, naive), (path.name, fastest_claims_wrong(md, naive))


def test_the_checks_catch_a_drifted_number_and_a_wrong_fastest():
    naive = _record("naive_loads")
    vals = recorded_tbps(naive)
    vec16 = next(r for r in naive["rows"] if r["kernel"] == "copy_vec16")
    grid = next(r for r in naive["rows"] if r["kernel"] == "copy_grid_stride")
    good = f"`copy_vec16` ran at {vec16['tbps']:.2f} TB/s, `copy_grid_stride` at {grid['tbps']:.3f} TB/s."
    assert unrecorded_tbps(good, vals, set()) == []
    drifted = f"`copy_vec16` ran at {vec16['tbps'] + 0.03:.2f} TB/s."
    assert unrecorded_tbps(drifted, vals, set()) == [f"{vec16['tbps'] + 0.03:.2f} TB/s"]
    assert unrecorded_tbps("a planted 9.99 TB/s", vals, vals) == ["9.99 TB/s"]
    best = max(naive["rows"], key=lambda r: r["tbps"])["kernel"]
    assert best == "copy_vec16"  # what day 5's wording relies on
    assert fastest_claims_wrong(f"Day 1's fastest copy, `{best}`, ...", naive) == []
    assert fastest_claims_wrong("Day 1's fastest copy, `copy_grid_stride`, kept ...", naive)
