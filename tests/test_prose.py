"""The notebooks' and the README's prose against the records. A recorded number comes from a record of one GPU
(kernels/<slug>/recorded_<gpu>.json) and a notebook shows the record of the GPU it runs on, else the H100's: so no
prose may type a GPU model or a measured figure — a cell prints both from the record it shows (`doc["device"]`
beside the numbers). What the prose may still type is on the small allow-lists below: datasheet figures and
family names, each said to be one.

Checked in every solutions notebook (weeks/ is generated from them): markdown cells (the quiz, whose numbers are
hypothetical on purpose, is left out of the figure check) and the string literals of code cells (what print()
and the one-line GPU notices show); not the answer cells nor the grade cells (the exercise and the grader's own
texts). And the README: no sentence that says every number was measured on one GPU while another GPU's records
exist, each topic's records named with their GPUs, and every TB/s or TFLOPS figure one a record holds.
"""

from __future__ import annotations

import ast
import json
import re
import tomllib
from pathlib import Path

import nbformat
import pytest

from kernels import record

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "solutions").glob("week*/day*_*.ipynb"))
README = ROOT / "README.md"

GPU_NAME = re.compile(r"\b(?:GH200|H100|H200)\b")
FIGURE = re.compile(r"(\d+(?:\.\d+)?)\s*(TB/s|TFLOPS)\b")
FASTEST = re.compile(r"day 1's fastest", re.I)

# Datasheet and family text a notebook may type, with why. Each entry is a regex whose match must cover the hit.
ALLOWED = {
    # day 4 (GEMM), the model's PEAK against the datasheet: a datasheet constant (H100 SXM dense bf16, no sparsity),
    # labelled as one, not a measurement. The cell is the model-fit section (kept as its author wrote it).
    r"the datasheet's 989 TFLOPS\s+of an H100": "datasheet dense bf16 peak of the H100 SXM",
}
# Cells exempt from the figure check while another change rewrites them: (notebook, cell id) -> the typed figure
# left in them. Empty: nothing may stay exempt.
PENDING: dict[tuple[str, str], str] = {}


# ----------------------------------------------------------------------------------------------- reading the text
def _is_quiz(cell) -> bool:
    return cell.cell_type == "markdown" and cell.source.lstrip().startswith("### Quiz")


def _graded(cell) -> bool:
    """An answer cell (the exercise) or a grade cell (hidden tests, quiz checks): not prose of the notebook."""
    nbg = cell.metadata.get("nbgrader", {})
    return bool(nbg.get("solution") or nbg.get("grade"))


def code_strings(source: str) -> list[str]:
    """The string literals of a code cell (IPython magics dropped); an f-string with each replacement field as
    "{}", so that a typed figure or name beside a formatted one is still seen."""
    code = "\n".join("" if line.lstrip().startswith(("%", "!")) else line for line in source.splitlines())
    tree = ast.parse(code)
    inside = {id(v) for n in ast.walk(tree) if isinstance(n, ast.JoinedStr) for v in n.values}
    inside |= {id(n.format_spec) for n in ast.walk(tree) if isinstance(n, ast.FormattedValue) and n.format_spec}
    out = []
    for n in ast.walk(tree):
        if isinstance(n, ast.JoinedStr) and id(n) not in inside:
            out.append("".join(v.value if isinstance(v, ast.Constant) else "{}" for v in n.values))
        elif isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in inside:
            out.append(n.value)
    return out


def prose(path: Path, *, quiz: bool = True) -> list[tuple[str, str]]:
    """(cell id, text) for every piece of text a reader sees as the notebook's own: markdown cells and code cells'
    string literals, not answer or grade cells; the quiz's markdown only with quiz=True."""
    nb = nbformat.read(str(path), as_version=4)
    out = []
    for c in nb.cells:
        if _graded(c) or (not quiz and _is_quiz(c)):
            continue
        if c.cell_type == "markdown":
            out.append((c.get("id"), c.source))
        elif c.cell_type == "code":
            out.extend((c.get("id"), s) for s in code_strings(c.source))
    return out


def _allowed(text: str, start: int, end: int) -> bool:
    return any(m.start() <= start and end <= m.end() for pat in ALLOWED for m in re.finditer(pat, text))


def typed_gpu_names(text: str) -> list[str]:
    """Each GPU model name the text types outside the allow-list (with the words around it)."""
    return [text[max(0, m.start() - 50):m.end() + 30] for m in GPU_NAME.finditer(text)
            if not _allowed(text, m.start(), m.end())]


