"""The one reader of answer cells (autograder/answers.py): the forms a student writes are read as Python would run
them, anything else is refused in one line — and the notebook's own checks (autograder.check / grade / quiz) give
the verdict the gradebook gives, read from IPython's input history (a fake shell here)."""

from __future__ import annotations

import copy
import io
import json
import random
import sys
import types

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import autograder
from autograder import answers, quizzes, spec

ROOT = answers.__file__.rsplit("/autograder/", 1)[0]
SPEC = spec.load("naive_loads")
EX = SPEC.exercises["row_bias"]
STUB = "# YOUR CODE HERE\nraise NotImplementedError()\n"


def run(cell: str, var: str, ns: dict | None = None):
    """What the notebook's interpreter holds in `var` after running `cell` (nbgrader's stub raises: the value set
    above it stays, as in a notebook). `ns` stands in for names a refused form uses."""
    ns = {} if ns is None else ns
    try:
        exec(compile(cell, "<answer cell>", "exec"), ns)  # noqa: S102 (the test's own generated cells)
    except NotImplementedError:
        pass
    return ns.get(var)


# ------------------------------------------------------------------------------------------------ accepted forms
ACCEPTED = [
    ('QUIZ = {}  # your answers\nQUIZ["q1"] = "d"\nQUIZ["q2"] = "b"\n', "QUIZ"),
    ('QUIZ = {"q1": "a"}\nQUIZ["q1"] = "c"\n', "QUIZ"),  # the last one wins
    ('QUIZ = {}\nQUIZ.update({"q1": "a", "q2": "b"})\nQUIZ.update(q3="c")\nQUIZ.update({"q4": "d"}, q5="a")\n', "QUIZ"),
    ('QUIZ = {}\nQUIZ |= {"q1": "a"}\nQUIZ.setdefault("q2", "b")\ndel QUIZ["q1"]\n', "QUIZ"),
    ('QUIZ = {"q1": "a", "q1": "b"}\n', "QUIZ"),
    ('QUIZ = {}\nQUIZ["q1"] = "d"\n' + STUB, "QUIZ"),  # answered above the stub left in place
    ('X = "__global__ " + "void k() {}"\n', "X"),
    ('X = ("__global__ "\n     "void k()"  # implicit\n     + " {}")\n', "X"),
    ('X = r"""a\\b"""\nX += "c"\nX = X + "d"\n', "X"),
    ('X = "old"\nX = f"new" "er"\n', "X"),
    ('X: str = "typed"\n', "X"),
    ('A = X = "both"\n', "X"),
    ('import math\nX = "k"\nprint(len(X))\n', "X"),  # other code: flagged, never run
]


@pytest.mark.parametrize("cell, var", ACCEPTED)
def test_every_accepted_form_gives_the_value_python_gives(cell, var):
    ans = answers.read_answer(cell, var)
    assert ans.problem is None and ans.attempted, ans
    runtime = run(cell, var, {"print": lambda *a: None})
    assert ans.value == runtime and type(ans.value) is type(runtime)
    assert answers.answer_verdict(cell, var).graded


def test_the_quiz_in_item_lines_is_the_dict_a_student_meant():
    ans = answers.read_answer('QUIZ = {}  # your answers\nQUIZ["q1"] = "d"\nQUIZ["q2"] = "b"\n', "QUIZ")
    assert ans.value == {"q1": "d", "q2": "b"} and not ans.flags


