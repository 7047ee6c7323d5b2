"""Week 3 day 2's claim: the shape sweep (kernels.stream_k.workload.sweep: two LLMs' projections at M = 64 .. 8192)
against cuBLAS bf16, by the course's one comparison method (kernels.compare: interleaved rounds, positions balanced,
the median ratio with a bootstrap interval), each shape's kernel names (the profiler) and accuracy against fp32.

    python -m kernels.stream_k.sweep [--rounds 18] [--rows 64 128] [--scan] [--reduce] [--week2] [--out build/gpu]

Per shape, timed in interleaved rounds: `split_k` (rung 1 with the model's split, kernels.stream_k.model.best_splits,
its partials in slots), `cublas` (torch.matmul(a, b.T)); with --reduce also `split_k_reduce` (the same split, the
partials added by TMA reduce-add), with --week2 also `week2_rung6` (week 2's capstone, kernels/gemm's store_warp: one
persistent kernel tuned at 8192^3, where its source is present). With --scan, first every split the model could pick,
each timed once (kernels.bench.bench, L2 flushed before each launch), so that the record says whether the model's
pick was the fastest. The summary: the geometric mean of split_k's per-shape median ratios over cuBLAS and the lowest
shape. Needs an sm_90 GPU.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
from pathlib import Path

from . import model, workload

REPS = 10
SCAN_TILES = 4  # --scan skips shapes of 4 waves of tiles or more: there a split only adds waves (model.py's argument)


def _accuracy(fns: dict, a, b) -> dict:
    """{name: ||C - ref|| / ||ref||} against the fp32 product (a NaN anywhere fails the norm: NaN)."""
    ref = a.float() @ b.float().T
    out = {}
    for name, fn in fns.items():
        err = (fn().float() - ref).norm() / ref.norm()
        out[name] = float(err) if bool(err.isfinite()) else float("nan")
    return out


def scan(shape, a, b, reps: int = REPS) -> dict:
    """{splits: ms} for every split the model could pick (model.candidates), each bench'd once."""
    from ..bench import bench
    from .launch import gemm_split_k

    return {s: bench(lambda s=s: gemm_split_k(a, b, s), flops=workload.flops(shape), reps=reps).ms
            for s in model.candidates(shape)}


def _week2_rung6(a, b):
    """Week 2's capstone on this shape (kernels.gemm.launch "store_warp"), or None where its source is left out."""
    from ..gemm import launch as week2

    if "store_warp" not in week2.RUNGS:
        return None
    return lambda: week2.gemm(a, b, "store_warp")


def auto_choice(shape, sms: int, has_week2: bool, constants: dict | None = None) -> tuple[str, int]:
    """The day's pick for a shape: week 2's capstone where the wide tile fills a wave of the GPU (tiles >= SMs: there
    persistence and its overlapped TMA-store epilogue pay, and a split only adds a fix-up), else the split-K build and
    split the fitted model predicts fastest (model.choose). ("week2_rung6", 1) or (tile, splits)."""
    if has_week2 and shape[0] >= 128 and model.tiles(shape) >= sms:
        return ("week2_rung6", 1)
    return model.choose(shape, sms, constants)


def shape_rounds(shape, rounds: int = 18, reps: int = REPS, seed: int = 0, do_scan: bool = False,
                 reduce: bool = False, week2: bool = False, narrow: bool = False,
                 constants: dict | None = None) -> dict:
    """One shape's rounds: per candidate its TFLOPS (median), SM clock, kernel names, accuracy, and its speed over
    cuBLAS's (kernels.compare.Ratio.to_dict)."""
    import torch

    from ..bench import clocked_rounds, kernel_names
    from .launch import gemm_split_k, sm_count

    a, b = workload.make_inputs(shape, seed)
    sms = sm_count(a.device)
    pick = model.best_splits(shape, sms)
    fns = {"split_k": lambda: gemm_split_k(a, b, pick), "cublas": lambda: a @ b.T}
    if reduce and pick > 1:
        fns["split_k_reduce"] = lambda: gemm_split_k(a, b, pick, reduce=True)
    doc_narrow = {}
    if narrow:
        ns = model.best_splits(shape, sms, "narrow")
        doc_narrow = {"narrow_splits": ns}
        fns["split_k_narrow"] = lambda: gemm_split_k(a, b, ns, tile="narrow")
    w2 = _week2_rung6(a, b) if week2 and shape[0] >= 128 else None  # week 2's launcher wants M >= 128
    if w2:
        fns["week2_rung6"] = w2
    if constants:  # the day's pick: week 2's capstone, or the model's tile and split
        tile, splits = choice = auto_choice(shape, sms, w2 is not None, constants)
        doc_narrow["auto"] = list(choice)
        fns["auto"] = w2 if tile == "week2_rung6" else (lambda: gemm_split_k(a, b, splits, tile=tile))
    doc = {"shape": list(shape), "projections": workload.names(shape), "model_splits": pick, **doc_narrow,
           "model_cost": {s: model.cost(shape, s, sms) for s in model.candidates(shape)}}
    if do_scan and model.tiles(shape) < SCAN_TILES * sms:
        doc["scan_ms"] = scan(shape, a, b, reps)
    doc["accuracy"] = _accuracy(fns, a, b)
    doc["kernels"] = {n: kernel_names(fn) for n, fn in fns.items()}
    cmp, mhz, tflops = clocked_rounds(fns, flops=workload.flops(shape), reps=reps, rounds=rounds)
    torch.cuda.synchronize()
    doc |= {"rounds": len(cmp.orders), "reps": reps, "tflops": tflops, "sm_mhz": mhz,
            "ratio": cmp.ratio("split_k", "cublas").to_dict(),
            "ratios": {n: cmp.ratio(n, "cublas").to_dict() for n in fns if n != "cublas"},
            "comparison": cmp.to_dict()}
    return doc


