"""Everything that needs a Hopper GPU, in one run (`make gpu-test`): results and logs under $OUT.

1. self-test and the ceilings of this run (D2D copy, cuBLAS bf16)
2. every topic's benchmark (autograder.benchmarks: the topic's kernels and its exercise's known answers checked
   against their references, timed, model beside them, the answers held to their bars); recorded_<gpu>.json per
   topic (copied next to the code when COURSE_RECORD=1)
   2b. claims rounds (tools/gpu_claims.py; `--skip claims`): GEMM and attention against cuBLAS / cuDNN in at least
   18 interleaved rounds, each side first and last equally often (GEMM's four: 24), on N(0, 1) and the exercise's
   data, each side's kernels named by the profiler; week 2 days 1-3 against the D2D copy of the same bytes the same
   way (kernels.copy_rounds): kernels/<slug>/rounds_<gpu>.json (COURSE_RECORD=1) and out/<slug>/
   Week 3 day 2 (`--slugs stream_k`): its scan (every tile and split once, the model fitted and held out) and its
   sweep of 40 LLM shapes in rounds against cuBLAS: kernels/stream_k/{scan,sweep}_<gpu>.json and out/stream_k/
   2c. the capstones in SM cycles (tools/gpu_cycles.py; `--skip cycles`): each side's launches under ncu, clocks left
   alone, the vendor's cycles over the course's per round: kernels/<slug>/cycles_<gpu>.json and out/<slug>/
3. grader calibration of every spec for this GPU kind, from the records step 2 wrote (autograder.calibration)
4. known answers graded on the GPU: every score and flag equal to its expected value
   4b. week 2's answers that hang or race, and the course solutions: the debug barrier build's stuck-warp lines and
   what compute-sanitizer (memcheck, racecheck, synccheck) catches of each (kernels/<slug>/sanitizer_<gpu>.json)
5. the solution notebooks executed top to bottom
6. nbgrader autograde of the solutions and of each known answer as a student: full marks / expected scores
6b. what a launch leaves for the next in GPU memory and shared memory, in one CUDA context and in the next
   (tools/gpu_residue.py: the channel the understanding checks' context per mutant closes)
7. class scale (`--scale-gpus 0 1`, with the other steps skipped): the cohort graded on every GPU and on one, each
   run's wall time and time outside grading students in scale_<n>gpu.json; `--compare-scale` reads two of them

Prints a summary table last and exits non-zero when anything failed.
"""

from __future__ import annotations

import argparse
import html
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
import traceback
from pathlib import Path

from gpu_claims import SLUGS as CLAIM_SLUGS, SWEEP_SLUGS, claims_rounds
from gpu_cycles import cycles_step
from gpu_cohort import autograde_cohort, class_scale, compare_scale
from gpu_mutants import understanding_checks, understanding_cohort
from gpu_residue import residue
from kernels.device import self_test
from autograder.known import solution_kernel
from autograder.spec import load
from kernels import rangeprof
from autograder.calibration import calibrate
from autograder.known import check_known, table
from autograder.hangs import hangs_and_races as run
from kernels.record import device_tag
from autograder.spec import all_specs, spec_path
from autograder.hangs import HANGS_AND_RACES

ROOT = Path(__file__).resolve().parent.parent
SUMMARY_FILE: Path | None = None
sys.path.insert(0, str(ROOT))


def step(name, fn, summary, *a, **kw):
    t0 = time.perf_counter()
    print(f"\n=== {name}", flush=True)
    try:
        res = fn(*a, **kw)
        ok = bool(res.get("ok", True)) if isinstance(res, dict) else True
        summary.append({"step": name, "ok": ok, "s": round(time.perf_counter() - t0, 1), "result": res})
    except Exception as exc:  # noqa: BLE001 - one failing step must not hide the others
        traceback.print_exc()
        summary.append({"step": name, "ok": False, "s": round(time.perf_counter() - t0, 1), "error": repr(exc)})
        res = None
    print(f"=== {name}: {'ok' if summary[-1]['ok'] else 'FAILED'} ({summary[-1]['s']} s)", flush=True)
    if SUMMARY_FILE is not None:  # after every step: a run stopped at its time limit still reports what it did
        SUMMARY_FILE.write_text(json.dumps(summary, indent=1, default=str))
    return res


