"""Week 2, day 5's register picture: S's accumulator fragment IS P's A fragment.

After `S = Q K^T` (wgmma m64nNk16, fp32 accumulators) every thread of the consumer warpgroup holds its part of S in
the accumulator layout (kernels/include/wgmma.cuh; PTX ISA, "wgmma register fragments", the m64nNk16 D matrix):

    thread t = 32 w + l (warp w, lane l), register d[i], j = i / 4, h = (i % 4) / 2, e = i % 2
        ->  row 16 w + l / 4 + 8 h,  col 8 j + 2 (l % 4) + e

`O += P V` takes P as the register A operand (RS form), one k-step of 16 keys at a time, four 32-bit registers of two
bf16 each (low half = the lower column):

    thread t, register a[q] of k-step k, half h  ->  row 16 w + l / 4 + 8 (q % 2),  col 16 k + 8 (q / 2) + 2 (l % 4) + h

r1_attention.cu packs `pa[kk][q] = pack_bf16(sacc[8 kk + 2 q], sacc[8 kk + 2 q + 1])`: `kernel_packing` reads those
lines from the .cu file, and `layout_mismatches` checks, element by element, that the thread holding S[r, c] in d[..]
is the thread that must present P[r, c] in a[..], and that the kernel's packing takes exactly that d register. No
element crosses a thread: no shuffle, no shared-memory round trip.

The exercise's two rings in one table (`ring_schedule`, `ring_table`): tile j's K is use j // K_STAGES of K stage
j % K_STAGES and its V use j // V_STAGES of V stage j % V_STAGES; a consumer waits a full barrier with the use's
parity n & 1, the producer waits an empty barrier with the previous use's, (n & 1) ^ 1 (use 0: parity 1, the phase
"before" the first, complete: no wait). With depths 3 and 2 the two rings' parities part at tile 2.

One K/V tile per warpgroup in time (`plot_tile_timeline`): the tensor core's lane and each consumer warpgroup's, for
r1_attention.cu's serial chain and r2_overlap.cu's overlap with ping-pong, drawn from the fitted models' constants
(kernels.attention.model.tile_timeline): what each warpgroup does, and what waits, per tile.
"""

from __future__ import annotations

import re
from pathlib import Path

__all__ = ["accumulator_layout", "a_fragment_layout", "kernel_packing", "p_source_registers", "layout_mismatches",
           "plot_s_to_p_fragment", "ring_schedule", "ring_table", "plot_tile_timeline"]

WARPGROUP_THREADS = 128
K_STEP = 16                     # keys per PV k-step (the wgmma K of bf16)
_CU = Path(__file__).with_name("r1_attention.cu")


