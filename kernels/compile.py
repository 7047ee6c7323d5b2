"""The course's one compile helper: CUDA C++ (a .cu file or a student's source string) -> sm_90a cubin.

Built on `cuda.core.Program` (NVRTC). Works with no GPU: compiling and reading SASS need no driver.

    cubin = compile_cuda(Path("kernels/naive_loads/copy.cu"))
    cubin = compile_cuda(student_source, name="ROW_BIAS_CU")

- Cached on disk by a hash of source + options + NVRTC version (under build/cache/nvrtc).
- NVRTC errors are re-written with the source's own name and line numbers and a short excerpt.
- An nbgrader stub left in the source (`raise NotImplementedError()`) raises `NotAttempted`, not an NVRTC error.
- nbgrader's `### BEGIN SOLUTION` / `### END SOLUTION` marker lines become blank lines (line numbers kept).
- Only headers of the course (kernels/include) and of the CUDA toolkit can be included, named literally: no absolute
  path, no `..`, no header named by a macro, nothing outside those folders (`ForbiddenInclude`, raised before NVRTC
  reads any file). The compiler is the one thing a student's source can make read a file on the grading host.
- Compile logs are capped (`LOG_CAP` characters): a log is feedback, not a channel.
"""

from __future__ import annotations

import hashlib
import io
import re
import warnings
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from .paths import cache_dir, made_once, write_whole
from .sass import functions

ARCH = "sm_90a"  # wgmma / setmaxnreg need the "a" target; everything else in the course runs on it too.
STD = "c++17"  # CCCL (cuda::pipeline, cuda::barrier) needs C++17.

# NVRTC cannot include <cuda.h>; kernels that take a tensor map declare the type themselves (as cuda.h 13 does):
#   struct CUtensorMap_st { alignas(128) unsigned long long opaque[16]; };
# kernels/include/course.cuh holds that declaration and the few helpers the .cu files share.
COURSE_INCLUDE = Path(__file__).resolve().parent / "include"

_MARKER = re.compile(r"^\s*###\s*(BEGIN|END)\s+(SOLUTION|HIDDEN TESTS)\s*$")
_STUB = re.compile(r"raise\s+NotImplementedError")
_NVRTC_LINE = re.compile(r"^(?P<file>[^\s()]+)\((?P<line>\d+)\): (?P<kind>error|warning|catastrophic error)")
LOG_CAP = 4000  # characters of a compile log kept in an error (and so in a student's feedback)
# Directives that make the preprocessor read a file, and the operators that probe for one. `%:` is the digraph of `#`.
_DIRECTIVE = re.compile(r"^[ \t]*(?:#|%:)[ \t]*(?P<kw>include_next|include|import|embed)\b(?P<rest>.*)$", re.M)
_HAS_INCLUDE = re.compile(r"__has_include(?:_next)?\s*\(")
_HEADER = re.compile(r'^\s*(?:<(?P<a>[^<>"\n]*)>|"(?P<q>[^"\n]*)")\s*$')
_HEADER_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.+/-]*$")


class CompileError(RuntimeError):
    """NVRTC rejected the source. `.log` is the compiler's log with the source's own line numbers."""

    def __init__(self, name: str, log: str, excerpt: str):
        self.name, self.log, self.excerpt = name, log, excerpt
        super().__init__(f"{name} did not compile for {ARCH}:\n{log.strip()}" + (f"\n\n{excerpt}" if excerpt else ""))


class ForbiddenInclude(CompileError):
    """The source names a header the course does not allow (absolute path, `..`, a macro, a file outside the course's
    and the CUDA toolkit's headers). Raised before the compiler runs: nothing was read."""

    def __init__(self, name: str, line: int, directive: str, why: str):
        self.line, self.directive = line, directive
        super().__init__(name, f"{name}({line}): error: {why}", f"{name}, line {line}:\n> {line:4d} | {directive[:200]}")


class NotAttempted(RuntimeError):
    """The source still holds nbgrader's stub: the exercise was not attempted."""


