"""The course's model base: H100 constants with their sources, roofline, Little's law, sector counting, a small
discrete-event simulator and the predicted-vs-measured plot. Each day's kernels/<slug>/model.py builds on it.

Everything here is pure Python (numpy/matplotlib only) and runs on CPU. Models predict; recorded_h100.json holds
what the GPU did; a test holds each prediction within its stated band of the recording.
"""

from __future__ import annotations

import heapq
import itertools
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, NamedTuple, Sequence

__all__ = [
    "GPUSpec", "H100",
    "roofline", "littles_law_bandwidth", "bytes_in_flight_needed",
    "warp_addresses", "sectors_per_request", "access_efficiency", "read_traffic_bytes", "write_traffic_bytes",
    "EventSim", "TileTimes", "PipelineResult", "simulate_pipeline",
    "relative_error", "within_band",
    "plot_predicted_vs_measured", "plot_pipeline_timeline",
]


# ----------------------------------------------------------------------------------------------------------------
# H100 constants. Each value says where it comes from and what kind of number it is:
#   "datasheet"  NVIDIA H100 Tensor Core GPU datasheet / Hopper architecture whitepaper (H100 SXM5 80 GB)
#   "guide"      CUDA C++ Programming Guide / Best Practices Guide / Nsight Compute docs (compute capability 9.0)
#   "derived"    computed from the above (the arithmetic is in the source string)
#   "fit"        NOT published by NVIDIA: a placeholder to be fit to the course's own H100 measurements
# ----------------------------------------------------------------------------------------------------------------

_WHITEPAPER = "NVIDIA H100 Tensor Core GPU Architecture whitepaper (2022)"
_DATASHEET = "NVIDIA H100 Tensor Core GPU datasheet, H100 SXM column"
_GUIDE_CC90 = "CUDA C++ Programming Guide, technical specifications per compute capability (9.0)"


@dataclass(frozen=True)
class GPUSpec:
    name: str
    sm_count: int
    hbm_tbps: float                  # peak DRAM bandwidth, 1 TB/s = 1e12 B/s
    l2_bytes: int
    max_threads_per_sm: int
    max_warps_per_sm: int
    max_blocks_per_sm: int
    registers_per_sm: int            # 32-bit registers
    smem_per_sm_bytes: int
    smem_per_block_optin_bytes: int
    smem_reserved_per_block_bytes: int  # shared memory the system holds for each resident block
    smem_banks: int
    bank_bytes: int
    sector_bytes: int
    cache_line_bytes: int
    warp_size: int
    bf16_dense_tflops: float         # tensor-core peak, dense (no sparsity)
    clock_ghz: float                 # the SM clock the datasheet peaks assume
    dram_latency_ns: float
    sources: Mapping[str, str] = field(default_factory=dict, compare=False, hash=False)
    kinds: Mapping[str, str] = field(default_factory=dict, compare=False, hash=False)

    def source(self, name: str) -> str:
        return f"{name} = {getattr(self, name)}: {self.kinds.get(name, '?')} — {self.sources.get(name, '?')}"

    def table(self) -> str:
        """One line per constant: value, kind, source (for a notebook cell)."""
        names = [f for f in self.__dataclass_fields__ if f not in ("name", "sources", "kinds")]
        return "\n".join(self.source(n) for n in names)