# ------------------------------------------------------------------------------------------------- refused forms
REFUSED = [
    ('X = open("k.cu").read()\n', "X", "`open('k.cu').read()` is a call"),
    ('n = 4\nX = f"#define N {n}\\n" + "void k() {}"\n', "X", "f-string with {...} fields"),
    ('X = KERNEL\n', "X", "`KERNEL` is a variable"),
    ('X = "a"\nX = X.replace("a", "b")\n', "X", "is a call"),
    ('QUIZ["q1"] = "d"\n', "QUIZ", "start with QUIZ = {}"),
    ('QUIZ = {}\nfor q in ["q1"]:\n    QUIZ[q] = "d"\n', "QUIZ", "does not follow"),
    ('QUIZ = {}\nQUIZ["q1"] = answer\n', "QUIZ", "`answer` is a variable"),
    ('QUIZ = dict(q1="d")\n', "QUIZ", "is a call"),
    ('X = "k"\nX += 1\n', "X", "is not a + of strings"),
    ('QUIZ = {}\n' + STUB + 'QUIZ["q1"] = "d"\n', "QUIZ", "delete that line"),
    ("QUIZ = {'q1': 'd'\n", "QUIZ", "not valid Python"),
]


@pytest.mark.parametrize("cell, var, why", REFUSED)
def test_every_refused_form_says_why_in_one_line(cell, var, why):
    v = answers.answer_verdict(cell, var)
    assert not v.graded and v.value is None
    assert why in v.reason and "\n" not in v.reason, v.reason


def test_the_stub_left_alone_is_not_attempted_and_other_code_is_still_flagged():
    assert not answers.read_answer('QUIZ = {}  # your answers\n' + STUB, "QUIZ").attempted
    assert not answers.read_answer('X = r"""\n__global__ void k() {\n' + STUB + '}\n"""\n', "X").attempted
    ans = answers.read_answer('X = "k"\ns = torch.cuda.Stream()\n', "X")
    assert ans.value == "k" and {f.split(":")[0] for f in ans.flags} == {"side-stream", "torch-instead-of-kernel"}


@pytest.mark.parametrize("raw, var, value", [
    ('%matplotlib inline\nQUIZ = {}\nQUIZ["q1"] = "d"\n', "QUIZ", {"q1": "d"}),
    ('X = """\n!ready\n% 8;\n"""\n', "X", "\n!ready\n% 8;\n"),  # lines of a string that start with ! or %: text
    ('!ls\nX = "k"\n', "X", "k"),
    ('%%capture\nX = "k"\n', "X", None),  # the body runs under the magic: not read
    ('%time X = "k"\n', "X", None),
])
def test_a_cell_with_ipython_syntax_is_read_as_ipython_runs_it_alike_in_the_notebook(raw, var, value):
    """The gradebook reads the saved cell, the notebook's check the history entry IPython made of it (magics as
    calls): both give the same verdict."""
    from IPython.core.inputtransformer2 import TransformerManager

    gradebook = answers.answer_verdict(raw, var)
    assert gradebook.value == value and gradebook.graded == (value is not None), gradebook
    runtime = value if value is not None else "k"  # what IPython leaves in X
    assert answers.local_verdict(var, runtime, ["", TransformerManager().transform_cell(raw)]) == gradebook
    if value is None:
        assert "under the IPython magic %" in gradebook.reason, gradebook.reason


def test_a_string_cannot_grow_without_bound():
    cell = 'X = "' + "a" * 1000 + '"\n' + "X += X\n" * 20
    v = answers.answer_verdict(cell, "X")
    assert not v.graded and "longer than" in v.reason
    assert answers.answer_verdict('X = "' + "a" * 1000 + '"\n' + "X += X\n" * 5, "X").value == "a" * 32000


# ---------------------------------------------------------------------- the notebook's checks: a fake IPython shell
@pytest.fixture
def notebook(monkeypatch):
    """A fake IPython whose shell has the input history `In` the test fills (In[0] is '' as in IPython)."""
    history = [""]
    shell = types.SimpleNamespace(user_ns={"In": history})
    monkeypatch.setitem(sys.modules, "IPython", types.SimpleNamespace(get_ipython=lambda: shell))
    return history


def _run_cells(history: list, *cells: str, var: str):
    """Run cells as a notebook would (each appended to In before it runs); the answer variable's value after."""
    ns: dict = {"open": lambda *a: io.StringIO("from a file"),
                "autograder": types.SimpleNamespace(check=lambda *a: None, quiz=lambda *a: None)}
    for cell in cells:
        history.append(cell)
        run(cell, var, ns)
    return ns.get(var)


