"""Week 3 day 2's scan: every tile and split of r1_split_k.cu timed once per shape (kernels.bench.bench, the L2 flushed
before each launch; each output checked against fp32 first), the rows the model is fitted on and checked against.

    python -m kernels.stream_k.scan [--rows 64 128 512 2048] [--out build/gpu]

Writes scan.json (every timing, cuBLAS's beside) and constants.json (model.fit on the FIT_ROWS rows), and prints the
model's error on every HELD_OUT row. Single passes: what the model reads, never a claim (the claim is sweep.py's
rounds). Needs an sm_90 GPU.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

from . import model, workload

SPLITS = (1, 2, 3, 4, 6, 8)
MAX_WAVES = 64  # options of more waves than this are not timed (they are the slowest by any model; seconds each)


def scan(rows, reps: int = 10, progress=print) -> list[dict]:
    import torch

    from ..bench import bench
    from .launch import TILES, gemm_split_k, sm_count

    out = []
    for shape in workload.sweep(tuple(rows)):
        a, b = workload.make_inputs(shape)
        sms = sm_count(a.device)
        ref = a.float() @ b.float().T
        res = {}
        for tile in TILES:
            for s in SPLITS:
                if (s > 1 and s not in model.candidates(shape)) or \
                        model.tiles(shape, tile) * s > MAX_WAVES * sms * model.CTAS_PER_SM[tile]:
                    continue
                c = gemm_split_k(a, b, s, tile=tile)
                err = float((c.float() - ref).norm() / ref.norm())
                if not err < 4e-3:
                    raise AssertionError(f"{shape} {tile} splits {s}: rel err {err:.2e}")
                res[f"{tile}/s{s}"] = bench(lambda s=s, tile=tile: gemm_split_k(a, b, s, tile=tile),
                                            flops=int(workload.flops(shape)), reps=reps).ms
        cub = bench(lambda: a @ b.T, flops=int(workload.flops(shape)), reps=reps).ms
        del ref
        torch.cuda.empty_cache()
        out.append({"shape": list(shape), "sms": sms, "cublas_ms": cub, "res": res})
        best = min(res, key=res.get)
        progress(f"{workload.shape_name(shape)}: best {best} {res[best] * 1e3:.1f} us, cuBLAS {cub * 1e3:.1f} us")
    return out


def held_out_errors(scan_doc: list[dict], constants: dict) -> dict[str, float]:
    """{"<shape> <tile>/s<splits>": model / measured - 1} on the HELD_OUT rows."""
    out = {}
    for r in model.scan_rows(scan_doc, model.HELD_OUT):
        sms = next(e["sms"] for e in scan_doc if tuple(e["shape"]) == r["shape"])
        pred = model.predict_us(r["shape"], r["tile"], r["splits"], sms, constants)
        out[f"{workload.shape_name(r['shape'])} {r['tile']}/s{r['splits']}"] = pred / r["us"] - 1
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, nargs="*", default=[64, 128, 512, 2048])
    ap.add_argument("--out", default=".")
    args = ap.parse_args(argv)
    doc = scan(args.rows)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "scan.json").write_text(json.dumps(doc, indent=1))
    sms = doc[0]["sms"]
    constants = model.fit(model.scan_rows(doc, model.FIT_ROWS), sms)
    (out / "constants.json").write_text(json.dumps(constants, indent=1))
    errs = held_out_errors(doc, constants)
    print("fitted on rows", model.FIT_ROWS, constants)
    if errs:
        inside = sum(abs(e) <= model.BAND for e in errs.values())
        print(f"held out (rows {model.HELD_OUT}): {inside} of {len(errs)} within +-{model.BAND:.0%}, median |err| "
              f"{statistics.median(abs(e) for e in errs.values()):.1%}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
