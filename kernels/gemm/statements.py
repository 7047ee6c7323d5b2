"""Week 2, day 4: the day's statements read from a record, so that the notebook says what the record measured: the
three targets against cuBLAS in one table (`targets_table`: the day's goal, parity, the exercise's bar for the
record's GPU), the record's rows (`record_row`), the challenge's line (the first tensor-core rung's share of cuBLAS),
the cuBLAS kernel the record ran, and what the recorded runs say about wgmma_wait<0> against <1>."""

from __future__ import annotations

from ..record import device_tag
from . import bench, model


def targets(record: dict | None, exercise) -> list[dict]:
    """Day 4's three targets, each against cuBLAS at 8192^3 in the same run and each from where it is set: the day's
    goal (bench.GOAL: the best CUDA rung over the cuBLAS row), parity (bench.PARITY_GOAL: rung 6 over cuBLAS, the
    median of interleaved rounds) and the exercise's bar (`exercise`: the grader's gemm_epilogue, its spec's fraction
    for the record's GPU — that GPU's calibration, else the H100's, else the spec's). Each with the record's figure
    where it holds one: {"target", "measured", "at_least", "set_in", "recorded", "met"}. `exercise` is passed in
    (autograder.spec's Exercise): the library imports nothing of the grader."""
    doc = record or {}
    frac_goal = (doc["best_cuda_tflops"] / doc["cublas_same_shape_tflops"]
                 if doc.get("best_cuda_tflops") and doc.get("cublas_same_shape_tflops") else None)
    par = bench.parity_summary(doc.get("rows", [])) if doc else {}
    r6 = (par or {}).get("over_cublas", {}).get("store_warp")
    fraction, cal, how = exercise.parts["throughput"].fraction_for(device_tag(doc.get("device")))
    sol = ((doc.get("exercise_margins") or {}).get(exercise.name) or {}).get("solution_fraction")
    return [
        {"target": "the day's goal", "measured": "best CUDA rung / cuBLAS row", "at_least": bench.GOAL,
         "set_in": "bench.GOAL", "recorded": frac_goal, "what": doc.get("best_cuda_rung"),
         "met": None if frac_goal is None else frac_goal >= bench.GOAL},
        {"target": "parity", "measured": "rung 6 / cuBLAS, median of the rounds", "at_least": bench.PARITY_GOAL,
         "set_in": "bench.PARITY_GOAL", "recorded": r6["median"] if r6 else None,
         "what": f"{par['rounds']} rounds" if r6 else None,
         "met": None if not r6 else r6["median"] >= bench.PARITY_GOAL},
        {"target": "the exercise's bar", "measured": f"{exercise.name} / cuBLAS, grading run", "at_least": fraction,
         "set_in": f"spec: {how}", "recorded": sol, "what": "course solution" if sol is not None else None,
         "met": None if sol is None or fraction is None else sol >= fraction}]


def targets_table(record: dict | None, exercise) -> str:
    """targets() as the one table the notebook prints: each target's fraction of cuBLAS, where it is set, and the
    record's figure (its GPU and date in the head)."""
    doc = record or {}
    head = (f"the day's targets, each x cuBLAS at 8192^3 in the same run; recorded: {doc['device']} ({doc['date']})"
            if doc else "the day's targets, each x cuBLAS at 8192^3 in the same run; no record")
    lines = [head, f"{'target':<20} {'measured':<40} {'at least':>8}  {'recorded':<26} {'met':<4} set in"]
    for t in targets(record, exercise):
        rec = "-" if t["recorded"] is None else f"{t['recorded']:.3f}x ({t['what']})"
        met = "-" if t["met"] is None else "yes" if t["met"] else "no"
        at = "-" if t["at_least"] is None else f"{t['at_least']:.2f}x"
        lines.append(f"{t['target']:<20} {t['measured']:<40} {at:>8}  {rec:<26} {met:<4} {t['set_in']}")
    return "\n".join(lines)


# ------------------------------------------------------------------------------------------ record lines
WELL_SHORT = 0.80  # section 2's heading: rung 2 "stops well short of cuBLAS" = below this fraction on every record


def record_row(record: dict, name: str, shape: str = "8192x8192x8192", lesson: bool = False) -> dict | None:
    """The record's row `name` at `shape` (kernels.gemm.bench.row_of: a main row, or with lesson=True a data-effect
    lesson row)."""

    return bench.row_of(record.get("rows", []), name, shape, lesson)


