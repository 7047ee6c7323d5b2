"""autograder.hangs on the CPU: the debug barrier build (compiled out without its macro, compiled in for every kernel
that waits on a barrier, its trace layout equal to the header's), the trace decoder and its diagnosis on trace bytes
written as the device writes them, compute-sanitizer's output parsed from samples in its documented format, the
process group that a hang's timeout kills, and the list of week 2's hanging and racing answers. What the debug
build and the sanitizer do with real kernels is measured by `make gpu-test` (tools/gpu_check.py, step "hangs and
races"), not here."""

import json
import re
import struct
import sys
import tomllib
from pathlib import Path

import pytest

from autograder import hangs, hangs_trace, spawn
from autograder.hangs import HANGS_AND_RACES
from autograder.hangs_trace import (STUCK_REC, TRACE_LAYOUT, debug_cubin, decode_trace, describe, diagnose, instrument,
                                    trace_layout)
from autograder.sanitizer import parse_sanitizer, verdict
from autograder.known import known_cu_files, known_dir
from kernels.compile import compile_cuda
from kernels.sass import disassemble

ROOT = Path(__file__).resolve().parent.parent
WEEK2 = ("swizzle", "warp_specialization", "multicast", "gemm", "attention")


# ------------------------------------------------------------------------------------------------- the debug build
def test_the_trace_layout_is_the_headers():
    L = TRACE_LAYOUT
    probe = "\n".join([
        *(f"#define {k} {v}" for k, v in hangs_trace.DEBUG_DEFINES.items()),
        '#include "mbarrier.cuh"',
        f'static_assert(sizeof(CourseBarrierTrace) == {L["size"]}, "trace size");',
        *(f'static_assert(__builtin_offsetof(CourseBarrierTrace, {k}) == {L[k]}, "{k}");'
          for k in ("names", "inits", "stuck", "warps")),
        f'static_assert(sizeof(CourseBarrierWarp) == {L["warp_bytes"]}, "warp record");',
        f'static_assert(sizeof(CourseBarrierStuck) == {STUCK_REC.size}, "stuck record");',
        'extern "C" __global__ void k() { mbar_wait(0, 0); }', ""])
    compile_cuda(probe, name="trace_layout.cu")  # a static_assert that fails is a compile error


def _cu_files_with_barriers():
    files = sorted(p for p in (ROOT / "kernels").rglob("*.cu") if "grading" not in p.parts) + \
        known_cu_files()  # the topics' kernels, then the known answers
    from kernels.compile import _strip_comments

    def waits_through_the_headers(text):  # calls the course's wait (a file may define its own wrappers instead)
        return re.search(r"\bmbar_wait(_cluster)?\s*\(", text) and not re.search(r"void\s+mbar_wait\b", text)

    return [f for f in files if waits_through_the_headers(_strip_comments(f.read_text()))]


def _timer_reads(cubin) -> int:
    return sum("SR_GLOBALTIMER" in i.text for ins in disassemble(cubin).values() for i in ins)


@pytest.mark.parametrize("path", _cu_files_with_barriers(), ids=lambda p: str(p.relative_to(ROOT)))
def test_the_debug_build_compiles_for_every_kernel_that_waits_on_a_barrier(path):
    plain = compile_cuda(path)
    debug, names = debug_cubin(path.read_text(), name=path.name)
    assert sorted(debug.kernels) == sorted(plain.kernels)
    assert _timer_reads(plain) == 0 and _timer_reads(debug) > 0, "the debug wait reads %globaltimer"
    assert disassemble(debug) != disassemble(plain)


@pytest.mark.parametrize("target", [f"{s}.{n}" for s, ns in HANGS_AND_RACES.items() for n in ("solution", *ns)])
def test_the_debug_build_compiles_for_the_answers_it_measures(target):
    from autograder.known import kernel_source
    from autograder.spec import load

    slug, name = target.split(".")
    ex = next(iter(load(slug).exercises.values()))
    debug, names = debug_cubin(kernel_source(slug, name), name=ex.answer_var)
    assert ex.kernel in debug.kernels and _timer_reads(debug) > 0
    assert names, f"{target}: no barrier variable named"


