"""Week 2, day 4's pictures, and the record lines printed beside them.

1. The shared-memory matrix descriptor of kernels/include/wgmma.cuh in Python (`desc_sw128`, `desc_advance`,
   `desc_decode`: the same encoding as wgmma_desc_sw128 / wgmma_desc_advance, the bit positions of the PTX ISA's
   "Matrix Descriptor Format" as the header comments them; tests/test_gemm.py reads them back from the header) and
   `plot_sw128_tile`: one 8-row x 128-byte swizzle atom of a K-major bf16 tile as the TMA wrote it and the tensor
   core reads it, each 16-byte cell labelled with the logical chunk it holds (day 1's swizzle functions,
   kernels/swizzle_map.py), the four k16 bands the descriptor's start address steps through (+32 B = + 2 in its
   low field), a 64-row operand as eight atoms 1024 bytes apart (SBO), and the fields for one address.

2. `drain_timeline` / `plot_drain_timeline`: the consumers of rung 3 (one warpgroup, wgmma_wait<0>), rung 4 (two
   warpgroups, wgmma_wait<1>, the previous stage released) and the exercise (two warpgroups, wgmma_wait<0>) over a
   few k-tiles, with the durations of the GEMM model (kernels/gemm/model.py: W at TC_EFF of the tensor cores'
   clock-adjusted peak, B = BUBBLE_NS).

3. Lines from a record (kernels/gemm/recorded_<gpu>.json), every figure named with the GPU it came from:
   `challenge_line` (rung 2 against the same run's cuBLAS row), `cublas_note` (the table's "of ceil." column
   against the cuBLAS row), `wait_story` (wait<1> against wait<0> in the records).

4. `plot_parity`: the parity rounds of a record (kernels.gemm.bench.parity_rounds: rung 6, cuBLAS, Triton and rung 5
   timed in turn, six times, on the same inputs) — each run's TFLOPS per round, and rung 6 over cuBLAS per round with
   the median the goal is judged on (kernels.gemm.bench.parity_summary).
"""

from __future__ import annotations

import re
import textwrap

from ..swizzle_map import chunk_layout, swizzle_offset  # the 128B swizzle (taught on week 2 day 1), one rule
from . import model
from ..compile import COURSE_INCLUDE

__all__ = ["DESC_FIELDS", "LAYOUT_MODES", "ATOM_ROWS", "ROW_BYTES", "ATOM_BYTES", "K16_BYTES", "EXAMPLE_ADDR",
           "desc_sw128", "desc_advance", "desc_decode", "desc_encode", "header_fields", "k16_cells",
           "descriptor_lines", "plot_sw128_tile", "consumer_schedule", "drain_timeline", "plot_drain_timeline",
           "record_row", "first_tensor_core_fraction", "challenge_line", "cublas_note", "wait_rows", "wait_story",
           "WELL_SHORT", "PARITY_LABELS", "plot_parity"]

# ------------------------------------------------------------------------------------------ the descriptor
# (lowest bit, width) of each field of the 64-bit descriptor (PTX ISA "Matrix Descriptor Format", as wgmma.cuh
# comments it above wgmma_desc_sw128; tests/test_gemm.py parses that comment and compares).
DESC_FIELDS = {"start": (0, 14),    # start address >> 4
               "lbo": (16, 14),     # leading-dimension byte offset >> 4 (ignored for swizzled K-major: 1)
               "sbo": (32, 14),     # stride-dimension byte offset >> 4 (between 8-row core-matrix groups)
               "base": (49, 3),     # base offset (0: the pattern starts on a 1024-byte boundary)
               "layout": (62, 2)}   # swizzle mode
