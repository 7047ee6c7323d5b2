"""Week 2, day 5: the day's ratios to cuDNN as they are printed — a ratio from one pass of the ladder is a measurement,
labelled "one pass" / "this pass" and said to be no claim; a claim against cuDNN comes only from interleaved rounds
of the same GPU (kernels.compare's method: bench.overlap_rounds, bench.rounds_summary — median, 95 % interval, what
the interval supports), named with the rounds' GPU, driver and date. Where a GPU has no rounds, every line says so.

    ratios.vs_cudnn_report(doc)    # each rung over cuDNN of one pass, the rounds' claim beside the rows they judge
    ratios.ladder_table(doc)       # the ladder: TFLOPS, "this pass", the models; the goals' rounds line under it
    ratios.goal_line(doc)          # the overlap rung's goals as the rounds of the record's GPU judge them

No GPU needed: these read records (kernels/attention/recorded_<gpu>.json, rounds_<gpu>.json) or a run's rows.
"""

from __future__ import annotations

from .. import record
from . import model
from .bench import SHAPES, SLUG, goals, main_rows, overlap_name, rounds_summary, vs_cudnn
from .launch import DEFAULT_OVERLAP
from .workload import shape_name


def _where(doc: dict) -> str:
    """A record's GPU, driver (where it names one) and date, as every claim names them."""
    drv = f"driver {doc['driver']}, " if doc.get("driver") else ""
    return f"{doc['device']} ({drv}{doc.get('date', '?')})"


def rounds_record(doc: dict | None) -> dict | None:
    """The interleaved rounds that speak for the GPU of `doc`: `doc` itself where its rows hold rounds (a run of
    compare_overlap), else that GPU's recorded rounds (kernels/attention/rounds_<gpu>.json, or a ladder record of it
    holding rounds: kernels.record.rounds_records), by device tag; None where that GPU has none."""
    if not doc or not doc.get("rows"):
        return None
    if rounds_summary(doc["rows"]):
        return doc
    tag = record.device_tag(doc.get("device"))
    return next((d for slug, t, d in record.rounds_records() if slug == SLUG and t == tag
                 and rounds_summary(d.get("rows", []))), None)


def goal_line(doc: dict | None) -> str:
    """The overlap rung's goals against a record, one line: per shape its default entry over cuDNN — from the
    interleaved rounds of the record's GPU (rounds_record: the record's own, else the GPU's rounds record; median,
    95 % interval, what it supports, the rounds' GPU, driver and date named) — else the one pass of the ladder, said
    to be one pass and not a claim."""
    if not doc or not doc.get("rows"):
        return "no recorded run yet"
    rd = rounds_record(doc)
    rs = rounds_summary(rd["rows"]) if rd else {}
    if rs:
        def goal(v):
            if v["goal"] is None:
                return ""
            clears = "clears" if v["lo"] >= v["goal"] else "does not clear"
            return f" (goal >= {v['goal']:.2f}x: the interval {clears} it)"

        parts = [f"{tag}: {v['says']}" + goal(v) for tag, v in rs.items()]
        return (f"overlap rung over cuDNN, interleaved rounds on {_where(rd)}, the exercise's data: "
                + "; ".join(parts))
    g = goals(doc["rows"])
    if all(v["over_cudnn"] is None for v in g.values()):
        return f"the overlap rung is not in the record of {_where(doc)}: no goal to check"
    parts = []
    for tag, v in g.items():
        if v["over_cudnn"] is None:
            parts.append(f"{tag}: not measured")
            continue
        parts.append(f"{tag} {v['overlap_tflops']:.1f} / {v['cudnn_tflops']:.1f} = {v['over_cudnn']:.3f}x")
    return (f"overlap rung ({', '.join(sorted({DEFAULT_OVERLAP[d] for d in DEFAULT_OVERLAP}))}) over cuDNN in ONE "
            f"pass of the ladder on {_where(doc)}: " + "; ".join(parts) + " — one pass, not a claim (runs move by "
            "more than these differences): the goals are judged on interleaved rounds, and none are recorded on "
            "this GPU (python -m kernels.attention.overlap runs them)")


