"""Everything that needs a Hopper GPU, in one run (`make gpu-test`): results and logs under $OUT.

1. self-test and the ceilings of this run (D2D copy, cuBLAS bf16)
2. every topic's benchmark (autograder.benchmarks: the topic's kernels and its exercise's known answers checked
   against their references, timed, model beside them, the answers held to their bars); recorded_<gpu>.json per
   topic (copied next to the code when COURSE_RECORD=1)
3. grader calibration of every spec for this GPU kind, from the records step 2 wrote (autograder.calibration)
4. known answers graded on the GPU: every score and flag equal to its expected value
   4b. week 2's answers that hang or race, and the course solutions: the debug barrier build's stuck-warp lines and
   what compute-sanitizer (memcheck, racecheck, synccheck) catches of each (kernels/<slug>/sanitizer_<gpu>.json)
5. the solution notebooks executed top to bottom
6. nbgrader autograde of the solutions and of each known answer as a student: full marks / expected scores
7. class scale (`--scale-gpus 0 1`, with the other steps skipped): the cohort graded on every GPU and on one, each
   run's wall time and time outside grading students in scale_<n>gpu.json; `--compare-scale` reads two of them

Prints a summary table last and exits non-zero when anything failed.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
import traceback
from pathlib import Path

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
    from kernels.device import self_test

    facts = self_test()
    ceil = ceilings()
    print(json.dumps(ceil, indent=1))
    return {"ok": True, "facts": facts, "ceilings": ceil}


def counted_launches(slugs=("ldgsts", "pipeline", "tma", "gemm")):
    """The grader's counted launches leave its timed ones alone (kernels.bench `counted`): each course solution timed
    with no profiler, then with the mechanism's counter ranges interleaved as the grader runs them. The timed median
    must stay within 3 % of the unprofiled one; the counted launches' own median is reported (a range slows some
    kernels: why counted launches are never timed), and every counted launch must carry the solution's bytes."""
    from autograder.spec import load
    from kernels import rangeprof
    from kernels.compile import compile_cuda
    from kernels.runner import time_exercise

    ok, rows = True, {}
    for slug in slugs:
        ex = next(iter(load(slug).exercises.values()))
        wl = ex.workload()
        cubin = compile_cuda((ROOT / "kernels" / slug / "grading" / "known" / "correct.cu").read_text(),
                             name=ex.answer_var)
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
    today's rung and of the overlap rung (kernels.attention.bench.pipes). Written to out/attention/pipes.json and,
    with COURSE_RECORD=1, to kernels/attention/counters_<gpu>.json."""
    from kernels import record
    from kernels.attention import bench
    from kernels.device import gpu

    res = bench.pipes(out / "attention" / "ncu_pipes")
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
    8192^3 (kernels.gemm.bench.tensor_pipe) beside the model's busy share (kernels.gemm.model.rung6_gain). Written to
    out/gemm/tensor_pipe.json and, with COURSE_RECORD=1, into kernels/gemm/counters_<gpu>.json ("tensor_pipe")."""
    from kernels import record
    from kernels.device import gpu
    from kernels.gemm import bench, model

    res = bench.tensor_pipe(out / "gemm" / "ncu_tensor_pipe")
    gain = model.rung6_gain()
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
    from autograder.calibration import calibrate
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
    from autograder.known import check_known, table
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
    from autograder.hangs import hangs_and_races as run

    return run(out, slugs)


def execute_notebooks(out: Path, slugs=None):
    """The solution notebooks of `slugs` (default: every one) executed top to bottom, one at a time: their timing
    cells check that CUDA events and a wall clock agree, which another notebook's kernels on the same GPU would
    break (their timings are not recorded: this proves they run on the GPU; the benchmark scripts record numbers)."""
    from autograder.spec import all_specs

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
        print(f"  {nb.name}: {'ok' if p.returncode == 0 else 'FAILED'} ({done[nb.name]['s']} s)")
        if p.returncode:
            print(p.stderr[-3000:])
    return {"ok": all(v["ok"] for v in done.values()), "notebooks": done}