H100 = GPUSpec(
    name="H100 SXM5 80GB",
    sm_count=132,
    hbm_tbps=3.35,
    l2_bytes=50 * 1024 * 1024,
    max_threads_per_sm=2048,
    max_warps_per_sm=64,
    max_blocks_per_sm=32,
    registers_per_sm=65536,
    smem_per_sm_bytes=228 * 1024,
    smem_per_block_optin_bytes=227 * 1024,
    smem_reserved_per_block_bytes=1024,
    smem_banks=32,
    bank_bytes=4,
    sector_bytes=32,
    cache_line_bytes=128,
    warp_size=32,
    bf16_dense_tflops=989.0,
    clock_ghz=1.83,
    dram_latency_ns=560.0,
    sources={
        "sm_count": f"{_WHITEPAPER} and {_DATASHEET}: 132 SMs on H100 SXM5 (the full GH100 die has 144)",
        "hbm_tbps": f"{_DATASHEET}: GPU memory bandwidth 3.35 TB/s (HBM3). A copy kernel reaches less; the "
                    "course measures its copy ceiling in every run (kernels.bench) and scales against that",
        "l2_bytes": f"{_WHITEPAPER}: 50 MB L2 cache (in two partitions)",
        "max_threads_per_sm": f"{_GUIDE_CC90}: maximum resident threads per SM = 2048",
        "max_warps_per_sm": f"{_GUIDE_CC90}: maximum resident warps per SM = 64",
        "max_blocks_per_sm": f"{_GUIDE_CC90}: maximum resident blocks per SM = 32",
        "registers_per_sm": f"{_GUIDE_CC90}: 64K 32-bit registers per SM",
        "smem_per_sm_bytes": f"{_GUIDE_CC90}: maximum shared memory per SM = 228 KB",
        "smem_per_block_optin_bytes": f"{_GUIDE_CC90}: maximum shared memory per block = 227 KB (opt-in, "
                                      "cudaFuncAttributeMaxDynamicSharedMemorySize)",
        "smem_reserved_per_block_bytes": f"{_GUIDE_CC90}: 1 KB of shared memory is reserved for system use per "
                                         "thread block (228 KB per SM, 227 KB at most for one block)",
        "smem_banks": "CUDA C++ Programming Guide, shared memory (compute capability 5.x and later): 32 banks, "
                      "successive 32-bit words in successive banks",
        "bank_bytes": "CUDA C++ Programming Guide, shared memory: each bank is 32 bits (4 bytes) wide",
        "sector_bytes": "CUDA C++ Best Practices Guide (coalesced access to global memory: 32-byte "
                        "transactions) and Nsight Compute's memory tables (a sector is 32 aligned bytes)",
        "cache_line_bytes": "Nsight Compute kernel profiling guide: an L1/L2 cache line is 128 bytes = 4 sectors",
        "warp_size": f"{_GUIDE_CC90}: warp size 32",
        "bf16_dense_tflops": f"{_DATASHEET}: BF16 Tensor Core 1,979 TFLOPS *with sparsity*; dense is half, "
                             "~989 TFLOPS. cuBLAS reaches less; the course measures it per run",
        "clock_ghz": "derived: 989.4e12 FLOP/s / (132 SMs x 4096 dense BF16 FLOP/clk/SM) = 1.83 GHz, the boost "
                     "clock the datasheet's tensor-core peak assumes (4096 = 4 tensor cores x 512 FMA x 2, "
                     f"{_WHITEPAPER}); the clock a running H100 holds varies with power and temperature",
        "dram_latency_ns": "fit: NVIDIA publishes no DRAM latency. 560 ns is the zero-load intercept of the "
                           "effective load latency of copy_scalar measured on an H100 80GB HBM3 for this course "
                           "(616 / 681 / 775 / 899 ns while drawing 0.44 / 0.79 / 1.40 / 2.41 TB/s; see "
                           "kernels/naive_loads/model.py). It includes issue overheads, so it is not a pointer-chase "
                           "latency; microbenchmark papers (e.g. Luo et al., 'Benchmarking and Dissecting the Nvidia "
                           "Hopper GPU Architecture', IPDPS 2024, arXiv:2402.13499) measure that one, and report "
                           "several hundred cycles. Refit to recorded_h100.json",
    },
    kinds={
        "sm_count": "datasheet", "hbm_tbps": "datasheet", "l2_bytes": "datasheet",
        "max_threads_per_sm": "guide", "max_warps_per_sm": "guide", "max_blocks_per_sm": "guide",
        "registers_per_sm": "guide", "smem_per_sm_bytes": "guide", "smem_per_block_optin_bytes": "guide",
        "smem_reserved_per_block_bytes": "guide",
        "smem_banks": "guide", "bank_bytes": "guide", "sector_bytes": "guide", "cache_line_bytes": "guide",
        "warp_size": "guide", "bf16_dense_tflops": "datasheet", "clock_ghz": "derived",
        "dram_latency_ns": "fit",
    },
)


# ----------------------------------------------------------------------------------------------------------------
# Roofline and Little's law
# ----------------------------------------------------------------------------------------------------------------

def roofline(flops: float, bytes: float, peak_tflops: float, peak_tbps: float) -> dict:  # noqa: A002
    """Lower-bound time of a kernel doing `flops` FLOPs and moving `bytes` bytes on a machine with the two peaks.

    Returns dict(time_s, bound="memory"|"compute", intensity (FLOP/byte), compute_time_s, memory_time_s,
    ridge_intensity (FLOP/byte where the two roofs meet), attainable_tflops).
    """
    if peak_tflops <= 0 or peak_tbps <= 0:
        raise ValueError("peaks must be positive")
    compute_s = flops / (peak_tflops * 1e12)
    memory_s = bytes / (peak_tbps * 1e12)
    intensity = flops / bytes if bytes else float("inf")
    time_s = max(compute_s, memory_s)
    return {
        "time_s": time_s,
        "bound": "memory" if memory_s >= compute_s else "compute",
        "intensity": intensity,
        "compute_time_s": compute_s,
        "memory_time_s": memory_s,
        "ridge_intensity": peak_tflops / peak_tbps,
        "attainable_tflops": min(peak_tflops, intensity * peak_tbps),
    }


