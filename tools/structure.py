"""The structure measures of the course's tree (issue 41's table), read from the files as they are:

    .venv/bin/python tools/structure.py [--json]

- places a day lives: the top-level places holding a file or folder named after the day's slug (kernels/<slug>/,
  kernels/<slug>/spec.toml, kernels/<slug>/grading/known/, solutions/<week>/dayN_<slug>.ipynb, tests/...);
- Python modules over 500 lines, functions over 80 lines (kernels/, autograder/, tools/);
- CUDA functions over 120 lines (kernels/**/*.cu, *.cuh outside grading/: a definition's body from its opening brace to its match);
- imports inside a function (a module's imports belong at its top unless a reason is written beside one: a comment
  on its line, LAZY's reason for the package it loads, directly or through a course module that imports it, or a
  name the tests patch, bound late so that the replacement runs).

Duplicate pairs are the `duplicates` tool's (not counted here). Nothing is written; it reads the tree as text.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("kernels", "autograder", "tools")
MODULE_LINES, FUNCTION_LINES, CUDA_LINES = 500, 80, 120


def python_files(root: Path) -> list[Path]:
    """The course's Python modules (a day's grading/ folder holds answers written as cells, not modules)."""
    return sorted(p for pkg in PACKAGES for p in (root / pkg).rglob("*.py")
                  if "__pycache__" not in p.parts and "grading" not in p.parts)


def long_functions(path: Path, limit: int = FUNCTION_LINES) -> list[tuple[str, int]]:
    """(qualified name, lines) of each function or method of `path` longer than `limit` lines."""
    out = []

    def walk(node, prefix=""):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = prefix + child.name
                if not isinstance(child, ast.ClassDef):
                    n = child.end_lineno - child.lineno + 1
                    if n > limit:
                        out.append((name, n))
                walk(child, name + ".")

    walk(ast.parse(path.read_text()))
    return out


# The reasons an import is written inside a function, each written once, here. An import of one of these packages —
# or of a course module that imports one at its top — is late on purpose: the course's CLI, CPU grading and a
# student's notebook start without them, and a grading child that never plots or launches never loads them.
LAZY = {
    "torch": "a second of import, and the CUDA runtime: only where a tensor or the GPU is used",
    "triton": "imports torch, and compiles: only the Triton topics' launchers",
    "matplotlib": "half a second of import: only where a picture is drawn",
    "cuda": "cuda.core / cuda.bindings load the driver: only where a kernel is compiled or launched",
    "nbgrader": "imports Jupyter's stack (traitlets, nbconvert, sqlalchemy): only the grading commands",
    "nbconvert": "Jupyter's stack: only where a notebook is executed or exported",
    "nbformat": "Jupyter's stack: only where a notebook is read or written",
    "numpy": "imported with torch where a kernel's arguments are made",
    "hypothesis": "the tests' generator: only the checks that draw inputs",
    "cupti": "CUPTI loads the profiler's libraries: only the counted launches",
    "sqlalchemy": "nbgrader's database layer: only the gradebook's commands",
    "IPython": "present only inside a notebook's kernel",
    "jupyter_core": "Jupyter's stack: only the nbgrader plugin's commands",
    "tqdm": "a progress bar: only the long commands that show one",
    "pynvml": "NVML loads the driver's library: only where the GPU's clocks are read",
    "fcntl": "POSIX only: the lock is taken where it is used",
}
# A name the tests replace (monkeypatch.setattr(module, "name", ...)) is imported where it is called: bound late, so
# the replacement is what runs.
_PATCHED = re.compile(r'setattr\(\s*(?:[\w.]+\.)?(\w+)\s*,\s*"(\w+)"')


def patched_names(root: Path) -> set[tuple[str, str]]:
    """(module's last name, attribute) of every monkeypatch.setattr(module, "attr", ...) in the tests (a dotted
    module, kernels.runner, by its last name)."""
    return {m.groups() for p in (root / "tests").glob("*.py") for m in _PATCHED.finditer(p.read_text())}


def _modules_of(node, modname: str, is_package: bool) -> list[str]:
    """The absolute names an import statement may load: the module, and for a from-import each `module.name` (a name
    may be a submodule: `from . import model`). modname: the importing module's own dotted name."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    if node.level:
        base = modname.split(".") if is_package else modname.split(".")[:-1]
        base = base[:len(base) - (node.level - 1)]
        mod = ".".join(base + ([node.module] if node.module else []))
    else:
        mod = node.module or ""
    return [mod] + [f"{mod}.{a.name}" for a in node.names]