def autograde_cohort(slugs, week="week1", members="gpu20", only=None, gpus=None):
    """The synthetic cohort (autograder.cohort) graded by `autograder grade`: every student's gradebook score and
    flags equal to their expected values; batch and per-submission wall times. `gpus`: None grades on every GPU of
    the machine (`--gpus all`); a count N grades on the first N only (CUDA_VISIBLE_DEVICES), e.g. 1 for one lane."""
    from nbgrader.api import Gradebook

    from autograder.cohort import build, cohort_grading_dir, members_of
    # the cohort's own grading folder (build/grading-cohort), never the class's build/grading
    grading = cohort_grading_dir()
    shutil.rmtree(grading, ignore_errors=True)
    # `only`: a few students of the named cohort, re-graded alone (never recorded over the whole cohort's entry)
    made = build(grading / "submitted", week, list(only) if only else members_of(members, week))
    t0 = time.perf_counter()
    seed = str(int.from_bytes(os.urandom(6), "little"))
    env = dict(os.environ, COURSE_GRADING_DIR=str(grading))
    if gpus is not None:
        env["CUDA_VISIBLE_DEVICES"] = ",".join(str(i) for i in range(gpus))
    r = subprocess.run([sys.executable, "-m", "autograder.cli", "grade", week, "--seed", seed],
                       capture_output=True, text=True, cwd=ROOT, env=env)
    print(r.stdout[-4000:])
    if r.returncode:
        print(r.stderr[-5000:])
    wall = time.perf_counter() - t0
    batch = json.loads((grading / f"batch_{week}.json").read_text()) if (grading / f"batch_{week}.json").exists() else {}
    # exit status 2 with every student graded: a hand-in mistake the cohort makes on purpose (`malformed`); each
    # student's score is compared below, so a student not graded still fails the check
    rows = []
    ok = r.returncode == 0 or (r.returncode == 2 and not any(
        isinstance(e, dict) and e.get("not_graded") for e in (batch.get("per_student") or {}).values()))
    # The secret seed must never reach a student: not in any feedback file, not in any verdict.
    leaked = [str(f.relative_to(grading)) for d in ("feedback", "verdicts") for f in (grading / d).rglob("*")
              if f.is_file() and seed in f.read_text(errors="replace")]
    if leaked:
        print(f"  SECRET SEED FOUND IN: {leaked}")
        ok = False
    with Gradebook(f"sqlite:///{grading / 'gradebook.db'}") as gb:
        for m in made:
            try:
                got = gb.find_submission(week, m.student).score
            except Exception as exc:  # noqa: BLE001
                got = f"missing: {exc}"
            want = m.expected_gpu
            flags, lost = [], {}
            for f in (grading / "verdicts" / m.student / week).glob("*.json"):
                v = json.loads(f.read_text())
                flags += v["flags"]
                # every part that scored below its maximum: a total that misses its expectation names its part
                lost.update({g: f"{s['points']:g} of {s['max_points']:g}" for g, s in (v.get("scores") or {}).items()
                             if s.get("points", 0) < s.get("max_points", 0)})
            missing_flags = [f for f in m.flags + m.gpu_flags if not any(f in g for g in flags)]
            good = isinstance(got, float) and abs(got - want) < 1e-6 and not missing_flags
            ok &= good
            rows.append({"student": m.student, "expected": want, "got": got, "flags": flags,
                         "missing_flags": missing_flags, "ok": good, "below_max": lost,
                         "wall_s": batch.get("per_student", {}).get(m.student, {}).get("wall_s")})
    for row in rows:
        w = row["wall_s"]
        print(f"  {'ok ' if row['ok'] else 'BAD'} {row['student']:<34} expected {row['expected']:>5g}  got "
              f"{row['got']}  {'' if w is None else f'{w:5.1f} s'}  flags {len(row['flags'])}"
              + (f"  MISSING {row['missing_flags']}" if row["missing_flags"] else "")
              + ("" if row["ok"] else f"  below max: {row['below_max']}"))
    busy: dict = {}  # each lane's seconds of grading: a hand-in graded in parts counts on each part's lane
    for e in (batch.get("per_student") or {}).values():
        for part in (e.get("parts") or [e]) if isinstance(e, dict) else []:
            busy[part.get("gpu")] = busy.get(part.get("gpu"), 0.0) + (part.get("wall_s") or 0.0)
    phases = sorted((grading / "batch").glob("*/phases.json"))
    res = {"ok": ok, "rows": rows, "wall_s": wall, "students": len(made), "secret_leaked_into": leaked,
           "batch": {k: v for k, v in batch.items() if k != "per_student"}, "lane_busy": busy,
           "phases": json.loads(phases[-1].read_text()) if phases else {},
           "parts": {s: len(e["parts"]) for s, e in (batch.get("per_student") or {}).items()
                     if isinstance(e, dict) and e.get("parts")}}
    # every Hopper GPU grades every part (bars calibrated per GPU kind); the record names the device
    if os.environ.get("COURSE_RECORD") == "1":
        (record_regrade if only else record_cohort)(members, res)
    return res


