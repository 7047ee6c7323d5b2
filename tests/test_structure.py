"""tools/structure.py, the structure measures of issue 41's table, on trees made here with known answers."""

from __future__ import annotations

import sys
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tools"))
import structure  # noqa: E402


IMPORTS = {None: "    x = 0", "bare": "    import os", "commented": "    import os  # patched by the tests: bound late",
           "lazy": "    import torch", "lazy from": "    from matplotlib import pyplot"}


def _py_function(name: str, body_lines: int, nested_import: str | None = None) -> str:
    body = [IMPORTS[nested_import]] + [f"    x = {i}" for i in range(body_lines - 1)]
    return f"def {name}():\n" + "\n".join(body) + "\n"


@given(st.integers(1, 160), st.sampled_from(list(IMPORTS)))
@settings(max_examples=40, deadline=None)
def test_a_function_is_long_exactly_when_it_has_more_than_80_lines(tmp_path_factory, body, imp):
    """Long functions by their lines; imports inside functions counted, and those with no reason named: a comment on
    the line is one, a package of structure.LAZY is one (its reason written there once), a bare `import os` is none."""
    f = tmp_path_factory.mktemp("py") / "m.py"
    f.write_text("import json\n\n\n" + _py_function("f", body, imp) + "\n\nclass C:\n" +
                 "\n".join("    " + ln for ln in _py_function("g", 3, "bare").splitlines()) + "\n")
    long = dict(structure.long_functions(f))
    assert ("f" in long) == (body + 1 > 80) and (long.get("f") in (None, body + 1))
    assert "C.g" not in long
    count, bare = structure.nested_imports(f)
    assert count == 1 + (imp is not None)  # C.g's import and f's; the module's own import is not counted
    assert bare == ["m.py:5"] * (imp == "bare") + [f"m.py:{body + 9}"], bare  # and C.g's own, bare


def _cuda(name: str, lines: int) -> str:
    body = "\n".join(f"    int v{i} = {i}; // a {{ brace in a comment" for i in range(lines - 2))
    return f"__device__ __forceinline__ void {name}(const float* p,\n        int n) {{\n{body}\n}}\n"


@given(st.integers(3, 200), st.integers(3, 200))
@settings(max_examples=25, deadline=None)
def test_cuda_functions_are_measured_from_brace_to_brace_inside_namespaces(a, b):
    text = ('#include "x.cuh"\nnamespace attn {\n' + _cuda("body", a) + "}  // namespace\n"
            'extern "C" __global__ void __launch_bounds__(128) entry(float* o) {\n  if (o) { o[0] = 1.f; }\n}\n'
            "struct S { int a; };\n" + _cuda("other", b))
    got = dict(structure.cuda_functions(text, limit=120))
    assert got == {k: v for k, v in (("body", a), ("other", b)) if v > 120}
    assert dict(structure.cuda_functions(text, limit=1))["entry"] == 3


def test_the_measures_of_this_tree_name_the_places_a_day_lives():
    m = structure.measures()
    # a day is one folder (its spec and grading/ inside), its notebook where nbgrader wants it, its tests
    assert {"kernels/tma", "solutions"} <= set(m["places"]["tma"])
    assert not {"autograder/specs", "autograder/submissions", "autograder/assistant_answers"} & set(m["places"]["tma"])
    assert m["places_a_day_lives"] >= len(m["places"]["tma"])
    assert all(v > structure.MODULE_LINES for v in m["modules_over_500_lines"].values())


def test_no_python_function_over_80_lines_and_no_cuda_function_over_120():
    """The targets this tree meets, held: a function that grows past them fails here, named."""
    m = structure.measures()
    assert m["functions_over_80_lines"] == {}
    assert m["cuda_functions_over_120_lines"] == {}


def test_a_name_the_tests_patch_through_a_dotted_module_is_bound_late(tmp_path):
    """patched_names reads monkeypatch.setattr(kernels.runner, "time_exercise", ...) as (runner, time_exercise), as
    well as setattr(runner, ...): an in-function `from ..runner import time_exercise` has its reason."""
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_x.py").write_text(
        'monkeypatch.setattr(kernels.runner, "time_exercise", f)\nmonkeypatch.setattr(bench, "ceilings", g)\n')
    assert structure.patched_names(tmp_path) == {("runner", "time_exercise"), ("bench", "ceilings")}


def test_a_course_module_that_imports_a_heavy_package_makes_its_importers_reasoned(tmp_path):
    """_heavy_modules follows relative imports at any level (`from ..clock import x`, `from . import model`); an
    in-function import of a heavy course module has its reason, one of a light module has none (it belongs at the
    top: moving it there keeps its importer light)."""
    pkg = tmp_path / "kernels" / "gemm"
    pkg.mkdir(parents=True)
    (tmp_path / "kernels" / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (tmp_path / "kernels" / "clock.py").write_text("import torch\n")
    (pkg / "model.py").write_text("from ..clock import x\n")
    (pkg / "light.py").write_text("import json\n")
    (pkg / "user.py").write_text("def f():\n    from . import model\n\n\ndef g():\n    from .light import y\n")
    files = sorted(tmp_path.rglob("*.py"))
    heavy = structure._heavy_modules(files, tmp_path)
    assert heavy == {"kernels.clock", "kernels.gemm.model"}
    assert structure.nested_imports(pkg / "user.py", heavy, set(), tmp_path) == (2, ["user.py:6"])