def test_without_the_macro_the_debug_api_emits_nothing():
    # mbar_debug_tag is in the plain headers (so a kernel may keep its tags) and compiles to nothing there
    plain = '#include "mbarrier.cuh"\nextern "C" __global__ void k(int* p) { %s p[threadIdx.x] = 1; }\n'
    ops = lambda src: [i.text for i in disassemble(compile_cuda(src, name="tag.cu"))["k"]]  # noqa: E731
    assert ops(plain % "mbar_debug_tag(threadIdx.x);") == ops(plain % "")
    # and the plain module has no trace
    from kernels.compile import compile_cuda as cc

    assert b"course_barrier_trace" not in cc(plain % "mbar_wait(0, 0);", name="plain.cu").data
    dbg = cc(plain % "mbar_wait(0, 0);", name="dbg.cu", defines=hangs_trace.DEBUG_DEFINES)
    assert b"course_barrier_trace" in dbg.data


def test_instrument_names_the_barriers_and_keeps_line_numbers():
    src = """#include "mbarrier.cuh"
__shared__ unsigned long long at_namespace_scope;
// __shared__ unsigned long long in_a_comment;
extern "C" __global__ void k() {
    __shared__ __align__(8) unsigned long long full[4], empty[4];  // two rings
    __shared__ alignas(8) uint64_t q_full;
    extern __shared__ unsigned char smem_raw[];
    __shared__ float not_a_barrier[32];
    mbar_wait(smem_addr(&full[1]), 0);
}
"""
    text, names = instrument(src)
    assert names == {0: "full", 1: "empty", 2: "q_full"}
    assert len(text.splitlines()) == len(src.splitlines())
    line = text.splitlines()[4]
    assert line.index("COURSE_DEBUG_NAME_BARRIER(full, 0);") < line.index("COURSE_DEBUG_NAME_BARRIER(empty, 1);") \
        < line.index("// two rings")
    assert "COURSE_DEBUG_NAME_BARRIER(q_full, 2);" in text.splitlines()[5]
    assert "at_namespace_scope" not in text.split("COURSE_DEBUG")[0] or "NAME_BARRIER(at_namespace_scope" not in text
    assert instrument("extern \"C\" __global__ void k() {}\n") == ("extern \"C\" __global__ void k() {}\n", {})


# ------------------------------------------------------------------------------------ the trace, as the GPU writes it
SMALL = trace_layout(warps=64, stuck=64, slots=32)
FULL, EMPTY = 0x400, 0x440  # full[8] then empty[8], as static shared memory after the 1 KiB reserved


