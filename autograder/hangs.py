"""Hangs and races: which barrier and phase a hung kernel waits on, and what compute-sanitizer sees of it.

    python -m autograder.hangs warp_specialization.wrong_empty_parity     # a known answer (slug.answer)
    python -m autograder.hangs my_axpy.cu --exercise warp_specialization   # any .cu, under an exercise's launch contract

1. The debug build. `debug_cubin` compiles a kernel with COURSE_DEBUG_BARRIERS through kernels.compile: the course's
   mbarrier waits (kernels/include/mbarrier_debug.cuh) then give up after a bound (default 2 s), record who waited
   on what into a __device__ trace, stop every other wait, and let the kernel end. `instrument` first names the
   kernel's `__shared__` barrier variables (full, empty, ...) in the trace, on the lines that declare them (line
   numbers unchanged). The launch goes through the course's runner (kernels.runner.checked_launch: poisoned output,
   deadline, checker), in a process of its own: a kernel that still hangs (a cluster barrier, __syncthreads, a spin
   loop: nothing the debug build can time out) costs that process only, and its trace is read while it runs.
   `decode_trace` reads the trace's bytes; `describe` prints one line per stuck warp,

       block 0 warp 0 (1 lane): waits on empty[0] parity 0, its 1st wait on it (for phase 0); ran out after 2.00 s;
       last completed: none

   and `diagnose` says what the counts mean (how many of a phase's arrivals came; whether the phase waits for
   transaction bytes that never landed; a first wait on parity 0).
2. compute-sanitizer. `sanitize` runs one answer under one tool (memcheck, racecheck, synccheck, initcheck) in a
   process group that a timeout kills, and `parse_sanitizer` turns its output into counts and the first message.
   `hangs_and_races` (a step of `make gpu-test`) runs the debug build and the tools on week 2's known answers that
   hang or race and on the course solutions, and records per answer and tool what was caught
   (kernels/<slug>/sanitizer_<gpu>.json).

The trace layout is mbarrier_debug.cuh's: TRACE_LAYOUT below reads it back (change one, change both).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import struct
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from .harness import _kill_group

ROOT = Path(__file__).resolve().parents[1]
TRACE_SYMBOL = "course_barrier_trace"
# The capacities every debug build here is compiled with (mbarrier_debug.cuh's macros), and so the trace's layout.
WARPS, STUCK, SLOTS, NAMES, INITS = 16384, 4096, 32, 32, 64
DEFAULT_BOUND_S = 2.0
HEADER = struct.Struct("<IIQQII")  # abort, n_stuck, timeout_ns, abort_ns, n_init, pad
STUCK_REC = struct.Struct("<10IQ")  # block, warp, bar, parity, waits, flags, lanes, tag, tagged, pad, waited_ns
WARP_WORDS = 10  # block1, warp, last_bar, last_parity, completed, tag, tagged, last_arrive, arrived, pad
SLOT_WORDS = 3  # bar, waits, arrivals
UNTRACKED = 0xFFFFFFFF


def trace_layout(warps: int = WARPS, stuck: int = STUCK, slots: int = SLOTS) -> dict[str, int]:
    """Byte offsets of the trace's parts (CourseBarrierTrace in mbarrier_debug.cuh) and its size."""
    names = HEADER.size
    inits = names + NAMES * 8
    stuck_at = inits + INITS * 8
    warps_at = stuck_at + stuck * STUCK_REC.size
    warp_bytes = 4 * (WARP_WORDS + SLOT_WORDS * slots)
    size = warps_at + warps * warp_bytes
    return {"names": names, "inits": inits, "stuck": stuck_at, "warps": warps_at, "warp_bytes": warp_bytes,
            "size": size + (-size) % 8, "n_warps": warps, "n_stuck": stuck, "n_slots": slots}


TRACE_LAYOUT = trace_layout()
DEBUG_DEFINES = {"COURSE_DEBUG_BARRIERS": 1, "COURSE_DEBUG_BARRIER_WARPS": WARPS,
                 "COURSE_DEBUG_BARRIER_STUCK": STUCK, "COURSE_DEBUG_BARRIER_SLOTS": SLOTS}

# Week 2's known answers that hang or race (kernels/<slug>/grading/known/expected.toml), measured by `make
# gpu-test` beside the course solution. tests/test_hangs.py holds the list to the files: every answer whose
# gpu_status allows "timeout" is here; each fails on the GPU, or is a latent race no run showed (its gpu_outcome).
HANGS_AND_RACES = {
    "warp_specialization": ("wrong_empty_parity", "missing_empty_arrive", "early_release"),
    "multicast": ("wrong_mask", "early_exit"),
    "gemm": ("missing_proxy_fence", "no_read_wait"),
    "attention": ("wrong_parity", "v_parity_of_k", "one_barrier", "k_early_release"),
}
TOOLS = ("memcheck", "racecheck", "synccheck")
HUNG = ("timeout", "hung")  # a launch's status when it did not end by itself
SANITIZE_BOUND_S = 10.0     # the debug build's bound under a sanitizer (a tool slows every wait's partner)


# ---------------------------------------------------------------------------------------------- the debug build
_BARRIER_DECL = re.compile(
    r"__shared__\s+(?:(?:__align__|alignas)\s*\(\s*\d+\s*\)\s+)*"
    r"(?:unsigned\s+long\s+long(?:\s+int)?|uint64_t|unsigned\s+__int64)\s+(?P<decls>[^;{}()]+);")
_DECLARATOR = re.compile(r"^\s*(?P<name>[A-Za-z_]\w*)\s*(?:\[[^\]]*\])*\s*$")