LAYOUT_MODES = {0: "none (interleave)", 1: "128B swizzle", 2: "64B swizzle", 3: "32B swizzle"}
ATOM_ROWS, ROW_BYTES = 8, 128        # one swizzle atom: 8 rows of 128 bytes (64 bf16 of K)
ATOM_BYTES = ATOM_ROWS * ROW_BYTES   # 1024: the SBO of our tiles, and the alignment of a tile's base
K16_BYTES = 16 * 2                   # one k16 step of bf16: 32 bytes along the row
_MASK64 = (1 << 64) - 1
# An example address: rung 4's (and the exercise's) stage 1, consumer 1's 64 rows of A — stage s at
# base + s x 48 KiB, consumer c's rows 8 KiB x c into the A box — for an aligned base at 0x400 (an example base:
# the kernel aligns the start of its dynamic shared memory up to 1024 bytes, wherever that lands).
EXAMPLE_ADDR = 0x400 + 1 * 48 * 1024 + 1 * 64 * ROW_BYTES


def desc_sw128(smem_byte_addr: int) -> int:
    """wgmma_desc_sw128 (kernels/include/wgmma.cuh) in Python: start = (addr & 0x3FFFF) >> 4, LBO field 1, SBO
    field 1024 >> 4, layout 1 (128B swizzle), base offset 0. Like the C, it masks: the caller keeps the tile base
    1024-byte aligned."""
    d = (smem_byte_addr & 0x3FFFF) >> 4                 # start address
    d |= 1 << 16                                        # LBO (ignored for SW128 K-major)
    d |= (ATOM_BYTES >> 4) << 32                        # SBO = 8 rows x 128 B
    d |= 1 << 62                                        # layout: 128B swizzle
    return d


def desc_advance(desc: int, nbytes: int) -> int:
    """wgmma_desc_advance: the descriptor moved `nbytes` along K (desc + (bytes >> 4): +2 per 32-byte k16 step)."""
    return (desc + (nbytes >> 4)) & _MASK64


def desc_decode(desc: int) -> dict:
    """The descriptor's fields as the hardware reads them: {field: value} (values as stored, in 16-byte units where
    the field is an address or an offset), plus the byte values and the layout's name."""
    f = {name: (desc >> lo) & ((1 << width) - 1) for name, (lo, width) in DESC_FIELDS.items()}
    return {**f, "start_bytes": f["start"] << 4, "lbo_bytes": f["lbo"] << 4, "sbo_bytes": f["sbo"] << 4,
            "mode": LAYOUT_MODES[f["layout"]]}


def desc_encode(start: int, lbo: int, sbo: int, base: int = 0, layout: int = 1) -> int:
    """A descriptor from its fields (the inverse of desc_decode on the five fields): each must fit its width."""
    out = 0
    for name, v in (("start", start), ("lbo", lbo), ("sbo", sbo), ("base", base), ("layout", layout)):
        lo, width = DESC_FIELDS[name]
        if not 0 <= v < (1 << width):
            raise ValueError(f"descriptor field {name} = {v} does not fit {width} bits")
        out |= v << lo
    return out


def header_fields(text: str | None = None) -> dict[str, tuple[int, int]]:
    """The bit positions wgmma.cuh's comment gives ("bits  0..13  start address >> 4", ...), as (lowest bit, width)
    by field name: what DESC_FIELDS must equal."""
    if text is None:

        text = (COURSE_INCLUDE / "wgmma.cuh").read_text()
    keys = (("start address", "start"), ("leading-dimension", "lbo"), ("stride-dimension", "sbo"),
            ("base offset", "base"), ("layout", "layout"))
    out = {}
    for lo, hi, what in re.findall(r"//\s+bits\s+(\d+)\.\.(\d+)\s+(.+)", text):
        name = next((n for k, n in keys if what.startswith(k)), None)
        if name:
            out[name] = (int(lo), int(hi) - int(lo) + 1)
    return out