class FakeTrace:
    """Trace bytes written field by field where mbarrier_debug.cuh's device code writes them."""

    def __init__(self, layout=SMALL, timeout_ns=2_000_000_000, wpb=12):
        self.L, self.raw, self.wpb = layout, bytearray(layout["size"]), wpb
        struct.pack_into("<Q", self.raw, 8, timeout_ns)
        self.n_init = self.n_stuck = 0

    def name(self, i, addr, nbytes):
        struct.pack_into("<II", self.raw, self.L["names"] + 8 * i, addr, nbytes)

    def init(self, addr, count):
        struct.pack_into("<II", self.raw, self.L["inits"] + 8 * self.n_init, addr, count)
        self.n_init += 1
        struct.pack_into("<I", self.raw, 24, self.n_init)

    def _warp(self, block, warp):
        return self.L["warps"] + (block * self.wpb + warp) * self.L["warp_bytes"]

    def _tracked(self, block, warp):  # my_warp(): nullptr beyond the table
        return block * self.wpb + warp < self.L["n_warps"]

    def _slot(self, block, warp, bar):
        base = self._warp(block, warp) + 40
        for s in range(self.L["n_slots"]):
            b, w, a = struct.unpack_from("<III", self.raw, base + 12 * s)
            if b in (0, bar):
                struct.pack_into("<I", self.raw, base + 12 * s, bar)
                return base + 12 * s
        raise AssertionError("slots full")

    def done(self, block, warp, bar, parity, times=1):
        if not self._tracked(block, warp):
            return
        at = self._warp(block, warp)
        completed = struct.unpack_from("<I", self.raw, at + 16)[0]
        struct.pack_into("<IIIII", self.raw, at, block + 1, warp, bar, parity, completed + times)
        s = self._slot(block, warp, bar)
        struct.pack_into("<I", self.raw, s + 4, struct.unpack_from("<I", self.raw, s + 4)[0] + times)

    def arrive(self, block, warp, bar, lanes=1, times=1):
        if not self._tracked(block, warp):
            return
        at = self._warp(block, warp)
        struct.pack_into("<II", self.raw, at, block + 1, warp)
        arrived = struct.unpack_from("<I", self.raw, at + 32)[0]
        struct.pack_into("<II", self.raw, at + 28, bar, arrived + lanes * times)
        s = self._slot(block, warp, bar)
        struct.pack_into("<I", self.raw, s + 8, struct.unpack_from("<I", self.raw, s + 8)[0] + lanes * times)

    def stuck(self, block, warp, bar, parity, *, own=False, lanes=0xFFFFFFFF, waited=2.0, tag=None):
        self.n_stuck += 1
        struct.pack_into("<II", self.raw, 0, 1, self.n_stuck)  # atomicAdd, then: past the table, not recorded
        if self.n_stuck > self.L["n_stuck"]:
            return
        flags = int(own)
        if not self._tracked(block, warp):  # beyond the warp table: no record, waits untracked
            waits, flags = hangs_trace.UNTRACKED, flags | 4
        else:  # slot_of() makes the barrier's slot if the warp has none yet
            waits = struct.unpack_from("<I", self.raw, self._slot(block, warp, bar) + 4)[0]
        STUCK_REC.pack_into(self.raw, self.L["stuck"] + STUCK_REC.size * (self.n_stuck - 1), block, warp, bar,
                            parity, waits, flags, lanes, tag or 0, int(tag is not None), 0, int(waited * 1e9))

    def decode(self, names=None):
        return decode_trace(bytes(self.raw), names or {0: "full", 1: "empty"}, layout=self.L)


def _ring(blocks=(0, 1, 2)):
    t = FakeTrace()
    t.name(0, FULL, 64)
    t.name(1, EMPTY, 64)
    for s in range(8):
        t.init(FULL + 8 * s, 1)
        t.init(EMPTY + 8 * s, 8)
    return t


def test_a_producer_waiting_on_the_wrong_first_parity():
    # warp_specialization.wrong_empty_parity: the producer's first wait on empty[0] asks parity 0; the consumers wait
    # full[0], which the producer arms only after that wait
    t = _ring()
    for b in (0, 1, 2):
        t.stuck(b, 0, EMPTY, 0, own=True, lanes=0x1)
        for w in range(4, 12):
            t.stuck(b, w, FULL, 0, waited=1.99)
    tr = t.decode()
    lines = describe(tr)
    assert lines[0] == ("blocks 0-2 warp 0 (1 lane): waits on empty[0] parity 0, its 1st wait on it (for phase 0); "
                        "ran out after 2.00 s; last completed: none")
    assert lines[1].startswith("blocks 0-2 warp 4 (32 lanes): waits on full[0] parity 0, its 1st wait on it (for "
                               "phase 0); waiting for 1.99 s when the abort came")
    assert len(lines) == 9  # one line per warp, each for the three blocks
    d = diagnose(tr)
    assert "27 warp(s) in 3 block(s)" in d[0] and "deadlock" in d[0]
    assert any("empty[0]" in x and "0 of its 8 arrival(s)" in x and "parity 1" in x for x in d), d
    assert any("full[0]" in x and "0 of its 1 arrival(s)" in x for x in d), d