def class_scale(out: Path, week="week1", members="gpu20", gpus=None, only=None):
    """A class graded at scale: the cohort graded on `gpus` GPUs of this machine (None: all of them), its gradebook
    (every student's score), the batch's wall time, and the time spent outside grading students: the wall time less
    the busiest lane's sum of per-student times (template, trusted baselines, feedback, report — what a run pays
    whatever the class size). Written to $OUT/scale_<n>gpu.json; `python tools/gpu_check.py --compare-scale A B`
    compares two such files (identical gradebooks, the ratio of wall times)."""
    import torch

    n = gpus or torch.cuda.device_count()
    res = autograde_cohort(None, week, members, only, gpus=gpus)
    busy = res["lane_busy"]
    doc = {"gpus": n, "cohort": members, "members": only, "week": week, "wall_s": round(res["wall_s"], 1),
           "busiest_lane_s": round(max(busy.values(), default=0.0), 1),
           "outside_grading_s": round(res["wall_s"] - max(busy.values(), default=0.0), 1),
           "lane_busy_s": {str(k): round(v, 1) for k, v in busy.items()},
           # each lane's set-up (GPU check, trusted baselines): the part of the fixed cost paid per lane
           "lane_ready_s": {str(v.get("gpu")): v.get("ready_s") for v in (res["batch"].get("lanes") or {}).values()},
           "lane_ready_phases_s": {str(v.get("gpu")): v.get("ready_phases_s")
                                   for v in (res["batch"].get("lanes") or {}).values()},
           "run_phases_s": res["phases"],  # set-up (template), the pool, the last pages, the CSV export, the report
           "split_hand_ins": res["parts"],  # student -> the parts their hand-in was graded in
           "gradebook": {r["student"]: r["got"] for r in res["rows"]}, "ok": res["ok"],
           "device": _device_line()}
    name, k = f"scale_{n}gpu{'_' + str(len(only)) if only else ''}", 1
    while (out / f"{name}{f'_run{k}' if k > 1 else ''}.json").exists():  # a second run of the same size is kept too
        k += 1
    (out / f"{name}{f'_run{k}' if k > 1 else ''}.json").write_text(json.dumps(doc, indent=1) + "\n")
    print(json.dumps({k: v for k, v in doc.items() if k != "gradebook"}, indent=1))
    return doc


def _device_line() -> dict:
    from kernels.device import gpu

    g = gpu() or {}
    return {"name": g.get("name"), "driver": g.get("driver"), "date": time.strftime("%Y-%m-%d")}


def compare_scale(many: Path, one: Path) -> dict:
    """Two class_scale files of the same cohort: the gradebooks must be identical; the ratio is many's wall time
    over one's."""
    a, b = json.loads(Path(many).read_text()), json.loads(Path(one).read_text())
    same = a["gradebook"] == b["gradebook"]
    ga, gb = a["gradebook"], b["gradebook"]
    res = {"ok": same and a["ok"] and b["ok"], "identical_gradebooks": same,
           "ratio": round(a["wall_s"] / b["wall_s"], 3),
           "wall_s": {f"{a['gpus']} GPUs": a["wall_s"], f"{b['gpus']} GPU": b["wall_s"]},
           "outside_grading_s": {f"{a['gpus']} GPUs": a["outside_grading_s"],
                                 f"{b['gpus']} GPU": b["outside_grading_s"]}}
    if not same:
        res["differ"] = {s: (ga.get(s), gb.get(s)) for s in set(ga) | set(gb) if ga.get(s) != gb.get(s)}
    print(json.dumps(res, indent=1))
    return res