def selftest():
    from kernels.bench import ceilings

    facts = self_test()
    ceil = ceilings()
    print(json.dumps(ceil, indent=1))
    return {"ok": True, "facts": facts, "ceilings": ceil}


def counted_launches(slugs=("ldgsts", "pipeline", "tma", "gemm")):
    """The grader's counted launches leave its timed ones alone (kernels.bench `counted`): each course solution timed
    with no profiler, then with the mechanism's counter ranges interleaved as the grader runs them. The timed median
    must stay within 3 % of the unprofiled one; the counted launches' own median is reported (a range slows some
    kernels: why counted launches are never timed), and every counted launch must carry the solution's bytes."""
    from kernels.compile import compile_cuda
    from kernels.runner import time_exercise

    ok, rows = True, {}
    for slug in slugs:
        ex = next(iter(load(slug).exercises.values()))
        wl = ex.workload()
        cubin = compile_cuda(solution_kernel(slug), name=ex.answer_var)
        (q,) = {r.bytes[0] for r in rangeprof.counted_rules(ex.parts["path"])}
        plain = time_exercise(ex, wl, cubin, 101, "student")
        with rangeprof.timed_counters([q]) as rc:
            mixed = time_exercise(ex, wl, cubin, 101, "student", ranges=rc)
        per = rangeprof.bytes_per_launch(rc)[q]
        drift = mixed["ms"] / plain["ms"] - 1
        good = abs(drift) <= 0.03 and len(per) == mixed["plan"]["counted"] and min(per) > 0
        ok &= good
        rows[slug] = {"plain_ms": plain["ms"], "timed_ms": mixed["ms"], "counted_ms": mixed["counted_ms"],
                      "drift": drift, "counted": len(per), "min_bytes": min(per), "ok": good}
        print(f"  {'ok ' if good else 'BAD'} {slug:<9} unprofiled {plain['ms']:.4f} ms  timed beside ranges "
              f"{mixed['ms']:.4f} ms ({drift:+.1%})  counted launches {mixed['counted_ms']:.4f} ms  "
              f"{q} >= {min(per):,.0f} B in each of {len(per)}")
    # Why an exercise's counted launches hold one quantity (kernels.rangeprof.counted_rules): what one pass keeps of
    # the TMA unit's load and store counters asked for together.
    both = rangeprof.RangeCounters({q: (rangeprof.TIMED[q][0],) for q in ("tma_load", "tma_store")})
    with both:
        pass
    rows["tma_load+tma_store"] = {"kept": sorted(both.quantities), "skipped": both.skipped}
    print(f"  one pass, TMA load and store counters asked together: kept {sorted(both.quantities)}, "
          f"left out {both.skipped}")
    return {"ok": ok, "rows": rows}


def timer_traps():
    """The one timer against work it must not be fooled by, on the GPU: a 1 GiB copy launched on a side stream (the
    events on the timed stream see an empty interval) must raise TimingError; the same copy on the timed stream must
    time at the copy's rate without complaint."""
    import torch

    from kernels.bench import TimingError, bench

    x = torch.rand(2**28, device="cuda")
    y = torch.empty_like(x)
    nbytes = 2 * x.numel() * x.element_size()
    side = torch.cuda.Stream()

    def on_side_stream():
        with torch.cuda.stream(side):
            y.copy_(x)

    res = {}
    try:
        r = bench(on_side_stream, bytes=nbytes, reps=10, warmup=2, with_ceilings=False)
        res["side_stream"] = {"caught": False, "event_ms": r.ms, "wall_ms": r.wall_ms}
    except TimingError as exc:
        res["side_stream"] = {"caught": True, "message": str(exc)}
    r = bench(lambda: y.copy_(x), bytes=nbytes, reps=10, warmup=2, with_ceilings=False)
    res["timed_stream"] = {"ms": r.ms, "wall_ms": r.wall_ms, "tbps": r.tbps}
    print(json.dumps(res, indent=1))
    res["ok"] = res["side_stream"]["caught"] and r.tbps > 1.0
    return res


