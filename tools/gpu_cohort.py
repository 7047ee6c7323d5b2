"""make gpu-test's cohort steps (tools/gpu_check.py steps 6 and 7): the synthetic cohort graded by `autograder grade`
on this machine's GPUs, its record (autograder/cohort_<gpu>.json rows, a partial re-grade replacing its students'
rows), and class scale (the cohort on every GPU and on one, compared)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from kernels.record import device_tag

ROOT = Path(__file__).resolve().parent.parent


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
    names = [p for p in flag.split(": ") if re.fullmatch(r"[a-z]+(-[a-z]+)*", p)]  # an exercise may be one word
    return next((p for p in names if "-" in p or p in ("error", "timeout", "crash")), names[0] if names else flag[:40])


def cohort_record_path(device_name: str | None) -> Path:
    """autograder/recorded_cohort_<gpu>.json: the cohorts graded on one GPU kind."""

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