def _name(path: Path, root: Path) -> tuple[str, bool]:
    rel = path.relative_to(root).with_suffix("")
    return (".".join(rel.parts[:-1]), True) if rel.name == "__init__" else (".".join(rel.parts), False)


def _heavy_modules(files: list[Path], root: Path) -> set[str]:
    """The course modules that import a LAZY package at their top, directly or through another such course module."""
    tops = {}
    for p in files:
        n, pkg = _name(p, root)
        tops[n] = {m for node in ast.parse(p.read_text()).body if isinstance(node, (ast.Import, ast.ImportFrom))
                   for m in _modules_of(node, n, pkg)}
    heavy = {n for n, ms in tops.items() if any(m.split(".")[0] in LAZY for m in ms)}
    while True:
        more = {n for n, ms in tops.items() if n not in heavy and ms & heavy}
        if not more:
            return heavy
        heavy |= more


def nested_imports(path: Path, heavy: set[str] | None = None, patched: set[tuple[str, str]] | None = None,
                   root: Path | None = None) -> tuple[int, list[str]]:
    """Imports inside a function body of `path` (at any depth, each counted once), and those with no reason: not of a
    LAZY package, not of a course module in `heavy`, not of a name the tests patch (`patched`), and with no comment on
    their line."""
    count, bare = 0, []
    lines = path.read_text().splitlines()
    modname, is_package = _name(path, root or path.parent)

    def reasoned(node) -> bool:
        mods = _modules_of(node, modname, is_package)
        if isinstance(node, ast.Import):
            if all(m.split(".")[0] in LAZY or m in (heavy or ()) for m in mods):
                return True
        elif mods[0].split(".")[0] in LAZY or any(m in (heavy or ()) for m in mods):
            return True
        if isinstance(node, ast.ImportFrom) and any((mods[0].rsplit(".", 1)[-1], a.name) in (patched or ())
                                                    or (a.name, "") in (patched or ()) for a in node.names):
            return True
        return any("#" in lines[i] for i in range(node.lineno - 1, node.end_lineno))

    def walk(node, in_function: bool) -> None:
        nonlocal count
        for child in ast.iter_child_nodes(node):
            if in_function and isinstance(child, (ast.Import, ast.ImportFrom)):
                count += 1
                if not reasoned(child):
                    bare.append(f"{path.name}:{child.lineno}")
            walk(child, in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)))

    walk(ast.parse(path.read_text()), False)
    return count, bare


_SIGNATURE = re.compile(r"\)\s*(const\s*)?(noexcept\s*)?(->\s*[\w:<>, ]+\s*)?$")


def cuda_functions(text: str, limit: int = CUDA_LINES) -> list[tuple[str, int]]:
    """(name, lines) of each CUDA function definition of `text` longer than `limit` lines: a top-level brace whose
    text before it ends like a signature (`... name(args)`), measured to its matching brace (comments and strings
    blanked first)."""
    clean = re.sub(r"//[^\n]*|/\*.*?\*/", lambda m: re.sub(r"[^\n]", " ", m.group(0)), text, flags=re.S)
    clean = re.sub(r'"(\\.|[^"\\\n])*"', lambda m: " " * len(m.group(0)), clean)
    out, stack, start, fname = [], [], None, "?"
    for i, ch in enumerate(clean):
        if ch == "{":
            head = clean[max(0, i - 400):i].rstrip()
            if re.search(r"(\bnamespace(\s+\w+)?|\bextern)\s*$", head):
                stack.append("scope")  # namespace or extern "C" block: its functions are top level
                continue
            if all(k == "scope" for k in stack) and _SIGNATURE.search(head):
                start, names = i, re.findall(r"(\w+)\s*\(", head)
                fname = names[-1] if names else "?"
                stack.append("function")
            else:
                stack.append("block")
        elif ch == "}" and stack:
            kind = stack.pop()
            if kind == "function" and start is not None:
                n = clean.count("\n", start, i) + 1
                if n > limit:
                    out.append((fname, n))
                start = None
    return out


