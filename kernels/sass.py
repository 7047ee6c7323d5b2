"""Read the SASS of a cubin (nvdisasm from the pip package, no GPU needed) and check the hardware path.

    sass = disassemble(cubin)                    # {kernel: [Instr(opcode="LDG.E.128", text=...), ...]}
    ev = path_evidence(cubin, "row_bias", require=["LDG.E.128"], forbid=["LDG.E.U16"])
    ev.ok, ev.missing, ev.forbidden, ev.lines

Patterns name an opcode and its leading modifiers: "LDG.E.128" matches "LDG.E.128" and "LDG.E.128.CONSTANT";
"UTMALDG" matches "UTMALDG.2D" and "UTMALDG.2D.MULTICAST". A pattern may also be a regular expression (anchored
at the opcode's start). Only the named kernel is searched: an instruction in dead code or in another kernel of
the module does not count.
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import tempfile
from dataclasses import dataclass, field
from functools import lru_cache

from .paths import cache_dir, cuda_tool, made_once


_FUNC = re.compile(r"^\s*\.section\s+\.text\.(?P<name>[\w$]+),")
# "/*0110*/   @!P0 LDG.E.128.CONSTANT R8, desc[UR4][R2.64] ;"
_INSTR = re.compile(r"^\s*/\*(?P<addr>[0-9a-f]{4,})\*/\s+(?P<body>[^;]*);")


@dataclass(frozen=True)
class Instr:
    addr: int
    opcode: str  # with modifiers, without the predicate: "LDG.E.128.CONSTANT"
    text: str  # the whole instruction


@lru_cache(maxsize=1)
def nvdisasm() -> str:
    found = cuda_tool("nvdisasm")
    if found:
        return found
    raise FileNotFoundError("nvdisasm not found: pip install nvidia-cuda-nvdisasm (works with no GPU)")


def _listing(data: bytes) -> str:
    """nvdisasm's listing of a cubin, cached on disk by a hash of the cubin and of which nvdisasm (under
    $COURSE_CACHE_DIR/sass, beside the compile cache): every process of a grading run or a test run that reads the
    same module's SASS runs nvdisasm once between them."""
    tool = nvdisasm()
    # -ndf: no dataflow analysis. It only adds the targets of an indirect branch (BRX, e.g. a switch's jump table)
    # as a comment; the checks here read opcodes. nvdisasm takes about a quarter less time per cubin without it.
    cmd = [tool, "-c", "-ndf"]
    st = os.stat(tool)
    key = hashlib.sha256(data + f"\0{' '.join(cmd)}\0{st.st_size}\0{st.st_mtime_ns}".encode()).hexdigest()
    cached = cache_dir("sass") / f"{key}.sass"

    def listing(tmp) -> None:
        with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
            f.write(data)
            f.flush()
            out = subprocess.run([*cmd, f.name], capture_output=True, text=True, timeout=120)
        if out.returncode != 0:
            raise RuntimeError(f"nvdisasm failed: {out.stderr.strip()}")
        tmp.write_text(out.stdout)

    return made_once(cached, listing).read_text()  # one nvdisasm per cubin among parallel workers and lanes


@lru_cache(maxsize=256)
def _disassemble_bytes(data: bytes) -> dict[str, tuple[Instr, ...]]:
    funcs: dict[str, list[Instr]] = {}
    current = None
    for line in _listing(data).splitlines():
        m = _FUNC.match(line)
        if m:
            current = m.group("name")
            funcs.setdefault(current, [])
            continue
        m = _INSTR.match(line)
        if m and current is not None:
            body = m.group("body").strip()
            words = body.split()
            if words and words[0].startswith("@"):
                words = words[1:]
            if words:
                funcs[current].append(Instr(int(m.group("addr"), 16), words[0], body))
    return {k: tuple(v) for k, v in funcs.items()}


def disassemble(cubin) -> dict[str, tuple[Instr, ...]]:
    """SASS instructions of every kernel (and device function) in the module: a kernels.compile.Cubin (its .data)
    or the cubin's bytes. (This module does not import kernels.compile, which uses it: no import circle.)"""
    data = getattr(cubin, "data", None)
    data = bytes(cubin) if data is None else data
    return _disassemble_bytes(data)


