"""Hardware counters of the timing loop's launches: CUPTI's range profiler, one pass, no replay.

A profiler that replays a launch (Nsight Compute's kernel, range or application replay) shows the kernel a launch it
can tell apart from the timed ones: a long pause before it, memory restored between passes. Measured on an H100: a
kernel that runs TMA only after a pause ran TMA in every range Nsight Compute replayed and cp.async in the timed loop.
CUPTI's range profiler in user-range, user-replay mode with counters that fit one pass replays nothing: the
counters run while the timing loop runs as it would unwatched, and each pushed range holds exactly one launch:

    with RangeCounters({"tma_load": ("l1tex__m_xbar2l1tex_read_bytes_mem_global_op_tma_ld.sum",)}) as rc:
        for i in range(total):
            if i in counted: rc.push(); launch(...); rc.pop()
            else: timed launch(...)
    rc.values["tma_load"]            # one value per counted launch

A range slows some kernels while it counts (on an H100 a cp.async kernel, not a TMA one; outside a range, with the
profiler started, launches run at full speed), so kernels.bench never times a counted launch: the counted ones are
interleaved with the timed ones at positions drawn from the grader's secret, prepared exactly alike.

The host side (metric configuration, evaluation) is cupti-python's `cupti.profiler_host`; the range profiler's target
calls (cuptiRangeProfiler*, not wrapped by cupti-python) are called through ctypes on the libcupti cupti-python loaded,
with each parameter struct as cupti_range_profiler.h declares it. Needs a GPU, cupti-python and permission to read the
counters (as ncu does); `available()` says why not. Every failure raises RangeUnavailable with the reason.
"""

from __future__ import annotations

import ctypes as C

from .ncu import METRICS

MAX_RANGES = 512
# The quantities of the spec's path rules (kernels.ncu.METRICS) that a hardware counter measures in one pass beside
# the timed loop: quantity -> (counter, bytes per count, what it is). The TMA unit's loaded and stored bytes are exact
# (but not both in one pass: an exercise's counted launches hold one of them, counted_rules); cp.async
# has no byte counter that fits, so its executed instructions x 512 B (32 threads x 16 B) bound the bytes it can move.
TIMED = {
    "tma_load": (METRICS["tma_load"][0], 1.0, "bytes the TMA unit loaded"),
    "tma_store": (METRICS["tma_store"][0], 1.0, "bytes the TMA unit stored"),
    "ldgsts": ("smsp__inst_executed_op_ldgsts.sum", 512.0,
               "LDGSTS executed x 512 B: the most 32 threads x 16 B can copy"),
}


def countable_rules(rules) -> list:
    """The path rules a counter beside the timing can hold a launch to: `at_least` on one quantity in TIMED, per the
    bytes the workload must read or write (the profiled launch alone answers instruction rules, "at most" rules and
    shares of every byte loaded)."""
    return [r for r in rules if not r.opcode and r.at_least is not None and len(r.bytes) == 1
            and r.bytes[0] in TIMED and r.per in ("read", "written")]


def counted_rules(pp) -> list:
    """The rules a timed range holds each counted launch to: the countable rules of ONE quantity — the path part's
    `counted` (e.g. the TMA stores of an epilogue exercise) or else the first of TIMED's order that a rule names. One,
    because the counters of two quantities do not fit one pass together (TMA loads and TMA stores, measured on an
    H100); the profiled launch answers the other quantities' rules."""
    rules = countable_rules(pp.executed)
    want = pp.counted or next((q for q in TIMED if any(r.bytes[0] == q for r in rules)), None)
    return [r for r in rules if r.bytes[0] == want]


def timed_counters(quantities) -> "RangeCounters":
    """RangeCounters over TIMED's counter of each wanted quantity (TIMED's order), not yet entered."""
    return RangeCounters({q: (TIMED[q][0],) for q in TIMED if q in set(quantities)})


def bytes_per_launch(rc: "RangeCounters") -> dict[str, list[float]]:
    """rc's values of TIMED quantities in bytes (counts x TIMED's bytes per count): one list per quantity, one value
    per counted launch."""
    return {q: [v * TIMED[q][1] for v in vals] for q, vals in rc.values.items()}


class RangeUnavailable(RuntimeError):
    """The range profiler cannot run here (no cupti-python, no permission, counters needing more than one pass)."""


def available() -> tuple[bool, str]:
    try:
        import cupti.profiler_host  # noqa: F401
    except Exception as exc:  # noqa: BLE001 - an import that fails for any reason means "not here"
        return False, f"cupti-python is not importable ({type(exc).__name__}: {str(exc)[:200]})"
    return True, ""