def typed_figures(text: str) -> list[str]:
    """Each "<number> TB/s" / "<number> TFLOPS" the text types outside the allow-list."""
    return [m.group(0) for m in FIGURE.finditer(text) if not _allowed(text, m.start(), m.end())]


def _pending(path: Path, cell_id: str, hits: list[str]) -> list[str]:
    return [] if (path.name, cell_id) in PENDING else hits


# ------------------------------------------------------------------------------------------------- the notebooks
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: f"{p.parent.name}-{p.stem}")
def test_no_gpu_model_typed_in_a_notebook(path):
    """A notebook shows the record of the GPU it runs on: the GPU a number came from is printed from that record
    (`doc["device"]`), never typed ("the recorded H100 numbers" under an H200's table is the bug this prevents)."""
    bad = [(cid, hit) for cid, text in prose(path) for hit in typed_gpu_names(text)]
    assert not bad, f"{path.name}: GPU names typed (print them from the record): {bad}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: f"{p.parent.name}-{p.stem}")
def test_no_measured_figure_typed_in_a_notebook(path):
    """TB/s and TFLOPS figures are printed from the record (a markdown cell cannot format one), except the
    datasheet figures of ALLOWED."""
    bad = [(cid, hit) for cid, text in prose(path, quiz=False) for hit in _pending(path, cid, typed_figures(text))]
    assert not bad, f"{path.name}: figures typed (print them from the record): {bad}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: f"{p.parent.name}-{p.stem}")
def test_day1_fastest_names_the_fastest_row(path):
    for doc in record.load_all("naive_loads").values():
        for _, text in prose(path):
            assert not fastest_claims_wrong(text, doc), (path.name, doc["device"], fastest_claims_wrong(text, doc))


def test_pending_cells_exist_and_allowed_text_is_used():
    """The exceptions name cells that exist, and each allow-list entry still matches some notebook (no dead
    entries that would let a later typo through)."""
    ids = {(p.name, c.get("id")) for p in NOTEBOOKS for c in nbformat.read(str(p), as_version=4).cells}
    assert set(PENDING) <= ids, set(PENDING) - ids
    texts = [t for p in NOTEBOOKS for _, t in prose(p)]
    for pat in ALLOWED:
        assert any(re.search(pat, t) for t in texts), f"allow-list entry {pat!r} matches nothing"


def fastest_claims_wrong(text: str, naive_record: dict | None) -> list[str]:
    """Each "day 1's fastest ..." that does not name the fastest row of day 1's record (within the sentence's
    next 80 characters)."""
    if naive_record is None:
        return [m.group(0) for m in FASTEST.finditer(text)]
    best = max(naive_record["rows"], key=lambda r: r["tbps"])["kernel"]
    return [text[m.start():m.end() + 80] for m in FASTEST.finditer(text) if best not in text[m.end():m.end() + 80]]


def test_the_checks_catch_typed_names_and_figures():
    """The checks on planted text: what today's notebooks must not say, and what they may."""
    assert typed_gpu_names("the recorded H100 numbers") and typed_gpu_names("an H200 run") \
        and typed_gpu_names("on a GH200,")
    assert typed_gpu_names("kernels.record.load('swizzle', 'h100')") == []  # a tag is code, not prose
    assert typed_figures("bar: {} TB/s = {} x 3.0 TB/s (the copy ceiling)") == ["3.0 TB/s"]
    assert typed_figures("{} x 741 TFLOPS") == ["741 TFLOPS"]
    assert typed_figures("{:.2f} TB/s, {} TFLOPS") == []
    assert typed_figures("below the datasheet's 989 TFLOPS\nof an H100") == []
    assert typed_gpu_names("below the datasheet's 989 TFLOPS\nof an H100") == []
    assert typed_gpu_names("989 TFLOPS of an H100") != []  # the label "datasheet" is what allows it
    strings = code_strings('%matplotlib inline\nx = 3\nprint(f"{x:.2f} x 3.0 TB/s (the H100 ceiling)", "a" "b")')
    assert strings == ["{} x 3.0 TB/s (the H100 ceiling)", "ab"]
    naive = record.load("naive_loads", "h100")
    best = max(naive["rows"], key=lambda r: r["tbps"])["kernel"]
    assert best == "copy_vec16"  # what day 5's wording relies on
    assert fastest_claims_wrong(f"Day 1's fastest copy, `{best}`, ...", naive) == []
    assert fastest_claims_wrong("Day 1's fastest copy, `copy_grid_stride`, kept ...", naive)