def _flag_name(flag: str) -> str:
    """'row_bias: side-stream: answer cell calls ...' -> 'side-stream' (the first part named like a flag)."""
    import re

    names = [p for p in flag.split(": ") if re.fullmatch(r"[a-z]+(-[a-z]+)*", p)]  # an exercise may be one word
    return next((p for p in names if "-" in p or p in ("error", "timeout", "crash")), names[0] if names else flag[:40])


def cohort_record_path(device_name: str | None) -> Path:
    """autograder/recorded_cohort_<gpu>.json: the cohorts graded on one GPU kind."""
    from kernels.record import device_tag

    return ROOT / "autograder" / f"recorded_cohort_{device_tag(device_name)}.json"


def _record_row(r: dict) -> dict:
    """One student's row of a cohort record (a graded row from autograde_cohort): flags by name; where the names were
    not kept (flags None), their count."""
    return {"student": r["student"], "expected": r["expected"], "got": r["got"], "ok": r["ok"],
            "wall_s": None if r["wall_s"] is None else round(r["wall_s"], 1),
            "flags": None if r["flags"] is None else sorted({_flag_name(f) for f in r["flags"]}),
            **({"flag_count": r["flag_count"]} if r["flags"] is None else {}),
            **({} if r["ok"] else {"below_max": r.get("below_max", {})})}


def record_cohort(cohort: str, res: dict, device: dict | None = None, date: str | None = None,
                  path: Path | None = None) -> Path:
    """The cohort's grading on this GPU, next to the grader (one file per GPU kind): per cohort, the batch wall time
    and every student's expected and graded score, flags and wall time — the numbers the course quotes about grading
    at scale."""
    from kernels.device import gpu

    g = device or gpu() or {}
    path = path or cohort_record_path(g.get("name"))
    doc = json.loads(path.read_text()) if path.exists() else {}
    doc[cohort] = {"device": g.get("name"), "driver": g.get("driver"), "date": date or time.strftime("%Y-%m-%d"),
                   "students": res["students"], "batch_wall_s": round(res["wall_s"], 1), "ok": res["ok"],
                   "secret_leaked_into": res.get("secret_leaked_into", []),
                   "rows": [_record_row(r) for r in res["rows"]]}
    path.write_text(json.dumps(doc, indent=1) + "\n")
    return path


def record_regrade(cohort: str, res: dict, device: dict | None = None, date: str | None = None,
                   path: Path | None = None) -> Path:
    """A few students of a recorded cohort graded again (`--members`): their rows replace the old ones, they leave
    the cohort's `pending_regrade`, and the entry's `regraded` list says when, on what and how long the batch took.
    Every other row keeps the grading of the entry's own date."""
    from kernels.device import gpu

    g = device or gpu() or {}
    path = path or cohort_record_path(g.get("name"))
    doc = json.loads(path.read_text())
    entry = doc[cohort]
    if entry.get("device") != g.get("name"):
        raise ValueError(f"cohort {cohort} was graded on {entry.get('device')}, not on {g.get('name')}")
    new = {r["student"]: _record_row(r) for r in res["rows"]}
    unknown = set(new) - {r["student"] for r in entry["rows"]}
    if unknown:
        raise ValueError(f"not in cohort {cohort}: {sorted(unknown)}")
    entry["rows"] = [new.get(r["student"], r) for r in entry["rows"]]
    pend = entry.get("pending_regrade")
    if pend:
        for s in new:
            pend.get("students", {}).pop(s, None)
        if not pend.get("students"):
            entry.pop("pending_regrade")
    entry.setdefault("regraded", []).append(
        {"date": date or time.strftime("%Y-%m-%d"), "device": g.get("name"), "driver": g.get("driver"),
         "students": sorted(new), "batch_wall_s": None if res.get("wall_s") is None else round(res["wall_s"], 1),
         "ok": res["ok"],
         "secret_leaked_into": res.get("secret_leaked_into", [])})
    entry["ok"] = all(r["ok"] for r in entry["rows"])
    path.write_text(json.dumps(doc, indent=1) + "\n")
    return path


