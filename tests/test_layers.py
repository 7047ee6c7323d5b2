"""The layers point one way: kernels/ (the library) <- autograder/ (the grader) <- notebooks. Read from the code's own
import statements (module-level and inside functions alike): no module of kernels/ imports autograder/, and no
modules import each other in a circle."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _modules() -> dict[str, Path]:
    mods = {}
    for pkg in ("kernels", "autograder"):
        for p in (ROOT / pkg).rglob("*.py"):
            rel = p.relative_to(ROOT)
            if "grading" in rel.parts or p.name.startswith("test_"):
                continue
            name = ".".join(rel.with_suffix("").parts)
            mods[name.removesuffix(".__init__")] = p
    return mods


def import_graph() -> dict[str, set[str]]:
    mods = _modules()
    graph = {}
    for name, path in mods.items():
        pkg = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
        out = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    parts = pkg.split(".")
                    base = ".".join(parts[:len(parts) - (node.level - 1)] + ([node.module] if node.module else []))
                else:
                    base = node.module or ""
                cands = [base] + [f"{base}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                cands = [a.name for a in node.names]
            else:
                continue
            out |= {c for c in cands if c in mods and c != name}
        graph[name] = out
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(n):
        state[n] = 1
        stack.append(n)
        for m in sorted(graph[n]):
            if state.get(m) == 1:
                return stack[stack.index(m):] + [m]
            if m not in state:
                found = visit(m)
                if found:
                    return found
        state[n] = 2
        stack.pop()
        return None

    for n in sorted(graph):
        if n not in state:
            found = visit(n)
            if found:
                return found
    return None


def test_the_library_never_imports_the_grader():
    graph = import_graph()
    assert "kernels.bench" in graph and "autograder.harness" in graph  # the walk sees both packages
    bad = sorted((a, b) for a, bs in graph.items() for b in bs if a.startswith("kernels") and b.startswith("autograder"))
    assert not bad, f"kernels -> autograder imports: {bad}"


def _docstrings(tree) -> set[int]:
    return {id(n.body[0].value) for n in ast.walk(tree)
            if isinstance(n, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and n.body
            and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)
            and isinstance(n.body[0].value.value, str)}


def grader_paths(source: str) -> list[tuple[int, str]]:
    """(line, text) of every string in `source` (docstrings aside) that names a path into the grader's folder:
    "autograder/..." or the path segment "autograder" (a Path / "autograder" / "specs" join), and every
    importlib.import_module / __import__ call whose module the code does not name literally (a module name read from
    data hides an import from the graph above)."""
    tree = ast.parse(source)
    docs = _docstrings(tree)
    out = []
    for n in ast.walk(tree):
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs:
            if "autograder/" in n.value or n.value.strip() == "autograder":
                out.append((n.lineno, n.value))
        elif isinstance(n, ast.Call):
            fn = n.func.attr if isinstance(n.func, ast.Attribute) else getattr(n.func, "id", "")
            if fn in ("import_module", "__import__") and not (n.args and isinstance(n.args[0], ast.Constant)):
                out.append((n.lineno, f"{fn}(<a name read at run time>)"))
    return out


def test_the_library_names_no_path_into_the_grader():
    """kernels/ reads no grading data (specs, known answers) by path, and imports nothing by a name it read: what the
    grader hands a benchmark comes as arguments (kernels.topic.Answers, from autograder.benchmarks)."""
    bad = {str(p.relative_to(ROOT)): found for p in (ROOT / "kernels").rglob("*.py") if "grading" not in p.parts
           if (found := grader_paths(p.read_text()))}
    assert not bad, f"kernels/ reaches into autograder/ or imports by a name read at run time: {bad}"


def test_the_path_check_can_fail():
    src = ('"""Reads autograder/specs (a docstring may say so)."""\nfrom pathlib import Path\nimport importlib\n'
           'A = Path(__file__).parents[1] / "autograder" / "specs"\nB = "autograder/submissions/x/correct.cu"\n'
           'def f(name):\n    """autograder/ in a docstring."""\n    return importlib.import_module(name)\n'
           'C = importlib.import_module("kernels.bench")\n')
    assert sorted(line for line, _ in grader_paths(src)) == [4, 5, 8]


def test_no_import_circle():
    assert _cycle(import_graph()) is None, f"import circle: {' -> '.join(_cycle(import_graph()))}"


def test_the_checks_can_fail():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None


TOPICS = {p.parent.name for p in (ROOT / "kernels").glob("*/bench.py")}
# A topic may import another topic only to borrow a taught idea — its model (a fitted constant, a rule) — never
# machinery (a launcher, a cache, an exercise). The one exception, and why.
BORROWED_KERNELS = {("kernels.tma.bench", "kernels.naive_loads.launch"): "day 5's table times day 1's copy beside TMA",
                    ("kernels.stream_k.sweep", "kernels.gemm.launch"): "week 3 day 2's sweep times week 2's capstone "
                                                                       "beside split-K: where each rung wins"}


def test_a_topic_borrows_only_another_topics_model():
    graph = import_graph()
    crossing = sorted((a, b) for a, outs in graph.items() for b in outs
                      if a.split(".")[:2] != b.split(".")[:2] and len(a.split(".")) > 2 and len(b.split(".")) > 2
                      and a.split(".")[1] in TOPICS and b.split(".")[1] in TOPICS)
    assert crossing, "the check must see the topics' imports"
    machinery = [(a, b) for a, b in crossing if b.rsplit(".", 1)[1] != "model" and (a, b) not in BORROWED_KERNELS]
    assert not machinery, f"topic -> topic machinery imports: {machinery}"


def test_the_tensor_map_cache_lives_in_kernels_tensormap():
    """One descriptor cache (kernels.tensormap.cached_tensor_map): no other module keeps a map cache or builds the
    maps a launcher passes itself."""
    for p in (ROOT / "kernels").rglob("*.py"):
        if p.name == "tensormap.py":
            continue
        tree = ast.parse(p.read_text())
        names = {t.id for n in ast.walk(tree) if isinstance(n, (ast.Assign, ast.AnnAssign))
                 for t in (n.targets if isinstance(n, ast.Assign) else [n.target]) if isinstance(t, ast.Name)}
        assert "_MAPS" not in names, f"{p.relative_to(ROOT)} keeps its own tensor-map cache"
    from kernels import tensormap

    assert callable(tensormap.cached_tensor_map) and tensormap._MAX_MAPS >= 1


def test_the_readme_map_names_every_folder_and_its_machinery_exists():
    """README's Layout names every top-level folder the repository tracks and every kernels/ folder (a topic through
    `kernels/<slug>/`, which must then hold a bench.py); every `kernels.<module>.<name>` the README calls machinery
    exists."""
    import importlib
    import re
    import subprocess

    readme = (ROOT / "README.md").read_text()
    layout = readme.split("## Layout", 1)[1].split("\n## ", 1)[0]
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True).stdout.split()
    if not tracked:
        import pytest

        pytest.skip("not a git checkout")
    tops = {t.split("/")[0] for t in tracked if "/" in t}
    missing = sorted(t for t in tops if not re.search(rf"(^|\s){re.escape(t)}/", layout))
    assert not missing, f"folders the README's Layout does not name: {missing}"
    for d in {t.split("/")[1] for t in tracked if t.startswith("kernels/") and t.count("/") >= 2}:
        assert f"kernels/{d}/" in layout or (ROOT / "kernels" / d / "bench.py").exists(), d
    names = set(re.findall(r"`(kernels\.[a-z_]+(?:\.[a-z_]+)?)`", readme))
    assert len(names) >= 8, names
    for name in sorted(names):
        mod, _, attr = name.rpartition(".")
        try:
            importlib.import_module(name)
        except ModuleNotFoundError:
            assert hasattr(importlib.import_module(mod), attr), f"README names {name}, which does not exist"


def test_one_finder_for_the_cuda_tools(tmp_path, monkeypatch):
    """kernels.paths.cuda_tool is the one place that looks for nvdisasm, cuobjdump, ncu and compute-sanitizer: an
    environment variable that names a file wins; one that names nothing is passed over; a tool found nowhere is None."""
    from kernels.paths import cuda_tool

    exe = tmp_path / "compute-sanitizer"
    exe.write_text("#!/bin/sh\n")
    monkeypatch.setenv("COMPUTE_SANITIZER", str(exe))
    assert cuda_tool("compute-sanitizer", env="COMPUTE_SANITIZER") == str(exe)
    monkeypatch.setenv("COMPUTE_SANITIZER", str(tmp_path / "missing"))
    assert cuda_tool("compute-sanitizer", env="COMPUTE_SANITIZER") != str(tmp_path / "missing")
    assert cuda_tool("no-such-course-tool") is None
    for path in ("kernels/sass.py", "kernels/ncu.py", "kernels/pipeline/model.py", "autograder/sanitizer.py"):
        text = (ROOT / path).read_text()
        assert "cuda_tool(" in text and "/usr/local/cuda/bin/" not in text, path


def test_the_readme_map_names_every_module_of_the_library_and_the_grader():
    """README's "How the pieces fit" diagram: every module of kernels/ in the library's block and every module of
    autograder/ in the grader's, by name (a module added without a word in the map fails here)."""
    import re

    text = (ROOT / "README.md").read_text()
    section = text[text.index("## How the pieces fit"):]
    section = section[:section.index("\n## ", 5)]
    lib = section[section.index("    kernels/            the library"):section.index("├── kernels/<slug>/")]
    grader = section[section.index("    autograder/         the grader"):section.index("    solutions/ → weeks/")]
    for block, pkg in ((lib, "kernels"), (grader, "autograder")):
        words = set(re.findall(r"[a-z_]+", block))
        missing = [p.stem for p in sorted((ROOT / pkg).glob("*.py")) if p.stem != "__init__" and p.stem not in words]
        assert not missing, f"README's map of {pkg}/ does not name {missing}"
