"""What a student release must not carry (autograder.release builds it; this reads it): instructor-only paths,
near-copies of an answer's kernels (normalised tokens, against every answer's kernels, beyond what the release's own
stub already gives), and lines of solution regions or hidden tests. `release_problems(folder)` is empty for a clean
release; tests/test_student_release.py holds it to known leaks."""

from __future__ import annotations

import ast
import difflib
import re
import tomllib
from collections import Counter
from functools import lru_cache
from pathlib import Path

from .known import kernel_source, known_answers, known_dir, release_cell, ROOT
from .spec import all_specs

# What a student release leaves out, and why: everything here exists only where grading reads it.
INSTRUCTOR_ONLY = {
    "kernels/ASSISTANT_ANSWERS.md": "what the assistant's answers in each day's grading/ folder are",
    "autograder/recorded_cohort_h100.json": "the grades of the synthetic cohorts on an H100",
    "autograder/recorded_cohort_h200.json": "the grades of the synthetic cohorts on an H200",
    "autograder/cohort.py": "the synthetic cohorts, built from known answers",
    "autograder/recorded_practice_h200.json": "the practice cells' output on an H200 (the course solution's lines)",
    "autograder/recorded_understanding_h100.json": "the understanding checks' keys of a synthetic cohort (H100)",
    "autograder/recorded_understanding_h200.json": "the understanding checks' keys of a synthetic cohort (H200), "
                                                   "with the lines of the course solution",
    "autograder/known.py": "reads and grades the known answers",
    "autograder/benchmarks.py": "runs a topic's benchmark with its known answers (make gpu-test)",
    "autograder/nbgrader_config.py": "the instructors' nbgrader set-up (autograde, feedback)",
    "autograder/nbgrader_plugin.py": "nbgrader's autograde step",
    "autograder/report.py": "the class report of a graded batch",
    "autograder/report_data.py": "the class report's figures",
    "autograder/report_html.py": "the class report's page",
    "autograder/report_plots.py": "the class report's plots",
    "autograder/feedback_templates": "the feedback page's template (nbgrader generate_feedback)",
    "kernels/smem_tiling/transpose.cu": "its tiled rungs (padded, XOR-swizzled) are day 2's exercise answered",
    "kernels/attention/r2_overlap.cu": "its separate K and V rings (k_full / k_empty, v_full / v_empty, K "
                                              "released after QK^T) are week 2 day 5's exercise (attn_kv) answered",
    "kernels/gemm/r6_store_warp.cu": "rung 6 of the GEMM ladder: its epilogue (accumulator -> 128B-swizzled "
                                       "staging -> TMA store overlapped with the next tile) is week 2 day 4's "
                                       "exercise answered",
    "kernels/fp8_gemm/r1_block_scaled.cu": "rung 1 of the FP8 GEMM: its promote() (each k-block's product scaled by "
                                           "its row and block scales into the fp32 accumulator) is week 3 day 1's "
                                           "exercise (fp8_promote) answered",
    "kernels/fp8_gemm/r2_wide.cu": "rung 2 of the FP8 GEMM: it promotes each k-block (its two halves) as week 3 day "
                                   "1's exercise (fp8_promote) asks",
    "kernels/fp8_gemm/r3_cluster.cu": "rung 3 of the FP8 GEMM: it promotes each k-block as week 3 day 1's exercise "
                                      "(fp8_promote) asks",
    "kernels/fp8_gemm/r4_overlap.cu": "rung 4 of the FP8 GEMM: it promotes each k-block as week 3 day 1's exercise "
                                      "(fp8_promote) asks",
    "kernels/fp8_gemm/r5_overlap_cluster.cu": "rung 5 of the FP8 GEMM: it promotes each k-block as week 3 day 1's "
                                              "exercise (fp8_promote) asks",
    "kernels/fp8_gemm/r6_tma_store.cu": "rung 6 of the FP8 GEMM: it promotes each k-block as week 3 day 1's exercise "
                                        "(fp8_promote) asks",
    "kernels/include/promote_overlap.cuh": "the overlapped promotion the FP8 GEMM's rungs 4-6 share: it calls "
                                           "block_scaled.cuh's promote() (week 3 day 1's exercise, fp8_promote)",
    "kernels/include/block_scaled.cuh": "what the FP8 GEMM's rungs share: its promote() (each k-block's product "
                                        "scaled by its row and block scales into the fp32 accumulator) is week 3 day "
                                        "1's exercise (fp8_promote) answered",
}
# Each day's grading/ folder: its known answers (known/: the course solution among them, and its mutations) and the
# answer a coding assistant wrote from the release (assistant.cu), whose mutants the understanding checks measure.
INSTRUCTOR_ONLY.update({f"kernels/{d.parent.name}/grading": "the day's known answers (the course solution and its "
                        "mutations among them) and the full-marks answer a coding assistant wrote from the release"
                        for d in sorted((ROOT / "kernels").glob("*/grading"))})
