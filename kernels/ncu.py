"""What one kernel launch executed, read with Nsight Compute (`ncu`): bytes per memory path and executed SASS.

    prof = profile([sys.executable, "-m", "some.launcher"], kernel="tma_add", launch_skip=2, workdir=tmp)
    prof.bytes["tma_load"], prof.bytes["global_load_128"], prof.executed["UTMALDG.2D"]

The profiled process launches the kernel `launch_skip + 1` times; ncu measures the last of them only (an untimed
launch: ncu replays it, with memory saved and restored, to collect every counter). Two kinds of evidence:

- counters (exact, SASS-instrumented or hardware): bytes required by global loads / stores / LDGSTS / atomics and
  by shared loads / stores, and bytes the TMA unit read from L2 and wrote back (`METRICS`);
- the SourceCounters section: every SASS instruction of the kernel with its executed count (warp and thread
  level), address space and access size. From it: which opcodes ran, and how many global-load and -store bytes
  moved in 128-bit instructions (an `LDG.E.128` in a branch no launch takes executes 0 times).

`launches(cmd, names, kernel="regex:a|b", workdir=tmp)` measures every launch of the matching kernels instead, one
dict of `names` per launch (kernels.cycles: SM cycles and duration of each side of a comparison, launch by launch).

`available()` says whether ncu can read counters here (it needs an NVIDIA GPU and permission to profile: root, or
the driver's `NVreg_RestrictProfilingToAdminUsers=0`). Needs no Python package beyond the standard library; the
report is parsed from ncu's own CSV export.
"""

from __future__ import annotations

import csv
import io
import os
import signal
import subprocess
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from .paths import cuda_tool

# Quantity (bytes) -> the counters that sum to it. Names are Hopper's (ncu 2025: `ncu --query-metrics`).
METRICS: dict[str, tuple[str, ...]] = {
    "tma_load": ("l1tex__m_xbar2l1tex_read_bytes_mem_global_op_tma_ld.sum",),  # L2 -> SM through the TMA unit
    "tma_store": ("l1tex__m_l1tex2xbar_write_bytes_mem_global_op_tma_st.sum",),
    "global_load": ("smsp__sass_data_bytes_mem_global_op_ld.sum",),  # LDG and generic LD that reached global
    "global_store": ("smsp__sass_data_bytes_mem_global_op_st.sum",),  # STG and generic ST that reached global
    "ldgsts": ("smsp__sass_data_bytes_mem_global_op_ldgsts.sum",),  # cp.async global -> shared
    "global_atomic": ("smsp__sass_data_bytes_mem_global_op_atom.sum", "smsp__sass_data_bytes_mem_global_op_red.sum"),
    "shared_load": ("smsp__sass_data_bytes_mem_shared_op_ld.sum",),
    "shared_store": ("smsp__sass_data_bytes_mem_shared_op_st.sum",),
}
# Quantities read from the per-instruction table rather than a counter.
FROM_SOURCE = ("global_load_128", "global_store_128")
QUANTITIES = tuple(METRICS) + FROM_SOURCE


class ProfileError(RuntimeError):
    """ncu could not measure the launch: the launch never happened, hung, or the profiled process failed."""


class ProfilerUnavailable(ProfileError):
    """ncu cannot measure anything on this machine: not installed, or no permission to read the counters."""


@lru_cache(maxsize=1)
def find_ncu() -> str | None:
    return cuda_tool("ncu", env="COURSE_NCU")


def available() -> tuple[bool, str]:
    """(True, "") where ncu is installed; else (False, why). Permission is known only once a profile ran."""
    if os.environ.get("COURSE_NO_NCU"):
        return False, "dynamic path evidence switched off (COURSE_NO_NCU)"
    if find_ncu() is None:
        return False, "Nsight Compute (ncu) is not installed on this machine"
    return True, ""


@dataclass
class Instr:
    address: str
    text: str  # "LDG.E.128.CONSTANT R4, desc[UR6][R4.64]" (predicate removed)
    opcode: str  # "LDG.E.128.CONSTANT"
    warp_executed: int
    thread_executed: int  # predicated-on thread instructions executed
    space: str  # "Global", "Shared", "Global,Shared" (TMA), "Generic", "-"
    operation: str  # "Load", "Store", "-"
    size_bits: int | None