def test_local_quiz_says_not_graded_for_a_form_the_grader_drops(notebook, capsys):
    cell = 'QUIZ = {}\nfor q, a in [("q1", "d")]:\n    QUIZ[q] = a\n'
    quiz = _run_cells(notebook, cell, 'autograder.quiz("naive_loads", "q1", QUIZ)', var="QUIZ")
    assert quiz == {"q1": "d"}  # the notebook holds the answer ...
    autograder.quiz("naive_loads", "q1", quiz)
    out = capsys.readouterr().out
    assert "this will not be graded" in out and "does not follow" in out and "recorded" not in out, out
    # ... which the gradebook does not read, for the same reason
    assert answers.answer_verdict(cell, "QUIZ").reason in out


def test_local_quiz_records_what_the_grader_reads(notebook, capsys):
    cell = 'QUIZ = {}  # your answers\nQUIZ["q2"] = "c"\nQUIZ["q1"] = "d"\n'
    quiz = _run_cells(notebook, cell, var="QUIZ")
    autograder.quiz("naive_loads", "q1", quiz)
    assert capsys.readouterr().out.strip() == "q1: answer 'd' recorded"
    gradebook = answers.answer_verdict(cell, "QUIZ")
    assert gradebook == answers.local_verdict("QUIZ", quiz, notebook) == answers.Verdict(quiz)
    # changed afterwards by a cell that does not set QUIZ by name: the grader still reads "d" and the check says so
    quiz["q1"] = "b"
    autograder.quiz("naive_loads", "q1", quiz)
    out = capsys.readouterr().out
    assert "will not be graded as 'b': the grader will read 'd'" in out and "answer 'd' recorded" in out, out
    assert "answer 'b' recorded" not in out


def test_outside_ipython_the_runtime_value_is_checked(monkeypatch, capsys):
    monkeypatch.delitem(sys.modules, "IPython", raising=False)
    autograder.quiz("naive_loads", "q1", {"q1": "d"})
    assert capsys.readouterr().out.strip() == "q1: answer 'd' recorded"
    assert answers.local_verdict("QUIZ", {"q1": "d"}, None) == answers.Verdict({"q1": "d"})


def test_local_check_and_grade_say_not_graded_for_a_kernel_read_from_a_file(notebook, monkeypatch, capsys):
    seen = []
    monkeypatch.setattr("autograder.harness.run_exercise",
                        lambda slug, ex, src, **kw: seen.append(src) or {"status": "error", "error": "no harness"})
    cell = 'ROW_BIAS_CU = open("row_bias.cu").read()\n'
    kernel = _run_cells(notebook, cell, var="ROW_BIAS_CU")
    autograder.check("naive_loads", "row_bias", kernel)
    out = capsys.readouterr().out
    first = out.splitlines()[0]
    assert first.startswith("ROW_BIAS_CU (cell In[1]): this will not be graded: line 1: `open('row_bias.cu').read()`"
                            " is a call"), out
    assert seen == ["from a file"]  # the kernel's own verdict is still shown
    # a grade cell gives what the gradebook gives a cell it cannot read: 0, and the line that says why
    assert autograder.grade("naive_loads", "row_bias", "correctness", kernel) == 0.0
    out = capsys.readouterr().out
    assert "this will not be graded" in out and "correctness: 0/3" in out and seen == ["from a file"], out


def test_local_check_reads_the_newest_cell_that_sets_the_answer(notebook, monkeypatch, capsys):
    seen = []
    monkeypatch.setattr("autograder.harness.run_exercise",
                        lambda slug, ex, src, **kw: seen.append(src) or {"status": "error", "error": "no harness"})
    kernel = _run_cells(notebook, 'ROW_BIAS_CU = "old"\n', 'ROW_BIAS_CU = ("new" +\n  " kernel")\n',
                        'report = autograder.check("naive_loads", "row_bias", ROW_BIAS_CU)\n', var="ROW_BIAS_CU")
    autograder.check("naive_loads", "row_bias", kernel)
    assert "will not be graded" not in capsys.readouterr().out and seen == ["new kernel"]
    assert answers.latest_answer_cell(notebook, "ROW_BIAS_CU") == (2, notebook[2])