# The understanding checks' outcome tables (make gpu-test): each mutant's line as written and as changed, in the
# course solution, the known slow answer and the assistant's full-marks answer — answer lines; kept out like the rest.
INSTRUCTOR_ONLY.update({f"kernels/{d.name}/{f.name}": "the understanding checks' outcomes, with the lines of the "
                        "answers they were drawn from (the course solution's among them)"
                        for d in sorted((ROOT / "kernels").iterdir()) if d.is_dir()
                        for f in sorted(d.glob("mutants_*.json"))})
# What it carries: the notebooks of the week come from weeks/<week>/.


NEAR_COPY = 0.80  # normalised-token similarity of two kernels at or above which one is a near-copy of the other
STUB_MARGIN = 0.05  # ...and, where the release's own stub is that close already, how much closer than the stub
_KEYWORDS = frozenset(
    "if else for while do return const int float double long unsigned char void bool auto constexpr static inline "
    "__global__ __device__ __shared__ __restrict__ __forceinline__ extern struct break continue sizeof template "
    "typename asm volatile".split())


def cuda_tokens(src: str) -> list[str]:
    """A kernel as a token stream that survives renaming and re-commenting: comments, preprocessor lines and string
    contents dropped, every identifier ID, every number NUM; keywords and punctuation kept."""

    src = re.sub(r"//[^\n]*|/\*.*?\*/", "", src, flags=re.S)
    src = re.sub(r'"(\\.|[^"\\])*"', "STR", src)
    src = re.sub(r"^\s*#[^\n]*", "", src, flags=re.M)
    out = []
    for t in re.findall(r"[A-Za-z_]\w*|\d[\w.]*|\S", src):
        out.append(t if t in _KEYWORDS else "NUM" if t[0].isdigit() else "ID" if t[0].isalpha() or t[0] == "_"
                   else t)
    return out


def cuda_kernels(src: str) -> dict[str, list[str]]:
    """Each __global__ function of a CUDA source (its name -> its tokens, signature to closing brace)."""

    text = re.sub(r"//[^\n]*|/\*.*?\*/", "", src, flags=re.S)
    out = {}
    for m in re.finditer(r"__global__", text):
        brace = text.find("{", m.end())
        if brace < 0:
            continue
        head = re.sub(r"__launch_bounds__\s*\([^)]*\)", "", text[m.end():brace])
        name = (re.findall(r"(\w+)\s*\(", head) or ["?"])[0]
        out[name] = cuda_tokens(text[m.start():_block_end(text, brace) + 1])
    return out


def _block_end(text: str, brace: int) -> int:
    """The index of the brace that closes the block opened at text[brace] (the text's last index if none does)."""
    depth = 0
    for j in range(brace, len(text)):
        depth += {"{": 1, "}": -1}.get(text[j], 0)
        if depth == 0:
            return j
    return len(text) - 1


