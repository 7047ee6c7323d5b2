"""Week 2, day 3's pictures of the exercise's multicast: which cluster rank loads which slice of the W tile, where
it lands in every CTA's shared memory, and which CTAs receive it (the ctaMask of `.multicast::cluster`).

    plan = multicast_plan(2)            # the data: rank -> slice rows / bytes -> destination offset -> mask
    fig = plot_multicast_plan((2, 4))   # drawn from multicast_plan, one panel per cluster size

The split is the course solution's (known answer "correct"): with a cluster of N, rank r loads
rows r * 64 / N .. of the (64, 128) bf16 W tile — the w_map's box (64 / N, 128) — and multicasts it with
cluster_mask_all(N) to offset r x (tile bytes / N) of the W buffer in every CTA; each CTA arms its barrier for its
x tile and the whole W tile, whoever sends the slices. tests/test_multicast.py holds the plan to the .cu's
expressions.
"""

from __future__ import annotations

from . import exercise, model


def multicast_plan(cluster: int) -> dict:
    """bcast_add's W tile with a cluster of `cluster`: one slice per rank, each multicast to every rank.

    Returns {"cluster", "tile_rows", "tile_cols", "tile_bytes" (the W tile), "x_tile_bytes", "slices": [{"rank",
    "rows": (first, end), "bytes", "src_row" (the w_map row coordinate), "dst_offset" (bytes into the W buffer, the
    same in every CTA), "mask", "receivers"}], "received": {rank: W bytes landing in that CTA}, "expect_tx" (bytes
    each CTA's barrier is armed with: its x tile + every slice that lands in it)}."""
    slice_rows, cols = exercise.w_box(cluster)  # the launch contract's w_map box: (64 / N, 128)
    row_bytes = cols * exercise.ELEMENT_BYTES
    tile_rows = exercise.W_ROWS
    tile_bytes = tile_rows * row_bytes
    x_tile_bytes = exercise.BOX[0] * exercise.BOX[1] * exercise.ELEMENT_BYTES
    mask = model.mask_bits(range(cluster), cluster)  # cluster_mask_all(N): every rank of the cluster
    slices = []
    for r in range(cluster):
        receivers = [c for c in range(cluster) if mask >> c & 1]
        slices.append({"rank": r, "rows": (r * slice_rows, (r + 1) * slice_rows), "bytes": slice_rows * row_bytes,
                       "src_row": r * slice_rows, "dst_offset": r * slice_rows * row_bytes, "mask": mask,
                       "receivers": receivers})
    received = {c: sum(s["bytes"] for s in slices if c in s["receivers"]) for c in range(cluster)}
    return {"cluster": cluster, "tile_rows": tile_rows, "tile_cols": cols, "tile_bytes": tile_bytes,
            "x_tile_bytes": x_tile_bytes, "slices": slices, "received": received,
            "expect_tx": {c: x_tile_bytes + received[c] for c in range(cluster)}}


def plan_lines(cluster: int) -> str:
    """The plan as one line per issuing rank (for a notebook cell, beside the picture)."""
    p = multicast_plan(cluster)
    lines = [f"cluster {cluster}: W tile {p['tile_rows']} x {p['tile_cols']} bf16 = {p['tile_bytes']} bytes"]
    for s in p["slices"]:
        lines.append(f"  rank {s['rank']}: rows {s['rows'][0]:>2}..{s['rows'][1] - 1:<2} ({s['bytes']} bytes) -> "
                     f"W buffer + {s['dst_offset']:>5} in ranks {s['receivers']} (ctaMask {s['mask']:#06b})")
    lines.append("  each CTA's expect_tx: " + ", ".join(f"rank {c} {b}" for c, b in p["expect_tx"].items()) +
                 f" = x tile {p['x_tile_bytes']} + W slices received")
    return "\n".join(lines)


def plot_multicast_plan(clusters=(2, 4)):
    """One panel per cluster size: the W tile in global memory (left, a slice per issuing rank) and the W buffer of
    each CTA of the cluster (right), byte offsets on the y axis; a slice is drawn in a CTA's buffer, at its
    destination offset, only where its ctaMask bit for that CTA is set; a line joins each slice to every receiver."""
    from matplotlib.figure import Figure
    from matplotlib.patches import Rectangle

    plans = [multicast_plan(n) for n in clusters]
    fig = Figure(figsize=(9.5, 3.3 * len(plans)), layout="constrained")
    axes = fig.subplots(len(plans), 1, squeeze=False)[:, 0]
    for ax, p in zip(axes, plans):
        n, tb = p["cluster"], p["tile_bytes"]
        ax.add_patch(Rectangle((0, 0), 1.0, tb, facecolor="none", edgecolor="k"))
        ax.text(0.5, -tb * 0.04, "W tile (global)", ha="center", va="bottom", fontsize=8)
        for c in range(n):
            x0 = 2.5 + 1.9 * c
            ax.add_patch(Rectangle((x0, 0), 1.0, tb, facecolor="none", edgecolor="k"))
            head = f"CTA rank {c}\nexpect_tx {p['expect_tx'][c]}\n= x {p['x_tile_bytes']} + W {p['received'][c]}"
            ax.text(x0 + 0.5, -tb * 0.04, head, ha="center", va="bottom", fontsize=7)
        for s in p["slices"]:
            color = f"C{s['rank']}"
            lo = s["rows"][0] * tb // p["tile_rows"]  # where the slice sits in the tile, in bytes
            ax.add_patch(Rectangle((0, lo), 1.0, s["bytes"], facecolor=color, edgecolor="k", alpha=0.8))
            ax.text(0.5, lo + s["bytes"] / 2, f"rows {s['rows'][0]}-{s['rows'][1] - 1}\nrank {s['rank']} issues",
                    ha="center", va="center", fontsize=7)
            ax.text(-0.1, lo + s["bytes"] / 2, f"mask {s['mask']:#06b}", ha="right", va="center", fontsize=7,
                    family="monospace")
            for c in s["receivers"]:
                x0 = 2.5 + 1.9 * c
                ax.add_patch(Rectangle((x0, s["dst_offset"]), 1.0, s["bytes"], facecolor=color, edgecolor="k",
                                       alpha=0.8))
                ax.text(x0 + 0.5, s["dst_offset"] + s["bytes"] / 2, f"from {s['rank']}", ha="center", va="center",
                        fontsize=7)
                ax.plot([1.0, x0], [lo + s["bytes"] / 2, s["dst_offset"] + s["bytes"] / 2], color=color, lw=0.6,
                        alpha=0.6)
        ax.set_xlim(-1.3, 2.5 + 1.9 * max(clusters))
        ax.set_ylim(tb * 1.03, -tb * 0.42)  # offset 0 at the top, as the buffer is laid out
        ax.set_yticks([s["dst_offset"] for s in p["slices"]] + [tb])
        ax.set_ylabel("bytes into the W buffer", fontsize=8)
        ax.set_xticks([])
        ax.set_title(f"cluster of {n}: rank r multicasts slice r ({p['slices'][0]['bytes']} bytes) to offset "
                     f"r x {p['slices'][0]['bytes']} of every CTA", fontsize=9)
    return fig
