"""Day 1's model: what a copy kernel's access pattern and bytes in flight allow it to reach.

Two limits, the smaller wins:

1. Sectors (coalescing). DRAM and L2 move whole 32-byte sectors. A warp's load touches some set of sectors;
   only the bytes the lanes asked for are useful. With efficiency e = useful / fetched bytes (kernels.sim.
   access_efficiency on the kernel's real addresses), a memory system that moves `ceiling` TB/s of sectors
   delivers at most ceiling * e of useful copy bandwidth.
2. Bytes in flight (Little's law). A thread that issued its loads waits ~LATENCY_NS for them. With B useful
   bytes of loads outstanding per SM, the SMs together read at most B * n_sm / latency; a copy also writes what
   it read, so the copy figure (bytes read + bytes written, as kernels.bench counts it) is twice that.

    prediction = min(ceiling * e, 2 * B * n_sm / latency)

The four kernels of copy.cu (each copies n float32 words; all launched with 256-thread blocks, 2048 resident
threads per SM):

    variant       per thread in flight     warp's 32 addresses               e
    strided       1 x 4 B                  4 * cols bytes apart (cols=32)    4/32 = 0.125
    scalar        1 x 4 B                  consecutive words                 1.0 (4 sectors)
    vec16         1 x 16 B                 consecutive float4                1.0 (16 sectors)
    grid_stride   4 x 16 B                 consecutive float4, 4 loads       1.0

Assumptions (say so when a measurement disagrees):
- `ceiling_tbps` is the copy ceiling measured in the same run (kernels.bench), not the datasheet's 3.35 TB/s.
- Every resident thread has its loads outstanding all the time. Real threads spend part of their life issuing,
  storing and being replaced by the next block, so the concurrency is lower: LATENCY_NS is an *effective*
  latency fit to measurements, larger than a pointer-chasing latency.
- strided: no sector is reused from L2. True for the benchmark (n = 2^28, cols = 32): a sector is needed again
  one column later, n / cols = 8 Mi rows (256 MB of sectors) later, far beyond the 50 MB L2. For a small n,
  pass `l2_tbps` to let L2 absorb the reuse (DRAM then moves each sector once and the L2's own sector rate,
  times e, becomes the limit).
- Stores are fire-and-forget and cost no concurrency; their sectors cost the same as the loads' (both are in
  the ceiling).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..sim import H100, access_efficiency, littles_law_bandwidth, warp_addresses

__all__ = [
    "LATENCY_NS", "STRIDED_COLS", "BENCH_N", "CopyVariant", "VARIANTS",
    "warp_load_addresses", "efficiency", "bytes_in_flight", "predict_copy_tbps", "predict_all",
    "fit_latency_ns", "explain",
]

# Effective load latency seen by a streaming copy, ns.
LATENCY_NS = 600.0  # fit to H100 measurements in recorded_h100.json (placeholder until then; see kernels.sim.H100)

# Mirrors kernels/naive_loads/workload.py (a test checks they agree); kept here so the model imports no torch.
STRIDED_COLS = 32
BENCH_N = 1 << 28
WORD_BYTES = 4


@dataclass(frozen=True)
class CopyVariant:
    name: str
    bytes_per_load: int     # bytes one thread loads with one instruction
    loads_per_thread: int   # independent loads a thread issues before its first store
    lane_stride_bytes: int | None  # distance between consecutive lanes' addresses (None: depends on cols)
    description: str


VARIANTS: dict[str, CopyVariant] = {
    "strided": CopyVariant("strided", 4, 1, None,
                           "column walk of an (n/cols, cols) view: lanes 4*cols bytes apart"),
    "scalar": CopyVariant("scalar", 4, 1, 4, "thread t copies word t: a warp reads one 128-byte line"),
    "vec16": CopyVariant("vec16", 16, 1, 16, "thread t copies float4 t: a warp reads 512 contiguous bytes"),
    "grid_stride": CopyVariant("grid_stride", 16, 4, 16,
                               "persistent grid, 4 independent float4 loads per thread before storing"),
}


def _variant(name: str) -> CopyVariant:
    try:
        return VARIANTS[name]
    except KeyError:
        raise ValueError(f"variant {name!r}: choose one of {tuple(VARIANTS)}") from None


def warp_load_addresses(variant: str, cols: int = STRIDED_COLS) -> list[int]:
    """Byte offsets of one warp's 32 loads (one load instruction) in the kernel of copy.cu.

    strided: thread t reads element i = (t % rows) * cols + t // rows, so consecutive threads of a warp (same
    t // rows) are cols elements = 4 * cols bytes apart.
    """
    v = _variant(variant)
    stride = WORD_BYTES * cols if v.lane_stride_bytes is None else v.lane_stride_bytes
    return warp_addresses(stride)


def efficiency(variant: str, cols: int = STRIDED_COLS) -> float:
    """Useful / fetched bytes of one warp load of `variant` (1.0 = every fetched sector byte is used)."""
    return access_efficiency(warp_load_addresses(variant, cols), _variant(variant).bytes_per_load)


def bytes_in_flight(variant: str, threads_per_sm: int = H100.max_threads_per_sm,
                    loads_per_thread: int | None = None, bytes_per_load: int | None = None) -> int:
    """Useful load bytes outstanding per SM: threads x independent loads per thread x bytes per load.
    loads_per_thread / bytes_per_load default to the variant's kernel."""
    v = _variant(variant)
    loads = v.loads_per_thread if loads_per_thread is None else loads_per_thread
    nbytes = v.bytes_per_load if bytes_per_load is None else bytes_per_load
    return threads_per_sm * loads * nbytes