def topic_bench(slug: str, out: Path):
    """A topic's benchmark in a process of its own (a fault there cannot take the next topic's CUDA context), with
    the exercise's known answers and the grader's checks of their timings (autograder.benchmarks.run_topic)."""
    code = ("import json, sys; from pathlib import Path; from autograder.benchmarks import run_topic; "
            "res = run_topic(sys.argv[1], Path(sys.argv[2])); print('BENCH ' + json.dumps(res, default=str))")
    p = subprocess.run([sys.executable, "-c", code, slug, str(out)], capture_output=True, text=True, cwd=ROOT)
    res = None
    for line in p.stdout.splitlines():
        if line.startswith("BENCH "):
            res = json.loads(line[6:])
    if res is None:
        raise RuntimeError(f"bench {slug} died (exit {p.returncode}): {p.stderr[-3000:]}")
    rows = res.get("rows", [])
    for r in rows:
        print(f"  {r['kernel']:<28} {r.get('shape', ''):<20} {r['ms']:.4f} ms  "
              f"{(r.get('tbps') or 0):.3f} TB/s  {(r.get('tflops') or 0):.1f} TFLOPS  "
              f"frac {r.get('fraction_of_ceiling') or 0:.3f}  model {r.get('model_prediction')}")
    return res


def gemm_ring_dram(out: Path, stages=(2, 4, 6)):
    """What rung 3's ring depth does to DRAM at 8192^3: one launch per depth measured by Nsight Compute (DRAM bytes
    read, duration). Four and six stages leave the same one CTA per SM; the model (kernels/gemm/model.py) says a
    deeper ring lets the CTAs that share a B panel drift apart, so B comes from DRAM more than once. Written to
    kernels/gemm/counters_<gpu>.json (COURSE_RECORD=1) and out/gemm/ring_dram.json."""
    from kernels import ncu, record
    from kernels.device import gpu

    code = ("import sys, torch; from kernels.gemm.launch import gemm; from kernels.gemm.exercise import make_inputs; "
            "x = make_inputs((8192, 8192, 8192), 1); s = int(sys.argv[1]); "
            "[gemm(x['a'], x['b'], 'pipelined', stages=s) for _ in range(3)]; torch.cuda.synchronize()")
    names = ["dram__bytes_read.sum", "gpu__time_duration.sum"]
    res = {}
    for st in stages:
        try:
            m = ncu.metrics([sys.executable, "-c", code, str(st)], names, kernel="regex:gemm_pipelined",
                            launch_skip=2, workdir=out / "gemm" / f"ncu_s{st}", timeout_s=600, cwd=str(ROOT))
        except (ncu.ProfileError, ncu.ProfilerUnavailable) as exc:
            res[st] = {"error": str(exc)[-1500:]}
            continue
        ns = m["gpu__time_duration.sum"]
        res[st] = {"dram_read_gb": m["dram__bytes_read.sum"] / 1e9, "ms": ns * 1e-6, "tflops": 2 * 8192**3 / ns / 1e3}
        print(f"  pipelined s{st} 8192^3: DRAM read {res[st]['dram_read_gb']:.2f} GB, {res[st]['ms']:.3f} ms "
              f"({res[st]['tflops']:.1f} TFLOPS under ncu)")
    g = gpu() or {}
    doc = {"device": g.get("name"), "driver": g.get("driver"), "date": time.strftime("%Y-%m-%d"),
           "what": "rung 3 (pipelined) at 8192^3 on the exercise's inputs, one launch per ring depth under ncu",
           "stages": {str(k): v for k, v in res.items()}}
    (out / "gemm").mkdir(parents=True, exist_ok=True)
    (out / "gemm" / "ring_dram.json").write_text(json.dumps(doc, indent=1))
    if os.environ.get("COURSE_RECORD") == "1":
        f = ROOT / "kernels" / "gemm" / f"counters_{record.device_tag(g.get('name'))}.json"
        kept = json.loads(f.read_text()).get("tensor_pipe") if f.exists() else None  # the other step's counters
        f.write_text(json.dumps({**doc, **({"tensor_pipe": kept} if kept else {})}, indent=1) + "\n")
    return {"ok": all("error" not in v for v in res.values()), **doc}