def test_a_stage_never_released():
    # warp_specialization.missing_empty_arrive: 8 tiles went through; the producer's second wait on empty[0] (use 1,
    # parity 0: for phase 0) finds no arrival ever made on it; the consumers wait for full[0]'s second phase
    t = _ring(blocks=(0,))
    for s in range(8):
        t.done(0, 0, EMPTY + 8 * s, 1)
        t.arrive(0, 0, FULL + 8 * s)
        for w in range(4, 12):
            t.done(0, w, FULL + 8 * s, 0)
    t.stuck(0, 0, EMPTY, 0, own=True, lanes=0x1)
    for w in range(4, 12):
        t.stuck(0, w, FULL, 1)
    tr = t.decode()
    lines = describe(tr)
    assert lines[0].startswith("block 0 warp 0 (1 lane): waits on empty[0] parity 0, its 2nd wait on it (for phase 0)")
    assert lines[0].endswith("last completed: empty[7] parity 1 (8 waits completed)")
    assert "its 2nd wait on it (for phase 1)" in lines[1] and "last completed: full[7] parity 0" in lines[1]
    d = diagnose(tr)
    assert any("empty[0]" in x and "nobody has ever arrived on it" in x for x in d), d
    assert any("full[0]" in x and "phase 1 has 0 of its 1" in x and "arrivals stopped coming" in x for x in d), d


def test_every_arrival_in_but_bytes_missing():
    # multicast.wrong_mask: rank 1 armed its barrier (1 arrival + expect_tx) but the multicast never reached it
    t = FakeTrace(wpb=4)
    bar = 0x400
    t.name(0, bar, 8)
    t.init(bar, 1)
    t.arrive(1, 0, bar)
    for w in range(4):
        t.stuck(1, w, bar, 0, own=(w == 0))
    tr = t.decode(names={0: "full"})
    assert describe(tr)[0].startswith("block 1 warp 0 (32 lanes): waits on full parity 0, its 1st wait on it")
    assert any("all 1 arrival(s) of phase 0 are in" in x and "expect_tx" in x for x in diagnose(tr))


def test_tags_unnamed_barriers_and_untracked_warps():
    t = FakeTrace()
    t.init(0x9000, 2)
    t.stuck(0, 3, 0x9000, 1, own=True, tag=7)
    t.stuck(5, 0, 0x9008, 0)  # no record of this warp at all
    tr = t.decode(names={})
    lines = describe(tr)
    assert "waits on the barrier at shared 0x9000 parity 1 at tag 7, its 1st wait on it (for the phase before the " \
           "first)" in lines[0]
    d = diagnose(tr)
    assert any("never initialised" in x for x in d)
    assert any("0x9008" in x and "mbar_init not seen" in x for x in d)


def test_no_stuck_wait_says_so():
    tr = FakeTrace().decode()
    assert describe(tr) == []
    assert diagnose(tr) == ["no mbarrier wait ran out (bound 2 s): the kernel did not hang on a barrier"]
    assert "cluster barrier" in diagnose(tr, hung=True)[0]


def test_the_trace_survives_json_and_refuses_short_bytes():
    t = _ring()
    t.done(0, 4, FULL, 0, times=3)
    t.stuck(0, 0, EMPTY, 0, own=True, lanes=1)
    tr = t.decode()
    back = hangs_trace.Trace.from_dict(json.loads(json.dumps(tr.to_dict())))
    assert describe(back) == describe(tr) and diagnose(back) == diagnose(tr)
    assert back.warp(0, 4).slots == {FULL: [3, 0]}
    with pytest.raises(ValueError, match="layout needs"):
        decode_trace(b"\0" * 100, {})
    # keep_blocks drops the warp records of other blocks, never those of a stuck block
    t.done(9, 1, FULL, 0)
    assert {w.block for w in decode_trace(bytes(t.raw), {}, layout=SMALL, keep_blocks=set()).warps} == {0}