def _params(name: str, fields: list) -> type:
    """A CUPTI parameter struct: structSize, pPriv, then `fields`; SIZE = the header's STRUCT_SIZE macro (through the
    last field, no tail padding)."""
    cls = type(name, (C.Structure,), {"_fields_": [("structSize", C.c_size_t), ("pPriv", C.c_void_p)] + fields})
    last = getattr(cls, (fields[-1][0] if fields else "pPriv"))
    cls.SIZE = last.offset + last.size
    return cls


_Obj = C.c_void_p
Enable = _params("Enable", [("ctx", C.c_void_p), ("obj", _Obj), ("cacheControlMode", C.c_int)])
Simple = _params("Simple", [("obj", _Obj)])  # Disable, Start, PopRange
Stop = _params("Stop", [("obj", _Obj), ("passIndex", C.c_size_t), ("targetNestingLevel", C.c_size_t),
                        ("isAllPassSubmitted", C.c_uint8)])
Push = _params("Push", [("obj", _Obj), ("pRangeName", C.c_char_p)])
Decode = _params("Decode", [("obj", _Obj), ("numOfRangeDropped", C.c_size_t)])
DataSize = _params("DataSize", [("obj", _Obj), ("pMetricNames", C.POINTER(C.c_char_p)), ("numMetrics", C.c_size_t),
                                ("maxNumOfRanges", C.c_size_t), ("maxNumRangeTreeNodes", C.c_uint32),
                                ("counterDataSize", C.c_size_t)])
ImageInit = _params("ImageInit", [("obj", _Obj), ("counterDataSize", C.c_size_t), ("pCounterData", C.c_void_p)])
SetConfig = _params("SetConfig", [("obj", _Obj), ("configSize", C.c_size_t), ("pConfig", C.c_void_p),
                                  ("counterDataImageSize", C.c_size_t), ("pCounterDataImage", C.c_void_p),
                                  ("range", C.c_int), ("replayMode", C.c_int), ("maxRangesPerPass", C.c_size_t),
                                  ("numNestingLevels", C.c_uint16), ("minNestingLevel", C.c_uint16),
                                  ("passIndex", C.c_size_t), ("targetNestingLevel", C.c_uint16)])
DataInfo = _params("DataInfo", [("pCounterDataImage", C.c_void_p), ("counterDataImageSize", C.c_size_t),
                                ("numTotalRanges", C.c_size_t)])
Init = _params("Init", [])  # cuptiProfilerInitialize: structSize, pPriv only
USER_RANGE, USER_REPLAY, CACHE_CONTROL_NONE = 2, 3, 0  # CUpti_ProfilerRange, CUpti_ProfilerReplayMode, cache mode


def _libcupti():
    """The libcupti that cupti-python loaded (its path read from this process's memory map)."""
    import cupti.cupti  # noqa: F401 - loads libcupti

    with open("/proc/self/maps") as f:
        for line in f:
            if "libcupti.so" in line:
                return C.CDLL(line.split()[-1])
    raise RangeUnavailable("cupti-python loaded no libcupti.so")


