"""The class report's plots: a score histogram and a throughput distribution against the spec's bar, each a base64
PNG drawn with matplotlib's Agg canvas, drawn once per what it shows (kept under $COURSE_CACHE_DIR/plots)."""

from __future__ import annotations

import base64
import hashlib
import io
import math
import re
from functools import lru_cache
from pathlib import Path

from .report_data import ExerciseInfo
from kernels.paths import cache_dir, made_once


# -------------------------------------------------------------------------------------------------------- plots
def _png(fig) -> str:
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(fig)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100)
    return base64.b64encode(buf.getvalue()).decode("ascii")


def _mpl_at_least(*version: int) -> bool:
    import matplotlib

    have = tuple(int(x) for x in re.findall(r"\d+", matplotlib.__version__)[:len(version)])
    return have >= version


def _figure():
    from matplotlib.figure import Figure

    fig = Figure(figsize=(5.2, 2.8), layout="constrained")
    return fig, fig.add_subplot()


def _drawn_once(draw, *inputs) -> str:
    """draw(*inputs) (a base64 PNG), kept under $COURSE_CACHE_DIR/plots by what it is drawn from: the inputs, this
    file's text (the drawing code) and matplotlib's version. A class graded again (one student re-graded, a Slurm
    collect after a resubmit) draws only the plots whose data changed; matplotlib takes about 0.1 s a plot."""
    import matplotlib


    key = hashlib.sha256("\0".join([draw.__name__, repr(inputs), matplotlib.__version__,
                                     _drawing_code()]).encode()).hexdigest()[:24]
    return made_once(cache_dir("plots") / f"{key}.b64", lambda tmp: tmp.write_text(draw(*inputs))).read_text()


@lru_cache(maxsize=1)
def _drawing_code() -> str:
    return Path(__file__).read_text()


def score_histogram(points: list[float], max_points: float, title: str) -> str:
    return _drawn_once(_draw_histogram, list(points), max_points, title)


def throughput_plot(ex: ExerciseInfo, good: list[float], bad: list[float] = ()) -> str:
    """One dot per timed submission (jittered): the leaderboard's in green, impossible or stale figures as red
    crosses; the spec's bar and the roofline drawn where known."""
    return _drawn_once(_draw_throughput, ex, list(good), list(bad))


def _draw_histogram(points: list[float], max_points: float, title: str) -> str:
    fig, ax = _figure()
    hi = max([max_points, *points, 1.0])
    step = 1.0 if hi <= 20 else hi / 20
    edges = [i * step - step / 2 for i in range(int(math.ceil(hi / step)) + 2)]
    ax.hist(points, bins=edges, color="#4c72b0", edgecolor="white")
    ax.set_xlim(-step, hi + step)
    ax.set_xlabel(f"points (of {max_points:g})")
    ax.set_ylabel("students")
    ax.yaxis.get_major_locator().set_params(integer=True)
    ax.set_title(title, fontsize=10)
    return _png(fig)


def _draw_throughput(ex: ExerciseInfo, good: list[float], bad: list[float]) -> str:
    fig, ax = _figure()
    jitter = lambda n: [(i % 7 - 3) * 0.08 for i in range(n)]  # noqa: E731
    if len(good) >= 5:  # a box says something from five figures on
        horizontal = {"orientation": "horizontal"} if _mpl_at_least(3, 10) else {"vert": False}
        ax.boxplot(good, positions=[0], widths=0.7, showfliers=False, zorder=2, **horizontal)
    if good:
        ax.scatter(good, jitter(len(good)), s=28, color="#55a868", zorder=3, label="correct")
    if bad:
        ax.scatter(bad, jitter(len(bad)), s=40, marker="x", color="#c44e52", zorder=3, label="flagged")
    known = list(good) + list(bad) + ([ex.bar] if ex.bar else [])
    lo, hi = min(known), max(known)
    if ex.bar:
        ax.axvline(ex.bar, color="#c44e52", linestyle="--", label=f"bar {ex.bar:.4g} {ex.unit}")
    roof = ex.peak
    if roof and roof < 1.6 * hi:
        ax.axvline(roof, color="#555555", linestyle=":", label=f"roofline {roof:g}")
        hi = max(hi, roof)
    pad = 0.08 * (hi - lo) if hi > lo else 0.1 * (hi or 1)
    ax.set_xlim(max(0.0, lo - pad), hi + pad)
    ax.set_ylim(-0.6, 0.6)
    ax.set_yticks([])
    ax.set_xlabel(f"measured throughput ({ex.unit})" if ex.unit else "measured throughput")
    ax.set_title(f"{ex.name}: throughput of {len(good) + len(bad)} timed submission(s)", fontsize=10)
    ax.legend(loc="upper left", fontsize=8, frameon=False)
    return _png(fig)