def test_many_stuck_waits_are_counted_beyond_the_table():
    t = FakeTrace(wpb=1)
    for b in range(500):  # the device counts on past the table (64 here), recording nothing more
        t.stuck(b, 0, FULL, 0)
    lines = describe(t.decode())
    assert lines == ["blocks 0-63 warp 0 (32 lanes): waits on the barrier at shared 0x400 parity 0, its 1st wait on "
                     "it (for phase 0); waiting for 2.00 s when the abort came; last completed: none",
                     "(500 stuck waits in all; the first 64 recorded)"]


# ------------------------------------------------------------------------------------------------ compute-sanitizer
RACECHECK = """========= COMPUTE-SANITIZER
========= Error: Race reported between Write access at ws_axpy+0x1a30 in WS_AXPY_CU:97
=========     and Read access at ws_axpy+0x1b40 in WS_AXPY_CU:102 [2048 hazards]
=========
========= Warning: Race reported between Read access at ws_axpy+0x1c00 in WS_AXPY_CU:104
=========     and Write access at ws_axpy+0x1a30 in WS_AXPY_CU:97 [64 hazards]
=========
HANGS {"event": "launch", "shape": [4096, 4104], "status": "wrong", "check": "1 of 16 mismatches", "wall_s": 41.2}
========= RACECHECK SUMMARY: 2 hazards displayed (1 error, 1 warning)
"""
RACECHECK_CLEAN = """========= COMPUTE-SANITIZER
HANGS {"event": "launch", "shape": [4096, 4104], "status": "ok", "check": "", "wall_s": 38.0}
========= RACECHECK SUMMARY: 0 hazards displayed (0 errors, 0 warnings)
"""
SYNCCHECK = """========= COMPUTE-SANITIZER
========= Barrier error detected. Divergent thread(s) in block.
=========     at ws_axpy+0x3a0 in WS_AXPY_CU:77
=========     by thread (128,0,0) in block (0,0,0)
=========
========= Barrier error detected. Divergent thread(s) in block.
=========     at ws_axpy+0x3a0 in WS_AXPY_CU:77
=========     by thread (128,0,0) in block (1,0,0)
=========
========= ERROR SUMMARY: 2 errors
"""
MEMCHECK = """========= COMPUTE-SANITIZER
========= Invalid __shared__ write of size 16 bytes
=========     at bcast_add+0x2f0 in BCAST_ADD_CU:61
=========     by thread (37,0,0) in block (1,0,0)
=========     Address 0x10408 is out of bounds
=========
========= Program hit CUDA_ERROR_LAUNCH_FAILED (error 719) due to "unspecified launch failure" on CUDA API call to \
cuStreamSynchronize.
=========     Saved host backtrace up to driver entry point at error
=========
========= ERROR SUMMARY: 2 errors
"""
KILLED = """========= COMPUTE-SANITIZER
"""  # a hang: the run was killed before any summary
INTERNAL = """========= COMPUTE-SANITIZER
========= Internal Sanitizer Error: The Sanitizer failed to patch the module
========= ERROR SUMMARY: 1 error
"""


def test_racecheck_output_is_parsed():
    p = parse_sanitizer(RACECHECK, "racecheck")
    assert p["summary"] and p["errors"] == 1 and p["warnings"] == 1 and p["reports"] == 2
    assert p["first"] == ("Error: Race reported between Write access at ws_axpy+0x1a30 in WS_AXPY_CU:97 "
                          "(and Read access at ws_axpy+0x1b40 in WS_AXPY_CU:102 [2048 hazards])")
    assert p["by_kind"] == {"race": 2}
    clean = parse_sanitizer(RACECHECK_CLEAN, "racecheck")
    assert clean["summary"] and clean["errors"] == 0 and clean["reports"] == 0 and clean["first"] is None


