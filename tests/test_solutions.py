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


@pytest.mark.parametrize("nb", sorted(str(p.relative_to(ROOT)) for p in (ROOT / "solutions").glob("week*/day*.ipynb")))
def test_every_library_name_a_notebook_calls_exists_also_in_its_gpu_only_branches(nb):
    """A notebook's code on a Hopper runs branches CPU execution never reaches (under requires_hopper): every
    `module.name` it reads off a course module (`from kernels.x import m`, `import kernels.x`) must exist, or the
    GPU run fails where no CPU test looks (week 2 day 4 once called a bench.rung6 that had moved to kernels.gemm.rung6)."""
    import ast
    import importlib

    import nbformat

    cells = nbformat.read(str(ROOT / nb), as_version=4).cells
    code = "\n".join("\n".join(line for line in c.source.splitlines() if not line.lstrip().startswith(("%", "!")))
                     for c in cells if c.cell_type == "code")
    tree = ast.parse(code)
    modules = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in ("kernels", "autograder"):
            for a in node.names:
                try:
                    modules[a.asname or a.name] = importlib.import_module(f"{node.module}.{a.name}")
                except ImportError:  # a function or a constant, not a module
                    pass
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] in ("kernels", "autograder"):
                    mod = importlib.import_module(a.name)
                    modules[a.asname] = mod if a.asname else None
                    modules.setdefault(a.name.split(".")[0], importlib.import_module(a.name.split(".")[0]))

    def chain(n):  # Attribute(Attribute(Name a, b), c) -> ["a", "b", "c"]
        return chain(n.value) + [n.attr] if isinstance(n, ast.Attribute) else [n.id] if isinstance(n, ast.Name) else []

    missing, seen = set(), 0
    for n in ast.walk(tree):
        if not isinstance(n, ast.Attribute):
            continue
        names = chain(n)
        if not names or modules.get(names[0]) is None:
            continue
        obj = modules[names[0]]
        for k, attr in enumerate(names[1:], 1):
            if not hasattr(obj, attr):
                try:  # a submodule imported elsewhere in the notebook (import kernels.record)
                    obj = importlib.import_module(".".join([obj.__name__, attr]))
                except (ImportError, AttributeError):
                    missing.add(".".join(names[:k + 1]))
                    break
            else:
                obj = getattr(obj, attr)
            seen += 1
            if not hasattr(obj, "__path__") and not type(obj).__name__ == "module":
                break  # past the modules: a class or a function's attributes are its own business
    assert seen and not missing, sorted(missing)
