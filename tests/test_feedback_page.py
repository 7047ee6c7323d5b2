"""The feedback page a student (and an instructor) opens: the notebook's own markup renders, nothing of it runs.

The page is rendered the way `nbgrader generate_feedback` renders it -- nbgrader's GenerateFeedback sets up the
HTMLExporter (its bootstrap CSS, its template folders) from the course's autograder/nbgrader_config.py (the course's
template, sanitize_html, the course's clean_html filter) -- but without a gradebook: the scores GetGrades would put
on each grade cell are set here. The notebook is the week-1 day-1 release (its headings, tables, code, maths) with
three cells of a student's own: markdown with headings, a table, code and maths; the known attack (conftest's
HOSTILE_MARKUP plus a script and handlers that would set a global); and a code cell whose outputs are a PNG, an HTML
table (with a script) and markdown. `feedback_page` is shared with tests/test_browser.py, which opens the page.
"""
from __future__ import annotations

import base64
import html.parser
import re
from pathlib import Path

from conftest import HOSTILE_MARKUP

from autograder.release import ROOT

DAY1 = ROOT / "weeks" / "week1" / "day1_naive_loads.ipynb"
# What a student's markup would do if any of it ran: set a global, change the title, open a dialog, navigate.
ATTACK = (HOSTILE_MARKUP + ' <script>window.owned = "script"</script>'
          ' <img src="x" onerror="window.owned = \'onerror\'"> <b onmouseover="window.owned = \'hover\'">hover</b>'
          ' <a href="javascript:window.owned = \'link\'">click me</a> <iframe src="javascript:alert(3)"></iframe>')
STUDENT_MARKDOWN = r"""# My notes

## What I measured

A paragraph with *emphasis*, **strong**, `inline code`, a [link](https://docs.nvidia.com) and maths
$\alpha^2 < \beta$; and on its own line:

$$\sum_{i<n} x_i = 1$$

| width | TB/s |
|:------|-----:|
| 4 B   | 1.9  |
| 16 B  | 3.0  |

```python
y = row_bias(x, b)  # <vectorized>
```
"""


def _png() -> str:
    """A small PNG (base64), drawn by matplotlib as a notebook's plot output would be."""
    import io

    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(3, 2), dpi=60)
    FigureCanvasAgg(fig)
    fig.add_subplot().plot([1, 2, 3], [3.0, 1.9, 2.5])
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return base64.b64encode(buf.getvalue()).decode("ascii")


def course_notebook():
    """The day-1 release with the student's cells above it (see the module's docstring)."""
    import nbformat

    nb = nbformat.read(str(DAY1), as_version=4)
    outputs = [
        nbformat.v4.new_output("display_data", data={"image/png": _png(), "text/plain": "<Figure>"}),
        nbformat.v4.new_output("display_data", data={
            "text/html": "<table class='dataframe'><thead><tr><th>n</th></tr></thead><tbody><tr><td>7</td></tr>"
                         "</tbody></table><script>window.owned = 'output'</script>",
            "text/plain": "n 7"}),
        nbformat.v4.new_output("display_data", data={"text/markdown": "### From an output\n\n*fine*",
                                                     "text/plain": "From an output"}),
    ]
    nb.cells[:0] = [nbformat.v4.new_markdown_cell(STUDENT_MARKDOWN), nbformat.v4.new_markdown_cell(ATTACK),
                    nbformat.v4.new_code_cell("plot()", outputs=outputs, execution_count=1)]
    for i, c in enumerate(nb.cells):  # what GetGrades leaves on each graded cell
        if "nbgrader" in c.metadata:
            c.metadata.nbgrader.setdefault("points", 0)
            c.metadata.nbgrader.setdefault("score", 0)
    return nb