@dataclass(frozen=True)
class Cubin:
    """A compiled module: the cubin bytes, where it is cached, and the names of its extern "C" kernels."""

    data: bytes
    path: Path
    name: str
    source: str
    log: str = ""
    options: tuple[str, ...] = field(default_factory=tuple)

    @property
    def kernels(self) -> list[str]:
        return functions(self)


def clean_source(source: str) -> str:
    """Blank out nbgrader marker lines (keeping line numbers); refuse an unattempted stub."""
    lines = source.splitlines()
    if any(_STUB.search(line) for line in lines if not _MARKER.match(line)):
        raise NotAttempted(
            "exercise not attempted: the source still contains nbgrader's stub "
            "`raise NotImplementedError()` — replace it with your CUDA code"
        )
    return "\n".join("" if _MARKER.match(line) else line for line in lines) + "\n"


def _splice(text: str) -> tuple[str, list[int]]:
    """The text with line splices (backslash-newline) removed, as the preprocessor sees it, and the original line
    number of every character left."""
    out: list[str] = []
    lines: list[int] = []
    line, i, n = 1, 0, len(text)
    while i < n:
        if text[i] == "\\" and text.startswith("\n", i + 1):
            line, i = line + 1, i + 2
            continue
        if text[i] == "\\" and text.startswith("\r\n", i + 1):
            line, i = line + 1, i + 3
            continue
        out.append(text[i])
        lines.append(line)
        line += text[i] == "\n"
        i += 1
    return "".join(out), lines


def _strip_comments(text: str) -> str:
    """The text with every comment blanked (each character a space, newlines kept: positions do not move) and
    string, character and raw-string literals kept: the preprocessor reads `#/**/include` as `# include`."""
    out = list(text)
    i, n = 0, len(text)

    def blank(a: int, b: int) -> None:
        for k in range(a, b):
            if out[k] != "\n":
                out[k] = " "

    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            blank(i, j)
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            blank(i, j)
            i = j
        elif text.startswith('R"', i) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            m = re.match(r'R"([^()\\\s]{0,16})\(', text[i:])
            if not m:
                i += 1
                continue
            end = text.find(")" + m.group(1) + '"', i + m.end())
            i = n if end < 0 else end + len(m.group(1)) + 2
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            i = j + 1
        else:
            i += 1
    return "".join(out)


def check_includes(text: str, name: str = "source.cu") -> None:
    """Refuse any header the course does not allow (see the module docstring); return None when all are allowed."""
    joined, lines = _splice(text)
    clean = _strip_comments(joined)

    def refuse(pos: int, directive: str, why: str):
        raise ForbiddenInclude(name, lines[min(pos, len(lines) - 1)] if lines else 1, directive.strip(), why)

    roots = [Path(d).resolve() for d in include_dirs()]
    for m in _DIRECTIVE.finditer(clean):
        _check_header(m.group("rest"), m.group(0), m.start(), refuse, roots, m.group("kw"))
    for m in _HAS_INCLUDE.finditer(clean):
        depth, j = 1, m.end()
        while j < len(clean) and depth:
            depth += {"(": 1, ")": -1}.get(clean[j], 0)
            j += 1
        _check_header(clean[m.end():j - 1], clean[m.start():j], m.start(), refuse, roots, "__has_include")


