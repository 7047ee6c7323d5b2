"""Week 3, day 1's pictures, and the record lines printed beside them.

1. The scale factors of one CTA (`scale_use`, `ring_slots`, `plot_scale_layout`). A is scaled per 1 x 128 group (one
   fp32 per row and per 128 entries of K: sa (M, K/128), stored transposed as sa_t (K/128, M)), B per 128 x 128 block
   (sb (N/128, K/128)). CTA (n0 / 128, m0 / 128) of rung 1 (r1_block_scaled.cu) at k-block kb needs exactly

       sa[m0 .. m0 + 127, kb]  =  sa_t[kb, m0 .. m0 + 127]   128 floats, one contiguous 512-byte run: one TMA box
                                                            (1, 128), byte offset (kb * M + m0) * 4 of sa_t
       sb[n0 / 128, kb]        =  sb.flat[n_tile * (K / 128) + kb]   one float, an ordinary load

   and the k-block's A and B tiles and the 128 row scales land in stage s = kb % STAGES of the ring (its n = kb //
   STAGES-th use, parity n & 1): the tiles at s * STAGE_TILES, the scales at SA_BASE + s * SA_BYTES of the aligned
   dynamic shared memory (launch.py's constants, the kernel's header "Hardware contract").

2. The K-major rule (`K_MAJOR_CASES`, `k_major`, `plot_k_major`): FP8 wgmma reads both shared-memory operands K-major
   (contiguous along the contraction index) and has no transpose immediates; bf16 sets imm-trans. The day's GEMM
   (A and B both (rows, K)) and attention's S = Q K^T meet the rule as stored; O = P V does not: the contraction runs
   over V's rows, so V (keys, head_dim) must be stored or staged transposed.

3. Why scale at all, and why so finely (`quantization_demo`): e4m3 cast directly, with one scale per tensor, and
   with the recipe's 1 x 128 groups, on N(0, 1) data made tiny, huge, or given one outlier.

4. Lines from a record (kernels/fp8_gemm/recorded_<gpu>.json, written by `python -m kernels.fp8_gemm.bench`):
   `accuracy_lines` (its "accuracy" and "accuracy_no_promotion" tables) and `rounds_lines` (its "rounds": the
   interleaved rounds of rounds.ladder_rounds), each naming the GPU and date of the record; a clear line where the
   record, or the part of it, is missing.

Every plot_* returns a matplotlib Figure (matplotlib.figure.Figure: no pyplot, no global state, headless-safe).
"""

from __future__ import annotations

from .launch import BK, BM, BN, SA_BYTES, STAGE_TILES, STAGES

__all__ = ["EXAMPLE_SHAPE", "EXAMPLE_TILE", "TILE_A", "SA_BASE", "scale_use", "sa_t_mask", "sb_mask", "ring_slots",
           "plot_scale_layout", "K_MAJOR_CASES", "k_major", "fp8_wgmma_reads", "plot_k_major", "quantization_demo",
           "accuracy_lines", "rounds_lines", "NO_RECORD"]

EXAMPLE_SHAPE = (256, 256, 1024)   # (M, N, K): 2 x 2 tiles, 8 k-blocks: the ring of 6 wraps
EXAMPLE_TILE = (128, 128, 7)       # (m0, n0, kb): the CTA of tile row 1, tile column 1, at its last k-block
TILE_A = BM * BK                   # bytes of a stage's A tile (one byte per e4m3): B's follows it
SA_BASE = STAGES * STAGE_TILES     # the scale slots follow the tile ring (r1_block_scaled.cu SA_BASE at STAGES)
NO_RECORD = ("(no record of fp8_gemm yet: `make gpu-test` on a Hopper GPU writes kernels/fp8_gemm/recorded_<gpu>.json; "
             "this cell then shows its tables)")