@lru_cache(maxsize=1 << 16)
def _matching_sizes(a: tuple[str, ...], b: tuple[str, ...]) -> tuple[int, ...]:
    """The sizes of difflib's matching blocks of token streams a and b (SequenceMatcher, no junk heuristic), kept per
    pair: a release check compares the same shipped kernels with the same answers once per week and per planted copy,
    and the exact matching is what costs."""

    return tuple(m.size for m in difflib.SequenceMatcher(None, a, b, autojunk=False).get_matching_blocks() if m.size)


def similarity(a: list[str], b: list[str]) -> float:
    """difflib's ratio() of two token streams: twice the matched tokens over both lengths."""
    total = len(a) + len(b)
    return 2.0 * sum(_matching_sizes(tuple(a), tuple(b))) / total if total else 1.0


def similarity_from(a: list[str], b: list[str], floor: float) -> float | None:
    """similarity(a, b) where it reaches `floor`, None where it cannot. SequenceMatcher's quick ratios (lengths alone,
    then the shared tokens in any order) bound ratio() from above with the same denominator: a pair whose bound falls
    short of `floor` is left out without the exact matching, which is what costs."""

    sm = difflib.SequenceMatcher(None, a, b, autojunk=False)
    if sm.real_quick_ratio() < floor or sm.quick_ratio() < floor:
        return None
    r = similarity(a, b)
    return r if r >= floor else None


def release_stubs() -> dict[str, list[list[str]]]:
    """Each topic's release answer cell, untouched (its known answer "stub"): slug -> the token streams of its
    kernels. What every student is handed; release_problems measures near-copies against it."""
    return {slug: list(cuda_kernels(src).values()) for slug, src in release_stub_sources().items()}


def stub_similarity(tokens: list[str], stub_kernels: list[list[str]]) -> float:
    """How close the release's stub kernels of an answer's topic come to one of its kernels (the best similarity):
    what every student is handed anyway, the baseline a shipped kernel must clearly exceed to be a near-copy."""
    return max((similarity(st, tokens) for st in stub_kernels), default=0.0)


def cuda_functions(src: str) -> dict[str, list[str]]:
    """Every function body of a CUDA source — `__global__` and `__device__` alike, templates included — as tokens
    (cuda_tokens), keyed "name" (a second definition of a name gets "name#2")."""

    text = re.sub(r"//[^\n]*|/\*.*?\*/", "", src, flags=re.S)
    out: dict[str, list[str]] = {}
    for m in re.finditer(r"__(global|device)__", text):
        brace, semi = text.find("{", m.end()), text.find(";", m.end())
        if brace < 0 or 0 <= semi < brace:  # a declaration, a __device__ variable
            continue
        head = re.sub(r"__launch_bounds__\s*\([^)]*\)", "", text[m.end():brace])
        names = re.findall(r"(\w+)\s*\(", head)
        if not names:
            continue
        key, k = names[0], 2
        while key in out:
            key, k = f"{names[0]}#{k}", k + 1
        out[key] = cuda_tokens(text[brace:_block_end(text, brace) + 1])
    return out


TAUGHT_MIN = 40  # tokens: a run of an answer the stub does not give, shorter than this, is not an exercise's work
TRANSCRIBE = 0.80  # share of such a run found in one shipped function (blocks of >= BLOCK tokens) that is a copy
BLOCK = 8
WINDOW = 10  # lines: a window of shipped source whose lines are (nearly) all an answer's own lines is a copy
WINDOW_HITS = 8


def taught_runs(answer_src: str, stub_src: str) -> list[list[str]]:
    """The token runs of an answer its release stub does not hand out (what the student must write): the answer's
    spans that differ from the stub, at least TAUGHT_MIN tokens long."""

    a, b = cuda_tokens(stub_src), cuda_tokens(answer_src)
    ops = difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes()
    return [b[j1:j2] for tag, _, _, j1, j2 in ops if tag in ("replace", "insert") and j2 - j1 >= TAUGHT_MIN]


def contained(run: list[str], tokens: list[str]) -> float:
    """The share of `run` found in `tokens` in order, counting only matching blocks of >= BLOCK tokens."""
    return sum(n for n in _matching_sizes(tuple(run), tuple(tokens)) if n >= BLOCK) / max(len(run), 1)


