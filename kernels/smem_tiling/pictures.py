"""Week 1, day 2's pictures: the bank of each element of the transpose's tile, drawn from the model's own offsets."""

from __future__ import annotations

from ..smem import bank, wavefronts
from .model import SMEM_VARIANTS, TILE, _smem_offset, tile_smem_addresses


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


def bank_map(variant: str) -> list[list[int]]:
    """bank_map(v)[a][b] = bank of logical tile element (a, b): a column of equal numbers is a conflict."""
    return [[bank(_smem_offset(variant, a, b)) for b in range(TILE)] for a in range(TILE)]