def attention_pipes(out: Path):
    """What limits the attention rungs: the tensor pipe's and the XU (MUFU) pipe's active share (ncu) of one launch of
    today's rung and of the overlap rung (kernels.attention.overlap.pipes). Written to out/attention/pipes.json and,
    with COURSE_RECORD=1, to kernels/attention/counters_<gpu>.json."""
    from kernels import record
    from kernels.attention import overlap
    from kernels.device import gpu

    res = overlap.pipes(out / "attention" / "ncu_pipes")
    for label, m in res.items():
        print(f"  {label:<28} " + (f"tensor pipe {m['tensor']:.1f} %, XU (MUFU) pipe {m['xu']:.1f} %, {m['ms']:.3f} ms "
                                    f"under ncu" if "error" not in m else f"error {m['error'][-500:]}"))
    g = gpu() or {}
    doc = {"device": g.get("name"), "driver": g.get("driver"), "date": time.strftime("%Y-%m-%d"),
           "what": "one launch of each run under ncu at the bench's shapes (B 4, H 32, S 4096), the exercise's inputs",
           "runs": res}
    (out / "attention").mkdir(parents=True, exist_ok=True)
    (out / "attention" / "pipes.json").write_text(json.dumps(doc, indent=1))
    if os.environ.get("COURSE_RECORD") == "1":
        f = ROOT / "kernels" / "attention" / f"counters_{record.device_tag(g.get('name'))}.json"
        f.write_text(json.dumps(doc, indent=1) + "\n")
    return {"ok": all("error" not in m for m in res.values()), **doc}


def gemm_tensor_pipe(out: Path):
    """Why rung 6 of the GEMM ladder gains on rung 5: the tensor pipe's active share (ncu) of one launch of each at
    8192^3 (kernels.gemm.rung6.tensor_pipe) beside the model's busy share (kernels.gemm.epilogue.rung6_gain). Written
    to out/gemm/tensor_pipe.json and, with COURSE_RECORD=1, into kernels/gemm/counters_<gpu>.json ("tensor_pipe")."""
    from kernels import record
    from kernels.device import gpu
    from kernels.gemm import epilogue, rung6

    res = rung6.tensor_pipe(out / "gemm" / "ncu_tensor_pipe")
    gain = epilogue.rung6_gain()
    for v, m in res.items():
        print(f"  {v:<11} 8192^3: " + (f"tensor pipe active {m['pct']:.1f} % ({m['metric']}), {m['ms']:.3f} ms under "
                                       f"ncu; model busy {gain.get(v, {}).get('tensor_busy', float('nan')):.1%}"
                                       if "pct" in m else f"error {m['error'][-500:]}"))
    g = gpu() or {}
    doc = {"device": g.get("name"), "driver": g.get("driver"), "date": time.strftime("%Y-%m-%d"),
           "what": "rungs 5 (cluster) and 6 (store_warp) at 8192^3 on the exercise's inputs, one launch each under ncu",
           "variants": res, "model_busy": {v: x["tensor_busy"] for v, x in gain.items()}}
    (out / "gemm").mkdir(parents=True, exist_ok=True)
    (out / "gemm" / "tensor_pipe.json").write_text(json.dumps(doc, indent=1))
    if os.environ.get("COURSE_RECORD") == "1":
        f = ROOT / "kernels" / "gemm" / f"counters_{record.device_tag(g.get('name'))}.json"
        kept = json.loads(f.read_text()) if f.exists() else {"device": g.get("name")}
        kept["tensor_pipe"] = doc
        f.write_text(json.dumps(kept, indent=1) + "\n")
    return {"ok": all("pct" in v for v in res.values()), **doc}


def calibrate_all(slugs, out: Path):
    """Each topic's bars calibrated for this GPU kind from the record its bench step just wrote (out/<slug>/
    recorded_<gpu>.json): written into the specs (COURSE_RECORD=1) or beside the results."""
    from kernels import record
    from kernels.device import gpu

    tag = record.device_tag((gpu() or {}).get("name"))
    res, errors = {}, {}
    for s in slugs:
        # the copy next to the code when the run records (COURSE_RECORD=1): the calibration names that file
        rec = record.path(s, tag) if os.environ.get("COURSE_RECORD") == "1" else out / s / f"recorded_{tag}.json"
        try:
            if not rec.exists():
                raise FileNotFoundError(f"{rec}: the bench step of {s} wrote no record on this GPU")
            res[s] = calibrate(s, records=[rec], write_spec=os.environ.get("COURSE_RECORD") == "1")
        except Exception as exc:  # noqa: BLE001 - one topic's failure must not leave the others uncalibrated
            errors[s] = repr(exc)
    print(json.dumps({"calibration": res, "errors": errors}, indent=1, default=str))
    ok = not errors and all(c["margin"] >= 1.0799 for r in res.values() for g in r.values() for c in g.values())
    return {"ok": ok, "calibration": res, "errors": errors}