def contained_from(run: list[str], tokens: list[str], floor: float) -> float:
    """contained(run, tokens) where it reaches `floor`, 0.0 where it cannot: the tokens the two share in any order
    (a multiset intersection) bound every matching from above, and a pair whose bound falls short of `floor` is left
    out without the exact matching, which is what costs."""

    if sum((Counter(run) & Counter(tokens)).values()) / max(len(run), 1) < floor:
        return 0.0
    if _gram_cover(tuple(run), tuple(tokens)) / max(len(run), 1) < floor:
        return 0.0
    c = contained(run, tokens)
    return c if c >= floor else 0.0


def _grams(tokens: tuple[str, ...]) -> frozenset[tuple[str, ...]]:
    return frozenset(tokens[i:i + BLOCK] for i in range(len(tokens) - BLOCK + 1))


@lru_cache(maxsize=1 << 16)
def _gram_cover(run: tuple[str, ...], tokens: tuple[str, ...]) -> int:
    """How many of run's tokens lie in some BLOCK-token window that also occurs in `tokens`: every matching block of
    >= BLOCK tokens is such a window's tokens, so this bounds contained() from above (with the multiset bound, it
    leaves out sibling answers that share words but not whole passages, and the exact matching is never run on them)."""
    grams, covered = _grams(tokens), [False] * len(run)
    for i in range(len(run) - BLOCK + 1):
        if run[i:i + BLOCK] in grams:
            covered[i:i + BLOCK] = [True] * BLOCK
    return sum(covered)


def _lines(src: str) -> list[str]:
    """Each line as its normalised tokens (renaming and comments do not matter), short lines dropped."""
    return [" ".join(t) for t in (cuda_tokens(line) for line in src.splitlines()) if len(t) >= 4]


def given_lines(stubs: dict[str, str]) -> set[str]:
    """The (normalised) lines every student has anyway: any release stub's, and the course's own headers but the
    instructor-only ones (kernels/include/block_scaled.cuh holds the FP8 rungs' promotion: its lines are no student's)."""
    given = {line for src in stubs.values() for line in _lines(src)}
    shipped = [h for h in sorted((ROOT / "kernels" / "include").glob("*.cuh"))
               if h.relative_to(ROOT).as_posix() not in INSTRUCTOR_ONLY]
    return given | {line for h in shipped for line in _lines(h.read_text())}


def release_stub_sources() -> dict[str, str]:
    """Each topic's release answer cell, untouched (known answer "stub", autograder.known.release_cell): slug -> its
    CUDA source."""
    out: dict[str, str] = {}
    for spec in all_specs():
        if not (ROOT / "weeks" / spec.assignment / spec.notebook).is_file():
            continue
        for ex in spec.exercises.values():
            for node in ast.walk(ast.parse(release_cell(spec.slug, ex.name))):
                if isinstance(node, ast.Constant) and isinstance(node.value, str) and "__global__" in node.value:
                    out[spec.slug] = out.get(spec.slug, "") + node.value
    return out


def transcription_problems(sources: dict[str, str], answers: dict[str, str] | None = None,
                           stubs: dict[str, str] | None = None) -> list[str]:
    """Where shipped CUDA hands a student an exercise's own work: every function body of every shipped source against
    every run an answer (transcription_answers) adds to its stub (contained >= TRANSCRIBE), and every WINDOW-line window of shipped source with WINDOW_HITS of its lines among an
    answer's own lines (lines the stub does not have)."""
    answers = transcription_answers() if answers is None else answers
    stubs = release_stub_sources() if stubs is None else stubs
    problems: list[str] = []
    shipped = {where: (cuda_functions(src), _lines(src)) for where, src in sources.items()}
    given = given_lines(stubs)
    for aname, asrc in sorted(answers.items()):
        stub = stubs.get(aname.split("/")[0], "")
        runs = taught_runs(asrc, stub)
        own = set(_lines(asrc)) - given
        for where, (funcs, lines) in shipped.items():
            if where.startswith("kernels/include/"):
                lines = []  # the wrappers: every answer calls them (their bodies are still compared above)
            best = max(((contained_from(run, toks, TRANSCRIBE), fname) for run in runs for fname, toks in funcs.items()
                        if len(toks) >= BLOCK), default=(0.0, ""))
            if best[0] >= TRANSCRIBE:
                problems.append(f"{where}: function {best[1]} holds {best[0]:.0%} of what {aname} adds to its stub")
                continue
            for i in range(max(len(lines) - WINDOW + 1, 0)):
                hits = sum(line in own for line in lines[i:i + WINDOW])
                if hits >= WINDOW_HITS:
                    problems.append(f"{where}: a {WINDOW}-line window ({hits} of its lines) is {aname}'s own code")
                    break
    return problems