# Per topic, a known answer that is correct but below the bar (the "known slow answer") — `--mutant-answers
# slow`; `assistant`: kernels/<slug>/grading/assistant.cu, the answer a coding assistant wrote from the student
# release alone (full marks on an H100, 2026-11-28), kept verbatim as handed in (not a known answer: the cohort record
# would have to grade it first).
SLOW_ANSWER = {"naive_loads": "scalar_loads", "smem_tiling": "unpadded", "ldgsts": "plain_loads",
               "pipeline": "reads_twice", "tma": "missing_fence", "swizzle": "plain_loads",
               "warp_specialization": "all_threads", "multicast": "per_cta", "gemm": "one_stage",
               "attention": "one_stage"}


def _mutant_answer(slug: str, ans: str) -> tuple[str, str]:
    """(name, source) of an answer whose mutants are measured: a known answer, `slow`, `assistant` or a .cu path."""
    from autograder.known import kernel_source

    if ans.endswith(".cu"):
        return Path(ans).stem, Path(ans).read_text()
    if ans == "assistant":
        return ans, (ROOT / "kernels" / slug / "grading" / "assistant.cu").read_text()
    name = SLOW_ANSWER[slug] if ans == "slow" else ans
    return name, kernel_source(slug, name)


def understanding_checks(out: Path, slugs: list[str], answers: list[str], runs: int, rounds: int,
                         deadline_s: float | None = None) -> dict:
    """Every mutant of each answer of each topic measured on this machine's GPUs (autograder.mutants): its outcome
    over `runs` runs (debug barrier build, every test shape) and, when it stays correct, its speed against the
    unmutated kernel (kernels.compare, `rounds` interleaved rounds). One worker per GPU, each (topic, answer) on one
    GPU (its processes see only that GPU, so no other answer's runs share it while it is timed). An answer not
    started `deadline_s` after the step began is written as not measured. kernels/<slug>/mutants_<gpu>.json
    (COURSE_RECORD=1) and out/mutants/<slug>.json, each rewritten whole after each of its answers (a step cut short
    keeps what it measured; answers still to come are listed under "pending"); GPU seconds per answer."""
    import queue
    import threading

    import torch

    from autograder.mutants import measure_answer
    from kernels.device import gpu
    from kernels.record import device_tag

    g = gpu() or {}
    tag = device_tag(g.get("name"))
    t0 = time.perf_counter()
    visible = [v for v in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if v.strip()] or \
        [str(i) for i in range(torch.cuda.device_count())]
    work: queue.Queue = queue.Queue()
    for slug in slugs:
        for ans in answers:
            work.put((slug, ans))
    docs = {slug: dict(_mutants_doc(g.get("name"), g.get("driver"), time.strftime("%Y-%m-%d"), runs, rounds),
                       gpus=len(visible)) for slug in slugs}
    left = {slug: len(answers) for slug in slugs}
    lock = threading.Lock()
    rows = {}

    def write(slug: str) -> None:
        (out / "mutants").mkdir(exist_ok=True)
        docs[slug]["pending"] = left[slug]
        text = json.dumps(docs[slug], indent=1) + "\n"
        (out / "mutants" / f"{slug}.json").write_text(text)
        if os.environ.get("COURSE_RECORD") == "1" and tag and docs[slug]["answers"]:
            (ROOT / "kernels" / slug / f"mutants_{tag}.json").write_text(text)

    def worker(dev: str) -> None:
        env = dict(os.environ, CUDA_VISIBLE_DEVICES=dev)
        while True:
            try:
                slug, ans = work.get_nowait()
            except queue.Empty:
                return
            name, src = _mutant_answer(slug, ans)
            if deadline_s is not None and time.perf_counter() - t0 > deadline_s:
                res = None
            else:
                res = measure_answer(slug, src, runs=runs, rounds=rounds, env=env, device=g.get("name"),
                                     progress=lambda t, w=f"[gpu {dev}] {slug} {name}": print(w + t, flush=True))
            with lock:
                if res is None:
                    docs[slug]["not_measured"].append({"answer": name, "why": f"the step's {deadline_s:.0f} s ran out"})
                else:
                    docs[slug]["answers"][name] = dict(res, gpu=dev)
                    rows[f"{slug}.{name}"] = {"gpu_s": res["gpu_s"], "gpu": dev,
                                              "outcomes": {m["key"]: m["outcome"] for m in res["mutants"]}}
                left[slug] -= 1
                write(slug)  # after every answer: a step cut short keeps what it measured

    threads = [threading.Thread(target=worker, args=(d,)) for d in visible]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    missing = [f"{s}.{m['answer']}" for s in slugs for m in docs[s]["not_measured"]]
    return {"ok": not missing, "rows": rows, "not_measured": missing, "wall_s": round(time.perf_counter() - t0, 1)}


