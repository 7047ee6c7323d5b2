"""make gpu-test's step 'claims rounds' (tools/gpu_check.py; `--skip claims` leaves it out): every claim against a
vendor baseline measured the course's one way (kernels.compare) and written whole — GEMM rung 6, Triton and rung 5
against cuBLAS at 8192^3 (kernels.gemm.bench.parity_rounds), the attention overlap rung against cuDNN at its goal
shapes (kernels.attention.bench.overlap_rounds): interleaved rounds (18; GEMM's four runs 24, so that each run is first
and last equally often) on both inputs (N(0, 1) and the exercise's), each side's kernels named by the profiler once
before the rounds (kernels.bench.kernel_names), the SM clock sampled. Week 2 days 1-3 (swizzle, warp_specialization,
multicast: COPY_DAYS) state fractions of the copy ceiling: their claims (each day's COPY_CLAIMS) run against the D2D
copy of the same bytes the same way (kernels.copy_rounds, the day's claim_rounds; 18 or 24 rounds), on their one data
label "exercise", the exercise's course solution among the rungs (its known answers handed in).

Written to OUT/<slug>/rounds_<gpu>.json and, with COURSE_RECORD=1, to kernels/<slug>/rounds_<gpu>.json (what
kernels.claims and the README's claims table read): {"device", "driver", "torch", "triton", "cuda_core", "date",
"what" (the exact command that ran), "about", "rounds", "datas", "kernels", "rows"}.
"""

from __future__ import annotations

import datetime as dt
import importlib.metadata as md
import json
import os
import traceback
from pathlib import Path

from autograder.benchmarks import answers as known_answers
from kernels.attention import bench as attention_bench
from kernels.claims import COPY_DAYS, doc_claims
from kernels.clock import SmClock
from kernels.compare import balanced_rounds
from kernels.copy_rounds import CLOCK_MS as COPY_CLOCK_MS, DATAS as COPY_DATAS
from kernels.device import gpu
from kernels.fp8_gemm import rounds as fp8_rounds
from kernels.fp8_gemm import workload as fp8_workload
from kernels.gemm import baselines as gemm_baselines
from kernels.gemm import bench as gemm_bench
from kernels.multicast import bench as multicast_bench
from kernels.record import device_tag
from kernels.swizzle import bench as swizzle_bench
from kernels.topic import provided
from kernels.warp_specialization import bench as ws_bench

ROOT = Path(__file__).resolve().parent.parent
# the topics with a claim against a vendor library, then week 2 days 1-3 (claims against the D2D copy of the same bytes)
SLUGS = ("gemm", "attention", "fp8_gemm", *COPY_DAYS)
COPY_BENCH = {"swizzle": swizzle_bench, "warp_specialization": ws_bench, "multicast": multicast_bench}
DATAS = ("normal", "exercise")
ABOUT = {"gemm": "GEMM rung 6 (store_warp), Triton and rung 5 (cluster) against cuBLAS at 8192^3 (kernels.gemm.bench."
                 "parity_rounds)",
         "attention": "the attention overlap rung's default entry against cuDNN at the three goal shapes "
                      "(kernels.attention.bench.overlap_rounds)",
         "fp8_gemm": "the FP8 GEMM's rungs, Triton's block-scaled FP8 matmul and cuBLAS bf16 against cuBLASLt's "
                     "block-scaled FP8 GEMM at 8192^3 on the exercise's inputs (N(0, 1) entries, quantized: "
                     "kernels.fp8_gemm.rounds.ladder_rounds)",
         "swizzle": "colsum at 1 pass (128B swizzle, and the 8-way conflicted layout) and the exercise's course "
                    "solution (the transpose) against the D2D copy of the same bytes (kernels.swizzle.bench."
                    "claim_rounds)",
         "warp_specialization": "the row-sum ring at 4 stages (warp-specialized, and uniform) and the exercise's "
                                "course solution (ws_axpy) against the D2D copy of the same bytes "
                                "(kernels.warp_specialization.bench.claim_rounds)",
         "multicast": "broadcast_sum at clusters 1, 2 and 4 (multicast from 2) and the exercise's multicast course "
                      "solution and per-CTA answer against the D2D copy of the same bytes (kernels.multicast.bench."
                      "claim_rounds)"}