def instrument(source: str) -> tuple[str, dict[int, str]]:
    """`source` with each `__shared__` 64-bit barrier variable declared inside a function named in the debug trace
    (COURSE_DEBUG_NAME_BARRIER(var, id) appended on the declaring line: line numbers do not move), and the names by
    id. Barriers elsewhere (in dynamic shared memory, at namespace scope) are reported by address."""
    from kernels.compile import _strip_comments

    clean = _strip_comments(source)
    names: dict[int, str] = {}
    inserts: list[tuple[int, str]] = []
    for m in _BARRIER_DECL.finditer(clean):
        depth = clean.count("{", 0, m.start()) - clean.count("}", 0, m.start())
        if depth <= 0 or "extern" in clean[max(0, m.start() - 12):m.start()]:
            continue
        calls = []
        for decl in m.group("decls").split(","):
            d = _DECLARATOR.match(decl)
            if not d or len(names) >= NAMES:
                continue
            i = len(names)
            names[i] = d.group("name")
            calls.append(f" COURSE_DEBUG_NAME_BARRIER({d.group('name')}, {i});")
        if calls:
            inserts.append((m.end(), "".join(calls)))
    out = source
    for pos, text in reversed(inserts):
        out = out[:pos] + text + out[pos:]
    return out, names


def debug_cubin(source: str, name: str = "debug.cu"):
    """(Cubin, names): `source` instrumented and compiled with COURSE_DEBUG_BARRIERS through kernels.compile."""
    from kernels.compile import compile_cuda

    text, names = instrument(source)
    return compile_cuda(text, name=name, defines=DEBUG_DEFINES), names


# ------------------------------------------------------------------------------------------- reading the trace
@dataclass
class StuckWait:
    block: int
    warp: int
    bar: int
    parity: int
    waits: int | None  # waits on bar the warp completed before (None: the warp had no record)
    own: bool  # its own bound ran out (else: it was waiting when the abort came)
    cluster: bool
    lanes: int  # active mask
    tag: int | None
    waited_s: float


@dataclass
class WarpRecord:
    block: int
    warp: int
    last_bar: int
    last_parity: int
    completed: int
    tag: int | None
    last_arrive: int
    arrived: int
    slots: dict[int, list[int]] = field(default_factory=dict)  # bar -> [waits completed, arrivals made]


@dataclass
class Trace:
    aborted: bool
    n_stuck: int
    timeout_s: float
    stuck: list[StuckWait]
    warps: list[WarpRecord]
    names: dict[int, tuple[str, int, int]]  # id -> (variable, address, bytes)
    inits: dict[int, int]  # address -> arrival count (block 0's mbar_init calls)

    def to_dict(self) -> dict:
        return {"aborted": self.aborted, "n_stuck": self.n_stuck, "timeout_s": self.timeout_s,
                "stuck": [asdict(s) for s in self.stuck],
                "warps": [{**asdict(w), "slots": {str(k): v for k, v in w.slots.items()}} for w in self.warps],
                "names": {str(k): list(v) for k, v in self.names.items()},
                "inits": {str(k): v for k, v in self.inits.items()}}

    @classmethod
    def from_dict(cls, d: dict) -> "Trace":
        return cls(d["aborted"], d["n_stuck"], d["timeout_s"], [StuckWait(**s) for s in d["stuck"]],
                   [WarpRecord(**{**w, "slots": {int(k): v for k, v in w["slots"].items()}}) for w in d["warps"]],
                   {int(k): tuple(v) for k, v in d["names"].items()}, {int(k): v for k, v in d["inits"].items()})

    def warp(self, block: int, warp: int) -> WarpRecord | None:
        return next((w for w in self.warps if w.block == block and w.warp == warp), None)

    def name(self, addr: int) -> str:
        """A barrier's name: `empty[2]` where autograder.hangs named its variable, else its shared-memory address."""
        for var, base, nbytes in self.names.values():
            if base <= addr < base + max(nbytes, 8):
                return var if nbytes <= 8 else f"{var}[{(addr - base) // 8}]"
        return f"the barrier at shared 0x{addr:x}"

    def arrivals(self, block: int, bar: int) -> int:
        return sum(w.slots.get(bar, [0, 0])[1] for w in self.warps if w.block == block)


def decode_trace(raw: bytes, names: dict[int, str] | None = None, *, layout: dict | None = None,
                 keep_blocks=None) -> Trace:
    """The trace's bytes (read from course_barrier_trace after a launch) as records. `names`: the id -> variable map
    `instrument` returned. `keep_blocks`: keep the warp records of these blocks only (and of the blocks a stuck wait
    names); None keeps every warp that recorded anything."""
    lay = layout or TRACE_LAYOUT
    if len(raw) < lay["size"]:
        raise ValueError(f"trace of {len(raw)} bytes, the layout needs {lay['size']}: not a debug build of this "
                         "course's headers (or compiled with other capacities)")
    abort, n_stuck, timeout_ns, _abort_ns, n_init, _ = HEADER.unpack_from(raw, 0)
    nm = {}
    for i, var in (names or {}).items():
        addr, nbytes = struct.unpack_from("<II", raw, lay["names"] + 8 * int(i))
        if nbytes:
            nm[int(i)] = (var, addr, nbytes)
    inits = {}
    for i in range(min(n_init, INITS)):
        addr, count = struct.unpack_from("<II", raw, lay["inits"] + 8 * i)
        inits.setdefault(addr, count)
    stuck = []
    for i in range(min(n_stuck, lay["n_stuck"])):
        at = lay["stuck"] + i * STUCK_REC.size
        b, w, bar, par, waits, flags, lanes, tag, tagged, _, ns = STUCK_REC.unpack_from(raw, at)
        stuck.append(StuckWait(b, w, bar, par, None if waits == UNTRACKED else waits, bool(flags & 1),
                               bool(flags & 2), lanes, tag if tagged else None, ns / 1e9))
    keep = None if keep_blocks is None else set(keep_blocks) | {s.block for s in stuck}
    words = lay["warp_bytes"] // 4
    warps = []
    table = memoryview(raw)[lay["warps"]:lay["warps"] + lay["n_warps"] * lay["warp_bytes"]].cast("I")
    for i in range(lay["n_warps"]):
        base = i * words
        if table[base] == 0 or (keep is not None and table[base] - 1 not in keep):
            continue
        block1, wi, lb, lp, done, tag, tagged, la, arrived, _ = table[base:base + WARP_WORDS]
        slots = {}
        for s in range(lay["n_slots"]):
            bar, waits, arr = table[base + WARP_WORDS + SLOT_WORDS * s:base + WARP_WORDS + SLOT_WORDS * (s + 1)]
            if bar == 0:
                break
            slots[bar] = [waits, arr]
        warps.append(WarpRecord(block1 - 1, wi, lb, lp, done, tag if tagged else None, la, arrived, slots))
    return Trace(bool(abort), n_stuck, (timeout_ns or DEFAULT_BOUND_S * 1e9) / 1e9, stuck, warps, nm, inits)