def transcription_answers() -> dict[str, str]:
    """The answers transcription_problems looks for: every full-marks answer (known_good_sources), and every answer to
    hide whose stub is within STUB_MARGIN of the whole kernel. Release_problems' near-copy check is blind to those (no
    kernel can be clearly closer to them than the stub is): fp8_gemm/bf16_path, full correctness and short path points,
    was once caught by neither. A known answer that earns correctness alone is otherwise what the shipped demos may
    teach (the TMA copy demo is warp_specialization/all_threads' way of working)."""
    out, stubs = known_good_sources(), release_stubs()
    for name, src in answers_to_hide().items():
        base = max((stub_similarity(t, stubs.get(name.split("/")[0], [])) for t in cuda_kernels(src).values()),
                   default=0.0)
        if base + STUB_MARGIN > 1:
            out[name] = src
    return out


def known_good_sources() -> dict[str, str]:
    """The answers a student could be handed by shipped code: each exercise's course solution and every known answer
    expected to earn full correctness and full path points ('<slug>/<answer>' -> source)."""
    good = {}
    hide = answers_to_hide()
    for spec in all_specs():
        path = known_dir(spec.slug) / "expected.toml"
        expected = tomllib.loads(path.read_text()) if path.exists() else {}
        full_path = {ex.parts["path"].points for ex in spec.exercises.values()}
        for name, src in hide.items():
            slug, answer = name.split("/", 1)
            if slug == spec.slug and (answer in ("solution", "correct")
                                      or expected.get(answer, {}).get("path") in full_path):
                good[name] = src
    return good


def answers_to_hide() -> dict[str, str]:
    """Every CUDA source a release must not carry a near-copy of: each exercise's course solution and every known
    answer graded full correctness points ('<slug>/<answer>' -> source)."""


    out = {}
    for spec in all_specs():
        expected_path = known_dir(spec.slug) / "expected.toml"
        expected = tomllib.loads(expected_path.read_text()) if expected_path.exists() else {}
        full = {ex.parts["correctness"].points for ex in spec.exercises.values()}
        for ka in known_answers(spec.slug):
            if ka.name != "correct" and expected.get(ka.name, {}).get("correctness") not in full:
                continue
            try:
                src = kernel_source(spec.slug, ka.name)
            except Exception:  # noqa: BLE001 - a Python known answer (a torch call, a stub) has no CUDA source
                continue
            if src and "__global__" in src:
                out[f"{spec.slug}/{ka.name}"] = src
    return out


def hidden_text() -> set[str]:
    """What of the solutions' hidden regions a release must not carry: every hidden-test line (stripped, >= 20
    characters), and every run of 3 consecutive solution-region lines (stripped, joined by newlines). Lines that
    appear outside the hidden regions of the solutions notebooks (starter code, the spec) are not hidden."""

    import nbformat

    tests, runs, visible = set(), set(), set()
    for path in sorted((ROOT / "solutions").glob("week*/*.ipynb")):
        for cell in nbformat.read(str(path), as_version=4).cells:
            region, solution = None, []
            for line in cell.source.splitlines() + ["### END SOLUTION"]:
                if m := re.search(r"BEGIN (SOLUTION|HIDDEN TESTS)", line):
                    region = m.group(1)
                elif re.search(r"END (SOLUTION|HIDDEN TESTS)", line):
                    if region == "SOLUTION":
                        lines = [x.strip() for x in solution if len(x.strip()) >= 8]
                        runs |= {"\n".join(lines[i:i + 3]) for i in range(len(lines) - 2)}
                    region, solution = None, []
                elif region == "HIDDEN TESTS" and len(line.strip()) >= 20:
                    tests.add(line.strip())
                elif region == "SOLUTION":
                    solution.append(line)
                else:
                    visible.add(line.strip())
    return (tests - visible) | runs