def rounds_for(slug: str) -> int:
    """The topic's rounds: at least kernels.compare.ROUNDS (18), each side first and last equally often (GEMM's four
    runs: 24; a copy day's: its CLAIM_ROUNDS, balanced for each of its claims)."""
    if slug in COPY_BENCH:
        return COPY_BENCH[slug].CLAIM_ROUNDS
    if slug == "fp8_gemm":
        return 18  # ladder_rounds balances them over its candidates (kernels.compare.balanced_rounds)
    return balanced_rounds(gemm_bench.CLAIM_RUNS if slug == "gemm" else attention_bench.ROUND_RUNS)


def measure_rounds(slug: str, rounds: int | None = None, datas=DATAS) -> dict:
    """The GPU work of one topic: {"kernels": each side's kernels (profiled once, before the rounds), "rows": the
    rounds on each data of `datas`, "rounds": how many (default rounds_for(slug)); GEMM's also "baselines": what
    cuBLASLt's candidates and Triton's autotuning kept (kernels.gemm.baselines.choices); a copy day's also "datas",
    its one data label (kernels.copy_rounds.DATAS, whatever `datas` says), its claims timed with the exercise's known
    answers handed in (autograder.benchmarks.answers: the course solution is one of the rungs)}."""
    rounds = rounds or rounds_for(slug)
    if slug == "gemm":
        kernels = gemm_bench.parity_kernels(runs=gemm_bench.CLAIM_RUNS)
        with SmClock() as clock:
            rows = gemm_bench.parity_rounds(clock, rounds=rounds, runs=gemm_bench.CLAIM_RUNS, datas=datas)
        return {"kernels": kernels, "rows": rows, "rounds": rounds, "baselines": gemm_baselines.choices()}
    elif slug == "attention":
        kernels = attention_bench.rounds_kernels()
        with SmClock() as clock:
            rows = attention_bench.overlap_rounds(clock, rounds=rounds, datas=datas)
    elif slug in COPY_BENCH:  # its one data label (kernels.copy_rounds.DATAS), its known answers handed in
        day = COPY_BENCH[slug]
        with provided(slug, known_answers(slug)):
            kernels = day.claim_kernels()
            with SmClock(period_ms=COPY_CLOCK_MS) as clock:
                rows = day.claim_rounds(clock, rounds=rounds, datas=COPY_DATAS)
        return {"kernels": kernels, "rows": rows, "rounds": rounds, "datas": list(COPY_DATAS)}
    elif slug == "fp8_gemm":  # one data: the exercise's inputs are N(0, 1) draws, quantized (workload.make_inputs)
        doc = fp8_rounds.ladder_rounds(fp8_workload.BENCH_SHAPE, rounds=rounds)
        return {"kernels": doc["kernels"], "rows": [doc], "rounds": doc["rounds"], "datas": ["exercise"]}
    else:
        raise ValueError(f"{slug}: no claim against a baseline (one of {SLUGS})")
    return {"kernels": kernels, "rows": rows, "rounds": rounds}


def _version(dist: str) -> str | None:
    try:
        return md.version(dist)
    except md.PackageNotFoundError:
        return None


def rounds_doc(slug: str, measured: dict, command: str, datas=DATAS) -> dict:
    """The rounds record of one topic (measure_rounds' `measured`): this GPU, driver and versions, today's date, the
    exact command, the rounds, the datas, each side's kernels and the rows."""
    g, rounds, datas = gpu() or {}, measured["rounds"], measured.get("datas", datas)
    return {"device": g.get("name"), "driver": g.get("driver"), "torch": _version("torch"),
            "triton": _version("triton"), "cuda_core": _version("cuda-core"), "date": dt.date.today().isoformat(),
            "what": command,
            "about": f"{ABOUT[slug]}: {rounds} interleaved rounds on each of {', '.join(datas)} data, each side's "
                     "kernels profiled once before them, written by make gpu-test's 'claims rounds' step",
            "rounds": rounds, "datas": list(datas), "kernels": measured["kernels"],
            **({"baselines": measured["baselines"]} if "baselines" in measured else {}), "rows": measured["rows"]}