def _check_header(arg: str, directive: str, pos: int, refuse, roots, kw: str) -> None:
    if kw in ("import", "embed"):
        refuse(pos, directive, f"#{kw} is not allowed: include the course's or the CUDA toolkit's headers by name")
    m = _HEADER.match(arg)
    if not m:
        refuse(pos, directive, "a header must be named literally, as <name> or \"name\" (not through a macro)")
    header = m.group("a") if m.group("a") is not None else m.group("q")
    if header.startswith("/") or "\\" in header or re.match(r"^[A-Za-z]:", header):
        refuse(pos, directive, f"absolute path {header!r}: only the course's and the CUDA toolkit's headers can be "
                               "included, by name (e.g. <cuda_bf16.h>, \"course.cuh\")")
    if ".." in header.split("/") or not _HEADER_NAME.match(header) or "//" in header:
        refuse(pos, directive, f"header name {header!r} is not allowed: no '..', no special characters; only the "
                               "course's and the CUDA toolkit's headers can be included")
    for root in roots:
        cand = root / header
        if cand.exists():
            real = cand.resolve()
            if not any(real == r or r in real.parents for r in roots) or not real.is_file():
                refuse(pos, directive, f"header {header!r} leads outside the course's and the CUDA toolkit's "
                                       "headers")
            return
    # In no include folder. A "name" would next be looked up beside the source, i.e. in the compiling process's
    # working folder: refused. A <name> is looked up only in the include folders and NVRTC's built-in headers
    # (<cstdint>, ...): left to NVRTC, which either has it or says it cannot open it.
    if m.group("q") is not None:
        refuse(pos, directive, f"\"{header}\" is not a header of the course (kernels/include) or of the CUDA "
                               "toolkit")


def course_headers_of(text: str) -> list[tuple[str, str]]:
    """The course headers (kernels/include) a source includes, directly or through another course header, with their
    text, sorted by name: what a cubin of it depends on besides the source and the toolkit (a compile's cache key).
    Every include is a literal name (check_includes refuses the rest); one under an #if counts whether or not it is
    taken, and a name no course header has (a toolkit header) is the NVRTC version's."""
    seen: dict[str, str] = {}
    todo = [text]
    while todo:
        clean = _strip_comments(_splice(todo.pop())[0])
        args = [m.group("rest") for m in _DIRECTIVE.finditer(clean)]
        args += [clean[m.end():clean.find(")", m.end())] for m in _HAS_INCLUDE.finditer(clean)]
        for arg in args:
            m = _HEADER.match(arg)
            name = (m.group("a") if m.group("a") is not None else m.group("q")) if m else None
            if name and name not in seen and (COURSE_INCLUDE / name).is_file():
                seen[name] = (COURSE_INCLUDE / name).read_text()
                todo.append(seen[name])
    return sorted(seen.items())


@lru_cache(maxsize=1)
def include_dirs() -> tuple[str, ...]:
    """Header folders: the course's own, CCCL (cuda/pipeline, cuda/barrier) and the CUDA runtime headers
    (cuda_bf16.h, cuda_pipeline_primitives.h), from the pip packages or a local CUDA toolkit."""
    dirs: list[str] = [str(COURSE_INCLUDE)]
    try:
        import cuda.pathfinder as pf

        for lib in ("cccl", "cudart"):
            try:
                found = pf.find_nvidia_header_directory(lib)
            except Exception:  # noqa: BLE001 - an older pathfinder may not know the name
                found = None
            if found and found not in dirs:
                dirs.append(str(found))
    except ImportError:
        pass
    for base in ("/usr/local/cuda/include/cccl", "/usr/local/cuda/include"):
        if Path(base).is_dir() and base not in dirs:
            dirs.append(base)
    return tuple(dirs)


@lru_cache(maxsize=1)
def nvrtc_version() -> str:
    from cuda.bindings import nvrtc

    _, major, minor = nvrtc.nvrtcVersion()
    return f"{major}.{minor}"


def _excerpt(source: str, log: str, name: str) -> str:
    src = source.splitlines()
    out = []
    for m in map(_NVRTC_LINE.match, log.splitlines()):
        if m and m.group("kind") != "warning":
            n = int(m.group("line"))
            lo, hi = max(1, n - 2), min(len(src), n + 1)
            out.append(f"{name}, line {n}:")
            out += [f"{'>' if i == n else ' '} {i:4d} | {src[i - 1]}" for i in range(lo, hi + 1)]
            if len(out) > 24:
                break
    return "\n".join(out)