def littles_law_bandwidth(bytes_in_flight_per_sm: float, latency_ns: float, n_sm: int = H100.sm_count,
                          ceiling_tbps: float | None = None) -> float:
    """Bandwidth (TB/s) that `bytes_in_flight_per_sm` outstanding bytes on each of `n_sm` SMs sustain when each
    request takes `latency_ns`: Little's law, throughput = concurrency / latency, capped at `ceiling_tbps`.

    bytes/ns = GB/s, so TB/s = bytes_in_flight * n_sm / latency_ns / 1000.
    """
    if latency_ns <= 0:
        raise ValueError("latency_ns must be positive")
    tbps = bytes_in_flight_per_sm * n_sm / latency_ns / 1e3
    return tbps if ceiling_tbps is None else min(tbps, ceiling_tbps)


def bytes_in_flight_needed(tbps: float, latency_ns: float, n_sm: int = H100.sm_count) -> float:
    """Bytes each SM must keep in flight to sustain `tbps` at `latency_ns` (Little's law solved the other way)."""
    return tbps * 1e3 * latency_ns / n_sm


# ----------------------------------------------------------------------------------------------------------------
# Sector counting: what one warp's load instruction costs the memory system
# ----------------------------------------------------------------------------------------------------------------

def warp_addresses(stride_bytes: int, base: int = 0, lanes: int = 32) -> list[int]:
    """Byte addresses of a warp whose lane l accesses base + l * stride_bytes."""
    return [base + lane * stride_bytes for lane in range(lanes)]


