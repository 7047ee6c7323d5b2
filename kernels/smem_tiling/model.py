"""Day 2's model: a bank-conflict wavefront counter, and from it the time of each transpose rung.

1. The counter (any access pattern). Shared memory has 32 banks of 4 bytes; word w (byte address // 4) lives in
   bank w % 32. Each bank delivers one 4-byte word per clock, so a warp's access is served in *wavefronts*: in
   one wavefront every bank hands out at most one word (any number of lanes may share that word: a broadcast).

       wavefronts(addresses, width) = sum over phases of  max over banks of  |distinct words asked of the bank|

   Phases: a warp's 32 lanes x `width` bytes are at most 128 bytes (one wavefront's worth) only for width <= 4.
   For 8-byte accesses the hardware serves the two half-warps (lanes 0-15, 16-31) in separate phases; for 16-byte
   accesses the four quarter-warps (lanes 0-7, 8-15, 16-23, 24-31). Conflicts only count within a phase, and a
   conflict-free LDS.64 / LDS.128 costs 2 / 4 wavefronts. Supported widths: 1, 2, 4, 8, 16 bytes, naturally
   aligned; `None` marks an inactive lane. Not modelled: the special cases in which some architectures merge
   uniform-address 64/128-bit accesses across phases (they only ever lower the count).

2. The transpose (kernels/smem_tiling/transpose.cu; one 32x32 tile per block of 32x8 threads). The L1TEX data
   stage of an SM (which serves shared memory AND global accesses) moves one wavefront per clock; DRAM moves the
   bytes; L2 moves 32-byte sectors. The slowest of the three sets the time:

       time = max(DRAM: bytes / (copy ceiling x DRAM_FRACTION_OF_COPY),
                  L1TEX: tiles x wavefronts per tile / (SMs x WAVEFRONTS_PER_CLK x CLOCK_GHZ),
                  L2: tiles x sectors per tile x 32 B / L2_SECTOR_TBPS)

   Wavefronts per tile = shared-memory wavefronts (the counter on the kernel's real STS / LDS addresses, 8 warps x
   4 accesses each way) + one wavefront per distinct 128-byte line of each global access (a coalesced warp access
   of 32 floats is one line; the naive kernel's column store touches 32 lines).

       rung       STS  LDS (per warp access)    per tile: smem + global = total   bound (8192^2)
       naive       -    -                        0 + (32x1 + 32x32) = 1056        L1TEX / L2 (uncoalesced store)
       smem        1   32 (32-way conflict)      (32 + 1024) + 64   = 1120        L1TEX (bank conflicts)
       padded      1    1                        64 + 64            = 128         DRAM
       swizzled    1    1                        64 + 64            = 128         DRAM

   Assumptions (say so when a measurement disagrees):
   - The three resources overlap perfectly (8 resident blocks per SM are in different phases), hence max(), not a
     sum. A kernel on the edge between two limits runs somewhat slower than the max.
   - Every tile costs what an interior tile costs (the tiles of the benchmark shape are all full).
   - The naive kernel's partial-sector stores merge in L2 before they reach DRAM (the 8 stores to one 32-byte
     sector of y come from one block within a few microseconds), so its DRAM bytes are those of the others.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from math import ceil

from ..sim import H100, sectors_per_request

__all__ = [
    "CLOCK_GHZ", "WAVEFRONTS_PER_CLK", "DRAM_FRACTION_OF_COPY", "L2_SECTOR_TBPS", "VARIANTS", "SMEM_VARIANTS",
    "bank", "phases", "wavefronts", "ideal_wavefronts", "conflict_table",
    "tile_smem_addresses", "tile_global_addresses", "bank_map", "TileCost", "tile_cost",
    "Prediction", "predict", "predict_tbps", "predict_all", "explain", "plot_bank_maps",
]

# ------------------------------------------------------------------------------------------------- named constants
# The SM clock while the kernel runs, GHz. kernels.sim.H100.clock_ghz (1.83, the clock the datasheet's tensor peak
# assumes); a memory-bound H100 SXM may hold its 1.98 GHz maximum boost. Fit to recorded_h100.json (the smem rung
# is L1TEX-bound, so its time is tiles x 1120 / (132 x clock)).
CLOCK_GHZ = H100.clock_ghz
# Wavefronts the L1TEX data stage of one SM serves per clock: 32 banks x 4 bytes = 128 bytes per clock (CUDA C++
# Programming Guide, shared memory: 32 banks, each 32 bits wide, one access per bank per clock).
WAVEFRONTS_PER_CLK = 1
# Fraction of the same run's D2D copy ceiling that a DRAM-bound transpose reaches. Fit: a copy streams both sides;
# a transpose's writes leave every block as 32 rows of 128 bytes, `rows * 4` bytes apart.
DRAM_FRACTION_OF_COPY = 0.92
# L2 throughput in 32-byte sector operations x 32 bytes, TB/s. Fit: NVIDIA publishes no L2 bandwidth for H100;
# microbenchmarks report several TB/s. Only the naive rung (32 sectors per warp store) comes near it.
L2_SECTOR_TBPS = 5.5

VARIANTS = ("naive", "smem", "padded", "swizzled")
SMEM_VARIANTS = ("smem", "padded", "swizzled")
TILE = 32
BLOCK_ROWS = 8
ELEMENT_BYTES = 4
LINE_BYTES = H100.cache_line_bytes


# --------------------------------------------------------------------------------------------- the generic counter
def bank(address: int, banks: int = H100.smem_banks, bank_bytes: int = H100.bank_bytes) -> int:
    """Bank of the byte at `address` (shared-memory byte offset)."""
    return (int(address) // bank_bytes) % banks


def phases(width: int) -> int:
    """How many phases a warp's access of `width` bytes per lane is served in: 1 (<= 4 B), 2 (8 B), 4 (16 B)."""
    if width not in (1, 2, 4, 8, 16):
        raise ValueError(f"access width {width}: shared-memory accesses are 1, 2, 4, 8 or 16 bytes per lane")
    return max(1, width // 4)


def _lanes(addresses, width: int) -> list[int | None]:
    lanes = list(addresses)
    if len(lanes) > H100.warp_size:
        raise ValueError(f"{len(lanes)} addresses: a warp has {H100.warp_size} lanes")
    for i, a in enumerate(lanes):
        if a is None:
            continue
        if int(a) < 0:
            raise ValueError(f"lane {i}: negative address {a}")
        if int(a) % width:
            raise ValueError(f"lane {i}: address {a} is not {width}-byte aligned (a misaligned {width}-byte shared "
                             "access faults on the GPU)")
    return lanes


def wavefronts(addresses, width: int = 4, *, banks: int = H100.smem_banks, bank_bytes: int = H100.bank_bytes) -> int:
    """Shared-memory wavefronts one warp-wide access costs.

    addresses: up to 32 byte addresses, one per lane in lane order (None = lane inactive).
    width: bytes each lane accesses (1, 2, 4, 8 or 16), naturally aligned.
    Per phase (see `phases`): max over banks of the number of distinct 4-byte words the phase's lanes ask of that
    bank (lanes sharing a word cost nothing extra); summed over phases with at least one active lane.
    """
    lanes = _lanes(addresses, width)
    n_ph = phases(width)
    per_phase = H100.warp_size // n_ph
    total = 0
    for p in range(n_ph):
        words_by_bank: dict[int, set[int]] = {}
        for a in lanes[p * per_phase:(p + 1) * per_phase]:
            if a is None:
                continue
            a = int(a)
            for w in range(a // bank_bytes, (a + width - 1) // bank_bytes + 1):
                words_by_bank.setdefault(w % banks, set()).add(w)
        if words_by_bank:
            total += max(len(ws) for ws in words_by_bank.values())
    return total


def ideal_wavefronts(width: int = 4, addresses=None) -> int:
    """The conflict-free cost: one wavefront per phase that has an active lane (all 32 lanes active if
    `addresses` is None)."""
    n_ph = phases(width)
    if addresses is None:
        return n_ph
    lanes = _lanes(addresses, width)
    per_phase = H100.warp_size // n_ph
    return sum(any(a is not None for a in lanes[p * per_phase:(p + 1) * per_phase]) for p in range(n_ph))


def conflict_table(addresses, width: int = 4) -> dict[int, list[int]]:
    """bank -> sorted distinct words asked of it (all phases together): what a notebook prints to show a conflict."""
    out: dict[int, set[int]] = {}
    for a in _lanes(addresses, width):
        if a is None:
            continue
        for w in range(int(a) // 4, (int(a) + width - 1) // 4 + 1):
            out.setdefault(w % H100.smem_banks, set()).add(w)
    return {b: sorted(ws) for b, ws in sorted(out.items())}


# ------------------------------------------------------------------------------- the transpose's access patterns
def _smem_offset(variant: str, a: int, b: int) -> int:
    """Byte offset in the kernel's __shared__ tile of logical element (a, b) (tile row a, tile column b)."""
    if variant == "smem":
        return (a * TILE + b) * ELEMENT_BYTES            # float tile[32][32]
    if variant == "padded":
        return (a * (TILE + 1) + b) * ELEMENT_BYTES      # float tile[32][33]
    if variant == "swizzled":
        return (a * TILE + (b ^ a)) * ELEMENT_BYTES      # float tile[32][32], physical column b ^ a
    raise ValueError(f"variant {variant!r} has no shared-memory tile; choose one of {SMEM_VARIANTS}")


def tile_smem_addresses(variant: str, access: str, ty: int, j: int) -> list[int]:
    """Byte offsets of the 32 lanes (tx = 0..31) of warp `ty` in loop step `j` (0, 8, 16, 24) of transpose.cu.

    access "store" (phase 1, STS): lane tx writes logical (ty + j, tx)   — a tile row.
    access "load"  (phase 2, LDS): lane tx reads  logical (tx, ty + j)   — a tile column.
    """
    if access == "store":
        return [_smem_offset(variant, ty + j, tx) for tx in range(TILE)]
    if access == "load":
        return [_smem_offset(variant, tx, ty + j) for tx in range(TILE)]
    raise ValueError(f"access {access!r}: 'store' (STS, phase 1) or 'load' (LDS, phase 2)")


def tile_global_addresses(variant: str, access: str, ty: int, j: int, rows: int, cols: int,
                          bx: int = 0, by: int = 0) -> list[int | None]:
    """Byte offsets (from x's or y's base) of the global access of warp `ty`, step `j`, of tile (bx, by) of
    transpose.cu; None for a lane whose guard is false. access "load" reads x, "store" writes y."""
    out: list[int | None] = []
    for tx in range(TILE):
        r, c = by * TILE + ty + j, bx * TILE + tx  # the element of x this lane loads
        if access == "load":
            out.append((r * cols + c) * ELEMENT_BYTES if r < rows and c < cols else None)
        elif access == "store":
            if variant == "naive":  # writes y[c][r] itself: lanes rows * 4 bytes apart
                out.append((c * rows + r) * ELEMENT_BYTES if r < rows and c < cols else None)
            else:  # writes y[bx*32 + ty + j][by*32 + tx]: a row of y
                yr, yc = bx * TILE + ty + j, by * TILE + tx
                out.append((yr * rows + yc) * ELEMENT_BYTES if yr < cols and yc < rows else None)
        else:
            raise ValueError(f"access {access!r}: 'load' (x) or 'store' (y)")
    return out


def bank_map(variant: str) -> list[list[int]]:
    """bank_map(v)[a][b] = bank of logical tile element (a, b): a column of equal numbers is a conflict."""
    return [[bank(_smem_offset(variant, a, b)) for b in range(TILE)] for a in range(TILE)]


def _steps():
    for ty in range(BLOCK_ROWS):
        for j in range(0, TILE, BLOCK_ROWS):
            yield ty, j


@dataclass(frozen=True)
class TileCost:
    """What one 32x32 tile costs the SM and the memory system."""
    sts_wavefronts: int
    lds_wavefronts: int
    global_wavefronts: int  # one per distinct 128-byte line of each warp's global access
    l2_sectors: int         # 32-byte sectors of the global accesses

    @property
    def smem_wavefronts(self) -> int:
        return self.sts_wavefronts + self.lds_wavefronts

    @property
    def l1_wavefronts(self) -> int:
        return self.smem_wavefronts + self.global_wavefronts


def _lines(addresses) -> int:
    return len({a // LINE_BYTES for a in addresses if a is not None})


def tile_cost(variant: str, rows: int = 8192, cols: int = 8192) -> TileCost:
    """Wavefronts and sectors of the top-left (interior, for shapes >= 32x32) tile of a (rows, cols) transpose."""
    if variant not in VARIANTS:
        raise ValueError(f"variant {variant!r}: choose one of {VARIANTS}")
    sts = lds = 0
    if variant != "naive":
        for ty, j in _steps():
            sts += wavefronts(tile_smem_addresses(variant, "store", ty, j))
            lds += wavefronts(tile_smem_addresses(variant, "load", ty, j))
    glob = sectors = 0
    for ty, j in _steps():
        for access in ("load", "store"):
            addr = tile_global_addresses(variant, access, ty, j, rows, cols)
            glob += _lines(addr)
            live = [a for a in addr if a is not None]
            sectors += sectors_per_request(live, H100.sector_bytes, bytes_per_access=ELEMENT_BYTES) if live else 0
    return TileCost(sts, lds, glob, sectors)


# ------------------------------------------------------------------------------------------------ the prediction
@dataclass(frozen=True)
class Prediction:
    variant: str
    shape: tuple[int, int]
    ms: float
    tbps: float
    bound: str          # "DRAM" | "L1TEX" | "L2"
    dram_ms: float
    l1_ms: float
    l2_ms: float
    tiles: int
    cost: TileCost

    def as_dict(self) -> dict:
        d = asdict(self)
        d["cost"] = {**asdict(self.cost), "smem_wavefronts": self.cost.smem_wavefronts,
                     "l1_wavefronts": self.cost.l1_wavefronts}
        return d


def predict(variant: str, shape=(8192, 8192), copy_tbps: float = H100.hbm_tbps, *, clock_ghz: float | None = None,
            dram_fraction: float | None = None, l2_tbps: float | None = None,
            wavefronts_per_clk: float | None = None, n_sm: int = H100.sm_count) -> Prediction:
    """Predicted time and bandwidth (bytes read + written, as kernels.bench counts) of one transpose rung.
    copy_tbps: the D2D copy ceiling measured in the same run (default: the datasheet's HBM peak, for a quick look
    only — a real copy reaches less). Keyword overrides replace the named constants."""
    rows, cols = shape
    clock = CLOCK_GHZ if clock_ghz is None else clock_ghz
    frac = DRAM_FRACTION_OF_COPY if dram_fraction is None else dram_fraction
    l2 = L2_SECTOR_TBPS if l2_tbps is None else l2_tbps
    wpc = WAVEFRONTS_PER_CLK if wavefronts_per_clk is None else wavefronts_per_clk
    if copy_tbps <= 0 or clock <= 0 or frac <= 0 or l2 <= 0 or wpc <= 0:
        raise ValueError("rates must be positive")
    cost = tile_cost(variant, rows, cols)
    tiles = ceil(rows / TILE) * ceil(cols / TILE)
    nbytes = 2 * ELEMENT_BYTES * rows * cols
    dram_s = nbytes / (copy_tbps * frac * 1e12)
    l1_s = tiles * cost.l1_wavefronts / (n_sm * wpc * clock * 1e9)
    l2_s = tiles * cost.l2_sectors * H100.sector_bytes / (l2 * 1e12)
    limits = {"DRAM": dram_s, "L1TEX": l1_s, "L2": l2_s}
    bound = max(limits, key=limits.get)
    t = limits[bound]
    return Prediction(variant, (rows, cols), t * 1e3, nbytes / t / 1e12, bound, dram_s * 1e3, l1_s * 1e3,
                      l2_s * 1e3, tiles, cost)


def predict_tbps(variant: str, shape=(8192, 8192), copy_tbps: float = H100.hbm_tbps, **kw) -> float:
    return predict(variant, shape, copy_tbps, **kw).tbps


def predict_all(shape=(8192, 8192), copy_tbps: float = H100.hbm_tbps, **kw) -> dict[str, Prediction]:
    return {v: predict(v, shape, copy_tbps, **kw) for v in VARIANTS}


def explain(copy_tbps: float | None = None, shape=(8192, 8192)) -> str:
    """The model in a few lines, with the numbers it uses (for the notebook). copy_tbps: the measured copy ceiling
    (recorded_h100.json); None uses the datasheet's HBM peak and says so."""
    measured = copy_tbps is not None
    copy_tbps = copy_tbps if measured else H100.hbm_tbps
    lines = [
        f"Model: time = max(DRAM, L1TEX wavefronts, L2 sectors) for a {shape[0]}x{shape[1]} float32 transpose",
        f"  DRAM: {2 * 4 * shape[0] * shape[1] / 2**20:.0f} MiB at {DRAM_FRACTION_OF_COPY:.2f} x the "
        f"{copy_tbps:.2f} TB/s " + ("copy ceiling (measured)" if measured else
                                    "datasheet HBM peak (no measured copy ceiling here: an upper bound)"),
        f"  L1TEX: {WAVEFRONTS_PER_CLK} wavefront/clk/SM x {H100.sm_count} SMs x {CLOCK_GHZ:.2f} GHz",
        f"  L2: {L2_SECTOR_TBPS:.1f} TB/s of 32-byte sectors",
        f"{'rung':<10}{'STS wf':>8}{'LDS wf':>8}{'global wf':>11}{'sectors':>9}{'pred TB/s':>11}  bound",
    ]
    for v, p in predict_all(shape, copy_tbps).items():
        c = p.cost
        lines.append(f"{v:<10}{c.sts_wavefronts:>8}{c.lds_wavefronts:>8}{c.global_wavefronts:>11}"
                     f"{c.l2_sectors:>9}{p.tbps:>11.2f}  {p.bound}")
    lines.append("(wavefronts and sectors per 32x32 tile; the LDS of the unpadded tile reads a column: 32 words in "
                 "one bank, 32 wavefronts per access)")
    return "\n".join(lines)


def plot_bank_maps(variants=SMEM_VARIANTS):
    """One panel per tile layout: the bank of each logical element (a, b) of the 32x32 tile, with the column that
    phase 2 reads in one LDS outlined. One colour down that column = all 32 lanes in one bank. Returns a Figure."""
    from matplotlib.figure import Figure
    from matplotlib.patches import Rectangle

    fig = Figure(figsize=(4.2 * len(variants), 4.4), layout="constrained")
    titles = {"smem": "float tile[32][32]", "padded": "float tile[32][33]", "swizzled": "tile[a][b ^ a]"}
    for i, v in enumerate(variants):
        ax = fig.add_subplot(1, len(variants), i + 1)
        im = ax.imshow(bank_map(v), cmap="hsv", vmin=0, vmax=31, interpolation="nearest")
        ax.add_patch(Rectangle((4.5, -0.5), 1, 32, fill=False, edgecolor="black", linewidth=2))
        lds = wavefronts(tile_smem_addresses(v, "load", 5, 0))
        ax.set_title(f"{titles.get(v, v)}\ncolumn 5 read by one LDS: {lds} wavefront{'s' * (lds > 1)}",
                     fontsize="medium")
        ax.set_xlabel("tile column b")
        ax.set_ylabel("tile row a")
    fig.colorbar(im, ax=fig.axes, label="bank", shrink=0.8)
    return fig
