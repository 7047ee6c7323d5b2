"""One GPU pass over the GEMM ladder: every rung checked on the awkward shapes, then timed beside cuBLAS.

    python -m kernels.gemm.gpu_probe [--out DIR] [--only tiled,wgmma,...] [--shapes 8192,2048,skinny] [--sweep]

Each rung runs in its own subprocess with a deadline (a hung kernel costs that rung only); the parent prints one
compact table. Not part of the course's text: the day's benchmark is kernels/gemm/bench.py.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

SHAPE_KEYS = {"8192": (8192, 8192, 8192), "2048": (2048, 2048, 2048), "skinny": (128, 8192, 8192)}


def child(variant: str, shapes: list, stages: int | None, reps: int) -> dict:
    import torch

    from ..bench import bench
    from ..check import compare, poison
    from .launch import gemm
    from .workload import TEST_SHAPES, flops, make_inputs, reference

    out = {"variant": variant, "stages": stages, "checks": [], "times": {}}
    t0 = time.time()
    for i, shape in enumerate(TEST_SHAPES):
        inp = make_inputs(shape, 7 + i)
        c = poison(torch.empty(shape[0], shape[1], dtype=torch.bfloat16, device="cuda"))
        gemm(inp["a"], inp["b"], variant, out=c, stages=stages)
        torch.cuda.synchronize()
        rep = compare(c, reference(inp))
        out["checks"].append({"shape": list(shape), "ok": rep.ok, "msg": "" if rep.ok else rep.message[:300]})
    out["check_s"] = time.time() - t0
    for shape in shapes:
        inp = make_inputs(shape, 1)
        c = torch.empty(shape[0], shape[1], dtype=torch.bfloat16, device="cuda")
        gemm(inp["a"], inp["b"], variant, out=c, stages=stages)
        torch.cuda.synchronize()
        if shape[0] * shape[1] <= 8192 * 8192:  # big shapes: check a slice of rows against fp32
            rows = slice(0, min(shape[0], 256))
            ref = (inp["a"][rows].float() @ inp["b"].float().T).to(torch.bfloat16)
            rep = compare(c[rows], ref)
            out["checks"].append({"shape": list(shape), "ok": rep.ok, "msg": "" if rep.ok else rep.message[:300]})
        r = bench(lambda: gemm(inp["a"], inp["b"], variant, out=c, stages=stages), flops=flops(shape),
                  reps=reps, warmup=2, with_ceilings=False)
        out["times"]["x".join(map(str, shape))] = {"ms": r.ms, "tflops": r.tflops, "p20": r.p20_ms, "p80": r.p80_ms}
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.environ.get("OUT", "build/gpu"))
    ap.add_argument("--only", default="tiled,wgmma,pipelined,persistent,cluster,triton,cublas")
    ap.add_argument("--shapes", default="8192,2048,skinny")
    ap.add_argument("--sweep", default="")  # rung 3 stage counts, e.g. "1,2,6"
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--deadline", type=float, default=60)
    ap.add_argument("--child", default=None)
    ap.add_argument("--stages", type=int, default=None)
    a = ap.parse_args()
    shapes = [SHAPE_KEYS[s] for s in a.shapes.split(",") if s]
    if a.child:
        print("RESULT " + json.dumps(child(a.child, shapes, a.stages, a.reps)), flush=True)
        return
    out_dir = Path(a.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    jobs = [(v, None) for v in a.only.split(",") if v]
    jobs += [("pipelined", int(s)) for s in a.sweep.split(",") if s]
    results = []
    t0 = time.time()
    for v, st in jobs:
        cmd = [sys.executable, "-m", "kernels.gemm.gpu_probe", "--child", v, "--shapes", a.shapes,
               "--reps", str(a.reps)] + (["--stages", str(st)] if st else [])
        t = time.time()
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=a.deadline)
            line = next((ln for ln in p.stdout.splitlines() if ln.startswith("RESULT ")), None)
            res = json.loads(line[7:]) if line else {"variant": v, "stages": st,
                                                    "error": (p.stderr or p.stdout)[-1500:]}
        except subprocess.TimeoutExpired:
            res = {"variant": v, "stages": st, "error": f"timeout after {a.deadline}s"}
        res["wall_s"] = time.time() - t
        results.append(res)
        ok = all(c["ok"] for c in res.get("checks", [])) if "checks" in res else None
        times = " ".join(f"{k}:{x['tflops']:.1f}" for k, x in res.get("times", {}).items())
        bad = [c for c in res.get("checks", []) if not c["ok"]][:2]
        print(f"[{time.time() - t0:5.0f}s] {v}{'' if st is None else f' s{st}'}: correct={ok} TFLOPS {times} "
              f"({res['wall_s']:.0f}s) {res.get('error', '')[-600:]} {bad}", flush=True)
        (out_dir / "gemm_probe.json").write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