# ----------------------------------------------------------------------------------------------------- the README
SLUGS = sorted({p.parent.name for p in (ROOT / "kernels").glob("*/recorded_*.json")})
GPU_OF_TAG = {"h100": "H100", "h200": "H200", "gh200": "GH200"}
# "every number ... measured on an H100", "all figures ... recorded_h100.json": a claim about every record.
EVERY_CLAIM = re.compile(r"\b(?:every|all)\b[^.;:]*?\b(?:numbers?|figures?)\b[^.;:]*?"
                         r"(?:\b(GH200|H100|H200)\b|recorded_(gh200|h100|h200)\.json)", re.I | re.S)
RECORDED_GPU_NUMBERS = re.compile(r"\bthe recorded (GH200|H100|H200) (?:numbers|figures)\b")
README_DATASHEET = {
    # a datasheet peak named as one (no README sentence needs one today; keep this list as small as the notebooks')
}


def _sections(text: str) -> dict[str, str]:
    parts = re.split(r"^## ", text, flags=re.M)
    return {p.split("\n", 1)[0].strip(): p for p in parts[1:]} | {"": parts[0]}


def readme_text_checked(text: str) -> str:
    """The README without what this test leaves to others: the "## The days" table's bar column (its last)."""
    out = []
    in_days = False
    for line in text.splitlines():
        if line.startswith("## "):
            in_days = line.strip() == "## The days"
        if in_days and line.startswith("|"):
            line = "|".join(line.split("|")[:-2]) + "|"
        out.append(line)
    return "\n".join(out)


def gpu_claims_contradicted(text: str, tags_by_slug: dict[str, list[str]]) -> list[str]:
    """Each sentence that says every number / the recorded numbers come from one GPU while a topic has a record of
    another GPU (a notebook on that GPU shows it) or none of that GPU."""
    bad = []
    for pat in (EVERY_CLAIM, RECORDED_GPU_NUMBERS):
        for m in pat.finditer(text):
            gpu = next(g for g in m.groups() if g).upper()
            if any(set(GPU_OF_TAG[t] for t in tags) != {gpu} for tags in tags_by_slug.values()):
                bad.append(" ".join(m.group(0).split()))
    return bad


def _numbers(doc) -> set[float]:
    if isinstance(doc, bool):
        return set()
    if isinstance(doc, (int, float)):
        return {float(doc)}
    if isinstance(doc, dict):
        return set().union(*(_numbers(v) for v in doc.values())) if doc else set()
    if isinstance(doc, list):
        return set().union(*(_numbers(v) for v in doc)) if doc else set()
    return set()


def recorded_values() -> set[float]:
    """Every number a record holds: the topics' records of every GPU, the graded cohorts' records, and the specs'
    per-GPU calibrations (bar inputs written by `autograder calibrate` from a record)."""
    vals = set()
    for p in sorted((ROOT / "kernels").glob("*/recorded_*.json")) + sorted(
            (ROOT / "autograder").glob("recorded_cohort_*.json")):
        vals |= _numbers(json.loads(p.read_text()))
    for p in sorted((ROOT / "kernels").glob("*/spec.toml")):
        for ex in tomllib.loads(p.read_text()).get("exercises", {}).values():
            cals = ex.get("throughput", {}).get("calibration", {})
            vals |= _numbers(cals)
            for c in cals.values():
                if isinstance(c, dict) and {"fraction", "baseline"} <= set(c):
                    vals.add(float(c["fraction"]) * float(c["baseline"]))  # the bar it sets
    return vals


def unrecorded_figures(text: str, values: set[float]) -> list[str]:
    """The TB/s and TFLOPS figures of `text` that match no recorded value to their printed precision."""
    bad = []
    for m in FIGURE.finditer(text):
        if any(re.search(pat, text[max(0, m.start() - 80):m.end() + 80]) for pat in README_DATASHEET):
            continue
        num = m.group(1)
        decimals = len(num.split(".")[1]) if "." in num else 0
        tol = max(0.5 * 10 ** -decimals, 0.005)
        if not any(abs(float(num) - v) <= tol for v in values):
            bad.append(m.group(0))
    return bad


def test_readme_claims_no_gpu_for_every_number_that_the_records_contradict():
    text = readme_text_checked(README.read_text())
    bad = gpu_claims_contradicted(text, {s: record.tags(s) for s in SLUGS})
    assert not bad, f"README sentences the records contradict: {bad}"


