"""Day 1's model: what a copy kernel's access pattern and bytes in flight allow it to reach.

Two limits, the smaller wins:

1. Access pattern (coalescing). Memory moves whole pieces, not the 4 bytes a thread asked for.
   - L1 <-> L2 moves 32-byte sectors: a warp's load costs `sectors_per_request` sectors; the *sector
     efficiency* e = useful / fetched bytes (kernels.sim.access_efficiency on the kernel's real addresses).
     This is the number Nsight Compute's "sectors per request" shows, and the lesson's main idea.
   - L2 <-> DRAM works in larger granules, and a partly written granule costs a read and a write. The
     *DRAM efficiency* e_dram = useful bytes read + written / DRAM bytes read + written. A copy whose
     pattern has e_dram moves at most ceiling x e_dram useful bytes per second.
2. Bytes in flight (Little's law). A thread that issued its loads waits ~LATENCY_NS for them. With B useful
   bytes of loads outstanding per SM, the SMs together read at most B * n_sm / latency; a copy also writes what
   it read, so the copy figure (bytes read + bytes written, as kernels.bench counts it) is twice that.

    prediction = min(ceiling * e_dram, 2 * B * n_sm / latency)

The four kernels of copy.cu (each copies n float32 words; 256-thread blocks, 2048 resident threads per SM):

    variant       per thread in flight   warp's 32 addresses             e (sectors)   e_dram
    strided       1 x 4 B                4 * cols bytes apart (cols=32)  4/32          8/192 = 0.042
    scalar        1 x 4 B                consecutive words               1.0           1.0
    vec16         1 x 16 B               consecutive float4              1.0           1.0
    grid_stride   4 x 16 B               consecutive float4, 4 loads     1.0           1.0

Why strided's e_dram is 0.042 and not the sector count's 0.125 (measured on an H100 80GB HBM3, cuda-core 1.2.0,
2^28 words, copy ceiling 3.01 TB/s): the strided copy ran at 0.133 TB/s, a third of ceiling x 4/32 = 0.376.
Splitting it, strided reads alone cost ~64 bytes of ceiling-rate traffic per 4-byte word (one 64-byte DRAM
granule), strided writes ~2x that; over cols = 2, 4, 8, 32 the copy followed ceiling x e_dram within 8%
(1.02 / 0.51 / 0.255 / 0.133 TB/s against 1.00 / 0.50 / 0.25 / 0.125). DRAM_GRANULE_BYTES and
PARTIAL_WRITE_COST are those fitted numbers, not NVIDIA documentation; reading them as "HBM is accessed in
64-byte pieces" and "a partial write is read-modify-written (ECC)" is our interpretation. cols = 16 and 64 fit
worse (0.183 and 0.089 measured vs 0.125): DRAM page locality, which this model ignores, shifts with the span.

Assumptions (say so when a measurement disagrees):
- `ceiling_tbps` is the copy ceiling measured in the same run (kernels.bench), not the datasheet's 3.35 TB/s.
- Every resident thread has its loads outstanding all the time. Real threads also spend time issuing, storing
  and being replaced by the next block, so LATENCY_NS is an *effective* latency fit to measurements, larger
  than a pointer-chasing latency.
- strided: no sector is reused from L2. True for the benchmark (n = 2^28, cols = 32): a sector is needed again
  one column later, n / cols = 8 Mi rows (256 MB of sectors) later, far beyond the 50 MB L2. For a small n,
  pass `l2_tbps` to let L2 absorb the reuse.
- The strided kernel's 64-bit `%` and `/` cost instructions too; at cols <= 2 that, not memory, sets its time
  (1.9 TB/s at cols = 1 against 2.4 TB/s for copy_scalar).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..sim import (H100, access_efficiency, littles_law_bandwidth, read_traffic_bytes, warp_addresses,
                   write_traffic_bytes)

__all__ = [
    "LATENCY_NS", "IDLE_LATENCY_NS", "LATENCY_SLOPE_NS_PER_TBPS", "DRAM_GRANULE_BYTES", "PARTIAL_WRITE_COST", "STRIDED_COLS", "BENCH_N",
    "CopyVariant", "VARIANTS", "warp_load_addresses", "efficiency", "dram_efficiency", "bytes_in_flight",
    "predict_copy_tbps", "predict_all", "fit_latency_ns", "explain",
]

# Effective load latency seen by a streaming copy at full occupancy (2048 threads/SM), ns.
# fit to H100 measurements in recorded_h100.json. Provisional value: fit_latency_ns() of copy_scalar on an
# H100 80GB HBM3 (2.405 TB/s at 2048 threads/SM, copy ceiling 3.00 TB/s; twice, in one session) gave 899 ns.
LATENCY_NS = 900.0

# Loaded latency: latency grows with the bandwidth being drawn (queueing). Fit to the same H100: copy_scalar with
# 256 / 512 / 1024 / 2048 threads per SM (occupancy capped with dynamic shared memory) drew 0.44 / 0.79 / 1.40 /
# 2.41 TB/s, i.e. effective latencies 616 / 681 / 775 / 899 ns ~ 560 + 140 * TB/s. Used when loaded=True.
IDLE_LATENCY_NS = 560.0
LATENCY_SLOPE_NS_PER_TBPS = 140.0

# DRAM-side constants, fit to the strided-copy measurements described in the module docstring.
DRAM_GRANULE_BYTES = 64    # fit: strided reads cost ~64 B of ceiling-rate traffic per 4-byte word
PARTIAL_WRITE_COST = 2.0   # fit: a partly written granule costs ~2 granules (read + write)

# Mirrors kernels/naive_loads/workload.py (a test checks they agree); kept here so the model imports no torch.
STRIDED_COLS = 32
BENCH_N = 1 << 28
WORD_BYTES = 4


@dataclass(frozen=True)
class CopyVariant:
    name: str
    bytes_per_load: int     # bytes one thread loads with one instruction
    loads_per_thread: int   # independent loads a thread issues before its first store
    lane_stride_bytes: int | None  # distance between consecutive lanes' addresses (None: 4 * cols)
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
    """Byte offsets of one warp's 32 loads (one load instruction) in the kernel of copy.cu. The stores go to
    the same offsets of y.

    strided: thread t reads element i = (t % rows) * cols + t // rows, so consecutive threads of a warp (same
    t // rows) are cols elements = 4 * cols bytes apart.
    """
    v = _variant(variant)
    stride = WORD_BYTES * cols if v.lane_stride_bytes is None else v.lane_stride_bytes
    return warp_addresses(stride)


def efficiency(variant: str, cols: int = STRIDED_COLS) -> float:
    """Sector efficiency of one warp load: useful / fetched bytes in 32-byte sectors (L1 <-> L2)."""
    return access_efficiency(warp_load_addresses(variant, cols), _variant(variant).bytes_per_load)


def dram_efficiency(variant: str, cols: int = STRIDED_COLS, *, granule: int | None = None,
                    partial_write_cost: float | None = None) -> float:
    """Useful / DRAM bytes of one warp's load + store, DRAM working in `granule`-byte pieces and a partly
    written granule costing `partial_write_cost` granules (defaults: the fitted module constants).
    Assumes no reuse between warps (see the module docstring)."""
    g = DRAM_GRANULE_BYTES if granule is None else granule
    pw = PARTIAL_WRITE_COST if partial_write_cost is None else partial_write_cost
    addrs = warp_load_addresses(variant, cols)
    nbytes = _variant(variant).bytes_per_load
    useful = 2 * len(addrs) * nbytes  # bytes read + bytes written (lanes touch distinct bytes)
    dram = read_traffic_bytes(addrs, nbytes, g) + write_traffic_bytes(addrs, nbytes, g, pw)
    return useful / dram


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
                      n_sm: int = H100.sm_count, granule: int | None = None,
                      partial_write_cost: float | None = None, l2_tbps: float | None = None,
                      l2_bytes: int = H100.l2_bytes, loaded: bool = False) -> float:
    """Predicted copy bandwidth (TB/s, bytes read + written) of `variant`, given the copy ceiling measured in
    the same run: min(ceiling x DRAM efficiency, 2 x Little's-law read bandwidth of the bytes in flight).

    granule=32, partial_write_cost=1.0 gives the plain sector model, ceiling x 4/32 for strided.
    l2_tbps (strided only): when given and a sector's reuse fits in L2 (2 * (n / cols) sectors <= l2_bytes),
    DRAM moves each byte once and the limit becomes min(ceiling, l2_tbps x sector efficiency) instead.
    loaded=True: the latency is IDLE_LATENCY_NS + LATENCY_SLOPE_NS_PER_TBPS x (the bandwidth drawn), solved
    self-consistently; better away from full occupancy (on the H100, the constant latency under-predicts
    copy_scalar at 256 threads/SM by 32%, the loaded one by 1%).
    """
    lat = LATENCY_NS if latency_ns is None else latency_ns
    pattern_limit = ceiling_tbps * dram_efficiency(variant, cols, granule=granule,
                                                   partial_write_cost=partial_write_cost)
    if l2_tbps is not None and variant == "strided":
        live_sectors = 2 * (n // cols)  # one sector per row being read + one being written
        if live_sectors * H100.sector_bytes <= l2_bytes:
            pattern_limit = min(ceiling_tbps, l2_tbps * efficiency(variant, cols))
    inflight = bytes_in_flight(variant, threads_per_sm, loads_per_thread, bytes_per_load)
    if loaded:
        latency_limit = _loaded_bandwidth(2 * inflight * n_sm / 1e3)
    else:
        latency_limit = 2 * littles_law_bandwidth(inflight, lat, n_sm)
    return min(pattern_limit, latency_limit)


def _loaded_bandwidth(concurrency: float, idle_ns: float | None = None, slope: float | None = None) -> float:
    """Solve bw = concurrency / (idle + slope * bw) for bw (TB/s); concurrency in TB/s x ns."""
    l0 = IDLE_LATENCY_NS if idle_ns is None else idle_ns
    k = LATENCY_SLOPE_NS_PER_TBPS if slope is None else slope
    if k == 0:
        return concurrency / l0
    return (-l0 + (l0 * l0 + 4 * k * concurrency) ** 0.5) / (2 * k)


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
        "Model: copy bandwidth = min(ceiling x DRAM efficiency, 2 x bytes in flight per SM x SMs / latency)",
        f"  (effective latency {lat:.0f} ns, fit to H100 measurements; {H100.sm_count} SMs; 2048 threads per SM; "
        "the 2 counts the write of every byte read)",
    ]
    for name in VARIANTS:
        e, ed = efficiency(name), dram_efficiency(name)
        b = bytes_in_flight(name)
        ll = 2 * littles_law_bandwidth(b, lat)
        line = (f"  {name:<12} e = {e:.3f} ({len(set(a // 32 for a in warp_load_addresses(name)))} sectors per "
                f"warp load), e_dram = {ed:.3f}, {b // 1024:>3} KiB in flight/SM -> Little's law {ll:.2f} TB/s")
        if ceiling_tbps is not None:
            p = predict_copy_tbps(name, ceiling_tbps, latency_ns=lat)
            line += f"; predicted {p:.2f} TB/s = {p / ceiling_tbps:.0%} of the {ceiling_tbps:.2f} TB/s ceiling"
        lines.append(line)
    lines.append(f"strided uses {efficiency('strided'):.1%} of each 32-byte sector and {dram_efficiency('strided'):.1%} "
                 f"of what DRAM moves for it ({DRAM_GRANULE_BYTES}-byte granules, partial writes cost "
                 f"{PARTIAL_WRITE_COST:g}x: both fit to H100 measurements). The coalesced variants use every "
                 "byte; bytes in flight separate them:")
    for name in VARIANTS:
        if name == "strided":
            continue
        ll = 2 * littles_law_bandwidth(bytes_in_flight(name), lat)
        if ceiling_tbps is None:
            verdict = f"latency-bound below {ll:.2f} TB/s"
        elif ll < ceiling_tbps * dram_efficiency(name):
            verdict = "latency-bound: too few bytes in flight to reach the ceiling"
        else:
            verdict = "ceiling-bound: enough bytes in flight"
        lines.append(f"  {name:<12} {verdict}")
    return "\n".join(lines)