def _ordinal(n: int) -> str:
    return f"{n}{'th' if 10 <= n % 100 <= 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th')}"


def _ranges(blocks: list[int]) -> str:
    blocks = sorted(set(blocks))
    parts, i = [], 0
    while i < len(blocks):
        j = i
        while j + 1 < len(blocks) and blocks[j + 1] == blocks[j] + 1:
            j += 1
        parts.append(str(blocks[i]) if i == j else f"{blocks[i]}-{blocks[j]}")
        i = j + 1
    return ("block " if len(blocks) == 1 else "blocks ") + ", ".join(parts)


def phase_waited(waits: int | None, parity: int) -> int | None:
    """Which phase of the barrier a wait is for, from the waits the warp completed on it before (u) and the parity:
    parity u & 1 is phase u (a consumer's "stage landed"); the other parity is phase u - 1 (a producer's "stage
    released by the previous use"); -1 is the phase before the first, complete from the start."""
    if waits is None:
        return None
    return waits if parity == waits & 1 else waits - 1


def _groups(trace: Trace) -> list[tuple[StuckWait, list[int]]]:
    """Stuck waits that are the same but for their block, as (first wait, blocks)."""
    groups: dict[tuple, tuple[StuckWait, list[int]]] = {}
    for s in trace.stuck:
        key = (s.warp, s.bar, s.parity, s.waits, s.own, bin(s.lanes).count("1"), s.tag)
        groups.setdefault(key, (s, []))[1].append(s.block)
    return sorted(groups.values(), key=lambda g: (min(g[1]), g[0].warp))


def describe(trace: Trace, max_lines: int = 16) -> list[str]:
    """One line per stuck warp (warps stuck alike in several blocks share a line)."""
    lines = []
    for s, blocks in _groups(trace)[:max_lines]:
        n = bin(s.lanes).count("1")
        k = phase_waited(s.waits, s.parity)
        what = (f"its {_ordinal(s.waits + 1)} wait on it (for phase {k})" if k is not None and k >= 0 else
                f"its {_ordinal(s.waits + 1)} wait on it (for the phase before the first)" if k is not None else
                "(warp not tracked)")
        tag = f" at tag {s.tag}" if s.tag is not None else ""
        how = f"ran out after {s.waited_s:.2f} s" if s.own else f"waiting for {s.waited_s:.2f} s when the abort came"
        w = trace.warp(blocks[0], s.warp)
        last = (f"{trace.name(w.last_bar)} parity {w.last_parity} ({w.completed} waits completed)"
                if w and w.completed else "none")
        lines.append(f"{_ranges(blocks)} warp {s.warp} ({n} lane{'s' if n != 1 else ''}): waits on "
                     f"{trace.name(s.bar)} parity {s.parity}{tag}, {what}; {how}; last completed: {last}")
    more = len(_groups(trace)) - max_lines
    if more > 0:
        lines.append(f"... and {more} more kinds of stuck wait")
    if trace.n_stuck > len(trace.stuck):
        lines.append(f"({trace.n_stuck} stuck waits in all; the first {len(trace.stuck)} recorded)")
    return lines


def diagnose(trace: Trace, hung: bool = False) -> list[str]:
    """What the trace's counts say, one sentence per barrier that stuck warps wait on."""
    if not trace.stuck:
        if hung:
            return ["the kernel hung, but no mbarrier wait ran out: it waits where the debug build cannot see (a "
                    "cluster barrier, __syncthreads, a spin loop of its own, a CTA of its cluster that exited); "
                    "the warps' last completed waits are in the trace"]
        return [f"no mbarrier wait ran out (bound {trace.timeout_s:g} s): the kernel did not hang on a barrier"]
    blocks = {s.block for s in trace.stuck}
    out = [f"the first wait ran out after {trace.timeout_s:g} s; then {len(trace.stuck)} warp(s) in {len(blocks)} "
           f"block(s) were waiting on a barrier ({sum(s.own for s in trace.stuck)} had waited that long "
           "themselves): nothing was moving — a deadlock, not a slow kernel"]
    seen = set()
    for s, blks in _groups(trace):
        if (s.bar, s.parity, s.waits) in seen:
            continue
        seen.add((s.bar, s.parity, s.waits))
        out.append(_diagnose_one(trace, s, blks[0]))
    return out


def _diagnose_one(trace: Trace, s: StuckWait, block: int) -> str:
    name, k = trace.name(s.bar), phase_waited(s.waits, s.parity)
    count = trace.inits.get(s.bar)
    arrived = trace.arrivals(block, s.bar)
    head = f"{name} (warp {s.warp}, parity {s.parity})"
    if k is None:
        return f"{head}: this warp has no record (beyond the trace's {WARPS} warps)"
    if k < 0:
        return (f"{head}: waits for the phase before the first, which is complete from the start — unless the "
                "barrier was never initialised (or was initialised again) before this wait")
    if count is None:
        return f"{head}: waits for phase {k}; {arrived} arrival(s) on it in block {block} (its mbar_init not seen)"
    need = (k + 1) * count
    if arrived < need:
        got = max(arrived - k * count, 0)
        text = (f"{head}: phase {k} has {got} of its {count} arrival(s) ({arrived} on {name} in all in block "
                f"{block})")
        if s.waits == 0 and s.parity == 0 and arrived == 0:
            text += (f". It is this warp's first wait on {name}, on parity 0: the phase in progress, which only "
                     "its arrivals complete. If this warp is the producer on a ring's first pass, it must wait on "
                     "parity 1 ((n & 1) ^ 1 for use n = 0: the phase before the first, complete from the start)")
        elif arrived == 0:
            text += ": nobody has ever arrived on it — a missing mbar_arrive (the release of a stage?)"
        else:
            text += ": arrivals stopped coming (the warps that arrive on it are stuck, or arrive under a condition)"
        return text
    return (f"{head}: all {count} arrival(s) of phase {k} are in, yet the phase has not completed — it waits for "
            "transaction bytes (expect_tx) that never landed: a TMA load that never reached this CTA (a multicast "
            "mask without it, a load not issued) or an expect_tx larger than the bytes its loads deliver")


