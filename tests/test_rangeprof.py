"""kernels/rangeprof.py calls CUPTI's range profiler through ctypes: every parameter struct must be laid out as
cupti_range_profiler.h declares it (the header ships in nvidia-cuda-cupti, which cupti-python installs), and its
structSize must be the header's STRUCT_SIZE (through the last member, no tail padding). The GPU side — one range per
counted launch of the timing loop, one pass, the TMA bytes of a kernel that runs TMA only while young reading 0 — is `make gpu-test`'s
known-answer step (tma/watched_only)."""

import ctypes
import re
from pathlib import Path

import pytest

from kernels import rangeprof

# ours -> the header's struct, with the header's member names in order (ours are shorter: obj for the object pointer)
STRUCTS = {
    rangeprof.Enable: "CUpti_RangeProfiler_Enable_Params",
    rangeprof.Stop: "CUpti_RangeProfiler_Stop_Params",
    rangeprof.Push: "CUpti_RangeProfiler_PushRange_Params",
    rangeprof.Decode: "CUpti_RangeProfiler_DecodeData_Params",
    rangeprof.DataSize: "CUpti_RangeProfiler_GetCounterDataSize_Params",
    rangeprof.ImageInit: "CUpti_RangeProfiler_CounterDataImage_Initialize_Params",
    rangeprof.SetConfig: "CUpti_RangeProfiler_SetConfig_Params",
    rangeprof.DataInfo: "CUpti_RangeProfiler_GetCounterDataInfo_Params",
}
SIMPLE = ("CUpti_RangeProfiler_Start_Params", "CUpti_RangeProfiler_PopRange_Params", "CUpti_RangeProfiler_Disable_Params")
C_TYPES = {"size_t": ctypes.c_size_t, "uint8_t": ctypes.c_uint8, "uint16_t": ctypes.c_uint16,
           "uint32_t": ctypes.c_uint32}


def _header() -> str:
    try:
        import nvidia.cu13
    except ImportError:
        pytest.skip("nvidia-cuda-cupti (cupti-python's CUPTI) is not installed")
    for base in nvidia.cu13.__path__:
        h = Path(base) / "include" / "cupti_range_profiler.h"
        if h.exists():
            return h.read_text()
    pytest.skip("cupti_range_profiler.h not found")


def _members(text: str, struct: str) -> list[tuple[str, str]]:
    body = re.search(r"typedef struct " + struct + r"\s*\{(.*?)\}\s*" + struct + ";", text, re.S).group(1)
    body = re.sub(r"/\*.*?\*/|//[^\n]*", "", body, flags=re.S)
    out = []
    for decl in body.split(";"):
        words = decl.replace("*", " * ").split()
        if words:
            out.append((" ".join(words[:-1]), words[-1]))
    return out


def _ctype(decl: str):
    return ctypes.c_void_p if "*" in decl or decl in ("CUcontext",) else \
        ctypes.c_int if decl.startswith(("CUpti_", "enum")) else C_TYPES[decl.replace("const ", "")]


@pytest.mark.parametrize("ours", list(STRUCTS), ids=[c.__name__ for c in STRUCTS])
def test_each_parameter_struct_is_laid_out_as_the_header_declares(ours):
    text = _header()
    members = _members(text, STRUCTS[ours])
    ref = type("Ref", (ctypes.Structure,), {"_fields_": [(n, _ctype(t)) for t, n in members]})
    assert [f[0] for f in ours._fields_][:2] == ["structSize", "pPriv"] == [n for _, n in members][:2]
    assert len(ours._fields_) == len(members), (ours.__name__, members)
    for (name, ctype), (_, ref_name) in zip(ours._fields_, members):
        assert getattr(ours, name).offset == getattr(ref, ref_name).offset, (ours.__name__, name, ref_name)
        assert ctypes.sizeof(ctype) == getattr(ref, ref_name).size, (ours.__name__, name)
    last = members[-1][1]
    macro = re.search(STRUCTS[ours] + r"_STRUCT_SIZE\s+CUPTI_PROFILER_STRUCT_SIZE\(" + STRUCTS[ours] + r",\s*(\w+)\)",
                      text).group(1)
    assert macro == last  # STRUCT_SIZE runs through the last member
    assert ours.SIZE == getattr(ref, last).offset + getattr(ref, last).size


