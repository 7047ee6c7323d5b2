"""make gpu-test's understanding step (tools/gpu_check.py): every mutant of each topic's answers measured on this
machine's GPUs (autograder.mutants), written to kernels/<slug>/mutants_<gpu>.json, or those tables rebuilt with no GPU
from the outcome cache a GPU run left."""

from __future__ import annotations

import json
import os
import queue
import shutil
import sys
import threading
import time
from pathlib import Path
from autograder.known import assistant_path, kernel_source
from kernels.record import device_tag
from autograder.mutants import measure_class

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from autograder.mutants import ATTACK_ANSWERS  # noqa: E402,F401 - measured beside the recorded answers


# Per topic, a known answer that is correct but below the bar (the "known slow answer") — `--mutant-answers
# slow`; `assistant`: kernels/<slug>/grading/assistant.cu, the answer a coding assistant wrote from the student
# release alone (full marks on an H100, 2026-11-28), kept verbatim as handed in (not a known answer: the cohort record
# would have to grade it first).
SLOW_ANSWER = {"naive_loads": "scalar_loads", "smem_tiling": "unpadded", "ldgsts": "plain_loads",
               "pipeline": "reads_twice", "tma": "missing_fence", "swizzle": "plain_loads",
               "warp_specialization": "all_threads", "multicast": "per_cta", "gemm": "one_stage",
               "attention": "one_stage", "fp8_gemm": "one_stage"}


def _mutant_answer(slug: str, ans: str) -> tuple[str, str]:
    """(name, source) of an answer whose mutants are measured: a known answer, `slow`, `assistant` or a .cu path
    (`--mutant-answers naive_loads=kernels/naive_loads/grading/decoy.cu`: that topic's alone)."""

    if ans.endswith(".cu"):
        return Path(ans).stem, Path(ans).read_text()
    if ans == "assistant":
        return ans, assistant_path(slug).read_text()
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
    import torch

    from autograder.mutants import measure_answer
    from kernels.device import gpu

    g = gpu() or {}
    tag = device_tag(g.get("name"))
    t0 = time.perf_counter()
    visible = [v for v in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if v.strip()] or \
        [str(i) for i in range(torch.cuda.device_count())]
    work: queue.Queue = queue.Queue()
    answers_of = {slug: [a.split("=", 1)[-1] for a in answers if "=" not in a or a.split("=", 1)[0] == slug]
                  for slug in slugs}  # "naive_loads=path.cu": an answer of that topic alone
    for slug in slugs:
        for ans in answers_of[slug]:
            work.put((slug, ans))
    docs = {slug: dict(_mutants_doc(g.get("name"), g.get("driver"), time.strftime("%Y-%m-%d"), runs, rounds),
                       gpus=len(visible)) for slug in slugs}
    left = {slug: len(answers_of[slug]) for slug in slugs}
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


def understanding_cohort(out: Path, week: str = "week1", members: str = "gpu9", runs: int = 3,
                         rounds: int = 8) -> dict:
    """make gpu-test's step "understanding checks of a cohort": the synthetic cohort (autograder.cohort, `members`)
    written out as hand-ins, then `autograder understanding measure`'s work on it (mutants.measure_class: every
    student's kernels of `week`, read as the grader reads them, one lane a GPU). Each student's measured dicts go to
    out/understanding/<student>/<slug>.json and, with COURSE_RECORD=1, into autograder/recorded_understanding_<gpu>.json
    — the keys the sheets are built from with no GPU (autograder understanding sheets WEEK --recorded). GPU seconds
    per student and day come back in the result."""
    from autograder.cohort import build, members_of
    from autograder.plan import lanes_for
    from kernels.device import gpu

    g = gpu() or {}
    grading = out / "understanding_cohort"
    shutil.rmtree(grading, ignore_errors=True)
    made = build(grading / "submitted", week, members_of(members, week))
    lanes = lanes_for("all")
    res = measure_class(grading, week, [m.student for m in made], lanes, runs=runs, rounds=rounds,
                        out=out / "understanding", progress=lambda t: print(t, flush=True))
    measured: dict = {}
    for f in sorted((out / "understanding").glob("*/*.json")):
        measured.setdefault(f.parent.name, {})[f.stem] = json.loads(f.read_text())
    doc = {"device": g.get("name"), "driver": g.get("driver"), "date": time.strftime("%Y-%m-%d"), "week": week,
           "cohort": members, "students": [m.student for m in made], "runs": runs, "rounds": rounds,
           "wall_s": res["wall_s"], "gpus": len(lanes), "gpu_s": res["gpu_s"], "measured": measured}
    tag = device_tag(g.get("name"))
    if os.environ.get("COURSE_RECORD") == "1" and tag:
        (ROOT / "autograder" / f"recorded_understanding_{tag}.json").write_text(json.dumps(doc, indent=1) + "\n")
    per = sorted(res["gpu_s"].values())
    return {"ok": bool(measured), "jobs": res["jobs"], "wall_s": res["wall_s"], "gpu_s": res["gpu_s"],
            "max_gpu_s_per_student_day": per[-1] if per else None}