def predict_copy_tbps(variant: str, ceiling_tbps: float, *, threads_per_sm: int = H100.max_threads_per_sm,
                      loads_per_thread: int | None = None, bytes_per_load: int | None = None,
                      latency_ns: float | None = None, cols: int = STRIDED_COLS, n: int = BENCH_N,
                      n_sm: int = H100.sm_count, l2_tbps: float | None = None,
                      l2_bytes: int = H100.l2_bytes) -> float:
    """Predicted copy bandwidth (TB/s, bytes read + written) of `variant`, given the copy ceiling measured in
    the same run: min(ceiling x sector efficiency, 2 x Little's-law read bandwidth of the bytes in flight).

    l2_tbps (strided only): when given and a sector's reuse fits in L2 (2 * (n / cols) sectors <= l2_bytes),
    DRAM moves each sector once and the limit becomes min(ceiling, l2_tbps x efficiency) instead.
    """
    lat = LATENCY_NS if latency_ns is None else latency_ns
    e = efficiency(variant, cols)
    sector_limit = ceiling_tbps * e
    if l2_tbps is not None and variant == "strided":
        live_sectors = 2 * (n // cols)  # one sector per row being read + one being written
        if live_sectors * H100.sector_bytes <= l2_bytes:
            sector_limit = min(ceiling_tbps, l2_tbps * e)
    inflight = bytes_in_flight(variant, threads_per_sm, loads_per_thread, bytes_per_load)
    latency_limit = 2 * littles_law_bandwidth(inflight, lat, n_sm)
    return min(sector_limit, latency_limit)


def predict_all(ceiling_tbps: float, **kw) -> dict[str, float]:
    """predict_copy_tbps for every variant (same keyword arguments)."""
    return {name: predict_copy_tbps(name, ceiling_tbps, **kw) for name in VARIANTS}


def fit_latency_ns(measured_tbps: float, variant: str = "scalar", *,
                   threads_per_sm: int = H100.max_threads_per_sm, n_sm: int = H100.sm_count) -> float:
    """The latency at which Little's law gives exactly `measured_tbps` for `variant` (use a variant that ran
    below the ceiling, i.e. latency-bound; a ceiling-bound measurement only gives an upper bound)."""
    inflight = bytes_in_flight(variant, threads_per_sm)
    return 2 * inflight * n_sm / (measured_tbps * 1e3)


def explain(ceiling_tbps: float | None = None, latency_ns: float | None = None) -> str:
    """A short account of the model for the notebook, with the numbers it uses."""
    lat = LATENCY_NS if latency_ns is None else latency_ns
    lines = [
        "Model: copy bandwidth = min(ceiling x sector efficiency, 2 x bytes in flight per SM x SMs / latency)",
        f"  (latency {lat:.0f} ns — fit to the H100 recordings; {H100.sm_count} SMs; 2048 threads per SM; the 2 "
        "counts the write of every byte read)",
    ]
    for name, v in VARIANTS.items():
        e = efficiency(name)
        b = bytes_in_flight(name)
        ll = 2 * littles_law_bandwidth(b, lat)
        line = (f"  {name:<12} e = {e:.3f} ({len(set(a // 32 for a in warp_load_addresses(name)))} sectors per "
                f"warp load), {b // 1024:>3} KiB in flight/SM -> Little's law {ll:.2f} TB/s")
        if ceiling_tbps is not None:
            p = predict_copy_tbps(name, ceiling_tbps, latency_ns=lat)
            line += f"; predicted {p:.2f} TB/s = {p / ceiling_tbps:.0%} of the {ceiling_tbps:.2f} TB/s ceiling"
        lines.append(line)
    e_strided = efficiency("strided")
    lines.append(f"strided uses {e_strided:.0%} of every sector it fetches, whatever its bytes in flight. "
                 "The others use every byte; what separates them is bytes in flight:")
    if ceiling_tbps is not None:
        for name in VARIANTS:
            if name == "strided":
                continue
            ll = 2 * littles_law_bandwidth(bytes_in_flight(name), lat)
            verdict = ("latency-bound (too few bytes in flight)" if ll < ceiling_tbps * efficiency(name)
                       else "ceiling-bound (enough bytes in flight)")
            lines.append(f"  {name:<12} {verdict}")
    else:
        lines.append("  a variant is latency-bound while its Little's-law figure is below the copy ceiling.")
    return "\n".join(lines)