def mutant_tables_from_cache(cache: Path, device: dict, slugs: list[str], answers: list[str], runs: int = 3,
                             rounds: int = 8) -> list[Path]:
    """The understanding checks' tables (kernels/<slug>/mutants_<gpu>.json) rebuilt with no GPU from the outcome cache
    a GPU run left (build/cache/course/mutants): every mutant of every answer must be there, each with the runs, the
    speed and the GPU seconds measured then (a run's files can be lost in transfer; its cache holds all of it).
    `device`: {"name", "driver", "date"} of that run. LookupError names the first mutant that was not measured."""
    from autograder.mutants import measure_answer
    from kernels.record import device_tag

    before = os.environ.get("COURSE_CACHE_DIR")
    os.environ["COURSE_CACHE_DIR"] = str(Path(cache).parent)  # where kernels.paths.cache_dir("mutants") looks
    written = []
    try:
        for slug in slugs:
            doc = dict(_mutants_doc(device["name"], device["driver"], device["date"], runs, rounds),
                       **{"from": "the outcome cache of the GPU run"})
            for ans in answers:
                name, src = _mutant_answer(slug, ans)
                doc["answers"][name] = measure_answer(slug, src, runs=runs, rounds=rounds, device=device["name"],
                                                      progress=None, cached_only=True)
            f = ROOT / "kernels" / slug / f"mutants_{device_tag(device['name'])}.json"
            f.write_text(json.dumps(doc, indent=1) + "\n")
            written.append(f)
    finally:
        if before is None:
            os.environ.pop("COURSE_CACHE_DIR", None)
        else:
            os.environ["COURSE_CACHE_DIR"] = before
    return written


def _mutants_doc(name: str | None, driver: str | None, date: str, runs: int, rounds: int) -> dict:
    """The head of a kernels/<slug>/mutants_<gpu>.json: the GPU, the settings, no answers yet."""
    return {"device": name, "driver": driver, "date": date, "runs": runs, "rounds": rounds, "answers": {},
            "not_measured": []}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.environ.get("OUT", "build/gpu"))
    ap.add_argument("--slugs", nargs="*")
    ap.add_argument("--skip", nargs="*", default=[])
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
    ap.add_argument("--mutant-runs", type=int, default=3)
    ap.add_argument("--mutant-rounds", type=int, default=8)
    ap.add_argument("--mutant-deadline", type=float, default=None,
                    help="seconds after which no further answer's mutants are started (written as not measured)")
    args = ap.parse_args()
    if args.compare_scale:
        return 0 if compare_scale(*map(Path, args.compare_scale))["ok"] else 1
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    global SUMMARY_FILE
    SUMMARY_FILE = out / "summary.json"
    from autograder.spec import all_specs

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
            shutil.copy(ROOT / "kernels" / s / "spec.toml", out / "specs" / f"{s}.toml")
    if "known" not in args.skip:
        step("known answers on the GPU", known_all, summary, args.known_slugs or graded, args.known_names)
    if "sanitizer" not in args.skip:
        from autograder.hangs import HANGS_AND_RACES

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