def known_all(slugs, names=None):
    """Every known answer of `slugs` (or only `names`, "slug.answer") graded on this GPU and compared with its expected
    score; with each answer's grading wall time and what the counters in its timing loop saw."""
    from kernels.device import gpu

    out, ok = {}, True
    for slug in slugs:
        mine = [n.split(".", 1)[1] for n in names or () if n.startswith(slug + ".")]
        if names and not mine:
            continue
        # one batch per topic: the ceilings and the course reference are measured once and shared, as in grading
        os.environ["COURSE_BATCH_DIR"] = str(ROOT / "build" / "known-batch" / slug / str(time.time()))
        res = check_known(slug, seed=int.from_bytes(os.urandom(6), "little"), names=mine or None)
        print(f"== {slug}\n{table(res)}")
        out[slug] = []
        for r in res:
            es = next(iter(r.grade.exercises.values()))
            timed = (es.facts.get("path") or {}).get("timed") or {}
            seen = {q: [min(v), max(v)] for q, v in (timed.get("per_launch") or {}).items() if v}
            out[slug].append({"name": r.answer.name, "ok": r.ok, "mismatches": r.mismatches, "unchecked": r.unchecked,
                              "points": {p: s.points for p, s in es.parts.items()}, "flags": r.grade.flags,
                              "wall_s": es.facts.get("wall_s"), "timed_measured": timed.get("measured"),
                              "timed_reason": timed.get("reason"), "timed_min_max": seen,
                              "timed_den": timed.get("den"), "timed_ms": timed.get("timed_ms"),
                              "counted_ms": timed.get("counted_ms")})
            slow = (f" (counted launches {timed['counted_ms']:.4f} ms median, timed {timed['timed_ms']:.4f} ms)"
                    if timed.get("counted_ms") and timed.get("timed_ms") else "")
            print(f"   {r.answer.name}: graded in {es.facts.get('wall_s') or 0:.1f} s; counted launches: "
                  f"{seen or timed.get('reason') or 'not counted'}{slow}")
        ok &= all(r.ok and not r.unchecked for r in res)  # every part graded on a Hopper GPU
    return {"ok": ok, "known": out, "gpu": (gpu() or {}).get("name")}


def hangs_and_races(out: Path, slugs):
    """Week 2's known answers that hang or race and the course solutions (autograder.hangs.HANGS_AND_RACES): the first
    shape each fails on, the debug barrier build's stuck warps there, and each compute-sanitizer tool's verdict
    (caught / not caught / hung / error; clean / false alarm for the solution) with its first message. Every
    sanitizer run is a process group killed at its timeout: a hang costs its own run only."""

    return run(out, slugs)


def practice_output(nb: dict) -> str | None:
    """The text an executed notebook's practice cell (a call of autograder.what_if) printed or displayed, tags
    stripped, entities decoded; None where the notebook has no such cell."""
    for cell in nb.get("cells", []):
        src = "".join(cell.get("source", "")) if isinstance(cell.get("source"), list) else cell.get("source", "")
        if cell.get("cell_type") != "code" or "autograder.what_if(" not in src:
            continue
        parts = []
        for o in cell.get("outputs", []):
            data = o.get("data", {})
            text = o.get("text") or data.get("text/html") or data.get("text/plain") or o.get("evalue") or ""
            parts.append(re.sub(r"<[^>]+>", " ", "".join(text) if isinstance(text, list) else text))
        return html.unescape(re.sub(r"[ \t]+", " ", "\n".join(parts))).strip()
    return None