def test_synccheck_and_memcheck_output_is_parsed():
    s = parse_sanitizer(SYNCCHECK, "synccheck")
    assert s["errors"] == 2 and s["reports"] == 2 and s["first"].startswith("Barrier error detected. Divergent")
    assert s["first"].endswith("(at ws_axpy+0x3a0 in WS_AXPY_CU:77)")
    m = parse_sanitizer(MEMCHECK, "memcheck")
    assert m["errors"] == 2 and m["reports"] == 1 and m["api_errors"] == 1
    assert m["first"] == "Invalid __shared__ write of size 16 bytes (at bcast_add+0x2f0 in BCAST_ADD_CU:61)"


def test_a_killed_or_broken_run_is_not_clean():
    k = parse_sanitizer(KILLED, "synccheck")
    assert not k["summary"] and k["errors"] is None and k["reports"] == 0
    i = parse_sanitizer(INTERNAL, "racecheck")
    assert i["internal_error"] and i["reports"] == 0


def test_verdicts():
    ran = {"status": "ok", "timed_out": False}
    assert verdict(parse_sanitizer(RACECHECK, "racecheck"), {"status": "wrong"}, correct=False) == "caught"
    assert verdict(parse_sanitizer(RACECHECK, "racecheck"), ran, correct=True) == "false alarm"
    assert verdict(parse_sanitizer(RACECHECK_CLEAN, "racecheck"), {"status": "wrong"}, correct=False) == "not caught"
    assert verdict(parse_sanitizer(RACECHECK_CLEAN, "racecheck"), ran, correct=True) == "clean"
    assert verdict(parse_sanitizer(KILLED, "racecheck"), {"status": None, "timed_out": True}, correct=False) == "hung"
    assert verdict(parse_sanitizer(KILLED, "racecheck"), {"status": "hung"}, correct=False) == "hung"
    assert verdict(parse_sanitizer(INTERNAL, "racecheck"), ran, correct=True) == "error"
    assert verdict(parse_sanitizer(KILLED, "racecheck"), {"status": None, "timed_out": False}, correct=False) == "error"
    # a bad answer's launch that faults under the tool as without it, the tool reporting nothing of its own
    assert verdict(parse_sanitizer(RACECHECK_CLEAN, "racecheck"), {"status": "error"}, correct=False) == "not caught"
    assert verdict(parse_sanitizer(RACECHECK_CLEAN, "racecheck"), {"status": "error"}, correct=True) == "error"


def test_a_hung_run_is_killed_with_its_process_group_and_its_output_kept(tmp_path):
    # the shape of a sanitizer run: a wrapper process whose child hangs after printing a launch record
    child = ("import sys, time; print('HANGS {\"event\": \"launch\", \"status\": \"hung\"}', flush=True); "
             f"open({str(tmp_path / 'pid')!r}, 'w').write(str(__import__('os').getpid())); time.sleep(600)")
    run = spawn._spawn(["sh", "-c", f'"{sys.executable}" -c "$0"; echo never', child], timeout_s=3)
    assert run["timed_out"] and run["wall_s"] < 30
    assert run["records"] == [{"event": "launch", "status": "hung"}] and "never" not in run["text"]
    import os

    pid = int((tmp_path / "pid").read_text())
    with pytest.raises(ProcessLookupError):  # the grandchild went with the group
        for _ in range(50):
            os.kill(pid, 0)
            __import__("time").sleep(0.1)


def test_sanitize_without_the_tool_says_so(monkeypatch):
    monkeypatch.setattr(hangs, "sanitizer_binary", lambda: None)
    r = hangs.sanitize("warp_specialization.correct", "racecheck", [64, 64], deadline_s=5, correct=True)
    assert r["verdict"] == "error" and "not found" in r["first"]


# --------------------------------------------------------------------------------------------------- the answers
def test_the_hanging_and_racing_answers_are_the_known_ones():
    for slug in WEEK2:
        data = tomllib.loads((known_dir(slug) / "expected.toml").read_text())
        hanging = {n for n, d in data.items() if "timeout" in d.get("gpu_status", ())}
        assert hanging <= set(HANGS_AND_RACES.get(slug, ())), f"{slug}: {hanging} hang by design: measure them too"
        for name in HANGS_AND_RACES.get(slug, ()):
            assert name in data, f"{slug}.{name} is not a known answer"
            d = data[name]  # wrong on the GPU: at the test shapes, or at the bench shape only (stale-output) — or a
            # race outside the contract that no GPU run showed, recorded as such (attention.k_early_release)
            assert d.get("correctness") == 0 or "stale-output" in d.get("gpu_flags", ()) \
                or "latent race" in d.get("gpu_outcome", ""), f"{slug}.{name} must fail"


