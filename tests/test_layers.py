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
            if "submissions" in rel.parts or p.name.startswith("test_"):
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


def test_no_import_circle():
    assert _cycle(import_graph()) is None, f"import circle: {' -> '.join(_cycle(import_graph()))}"


def test_the_checks_can_fail():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None
