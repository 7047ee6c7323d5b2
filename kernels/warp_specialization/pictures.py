"""Week 2, day 2's picture of the full/empty ring's parities, drawn from handover.parity_schedule.

    cells = parity_cells(stages=3, tiles=8)     # one cell per (tile, barrier): the data the picture draws
    print(parity_table(3, 8))                   # the schedule as a few text lines
    fig = plot_parity(3, 8)                     # the grid: tiles along x, for each stage empty[s] and full[s]

Tile k uses stage s = k % stages for the n-th time, n = k / stages. The consumers wait full[s] on parity n & 1; the
producer waits empty[s] on parity (n & 1) ^ 1 — which, on the first pass (n = 0), names the phase before the
barrier's first and returns at once.
"""

from __future__ import annotations

from . import handover

PARITY_COLORS = {0: "#DDE6F3", 1: "#4C72B0"}  # a cell's face: the parity its wait names


def parity_cells(stages: int, tiles: int) -> list[dict]:
    """One cell per tile and barrier, from handover.parity_schedule: {"tile", "stage", "use", "barrier" ("empty" for
    the producer's wait, "full" for the consumers'), "who", "parity", "waits" (False: returns at once)}."""
    cells = []
    for r in handover.parity_schedule(stages, tiles):
        common = {"tile": r["tile"], "stage": r["stage"], "use": r["use"]}
        cells.append({**common, "barrier": "empty", "who": "producer", "parity": r["empty_parity"],
                      "waits": r["producer_waits"]})
        cells.append({**common, "barrier": "full", "who": "consumers", "parity": r["full_parity"], "waits": True})
    return cells


def parity_table(stages: int, tiles: int) -> str:
    """handover.parity_schedule as text: one column per tile; '*' marks a producer wait that returns at once."""
    sched = handover.parity_schedule(stages, tiles)
    w = max(3, len(str(tiles - 1)) + 2)
    rows = [("tile k", [str(r["tile"]) for r in sched]),
            (f"stage s = k % {stages}", [str(r["stage"]) for r in sched]),
            (f"use n = k / {stages}", [str(r["use"]) for r in sched]),
            ("producer: empty[s], (n & 1) ^ 1", [f"{r['empty_parity']}{'' if r['producer_waits'] else '*'}"
                                                 for r in sched]),
            ("consumers: full[s], n & 1", [str(r["full_parity"]) for r in sched])]
    lines = [f"{name:<32}" + "".join(f"{v:>{w}}" for v in vals) for name, vals in rows]
    return "\n".join(lines + ["* first pass: the phase before the barrier's first counts as completed, no wait"])


def plot_parity(stages: int, tiles: int):
    """The parity schedule as a grid: tiles along x; for each stage s a row for the producer's wait on empty[s] and
    one for the consumers' wait on full[s]; a cell holds the parity waited on, shaded by parity, hatched where the
    producer's wait returns at once (first pass). Drawn from parity_cells (handover.parity_schedule)."""
    from matplotlib.figure import Figure
    from matplotlib.patches import Patch, Rectangle

    cells = parity_cells(stages, tiles)
    fig = Figure(figsize=(max(5.0, 1.6 + 0.45 * tiles), 0.9 + 0.5 * 2 * stages), layout="constrained")
    ax = fig.add_subplot()
    shade = PARITY_COLORS
    for c in cells:
        y = 2 * c["stage"] + (0 if c["barrier"] == "empty" else 1)
        ax.add_patch(Rectangle((c["tile"], y), 1.0, 1.0, facecolor=shade[c["parity"]], edgecolor="k",
                               hatch=None if c["waits"] else "///", linewidth=0.6))
        if c["waits"]:
            ax.text(c["tile"] + 0.5, y + 0.5, str(c["parity"]), ha="center", va="center", fontsize=7,
                    color="white" if c["parity"] else "k")
        else:
            ax.text(c["tile"] + 0.5, y + 0.5, f"{c['parity']}\nno wait", ha="center", va="center", fontsize=6,
                    bbox={"facecolor": "white", "edgecolor": "none", "pad": 1.0})
    labels = [lab for s in range(stages) for lab in (f"producer: empty[{s}]", f"consumers: full[{s}]")]
    ax.set_yticks([i + 0.5 for i in range(2 * stages)], labels, fontsize=8)
    ax.set_xticks([k + 0.5 for k in range(tiles)],
                  [f"{k}\nn={k // stages}" for k in range(tiles)], fontsize=7)
    ax.set_xlabel(f"tile k (use n = k / {stages} of stage k % {stages})")
    ax.set_xlim(0, tiles)
    ax.set_ylim(2 * stages, 0)
    for s in range(1, stages):
        ax.axhline(2 * s, color="k", lw=1.5)
    ax.legend(handles=[Patch(facecolor=shade[0], edgecolor="k", label="waits parity 0"),
                       Patch(facecolor=shade[1], edgecolor="k", label="waits parity 1"),
                       Patch(facecolor="white", edgecolor="k", hatch="///", label="first pass: returns at once")],
              loc="upper center", bbox_to_anchor=(0.5, -0.25 if tiles < 10 else -0.18), ncol=3, fontsize=7,
              frameon=False)
    ax.set_title(f"parities of a {stages}-stage ring over {tiles} tiles (handover.parity_schedule)", fontsize=9)
    return fig