def execute_notebooks(out: Path, slugs=None):
    """The solution notebooks of `slugs` (default: every one) executed top to bottom, one at a time: their timing
    cells check that CUDA events and a wall clock agree, which another notebook's kernels on the same GPU would
    break (their timings are not recorded: this proves they run on the GPU; the benchmark scripts record numbers)."""

    nbs = sorted((ROOT / "solutions").glob("week*/*.ipynb"))
    if slugs is not None:
        mine = {ROOT / "solutions" / s.assignment / s.notebook for s in all_specs() if s.slug in slugs}
        nbs = [nb for nb in nbs if nb in mine]
    done = {}
    for nb in nbs:
        dst = out / "executed" / nb.name
        dst.parent.mkdir(parents=True, exist_ok=True)
        t0 = time.perf_counter()
        p = subprocess.run([sys.executable, "-m", "jupyter", "nbconvert", "--to", "notebook", "--execute",
                            "--ExecutePreprocessor.timeout=900", "--output", str(dst), str(nb)],
                           capture_output=True, text=True, cwd=ROOT, timeout=1200)
        done[nb.name] = {"ok": p.returncode == 0, "s": round(time.perf_counter() - t0, 1),
                         "err": p.stderr[-2000:] if p.returncode else ""}
        if dst.exists():  # the practice cell's output (autograder.what_if): what this GPU measured in the notebook
            practice = practice_output(json.loads(dst.read_text()))
            if practice is not None:
                done[nb.name]["what_if"] = practice
        print(f"  {nb.name}: {'ok' if p.returncode == 0 else 'FAILED'} ({done[nb.name]['s']} s)")
        if p.returncode:
            print(p.stderr[-3000:])
    practice = {k: {"ok": v["ok"], "s": v["s"], "what_if": v["what_if"]} for k, v in done.items() if "what_if" in v}
    if practice and os.environ.get("COURSE_RECORD") == "1":  # autograder/recorded_practice_<gpu>.json
        from kernels.device import gpu

        g = gpu() or {}
        doc = {"device": g.get("name"), "driver": g.get("driver"), "date": time.strftime("%Y-%m-%d"),
               "about": "the practice cells (autograder.what_if) of the solution notebooks, executed top to bottom "
                        "by make gpu-test's 'execute solution notebooks' on this GPU: each measured the mutants of "
                        "the notebook's kernel", "notebooks": practice}
        (ROOT / "autograder" / f"recorded_practice_{device_tag(g.get('name'))}.json").write_text(
            json.dumps(doc, indent=1) + "\n")
    return {"ok": all(v["ok"] for v in done.values()), "notebooks": done}


# The step names --skip takes, in the order the steps run (kernels.cycles.GPU_ARGS skips all but 'cycles').
SKIPPABLE = ("traps", "ranges", "bench", "claims", "cycles", "counters", "calibrate", "known", "sanitizer", "notebooks",
             "autograde", "residue")