# ------------------------------------------------------------------------------------------ on the GPU (child)
def reset_trace(cubin, bound_s: float = DEFAULT_BOUND_S) -> None:
    """Zero the module's trace and set its bound (before a launch; the GPU idle)."""
    import torch
    from cuda.bindings import driver

    from kernels.launch import device_global

    ptr, size = device_global(cubin, TRACE_SYMBOL)
    if size != TRACE_LAYOUT["size"]:
        raise ValueError(f"{TRACE_SYMBOL} is {size} bytes, autograder.hangs expects {TRACE_LAYOUT['size']}: "
                         "mbarrier_debug.cuh and TRACE_LAYOUT disagree")
    torch.cuda.synchronize()
    (err,) = driver.cuMemsetD8(ptr, 0, size)
    if err != driver.CUresult.CUDA_SUCCESS:
        raise RuntimeError(f"cuMemsetD8 of the trace: {err}")
    (err,) = driver.cuMemcpyHtoD(ptr + 8, struct.pack("<Q", int(bound_s * 1e9)), 8)
    if err != driver.CUresult.CUDA_SUCCESS:
        raise RuntimeError(f"writing the bound: {err}")
    torch.cuda.synchronize()  # the memset is asynchronous: done before the launch, on whatever stream it goes


def read_trace(cubin, wait_s: float = 5.0) -> bytes | None:
    """The trace's bytes, copied on a stream of its own into pinned memory: this works while a kernel still hangs
    (the copy engine does not wait for it). None when the context is gone (a fault) or the copy does not finish."""
    import ctypes

    from cuda.bindings import driver

    from kernels.launch import device_global

    ptr, size = device_global(cubin, TRACE_SYMBOL)
    err, stream = driver.cuStreamCreate(driver.CUstream_flags.CU_STREAM_NON_BLOCKING)
    if err != driver.CUresult.CUDA_SUCCESS:
        return None
    err, host = driver.cuMemAllocHost(size)
    if err != driver.CUresult.CUDA_SUCCESS:
        return None
    (err,) = driver.cuMemcpyDtoHAsync(host, ptr, size, stream)
    if err != driver.CUresult.CUDA_SUCCESS:
        return None
    t0 = time.perf_counter()
    while True:
        (err,) = driver.cuStreamQuery(stream)
        if err == driver.CUresult.CUDA_SUCCESS:
            return ctypes.string_at(int(host), size)
        if err != driver.CUresult.CUDA_ERROR_NOT_READY or time.perf_counter() - t0 > wait_s:
            return None
        time.sleep(0.005)


@dataclass
class Target:
    label: str  # "slug.answer" or the .cu file's name
    slug: str
    source: str

    @property
    def exercise(self):
        from .spec import load

        return next(iter(load(self.slug).exercises.values()))


def resolve(target: str, exercise: str | None = None) -> Target:
    """"slug.answer" (a known answer; "slug.solution" is the solutions notebook's) or a .cu path (with
    `exercise`: the slug whose launch contract runs it)."""
    if "\n" in target:
        raise ValueError("a kernel's source: give it to explain() (it is written to a file first) or save it as a .cu")
    if target.endswith(".cu") or os.sep in target:
        path = Path(target)
        if not exercise:
            raise ValueError(f"{target}: name the exercise whose launch contract runs it (--exercise <slug>)")
        return Target(path.name, exercise, path.read_text())
    from .known import kernel_source

    slug, _, name = target.partition(".")
    if not name:
        raise ValueError(f"{target!r}: give slug.answer (e.g. warp_specialization.wrong_empty_parity) or a .cu file")
    return Target(target, slug, kernel_source(slug, name))


def _emit(rec: dict) -> None:
    print("HANGS " + json.dumps(rec, default=str), flush=True)


def launch_shape(ex, wl, cubin, shape, seed: int, deadline: float | None, names: dict | None = None,
                 bound_s: float = DEFAULT_BOUND_S) -> dict:
    """One checked launch (kernels.runner.checked_launch) at `shape` on fresh inputs drawn from `seed`: {"shape",
    "status": ok | wrong | hung | error | wait ran out, "check", "wall_s"}; with `names` (a debug build: debug_cubin)
    the trace is reset before and read after — "trace", "lines" (describe) and "diagnosis". After "hung" or "error"
    this process's context cannot launch again (a kernel still runs, or faulted)."""
    from kernels.runner import KernelHang, checked_launch

    inputs = wl.make_inputs(list(shape), seed, device="cuda")
    ref = wl.reference(inputs)
    if names is not None and not names:  # nothing instrumented (a kernel with no mbarrier wait: week 1's days 1-4):
        names = None  # the build has no trace to reset or read; the host's deadline alone bounds the launch
    if names is not None:
        reset_trace(cubin, bound_s)
    rec, t0 = {"shape": list(shape)}, time.perf_counter()
    try:
        _, rep = checked_launch(ex, wl, cubin, inputs, ref, f"{ex.kernel} on shape {tuple(shape)}",
                                deadline_s=deadline)
        rec.update(status="ok" if rep.ok else "wrong", check="" if rep.ok else rep.message.splitlines()[0])
    except KernelHang as exc:
        rec.update(status="hung", check=str(exc))
    except Exception as exc:  # noqa: BLE001 - a fault: reported, and this process ends
        rec.update(status="error", check=f"{type(exc).__name__}: {exc}"[:2000])
    rec["wall_s"] = round(time.perf_counter() - t0, 3)
    if names is not None and rec["status"] == "error":  # the launch faulted: the context is gone, and its trace
        rec["trace"] = None                               # with it (reading it would only raise the fault again)
    elif names is not None:
        raw = read_trace(cubin)
        if raw is None:
            rec["trace"] = None
        else:
            tr = decode_trace(raw, names, keep_blocks={0})
            if tr.stuck and rec["status"] != "hung":  # a fault never gets here: its trace is not read
                rec["status"] = "wait ran out"
            rec.update(trace=tr.to_dict(), lines=describe(tr), diagnosis=diagnose(tr, rec["status"] == "hung"))
    return rec