def test_readme_names_each_topics_records_with_their_gpus():
    """The "## Measured numbers" section has one line per topic naming the GPUs it has records of (and no other)."""
    section = _sections(README.read_text()).get("Measured numbers", "")
    assert section, "README has no '## Measured numbers' section"
    for slug in SLUGS:
        lines = [ln for ln in section.splitlines() if f"`{slug}`" in ln]
        assert len(lines) == 1, f"one line of the Measured numbers section names `{slug}`: {lines}"
        named = set(GPU_NAME.findall(lines[0]))
        assert named == {GPU_OF_TAG[t] for t in record.tags(slug)}, (slug, lines[0], record.tags(slug))


def test_readme_figures_are_recorded_ones():
    values = recorded_values()
    text = readme_text_checked(README.read_text())
    assert not unrecorded_figures(text, values), unrecorded_figures(text, values)


def test_the_readme_checks_catch_a_contradicted_claim_and_a_typed_figure():
    tags = {"naive_loads": ["h100"], "swizzle": ["h100", "h200"]}
    claim = "every number in the notebooks was measured on an H100 by a script"
    assert gpu_claims_contradicted(claim, tags) == ["every number in the notebooks was measured on an H100"]
    assert gpu_claims_contradicted(claim, {"naive_loads": ["h100"]}) == []
    assert gpu_claims_contradicted("Every figure the notebooks show comes from\n`kernels/<slug>/recorded_h100.json`",
                                   tags)
    assert gpu_claims_contradicted("goal and numbers to beat (the recorded H100 numbers)", tags)
    assert gpu_claims_contradicted("each notebook prints the record of the GPU it runs on", tags) == []
    naive = record.load("naive_loads", "h100")
    vec16 = next(r for r in naive["rows"] if r["kernel"] == "copy_vec16")
    vals = _numbers(naive)
    assert unrecorded_figures(f"`copy_vec16` ran at {vec16['tbps']:.2f} TB/s", vals) == []
    assert unrecorded_figures(f"ran at {vec16['tbps'] + 0.03:.2f} TB/s", vals) == [f"{vec16['tbps'] + 0.03:.2f} TB/s"]
    assert unrecorded_figures("a planted 9.99 TB/s and 1234 TFLOPS", vals) == ["9.99 TB/s", "1234 TFLOPS"]
    days = "## The days\n| w1d1 | x | y | bar 9.99 TB/s |\n## Next\nbar 8.88 TB/s"
    assert unrecorded_figures(readme_text_checked(days), vals) == ["8.88 TB/s"]


def prints_fit_raw(tree) -> list[str]:
    """print(...) calls whose arguments show a model's FIT / FIT_ROWS / HELD_OUT whole (a dict or tuple as Python
    prints it) outside a fit_table(...) call; one field of it (model.FIT["device"]) is text, not a raw dict."""
    raw = []
    for call in ast.walk(tree):
        if isinstance(call, ast.Call) and getattr(call.func, "id", None) == "print":
            inside = {id(n) for a in ast.walk(call) if isinstance(a, ast.Call)
                      and getattr(a.func, "attr", getattr(a.func, "id", None)) == "fit_table" for n in ast.walk(a)}
            inside |= {id(a.value) for a in ast.walk(call) if isinstance(a, ast.Subscript)}
            raw += [ast.unparse(n) for a in call.args for n in ast.walk(a) if id(n) not in inside
                    and isinstance(n, ast.Attribute) and n.attr in ("FIT", "FIT_ROWS", "HELD_OUT")]
    return raw


@pytest.mark.parametrize("path", [p for p in NOTEBOOKS if p.parent.name == "week2"], ids=lambda p: p.stem)
def test_week2_notebooks_print_model_fits_as_tables(path):
    """No code cell prints a model's fit as Python's raw dict or tuple: kernels.topic.fit_table shows it."""
    cells = ["".join(c["source"]) for c in json.loads(path.read_text())["cells"] if c["cell_type"] == "code"]
    trees = [ast.parse("\n".join(ln for ln in s.splitlines() if not ln.lstrip().startswith(("%", "!")))) for s in cells]
    assert [r for t in trees for r in prints_fit_raw(t)] == []
    assert sum("fit_table(" in s for s in cells) >= 1
    assert prints_fit_raw(ast.parse('print("fit rows:", model.FIT_ROWS, {"a": 1}, m.FIT)')) == ["model.FIT_ROWS",
                                                                                               "m.FIT"]
    assert prints_fit_raw(ast.parse('print(kernels.topic.fit_table(model.FIT), model.FIT["device"])')) == []