def _touched_sectors(addresses: Iterable[int], bytes_per_access: int, sector: int) -> set[int]:
    out: set[int] = set()
    for a in addresses:
        a = int(a)
        out.update(range(a // sector, (a + bytes_per_access - 1) // sector + 1))
    return out


def sectors_per_request(addresses: Iterable[int], sector: int = 32, *, bytes_per_access: int = 1) -> int:
    """Distinct `sector`-byte sectors touched by one warp's accesses (one address per lane).

    Each access covers [address, address + bytes_per_access); the default counts the sector of each start
    address only, which is exact for naturally aligned accesses of <= 32 bytes.
    """
    return len(_touched_sectors(addresses, bytes_per_access, sector))


def access_efficiency(addresses: Iterable[int], bytes_per_access: int, sector: int = 32) -> float:
    """Useful bytes / fetched bytes for one warp request: distinct bytes the lanes asked for over
    (sectors touched x sector size). 1.0 is perfectly coalesced; 4/32 = 0.125 is one 4-byte word per sector."""
    addresses = [int(a) for a in addresses]
    useful: set[int] = set()
    for a in addresses:
        useful.update(range(a, a + bytes_per_access))
    fetched = len(_touched_sectors(addresses, bytes_per_access, sector)) * sector
    return len(useful) / fetched if fetched else 0.0


def read_traffic_bytes(addresses: Iterable[int], bytes_per_access: int, granule: int = 32) -> int:
    """Bytes the next level must deliver for one warp's reads when it works in `granule`-byte pieces
    (granule=32: the sectors L2 sends to L1; a larger granule models DRAM's access size)."""
    return len(_touched_sectors(addresses, bytes_per_access, granule)) * granule


def write_traffic_bytes(addresses: Iterable[int], bytes_per_access: int, granule: int = 32,
                        partial_cost: float = 1.0) -> float:
    """Bytes one warp's writes cost at a level that works in `granule`-byte pieces: a fully written granule
    costs `granule`; a partly written one costs partial_cost x granule (2.0 models a read-modify-write)."""
    written: dict[int, set[int]] = {}
    for a in addresses:
        for b in range(int(a), int(a) + bytes_per_access):
            written.setdefault(b // granule, set()).add(b)
    return sum(granule * (1.0 if len(bs) == granule else partial_cost) for bs in written.values())


# ----------------------------------------------------------------------------------------------------------------
# Discrete-event simulation
# ----------------------------------------------------------------------------------------------------------------

class EventSim:
    """A minimal discrete-event simulator: schedule callbacks at times, run them in time order.

        sim = EventSim()
        sim.after(5.0, lambda: print(sim.now))   # prints 5.0
        sim.run()

    Ties run in the order they were scheduled. Callbacks may schedule more events.
    """

    def __init__(self) -> None:
        self.now = 0.0
        self._queue: list[tuple[float, int, Callable[..., Any], tuple]] = []
        self._seq = itertools.count()

    def at(self, time: float, fn: Callable[..., Any], *args: Any) -> None:
        if time < self.now:
            raise ValueError(f"cannot schedule at {time} < now {self.now}")
        heapq.heappush(self._queue, (float(time), next(self._seq), fn, args))

    def after(self, delay: float, fn: Callable[..., Any], *args: Any) -> None:
        self.at(self.now + delay, fn, *args)

    def run(self, until: float | None = None) -> float:
        """Run events (up to time `until`, if given); returns the time of the last event run."""
        while self._queue and (until is None or self._queue[0][0] <= until):
            t, _, fn, args = heapq.heappop(self._queue)
            self.now = t
            fn(*args)
        return self.now

    def __len__(self) -> int:
        return len(self._queue)


class TileTimes(NamedTuple):
    tile: int
    load_start: float
    load_end: float
    compute_start: float
    compute_end: float


class PipelineResult(NamedTuple):
    total_time: float
    timeline: list[TileTimes]

    @property
    def compute_busy_fraction(self) -> float:
        """Share of the total time the consumer spends computing (1.0 = compute-bound, loads fully hidden)."""
        busy = sum(t.compute_end - t.compute_start for t in self.timeline)
        return busy / self.total_time if self.total_time else 0.0

    @property
    def consumer_stall(self) -> float:
        """Total time the consumer waited for data after finishing the previous tile."""
        stall, prev_end = 0.0, 0.0
        for t in self.timeline:
            stall += max(0.0, t.compute_start - prev_end)
            prev_end = t.compute_end
        return stall


def _per_tile(x: float | Sequence[float], n: int, name: str) -> list[float]:
    if isinstance(x, (int, float)):
        return [float(x)] * n
    xs = [float(v) for v in x]
    if len(xs) != n:
        raise ValueError(f"{name} has {len(xs)} entries for {n} tiles")
    return xs


def simulate_pipeline(n_tiles: int, stages: int, load_latency: float | Sequence[float],
                      load_interval: float, compute_time: float | Sequence[float]) -> PipelineResult:
    """A producer streams `n_tiles` tiles through a ring of `stages` buffers to a consumer.

    - The producer issues tile i's load when (a) buffer i % stages is free — the consumer has finished tile
      i - stages — and (b) at least `load_interval` after the previous issue (the memory system's throughput:
      tile bytes / bandwidth). Issue order is tile order.
    - A load completes `load_latency` after it is issued; loads overlap each other.
    - The consumer computes tiles in order, each as soon as its data has landed and the previous tile is done.

    Times are in whatever unit you pass (ns, cycles). load_latency and compute_time may be one number or one
    per tile. Returns PipelineResult(total_time, timeline) with one TileTimes per tile.

    Limits: stages = 1 serialises load and compute (n * (latency + compute)); with enough stages the time
    tends to latency + n * max(compute, load_interval).
    """
    if n_tiles < 0 or stages < 1:
        raise ValueError("need n_tiles >= 0 and stages >= 1")
    lat = _per_tile(load_latency, n_tiles, "load_latency")
    comp = _per_tile(compute_time, n_tiles, "compute_time")
    timeline: list[TileTimes] = []
    last_issue = float("-inf")
    prev_compute_end = 0.0
    for i in range(n_tiles):
        buffer_free = timeline[i - stages].compute_end if i >= stages else 0.0
        load_start = max(buffer_free, last_issue + load_interval, 0.0)
        last_issue = load_start
        load_end = load_start + lat[i]
        compute_start = max(load_end, prev_compute_end)
        compute_end = compute_start + comp[i]
        prev_compute_end = compute_end
        timeline.append(TileTimes(i, load_start, load_end, compute_start, compute_end))
    total = timeline[-1].compute_end if timeline else 0.0
    return PipelineResult(total, timeline)


# ----------------------------------------------------------------------------------------------------------------
# Comparing with measurements
# ----------------------------------------------------------------------------------------------------------------

def relative_error(predicted: float, measured: float) -> float:
    """(predicted - measured) / measured."""
    return (predicted - measured) / measured


def within_band(predicted: float, measured: float, band: float = 0.15) -> bool:
    """True when the prediction is within ±band (a fraction) of the measurement."""
    return abs(relative_error(predicted, measured)) <= band


def _row_values(row: Mapping[str, Any]) -> tuple[str, float | None, float | None]:
    label = str(row.get("kernel", row.get("name", "?")))
    if row.get("shape"):
        label += f"\n{row['shape']}"
    measured = None
    for k in ("measured", "tbps", "tflops"):
        if row.get(k) is not None:
            measured = float(row[k])
            break
    predicted = None
    for k in ("predicted", "model_prediction"):
        if row.get(k) is not None:
            predicted = float(row[k])
            break
    return label, measured, predicted


def plot_predicted_vs_measured(rows: Sequence[Mapping[str, Any]], ax=None, title: str = "Model vs measured",
                               band: float = 0.15, outer_band: float = 0.20, unit: str | None = None,
                               ceiling: float | None = None, bar: float | None = None):
    """Bars of the measured figure per kernel, the model's prediction as a marker with ±band (dark) and
    ±outer_band (light) ranges; `ceiling` (the same run's copy or matmul ceiling) and `bar` (an exercise's bar) as
    horizontal lines. Rows are dicts: recorded_h100.json rows work as they are ("kernel", "tbps" or
    "tflops", "model_prediction"), or give "measured" / "predicted" directly. Returns the matplotlib Figure
    (no pyplot state: works headless and shows once in a notebook)."""
    from matplotlib.figure import Figure
    from matplotlib.patches import Patch
    from matplotlib.lines import Line2D

    if ax is None:
        fig = Figure(figsize=(max(5.0, 1.3 * len(rows) + 2), 4.0), layout="constrained")
        ax = fig.add_subplot()
    else:
        fig = ax.figure
    if unit is None:
        unit = "TB/s" if any(r.get("tbps") is not None for r in rows) else (
            "TFLOPS" if any(r.get("tflops") is not None for r in rows) else "")
    xs = list(range(len(rows)))
    labels = []
    for x, row in zip(xs, rows):
        label, measured, predicted = _row_values(row)
        labels.append(label)
        if measured is not None:
            ax.bar(x, measured, width=0.6, color="#4C72B0")
        if predicted is not None:
            ax.fill_between([x - 0.4, x + 0.4], predicted * (1 - outer_band), predicted * (1 + outer_band),
                            color="#DD8452", alpha=0.25, linewidth=0)
            ax.fill_between([x - 0.4, x + 0.4], predicted * (1 - band), predicted * (1 + band),
                            color="#DD8452", alpha=0.45, linewidth=0)
            ax.plot([x], [predicted], marker="D", color="black", linestyle="none")
    for value, text, color, style in ((ceiling, "ceiling", "grey", "--"), (bar, "exercise bar", "#C44E52", ":")):
        if value:
            ax.axhline(value, color=color, linestyle=style, linewidth=1)
            ax.text(-0.4, value * 1.01, f"{text} {value:.2f} {unit}", fontsize="small", color=color)
    ax.set_xticks(xs, labels, rotation=0 if len(rows) <= 4 else 30, ha="center" if len(rows) <= 4 else "right")
    ax.set_ylabel(unit or "value")
    ax.set_title(title)
    ax.set_ylim(bottom=0)
    ax.legend(handles=[
        Patch(color="#4C72B0", label="measured"),
        Line2D([], [], marker="D", color="black", linestyle="none", label="model"),
        Patch(color="#DD8452", alpha=0.45, label=f"model ±{band:.0%}"),
        Patch(color="#DD8452", alpha=0.25, label=f"model ±{outer_band:.0%}"),
    ], loc="best", fontsize="small")
    return fig


def plot_pipeline_timeline(result: PipelineResult, ax=None, title: str = "Pipeline timeline"):
    """Gantt chart of a simulate_pipeline result: one row per tile, load (grey) then compute (blue)."""
    from matplotlib.figure import Figure

    if ax is None:
        fig = Figure(figsize=(7.0, 0.25 * len(result.timeline) + 1.5), layout="constrained")
        ax = fig.add_subplot()
    else:
        fig = ax.figure
    for t in result.timeline:
        ax.barh(t.tile, t.load_end - t.load_start, left=t.load_start, color="#BBBBBB", height=0.8)
        ax.barh(t.tile, t.compute_end - t.compute_start, left=t.compute_start, color="#4C72B0", height=0.8)
    ax.invert_yaxis()
    ax.set_xlabel("time")
    ax.set_ylabel("tile")
    ax.set_title(f"{title} (total {result.total_time:g}, compute busy {result.compute_busy_fraction:.0%})")
    return fig