def _child(a) -> int:
    """One process: compile (debug or plain), then each shape through kernels.runner.checked_launch until one is not
    right. Prints a `HANGS {json}` line per event; ends itself (os._exit) after a hang or a fault."""
    from kernels.compile import compile_cuda
    from kernels.launch import get_kernel
    from kernels.runner import derive

    t = resolve(a.child, a.exercise)
    ex = t.exercise
    wl = ex.workload()
    names: dict[int, str] = {}
    if a.mode == "debug":
        cubin, names = debug_cubin(t.source, ex.answer_var)
    else:
        cubin = compile_cuda(t.source, name=ex.answer_var)
    get_kernel(cubin, ex.kernel)
    _emit({"event": "compiled", "kernel": ex.kernel, "mode": a.mode, "names": names})
    shapes = json.loads(a.shapes) if a.shapes else [list(s) for s in ex.test_shapes]
    # the debug build ends a hang after its bound: the host's deadline leaves room for that and the drain after it
    deadline = a.deadline if a.deadline is not None else (
        max(ex.launch_timeout_s, 2 * a.bound + 3) if a.mode == "debug" else None)
    for i, shape in enumerate(shapes):
        rec = {"event": "launch", **launch_shape(ex, wl, cubin, shape, derive(a.seed, "hangs", i), deadline,
                                                 names if a.mode == "debug" else None, a.bound)}
        _emit(rec)
        if rec["status"] in ("hung", "error"):
            sys.stdout.flush()
            os._exit(3)
        if rec["status"] != "ok" and not a.all_shapes:
            break
    return 0


# ------------------------------------------------------------------------------------------ on the GPU (parent)
RECORDS_FD = "COURSE_RECORDS_FD"  # the child's private channel: a descriptor no kernel printf can reach


def _spawn(cmd: list[str], timeout_s: float, *, env: dict | None = None, stop_on: str | None = None,
           private_records: bool = False) -> dict:
    """Run `cmd` in a process group of its own; kill the group at the timeout, or 2 s after `stop_on` appears in its
    records (a child that reported a hang for good cannot exit while its kernel runs: autograder.mutants). Output kept
    in a file (it survives the kill). `env`: the child's environment (default: this one), the course root on its
    PYTHONPATH. private_records: the child writes its records to the descriptor named by $COURSE_RECORDS_FD (see
    emit_record), a file of the parent's that a kernel's printf (stdout only) cannot reach — they come back as
    "private", and `stop_on` is looked for there. {"rc", "timed_out", "wall_s", "text", "records", "private"}."""
    base = dict(os.environ if env is None else env)
    base["PYTHONPATH"] = f"{ROOT}{os.pathsep}{base.get('PYTHONPATH', '')}"
    with tempfile.TemporaryFile(mode="w+", encoding="utf-8", errors="replace") as log, \
            tempfile.TemporaryFile(mode="w+", encoding="utf-8", errors="replace") as private:
        fds = (private.fileno(),) if private_records else ()
        if private_records:
            base[RECORDS_FD] = str(private.fileno())
        watched = private if private_records else log
        t0 = time.perf_counter()
        p = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT, start_new_session=True, env=base,
                             pass_fds=fds)
        timed_out, seen_at = False, None
        while p.poll() is None:
            time.sleep(0.1)
            if stop_on is not None and seen_at is None:
                watched.seek(0)
                if stop_on in watched.read():
                    seen_at = time.perf_counter()
            if seen_at is not None and time.perf_counter() - seen_at > 2:
                _kill_group(p)
            elif time.perf_counter() - t0 > timeout_s:
                timed_out = True
                _kill_group(p)  # the grader's: the whole process group, whatever the child forked
        rc = p.wait()
        wall = time.perf_counter() - t0
        log.seek(0)
        text = log.read()
        private.seek(0)
        records_text = private.read() if private_records else ""
    records = [json.loads(line[6:]) for line in text.splitlines() if line.startswith("HANGS {")]
    return {"rc": rc, "timed_out": timed_out, "wall_s": round(wall, 1), "text": text, "records": records,
            "private": records_text}


def emit_record(line: str) -> None:
    """One record line of a child: on its private channel when the parent gave one ($COURSE_RECORDS_FD), else on
    stdout (a command run by hand)."""
    fd = os.environ.get(RECORDS_FD)
    if fd:
        os.write(int(fd), (line + "\n").encode())
    else:
        print(line, flush=True)


def _child_cmd(target: str, mode: str, *, exercise=None, shapes=None, deadline=None, bound=DEFAULT_BOUND_S,
               seed: int = 7, all_shapes: bool = False) -> list[str]:
    cmd = [sys.executable, "-m", "autograder.hangs", "--child", target, "--mode", mode, "--bound", str(bound),
           "--seed", str(seed)]
    if exercise:
        cmd += ["--exercise", exercise]
    if shapes is not None:
        cmd += ["--shapes", json.dumps([list(s) for s in shapes])]
    if deadline is not None:
        cmd += ["--deadline", str(deadline)]
    if all_shapes:
        cmd.append("--all-shapes")
    return cmd


def _launches(run: dict) -> list[dict]:
    return [r for r in run["records"] if r.get("event") == "launch"]