def summary(shapes: list[dict], run: str = "split_k") -> dict:
    """The sweep's figures for one candidate: the geometric mean of its per-shape median ratios over cuBLAS, the
    lowest, and the shapes under 0.90x (over the shapes it ran on)."""
    have = [s for s in shapes if run in s["ratios"]]
    med = [s["ratios"][run]["median"] for s in have]
    low = min(have, key=lambda s: s["ratios"][run]["median"])
    return {"run": run, "shapes": len(have), "geomean": math.exp(statistics.mean(math.log(x) for x in med)),
            "min": low["ratios"][run]["median"], "min_shape": low["shape"],
            "under_0.90": [s["shape"] for s in have if s["ratios"][run]["median"] < 0.90]}


def summaries(shapes: list[dict]) -> dict:
    """summary() of every candidate that ran on every shape of the sweep."""
    runs = set.intersection(*(set(s["ratios"]) for s in shapes)) if shapes else set()
    return {r: summary(shapes, r) for r in sorted(runs)}


def table(doc: dict) -> str:
    lines = [f"{doc['device']}: bf16 GEMM sweep, {doc['rounds']} interleaved rounds per shape, baseline cuBLAS",
             f"{'M':>5} {'N':>6} {'K':>6} {'split':>5} {'split_k TF':>10} {'cuBLAS TF':>9}  speed vs cuBLAS"]
    for s in doc["shapes"]:
        m, n, k = s["shape"]
        lines.append(f"{m:5d} {n:6d} {k:6d} {s['model_splits']:5d} {s['tflops']['split_k']:10.1f} "
                     f"{s['tflops']['cublas']:9.1f}  {s['ratio']['says']}")
    for sm in doc["summaries"].values():
        lines.append(f"{sm['run']}: geometric mean {sm['geomean']:.3f}x over {sm['shapes']} shapes; lowest "
                     f"{sm['min']:.3f}x at {sm['min_shape']}; under 0.90x: {len(sm['under_0.90'])}")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=18)
    ap.add_argument("--reps", type=int, default=REPS)
    ap.add_argument("--rows", type=int, nargs="*", default=list(workload.ROWS))
    ap.add_argument("--scan", action="store_true", help="time every split the model could pick, once each, first")
    ap.add_argument("--reduce", action="store_true", help="also the TMA reduce-add fix-up, at the same split")
    ap.add_argument("--week2", action="store_true", help="also week 2's capstone (store_warp)")
    ap.add_argument("--narrow", action="store_true", help="also the narrow tile at the (unfitted) cost's split")
    ap.add_argument("--constants", default=None,
                    help="a JSON file of the model's constants (model.fit): also `auto`, the day's pick per shape")
    ap.add_argument("--out", default=None, help="a folder: sweep.json written there")
    args = ap.parse_args(argv)
    import datetime
    import shlex
    import sys

    import torch

    from ..device import gpu

    constants = json.loads(Path(args.constants).read_text()) if args.constants else None
    shapes = []
    todo = workload.sweep(tuple(args.rows))
    for i, shape in enumerate(todo):
        s = shape_rounds(shape, rounds=args.rounds, reps=args.reps, do_scan=args.scan, reduce=args.reduce,
                         week2=args.week2, narrow=args.narrow, constants=constants)
        shapes.append(s)
        if args.out:  # each shape as it is done: a run cut short keeps what it measured
            Path(args.out).mkdir(parents=True, exist_ok=True)
            (Path(args.out) / "sweep_partial.json").write_text(json.dumps(shapes))
        others = "; ".join(f"{n} {r['median']:.3f}x" for n, r in s["ratios"].items() if n != "split_k")
        print(f"[{i + 1}/{len(todo)}] {workload.shape_name(shape)} splits {s['model_splits']}: {s['ratio']['says']}"
              + (f"; {others}" if others else "")
              + (f"; scan {({k: round(v * 1e3, 1) for k, v in s['scan_ms'].items()})} us" if "scan_ms" in s else ""),
              flush=True)
    doc = {"device": torch.cuda.get_device_properties(0).name, "driver": (gpu() or {}).get("driver"),
           "date": datetime.date.today().isoformat(), "rounds": args.rounds, "shapes": shapes,
           "summary": summary(shapes), "summaries": summaries(shapes),
           "what": shlex.join(["python", "-m", "kernels.stream_k.sweep", *(sys.argv[1:] if argv is None else argv)])}
    print(table(doc))
    if args.out:
        path = Path(args.out) / "sweep.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(doc, indent=1))
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
