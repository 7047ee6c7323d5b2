"""Which hardware counter shows L2 -> SM bytes of multicast loads? Measure the candidates with Nsight Compute for
broadcast_sum and bcast_add at cluster 1 / 2 / 4 (and the per-CTA and dead-branch known answers), one untimed launch
each, and compare with the traffic model (kernels/multicast/model.py).

    python -m kernels.multicast.counters --out build/gpu/multicast/counters.json   # needs ncu and an sm_90 GPU
    python -m kernels.multicast.counters --target "bcast_add correct c2" --source answer.cu   # what ncu profiles

The benchmark (kernels/multicast/bench.py) records the result beside its rows.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import subprocess
import sys
import tempfile
import types
from pathlib import Path
from ..ncu import find_ncu
from ..topic import answer_source, shipped

CANDIDATES = (
    "lts__t_sectors_srcunit_tex_op_read.sum",                     # L2 sectors read for the SMs' L1TEX/TMA units
    "lts__t_requests_srcunit_tex_op_read.sum",
    "lts__t_sectors_op_read.sum",
    "lts__t_bytes.sum",                                           # every byte through L2's tag stage
    "l1tex__m_xbar2l1tex_read_bytes_mem_global_op_tma_ld.sum",    # kernels.ncu's tma_load
    "l1tex__m_xbar2l1tex_read_bytes.sum",
    "smsp__sass_data_bytes_mem_global_op_ldgsts.sum",             # kernels.ncu's ldgsts
    "dram__bytes_read.sum",
)
SUM_TILES = 256
EX_SHAPE = (8192, 8192)
TARGETS = {  # name -> (kernel, what)
    "broadcast_sum c1": ("broadcast_sum", ("sum", 1)),
    "broadcast_sum c2": ("broadcast_sum", ("sum", 2)),
    "broadcast_sum c4": ("broadcast_sum", ("sum", 4)),
    "bcast_add correct c1": ("bcast_add", ("correct", 1)),
    "bcast_add correct c2": ("bcast_add", ("correct", 2)),
    "bcast_add correct c4": ("bcast_add", ("correct", 4)),
    "bcast_add per_cta c2": ("bcast_add", ("per_cta", 2)),
    "bcast_add dead_branch c2": ("bcast_add", ("dead_branch", 2)),
}


def model_bytes(name: str, sms: int = 132) -> dict:
    """The traffic model's bytes for a target: L2 -> SM (read by L2) and delivered into shared memory."""
    from . import model
    from .launch import sum_ctas

    kernel, (what, c) = TARGETS[name]
    if kernel == "broadcast_sum":
        n = sum_ctas(sms, c)
        t = model.traffic(model.SUM_TILE_BYTES, SUM_TILES, c, multicast=c > 1)
        return {"l2_to_sm": t["l2_per_cta"] * n, "delivered": t["delivered_per_cta"] * n, "ctas": n}
    from .exercise import ctas

    n = ctas(EX_SHAPE, c)
    t = model.exercise_traffic(c, multicast=what == "correct")
    return {"l2_to_sm": t["l2_per_cta"] * n, "delivered": (t["x_in"] + model.EX_TILE_BYTES) * n, "ctas": n,
            "x_bytes": EX_SHAPE[0] * EX_SHAPE[1] * 2}


def _run_target(name: str, source: str | None = None) -> None:
    """Launch the target twice (ncu measures the second launch); a bcast_add target runs the known answer whose
    CUDA source is in the file `source` (its parent process was handed it), under the exercise's launch contract."""
    import torch

    from ..check import compare, poison
    from ..compile import compile_cuda
    from ..runner import launch_contract
    from .launch import broadcast_sum
    from .workload import make_table, sum_reference

    kernel, (what, c) = TARGETS[name]
    for i in range(2):
        if kernel == "broadcast_sum":
            t = make_table(SUM_TILES, i)
            out = broadcast_sum(t, c)
            torch.cuda.synchronize()
            ok = compare(out, sum_reference(t, out.shape[0]), exact=True).ok
        else:
            from .exercise import KERNEL, launch_args, make_inputs, make_output, reference

            cub = compile_cuda(Path(source).read_text(), name=f"multicast_{what}.cu")
            inputs = make_inputs(EX_SHAPE, i)
            out = poison(make_output(inputs))
            launch_contract(types.SimpleNamespace(kernel=KERNEL), cub, launch_args(inputs, out, cluster=c))
            torch.cuda.synchronize()
            ok = compare(out, reference(inputs), exact=True).ok
        print(f"{name} launch {i}: {'ok' if ok else 'WRONG'}", flush=True)


def _parse(text: str) -> dict:
    rows = [r for r in csv.reader(io.StringIO(text)) if r and not r[0].startswith("==")]
    if len(rows) < 3:
        return {}
    out = {}
    for h, v in zip(rows[0], rows[2]):
        if "__" in h:
            try:
                out[h] = float(v.replace(",", ""))
            except ValueError:
                pass
    return out


def profile(name: str, metrics=CANDIDATES, timeout_s: float = 120) -> dict:
    ncu = find_ncu()
    if ncu is None:
        return {"error": "ncu not found"}

    kernel, (what, _) = TARGETS[name]
    if kernel == "bcast_add" and not shipped("multicast", [what]):
        return {"error": f"the known answer {what} was not handed to this run"}
    with tempfile.TemporaryDirectory() as tmp:
        rep = Path(tmp) / "rep"
        answer = []
        if kernel == "bcast_add":
            (Path(tmp) / "answer.cu").write_text(answer_source("multicast", what))
            answer = ["--source", str(Path(tmp) / "answer.cu")]
        cmd = [ncu, "--clock-control", "none", "--target-processes", "all", "--kernel-name", kernel,
               "--launch-skip", "1", "--launch-count", "1", "--metrics", ",".join(metrics), "--export", str(rep),
               "--force-overwrite", sys.executable, "-m", "kernels.multicast.counters", "--target", name, *answer]
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
        if not rep.with_suffix(".ncu-rep").exists():
            return {"error": (p.stdout + p.stderr)[-1500:]}
        q = subprocess.run([ncu, "--import", str(rep.with_suffix(".ncu-rep")), "--page", "raw", "--csv",
                            "--print-units", "base"], capture_output=True, text=True, timeout=120)
        vals = _parse(q.stdout)
        return {"values": {m: vals.get(m) for m in metrics}, "target_output": [ln for ln in p.stdout.splitlines()
                                                                               if ln.startswith(name)]}


def measure_all(targets=None) -> dict:
    import torch

    sms = torch.cuda.get_device_properties(0).multi_processor_count
    out = {}
    for name in targets or TARGETS:
        res = profile(name)
        if "error" in res and "values" not in res:  # an unknown metric fails the whole run: one at a time
            vals, errs = {}, {}
            for m in CANDIDATES:
                r = profile(name, (m,))
                if "values" in r:
                    vals[m] = r["values"][m]
                else:
                    errs[m] = r["error"][-300:]
            res = {"values": vals, "errors": errs}
        res["model"] = model_bytes(name, sms)
        out[name] = res
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--target")
    ap.add_argument("--source", help="a bcast_add target's known answer (a .cu file)")
    ap.add_argument("--out")
    a = ap.parse_args()
    if a.target:
        _run_target(a.target, a.source)
        return
    res = measure_all()
    text = json.dumps(res, indent=1)
    if a.out:
        Path(a.out).parent.mkdir(parents=True, exist_ok=True)
        Path(a.out).write_text(text)
    print(text)


if __name__ == "__main__":
    main()