def compile_cuda(
    source: str | Path,
    *,
    name: str | None = None,
    defines: dict[str, object] | None = None,
    max_registers: int | None = None,
) -> Cubin:
    """Compile CUDA C++ to an sm_90a cubin (cached). `source` is a path to a .cu file or the source text."""
    if isinstance(source, Path):
        name = name or source.name
        text = source.read_text()
    else:
        name = name or "source.cu"
        text = source
    text = clean_source(text)
    check_includes(text, name)
    macros = tuple(f"{k}={v}" for k, v in sorted((defines or {}).items()))
    # The course's header folder is keyed by what its headers say, not where it lies: a student release (its own copy
    # of kernels/include, the instructor-only headers left out) and this repository share one cubin for the same
    # source. Headers may change under a cached cubin: the text of those it includes (course_headers_of) is hashed.
    dirs = ["<course headers>" if d == str(COURSE_INCLUDE) else d for d in include_dirs()]
    # "logs kept": a cubin cached before ptxas's log was kept beside it is compiled again (its advisories unknown)
    key_parts = [text, name, ARCH, STD, nvrtc_version(), *dirs, *macros, str(max_registers), "logs kept",
                 "front-end diagnostics off"]
    for header, header_text in course_headers_of(text):
        key_parts += [header, header_text]
    key = hashlib.sha256("\0".join(key_parts).encode()).hexdigest()[:24]
    cached = cache_dir("nvrtc") / f"{key}.cubin"
    log_file = cached.with_suffix(".log")  # ptxas's advisories of a compile that succeeded, kept beside its cubin
    if cached.exists():
        return Cubin(cached.read_bytes(), cached, name, text, _read_log(log_file), macros)

    def nvrtc() -> bytes:
        from cuda.core import Program, ProgramOptions

        opts = ProgramOptions(
            name=name,
            arch=ARCH,
            std=STD,
            include_path=list(include_dirs()),
            define_macro=list(macros) or None,
            lineinfo=True,
            max_register_count=max_registers,
            # The log of a compile that succeeds is read for ptxas's advisories (`advisories`): the front end's
            # warnings and remarks are off, so no text the source writes (#pragma message, #warning, a deprecated
            # attribute's message) reaches it. Errors still do (CompileError). The cubin is the same either way.
            disable_warnings=True,
            diag_suppress=[20200, 1105],  # #pragma message's remark, #warning's warning
        )

        logs = io.StringIO()
        try:
            code = bytes(Program(text, "c++", options=opts).compile("cubin", logs=logs).code)
            log = logs.getvalue().replace("\x00", "").replace("default_program", name).strip()
            write_whole(log_file, log[:LOG_CAP])  # before the cubin: a cubin found always has its log beside it
            return code
        except Exception as exc:  # NVRTCError carries the log in its message
            log = str(exc)
            log = log.split("compilation log:", 1)[-1]
            log = log.replace("default_program", name)
            if len(log) > LOG_CAP:
                log = log[:LOG_CAP] + f"\n... ({len(log) - LOG_CAP} more characters of compiler output cut)"
            raise CompileError(name, log, _excerpt(text, log, name)) from None

    # One compile per key among parallel test workers and grading lanes (the others wait for it).
    data = made_once(cached, lambda tmp: tmp.write_bytes(nvrtc())).read_bytes()
    return Cubin(data, cached, name, text, _read_log(log_file), macros)


