"""The debug barrier build and its trace (autograder.hangs runs it): `debug_cubin` compiles a kernel with
COURSE_DEBUG_BARRIERS, `instrument` names its `__shared__` barrier variables, `decode_trace` reads the __device__
trace back, `describe` and `diagnose` say who waits on what and what the counts mean; `reset_trace` and `read_trace`
set and read it on the GPU.

The trace layout is mbarrier_debug.cuh's: TRACE_LAYOUT below reads it back (change one, change both).
"""

from __future__ import annotations

import ctypes
import re
import struct
import time
from dataclasses import asdict, dataclass, field
from kernels.compile import _strip_comments


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


# ---------------------------------------------------------------------------------------------- the debug build
_BARRIER_DECL = re.compile(
    r"__shared__\s+(?:(?:__align__|alignas)\s*\(\s*\d+\s*\)\s+)*"
    r"(?:unsigned\s+long\s+long(?:\s+int)?|uint64_t|unsigned\s+__int64)\s+(?P<decls>[^;{}()]+);")


_DECLARATOR = re.compile(r"^\s*(?P<name>[A-Za-z_]\w*)\s*(?:\[[^\]]*\])*\s*$")


def instrument(source: str) -> tuple[str, dict[int, str]]:
    """`source` with each `__shared__` 64-bit barrier variable declared inside a function named in the debug trace
    (COURSE_DEBUG_NAME_BARRIER(var, id) appended on the declaring line: line numbers do not move), and the names by
    id. Barriers elsewhere (in dynamic shared memory, at namespace scope) are reported by address."""
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