@dataclass
class Profile:
    kernel: str
    counters: dict[str, float]
    instructions: list[Instr] = field(default_factory=list)

    @property
    def bytes(self) -> dict[str, float]:
        out = {q: sum(self.counters.get(m, 0.0) for m in ms) for q, ms in METRICS.items()}
        out["global_load_128"] = self._wide("Load")
        out["global_store_128"] = self._wide("Store")
        return out

    def _wide(self, op: str) -> float:
        total = 0
        for i in self.instructions:
            plain = i.opcode.split(".")[0] in ("LDG", "STG", "LD", "ST")
            if plain and i.operation == op and i.size_bits == 128 and ("Global" in i.space or "Generic" in i.space):
                total += i.thread_executed * 16
        return float(total)

    @property
    def executed(self) -> dict[str, int]:
        """Executed warp instructions per opcode (with modifiers), instructions that ran at least once."""
        out: dict[str, int] = {}
        for i in self.instructions:
            if i.warp_executed:
                out[i.opcode] = out.get(i.opcode, 0) + i.warp_executed
        return out

    def memory_summary(self, limit: int = 12) -> list[str]:
        """The memory and TMA opcodes that ran, most executed first: "UTMALDG.2D x512"."""
        mem = {k: v for k, v in self.executed.items()
               if k.split(".")[0] in ("LDG", "STG", "LD", "ST", "LDS", "STS", "LDGSTS", "UTMALDG", "UTMASTG",
                                      "UBLKCP", "ATOMG", "ATOM", "RED", "REDG", "LDSM", "STSM", "HGMMA", "STAS")}
        return [f"{k} x{v}" for k, v in sorted(mem.items(), key=lambda kv: -kv[1])[:limit]]

    def as_dict(self) -> dict:
        return {"kernel": self.kernel, "bytes": self.bytes, "executed": self.memory_summary()}


def _record(cmd: list[str], *, kernel: str, launch_skip: int, workdir: Path, timeout_s: float, measure: list[str],
            env: dict | None = None, stdin_text: str | None = None, cwd: str | None = None,
            launch_count: int | None = 1, from_start: bool = True) -> tuple[str, Path]:
    """Run `cmd` under ncu, measuring `launch_count` launches of `kernel` (None: every one) from the
    (launch_skip + 1)-th on with `measure` (ncu's section / metric options) into a report in `workdir`; with
    `from_start` False only the launches between the command's cudaProfilerStart and cudaProfilerStop count. Returns
    (ncu, the report). The command's own output goes to files in `workdir` (never parsed)."""
    ncu = find_ncu()
    if ncu is None:
        raise ProfilerUnavailable("Nsight Compute (ncu) is not installed on this machine")
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    report = workdir / "probe"
    count = ["--launch-count", str(int(launch_count))] if launch_count else []
    args = [ncu, "--clock-control", "none", "--target-processes", "all", "--kernel-name", kernel,
            "--launch-skip", str(int(launch_skip)), *count, *([] if from_start else ["--profile-from-start", "off"]),
            *measure,
            "--export", str(report), "--force-overwrite", *cmd]
    with open(workdir / "probe_stdout.txt", "wb") as out, open(workdir / "probe_stderr.txt", "wb") as err:
        proc = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=out, stderr=err, env=env, cwd=cwd,
                                start_new_session=True)
        try:
            proc.communicate((stdin_text or "").encode(), timeout=timeout_s)
        except subprocess.TimeoutExpired:
            _kill(proc)
            proc.communicate()
            raise ProfileError(f"the profiled launch did not finish in {timeout_s:.0f} s (a hang?)") from None
        finally:
            _kill(proc)
    rep = report.with_suffix(".ncu-rep")
    if not rep.exists():
        log = (workdir / "probe_stdout.txt").read_text(errors="replace")[-3000:]
        if "ERR_NVGPUCTRPERM" in log:
            raise ProfilerUnavailable("no permission to read the GPU's performance counters (profile as root, or set the "
                               "driver option NVreg_RestrictProfilingToAdminUsers=0)")
        ncu_lines = [ln for ln in log.splitlines() if ln.startswith("==")][-4:]
        raise ProfileError("ncu measured no launch of " + kernel + (": " + " | ".join(ncu_lines) if ncu_lines else ""))
    return ncu, rep