def _read_log(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:  # a cubin cached before logs were kept: no advisories known
        return ""


# ptxas's advisories that change what a kernel does (a compile that succeeds with them is not the kernel the source
# describes): C7517 — ptxas injected a wgmma.wait_group before a register the tensor cores still write was read, so
# the GEMMs meant to overlap run one after another; C7510 — a wgmma pipeline serialized (e.g. across a call); C7508 —
# a setmaxnreg the compiler ignored.
ADVISORIES = {"C7517": "wgmma serialized: ptxas waited for the tensor cores where the source did not",
              "C7510": "wgmma pipeline serialized by ptxas", "C7508": "setmaxnreg ignored by ptxas"}


def advisories(cubin_or_log) -> list[str]:
    """The lines of a compile's log that carry a ptxas advisory code (`(C7517) wgmma.wait_group is injected ...`),
    each as "C7517: <ptxas's words>"; the codes ADVISORIES names first."""
    log = cubin_or_log if isinstance(cubin_or_log, str) else cubin_or_log.log
    found = []
    for line in log.splitlines():
        m = re.search(r"\((C\d{4})\)\s*(.*)", line)
        if m:
            found.append(f"{m.group(1)}: {m.group(2).strip()}")
    return sorted(set(found), key=lambda t: (t[:5] not in ADVISORIES, t))


def compile_triton(fn, signature: dict, constexprs: dict, *, num_warps: int, num_stages: int | None = None,
                   capability: int = 90) -> dict:
    """A Triton kernel (a @triton.jit function) compiled ahead of time for sm_<capability>, with no GPU:
    {"name", "cubin", "ptx", "shared", "triton"} (the SASS and PTX a Triton row of a ladder is read from)."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    src = ASTSource(fn, signature, constexprs=constexprs)
    options = {"num_warps": num_warps} if num_stages is None else {"num_warps": num_warps, "num_stages": num_stages}
    with warnings.catch_warnings():  # Triton warns that its fp-fusion default will change
        warnings.filterwarnings("ignore", message=".*TRITON_DEFAULT_FP_FUSION.*")
        compiled = triton.compile(src, target=GPUTarget("cuda", capability, 32), options=options)
    return {"name": compiled.metadata.name, "cubin": bytes(compiled.asm["cubin"]), "ptx": compiled.asm["ptx"],
            "shared": compiled.metadata.shared, "triton": triton.__version__}


class SourceLeftOut(FileNotFoundError, RuntimeError):
    """A course kernel's source that this copy of the course does not hold: a student release leaves out the
    kernels that answer an exercise (autograder.release INSTRUCTOR_ONLY); their notebooks show the recorded rows."""


def has_kernel_file(slug: str, filename: str) -> bool:
    """Whether this copy of the course holds kernels/<slug>/<filename> (a student release lacks the instructor-only
    ones)."""
    return (Path(__file__).resolve().parent / slug / filename).exists()


def kernel_file(slug: str, filename: str, left_out: str | None = None) -> Path:
    """Path of a topic's .cu file: kernel_file("naive_loads", "copy.cu"). `left_out`: why a student release may lack
    it — then its absence raises SourceLeftOut with that reason instead of a bare FileNotFoundError."""
    path = Path(__file__).resolve().parent / slug / filename
    if not path.exists():
        if left_out:
            raise SourceLeftOut(f"kernels/{slug}/{filename} is not in this copy of the course: {left_out}")
        raise FileNotFoundError(path)
    return path


def day_kernel(slug: str, filename: str):
    """(cubin, source) for a launcher whose day has one .cu file: cubin() compiles it once a process (compile_cuda);
    source(start, end) is the file, or its lines from the first containing `start` up to (not including) the first
    later line containing `end` (excerpt: what a notebook prints)."""

    @lru_cache(maxsize=1)
    def cubin():
        return compile_cuda(kernel_file(slug, filename))

    def source(start: str | None = None, end: str | None = None) -> str:
        return excerpt(kernel_file(slug, filename), start, end)

    cubin.__doc__ = f"kernels/{slug}/{filename} compiled (once a process)"
    source.__doc__ = f"kernels/{slug}/{filename}, or its lines from `start` up to `end` (for the notebook)"
    return cubin, source


def excerpt(path: Path, start: str | None = None, end: str | None = None) -> str:
    """A source file (for a notebook to print), or its lines from the first containing `start` up to (not
    including) the first later line containing `end`."""
    lines = Path(path).read_text().splitlines()
    i = next((k for k, ln in enumerate(lines) if start in ln), None) if start else 0
    if i is None:
        raise KeyError(f"{start!r} is not in {Path(path).name}")
    j = next((k for k in range(i + 1, len(lines)) if end in lines[k]), len(lines)) if end else len(lines)
    return "\n".join(lines[i:j])
