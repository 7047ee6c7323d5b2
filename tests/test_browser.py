"""A real browser on the course: headless Chromium (Debian's `chromium`) driven by Playwright for Python.

Two tests. The first: three pages, three screenshots in build/screenshots/:
  1. JupyterLab (started by autograder.lab.start_lab, as `make lab --root .` does) opens the week-1 release
     notebook weeks/week1/day1_naive_loads.ipynb and runs its environment self-test cell; the output must say
     "CPU mode" (no GPU) or "sm_90" (an H100)                                        -> lab_day1_self_test.png
  2. nbgrader's formgrader at /formgrader, served by the same server, lists the course's week1  -> formgrader.png
  3. the class report (autograder.report) of a synthetic graded cohort, opened via file://      -> class_report.png

The second (no server: file:// pages) opens a feedback page as nbgrader's generate_feedback writes it with the
course's template and sanitizer (tests/test_feedback_page.py: the day-1 release plus a student's headings, table,
code, maths, plot and the known script attack), then the class report, and reads the DOM: headings are heading
elements, no tag shows as text, no script of the student's ran, no dialog opened (feedback_page.png, report_dom.png).

The server root is the course root ("."): the formgrader refuses to work unless the course root lies inside the
server's root, and weeks/week1/ is reachable from there too.

Playwright's own browser download cannot work on the course machines: `bash tools/install_browser.sh` installs
Debian's chromium, and the test skips (with the reason) where /usr/bin/chromium or playwright is missing.
Bounded: every wait has a timeout, the whole test gets 120 s, and the server's process group is ended in a
`finally`. Nothing in weeks/ is written: the lab runs with a throw-away Jupyter config dir whose settings turn
autosave off, and the notebook's bytes are compared before and after.
"""
from __future__ import annotations

import hashlib
import importlib.util
import json
import socket
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from autograder.lab import COURSE_ROOT, start_lab, stop_lab

CHROMIUM = Path("/usr/bin/chromium")
# No internet on the course machines: without the background-networking flags chromium's connections fail noisily.
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--disable-dev-shm-usage"]  # containers often have a small /dev/shm
SHOTS = COURSE_ROOT / "build" / "screenshots"
NOTEBOOK = "weeks/week1/day1_naive_loads.ipynb"
TOKEN = "course-browser-test"
STARTUP_S = 45.0
STEP_MS = 30_000  # any one browser action or wait
KERNEL_MS = 60_000  # the self-test cell: kernel start, imports, one NVRTC compile

# The lab's user settings for this test (a throw-away JUPYTER_CONFIG_DIR): no autosave (weeks/ is generated and
# must not be touched), no "get notified about Jupyter news?" toast over the screenshots.
USER_SETTINGS = {
    "@jupyterlab/docmanager-extension/plugin.jupyterlab-settings": {"autosave": False},
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {"fetchNews": "false",
                                                                       "checkForUpdates": False},
}