def profile(cmd: list[str], *, kernel: str, launch_skip: int = 0, workdir: Path, timeout_s: float = 300,
            env: dict | None = None, stdin_text: str | None = None, cwd: str | None = None) -> Profile:
    """Run `cmd` under ncu and measure the (launch_skip + 1)-th launch of `kernel`: the bytes of every memory path
    (METRICS) and the SourceCounters section."""
    ncu, rep = _record(cmd, kernel=kernel, launch_skip=launch_skip, workdir=workdir, timeout_s=timeout_s,
                       measure=["--section", "SourceCounters", "--metrics",
                                ",".join(m for ms in METRICS.values() for m in ms)],
                       env=env, stdin_text=stdin_text, cwd=cwd)
    raw = _import(ncu, rep, ["--page", "raw", "--csv", "--print-units", "base"])
    src = _import(ncu, rep, ["--page", "source", "--csv", "--print-source", "sass"])
    return Profile(kernel, parse_raw(raw), parse_source(src))


def metrics(cmd: list[str], names: list[str], *, kernel: str, launch_skip: int = 0, workdir: Path,
            timeout_s: float = 300, env: dict | None = None, cwd: str | None = None) -> dict[str, float]:
    """Any ncu metrics of the (launch_skip + 1)-th launch of `kernel` in `cmd`, in base units (bytes, ns):
    e.g. metrics(cmd, ["dram__bytes_read.sum", "gpu__time_duration.sum"], kernel="regex:gemm_pipelined")."""
    ncu, rep = _record(cmd, kernel=kernel, launch_skip=launch_skip, workdir=workdir, timeout_s=timeout_s,
                       measure=["--metrics", ",".join(names)], env=env, cwd=cwd)
    return parse_raw(_import(ncu, rep, ["--page", "raw", "--csv", "--print-units", "base"]), names)


def launches(cmd: list[str], names: list[str], *, kernel: str, workdir: Path, launch_count: int | None = None,
             launch_skip: int = 0, from_start: bool = True, timeout_s: float = 600, env: dict | None = None,
             cwd: str | None = None) -> list[dict]:
    """Every launch of `kernel` (a name, or "regex:a|b") in `cmd` that ncu measured — `launch_count` of them from the
    (launch_skip + 1)-th on (None: all; `from_start` False: only those between the command's cudaProfilerStart and
    cudaProfilerStop) — in launch order, each {"kernel": its function name, "id": ncu's launch index, name: value for
    each of `names`} in base units, times in ns and rates per second (parse_launches)."""
    ncu, rep = _record(cmd, kernel=kernel, launch_skip=launch_skip, workdir=workdir, timeout_s=timeout_s,
                       measure=["--metrics", ",".join(names)], env=env, cwd=cwd, launch_count=launch_count,
                       from_start=from_start)
    raw = _import(ncu, rep, ["--page", "raw", "--csv", "--print-units", "base", "--print-kernel-base", "function"])
    (Path(workdir) / "launches.csv").write_text(raw)  # kept beside the report: what was parsed
    return parse_launches(raw, names)


# The tensor pipe's active share; ncu versions name the Hopper metric one way or the other (the first known is used).
TENSOR_PIPE = ("sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active",
               "sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active")
# The XU pipe (MUFU: ex2, rcp, ...): an attention softmax's exponentials.
XU_PIPE = ("sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active",)


def pipe_shares(cmd: list[str], pipes: dict[str, tuple[str, ...]], *, kernel: str, workdir: Path,
                launch_skip: int = 2, cwd: str | None = None, timeout_s: float = 600) -> dict:
    """Per pipe of `pipes` ({label: metric names to try, in order}) the percent of its peak sustained while the SMs
    were active, for the (launch_skip + 1)-th launch of `kernel` in `cmd`, with that launch's duration:
    {label: percent, "metrics": {label: the name this ncu knew}, "ms": ...}, or {"error": ...} when no name of a
    pipe is known or the profile fails. Raises ProfilerUnavailable where ncu cannot profile at all."""
    out: dict = {"metrics": {}}
    for label, names in pipes.items():
        for i, name in enumerate(names):
            try:
                m = metrics(cmd, [name, "gpu__time_duration.sum"], kernel=kernel, launch_skip=launch_skip,
                            workdir=Path(workdir) / f"{label}_{i}", timeout_s=timeout_s, cwd=cwd)
            except ProfilerUnavailable:
                raise
            except ProfileError as exc:
                if i == len(names) - 1:
                    return {"error": str(exc)[-800:]}
                continue
            out[label], out["metrics"][label] = m[name], name
            out["ms"] = m["gpu__time_duration.sum"] * 1e-6
            break
    return out