def test_the_one_member_structs_and_the_enums():
    text = _header()
    for struct in SIMPLE:
        assert [n for _, n in _members(text, struct)] == ["structSize", "pPriv", "pRangeProfilerObject"]
    assert rangeprof.Simple.SIZE == 24 and rangeprof.Init.SIZE == 16
    cache = re.search(r"CUPTI_CACHE_CONTROL_MODE_NONE\s*=\s*(\d+)", text).group(1)
    assert int(cache) == rangeprof.CACHE_CONTROL_NONE
    target = (Path(text and __import__("nvidia.cu13").cu13.__path__[0]) / "include" / "cupti_profiler_target.h").read_text()

    def order(enum_name):  # the members of a C enum without explicit values, in order (their values 0, 1, ...)
        body = re.search(r"typedef enum\s*\{([^}]*)\}\s*" + enum_name + ";", target).group(1)
        body = re.sub(r"/\*.*?\*/|//[^\n]*", "", body, flags=re.S)
        return [w.strip() for w in body.split(",") if w.strip()]

    assert order("CUpti_ProfilerRange").index("CUPTI_UserRange") == rangeprof.USER_RANGE
    assert order("CUpti_ProfilerReplayMode").index("CUPTI_UserReplay") == rangeprof.USER_REPLAY


def test_the_counters_over_timed_launches_are_the_rules_quantities():
    """Every counted quantity is one a path rule names (kernels.ncu), with a positive bytes-per-count."""
    from kernels.ncu import QUANTITIES

    for q, (counter, scale, what) in rangeprof.TIMED.items():
        assert q in QUANTITIES and counter.endswith(".sum") and scale > 0 and what


def test_timed_counters_and_bytes_per_launch_follow_TIMED():
    """The timed counters are TIMED's, in its order; their values become bytes with TIMED's bytes per count."""
    import random

    from kernels import rangeprof

    rc = rangeprof.timed_counters(["ldgsts", "tma_load", "not_a_quantity"])
    assert list(rc.quantities) == [q for q in rangeprof.TIMED if q in ("ldgsts", "tma_load")]
    assert all(rc.quantities[q] == (rangeprof.TIMED[q][0],) for q in rc.quantities)
    rc.values = {q: [float(random.randint(0, 10**6)) for _ in range(random.randint(1, 9))] for q in rc.quantities}
    got = rangeprof.bytes_per_launch(rc)
    assert got == {q: [v * rangeprof.TIMED[q][1] for v in vals] for q, vals in rc.values.items()}


def test_the_counted_launches_hold_the_mechanism_each_spec_names():
    """Each exercise's counted launches hold the `at least` byte rules of one quantity a counter beside the timing can
    measure: the spec's `counted` (the day-4 epilogue: its TMA stores, so an epilogue that stores by TMA only while
    watched — known answer gemm.watched_only — is caught) or the first of TIMED's order its rules name."""
    from autograder.spec import all_specs, load

    for spec in all_specs():
        for name, ex in spec.exercises.items():
            pp = ex.parts["path"]
            eligible = [r for r in pp.executed if not r.opcode and r.at_least is not None
                        and tuple(r.bytes) in (("tma_load",), ("tma_store",), ("ldgsts",)) and r.per in ("read", "written")]
            counted = rangeprof.counted_rules(pp)
            assert len({r.bytes[0] for r in counted}) == (1 if eligible else 0), (spec.slug, name)
            want = pp.counted or next(q for q in rangeprof.TIMED if any(r.bytes[0] == q for r in eligible)) \
                if eligible else None
            assert counted == [r for r in eligible if r.bytes[0] == want], (spec.slug, name)
    gemm = load("gemm").exercises["gemm_epilogue"].parts["path"]
    assert [r.what for r in rangeprof.counted_rules(gemm)] == ["C bytes stored by TMA (UTMASTG), of the bytes C holds"]
    tma = load("tma").exercises["tma_add"].parts["path"]  # loads and stores by TMA, no `counted`: the loads
    assert {r.bytes[0] for r in rangeprof.counted_rules(tma)} == {"tma_load"}


def test_a_spec_cannot_count_what_no_rule_or_counter_names():
    """`counted` must name a quantity a counter beside the timing measures and an `at_least` rule of the part uses."""
    import tomllib

    from autograder.spec import SpecError, parse, spec_path

    data = tomllib.loads(spec_path("gemm").read_text())
    path = data["exercises"]["gemm_epilogue"]["path"]
    for bad in ("global_store", "ldgsts", "nonsense"):
        path["counted"] = bad
        with pytest.raises(SpecError, match="counted"):
            parse(data)
    path["counted"] = "tma_load"
    assert {r.bytes[0] for r in rangeprof.counted_rules(parse(data).exercises["gemm_epilogue"].parts["path"])} \
        == {"tma_load"}