def accumulator_layout(n: int = 128) -> dict:
    """(row, col) of the 64 x n fp32 accumulator -> (warpgroup thread, register index d[i]), built forward from every
    thread's every register; raises if two registers claim one element or an element is left unowned."""
    if n % 8:
        raise ValueError(f"n = {n}: wgmma N is a multiple of 8")
    out = {}
    for t in range(WARPGROUP_THREADS):
        w, lane = divmod(t, 32)
        for i in range(n // 2):
            j, h, e = i // 4, (i % 4) // 2, i % 2
            rc = (16 * w + lane // 4 + 8 * h, 8 * j + 2 * (lane % 4) + e)
            if rc in out:
                raise AssertionError(f"element {rc} held twice: {out[rc]} and {(t, i)}")
            out[rc] = (t, i)
    if len(out) != 64 * n:
        raise AssertionError(f"{64 * n - len(out)} elements of the 64 x {n} accumulator have no owner")
    return out


def a_fragment_layout(k: int) -> dict:
    """(row, col) of P, cols 16 k .. 16 k + 15 (k-step k of the PV wgmma) -> (warpgroup thread, register a[q], half h:
    0 = low 16 bits, 1 = high), built forward from every thread's four registers; raises on double or missing cover."""
    out = {}
    for t in range(WARPGROUP_THREADS):
        w, lane = divmod(t, 32)
        for q in range(4):
            for h in range(2):
                rc = (16 * w + lane // 4 + 8 * (q % 2), K_STEP * k + 8 * (q // 2) + 2 * (lane % 4) + h)
                if rc in out:
                    raise AssertionError(f"element {rc} held twice: {out[rc]} and {(t, q, h)}")
                out[rc] = (t, q, h)
    if len(out) != 64 * K_STEP:
        raise AssertionError(f"{64 * K_STEP - len(out)} elements of the A fragment have no owner")
    return out


_PACK = re.compile(r"pa\[kk\]\[(\d)\]\s*=\s*pack_bf16\(\s*sacc\[8 \* kk \+ (\d+)\],\s*sacc\[8 \* kk \+ (\d+)\]\)")


def kernel_packing(source: str | None = None) -> dict:
    """r1_attention.cu's packing of S into P's A registers: q -> (offset of the low half, offset of the high half), read
    from the `pa[kk][q] = pack_bf16(sacc[8 * kk + lo], sacc[8 * kk + hi])` lines (the register is sacc[8 kk + off])."""
    text = _CU.read_text() if source is None else source
    found = {int(q): (int(lo), int(hi)) for q, lo, hi in _PACK.findall(text)}
    if sorted(found) != [0, 1, 2, 3]:
        raise ValueError(f"r1_attention.cu: expected the four pa[kk][0..3] = pack_bf16(...) lines, found {sorted(found)}")
    return found


def p_source_registers(k: int, packing: dict | None = None) -> dict:
    """(row, col) of P's k-step k -> (thread presenting it in a[q], the S register d[i] its value was packed from)."""
    packing = kernel_packing() if packing is None else packing
    return {rc: (t, 8 * k + packing[q][h]) for rc, (t, q, h) in a_fragment_layout(k).items()}


def layout_mismatches(k: int, n: int = 128, packing: dict | None = None) -> list:
    """Elements of P's k-step k where the (thread, S register) the A fragment needs differs from the (thread, register)
    that holds S there after QK^T: [((row, col), needed, held), ...]. Empty = the hand-over is register-local."""
    if K_STEP * (k + 1) > n:
        raise ValueError(f"k-step {k} reaches column {K_STEP * (k + 1) - 1}, past the accumulator's N = {n}")
    acc = accumulator_layout(n)
    return [(rc, need, acc[rc]) for rc, need in sorted(p_source_registers(k, packing).items()) if acc[rc] != need]


def plot_s_to_p_fragment(warp: int = 0, cols: int = 32, packing: dict | None = None):
    """Two panels for one warp (rows 16 w .. 16 w + 15) and the first `cols` key columns (16 or 32: one or two PV
    k-steps): top, which thread and which fp32 register d[i] holds each S element after QK^T; bottom, which thread
    and which bf16 half of which a[q] presents each P element to the PV wgmma, with the S register the kernel packed
    into it. A cell's colour is its lane in both panels: equal colours = the same thread. Returns a Figure."""
    from matplotlib.figure import Figure
    import matplotlib as mpl

    if cols % K_STEP or not 0 < cols <= 128 or not 0 <= warp < 4:
        raise ValueError(f"warp {warp}, cols {cols}: warp in 0..3, cols a multiple of 16 up to 128")
    packing = kernel_packing() if packing is None else packing
    acc = accumulator_layout(128)
    frag, src = {}, {}
    for k in range(cols // K_STEP):
        frag.update(a_fragment_layout(k))
        src.update(p_source_registers(k, packing))
    bad = sum(len(layout_mismatches(k, 128, packing)) for k in range(cols // K_STEP))
    rows = range(16 * warp, 16 * warp + 16)
    cmap = mpl.colormaps["hsv"]

    fig = Figure(figsize=(max(8.0, 0.6 * cols), 11.0))
    fig.subplots_adjust(left=0.05, right=0.99, top=0.92, bottom=0.06, hspace=0.22)
    axes = fig.subplots(2, 1)
    for ax, which in zip(axes, ("S", "P")):
        owner = acc if which == "S" else frag
        lanes = [[owner[(r, c)][0] % 32 for c in range(cols)] for r in rows]
        ax.imshow(lanes, cmap=cmap, vmin=0, vmax=32, alpha=0.35, extent=(0, cols, 16, 0), aspect="auto",
                  interpolation="nearest")
        for r in rows:
            for c in range(cols):
                if which == "S":
                    t, i = acc[(r, c)]
                    label = f"T{t}\nd{i}"
                else:
                    t, q, h = frag[(r, c)]
                    label = f"T{t}\na{q}.{'lo' if h == 0 else 'hi'}\n=d{src[(r, c)][1]}"
                y = r - 16 * warp
                ax.text(c + 0.5, y + 0.5, label, ha="center", va="center", fontsize=5.8, linespacing=0.95)
        for c in range(0, cols + 1, 8):   # n8 blocks (thin) and k-steps of 16 keys (thick)
            ax.axvline(c, color="black", linewidth=2.2 if c % K_STEP == 0 else 0.8)
        ax.axhline(8, color="black", linewidth=0.8)
        ax.set_xlim(0, cols)
        ax.set_ylim(16, 0)
        ax.set_xticks([c + 0.5 for c in range(cols)], [str(c) for c in range(cols)], fontsize=6)
        ax.set_yticks([y + 0.5 for y in range(16)], [str(r) for r in rows], fontsize=6)
        ax.set_ylabel(f"query row (warp {warp})")
    axes[0].set_title("S accumulator after QKᵀ (wgmma m64nNk16, fp32): thread T, register d[i]", fontsize="medium")
    axes[1].set_title("P as the register A fragment of PV (k-steps of 16 keys): thread T, bf16 half of a[q], "
                      "packed from S's d[i]", fontsize="medium")
    axes[1].set_xlabel("key column of the tile (thin lines: n8 blocks; thick: PV k-steps)")
    for ax in axes:  # cell borders
        ax.set_xticks(range(cols + 1), minor=True)
        ax.set_yticks(range(17), minor=True)
        ax.grid(which="minor", color="white", linewidth=0.6)
        ax.tick_params(which="minor", length=0)
    total = 64 * cols
    fig.suptitle(f"Same thread for every element: {total - bad} of {total} elements of P (whole warpgroup, columns "
                 f"0-{cols - 1}) sit in the thread and register that held S there — no shuffle, no shared memory")
    return fig


# ------------------------------------------------------------------------------------- the exercise's two rings
def ring_schedule(n_tiles: int, k_stages: int = 3, v_stages: int = 2, k_ahead: int = 1) -> dict:
    """The producer's issue order (K running `k_ahead` tiles ahead of V: K_0 .. K_{k_ahead - 1}, then K_{j + k_ahead}
    before V_j) and, per tile j and ring, its stage, its use n, the parity the producer waits on the stage's empty
    barrier ((n & 1) ^ 1) and the parity the consumers wait on its full barrier (n & 1)."""
    if min(n_tiles, k_stages, v_stages) < 1 or k_ahead < 0:
        raise ValueError("n_tiles, k_stages, v_stages >= 1 and k_ahead >= 0")
    order = []
    for step in range(n_tiles + k_ahead):  # the solution's loop: step j issues K_j (j < n_tiles), then V_{j - k_ahead}
        if step < n_tiles:
            order.append(f"K{step}")
        if step >= k_ahead:
            order.append(f"V{step - k_ahead}")
    tiles = []
    for j in range(n_tiles):
        row = {"tile": j}
        for ring, depth in (("k", k_stages), ("v", v_stages)):
            n = j // depth
            row[ring] = {"stage": j % depth, "use": n, "empty_parity": (n & 1) ^ 1, "full_parity": n & 1}
        tiles.append(row)
    return {"order": order, "tiles": tiles}


def ring_table(n_tiles: int = 6, k_stages: int = 3, v_stages: int = 2) -> str:
    """`ring_schedule` as text: the producer's order, then one line per tile for each ring."""
    sch = ring_schedule(n_tiles, k_stages, v_stages)
    lines = [f"K ring: {k_stages} stages, V ring: {v_stages} stages; producer order: {' '.join(sch['order'])}",
             "tile | K stage use  producer waits k_empty  consumers wait k_full | "
             "V stage use  producer waits v_empty  consumers wait v_full"]
    for r in sch["tiles"]:
        k, v = r["k"], r["v"]
        differ = "   <- the rings' parities differ" if k["full_parity"] != v["full_parity"] else ""
        lines.append(f"{r['tile']:4d} | {k['stage']:7d} {k['use']:3d}  parity {k['empty_parity']:d}"
                     f"{'':15s}parity {k['full_parity']:d}{'':14s}| {v['stage']:7d} {v['use']:3d}  parity "
                     f"{v['empty_parity']:d}{'':15s}parity {v['full_parity']:d}{differ}")
    return "\n".join(lines)


# ------------------------------------------------------------------------------------- one tile per warpgroup in time
_COLOURS = {"QK^T": "C0", "PV": "C2", "PV (prev tile)": "C2", "softmax": "C1",
            "wait: tensor core (CONTENTION)": "0.75"}


def plot_tile_timeline(d: int = 128, kinds=("serial", "overlap")):
    """One panel per schedule of `kinds` (model.tile_timeline: "serial", "overlap", "overlap nopp"), lanes tensor
    core, wg 0, wg 1; two periods of the longest schedule drawn (every period but the first faded), the period and
    what bounds it in each panel's title; one time axis for all. The overlap rung's PV (of the previous tile) runs
    under its softmax: drawn on the tensor core's lane only. Returns a Figure."""
    from matplotlib.figure import Figure
    from matplotlib.patches import Patch

    from . import model

    tls = [model.tile_timeline(k, d) for k in kinds]
    span = 2 * max(t["period"] for t in tls)
    fig = Figure(figsize=(9.5, 1.9 * len(tls) + 0.8), layout="constrained")
    axes = fig.subplots(len(tls), 1, sharex=True, squeeze=False)[:, 0]
    lanes = ("tensor core", "wg 0", "wg 1")
    for ax, tl in zip(axes, tls):
        for y, lane in enumerate(lanes):
            for rep in range(-1, int(span // tl["period"]) + 2):
                shift = rep * tl["period"]
                for b, e, what in tl["lanes"][lane]:
                    key = what.split(": ", 1)[1] if lane == "tensor core" else what
                    x0, x1 = max(0.0, b + shift), min(span, e + shift)
                    if x0 >= x1 or (lane != "tensor core" and key == "PV (prev tile)"):
                        continue
                    ax.barh(y, x1 - x0, left=x0, height=0.6, color=_COLOURS.get(key, "C7"),
                            alpha=1.0 if rep == 0 else 0.45, edgecolor="black", linewidth=0.4)
                    if lane == "tensor core" and rep == 0:
                        ax.text((x0 + x1) / 2, y, what.split(":")[0], ha="center", va="center", fontsize=6)
        ax.axvline(tl["period"], color="black", linestyle=":", linewidth=1)
        ax.set_yticks(range(len(lanes)), lanes)
        ax.set_ylim(len(lanes) - 0.4, -0.6)
        what = {"serial": "r1_attention.cu: serial chain, warpgroups unordered",
                "overlap": "r2_overlap.cu: QKᵀ(j) with PV(j-1), softmax under PV, ping-pong",
                "overlap nopp": "r2_overlap.cu without ping-pong"}[tl["kind"]]
        ax.set_title(f"{what}\nperiod {tl['period']:.0f} ns per tile (bound: {tl['bound']}); tensor core busy "
                     f"{tl['tensor_busy']:.0%} of it", fontsize="medium")
    axes[-1].set_xlim(0, span)
    axes[-1].set_xlabel(f"ns (D = {d}, 128-key tiles; dotted: one period; constants: kernels/attention/model.py, fit "
                        f"on {model.FIT['device']})")
    fig.legend(handles=[Patch(color=c, label=k) for k, c in _COLOURS.items() if k != "PV (prev tile)"],
               loc="outside lower center", ncols=4, fontsize="small")
    return fig
