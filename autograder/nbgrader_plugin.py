"""nbgrader preprocessor: the gradebook's verdicts come from the trusted harness, not the student's notebook.

Runs inside `nbgrader autograde` after the notebook was executed. For every notebook with a grader spec it takes
the answer cells out by grade_id (as data), grades them with `autograder.grading.grade_notebook` (the harness runs in
its own process), and REPLACES the outputs of the spec's grade cells with the trusted verdict: a stdout stream with
the reason and an execute_result with the points (nbgrader's partial credit). Whatever the notebook's own run
printed or returned in those cells is discarded. The verdict (figures, evidence, flags) is also written as JSON
under build/grading/verdicts/<student>/<assignment>/<notebook>.json for feedback and the class report.

The secret seed comes from the environment (COURSE_SECRET_SEED), set by the grading command, never from the course.
"""

from __future__ import annotations

import json
import os
import secrets
from pathlib import Path

from nbformat.v4 import new_output
from nbgrader.preprocessors import Execute, NbGraderPreprocessor

from .grading import grade_notebook
from .release import grading_dir
from .spec import for_notebook


class ExecuteUnlessTrusted(Execute):
    """nbgrader's Execute, skipped for notebooks whose every grade cell the trusted harness grades: the student's
    notebook code then never runs during grading at all (no infinite loop, fork or patch in a cell can reach the
    batch), and a submission costs only its harness runs. Notebooks without a grader spec execute as usual."""

    def preprocess(self, nb, resources):
        info = resources.get("nbgrader", {})
        notebook = info.get("notebook", "")
        spec = for_notebook(info.get("assignment", ""), notebook if notebook.endswith(".ipynb") else notebook + ".ipynb")
        if spec is not None:
            ids = {c.metadata.get("nbgrader", {}).get("grade_id") for c in nb.cells
                   if c.metadata.get("nbgrader", {}).get("grade")}
            if ids <= set(spec.grade_cells()):
                self.log.info("not executing %s: every grade cell is graded by the trusted harness", notebook)
                return nb, resources
        return super().preprocess(nb, resources)


class TrustedVerdicts(NbGraderPreprocessor):
    def preprocess(self, nb, resources):
        info = resources.get("nbgrader", {})
        assignment = info.get("assignment", "")
        notebook = info.get("notebook", "")
        student = info.get("student", "")
        spec = for_notebook(assignment, notebook + ".ipynb" if not notebook.endswith(".ipynb") else notebook)
        if spec is None:
            return nb, resources
        seed = os.environ.get("COURSE_SECRET_SEED")
        if not seed:
            seed = str(secrets.randbits(48))
            self.log.warning("COURSE_SECRET_SEED is not set: grading with a random seed")
        self.log.info("trusted re-grade of %s/%s for %s", assignment, notebook, student)
        result = grade_notebook(nb, spec, seed=seed, student=student)
        for cell in nb.cells:
            gid = cell.metadata.get("nbgrader", {}).get("grade_id")
            if gid in result.scores and cell.metadata.get("nbgrader", {}).get("grade"):
                s = result.scores[gid]
                cell.outputs = [
                    new_output("stream", name="stdout", text=f"[trusted grader] {s.part}: {s.feedback}\n"),
                    new_output("execute_result", data={"text/plain": repr(float(s.points))}, execution_count=None),
                ]
        out = grading_dir() / "verdicts" / student / assignment / f"{Path(notebook).stem}.json"
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(result.as_dict(), indent=1))
        return nb, resources
