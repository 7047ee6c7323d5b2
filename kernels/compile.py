"""The course's one compile helper: CUDA C++ (a .cu file or a student's source string) -> sm_90a cubin.

Built on `cuda.core.Program` (NVRTC). Works with no GPU: compiling and reading SASS need no driver.

    cubin = compile_cuda(Path("kernels/naive_loads/copy.cu"))
    cubin = compile_cuda(student_source, name="ROW_BIAS_CU")

- Cached on disk by a hash of source + options + NVRTC version (under build/cache/nvrtc).
- NVRTC errors are re-written with the source's own name and line numbers and a short excerpt.
- An nbgrader stub left in the source (`raise NotImplementedError()`) raises `NotAttempted`, not an NVRTC error.
- nbgrader's `### BEGIN SOLUTION` / `### END SOLUTION` marker lines become blank lines (line numbers kept).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from .paths import cache_dir

ARCH = "sm_90a"  # wgmma / setmaxnreg need the "a" target; everything else in the course runs on it too.
STD = "c++17"  # CCCL (cuda::pipeline, cuda::barrier) needs C++17.

# NVRTC cannot include <cuda.h>; kernels that take a tensor map declare the type themselves (as cuda.h 13 does):
#   struct CUtensorMap_st { alignas(128) unsigned long long opaque[16]; };
# kernels/include/course.cuh holds that declaration and the few helpers the .cu files share.
COURSE_INCLUDE = Path(__file__).resolve().parent / "include"

_MARKER = re.compile(r"^\s*###\s*(BEGIN|END)\s+(SOLUTION|HIDDEN TESTS)\s*$")
_STUB = re.compile(r"raise\s+NotImplementedError")
_NVRTC_LINE = re.compile(r"^(?P<file>[^\s()]+)\((?P<line>\d+)\): (?P<kind>error|warning|catastrophic error)")


class CompileError(RuntimeError):
    """NVRTC rejected the source. `.log` is the compiler's log with the source's own line numbers."""

    def __init__(self, name: str, log: str, excerpt: str):
        self.name, self.log, self.excerpt = name, log, excerpt
        super().__init__(f"{name} did not compile for {ARCH}:\n{log.strip()}" + (f"\n\n{excerpt}" if excerpt else ""))


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
        from .sass import functions

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
    macros = tuple(f"{k}={v}" for k, v in sorted((defines or {}).items()))
    key_parts = [text, name, ARCH, STD, nvrtc_version(), *include_dirs(), *macros, str(max_registers)]
    # Headers of the course may change under a cached cubin: hash them too.
    for header in sorted(COURSE_INCLUDE.glob("*.cuh")):
        key_parts.append(header.read_text())
    key = hashlib.sha256("\0".join(key_parts).encode()).hexdigest()[:24]
    cached = cache_dir("nvrtc") / f"{key}.cubin"
    if cached.exists():
        return Cubin(cached.read_bytes(), cached, name, text, "", macros)

    from cuda.core import Program, ProgramOptions

    opts = ProgramOptions(
        name=name,
        arch=ARCH,
        std=STD,
        include_path=list(include_dirs()),
        define_macro=list(macros) or None,
        lineinfo=True,
        max_register_count=max_registers,
    )
    program = Program(text, "c++", options=opts)
    try:
        obj = program.compile("cubin")
    except Exception as exc:  # NVRTCError carries the log in its message
        log = str(exc)
        log = log.split("compilation log:", 1)[-1]
        log = log.replace("default_program", name)
        raise CompileError(name, log, _excerpt(text, log, name)) from None
    data = bytes(obj.code)
    tmp = cached.with_suffix(".tmp")
    tmp.write_bytes(data)
    tmp.replace(cached)
    return Cubin(data, cached, name, text, "", macros)


def kernel_file(slug: str, filename: str) -> Path:
    """Path of a topic's .cu file: kernel_file("naive_loads", "copy.cu")."""
    path = Path(__file__).resolve().parent / slug / filename
    if not path.exists():
        raise FileNotFoundError(path)
    return path
