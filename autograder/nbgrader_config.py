"""nbgrader configuration for the course (nbgrader 0.9.6).

Use it from the repo root with `--config autograder/nbgrader_config.py`, e.g.

    nbgrader generate_assignment week1 --config autograder/nbgrader_config.py --force
    nbgrader autograde week1 --config autograder/nbgrader_config.py

or put autograder/ on JUPYTER_CONFIG_PATH (what `python -m autograder.lab` does, so the formgrader finds it).

Layout (nbgrader's `{nbgrader_step}/{student_id}/{assignment_id}` with nested step names, all relative to
the repo root):

    solutions/<week>/                          source: solutions + hidden tests (public self-study edition)
    weeks/<week>/                              release: generated, never edited by hand
    build/grading/submitted/<student>/<week>/  submissions to grade
    build/grading/autograded/<student>/<week>/ after `nbgrader autograde`
    build/grading/feedback/<student>/<week>/   after `nbgrader generate_feedback`
    build/grading/gradebook.db                 the gradebook (sqlite)
    build/exchange/                            nbgrader's exchange (unused by the course's own tooling)
"""
import os
from pathlib import Path

from nbconvert.preprocessors import CSSHTMLHeaderPreprocessor
from nbgrader.preprocessors import ClearHiddenTests, GetGrades

c = get_config()  # noqa: F821  (injected by traitlets when it loads this file)

ROOT = Path(__file__).resolve().parent.parent  # the course repo
# COURSE_GRADING_DIR moves the grading state elsewhere (tests grade in a temporary folder).
GRADING = Path(os.environ.get("COURSE_GRADING_DIR") or ROOT / "build" / "grading")
EXCHANGE = ROOT / "build" / "exchange"
# sqlite creates the database file but not its folder; the exchange must exist before nbgrader checks it.
GRADING.mkdir(parents=True, exist_ok=True)
EXCHANGE.mkdir(parents=True, exist_ok=True)

# Graded notebooks import the course packages (kernels, autograder): the kernels nbgrader starts inherit
# this process's environment, so put the course root on their path whoever invoked nbgrader.
_path = os.environ.get("PYTHONPATH", "")
if str(ROOT) not in _path.split(os.pathsep):
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), _path) if p)
import sys  # noqa: E402

if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

# --- where things live --------------------------------------------------------------------------------------
c.CourseDirectory.root = str(ROOT)
c.CourseDirectory.course_id = "hopper-async"
c.CourseDirectory.source_directory = "solutions"
c.CourseDirectory.release_directory = "weeks"
c.CourseDirectory.submitted_directory = str(GRADING / "submitted")
c.CourseDirectory.autograded_directory = str(GRADING / "autograded")
c.CourseDirectory.feedback_directory = str(GRADING / "feedback")
c.CourseDirectory.solution_directory = str(GRADING / "solution")
c.CourseDirectory.source_with_tests_directory = str(GRADING / "source_with_tests")
c.CourseDirectory.db_url = f"sqlite:///{GRADING / 'gradebook.db'}"
c.Exchange.root = str(EXCHANGE)

# --- release (generate_assignment) --------------------------------------------------------------------------
# What a student finds in an answer cell: `### BEGIN SOLUTION ... ### END SOLUTION` is replaced by this.
from autograder.answers import CODE_STUB  # noqa: E402  (one text: the notebook shortens exactly its last line)

c.ClearSolutions.code_stub = CODE_STUB

# --- grading (autograde) ------------------------------------------------------------------------------------
# Kernels compile (NVRTC), check and time inside graded cells: give a cell minutes, not nbgrader's 30 s.
# nbgrader's Execute redefines `timeout`, so set it on both classes.
c.ExecutePreprocessor.timeout = 600
c.Execute.timeout = 600

# The gradebook's verdicts come from the trusted harness (a separate process), not from the student's notebook:
# TrustedVerdicts re-grades the answer cells (taken out by grade_id) right after the notebook ran and replaces the
# outputs of the spec's grade cells before SaveAutoGrades reads them (autograder/nbgrader_plugin.py).
from nbconvert.preprocessors import ClearMetadataPreprocessor  # noqa: E402
from nbgrader.preprocessors import (  # noqa: E402
    AssignLatePenalties, CheckCellMetadata, IgnorePattern, LimitOutput, SaveAutoGrades)

from autograder.nbgrader_plugin import ExecuteUnlessTrusted, TrustedVerdicts  # noqa: E402

c.Autograde.autograde_preprocessors = [
    ExecuteUnlessTrusted, TrustedVerdicts, IgnorePattern, ClearMetadataPreprocessor, LimitOutput,
    SaveAutoGrades, AssignLatePenalties, CheckCellMetadata,
]

# --- feedback -----------------------------------------------------------------------------------------------
# nbgrader's default feedback shows the hidden tests' source; ClearHiddenTests removes it (a failing hidden
# assert still shows its own line in the traceback: keep hidden asserts free of secrets).
c.GenerateFeedback.preprocessors = [GetGrades, ClearHiddenTests, CSSHTMLHeaderPreprocessor]
# nbgrader's feedback page with one change: its table of contents names each graded part ("row bias path") where
# nbgrader's says "Test cell" (autograder/feedback_templates/course_feedback/). The flags of the trusted verdict are
# added to each page after generate_feedback (autograder.record.flag_feedback).
import nbgrader as _nbgrader  # noqa: E402

c.HTMLExporter.template_name = "course_feedback"
c.HTMLExporter.extra_template_basedirs = [
    str(ROOT / "autograder" / "feedback_templates"),
    str(Path(_nbgrader.__file__).parent / "server_extensions" / "formgrader" / "templates"),
]
# A student's markdown and HTML outputs are the student's: sanitized on the feedback page (no script, no event
# handler, no javascript: link), which the student and an instructor open in a browser (tests/test_instructor_workflow).
c.HTMLExporter.sanitize_html = True
# ...through the course's allow-list, under nbconvert's filter name so that every template use takes it: nbconvert's
# own `clean_html` escapes what its markdown renderer writes (<h1 id=..>, <p>, <thead><th>, <img>: the page showed
# the tags as text). autograder/feedback_html.py keeps the notebook's markup and nothing that runs (tests/test_browser).
c.HTMLExporter.filters = {"clean_html": "autograder.feedback_html.clean_html"}

# --- export -------------------------------------------------------------------------------------------------
# nbgrader 0.9.6's CsvExportPlugin joins the fields with "," unquoted (an id with a comma shifts every later column)
# and writes the file in place (a crash leaves it half written). The course's exporter writes the same columns and
# rows with csv.writer, whole or not at all: autograder.report.write_grades_csv.
from nbgrader.plugins import ExportPlugin  # noqa: E402
from autograder.report import write_grades_csv


class GradesCsvExport(ExportPlugin):
    """`nbgrader export --to=F [--assignment=A] [--student=S]`: nbgrader's CSV, quoted where needed, written whole."""

    def export(self, gradebook) -> None:
        write_grades_csv(Path(self.to or "grades.csv"), gradebook, [str(a) for a in self.assignment],
                         [str(s) for s in self.student])


c.ExportApp.plugin_class = GradesCsvExport