def k16_cells(addr: int, kk: int, rows: int = ATOM_ROWS) -> list[tuple[int, int]]:
    """(row, physical 16-byte chunk) of the cells k16 step `kk` reads in rows 0..rows-1 of a tile whose descriptor
    is desc_sw128(addr) (addr 1024-aligned): the start address of desc_advance(desc, 32 kk) plus row r's 128 bytes
    and the step's two 16-byte chunks, through the swizzle the hardware applies to the address it forms
    (kernels/swizzle_map.swizzle_offset)."""
    d = desc_advance(desc_sw128(addr), K16_BYTES * kk)
    start = desc_decode(d)["start_bytes"] - (desc_decode(desc_sw128(addr))["start_bytes"])
    out = []
    for r in range(rows):
        for j in range(K16_BYTES // 16):
            off = r * ROW_BYTES + start + 16 * j
            phys = swizzle_offset(off, "128B")
            out.append((phys // ROW_BYTES, (phys % ROW_BYTES) // 16))
    return out


def descriptor_lines(addr: int = EXAMPLE_ADDR) -> str:
    """The descriptor of a tile at shared-memory byte address `addr` and its four k16 steps, field by field."""
    d = desc_sw128(addr)
    f = desc_decode(d)
    lines = [f"wgmma_desc_sw128(0x{addr:05x}) = 0x{d:016x}",
             f"  bits  0..13 start  = 0x{f['start']:04x}  (0x{addr & 0x3FFFF:05x} >> 4)",
             f"  bits 16..29 LBO    = {f['lbo']:<6}  ({f['lbo_bytes']} B; ignored for swizzled K-major)",
             f"  bits 32..45 SBO    = {f['sbo']:<6}  ({f['sbo_bytes']} B between 8-row groups)",
             f"  bits 49..51 base   = {f['base']:<6}  (tile base {ATOM_BYTES}-byte aligned)",
             f"  bits 62..63 layout = {f['layout']:<6}  ({f['mode']})"]
    for kk in range(ROW_BYTES // K16_BYTES):
        dk = desc_advance(d, K16_BYTES * kk)
        lines.append(f"  k16 step {kk}: desc_advance(desc, {K16_BYTES * kk:>3}) = 0x{dk:016x}  start field "
                     f"0x{desc_decode(dk)['start']:04x} (+{desc_decode(dk)['start'] - f['start']})")
    return "\n".join(lines)


def plot_sw128_tile(addr: int = EXAMPLE_ADDR, rows: int = 64):
    """Left: one 8-row x 128-byte atom of a 128B-swizzled K-major bf16 tile (64 bf16 of K per row), each 16-byte
    cell coloured and labelled with the logical chunk the TMA put there (kernels/swizzle_map.chunk_layout; the
    two chunks of one k16 step share a hue), the four k16 bands of the row as the descriptor's start address steps
    them (+32 B, + 2 in the low field), and the cells k16 step 1 reads outlined (k16_cells: through the swizzle).
    Right: a `rows`-row operand (64: one m64 wgmma's A) as rows / 8 atoms, each 1024 bytes (the SBO) after the
    last. Below: the descriptor's fields for `addr`. Returns a Figure."""
    import matplotlib.cm as cm
    from matplotlib.figure import Figure
    from matplotlib.patches import Rectangle

    if addr % ATOM_BYTES:
        raise ValueError(f"tile base 0x{addr:x}: a 128B-swizzled tile starts on a {ATOM_BYTES}-byte boundary")
    chunks = ROW_BYTES // 16
    atom = chunk_layout("128B", ATOM_ROWS)
    tile = chunk_layout("128B", rows)
    d = desc_sw128(addr)
    f = desc_decode(d)
    fig = Figure(figsize=(11.5, 7.4), layout="constrained")
    gs = fig.add_gridspec(2, 2, width_ratios=(1.5, 1.0), height_ratios=(3.2, 1.25))
    ax = fig.add_subplot(gs[0, 0])
    ax.imshow(atom, cmap="tab20", vmin=0, vmax=19, aspect="auto", interpolation="nearest")
    for r in range(ATOM_ROWS):
        for p in range(chunks):
            ax.text(p, r, str(atom[r][p]), ha="center", va="center", fontsize=10)
    step = 1
    for r, p in k16_cells(addr, step):
        ax.add_patch(Rectangle((p - 0.5, r - 0.5), 1, 1, fill=False, edgecolor="black", linewidth=2.2))
    # The four k16 bands of the row the descriptor addresses (row 0, where the XOR is 0: logical = physical).
    for kk in range(ROW_BYTES // K16_BYTES):
        start = desc_decode(desc_advance(d, K16_BYTES * kk))["start"]
        x0 = kk * (K16_BYTES // 16) - 0.5
        ax.add_patch(Rectangle((x0, -1.45), K16_BYTES // 16, 0.8, color=cm.tab20(2 * kk), clip_on=False))
        ax.text(x0 + 1, -1.05, f"k16 #{kk}: start+{K16_BYTES * kk} B\nlo field 0x{start:04x} (+{2 * kk})",
                ha="center", va="center", fontsize=7.5)
    ax.set_ylim(ATOM_ROWS - 0.5, -1.6)
    ax.set_xticks(range(chunks), [f"{16 * p}" for p in range(chunks)], fontsize="small")
    ax.set_yticks(range(ATOM_ROWS), [f"{r}" for r in range(ATOM_ROWS)], fontsize="small")
    ax.set_xlabel("byte offset in the 128-byte row (physical 16-byte chunk)")
    ax.set_ylabel("row of the atom (M or N index)")
    ax.set_title(f"one swizzle atom ({ATOM_ROWS} rows x {ROW_BYTES} B = {ATOM_BYTES} B): cell = logical chunk "
                 f"c at chunk c ^ (row % 8);\noutlined: the cells k16 step {step} reads "
                 f"(logical chunks {2 * step}, {2 * step + 1})", fontsize="medium")

    ax2 = fig.add_subplot(gs[:, 1])
    ax2.imshow(tile, cmap="tab20", vmin=0, vmax=19, aspect="auto", interpolation="nearest")
    for a in range(rows // ATOM_ROWS):
        y = a * ATOM_ROWS - 0.5
        ax2.axhline(y, color="black", linewidth=1.2 if a else 0)
        ax2.text(chunks - 0.3, y + ATOM_ROWS / 2, f"atom {a}: start + {a} x SBO\n= 0x{addr + a * f['sbo_bytes']:05x}",
                 ha="left", va="center", fontsize=7.5)
    ax2.set_xticks(range(chunks), [f"{16 * p}" for p in range(chunks)], fontsize="x-small")
    ax2.set_yticks(range(0, rows + 1, ATOM_ROWS))
    ax2.set_ylabel("row of the operand")
    ax2.set_xlim(-0.5, chunks + 3.2)
    ax2.set_title(f"a {rows}-row operand (one m64 wgmma's A):\n{rows // ATOM_ROWS} atoms, SBO = {f['sbo_bytes']} B "
                  "apart", fontsize="medium")

    ax3 = fig.add_subplot(gs[1, 0])
    ax3.axis("off")
    ax3.text(0, 1, descriptor_lines(addr), family="monospace", fontsize=7.6, va="top", ha="left",
             transform=ax3.transAxes)
    fig.suptitle("128B-swizzled K-major bf16 tile as wgmma reads it (kernels/include/wgmma.cuh: wgmma_desc_sw128, "
                 "wgmma_desc_advance)", fontsize="medium")
    return fig


# ------------------------------------------------------------------------------------------ the drain
def consumer_schedule(consumers: int, group_ns: float, bubble_ns: float, wait: int, ktiles: int) -> dict:
    """The tensor core and `consumers` warpgroups over `ktiles` k-tiles, the stages already full (steady state).
    Consumer c, per k-tile k: issue its group (k16 steps of its rows) and commit; wgmma_wait<wait> returns once its
    group k - wait has retired (at once if there is none); it then releases stage k - wait (one arrival per warp)
    and spends `bubble_ns` (the arrive, the next full-barrier wait, the fence) before it issues group k + 1. The
    tensor core runs the groups one at a time, in the order they were issued, `group_ns` each. A stage is free for
    the producer once every consumer has released it.

    Returns {"groups": [(consumer, k, issue, start, end)], "waits": [(consumer, k, from, to)] (a consumer blocked in
    the wait after issuing group k), "handover": [(consumer, k, from, to)], "released": {stage use k: time}}."""
    nxt = [0.0] * consumers       # when consumer c issues its next group
    k_of = [0] * consumers
    tensor_free = 0.0
    retire: dict[tuple[int, int], float] = {}
    groups, waits, handover, rel = [], [], [], {}
    while min(k_of) < ktiles:
        c = min((i for i in range(consumers) if k_of[i] < ktiles), key=lambda i: (nxt[i], i))
        k, issue = k_of[c], nxt[c]
        start = max(issue, tensor_free)
        end = start + group_ns
        tensor_free = end
        retire[(c, k)] = end
        groups.append((c, k, issue, start, end))
        back = max(issue, retire.get((c, k - wait), issue))  # wait<wait>: group k - wait retired
        waits.append((c, k, issue, back))
        if k - wait >= 0:
            rel[k - wait] = max(rel.get(k - wait, 0.0), back)
        handover.append((c, k, back, back + bubble_ns))
        nxt[c], k_of[c] = back + bubble_ns, k + 1
    return {"groups": groups, "waits": waits, "handover": handover, "released": rel}


def drain_timeline(ktiles: int = 4, **constants) -> dict:
    """Rung 3, rung 4 and the exercise's consumers over `ktiles` k-tiles with the GEMM model's durations
    (model.ktile_times: W of the CTA's tile at TC_EFF of the clock-adjusted tensor peak at the fit run's clock,
    B = BUBBLE_NS; `constants` override
    model.CONSTANTS): {name: {"what", "consumers", "wait", "W", "group_ns", "B", "schedule", "period_ns",
    "busy"}}. A group is one consumer's share of a k-tile: rung 3's one warpgroup issues the whole (128, 128)
    k-tile (8 wgmma m64n128k16), rung 4's and the exercise's two issue 64 rows each of the (128, 256) tile (4 wgmma
    m64n256k16). The loads are left out: with the ring full, (L + W) / STAGES is below the per-k-tile time of each
    (the model's t1), which `load_hidden` reports."""
    from .launch import CONFIG

    cases = {"rung 3": ("r3_pipelined.cu: 1 consumer warpgroup, wgmma_wait<0>, releases this stage",
                        "pipelined", 1, 0),
             "rung 4": ("r4_persistent.cu: 2 consumer warpgroups, wgmma_wait<1>, releases the previous stage",
                        "persistent", 2, 1),
             "exercise": ("gemm_epilogue (its given mainloop): 2 consumer warpgroups, wgmma_wait<0>, releases "
                          "this stage", "persistent", 2, 0)}
    out = {}
    for name, (what, variant, consumers, wait) in cases.items():
        t = model.ktile_times(CONFIG[variant]["tile"], **constants)
        g = t["W"] / consumers
        sched = consumer_schedule(consumers, g, t["B"], wait, ktiles)
        ends = [e for *_, e in sched["groups"]]
        # the per-k-tile time, from the second k-tile's last group to the last k-tile's (the first has no drain)
        last = {k: max(e for c, kk, _, _, e in sched["groups"] if kk == k) for k in range(ktiles)}
        period = (last[ktiles - 1] - last[0]) / (ktiles - 1) if ktiles > 1 else last[0]
        stages = CONFIG[variant]["stages"]
        out[name] = {"what": what, "variant": variant, "consumers": consumers, "wait": wait, "W": t["W"],
                     "group_ns": g, "B": t["B"], "L": t["L"], "stages": stages, "schedule": sched,
                     "period_ns": period, "busy": t["W"] / period, "end_ns": max(ends),
                     "load_hidden": (t["L"] + t["W"]) / stages <= period}
    return out


def plot_drain_timeline(ktiles: int = 4, **constants):
    """One block of lanes per kernel (drain_timeline): the tensor core (bars: the groups, labelled by consumer
    warpgroup and k-tile; grey: idle) and each consumer warpgroup (light, in the colour of the group it just
    issued: blocked in wgmma_wait<N>; dark: the hand-over B), with a marker where a stage is released to the
    producer. Durations from the GEMM model's constants (named in the caption). Returns a Figure."""
    from matplotlib.figure import Figure

    tl = drain_timeline(ktiles, **constants)
    consts = {**model.CONSTANTS, **constants}
    fig = Figure(figsize=(11.5, 7.0), layout="constrained")
    ax = fig.add_subplot(1, 1, 1)
    colours = [f"C{k}" for k in range(10)]
    y, ticks, labels = 0.0, [], []
    t_end = max(max(b for *_, b in v["schedule"]["handover"]) for v in tl.values()) * 1.02
    for name, v in tl.items():
        s = v["schedule"]
        ax.text(0.004 * t_end, y - 1.0, f"{name} — {v['what']}\none k-tile every {v['period_ns']:.0f} ns, tensor "
                f"core busy {v['busy']:.0%}", fontsize=8.5, va="center")
        ax.barh(y, t_end, left=0, height=0.7, color="0.9", edgecolor="none")  # idle
        for c, k, issue, start, end in s["groups"]:
            ax.barh(y, end - start, left=start, height=0.7, color=colours[k % 10], edgecolor="black",
                    hatch="//" if c else None, linewidth=0.6)
            ax.text((start + end) / 2, y, f"WG{c + 1} k{k}" if v["consumers"] > 1 else f"k{k}", ha="center",
                    va="center", fontsize=7.5)
        for k, t in s["released"].items():
            ax.plot(t, y + 0.45, marker="v", color="black", markersize=6)
            ax.text(t, y + 0.6, f"stage of k{k} free", fontsize=6.5, ha="center", va="top")
        ticks.append(y)
        labels.append(f"{name}: tensor core")
        y += 1.3
        for c in range(v["consumers"]):
            for cc, k, a, b in s["waits"]:
                if cc == c and b > a:
                    ax.barh(y, b - a, left=a, height=0.45, color=colours[k % 10], alpha=0.35, edgecolor="none")
                    ax.text((a + b) / 2, y, f"wait<{v['wait']}>", ha="center", va="center", fontsize=6.5)
            for cc, k, a, b in s["handover"]:
                if cc == c:
                    ax.barh(y, b - a, left=a, height=0.45, color="0.35", edgecolor="none")
            ticks.append(y)
            labels.append(f"{name}: consumer WG{c + 1}")
            y += 0.75
        y += 1.9
    ax.set_yticks(ticks, labels, fontsize=8)
    ax.set_ylim(y - 1.6, -1.8)
    ax.set_xlim(0, t_end)
    ax.set_xlabel("ns (the ring already full: the loads are not drawn)")
    w3, w4 = tl["rung 3"]["W"], tl["rung 4"]["W"]
    ax.set_title("The consumer drain: bars on a tensor-core lane = wgmma groups (hatched: warpgroup 2); below, each "
                 "consumer warpgroup:\nblocked in its wgmma_wait (light, the colour of the group it just issued) and "
                 "its hand-over B (dark: release, next full wait, fence)", fontsize="medium")
    hidden = all(v["load_hidden"] for v in tl.values())
    peak = model.tensor_peak_tflops()
    caption = (f"Drawn from kernels/gemm/model.py CONSTANTS (fit on {model.FIT['device']}): TC_EFF "
               f"{consts['TC_EFF']:g} of the tensor cores' clock-adjusted peak ({model.TC_FLOP_PER_CLK_SM} FLOP/clk/SM "
               f"x {model.SMS} SMs x the fit run's {model.SM_MHZ:.0f} MHz = {peak:.1f} TFLOPS) -> "
               f"W = 2 BM BN 64 / (TC_EFF x PEAK / {model.SMS} SMs) = {w3:.0f} ns per (128, 128) "
               f"k-tile (rung 3), {w4:.0f} ns per (128, 256) k-tile (rung 4 and the exercise: {w4 / 2:.0f} ns per "
               f"consumer's 64 rows); BUBBLE_NS {consts['BUBBLE_NS']:g} = B; LATENCY_NS {consts['LATENCY_NS']:g}: "
               f"(L + W) / stages "
               + ("is below every period, so the loads stay hidden." if hidden
                  else "exceeds the period of " + ", ".join(n for n, v in tl.items() if not v["load_hidden"])
                  + ": the loads are not drawn."))
    fig.supxlabel(textwrap.fill(caption, 170), fontsize=7.5, ha="left", x=0.01)
    return fig


PARITY_LABELS = {"store_warp": "rung 6 (store_warp)", "cublas": "cuBLAS", "triton": "Triton",
                 "cluster": "rung 5 (cluster)"}


def plot_parity(record: dict | None):
    """The record's parity rounds (bench.parity_summary) as two panels: left, each run's TFLOPS per round (rung 6,
    cuBLAS, Triton, rung 5: the same inputs, the order reversed every other round); right, rung 6 / cuBLAS of each
    round with the rounds' median and the goal (bench.PARITY_GOAL). The GPU and date in the title. None for a record
    without rounds (bench.parity_line says so)."""
    from matplotlib.figure import Figure

    from .bench import PARITY_GOAL, parity_summary

    par = parity_summary((record or {}).get("rows", []))
    if not par or "store_warp" not in par["over_cublas"]:
        return None
    fig = Figure(figsize=(10.5, 3.8), layout="constrained")
    left, right = fig.subplots(1, 2, width_ratios=(3, 2))
    rounds = range(par["rounds"])
    for i, (v, label) in enumerate(PARITY_LABELS.items()):
        if v in par["tflops"]:
            left.plot(rounds, par["tflops"][v], marker="os^v"[i], color=f"C{i}", label=label,
                      linewidth=2.2 if v in ("store_warp", "cublas") else 1.0)
    left.set_xlabel("round (odd rounds run the order backwards)")
    left.set_ylabel("TFLOPS (2 M N K)")
    left.set_xticks(list(rounds))
    left.legend(fontsize="small", ncol=2)
    left.set_title("each run, each round", fontsize="small")
    r6 = par["over_cublas"]["store_warp"]
    right.bar(rounds, [x - PARITY_GOAL for x in r6["per_round"]], bottom=PARITY_GOAL,  # up from the goal, or down
              color=["C0" if x >= PARITY_GOAL else "C7" for x in r6["per_round"]])
    right.axhline(PARITY_GOAL, color="black", linewidth=1, label=f"goal {PARITY_GOAL:.2f}x")
    right.axhline(r6["median"], color="C3", linestyle="--", linewidth=1.5, label=f"median {r6['median']:.3f}x")
    lo = min(min(r6["per_round"]), PARITY_GOAL)
    hi = max(max(r6["per_round"]), PARITY_GOAL)
    right.set_ylim(lo - 0.4 * (hi - lo) - 0.005, hi + 0.4 * (hi - lo) + 0.005)
    right.set_xticks(list(rounds))
    right.set_xlabel("round")
    right.set_ylabel("rung 6 / cuBLAS, same round")
    right.legend(fontsize="small")
    right.set_title("rung 6 over cuBLAS", fontsize="small")
    fig.suptitle(f"Parity rounds at 8192^3 on {record['device']} ({record['date']}): {par['rounds']} rounds, the "
                 "exercise's inputs", fontsize="medium")
    return fig
