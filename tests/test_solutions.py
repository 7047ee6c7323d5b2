"""Every topic's solutions notebook and its known answers agree: the answer cell is correct.cu (less its header
comment and the nbgrader markers), the release stub is the answer cell with its solution regions replaced, every
quiz question's key is one of its choices, and the notebook is committed without outputs."""

import pytest

from autograder.answers import _source, cells_by_grade_id, read_literal
from autograder.quizzes import quiz_key
from autograder.grading import solution_notebook
from autograder.spec import all_specs
from autograder.known import known_dir

SLUGS = [s.slug for s in all_specs()
         if (known_dir(s.slug) / "correct.cu").exists() and (known_dir(s.slug) / "stub.py").exists()]


def _strip_markers(text: str) -> str:
    return "\n".join(ln for ln in text.splitlines() if not ln.strip().startswith("### ")).strip()


def test_the_new_topics_are_covered():
    assert {"tma", "swizzle", "warp_specialization", "multicast"} <= set(SLUGS)


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
        assert _strip_markers(ans.value) in (known_dir(slug) / "correct.cu").read_text()
        # the stub is the answer cell up to its first solution region, untouched
        assert cell.split("### BEGIN SOLUTION")[0].strip() in (known_dir(slug) / "stub.py").read_text()
    for q in spec.quiz.questions.values():
        assert quiz_key(_source(cells[q.grade_id]), spec.quiz.answer_var, q.name) in q.choices, q.name
