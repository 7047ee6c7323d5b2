"""Week 3 day 1's claim: the course's block-scaled FP8 GEMM (r1_block_scaled.cu) against the vendor's FP8 GEMMs, by the
course's one comparison method (kernels.compare: interleaved rounds, positions balanced, a median ratio with a
bootstrap interval), with each side's kernel names (the profiler) and mean SM clock, and each side's accuracy
against the fp32 product of the dequantized operands.

    python -m kernels.fp8_gemm.rounds --rounds 18 [--shape 8192 8192 8192] [--unrolls 4 8 32] [--ablations]
                                      [--out build/gpu]

Candidates (the same inputs: kernels.fp8_gemm.workload.make_inputs, one draw per seed):
  block_scaled          the course kernel, gemm_fp8 (rung 1); wide, cluster, overlap, overlap_cluster, tma_store:
                        rungs 2-6 where their sources are present (gemm_fp8_wide, _cluster, _overlap,
                        _overlap_cluster, _tma_store)
  cublaslt_blockwise    cuBLASLt with the same recipe (1x128 for A, 128x128 for B) through torch, where it runs
  triton_fp8            Triton's block-scaled FP8 matmul, autotuned (kernels.fp8_gemm.triton_fp8)
  cublas_bf16           cuBLAS bf16 on the dequantized operands: what FP8 buys at this shape (context, no claim)
  overlap_u<n>          with --unrolls: rung 4 built with FP8_UNROLL = n (k-blocks per step of its k-loop), each n
  overlap_no_store      with --ablations: rung 4 with its stores never run, and overlap_s5: with 5 stages
A candidate that does not run here (baselines.supported) is named with its reason and left out. Needs an sm_90 GPU.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from . import workload

BASELINE = "cublaslt_blockwise"
REPS = 10


NO_STORE_EPILOGUE = "store_tile(acc, D, N, m0, n0);"  # r4_overlap.cu's epilogue, the line the ablation guards


def no_store_source() -> str:
    """r4_overlap.cu with its store_tile behind a condition that is false at run time (K == 12345): the compiler keeps
    every instruction that computes D, the stores never run (tests/test_fp8_gemm_overlap.py compiles it on CPU)."""
    from ..compile import kernel_file

    src = kernel_file("fp8_gemm", "r4_overlap.cu").read_text()
    if src.count(NO_STORE_EPILOGUE) != 1:
        raise ValueError(f"r4_overlap.cu: its store ({NO_STORE_EPILOGUE}) is not there once: the ablation cannot be "
                         "built")
    return src.replace(NO_STORE_EPILOGUE, "if (K == 12345) " + NO_STORE_EPILOGUE)


def _ablations(args: tuple) -> dict:
    """Rung 4 taken apart, for what its epilogue and its ring cost (--ablations): overlap_no_store (no_store_source:
    D stays the NaN it is filled with, so its accuracy is NaN), and overlap_s5, rung 4 with a ring of 5 stages (rung
    6's depth)."""
    import torch

    from ..compile import compile_cuda
    from .launch import OVERLAP_KERNEL, _run_rung, check_inputs, gemm_fp8_overlap, overlap_grid, sm_count, smem_bytes

    cub = compile_cuda(no_store_source(), name="r4_overlap_no_store.cu")
    shape = check_inputs(*args, None)
    sms = sm_count(args[0].device.index or 0)
    nan = torch.full(shape[:2], float("nan"), dtype=torch.bfloat16, device=args[0].device)  # never written
    return {"overlap_no_store": lambda: _run_rung("overlap_no_store", OVERLAP_KERNEL, lambda: cub,
                                                  lambda: overlap_grid(shape, sms), smem_bytes(), shape, *args, nan),
            "overlap_s5": lambda: gemm_fp8_overlap(*args, stages=5)}


def _candidates(inputs: dict, unrolls=(), ablations: bool = False) -> tuple[dict, dict]:
    """({name: fn() -> D}, {name: why it is left out}) for the inputs; unrolls: rung 4's other steps of the k-loop
    timed beside it (overlap_u<n>); ablations: rung 4 without its stores and with 5 stages (_ablations)."""
    import torch

    from .baselines import cublaslt_blockwise, supported
    from .launch import LADDER, gemm_fp8, gemm_fp8_overlap
    from .triton_fp8 import triton_fp8

    args = (inputs["a"], inputs["sa_t"], inputs["b"], inputs["sb"])
    ok = supported()
    fns = {"block_scaled": lambda: gemm_fp8(*args)}
    skipped = {}
    for name, (has, why, fn) in LADDER.items():  # rungs 2-6, where this copy has their sources
        if not has:
            skipped[name] = why
            continue
        fns[name] = lambda fn=fn: fn(*args)
        if name == "overlap":  # rung 4's other steps of the k-loop, and rung 4 taken apart, beside it
            fns.update({f"overlap_u{u}": (lambda u=u: gemm_fp8_overlap(*args, unroll=u)) for u in unrolls})
            fns.update(_ablations(args) if ablations else {})
    for name, fn in (("cublaslt_blockwise", cublaslt_blockwise), ("triton_fp8", triton_fp8)):
        if ok[name]["ok"]:
            fns[name] = lambda fn=fn: fn(*args)
        else:
            skipped[name] = ok[name]["why"]
    da = workload.dequantize_rows(inputs["a"], inputs["sa"]).to(torch.bfloat16)
    db = workload.dequantize_blocks(inputs["b"], inputs["sb"]).to(torch.bfloat16)
    fns["cublas_bf16"] = lambda: da @ db.T
    return fns, skipped


def _accuracy(fns: dict, inputs: dict) -> dict:
    """{name: ||D - ref|| / ||ref||} against the fp32 product of the dequantized operands (workload.reference); the
    output poisoned with NaN first is not possible for the vendors' calls (they allocate): a NaN fails the norm."""
    ref = workload.reference(inputs)
    out = {}
    for name, fn in fns.items():
        d = fn().float()
        err = (d - ref).norm() / ref.norm()
        out[name] = float(err) if bool(err.isfinite()) else float("nan")
    return out


def ladder_rounds(shape=workload.BENCH_SHAPE, rounds: int = 18, reps: int = REPS, seed: int = 0,
                  progress=print, unrolls=(), ablations: bool = False) -> dict:
    """The rounds at `shape`: per candidate its time each round, TFLOPS, SM clock, kernel names and accuracy, and
    each candidate's speed over the baseline's (kernels.compare.Ratio.to_dict: median, 95 % interval, what it says)."""
    import torch

    from ..bench import clocked_rounds, kernel_names

    shape = workload.check_shape(shape)
    inputs = workload.make_inputs(shape, seed)
    fns, skipped = _candidates(inputs, tuple(unrolls), ablations)
    accuracy = _accuracy(fns, inputs)
    names = {n: kernel_names(fn) for n, fn in fns.items()}
    work = workload.flops(shape)
    cmp, mhz, tflops = clocked_rounds(fns, flops=work, reps=reps, rounds=rounds,
                                      progress=lambda r, t: progress(f"  round {r}/{t}") if progress else None)
    base = BASELINE if BASELINE in fns else "cublas_bf16"
    ratios = {n: cmp.ratio(n, base).to_dict() for n in fns if n != base}
    torch.cuda.synchronize()
    gpu = torch.cuda.get_device_properties(0)
    return {"shape": list(shape), "rounds": len(cmp.orders), "reps": reps, "seed": seed, "baseline": base, "device": gpu.name,
            "skipped": skipped, "kernels": names, "accuracy": accuracy,
            "tflops": tflops, "sm_mhz": mhz, "ratios": ratios, "comparison": cmp.to_dict()}


def table(doc: dict) -> str:
    """The rounds as a table a reader can check: candidate, kernels, TFLOPS (median), accuracy, speed over the
    baseline with its interval and what the interval supports."""
    m, n, k = doc["shape"]
    lines = [f"{doc['device']}: FP8 GEMM {m}x{n}x{k}, {doc['rounds']} interleaved rounds, baseline {doc['baseline']}",
             f"{'candidate':<20} {'TFLOPS':>7} {'rel err':>9} {'SM MHz':>7}  speed vs baseline / kernels"]
    for name, tf in doc["tflops"].items():
        r = doc["ratios"].get(name)
        mhz = doc["sm_mhz"].get(name)
        says = r["says"] if r else "(the baseline)"
        lines.append(f"{name:<20} {tf:7.1f} {doc['accuracy'][name]:9.2e} {mhz or float('nan'):7.0f}  {says}")
        lines.append(f"{'':<20} {'':>7} {'':>9} {'':>7}  {', '.join(doc['kernels'][name])[:100]}")
    for name, why in doc["skipped"].items():
        lines.append(f"{name:<20} not compared: {why}")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shape", type=int, nargs=3, default=list(workload.BENCH_SHAPE))
    ap.add_argument("--rounds", type=int, default=18)
    ap.add_argument("--reps", type=int, default=REPS)
    ap.add_argument("--ablations", action="store_true",
                    help="rung 4 also without its stores and with 5 stages (what its epilogue and ring cost)")
    ap.add_argument("--unrolls", type=int, nargs="*", default=[],
                    help="rung 4 also built with these steps of its k-loop (powers of two, 2 .. 64), timed beside it")
    ap.add_argument("--out", default=None, help="a folder: rounds_<shape>.json written there")
    args = ap.parse_args(argv)
    doc = ladder_rounds(tuple(args.shape), rounds=args.rounds, reps=args.reps, unrolls=args.unrolls,
                        ablations=args.ablations)
    print(table(doc))
    if args.out:  # a record: where, when and by which command (the rounds say what)
        import datetime
        import shlex
        import sys

        from ..device import gpu

        doc |= {"driver": (gpu() or {}).get("driver"), "date": datetime.date.today().isoformat(),
                "what": shlex.join(["python", "-m", "kernels.fp8_gemm.rounds", *(sys.argv[1:] if argv is None
                                                                                  else argv)])}
        path = Path(args.out) / f"fp8_rounds_{workload.shape_name(tuple(args.shape))}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(doc, indent=1))
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