# ------------------------------------------------------------------- the gradebook: the release notebook, answered
def _release_notebook() -> dict:
    with open(f"{ROOT}/weeks/{SPEC.assignment}/{SPEC.notebook}") as f:
        return json.load(f)


def _keys() -> dict[str, str]:
    from autograder.grading import solution_notebook

    cells = answers.cells_by_grade_id(solution_notebook(SPEC))
    return {q.name: quizzes.quiz_key(answers._source(cells[q.grade_id]), "QUIZ", q.name)
            for q in SPEC.quiz.questions.values()}


@pytest.mark.parametrize("stub_kept", [False, True])
def test_a_quiz_answered_in_item_lines_gets_full_marks_in_the_gradebook(stub_kept):
    """The release's quiz cell `QUIZ = {}` with `QUIZ["q1"] = "d"` lines below it (in any order, the stub deleted or
    left below them) scores every question, through grade_notebook — as the one dict literal does."""
    from autograder.grading import grade_notebook

    nb = _release_notebook()
    cell = answers.cells_by_grade_id(nb)[SPEC.quiz.answer_cell]
    first = answers._source(cell).splitlines()[0]
    assert first.startswith("QUIZ = {}")  # the line the release gives
    lines = [f'QUIZ["{q}"] = "{key}"' for q, key in _keys().items()]
    random.shuffle(lines)
    cell["source"] = "\n".join([first, *lines]) + "\n" + (STUB if stub_kept else "")
    result = grade_notebook(copy.deepcopy(nb), SPEC, seed=1, gpu=False, with_reference=False)
    quiz = [result.scores[q.grade_id] for q in SPEC.quiz.questions.values()]
    assert [s.points for s in quiz] == [s.max_points for s in quiz], [s.feedback for s in quiz]
    assert not any(f.startswith("quiz:") for f in result.flags), result.flags


def test_a_refused_quiz_cell_says_why_in_the_gradebook():
    from autograder.grading import grade_notebook

    nb = _release_notebook()
    cell = answers.cells_by_grade_id(nb)[SPEC.quiz.answer_cell]
    cell["source"] = 'QUIZ = {}\nfor q in ["q1", "q2"]:\n    QUIZ[q] = "d"\n'
    result = grade_notebook(nb, SPEC, seed=1, gpu=False, with_reference=False)
    q1 = result.scores[SPEC.quiz.questions["q1"].grade_id]
    why = answers.answer_verdict(answers._source(cell), "QUIZ").reason
    assert q1.points == 0 and q1.feedback == f"not graded: {why}"


# ------------------------------------------------------------------------ every form, generated: as Python runs it
_QUESTION = st.from_regex(r"q[0-9]{1,2}", fullmatch=True)
_LETTER = st.sampled_from("abcdABCD")
# A refused statement, as a student might write it (each needs a name the fake notebook namespace gives).
_REFUSED_QUIZ = ['QUIZ["{q}"] = pick("{a}")', 'QUIZ.update(dict({q}="{a}"))', 'QUIZ = {{**QUIZ, "{q}": "{a}"}}',
                 'for _q in ["{q}"]:\n    QUIZ[_q] = "{a}"']
_REFUSED_TEXT = ['X += open("k.cu").read()', 'X = X.replace("a", "b")', 'X += f"{{n}}"', "X = kernel_text"]