def _parser() -> argparse.ArgumentParser:
    """make gpu-test's options (GPU_ARGS)."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.environ.get("OUT", "build/gpu"))
    ap.add_argument("--slugs", nargs="*")
    ap.add_argument("--skip", nargs="*", default=[], help=f"steps left out, of {' '.join(SKIPPABLE)}")
    ap.add_argument("--known-slugs", nargs="*", help="topics whose known answers are graded (default: all)")
    ap.add_argument("--known-names", nargs="*", help="only these known answers (slug.answer)")
    ap.add_argument("--cohort", choices=("gpu20", "gpu9", "rest", "integrity", "all"), default="gpu20",
                    help="which synthetic cohort nbgrader grades (autograder.cohort)")
    ap.add_argument("--members", nargs="*", help="only these students of the cohort (e.g. a pending re-grade)")
    ap.add_argument("--scale-gpus", type=int, nargs="*", default=[],
                    help="step 'class scale': grade the cohort on N GPUs for each N given (0: all), scale_<n>gpu.json")
    ap.add_argument("--compare-scale", nargs=2, metavar=("MANY", "ONE"),
                    help="compare two scale_<n>gpu.json files (no GPU needed) and exit")
    ap.add_argument("--mutants", nargs="*", default=[],
                    help="step 'understanding checks': every mutant of these topics' answers measured")
    ap.add_argument("--mutant-answers", nargs="*", default=["solution"],
                    help="known answers (solution, ...), slow (SLOW_ANSWER), assistant, or .cu files whose mutants "
                         "are measured")
    ap.add_argument("--understanding-cohort", choices=("gpu9", "gpu20"),
                    help="step 'understanding checks of a cohort': every member's week-1 kernels' mutants measured "
                         "(autograder understanding measure's work), recorded for the sheets")
    ap.add_argument("--mutant-runs", type=int, default=3)
    ap.add_argument("--mutant-rounds", type=int, default=8)
    ap.add_argument("--mutant-deadline", type=float, default=None,
                    help="seconds after which no further answer's mutants are started (written as not measured)")
    return ap


def main() -> int:
    args = _parser().parse_args()
    if args.compare_scale:
        return 0 if compare_scale(*map(Path, args.compare_scale))["ok"] else 1
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    global SUMMARY_FILE
    SUMMARY_FILE = out / "summary.json"

    specs = [s.slug for s in all_specs()]
    slugs = args.slugs or specs
    summary: list[dict] = []
    step("self-test and ceilings", selftest, summary)
    if "traps" not in args.skip:
        step("timer catches work off the timed stream", timer_traps, summary)
    if "ranges" not in args.skip:
        step("counted launches leave the timed ones alone", counted_launches, summary)
    for slug in slugs:
        if (ROOT / "kernels" / slug / "bench.py").exists() and "bench" not in args.skip:
            step(f"bench {slug}", topic_bench, summary, slug, out)
    command = shlex.join([Path(sys.executable).name, "tools/gpu_check.py", *sys.argv[1:]])  # the exact command
    if "claims" not in args.skip and set(CLAIM_SLUGS + SWEEP_SLUGS) & set(slugs):
        step("claims rounds", claims_rounds, summary, slugs, out, command)
    if "cycles" not in args.skip and {"gemm", "attention"} & set(slugs):
        step("capstones in SM cycles (ncu)", cycles_step, summary, slugs, out, command)
    graded = [s for s in slugs if s in specs]
    if "gemm" in slugs and "counters" not in args.skip:
        step("gemm ring depth and DRAM (ncu)", gemm_ring_dram, summary, out)
        step("gemm tensor pipe, rung 5 vs rung 6 (ncu)", gemm_tensor_pipe, summary, out)
    if "attention" in slugs and "counters" not in args.skip:
        step("attention tensor and XU pipes (ncu)", attention_pipes, summary, out)
    if "calibrate" not in args.skip:
        step("calibrate grader bars", calibrate_all, summary, graded, out)
        for s in graded:  # the calibrated specs come back with the results
            (out / "specs").mkdir(exist_ok=True)
            shutil.copy(spec_path(s), out / "specs" / f"{s}.toml")
    if "known" not in args.skip:
        step("known answers on the GPU", known_all, summary, args.known_slugs or graded, args.known_names)
    if "sanitizer" not in args.skip:

        week2 = [s for s in slugs if s in HANGS_AND_RACES]
        if week2:
            step("hangs and races (debug barriers, compute-sanitizer)", hangs_and_races, summary, out, week2)
    if "notebooks" not in args.skip:
        step("execute solution notebooks", execute_notebooks, summary, out, slugs)
    if "autograde" not in args.skip:
        # week 1: the named cohort; a later week: every member (its solutions, blank, and each known answer)
        for week in sorted({s.assignment for s in all_specs() if s.slug in graded}):
            step(f"nbgrader autograde {week} cohort", autograde_cohort, summary, graded, week,
                 args.cohort if week == "week1" else "all", args.members if week == "week1" else None)
    if "residue" not in args.skip:
        step("what a launch leaves for the next (residue)", residue, summary, out)
    if args.understanding_cohort:
        step(f"understanding checks of the {args.understanding_cohort} cohort", understanding_cohort, summary, out,
             "week1", args.understanding_cohort, args.mutant_runs, args.mutant_rounds)
    if args.mutants:
        step("understanding checks (mutants)", understanding_checks, summary, out, args.mutants, args.mutant_answers,
             args.mutant_runs, args.mutant_rounds, args.mutant_deadline)
    for n in args.scale_gpus:  # class scale: the cohort on n GPUs (0: all of them)
        step(f"class scale, {n or 'all'} GPUs", class_scale, summary, out, "week1", args.cohort, n or None,
             args.members)
    (out / "summary.json").write_text(json.dumps(summary, indent=1, default=str))
    print("\n==== summary")
    for s in summary:
        print(f"  {'ok ' if s['ok'] else 'BAD'} {s['step']:<36} {s['s']:>7} s  {s.get('error', '')}")
    return 0 if all(s["ok"] for s in summary) else 1


if __name__ == "__main__":
    sys.exit(main())