def test_targets_resolve_and_refuse_what_they_cannot_run(tmp_path):
    t = hangs.resolve("warp_specialization.wrong_empty_parity")
    assert t.slug == "warp_specialization" and "BUG" in t.source and t.exercise.kernel == "ws_axpy"
    cu = tmp_path / "mine.cu"
    cu.write_text("// x\n")
    assert hangs.resolve(str(cu), "warp_specialization").source == "// x\n"
    with pytest.raises(ValueError, match="--exercise"):
        hangs.resolve(str(cu))
    with pytest.raises(ValueError, match="slug.answer"):
        hangs.resolve("warp_specialization")


def test_explain_on_a_machine_without_hopper_prints_one_line(capsys):
    from kernels.device import is_hopper

    if is_hopper():
        pytest.skip("this machine has an sm_90 GPU")
    assert "skipped" in hangs.explain("warp_specialization.wrong_empty_parity")
    out = capsys.readouterr().out.strip().splitlines()
    assert len(out) == 1 and out[0].startswith("needs an sm_90 GPU")


def test_gpu_check_runs_the_step_unless_skipped():
    text = (ROOT / "tools" / "gpu_check.py").read_text()
    assert 'if "sanitizer" not in args.skip:' in text and "hangs_and_races" in text
    assert "sanitizer_*.json" in (ROOT / "tools" / "gpu_test.sh").read_text()


# ------------------------------------------------------------------------------------------ the step, with fakes
def test_the_step_picks_shapes_bounds_deadlines_and_writes_the_record(tmp_path, monkeypatch, capsys):
    import kernels.device

    fails = {"wrong_empty_parity": ([64, 64], "hung"), "missing_empty_arrive": ([4096, 4104], "hung"),
             "early_release": ([4096, 4104], "wrong")}

    def run_answer(target, *, mode, shapes=None, timeout_s=0, **kw):
        name = target.split(".")[1]
        if mode == "plain":
            shape, status = fails.get(name, (None, "ok"))
            ok = [{"shape": [64, 64], "status": "ok"}] if shape != [64, 64] else []
            return {"launches": ok + ([{"shape": shape, "status": status}] if shape else [])}
        stuck = name != "correct" and fails[name][1] == "hung"
        return {"launches": [{"shape": shapes[0], "status": "wait ran out" if stuck else "ok",
                              "lines": ["block 0 warp 0 (1 lane): waits on empty[0] parity 0"] if stuck else [],
                              "diagnosis": ["a diagnosis"]}]}

    calls = []

    def sanitize(target, tool, shape, *, deadline_s, timeout_s=None, correct=False, mode="plain", **kw):
        calls.append((target.split(".")[1], tool, shape, deadline_s, mode))
        v = "clean" if correct else ("hung" if fails[target.split(".")[1]][1] == "hung" else "caught")
        return {"tool": tool, "verdict": v, "errors": 0 if v != "caught" else 3, "first": None,
                "launch": {"launch_wall_s": 40.0 if correct else None}}

    monkeypatch.setattr(hangs, "run_answer", run_answer)
    monkeypatch.setattr(hangs, "sanitize", sanitize)
    monkeypatch.setattr(hangs, "sanitizer_version", lambda: "compute-sanitizer (test)")
    monkeypatch.setattr(kernels.device, "gpu", lambda: {"name": "NVIDIA H100 80GB HBM3", "driver": "test"})
    res = hangs.hangs_and_races(tmp_path, ["warp_specialization", "swizzle"], tools=("racecheck", "synccheck"),
                                record=False)
    assert res["ok"] and set(res["verdicts"]) == {"warp_specialization"}
    assert res["verdicts"]["warp_specialization"]["early_release"] == {"racecheck": "caught", "synccheck": "caught"}
    # the solution first, at the largest shape a bad answer needed, with a long deadline; the bad answers at their
    # own failing shape, their deadline three times the solution's launch under the same tool (at least 20 s); an
    # answer that hangs runs as the debug build (its waits end after the bound, which its deadline adds)
    bound = hangs.SANITIZE_BOUND_S
    assert calls[:4] == [("correct", "racecheck", [4096, 4104], 600, "plain"),
                         ("wrong_empty_parity", "racecheck", [64, 64], 120.0 + bound, "debug"),
                         ("missing_empty_arrive", "racecheck", [4096, 4104], 120.0 + bound, "debug"),
                         ("early_release", "racecheck", [4096, 4104], 120.0, "plain")]
    doc = json.loads((tmp_path / "sanitizer" / "warp_specialization.json").read_text())
    assert doc["device"] == "NVIDIA H100 80GB HBM3" and doc["answers"]["correct"]["shape"] == [4096, 4104]
    assert doc["answers"]["wrong_empty_parity"]["debug"][0]["status"] == "wait ran out"
    # the notebook's view of the record
    (tmp_path / "kernels" / "warp_specialization").mkdir(parents=True)
    (tmp_path / "kernels" / "warp_specialization" / "sanitizer_h100.json").write_text(json.dumps(doc))
    monkeypatch.setattr(hangs, "ROOT", tmp_path)
    capsys.readouterr()
    hangs.show_record("warp_specialization")
    out = capsys.readouterr().out
    assert out.startswith("Measured on NVIDIA H100 80GB HBM3 on ")
    assert "warp_specialization.wrong_empty_parity at shape (64, 64): plain build hung; debug build wait ran out" in out
    assert "    block 0 warp 0 (1 lane): waits on empty[0] parity 0" in out and "racecheck hung" in out