def release_problems(folder: Path) -> list[str]:
    """What a built student release carries that it must not: instructor-only paths, near-copies of an answer
    (every __global__ kernel of every shipped CUDA source and notebook cell, against every answer's kernels), the
    exercise's own work transcribed into any function (transcription_problems: where the stub gives nearly all of an
    answer's kernel, as week 3 day 1's does, no kernel can be clearly closer to the answer than the stub is, and only
    the runs the answer adds to its stub tell a solution from the stub), and lines of solution regions or hidden
    tests. Empty when the release is clean."""
    import nbformat

    folder = Path(folder)
    problems = []
    files = [p for p in folder.rglob("*") if p.is_file()]
    for p in files:
        rel = p.relative_to(folder).as_posix()
        hit = next((k for k in INSTRUCTOR_ONLY if rel == k or rel.startswith(k + "/")), None)
        if hit:
            problems.append(f"{rel}: instructor-only ({INSTRUCTOR_ONLY[hit]})")
    sources = {}
    for p in files:
        rel = p.relative_to(folder).as_posix()
        if p.suffix in (".cu", ".cuh"):
            sources[rel] = p.read_text(errors="replace")
        elif p.suffix == ".ipynb":
            for i, cell in enumerate(nbformat.read(str(p), as_version=4).cells):
                if cell.cell_type == "code" and "__global__" in cell.source:
                    sources[f"{rel} cell {i}"] = cell.source
    answers = {name: cuda_kernels(src) for name, src in answers_to_hide().items()}
    stubs = release_stubs()
    bases: dict[tuple[str, str], float] = {}
    for where, src in sources.items():
        for kname, toks in cuda_kernels(src).items():
            for aname, kernels_ in answers.items():
                for akname, atoks in kernels_.items():
                    r = similarity_from(toks, atoks, NEAR_COPY)
                    if r is None:  # under NEAR_COPY: under the bar, whatever the stub's similarity
                        continue
                    # what the release hands every student anyway: the exercise's untouched answer cell. A capstone
                    # gives most of its kernel (the student writes one part of it), so that stub is itself close
                    # to the solution; a shipped kernel is a near-copy only if it is clearly closer than the stub.
                    if (aname, akname) not in bases:
                        bases[aname, akname] = stub_similarity(atoks, stubs.get(aname.split("/")[0], []))
                    base = bases[aname, akname]
                    if r >= max(NEAR_COPY, base + STUB_MARGIN):
                        problems.append(f"{where}: kernel {kname} is a near-copy ({r:.2f}) of {aname} ({akname})"
                                        + (f"; the release's stub is {base:.2f}" if base >= NEAR_COPY else ""))
    problems += transcription_problems(sources)
    hidden = hidden_text()
    for p in files:
        if p.suffix in (".zip", ".png", ".pyc"):
            continue
        text = p.read_text(errors="replace")
        if p.suffix == ".ipynb":  # compare the cells' text, not its JSON escaping
            text = "\n".join(c.source for c in nbformat.read(str(p), as_version=4).cells)
        text = "\n".join(line.strip() for line in text.splitlines())
        leaked = sorted(h for h in hidden if h in text)
        if leaked:
            problems.append(f"{p.relative_to(folder).as_posix()}: carries solution or hidden-test text, e.g. "
                            f"{leaked[0][:80]!r}")
    return problems