def _kill(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _import(ncu: str, rep: Path, args: list[str]) -> str:
    p = subprocess.run([ncu, "--import", str(rep), *args], capture_output=True, text=True, timeout=120)
    if p.returncode:
        raise ProfileError(f"ncu --import {' '.join(args)} failed: {p.stderr.strip()[-500:]}")
    return p.stdout


def _number(text: str) -> float:
    text = text.strip().replace(",", "")
    try:
        return float(text)
    except ValueError:
        return 0.0


def parse_raw(text: str, wanted=None) -> dict[str, float]:
    """ncu --page raw --csv (--print-units base): the values of the `wanted` metrics (default: every METRICS
    counter) of the one profiled launch."""
    rows = list(csv.reader(io.StringIO(text)))
    rows = [r for r in rows if r and not r[0].startswith("==")]
    if len(rows) < 3:
        raise ProfileError("ncu's report holds no profiled launch")
    header, values = rows[0], rows[2]  # row 1: units
    wanted = set(wanted) if wanted is not None else {m for ms in METRICS.values() for m in ms}
    return {h: _number(v) for h, v in zip(header, values) if h in wanted}


# A unit of ncu's raw page -> the factor to the units parse_launches returns: times in ns, rates per second.
UNIT_SCALE = {"ns": 1.0, "nsecond": 1.0, "us": 1e3, "usecond": 1e3, "ms": 1e6, "msecond": 1e6, "second": 1e9,
              "cycle/second": 1.0, "cycle/nsecond": 1e9, "cycle/usecond": 1e6, "cycle/msecond": 1e3,
              "hz": 1.0, "khz": 1e3, "mhz": 1e6, "ghz": 1e9}


def parse_launches(text: str, wanted) -> list[dict]:
    """ncu --page raw --csv --print-units base of a report holding several launches: rows[0] the header ("ID",
    "Kernel Name", ..., metric names), rows[1] the units, then one row per launch. One dict per launch, in the
    report's order: {"kernel", "id", metric: value} for each metric of `wanted` (thousands separators dropped; a
    time in ns and a rate per second whatever unit the row names: UNIT_SCALE; a value ncu left empty or "n/a" is
    None). Raises ProfileError where the page holds no launch or lacks a wanted metric."""
    rows = [r for r in csv.reader(io.StringIO(text)) if r and not r[0].startswith("==")]
    if len(rows) < 3:
        raise ProfileError("ncu's report holds no profiled launch")
    header, units = rows[0], rows[1]
    col = {h: i for i, h in enumerate(header)}
    missing = [m for m in wanted if m not in col]
    if missing or "Kernel Name" not in col:
        raise ProfileError(f"ncu's raw page has no column {missing or ['Kernel Name']}")
    out = []
    for r in rows[2:]:
        if len(r) < len(header):
            continue
        got = {"kernel": r[col["Kernel Name"]], "id": int(_number(r[col["ID"]])) if "ID" in col else len(out)}
        for m in wanted:
            v = r[col[m]].strip()
            scale = UNIT_SCALE.get(units[col[m]].strip().lower(), 1.0)
            got[m] = None if v.lower() in ("", "n/a") else _number(v) * scale
        out.append(got)
    return out


def parse_source(text: str) -> list[Instr]:
    """ncu --page source --csv --print-source sass: one row per SASS instruction of the profiled kernel."""
    lines = [ln for ln in text.splitlines() if ln.strip() and not ln.startswith("==")]
    start = next((k for k, ln in enumerate(lines) if ln.startswith('"Address"')), None)
    if start is None:
        return []
    rows = list(csv.DictReader(io.StringIO("\n".join(lines[start:]))))
    out = []
    for r in rows:
        if r.get("Address", "").startswith("Kernel Name"):
            break
        words = (r.get("Source") or "").split()
        if words and words[0].startswith("@"):
            words = words[1:]
        if not words:
            continue
        size = (r.get("Access Size") or "").strip()
        out.append(Instr(r.get("Address", ""), " ".join(words), words[0],
                         int(_number(r.get("Instructions Executed", "0"))),
                         int(_number(r.get("Predicated-On Thread Instructions Executed", "0"))),
                         (r.get("Address Space") or "-").strip() or "-", (r.get("Access Operation") or "-").strip(),
                         int(size) if size.isdigit() else None))
    return out