def functions(cubin) -> list[str]:
    return sorted(disassemble(cubin))


def opcodes(cubin, kernel: str) -> list[str]:
    funcs = disassemble(cubin)
    if kernel not in funcs:
        raise KeyError(f"kernel {kernel!r} is not in the module; it has: {', '.join(sorted(funcs)) or 'nothing'}")
    return [i.opcode for i in funcs[kernel]]


def family_count(counts, opcodes: str) -> int:
    """How many of `counts` ({opcode: count}: a Counter of a listing's opcodes, or a profile's executed counts) are
    the opcode or extend it ("STG" counts STG.E and STG.E.128, not STGX); "A|B" counts either family."""
    fams = opcodes.split("|")
    return sum(v for k, v in counts.items() if any(k == f or k.startswith(f + ".") for f in fams))


def _matches(pattern: str, opcode: str) -> bool:
    if re.fullmatch(r"[A-Z0-9_.]+", pattern):
        return opcode == pattern or opcode.startswith(pattern + ".")
    return re.match(pattern, opcode) is not None


@dataclass
class PathEvidence:
    kernel: str
    required: list[str]
    forbidden_patterns: list[str]
    found: dict[str, list[str]] = field(default_factory=dict)  # pattern -> instruction lines that matched
    missing: list[str] = field(default_factory=list)
    forbidden: dict[str, list[str]] = field(default_factory=dict)
    histogram: dict[str, int] = field(default_factory=dict)  # memory opcodes of the kernel and their counts

    @property
    def ok(self) -> bool:
        return not self.missing and not self.forbidden

    def summary(self) -> str:
        lines = [f"SASS of {self.kernel}:"]
        for pat, hits in self.found.items():
            lines.append(f"  found {pat}: {len(hits)}x, e.g. `{hits[0]}`")
        for pat in self.missing:
            lines.append(f"  MISSING {pat}")
        for pat, hits in self.forbidden.items():
            lines.append(f"  FORBIDDEN {pat}: {len(hits)}x, e.g. `{hits[0]}`")
        mem = ", ".join(f"{k} x{v}" for k, v in sorted(self.histogram.items()))
        lines.append(f"  memory instructions: {mem or 'none'}")
        return "\n".join(lines)


_MEMORY = re.compile(r"^(ARRIVES|LDG|LDS|LDL|STG|STS|STL|STAS|RED|ATOM|UTMA|UBLKCP|UBLKRED|SYNCS|LDGSTS|LDGDEPBAR|DEPBAR|HGMMA|LDSM|STSM)")


def path_evidence(cubin, kernel: str, require=(), forbid=()) -> PathEvidence:
    """Which required / forbidden instructions the named kernel's SASS holds."""
    funcs = disassemble(cubin)
    if kernel not in funcs:
        raise KeyError(f"kernel {kernel!r} is not in the module; it has: {', '.join(sorted(funcs)) or 'nothing'}")
    instrs = funcs[kernel]
    ev = PathEvidence(kernel, list(require), list(forbid))
    for pat in require:
        hits = [i.text for i in instrs if _matches(pat, i.opcode)]
        if hits:
            ev.found[pat] = hits
        else:
            ev.missing.append(pat)
    for pat in forbid:
        hits = [i.text for i in instrs if _matches(pat, i.opcode)]
        if hits:
            ev.forbidden[pat] = hits
    for i in instrs:
        if _MEMORY.match(i.opcode):
            ev.histogram[i.opcode] = ev.histogram.get(i.opcode, 0) + 1
    return ev


class SassPathError(AssertionError):
    pass


def require(cubin, kernel: str, required=(), forbidden=()) -> PathEvidence:
    """Raise SassPathError unless `kernel` holds every required instruction and none of the forbidden ones."""
    ev = path_evidence(cubin, kernel, required, forbidden)
    if not ev.ok:
        raise SassPathError(ev.summary())
    return ev