def run_answer(target: str, *, mode: str = "debug", exercise: str | None = None, shapes=None,
               bound_s: float = DEFAULT_BOUND_S, timeout_s: float = 300) -> dict:
    """One answer in a child process (debug build with a bound, or the plain build), shapes in order until one is not
    right. {"target", "mode", "launches": [{"shape", "status", "check", "lines", "diagnosis", ...}], "child"}."""
    run = _spawn(_child_cmd(target, mode, exercise=exercise, shapes=shapes, bound=bound_s), timeout_s)
    launches = _launches(run)
    if run["timed_out"]:
        launches.append({"event": "launch", "status": "hung", "check": f"no answer within {timeout_s:.0f} s"})
    compiled = any(r.get("event") == "compiled" for r in run["records"])
    out = {"target": target, "mode": mode, "launches": launches, "child": {k: run[k] for k in ("rc", "wall_s")}}
    if not compiled or (run["rc"] not in (0, 3) and not launches):
        out["error"] = run["text"][-3000:]
    return out


def _as_file(source: str) -> str:
    """A kernel's source text saved under build/cache (the child process compiles files and known answers)."""
    import hashlib

    from kernels.paths import cache_dir

    path = cache_dir("hangs") / f"kernel_{hashlib.sha256(source.encode()).hexdigest()[:16]}.cu"
    path.write_text(source)
    return str(path)


def explain(target: str, *, exercise: str | None = None, shapes=None, bound_s: float = DEFAULT_BOUND_S,
            quiet: bool = False) -> dict:
    """The debug build of `target` run shape by shape, each launch printed with its stuck warps and a diagnosis.
    `target`: "slug.answer", a .cu path, or a kernel's source text (a notebook's answer string) with `exercise`."""
    from kernels.device import cpu_mode_reason, is_hopper

    label = "your kernel" if "\n" in target else target
    if not is_hopper():
        print(f"needs an sm_90 GPU: this runs the debug build of {label} ({cpu_mode_reason()})")
        return {"target": label, "skipped": cpu_mode_reason()}
    if "\n" in target:
        if not exercise:
            raise ValueError("a kernel's source needs exercise=<slug>: whose launch contract runs it")
        from kernels.compile import NotAttempted, clean_source

        try:
            target = _as_file(clean_source(target))
        except NotAttempted as exc:
            print(exc)
            return {"target": label, "skipped": str(exc)}
    res = run_answer(target, mode="debug", exercise=exercise, shapes=shapes, bound_s=bound_s)
    if not quiet:
        print(f"{label}: debug build (COURSE_DEBUG_BARRIERS, bound {bound_s:g} s)")
        if "error" in res:
            print("  the run failed:\n" + res["error"])
        for r in res["launches"]:
            check = f" — {r['check']}" if r.get("check") else ""
            print(f"  shape {tuple(r.get('shape') or ())}: {r['status']}{check}")
            for line in r.get("lines") or ():
                print(f"    {line}")
            for line in r.get("diagnosis") or ():
                print(f"    -> {line}")
            if r["status"] in ("wait ran out", "hung", "error") and r.get("trace") is None and "lines" in r:
                print("    (no trace: the context was gone after the fault)")
    return res


# ------------------------------------------------------------------------------------------- compute-sanitizer
def sanitizer_binary() -> str | None:
    """compute-sanitizer: $COMPUTE_SANITIZER, PATH, the CUDA toolkit's bin/."""
    from kernels.paths import cuda_tool

    return cuda_tool("compute-sanitizer", env="COMPUTE_SANITIZER")


_SAN_LINE = re.compile(r"^=========(?P<indent>\s+)(?P<body>.*?)\s*$")
_ERR_SUMMARY = re.compile(r"ERROR SUMMARY: (\d+) errors?")
_RACE_SUMMARY = re.compile(r"RACECHECK SUMMARY: (\d+) hazards? displayed \((\d+) errors?, (\d+) warnings?\)")
_BANNERS = ("COMPUTE-SANITIZER", "ERROR SUMMARY", "RACECHECK SUMMARY", "LEAK SUMMARY")


def _kind(head: str) -> str:
    h = head.lower()
    if "race reported" in h or re.search(r"potential \w+ hazard", h):
        return "race"
    if "barrier error" in h:
        return "barrier"
    if h.startswith("program hit"):
        return "api"
    if "internal sanitizer error" in h:
        return "internal"
    if re.search(r"invalid __\w+__|misaligned|out of bounds|uninitialized|illegal|exception|leak", h):
        return "memory"
    return "note"


def parse_sanitizer(text: str, tool: str) -> dict:
    """compute-sanitizer's output (any tool) as facts: {"summary": seen, "errors" (the tool's own count),
    "warnings", "reports" (records of the device code: races, barrier errors, bad accesses), "api_errors",
    "by_kind", "first" (the first device report with its location), "notes"}. A record is a `========= ` line
    with one space of indent; lines with more indent continue it."""
    records: list[list[str]] = []
    summary, errors, warnings = False, None, 0
    current = None
    for line in text.splitlines():
        m = _SAN_LINE.match(line)
        if not m:
            continue
        body = m.group("body")
        if not body:
            current = None
            continue
        if len(m.group("indent").replace("\t", "    ")) > 1 and current is not None:
            current.append(body.strip())
            continue
        if (s := _RACE_SUMMARY.search(body)) is not None:
            summary, errors, warnings = True, int(s.group(2)), int(s.group(3))
            current = None
            continue
        if (s := _ERR_SUMMARY.search(body)) is not None:
            summary = True
            errors = int(s.group(1)) if tool != "racecheck" or errors is None else errors
            current = None
            continue
        if body.startswith(_BANNERS):
            current = None
            continue
        current = [body]
        records.append(current)
    kinds: dict[str, int] = {}
    for r in records:
        kinds[_kind(r[0])] = kinds.get(_kind(r[0]), 0) + 1
    device = [r for r in records if _kind(r[0]) in ("race", "barrier", "memory")]
    first = None
    if device:
        where = next((x for x in device[0][1:] if x.startswith(("at ", "and "))), "")
        first = device[0][0] + (f" ({where})" if where else "")
    return {"summary": summary, "errors": errors, "warnings": warnings, "reports": len(device),
            "api_errors": kinds.get("api", 0), "by_kind": kinds, "first": first,
            "internal_error": kinds.get("internal", 0) > 0,
            "notes": [r[0] for r in records if _kind(r[0]) in ("note", "internal")][:3]}