# Week 3 day 2: its sweep is a table of 40 shapes, not a claim of this file's rows: the step runs its scan (every tile
# and split once: the model's fit and held-out rows) and then its sweep in rounds with the fitted pick, each in a
# process of its own, and writes kernels/stream_k/{scan,sweep}_<gpu>.json (COURSE_RECORD=1) and out/stream_k/.
SWEEP_SLUGS = ("stream_k",)


def stream_k_commands(out: Path, rounds: int) -> list[list[str]]:
    """The two commands of the day-2 part of the step (kernels.stream_k.scan, then .sweep with the scan's fit)."""
    import sys

    d = out / "stream_k"
    return [[sys.executable, "-m", "kernels.stream_k.scan", "--out", str(d)],
            [sys.executable, "-m", "kernels.stream_k.sweep", "--rounds", str(rounds), "--week2", "--reduce",
             "--constants", str(d / "constants.json"), "--out", str(d)]]


def stream_k_sweep(out: Path, rounds: int | None = None) -> dict:
    import shutil
    import subprocess

    for cmd in stream_k_commands(out, rounds or 18):
        p = subprocess.run(cmd, cwd=ROOT, text=True, capture_output=True)
        print(p.stdout[-4000:])
        if p.returncode:
            return {"ok": False, "error": f"{' '.join(cmd[1:4])} exit {p.returncode}: {p.stderr[-2000:]}"}
    tag = device_tag((gpu() or {}).get("name"))
    files = []
    for name in ("scan", "sweep"):
        src = out / "stream_k" / f"{name}.json"
        files.append(str(src))
        if os.environ.get("COURSE_RECORD") == "1":
            shutil.copy(src, ROOT / "kernels" / "stream_k" / f"{name}_{tag}.json")
            files.append(str(ROOT / "kernels" / "stream_k" / f"{name}_{tag}.json"))
    return {"ok": True, "files": files}


def claims_rounds(slugs, out: Path, command: str, rounds: int | None = None) -> dict:
    """The step: for each topic of SLUGS in `slugs`, its rounds measured and written (module docstring), the claims
    they support printed (kernels.claims.doc_claims). A topic that fails is reported; the others still run."""
    res, ok = {}, True
    for slug in (s for s in SLUGS if s in slugs):
        try:
            doc = rounds_doc(slug, measure_rounds(slug, rounds), command)
        except Exception as exc:  # noqa: BLE001 - one topic's failure must not cost the other its rounds
            traceback.print_exc()
            res[slug], ok = {"error": repr(exc)}, False
            continue
        name = f"rounds_{device_tag(doc['device'])}.json"
        files = [out / slug / name] + ([ROOT / "kernels" / slug / name] if os.environ.get("COURSE_RECORD") == "1"
                                       else [])
        for f in files:
            f.parent.mkdir(parents=True, exist_ok=True)
            f.write_text(json.dumps(doc, indent=1) + "\n")
        claims = doc_claims(slug, doc)
        for c in claims:
            print(f"  {c['claim']:<38} {c['data']:<9} {c['rounds']:>3} rounds  {c['median']:.3f}x "
                  f"({c['lo']:.3f}-{c['hi']:.3f}x, {c['says']})  " + "; ".join(f"{k} {n}" for k, n in
                                                                            c["kernels"].items()))
        res[slug] = {"files": [str(f) for f in files], "claims": claims}
    if set(SWEEP_SLUGS) & set(slugs):
        res["stream_k"] = stream_k_sweep(out, rounds)
        ok = ok and res["stream_k"]["ok"]
    return {"ok": ok, **res}