SKIP_TOP = (".venv", "build", ".git", "weeks")  # not the course's sources (weeks/ is generated from solutions/)


def day_places(root: Path) -> dict[str, list[str]]:
    """{slug: the top-level places that hold a file or folder named after it}: one walk of the tree (the folders of
    SKIP_TOP and every __pycache__ left out), each name matched against every slug."""
    slugs = sorted(p.parent.name for p in (root / "kernels").glob("*/spec.toml"))
    named = {slug: re.compile(rf"(^|[^a-z]){slug}([^a-z]|$)") for slug in slugs}
    out: dict[str, set] = {slug: set() for slug in slugs}
    for folder, dirs, files in os.walk(root):
        here = Path(folder).relative_to(root)
        dirs[:] = [d for d in dirs if d != "__pycache__" and not (here == Path(".") and d in SKIP_TOP)]
        for name in dirs + files:
            rel = here / name
            for slug, pat in named.items():
                if pat.search(name):
                    out[slug].add(_place(rel, slug))
    return {slug: sorted(v) for slug, v in out.items()}


def _place(rel: Path, slug: str) -> str:
    """The place a day's file counts in: its topic folder, the notebooks, else its top two levels."""
    if rel.parts[0] == "kernels":
        return f"kernels/{slug}"
    if rel.parts[0] == "solutions":
        return "solutions"
    return "/".join(rel.parts[:2])


def measures(root: Path = ROOT) -> dict:
    files = python_files(root)
    lines = {str(p.relative_to(root)): len(p.read_text().splitlines()) for p in files}
    long_fn = {f"{p.relative_to(root)}:{n}": k for p in files for n, k in long_functions(p)}
    cuda = {f"{p.relative_to(root)}:{n}": k for ext in ("*.cu", "*.cuh")
            for p in sorted((root / "kernels").rglob(ext)) if "grading" not in p.parts  # answers, not lessons
            for n, k in cuda_functions(p.read_text())}
    places = day_places(root)
    heavy = _heavy_modules(files, root)
    patched = patched_names(root)
    patched |= {(name, "") for name, _ in patched}  # `from kernels import device` where device.gpu is patched
    nested = [nested_imports(p, heavy, patched, root) for p in files]
    return {"places_a_day_lives": max((len(v) for v in places.values()), default=0),
            "places": places,
            "modules_over_500_lines": {k: v for k, v in sorted(lines.items()) if v > MODULE_LINES},
            "functions_over_80_lines": long_fn,
            "cuda_functions_over_120_lines": cuda,
            "in_function_imports": sum(n for n, _ in nested),
            "in_function_imports_without_a_reason": [b for _, bare in nested for b in bare]}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    m = measures()
    if a.json:
        print(json.dumps(m, indent=1))
        return 0
    print(f"places a day lives (most): {m['places_a_day_lives']}  e.g. tma: {', '.join(m['places'].get('tma', []))}")
    for key in ("modules_over_500_lines", "functions_over_80_lines", "cuda_functions_over_120_lines"):
        print(f"{key.replace('_', ' ')}: {len(m[key])}" + "".join(f"\n  {k}: {v}" for k, v in m[key].items()))
    bare = m["in_function_imports_without_a_reason"]
    print(f"in-function imports: {m['in_function_imports']}, without a reason: {len(bare)}"
          + (f"\n  {' '.join(bare)}" if bare else ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