def _claimed_rows() -> dict:
    """{(kernel, shape): GOALS shape}: the rows whose ratio to cuDNN interleaved rounds judge (overlap_rounds: the
    overlap rung's default entry at each GOALS shape)."""
    return {(overlap_name(s[3], DEFAULT_OVERLAP[s[3]], s[4]), shape_name(s)): tag for tag, s in SHAPES.items()}


def vs_cudnn_report(doc: dict | None) -> str:
    """Each non-library row's ratio to cuDNN of the same shape (vs_cudnn), printed as what it is — one pass, not a
    claim — and, for the rows interleaved rounds judge (the overlap rung's default entry at each GOALS shape), the
    claim the rounds of the record's GPU support beside it (rounds_record: median, 95 % interval, what it supports,
    the rounds' GPU, driver and date in the heading). Where that GPU has no rounds, every line says so."""
    if not doc or not doc.get("rows"):
        return "no recorded run yet"
    rd = rounds_record(doc)
    rs = rounds_summary(rd["rows"]) if rd else {}
    claimed = _claimed_rows()
    passes = {tuple(k.split(" | ")): x for k, x in vs_cudnn(doc["rows"]).items()}  # {(kernel, shape): ratio}
    w = max((len(k) for k, _ in passes), default=0)
    lines = [f"over cuDNN of the same shape, one pass of the ladder on {_where(doc)} (a measurement, not a claim); "
             + (f"the claims: interleaved rounds on {_where(rd)}, the exercise's data" if rs else
                "no interleaved rounds recorded on this GPU: no claim against cuDNN")]
    for shape in dict.fromkeys(sh for _, sh in passes):
        lines.append(f"-- {shape}")
        for (kernel, sh), x in passes.items():
            if sh != shape:
                continue
            tag = claimed.get((kernel, sh))
            if tag in rs:
                lines.append(f"  {kernel:<{w}}  this pass {x:.3f}x; the rounds: {rs[tag]['says']}")
            else:
                why = "no rounds of it against cuDNN" if rs else "no rounds recorded on this GPU"
                lines.append(f"  {kernel:<{w}}  one pass: {x:.3f}x; {why} — not a claim")
    return "\n".join(lines)


LADDER = ("cuda", "overlap", "cudnn", "flash", "triton")


def ladder_table(doc: dict | None, variants=LADDER) -> str:
    """The rungs of a record side by side, per shape: TFLOPS, "this pass" (TFLOPS over cuDNN's of the same shape
    in the same pass: a measurement, not a claim), the model's figure (the serial chain for r1_attention.cu, the
    overlap model for r2_overlap.cu, the current constants) and the SM clock of each timing where read, the GPU and
    date named; under it, the overlap rung's goals as the interleaved rounds of that GPU judge them (goal_line)."""
    if not doc or not doc.get("rows"):
        return "no recorded run yet"
    rows = [r for r in main_rows(doc["rows"]) if r.get("variant") in variants and r.get("tflops")]
    ratio = vs_cudnn(doc["rows"])
    mhz = any(r.get("sm_mhz") for r in rows)
    lines = [f"{_where(doc)}, TFLOPS = 4 B H S^2 D (halved causal); this pass: over cuDNN of the same shape in this "
             "one pass (a measurement, not a claim: claims come from interleaved rounds, the line under the table)",
             f"{'kernel':<42}{'TFLOPS':>8}{'this pass':>10}{'model':>8}" + (f"{'SM MHz':>8}" if mhz else "")]
    for shape in dict.fromkeys(r["shape"] for r in rows):
        lines.append(f"-- {shape}")
        for r in sorted((r for r in rows if r["shape"] == shape), key=lambda r: variants.index(r["variant"])):
            x = ratio.get(f"{r['kernel']} | {r['shape']}")
            pred = model.predict_row(r)
            lines.append(f"{r['kernel']:<42}{r['tflops']:8.1f}" + (f"{x:10.3f}" if x else f"{'1':>10}" if
                         r["variant"] == "cudnn" else " " * 10) + (f"{pred:8.1f}" if pred else " " * 8)
                         + (f"{r['sm_mhz']:8.0f}" if mhz and r.get("sm_mhz") else ""))
    return "\n".join([ln.rstrip() for ln in lines] + [goal_line(doc)])