def verdict(parsed: dict, child: dict, *, correct: bool) -> str:
    """One word for one (answer, tool): caught / not caught (a bad answer), clean / false alarm (the solution),
    hung, or error (the tool said nothing usable, or the solution's launch failed). A bad answer whose launch fails
    under the tool as it does without it (a fault the tool reports only as the failed API call, no device-side
    report: measured on multicast.early_exit) is not caught: the tool added nothing to what the launch said."""
    if parsed["reports"]:
        return "false alarm" if correct else "caught"
    if child.get("timed_out") or child.get("status") == "hung":
        return "hung"
    if not parsed["summary"] or parsed["internal_error"] or child.get("status") is None \
            or (correct and child.get("status") == "error"):
        return "error"
    return "clean" if correct else "not caught"


def sanitize(target: str, tool: str, shape, *, deadline_s: float, timeout_s: float | None = None,
             exercise: str | None = None, correct: bool = False, mode: str = "plain",
             bound_s: float = SANITIZE_BOUND_S) -> dict:
    """`target` at `shape` under compute-sanitizer's `tool`, killed at the timeout. The verdict, the tool's counts and
    first message, and what the launch itself said (ok / wrong / hung / error). mode "plain": the answer as graded;
    "debug": the debug barrier build (for an answer that hangs: its stuck waits end after `bound_s`, so the tool
    reports on a launch that ends instead of being killed with it)."""
    san = sanitizer_binary()
    if san is None:
        return {"tool": tool, "verdict": "error", "first": "compute-sanitizer not found (CUDA toolkit bin/)"}
    ex_kernel = resolve(target, exercise).exercise.kernel
    cmd = [san, "--tool", tool, "--kernel-name", f"kns={ex_kernel}", "--print-limit", "20",
           *_child_cmd(target, mode, exercise=exercise, shapes=[shape], deadline=deadline_s, bound=bound_s)]
    run = _spawn(cmd, timeout_s or deadline_s + 45)  # + the tool's start and the target's teardown
    launch = next(iter(_launches(run)), {})
    child = {"status": launch.get("status"), "check": launch.get("check"), "timed_out": run["timed_out"],
             "rc": run["rc"], "wall_s": run["wall_s"], "launch_wall_s": launch.get("wall_s")}
    parsed = parse_sanitizer(run["text"], tool)
    res = {"tool": tool, "shape": list(shape), "build": mode, "verdict": verdict(parsed, child, correct=correct),
           **parsed, "launch": child}
    if res["verdict"] == "error":
        res["tail"] = run["text"][-2000:]
    return res


def sanitizer_version() -> str | None:
    san = sanitizer_binary()
    if san is None:
        return None
    p = subprocess.run([san, "--version"], capture_output=True, text=True, timeout=60)
    return " ".join(line.strip() for line in p.stdout.splitlines() if line.strip())[-200:] or None


# --------------------------------------------------------------------------------------------------- the record
def record_path(slug: str, tag: str) -> Path:
    return ROOT / "kernels" / slug / f"sanitizer_{tag}.json"


def load_record(slug: str) -> dict | None:
    """kernels/<slug>/sanitizer_<gpu>.json of the GPU this process runs on, else the H100's, else another GPU's;
    None if `make gpu-test` has written none. Its "device" and "date" say where and when it was measured."""
    from kernels.record import DEFAULT_TAG, here

    found = sorted((ROOT / "kernels" / slug).glob("sanitizer_*.json"))
    for p in [record_path(slug, t) for t in (here(), DEFAULT_TAG) if t] + found:
        if p.exists():
            return json.loads(p.read_text())
    return None


def show_record(slug: str, width: int = 100) -> dict | None:
    """Print what the record says: per answer, the debug build's stuck warps and diagnosis, then each tool's verdict
    with its first message — every line under the GPU and date it was measured on."""
    doc = load_record(slug)
    if doc is None:
        print(f"no record yet of {slug}'s hangs and races: `make gpu-test` measures them "
              f"(kernels/{slug}/sanitizer_<gpu>.json)")
        return None
    print(f"Measured on {doc['device']} on {doc['date']} (compute-sanitizer: {doc.get('compute_sanitizer')}):")
    for name, a in doc["answers"].items():
        d = (a.get("debug") or [{}])[0]
        shape = tuple(a.get("shape") or ())
        print(f"\n{slug}.{name} at shape {shape}: plain build {a.get('plain_status')}; debug build {d.get('status')}")
        for line in (d.get("lines") or [])[:3] + [f"-> {x}" for x in (d.get("diagnosis") or [])[:3]]:
            print(f"    {line}"[:width + 40])
        for tool, r in (a.get("tools") or {}).items():
            first = f": {r['first']}" if r.get("first") else ""
            print(f"    {tool:<9} {r['verdict']:<11} ({r.get('errors')} errors){first}"[:width + 40])
    return doc


# ---------------------------------------------------------------------------------- the step of make gpu-test
def _first_failing(probe: dict):
    """(shape, status) of the first launch that was not right; (None, "ok") if all were; (None, "error") if the run
    never got to a launch (it did not compile, or the process died first)."""
    bad = next(((r.get("shape"), r["status"]) for r in probe["launches"] if r["status"] != "ok"), None)
    return bad or ((None, "error") if "error" in probe else (None, "ok"))