def _quiz_statement(draw, q: str, a: str) -> str:
    form = draw(st.sampled_from(["item", "update_dict", "update_kw", "or", "reassign", "setdefault", "aug_item"]))
    return {"item": f'QUIZ["{q}"] = "{a}"', "update_dict": f'QUIZ.update({{"{q}": "{a}"}})',
            "update_kw": f'QUIZ.update({q}="{a}")', "or": f'QUIZ |= {{"{q}": "{a}"}}',
            "reassign": f'QUIZ["{q}"] = "x"\nQUIZ["{q}"] = "{a}"', "setdefault": f'QUIZ.setdefault("{q}", "{a}")',
            "aug_item": f'QUIZ["{q}"] = ""\nQUIZ["{q}"] += "{a}"'}[form]


@st.composite
def quiz_cells(draw) -> str:
    answers_ = draw(st.dictionaries(_QUESTION, _LETTER, min_size=1, max_size=6))
    start = draw(st.sampled_from(["QUIZ = {}  # your answers", "QUIZ = {}", 'QUIZ = {"q1": "a"}']))
    lines = [start] + [_quiz_statement(draw, q, a) for q, a in answers_.items()]
    lines[1:] = draw(st.permutations(lines[1:]))
    return _mixed(draw, lines, _REFUSED_QUIZ, next(iter(answers_)), answers_[next(iter(answers_))])


@st.composite
def text_cells(draw) -> str:
    text = draw(st.text(st.sampled_from("abc_{}();*#<> \n\t\\'\""), min_size=1, max_size=60))
    cuts = sorted(draw(st.lists(st.integers(0, len(text)), max_size=4)))
    pieces = [text[i:j] for i, j in zip([0, *cuts], [*cuts, len(text)])]
    literals = [repr(p) for p in pieces]
    form = draw(st.sampled_from(["plus", "implicit", "parenthesised", "augmented", "self_plus"]))
    if form in ("plus", "implicit", "parenthesised"):
        sep = {"plus": " + ", "implicit": " ", "parenthesised": "\n    + "}[form]
        body = sep.join(literals)
        lines = [f"X = ({body})" if form == "parenthesised" else f"X = {body}"]
    else:
        lines = [f"X = {literals[0]}"] + [f"X += {lit}" if form == "augmented" else f"X = X + {lit}"
                                          for lit in literals[1:]]
    if draw(st.booleans()):
        lines.insert(0, 'X = "an earlier draft"')  # re-assignment: the last one wins
    return _mixed(draw, lines, _REFUSED_TEXT, "q1", "a")


def _mixed(draw, lines: list[str], refused: list[str], q: str, a: str) -> str:
    """Maybe a refused statement somewhere after the first line, other code, the stub somewhere."""
    if draw(st.booleans()):
        lines.insert(draw(st.integers(1, len(lines))), draw(st.sampled_from(refused)).format(q=q, a=a))
    if draw(st.booleans()):
        lines.insert(draw(st.integers(0, len(lines))), draw(st.sampled_from(["import math", "len([])", "# note"])))
    if draw(st.booleans()):
        lines.insert(draw(st.integers(0, len(lines))), "# YOUR CODE HERE\nraise NotImplementedError()")
    return "\n".join(lines) + "\n"


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cell_var=st.one_of(quiz_cells().map(lambda c: (c, "QUIZ")), text_cells().map(lambda c: (c, "X"))))
def test_generated_cells_read_as_python_runs_them_and_alike_locally(cell_var):
    cell, var = cell_var
    ns = {"pick": str, "kernel_text": "k", "n": 3, "open": lambda *a: io.StringIO("from a file")}
    runtime = run(cell, var, ns)
    ans = answers.read_answer(cell, var)
    if ans.problem is None and ans.value is not None:
        assert ans.value == runtime and type(ans.value) is type(runtime), (cell, ans.value, runtime)
    else:
        assert ans.problem is None or "\n" not in ans.problem
    # the notebook's check gives the gradebook's verdict for the same cell
    local = answers.local_verdict(var, runtime, ["", cell, f"autograder.check('s', 'e', {var})"])
    assert local == answers.answer_verdict(cell, var) == ans.verdict(), (cell, local)
