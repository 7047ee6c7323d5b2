"""Every topic's solutions notebook is the one place its exercise's given code lives: the course solution (known
answer "correct" / "solution") and the release's cell (known answer "stub") are read from it and from weeks/ (which
nbgrader generates from it), and no copy of either is kept beside the known answers. The answer cell is a complete,
attempted kernel; the release's cell keeps the given code up to the first solution region; every quiz question's key
is one of its choices; the notebook is committed without outputs."""

import pytest

from autograder.answers import _source, cells_by_grade_id, read_literal
from autograder.grading import solution_notebook
from autograder.known import answer_text, kernel_source, known_answer, known_answers, known_dir, release_cell
from autograder.quizzes import quiz_key
from autograder.release import ROOT
from autograder.spec import all_specs

SLUGS = [s.slug for s in all_specs()]


def test_the_given_code_is_stored_once():
    """No topic keeps a copy of its solution cell or its release cell beside its known answers (the old the course solution and
    stub.py), and every day's "stub" and "correct" read the notebooks."""
    copies = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "kernels").glob("*/grading/known/*")
                    if p.name in ("the course solution", "stub.py"))
    assert not copies, f"copies of the given code: {copies}"
    assert {"tma", "swizzle", "warp_specialization", "multicast", "gemm", "attention"} <= set(SLUGS)
    for slug in SLUGS:
        by = {ka.name: ka for ka in known_answers(slug)}
        assert by["stub"].source == "release"
        assert all(by[n].source == "solution" for n in ("correct", "solution") if n in by)


@pytest.mark.parametrize("slug", SLUGS)
def test_notebook_solution_is_the_correct_known_answer(slug):
    spec = next(s for s in all_specs() if s.slug == slug)
    nb = solution_notebook(spec)
    cells = cells_by_grade_id(nb)
    assert set(spec.grade_cells()) <= set(cells)
    assert all(not c.get("outputs") for c in nb["cells"] if c["cell_type"] == "code")
    for ex in spec.exercises.values():
        cell = _source(cells[ex.answer_cell])
        ans = read_literal(cell, ex.answer_var)
        assert ans.attempted and not ans.flags and ans.problem is None
        assert kernel_source(slug, "solution") == ans.value
        # the release's cell is the answer cell up to its first solution region, untouched, then the stub
        stub = release_cell(slug, ex.name)
        assert stub == answer_text(slug, known_answer(slug, "stub"))
        assert cell.split("### BEGIN SOLUTION")[0].strip() in stub and "### BEGIN SOLUTION" not in stub
        assert "raise NotImplementedError()" in stub
    for q in spec.quiz.questions.values():
        assert quiz_key(_source(cells[q.grade_id]), spec.quiz.answer_var, q.name) in q.choices, q.name


def test_known_dir_is_the_days_grading_folder():
    assert known_dir("tma") == ROOT / "kernels" / "tma" / "grading" / "known"


@pytest.mark.parametrize("slug", SLUGS)
def test_the_release_cell_is_what_make_weeks_wrote(slug):
    """known.release_cell (nbgrader's ClearSolutions on the solutions notebook's cell, the course's stub) is the cell
    weeks/ holds, as `nbgrader generate_assignment` wrote it."""
    import json

    spec = next(s for s in all_specs() if s.slug == slug)
    release = ROOT / "weeks" / spec.assignment / spec.notebook
    if not release.is_file():
        pytest.skip(f"weeks/{spec.assignment}/{spec.notebook} not generated")
    cells = cells_by_grade_id(json.loads(release.read_text()))
    for ex in spec.exercises.values():
        assert release_cell(slug, ex.name) == _source(cells[ex.answer_cell])