def _playwright():
    if not CHROMIUM.exists():
        pytest.skip(f"{CHROMIUM} is missing: run `bash tools/install_browser.sh` (installs Debian's chromium)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError as exc:
        pytest.skip(f"playwright for Python is not installed ({exc}): `pip install -e .` installs it")
    return sync_playwright


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_for_server(proc, base: str, log_path: Path) -> None:
    deadline = time.monotonic() + STARTUP_S
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"the lab exited with {proc.returncode}:\n{log_path.read_text()[-3000:]}"
        try:
            with urllib.request.urlopen(f"{base}/api/status?token={TOKEN}", timeout=3) as r:
                if r.status == 200:
                    return
        except (urllib.error.URLError, ConnectionError, TimeoutError, socket.timeout):
            pass
        time.sleep(0.3)
    raise AssertionError(f"the lab did not answer in {STARTUP_S:.0f} s:\n{log_path.read_text()[-3000:]}")


def _synthetic_report(grading: Path) -> Path:
    """The class report of tests/test_report.py's synthetic cohort (three students, flags, one malformed)."""
    spec = importlib.util.spec_from_file_location("course_test_report", Path(__file__).with_name("test_report.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    mod.make_grading(grading)
    from autograder.report import write_report

    return write_report(mod.WEEK, grading)


def _run_self_test(page, base: str) -> str:
    """Open the day-1 release in JupyterLab, run its first code cell (the environment self-test), return its
    output text."""
    page.goto(f"{base}/lab/tree/{NOTEBOOK}?reset&token={TOKEN}", timeout=STEP_MS)
    first = page.locator(".jp-NotebookPanel .jp-Notebook .jp-CodeCell").first
    first.wait_for(state="visible", timeout=STEP_MS)
    # Wait until the kernel is up: JupyterLab re-renders the notebook while it starts, detaching what we hold.
    page.wait_for_function("() => /Idle/.test(document.querySelector('#jp-main-statusbar')?.innerText || '')",
                           timeout=KERNEL_MS)
    assert "kernels.device.self_test()" in first.inner_text(timeout=STEP_MS), "the first code cell is not the self-test"
    first.locator(".jp-InputArea-editor").click(timeout=STEP_MS)
    page.keyboard.press("Shift+Enter")  # run it (JupyterLab queues it if the kernel is still starting)
    page.wait_for_function(
        "() => { const o = document.querySelector('.jp-NotebookPanel .jp-Notebook .jp-CodeCell .jp-OutputArea');"
        " return o !== null && /CPU mode|sm_90/.test(o.innerText); }", timeout=KERNEL_MS)
    text = page.locator(".jp-NotebookPanel .jp-Notebook .jp-CodeCell").first.locator(".jp-OutputArea") \
        .inner_text(timeout=STEP_MS)
    first.scroll_into_view_if_needed(timeout=STEP_MS)
    page.mouse.move(0, 0)  # no hover highlight in the screenshot
    page.screenshot(path=str(SHOTS / "lab_day1_self_test.png"), timeout=STEP_MS)
    return text


def _formgrader(page, base: str) -> str:
    page.goto(f"{base}/formgrader?token={TOKEN}", timeout=STEP_MS)
    page.wait_for_url("**/formgrader/manage_assignments**", timeout=STEP_MS)
    # the assignment table is filled in by the page's script from /formgrader/api/assignments
    page.locator("#main-table").get_by_text("week1", exact=True).first.wait_for(state="visible", timeout=STEP_MS)
    text = page.locator("body").inner_text(timeout=STEP_MS)
    page.screenshot(path=str(SHOTS / "formgrader.png"), full_page=True, timeout=STEP_MS)
    return text


def _report(page, report: Path) -> tuple[str, int]:
    page.goto(report.as_uri(), timeout=STEP_MS)
    page.wait_for_load_state("load", timeout=STEP_MS)
    drawn = page.evaluate("() => Array.from(document.images).filter(i => i.complete && i.naturalWidth > 0).length")
    text = page.locator("body").inner_text(timeout=STEP_MS)
    page.screenshot(path=str(SHOTS / "class_report.png"), full_page=True, timeout=STEP_MS)
    return text, drawn


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_browser_lab_self_test_formgrader_and_report(tmp_path, monkeypatch):
    sync_playwright = _playwright()
    SHOTS.mkdir(parents=True, exist_ok=True)
    for old in ("lab_day1_self_test.png", "formgrader.png", "class_report.png"):
        (SHOTS / old).unlink(missing_ok=True)

    grading = tmp_path / "grading"
    report = _synthetic_report(grading)
    # The lab's nbgrader (formgrader) works on the synthetic cohort's folder, not on build/grading/ ...
    monkeypatch.setenv("COURSE_GRADING_DIR", str(grading))
    # ... and the lab's user settings and workspaces live in a throw-away config dir.
    config = tmp_path / "jupyter_config"
    monkeypatch.setenv("JUPYTER_CONFIG_DIR", str(config))
    for rel, settings in USER_SETTINGS.items():
        f = config / "lab" / "user-settings" / rel
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(json.dumps(settings))

    release_nb = COURSE_ROOT / NOTEBOOK
    before = release_nb.read_bytes()
    port = _free_port()
    base = f"http://127.0.0.1:{port}"
    log_path = tmp_path / "lab.log"
    with open(log_path, "w") as log:
        proc = start_lab(port, ".", TOKEN, log=log)  # ".": the course root, which the formgrader needs
        try:
            _wait_for_server(proc, base, log_path)
            with sync_playwright() as pw:
                browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, timeout=STEP_MS)
                try:
                    page = browser.new_page(viewport={"width": 1400, "height": 900})
                    page.set_default_timeout(STEP_MS)
                    out = _run_self_test(page, base)
                    fg = _formgrader(page, base)
                    rep, drawn = _report(page, report)
                finally:
                    browser.close()
        finally:
            stop_lab(proc)
            if release_nb.read_bytes() != before:  # never leave the generated release modified
                release_nb.write_bytes(before)
                pytest.fail(f"the browser session wrote to {NOTEBOOK} (restored)")

    assert "CPU mode" in out or "sm_90" in out, out
    assert "nvrtc" in out.lower(), out
    assert "Manage Assignments" in fg and "week1" in fg, fg[:2000]
    for student in ("alice", "bob", "mallory"):
        assert student in rep, f"{student} missing from the report page"
    assert "Leaderboard" in rep and "path-elsewhere" in rep
    assert drawn >= 3, f"only {drawn} plot(s) drawn"
    for name in ("lab_day1_self_test.png", "formgrader.png", "class_report.png"):
        png = SHOTS / name
        assert png.exists() and png.stat().st_size > 10_000, f"{png} missing or blank"
    assert hashlib.sha256(release_nb.read_bytes()).digest() == hashlib.sha256(before).digest()


# What a page that renders its markup holds: heading elements, and no tag written out as text.
DOM_FACTS = """() => ({
    headings: Array.from(document.querySelectorAll('h1,h2,h3')).map(h => h.tagName + ' ' + h.textContent.trim()),
    tables: document.querySelectorAll('table th').length,
    literal: (document.body.innerText.match(/<\\/?(h[1-6]|p|th|td|tr|table|thead|tbody|img)\\b/g) || []),
    owned: typeof window.owned === 'undefined' ? null : String(window.owned),
    title: document.title,
    images: Array.from(document.images).filter(i => i.complete && i.naturalWidth > 0).length,
})"""


# A student folder whose id needs every kind of URL quoting: the report links to their page through it. Its '?' maps
# to a safe id (autograder.students: `\x3f`), so the link also carries a backslash.
ODD_FOLDER = "Zoë O'Brien, #1? \"x\""


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_browser_feedback_page_and_report_render_their_markup(tmp_path, monkeypatch):
    sync_playwright = _playwright()
    from test_feedback_page import feedback_page

    from autograder.report import write_report

    SHOTS.mkdir(parents=True, exist_ok=True)
    grading = tmp_path / "grading"
    _synthetic_report(grading)
    from autograder.students import student_id

    ODD_ID = student_id(ODD_FOLDER)
    (grading / "submitted" / ODD_FOLDER / "week1").mkdir(parents=True)
    feedback_page(grading / "feedback" / ODD_ID / "week1" / "day1_naive_loads.html", monkeypatch)
    report = write_report("week1", grading)  # again: it links to the pages written by then
    dialogs = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, timeout=STEP_MS)
        try:
            page = browser.new_page(viewport={"width": 1200, "height": 900})
            page.set_default_timeout(STEP_MS)
            page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
            page.goto(report.as_uri(), timeout=STEP_MS)
            page.wait_for_load_state("load", timeout=STEP_MS)
            rep = page.evaluate(DOM_FACTS)
            page.screenshot(path=str(SHOTS / "report_dom.png"), full_page=True, timeout=STEP_MS)
            # from the report to the student's page, through the link in their row of the Students table
            page.locator("#students + div tr", has_text=ODD_ID).locator("a").first.click()
            page.wait_for_load_state("load", timeout=STEP_MS)  # MathJax's CDN is out of reach: its script fails
            landed = page.url
            page.locator("b", has_text="hover").first.hover()  # the student's onmouseover, if it were kept
            page.get_by_text("click me").first.click()  # the student's javascript: link, if it were kept
            page.get_by_text("notes", exact=True).first.click()
            fb = page.evaluate(DOM_FACTS)
            page.screenshot(path=str(SHOTS / "feedback_page.png"), full_page=False, timeout=STEP_MS)
        finally:
            browser.close()

    assert rep["headings"][0].startswith("H1 Class report") and "H2 Students" in rep["headings"], rep["headings"]
    assert rep["tables"] > 10 and rep["literal"] == [] and rep["images"] >= 3, rep
    assert landed.endswith("/day1_naive_loads.html") and fb["headings"], (landed, fb["headings"][:3])
    assert "H1 My notes¶" in fb["headings"] and "H2 What I measured¶" in fb["headings"], fb["headings"][:10]
    assert any(h.startswith("H1 Week 1") for h in fb["headings"]), fb["headings"][:10]  # the release's title
    assert fb["tables"] >= 3 and fb["images"] >= 1, fb
    assert fb["literal"] == [], fb["literal"][:10]
    assert fb["owned"] is None and fb["title"] != "owned" and dialogs == [], (fb["owned"], fb["title"], dialogs)