def first_tensor_core_fraction(record: dict, shape: str = "8192x8192x8192") -> dict | None:
    """Rung 2 (wgmma) over the cuBLAS row of the same run at `shape`: {"wgmma", "cublas", "fraction", "device"}."""
    w, c = record_row(record, "wgmma", shape), record_row(record, "cublas", shape)
    if not (w and c):
        return None
    return {"wgmma": w["tflops"], "cublas": c["tflops"], "fraction": w["tflops"] / c["tflops"],
            "device": record["device"], "shape": shape}


def challenge_line(record: dict | None) -> str:
    """Section 2's figure: rung 2 as a fraction of the same run's cuBLAS row."""
    f = first_tensor_core_fraction(record) if record else None
    if not f:
        return "no recorded run yet"
    return (f"rung 2 (wgmma: TMA + one warpgroup, one stage) at {f['shape']} on {f['device']} "
            f"({record['date']}): {f['wgmma']:.1f} TFLOPS = {f['fraction']:.2f} x cuBLAS of the same run "
            f"({f['cublas']:.1f}, its row on the same data)")


def cublas_note(record: dict | None) -> str:
    """What the table's "of ceil." column divides by (the run's cuBLAS ceiling: kernels.bench's matmul on N(0, 1)
    data), against the cuBLAS row every ratio of the notebook uses (the exercise's data), both of the same run."""
    if not record:
        return ""

    shape = "8192x8192x8192"
    ceil = record["ceilings"]["cublas_bf16_tflops"]
    row = record_row(record, "cublas", shape)
    name, best = bench.best_cuda(record["rows"])
    if not (row and best):
        return f"'of ceil.' = TFLOPS / the cuBLAS ceiling of the same run ({ceil:.1f} TFLOPS, N(0, 1) data)"
    return (f"'of ceil.' = TFLOPS / the cuBLAS ceiling of the same run ({ceil:.1f} TFLOPS: kernels.bench's matmul "
            f"on N(0, 1) data); the ratios below use the cuBLAS row at {shape} ({row['tflops']:.1f}, the "
            f"exercise's data): {name} {best:.1f} = {best / row['tflops']:.3f} x that row "
            f"({best / ceil:.3f} x the ceiling), on {record['device']}")


def wait_rows(record: dict, shape: str = "8192x8192x8192") -> dict:
    """The rows that tell what wgmma_wait<1> buys, at `shape`, TFLOPS: rung 3 (one consumer, wait<0>), rung 4 and
    rung 5 (two consumers, wait<1>), the exercise's course solution (rung 4's tile, roles, grid and ring; wait<0>),
    and rung 4 timed again in the data-effect lesson (on the exercise's data) where the record has it."""
    out = {}
    for key, name, lesson in (("rung 3", "pipelined", False), ("rung 4", "persistent", False),
                              ("rung 5", "cluster", False), ("exercise", "exercise s4", False),
                              ("rung 4, lesson row", "persistent (exercise data)", True)):
        r = record_row(record, name, shape, lesson)
        if r:
            out[key] = r["tflops"]
    return out


def wait_story(records: dict) -> str:
    """Per record (GPU tag -> record): rung 3, rung 4, rung 5 and the exercise at 8192^3, the exercise over each
    wait<1> row, and the model's prediction for rung 4 and the exercise (the same structure: two consumers)."""
    lines = []
    for tag, rec in sorted(records.items()):
        w = wait_rows(rec)
        if "exercise" not in w or "rung 4" not in w:
            continue
        lines.append(f"{rec['device']} ({rec['date']}), 8192x8192x8192, TFLOPS: " +
                     ", ".join(f"{k} {v:.1f}" for k, v in w.items()))
        lines.append("  exercise (wait<0>) / " + ", ".join(f"{k} (wait<1>) = {w['exercise'] / v:.3f}"
                                                           for k, v in w.items() if k.startswith(("rung 4", "rung 5")))
                     + f"; rung 4 / rung 3 = {w['rung 4'] / w['rung 3']:.2f}")
    cfgs = model.configs_for((8192, 8192, 8192))
    p4, pe = (model.predict_config(cfgs[v]).tflops for v in ("persistent", "exercise"))
    p3 = model.predict_config(cfgs["pipelined"]).tflops
    lines.append(f"model (FIT's constants, {model.FIT['device']}'s DRAM): rung 3 {p3:.1f}, rung 4 {p4:.1f}, "
                 f"exercise {pe:.1f} — two consumers hide each other's drain whether they wait<1> or wait<0>; "
                 f"the model's gap between rung 4 and the exercise is the exercise's TMA-store epilogue")
    return "\n".join(lines)


# ------------------------------------------------------------------------------------------ the parity rounds