class RangeCounters:
    """One user range per `push()` / `pop()` pair, every counter in one pass (see the module doc). `quantities`:
    name -> the metrics whose sum it is, most wanted first: each is kept if it still fits the one pass, else named in
    `skipped` with the reason. After the block: `values[name]` = one value per range."""

    def __init__(self, quantities: dict[str, tuple[str, ...]], *, max_ranges: int = MAX_RANGES):
        self.quantities = dict(quantities)
        self.metrics = sorted({m for ms in self.quantities.values() for m in ms})
        self.max_ranges = int(max_ranges)
        self.values: dict[str, list[float]] = {}
        self.passes = None
        self.skipped: dict[str, str] = {}  # quantities left out, and why
        self._n = 0
        self._obj = None
        self._host = None

    def _call(self, fn: str, params) -> None:
        params.structSize = type(params).SIZE
        rc = getattr(self._lib, fn)(C.byref(params))
        if rc != 0:
            raise RangeUnavailable(f"{fn} failed (CUPTI error {rc})"
                                   + (": no permission to read the GPU's counters" if rc == 35 else ""))

    def __enter__(self):
        try:
            return self._open()
        except BaseException:
            self._close()
            raise

    def _open(self):
        ok, why = available()
        if not ok:
            raise RangeUnavailable(why)
        import cupti.cupti as cc
        import cupti.profiler_host as ph
        import numpy as np
        import torch

        torch.cuda.synchronize()
        self._lib = _libcupti()
        self._call("cuptiProfilerInitialize", Init())
        name = cc.DeviceGetChipNameParams()
        name.struct_size = cc.DEVICE_GET_CHIP_NAME_PARAMS_STRUCT_SIZE
        name.device_index = torch.cuda.current_device()
        cc.device_get_chip_name(name.ptr)
        self._host = ph.ProfilerHost(name.p_chip_name, ph.ProfilerType.RANGE_PROFILER)
        self._host.initialize()
        # Quantities in the order given, each kept if the counters chosen so far and its own still fit one pass.
        chosen: dict[str, tuple[str, ...]] = {}
        for q, ms in self.quantities.items():
            trial = sorted({m for v in chosen.values() for m in v} | set(ms))
            try:
                config = self._host.create_config_image(metrics=trial)
            except ValueError as exc:
                self.skipped[q] = str(exc)[:200]
                continue
            passes = ph.get_num_of_passes(config)
            if passes == 1:
                chosen[q], self._config, self.metrics = ms, config, trial
            else:
                self.skipped[q] = f"would need {passes} passes with {sorted(chosen)}"
        if not chosen:
            raise RangeUnavailable(f"no quantity fits one pass: {self.skipped}")
        self.quantities = chosen
        self.passes = 1
        ctx = C.c_void_p()
        libcuda = C.CDLL("libcuda.so.1")
        if libcuda.cuCtxGetCurrent(C.byref(ctx)) != 0 or not ctx.value:
            raise RangeUnavailable("no current CUDA context")
        en = Enable(ctx=ctx, cacheControlMode=CACHE_CONTROL_NONE)
        self._call("cuptiRangeProfilerEnable", en)
        self._obj = en.obj
        self._names = (C.c_char_p * len(self.metrics))(*[m.encode() for m in self.metrics])
        ds = DataSize(obj=self._obj, pMetricNames=self._names, numMetrics=len(self.metrics),
                      maxNumOfRanges=self.max_ranges, maxNumRangeTreeNodes=self.max_ranges)
        self._call("cuptiRangeProfilerGetCounterDataSize", ds)
        self._image = np.zeros(ds.counterDataSize, dtype=np.uint8)
        self._call("cuptiRangeProfilerCounterDataImageInitialize",
                   ImageInit(obj=self._obj, counterDataSize=ds.counterDataSize, pCounterData=self._image.ctypes.data))
        self._call("cuptiRangeProfilerSetConfig", SetConfig(
            obj=self._obj, configSize=len(self._config), pConfig=self._config.ctypes.data,
            counterDataImageSize=len(self._image), pCounterDataImage=self._image.ctypes.data, range=USER_RANGE,
            replayMode=USER_REPLAY, maxRangesPerPass=self.max_ranges, numNestingLevels=1, minNestingLevel=1,
            passIndex=0, targetNestingLevel=1))
        self._call("cuptiRangeProfilerStart", Simple(obj=self._obj))
        return self

    def push(self) -> None:
        if self._n >= self.max_ranges:
            raise ValueError(f"more than {self.max_ranges} ranges")
        self._call("cuptiRangeProfilerPushRange", Push(obj=self._obj, pRangeName=f"r{self._n}".encode()))

    def pop(self) -> None:
        self._call("cuptiRangeProfilerPopRange", Simple(obj=self._obj))
        self._n += 1

    def __exit__(self, *exc) -> None:
        import torch

        torch.cuda.synchronize()
        if self._obj is None:
            return
        try:
            stop = Stop(obj=self._obj)
            if exc[0] is not None:  # the timed loop failed: stop quietly, its own error is what counts
                stop.structSize = Stop.SIZE
                self._lib.cuptiRangeProfilerStop(C.byref(stop))
                return
            self._call("cuptiRangeProfilerStop", stop)
            if not stop.isAllPassSubmitted:
                raise RangeUnavailable("the range profiler wants another pass")
            self._call("cuptiRangeProfilerDecodeData", Decode(obj=self._obj))
            info = DataInfo(pCounterDataImage=self._image.ctypes.data, counterDataImageSize=len(self._image))
            self._call("cuptiRangeProfilerGetCounterDataInfo", info)
            rows = [self._host.evaluate_metric_values(self._image, self.metrics, i)
                    for i in range(info.numTotalRanges)]
            col = {m: k for k, m in enumerate(self.metrics)}
            self.values = {q: [float(sum(r[col[m]] for m in ms)) for r in rows] for q, ms in self.quantities.items()}
        finally:
            self._close()

    def _close(self) -> None:
        obj, self._obj = self._obj, None
        if obj is not None:
            self._lib.cuptiRangeProfilerDisable(C.byref(Simple(structSize=Simple.SIZE, obj=obj)))
        if self._host is not None:
            self._host.deinitialize()
            self._host = None