# ---------------------------------------------------------------------------------------- 1. the scales of one CTA
def _check(shape, m0: int, n0: int, kb: int, stages: int) -> tuple[int, int, int]:
    m, n, k = (int(v) for v in shape)
    for name, v, t in (("M", m, BM), ("N", n, BN), ("K", k, BK)):
        if v <= 0 or v % t:
            raise ValueError(f"{name} = {v}: needs a positive multiple of {t}")
    if m0 % BM or not 0 <= m0 < m:
        raise ValueError(f"m0 = {m0}: a tile origin, a multiple of {BM} in 0 .. {m - BM}")
    if n0 % BN or not 0 <= n0 < n:
        raise ValueError(f"n0 = {n0}: a tile origin, a multiple of {BN} in 0 .. {n - BN}")
    if not 0 <= kb < k // BK:
        raise ValueError(f"kb = {kb}: a k-block of K = {k}, 0 .. {k // BK - 1}")
    if not 1 <= stages:
        raise ValueError(f"stages = {stages}: at least 1")
    return m, n, k


def scale_use(shape=EXAMPLE_SHAPE, m0: int = EXAMPLE_TILE[0], n0: int = EXAMPLE_TILE[1], kb: int = EXAMPLE_TILE[2],
              stages: int = STAGES) -> dict:
    """What CTA (n0 / BN, m0 / BM) reads at k-block kb, and where it lands (module docstring, 1):
    {"kblocks", "sa_t_shape", "sa_t_row", "sa_t_cols" (range), "sa_t_byte_offset", "sa_box_bytes", "sb_shape",
    "sb_index" (row, col), "sb_flat", "a_rows", "b_rows", "k_cols" (ranges), "slot", "use", "parity",
    "smem_a", "smem_b", "smem_sa" (byte offsets in the aligned dynamic shared memory)}."""
    m, n, k = _check(shape, m0, n0, kb, stages)
    kblocks = k // BK
    s, use = kb % stages, kb // stages
    return {"kblocks": kblocks, "sa_t_shape": (kblocks, m), "sa_t_row": kb, "sa_t_cols": range(m0, m0 + BM),
            "sa_t_byte_offset": (kb * m + m0) * 4, "sa_box_bytes": BM * 4,
            "sb_shape": (n // BN, kblocks), "sb_index": (n0 // BN, kb), "sb_flat": (n0 // BN) * kblocks + kb,
            "a_rows": range(m0, m0 + BM), "b_rows": range(n0, n0 + BN), "k_cols": range(kb * BK, (kb + 1) * BK),
            "slot": s, "use": use, "parity": use & 1,
            "smem_a": s * STAGE_TILES, "smem_b": s * STAGE_TILES + TILE_A,
            "smem_sa": stages * STAGE_TILES + s * SA_BYTES}


def sa_t_mask(shape=EXAMPLE_SHAPE, m0: int = EXAMPLE_TILE[0], kb: int = EXAMPLE_TILE[2]):
    """(K/128, M) bool torch tensor: True on the entries of sa_t the CTA of tile row m0 / BM loads at k-block kb."""
    import torch

    m, _, k = _check(shape, m0, 0, kb, 1)
    mask = torch.zeros(k // BK, m, dtype=torch.bool)
    mask[kb, m0:m0 + BM] = True
    return mask


def sb_mask(shape=EXAMPLE_SHAPE, n0: int = EXAMPLE_TILE[1], kb: int = EXAMPLE_TILE[2]):
    """(N/128, K/128) bool torch tensor: True on the one entry of sb the CTA of tile column n0 / BN reads at kb."""
    import torch

    _, n, k = _check(shape, 0, n0, kb, 1)
    mask = torch.zeros(n // BN, k // BK, dtype=torch.bool)
    mask[n0 // BN, kb] = True
    return mask


def ring_slots(kblocks: int, stages: int = STAGES) -> dict[int, list[int]]:
    """{slot s: the k-blocks that pass through it, in order} for a CTA's k-loop of `kblocks` k-blocks: kb % stages."""
    if kblocks < 1 or stages < 1:
        raise ValueError(f"kblocks = {kblocks}, stages = {stages}: both at least 1")
    return {s: list(range(s, kblocks, stages)) for s in range(stages)}


def _example_scales(shape, seed: int = 0):
    """sa (M, K/128) and sb (N/128, K/128) of workload.quantize_rows / quantize_blocks on N(0, 1) data (CPU): the
    values the picture colours its groups and blocks by."""
    import torch

    from .workload import quantize_blocks, quantize_rows

    m, n, k = shape
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(m, k, generator=g) * torch.rand(m, 1, generator=g).add(0.25)  # rows of different magnitude
    w = torch.randn(n, k, generator=g)
    return quantize_rows(x)[1], quantize_blocks(w)[1]


def plot_scale_layout(shape=EXAMPLE_SHAPE, m0: int = EXAMPLE_TILE[0], n0: int = EXAMPLE_TILE[1],
                      kb: int = EXAMPLE_TILE[2], stages: int = STAGES):
    """The recipe's scales for `shape` and what one CTA (tile m0, n0) uses at k-block kb. Top: A (M, K) coloured by
    its scale sa (each 1 x 128 group one colour) and B (N, K) coloured by sb (each 128 x 128 block one colour), the
    CTA's A and B tiles of k-block kb outlined. Middle: sa_t (K/128, M) as it lies in memory, the CTA's one TMA box
    (row kb, columns m0 .. m0 + 127: 512 contiguous bytes) outlined; sb (N/128, K/128), each cell labelled with its
    flat index, the CTA's one float outlined. Bottom: the shared-memory ring, stage s = kb % stages outlined, each
    slot labelled with the k-blocks that pass through it. Outlines carry a gid ("a_tile", "b_tile", "sa_box",
    "sb_cell", "stage") for the tests. Returns a Figure."""
    from matplotlib.figure import Figure

    u = scale_use(shape, m0, n0, kb, stages)
    m, n, k = (int(v) for v in shape)
    sa, sb = _example_scales((m, n, k))
    hi = dict(fill=False, edgecolor="crimson", linewidth=2.4)

    fig = Figure(figsize=(13, 10.5), layout="constrained")
    gs = fig.add_gridspec(3, 2, height_ratios=(1.25, 0.75, 1.0))
    ax_a, ax_b = fig.add_subplot(gs[0, 0]), fig.add_subplot(gs[0, 1])
    ax_sat, ax_sb = fig.add_subplot(gs[1, 0]), fig.add_subplot(gs[1, 1])
    ax_ring = fig.add_subplot(gs[2, :])

    _draw_operands(ax_a, ax_b, sa, sb, (m, n, k), m0, n0, kb, hi)
    _draw_sa_t(ax_sat, sa, u, m, m0, kb, hi)
    _draw_sb(ax_sb, sb, u, n, n0, kb, hi)
    _draw_ring(fig, ax_ring, ax_sat, u, m0, n0, kb, stages, hi)
    fig.suptitle(f"DeepSeek-V3 block scaling at (M, N, K) = {m, n, k}: what CTA (tile m0 = {m0}, n0 = {n0}) reads "
                 f"at k-block {kb}", fontsize="large")
    return fig


def _draw_operands(ax_a, ax_b, sa, sb, shape, m0, n0, kb, hi) -> None:
    """plot_scale_layout's top row: A and B coloured by their scales, the CTA's tiles of k-block kb outlined."""
    from matplotlib.patches import Rectangle

    m, n, k = shape
    ax_a.imshow(sa.numpy(), extent=(0, k, m, 0), aspect="auto", cmap="viridis", interpolation="nearest")
    ax_a.add_patch(Rectangle((kb * BK, m0), BK, BM, gid="a_tile", **hi))
    ax_a.text(kb * BK + BK / 2, m0 + BM / 2, f"A tile\nkb {kb}", ha="center", va="center", color="white",
              fontsize=8)
    ax_b.imshow(sb.numpy().repeat(BN, 0).repeat(BK, 1), extent=(0, k, n, 0), aspect="auto", cmap="magma",
                interpolation="nearest")
    ax_b.add_patch(Rectangle((kb * BK, n0), BK, BN, gid="b_tile", **hi))
    ax_b.text(kb * BK + BK / 2, n0 + BN / 2, f"B tile\nkb {kb}", ha="center", va="center", color="white",
              fontsize=8)
    for ax, rows, what in ((ax_a, m, "A (M, K) e4m3: colour = sa, one scale per row per 128 of K (1 x 128)"),
                           (ax_b, n, "B (N, K) e4m3: colour = sb, one scale per 128 x 128 block")):
        for x in range(0, k + 1, BK):
            ax.axvline(x, color="white", linewidth=0.6)
        ax.set_xticks(range(0, k + 1, BK))
        ax.set_yticks(range(0, rows + 1, 128))
        ax.set_xlabel("K (k-blocks of 128)")
        ax.set_title(what, fontsize="medium")
    ax_a.set_ylabel("M (row: token)")
    ax_b.set_ylabel("N (row: output feature)")


def _draw_sa_t(ax_sat, sa, u, m, m0, kb, hi) -> None:
    """plot_scale_layout's sa_t panel: the scales of A as they lie in memory, the CTA's one TMA box outlined."""
    from matplotlib.patches import Rectangle

    kblocks = u["kblocks"]
    ax_sat.imshow(sa.t().numpy(), extent=(0, m, kblocks, 0), aspect="auto", cmap="viridis", interpolation="nearest")
    ax_sat.add_patch(Rectangle((m0, kb), BM, 1, gid="sa_box", **hi))
    ax_sat.set_yticks([r + 0.5 for r in range(kblocks)], [str(r) for r in range(kblocks)], fontsize="small")
    ax_sat.set_xticks(range(0, m + 1, 64))
    ax_sat.set_xlabel("m (contiguous: 4 bytes each)")
    ax_sat.set_ylabel("kb")
    ax_sat.set_title(f"sa_t (K/128, M) = ({kblocks}, {m}), row-major: the CTA's scales of k-block {kb} are row {kb}, "
                     f"cols {m0}..{m0 + BM - 1}\n= one TMA box (1, {BM}): {u['sa_box_bytes']} contiguous bytes at "
                     f"byte {u['sa_t_byte_offset']} = ({kb}·{m} + {m0})·4", fontsize="medium")


def _draw_sb(ax_sb, sb, u, n, n0, kb, hi) -> None:
    """plot_scale_layout's sb panel: each cell labelled with its flat index, the CTA's one float outlined."""
    from matplotlib.patches import Rectangle

    kblocks = u["kblocks"]
    ax_sb.imshow(sb.numpy(), extent=(0, kblocks, n // BN, 0), aspect="auto", cmap="magma", interpolation="nearest")
    for r in range(n // BN):
        for c in range(kblocks):
            ax_sb.text(c + 0.5, r + 0.5, str(r * kblocks + c), ha="center", va="center", fontsize=9,
                       bbox=dict(boxstyle="round,pad=0.2", facecolor="white", alpha=0.8, linewidth=0))
    ax_sb.add_patch(Rectangle((kb, n0 // BN), 1, 1, gid="sb_cell", **hi))
    ax_sb.set_xticks([c + 0.5 for c in range(kblocks)], [str(c) for c in range(kblocks)], fontsize="small")
    ax_sb.set_yticks([r + 0.5 for r in range(n // BN)], [str(r) for r in range(n // BN)], fontsize="small")
    ax_sb.set_xlabel("kb")
    ax_sb.set_ylabel("n_tile = n0 / 128")
    ax_sb.set_title(f"sb (N/128, K/128) = {u['sb_shape']}: the CTA's one float sb[{n0 // BN}, {kb}]\n"
                    f"= sb[n_tile · kblocks + kb] = sb[{u['sb_flat']}] (cell = flat index), an ordinary load",
                    fontsize="medium")


def _draw_ring(fig, ax_ring, ax_sat, u, m0, n0, kb, stages, hi) -> None:
    """plot_scale_layout's bottom row: the ring in shared memory, stage kb % stages outlined, an arrow from the sa_t
    box to its slot."""
    from matplotlib.patches import ConnectionPatch, Rectangle

    kblocks = u["kblocks"]
    slots = ring_slots(kblocks, stages)
    for s in range(stages):
        x = s * 1.1
        ax_ring.add_patch(Rectangle((x, 1.0), 1.0, 0.9, facecolor="#cfe3f5", edgecolor="grey"))
        ax_ring.add_patch(Rectangle((x, 0.1), 1.0, 0.8, facecolor="#f5dccf", edgecolor="grey"))
        ax_ring.add_patch(Rectangle((x, 2.0), 1.0, 0.4, facecolor="#d8f0d0", edgecolor="grey"))
        ax_ring.text(x + 0.5, 1.45, f"A tile 16 KiB\n@ {s * STAGE_TILES}", ha="center", va="center", fontsize=7.5)
        ax_ring.text(x + 0.5, 0.5, f"B tile 16 KiB\n@ {s * STAGE_TILES + TILE_A}", ha="center", va="center",
                     fontsize=7.5)
        ax_ring.text(x + 0.5, 2.2, f"sa slot 512 B\n@ {stages * STAGE_TILES + s * SA_BYTES}", ha="center",
                     va="center", fontsize=7)
        held = ", ".join(map(str, slots[s])) or "-"
        ax_ring.text(x + 0.5, 0.0, f"stage {s}\nkb {held}", ha="center", va="top", fontsize=8,
                     fontweight="bold" if s == u["slot"] else "normal")
    xs = u["slot"] * 1.1
    ax_ring.add_patch(Rectangle((xs - 0.04, 0.05), 1.08, 2.4, gid="stage", **hi))
    fig.add_artist(ConnectionPatch((m0 + BM / 2, kb + 1), (xs + 0.5, 2.4), coordsA=ax_sat.transData,
                                   coordsB=ax_ring.transData, arrowstyle="-|>", mutation_scale=14, color="crimson",
                                   linewidth=1.4, connectionstyle="arc3,rad=0.2", gid="sa_to_slot"))
    ax_ring.text(stages * 1.1 + 0.1, 1.2,
                 f"k-block {kb} -> stage s = {kb} % {stages} = {u['slot']}\n"
                 f"(its use n = {u['use']}, parity {u['parity']})"
                 f"\n\nthree TMA loads on full[{u['slot']}]:\n  A[{m0}.., {kb * BK}..]  (128, 128) e4m3\n"
                 f"  B[{n0}.., {kb * BK}..]  (128, 128) e4m3\n  sa_t[{kb}, {m0}..]    (1, 128) fp32\n"
                 f"  = {2 * TILE_A + SA_BYTES} bytes of expect-tx\n\nsb[{u['sb_flat']}]: one float, not in the ring\n"
                 f"(global memory -> register)", ha="left", va="center", fontsize=8.5, family="monospace")
    ax_ring.set_xlim(-0.1, stages * 1.1 + 3.6)
    ax_ring.set_ylim(-0.45, 2.5)
    ax_ring.axis("off")
    ax_ring.set_title(f"the ring in shared memory ({stages} stages; byte offsets from the 1024-aligned base): "
                      f"k-block kb uses stage kb % {stages}", fontsize="medium")


# ---------------------------------------------------------------------------------------------- 2. the K-major rule
# Each shared-memory operand of a wgmma, as stored: its name, the product, its stored (rows, cols) with cols
# contiguous, and the index the product contracts over. K-major = contiguous along the contracted index.
K_MAJOR_CASES = (
    {"product": "D = A · Bᵀ (today's GEMM)", "operand": "A", "rows": "M", "cols": "K", "contracted": "K"},
    {"product": "D = A · Bᵀ (today's GEMM)", "operand": "B", "rows": "N", "cols": "K", "contracted": "K"},
    {"product": "S = Q · Kᵀ (attention)", "operand": "Q", "rows": "queries", "cols": "head_dim",
     "contracted": "head_dim"},
    {"product": "S = Q · Kᵀ (attention)", "operand": "K", "rows": "keys", "cols": "head_dim",
     "contracted": "head_dim"},
    {"product": "O = P · V (attention)", "operand": "V", "rows": "keys", "cols": "head_dim", "contracted": "keys"},
    {"product": "O = P · V (attention)", "operand": "Vᵀ", "rows": "head_dim", "cols": "keys", "contracted": "keys"},
)


def k_major(case: dict) -> bool:
    """Whether the operand is K-major as stored: its contiguous index (cols) is the one the product contracts."""
    return case["cols"] == case["contracted"]


def fp8_wgmma_reads(case: dict) -> str:
    """What a wgmma with the operand in shared memory needs: for e4m3 nothing if K-major, else a transpose first (no
    imm-trans for FP8); bf16 reads either (imm-trans-a / -b)."""
    return "as stored" if k_major(case) else "transpose first"


def plot_k_major(cases=K_MAJOR_CASES):
    """One small panel per operand of `cases`: its stored shape, an arrow along the contiguous index (memory order) and
    one along the contracted index, green where the two agree (K-major: FP8 wgmma reads it as stored), red where
    they do not (FP8 needs it transposed; bf16 would set imm-trans). Returns a Figure; each panel's title holds the
    verdict."""
    from matplotlib.figure import Figure
    from matplotlib.patches import FancyArrowPatch, Rectangle

    fig = Figure(figsize=(13, 3.6), layout="constrained")
    axes = fig.subplots(1, len(cases))
    for ax, c in zip(axes, cases):
        ok = k_major(c)
        colour = "#2e8b57" if ok else "#c0392b"
        ax.add_patch(Rectangle((0, 0), 1, 1, facecolor="#f2f2f2", edgecolor=colour, linewidth=2.5))
        for y in (0.2, 0.4, 0.6, 0.8):  # rows of memory: each a contiguous run along cols
            ax.plot([0.05, 0.95], [y, y], color="#bbbbbb", linewidth=0.8)
        ax.add_patch(FancyArrowPatch((0.08, 0.9), (0.92, 0.9), arrowstyle="-|>", mutation_scale=14, color="black",
                                     gid="contiguous"))
        ax.text(0.5, 1.02, f"memory order: {c['cols']} contiguous", ha="center", va="bottom", fontsize=8)
        if c["contracted"] == c["cols"]:
            start, end, label_at = (0.08, 0.5), (0.92, 0.5), (0.5, 0.44)
        else:
            start, end, label_at = (0.5, 0.82), (0.5, 0.08), (0.53, 0.3)
        ax.add_patch(FancyArrowPatch(start, end, arrowstyle="-|>", mutation_scale=16, color=colour, linewidth=2,
                                     gid="contracted"))
        ax.text(*label_at, f"sum over {c['contracted']}", ha="center" if ok else "left", va="top", fontsize=8,
                color=colour)
        ax.text(0.5, -0.06, f"{c['operand']} stored ({c['rows']}, {c['cols']})", ha="center", va="top", fontsize=8.5)
        ax.set_xlim(-0.05, 1.05)
        ax.set_ylim(-0.25, 1.15)
        ax.axis("off")
        ax.set_title(f"{c['product']}\n{c['operand']}: {'K-major' if ok else 'MN-major'}\nFP8: {fp8_wgmma_reads(c)}",
                     fontsize=8.5, color=colour)
    fig.suptitle("FP8 wgmma reads both shared-memory operands K-major (contiguous along the summed index): no "
                 "imm-trans for e4m3, where bf16 flips a bit.\nO = P · V sums over V's rows: V must be stored or "
                 "staged transposed (P itself comes from registers, the RS form's A)", fontsize="medium")
    return fig


# ------------------------------------------------------------------------------------ 3. why scales, why so fine
def quantization_demo(seed: int = 0, shape=(256, 512), outlier: float = 1e5) -> list[dict]:
    """[{"data", "direct", "per_tensor", "per_1x128"}]: ||x^ - x|| / ||x|| of e4m3 round trips of N(0, 1) data scaled
    by 1e-3, 1e3, and with one entry (row 3) set to `outlier`, for a direct cast (clamped to +-448), one scale per
    tensor (amax / 448) and the recipe's 1 x 128 groups (workload.quantize_rows). The outlier's own row is left out
    of the error: the question is what one large entry costs the others."""
    import torch

    from .workload import E4M3_MAX, FP8, dequantize_rows, quantize_rows

    g = torch.Generator().manual_seed(seed)
    x = torch.randn(*shape, generator=g)
    spiked = x.clone()
    spiked[3, 7] = outlier
    keep = torch.ones(shape[0], dtype=torch.bool)
    keep[3] = False

    def rel(y, ref, rows):
        return float((y[rows] - ref[rows]).norm() / ref[rows].norm())

    out = []
    for name, data, rows in (("N(0,1) x 1e-3", x * 1e-3, slice(None)), ("N(0,1) x 1e3", x * 1e3, slice(None)),
                             (f"N(0,1), one entry {outlier:.0e}", spiked, keep)):
        direct = data.clamp(-E4M3_MAX, E4M3_MAX).to(FP8).float()
        s = data.abs().max() / E4M3_MAX
        per_tensor = (data / s).clamp(-E4M3_MAX, E4M3_MAX).to(FP8).float() * s
        a, sa = quantize_rows(data)
        out.append({"data": name, "direct": rel(direct, data, rows), "per_tensor": rel(per_tensor, data, rows),
                    "per_1x128": rel(dequantize_rows(a, sa), data, rows)})
    return out


# -------------------------------------------------------------------------------------------- 4. lines of a record
def _source_line(doc: dict) -> str:
    return f"recorded on {doc.get('device')} ({doc.get('date')})"


def accuracy_lines(doc: dict | None) -> str:
    """The record's accuracy tables (bench._evidence: accuracy.accuracy_table of every candidate, the worst of its
    seeds, and of rung 1 built without promotion), as text under a line naming the GPU and date; a clear line where
    there is no record or it holds no accuracy table."""
    from .accuracy import format_rows

    if not doc:
        return NO_RECORD
    rows = list(doc.get("accuracy") or []) + list(doc.get("accuracy_no_promotion") or [])
    if not rows:
        return f"(the record {_source_line(doc)} holds no accuracy table: its bench run measured none)"
    return f"{_source_line(doc)}; errors are the worst over each row's runs (seeds):\n" + format_rows(rows)


def rounds_lines(doc: dict | None) -> str:
    """The record's interleaved rounds (rounds.ladder_rounds, kept as the record's "rounds") as rounds.table prints
    them; a clear line where there is no record or it holds no rounds (a --quick bench run measures none)."""
    from .rounds import table

    if not doc:
        return NO_RECORD
    if not doc.get("rounds"):
        return (f"(the record {_source_line(doc)} holds no interleaved rounds: a `--quick` bench run measures none; "
                "`python -m kernels.fp8_gemm.rounds` runs them)")
    return f"{_source_line(doc)}:\n" + table(doc["rounds"])