def hangs_and_races(out: Path, slugs=None, tools=TOOLS, record: bool | None = None) -> dict:
    """For each week-2 slug: every known answer that hangs or races (HANGS_AND_RACES) and the course solution,
    (1) the plain build over the spec's shapes until one fails (which shape shows the bug), (2) the debug build at
    that shape (the stuck warps' lines), (3) each compute-sanitizer tool at that shape — the solution first, at the
    largest shape any bad answer needed, whose time under the tool bounds the bad answers' deadline. Written to
    out/sanitizer/<slug>.json and, when recording (COURSE_RECORD=1), kernels/<slug>/sanitizer_<gpu>.json."""
    from kernels.device import gpu
    from kernels.record import device_tag
    from .spec import load

    g = gpu() or {}
    record = os.environ.get("COURSE_RECORD") == "1" if record is None else record
    version = sanitizer_version()
    ok, docs = True, {}
    for slug in [s for s in (slugs or HANGS_AND_RACES) if s in HANGS_AND_RACES]:
        ex = next(iter(load(slug).exercises.values()))
        answers = {}
        for name in ("correct", *HANGS_AND_RACES[slug]):
            probe = run_answer(f"{slug}.{name}", mode="plain", timeout_s=600)
            shape, status = _first_failing(probe)
            answers[name] = {"plain": probe["launches"], "shape": shape, "plain_status": status}
            print(f"  {slug}.{name}: plain build {status}" + (f" at shape {tuple(shape)}" if shape else ""), flush=True)
        order = [list(s) for s in ex.test_shapes]
        bad_shapes = [a["shape"] for n, a in answers.items() if n != "correct" and a["shape"]]
        big = max(bad_shapes, key=lambda s: order.index(list(s)) if list(s) in order else -1) if bad_shapes \
            else order[0]
        answers["correct"]["shape"] = big
        for name, a in answers.items():
            shape = a["shape"] or list(ex.test_shapes[-1])
            dbg = run_answer(f"{slug}.{name}", mode="debug", shapes=[shape], timeout_s=120)
            a["debug"] = dbg["launches"][:1] or [{"status": "error", "check": dbg.get("error", "")[-1500:]}]
            for d in a["debug"]:  # the record keeps the lines and the diagnosis, not the whole trace
                tr = d.pop("trace", None)
                d["stuck_waits"] = tr["n_stuck"] if tr else None
            d = a["debug"][0]
            ok &= name != "correct" or d["status"] == "ok"  # the debug build leaves a right kernel right
            print(f"  {slug}.{name} debug build at {tuple(shape)}: {d['status']}", flush=True)
            for line in (d.get("lines") or [])[:4] + (d.get("diagnosis") or [])[:3]:
                print(f"      {line}", flush=True)
        for tool in tools:
            base = sanitize(f"{slug}.correct", tool, answers["correct"]["shape"], deadline_s=600, timeout_s=900,
                            correct=True)
            answers["correct"].setdefault("tools", {})[tool] = base
            took = base["launch"].get("launch_wall_s") or 60
            for name in HANGS_AND_RACES[slug]:
                a = answers[name]
                hangs = a["plain_status"] in HUNG  # under the tool it would hang too: the debug build ends it
                res = sanitize(f"{slug}.{name}", tool, a["shape"] or answers["correct"]["shape"],
                               deadline_s=min(300.0, max(20.0, 3 * took)) + (SANITIZE_BOUND_S if hangs else 0),
                               correct=False, mode="debug" if hangs else "plain")
                a.setdefault("tools", {})[tool] = res
            for name in ("correct", *HANGS_AND_RACES[slug]):
                r = answers[name]["tools"][tool]
                print(f"  {tool:<9} {slug}.{name:<22} {r['verdict']:<11} errors {r.get('errors')} "
                      f"{(r.get('first') or '')[:110]}", flush=True)
                ok &= r["verdict"] != "error"  # a false alarm on the solution is a finding, recorded
        doc = {"device": g.get("name"), "driver": g.get("driver"), "date": time.strftime("%Y-%m-%d"),
               "compute_sanitizer": version, "tools": list(tools), "bound_s": DEFAULT_BOUND_S,
               "what": "week 2 known answers that hang or race, and the course solution: the plain build over the "
                       "spec's shapes (first failing shape), the debug build (COURSE_DEBUG_BARRIERS) and "
                       "compute-sanitizer at that shape (autograder.hangs.hangs_and_races)",
               "answers": answers}
        docs[slug] = doc
        (out / "sanitizer").mkdir(parents=True, exist_ok=True)
        (out / "sanitizer" / f"{slug}.json").write_text(json.dumps(doc, indent=1, default=str) + "\n")
        if record:
            record_path(slug, device_tag(g.get("name"))).write_text(
                json.dumps(doc, indent=1, default=str) + "\n")
    verdicts = {s: {n: {t: r["verdict"] for t, r in a.get("tools", {}).items()} for n, a in d["answers"].items()}
                for s, d in docs.items()}
    return {"ok": ok, "compute_sanitizer": version, "verdicts": verdicts}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m autograder.hangs", description=__doc__.split("\n\n")[0])
    ap.add_argument("target", nargs="?", help="slug.answer (a known answer) or a .cu file (with --exercise)")
    ap.add_argument("--exercise", help="the slug whose launch contract runs a .cu file")
    ap.add_argument("--shapes", help='JSON list of shapes (default: the spec\'s test shapes), e.g. "[[4096, 4104]]"')
    ap.add_argument("--bound", type=float, default=DEFAULT_BOUND_S, help="seconds a wait may take (debug build)")
    ap.add_argument("--tool", choices=("memcheck", "racecheck", "synccheck", "initcheck"),
                    help="run under compute-sanitizer instead (the plain build, the first shape given)")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--mode", choices=("debug", "plain"), default="debug", help=argparse.SUPPRESS)
    ap.add_argument("--deadline", type=float, help=argparse.SUPPRESS)
    ap.add_argument("--seed", type=int, default=7, help=argparse.SUPPRESS)
    ap.add_argument("--all-shapes", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.child:
        return _child(a)
    if not a.target:
        ap.error("name a target: slug.answer or a .cu file")
    shapes = json.loads(a.shapes) if a.shapes else None
    if a.tool:
        t = resolve(a.target, a.exercise)
        shape = (shapes or [list(t.exercise.test_shapes[0])])[0]
        res = sanitize(a.target, a.tool, shape, deadline_s=120, exercise=a.exercise)
        print(json.dumps(res, indent=1, default=str))
        return 0
    res = explain(a.target, exercise=a.exercise, shapes=shapes, bound_s=a.bound)
    return 0 if "skipped" in res or all(r["status"] == "ok" for r in res.get("launches", [])) else 1


if __name__ == "__main__":
    sys.exit(main())