def feedback_page(out: Path, monkeypatch, nb=None) -> Path:
    """Render `nb` (default: course_notebook()) as the course's feedback page into `out`; return `out`."""
    from nbconvert import HTMLExporter
    from nbgrader.converters import GenerateFeedback
    from nbgrader.coursedir import CourseDirectory
    from traitlets.config.loader import PyFileConfigLoader

    monkeypatch.setenv("COURSE_GRADING_DIR", str(out.parent / "grading"))  # the config file makes this folder
    cfg = PyFileConfigLoader("nbgrader_config.py", path=str(ROOT / "autograder")).load_config()
    feedback = GenerateFeedback(coursedir=CourseDirectory(config=cfg), config=cfg)
    exporter = HTMLExporter(parent=feedback, config=feedback.config)
    body, _ = exporter.from_notebook_node(nb if nb is not None else course_notebook(), resources={
        "nbgrader": {"notebook": DAY1.stem, "score": 3.0, "max_score": 7.0, "late_penalty": 0}})
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(body)
    return out


class _Elements(html.parser.HTMLParser):
    """Every start tag of a page: (tag, {attribute: value})."""

    def __init__(self):
        super().__init__()
        self.found: list[tuple[str, dict]] = []

    def handle_starttag(self, tag, attrs):
        self.found.append((tag, dict(attrs)))


def _elements(page: str) -> list[tuple[str, dict]]:
    p = _Elements()
    p.feed(page)
    return p.found


def test_the_feedback_page_renders_the_notebooks_markup(tmp_path, monkeypatch):
    page = feedback_page(tmp_path / "day1.html", monkeypatch).read_text()
    # nbconvert's own filter escaped these into visible text (39 on a week-1 page)
    escaped = re.findall(r"&lt;/?(?:h[1-6]|p|th|td|tr|thead|tbody|table|img|hr|em|strong|pre)\b", page)
    assert not escaped, f"{len(escaped)} tags shown as text, e.g. {escaped[:5]}"
    tags = _elements(page)
    heads = [(t, a.get("id")) for t, a in tags if re.fullmatch(r"h[1-6]", t)]
    assert ("h1", "My-notes") in heads and ("h2", "What-I-measured") in heads and ("h3", "From-an-output") in heads
    assert any(t == "h1" and i and i.startswith("Week-1") for t, i in heads), heads  # the release's own title
    assert sum(t == "table" for t, _ in tags) >= 3 and sum(t == "th" for t, _ in tags) >= 3  # the release has tables
    assert '<th style="text-align:left;">width</th>' in page and "<td>7</td>" in page
    assert '<a href="https://docs.nvidia.com">link</a>' in page and "<code>inline code</code>" in page
    assert '<span class="n">row_bias</span>' in page  # the fenced code, highlighted
    assert r"$\alpha^2 &lt; \beta$" in page and r"$$\sum_{i&lt;n} x_i = 1$$" in page  # maths: text for MathJax
    pngs = [a["src"] for t, a in tags if t == "img" and a.get("src", "").startswith("data:image/png;base64,")]
    assert pngs and base64.b64decode(pngs[0].split(",", 1)[1])[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_feedback_page_runs_nothing_of_the_students(tmp_path, monkeypatch):
    page = feedback_page(tmp_path / "day1.html", monkeypatch).read_text()
    tags = _elements(page)
    scripts = [a for t, a in tags if t == "script"]
    # the page's own scripts only: MathJax and its configuration
    assert all(a.get("type") == "text/x-mathjax-config" or "mathjax" in a.get("src", "").lower() for a in scripts)
    assert "&lt;script&gt;window.owned" in page  # the student's script: shown as text
    handlers = [(t, k) for t, a in tags for k in a if k.startswith("on")]
    assert not handlers, handlers
    urls = [a.get("href") or a.get("src") or "" for t, a in tags if t in ("a", "img", "iframe")]
    assert not [u for u in urls if u.strip().lower().startswith(("javascript:", "data:text"))], urls
    assert not any(t == "iframe" for t, _ in tags)
    assert "click me" in page and "{{ 7 * 7 }}" in page  # the student's text stays, template syntax too