def test_a_run_that_never_launched_is_an_error_not_a_pass():
    assert hangs._first_failing({"launches": [], "error": "CompileError"}) == (None, "error")
    assert hangs._first_failing({"launches": [{"shape": [1], "status": "ok"}]}) == (None, "ok")
    assert hangs._first_failing({"launches": [{"shape": [1], "status": "ok"}, {"shape": [2], "status": "wrong"}]}) \
        == ([2], "wrong")


def test_day2_says_what_the_recorded_sanitizer_run_saw():
    """Day 2's section 5b states the H100 record's verdicts in prose: held to the record, so a run that sees a
    mistake (or a false alarm) makes this fail until the sentence is rewritten."""
    import nbformat

    nb = nbformat.read(str(hangs.ROOT / "solutions" / "week2" / "day2_warp_specialization.ipynb"), as_version=4)
    text = " ".join(c.source.replace("\n", " ") for c in nb.cells if c.cell_type == "markdown")
    assert "on the GPU the record names, none of the three tools reported any of the three mistakes" in text
    assert "and none reported anything on the course solution" in text
    doc = json.loads((hangs.ROOT / "kernels" / "warp_specialization" / "sanitizer_h100.json").read_text())
    assert doc["device"].startswith("NVIDIA H100")
    bad = [n for n in doc["answers"] if n != "correct"]
    assert len(bad) == 3 and set(hangs.TOOLS) == set(doc["tools"])
    for name, a in doc["answers"].items():
        want = "clean" if name == "correct" else "not caught"
        assert {t: r["verdict"] for t, r in a["tools"].items()} == {t: want for t in hangs.TOOLS}, name
    # the debug build named the barrier and parity of both hanging answers
    for name in ("wrong_empty_parity", "missing_empty_arrive"):
        d = doc["answers"][name]["debug"][0]
        assert d["status"] == "wait ran out" and any("waits on empty[0] parity 0" in x for x in d["lines"]), name
