"""Understanding checks drawn from a student's own kernel: the day's mutation operators applied to the submitted
source (autograder.mutation), each mutant run on the GPU, its measured outcome the key of a question about that
kernel.

    python -m autograder.mutants tma --answer solution          # on a Hopper GPU: every mutant's outcome, 3 runs

`outcome` runs one mutant on the GPU: the debug barrier build (autograder.hangs: a wait that runs out names its
barrier and phase) over every test shape on fresh inputs, `runs` times; then, if it stayed correct, its speed
against the unmutated kernel by the course's comparison (kernels.compare: interleaved rounds, an interval).
Outcome classes: "hangs" (which barrier, which phase), "wrong" (the first shape and what the check saw),
"crashes", "slower" / "faster" (by how much, the interval), "no observable change" (a latent race the GPU did
not show is named as such). A mutant whose class differs between runs is "not reproducible" and is never asked.

Each mutant is measured in a CUDA context of its own (a process forked from one that imported torch once): what a
kernel leaves in GPU memory on one launch cannot steer another mutant's runs. A mutant that changed nothing
observable is asked only if its change is in the compiled kernel (else "not in the kernel") and its changed line
runs: a trap placed there (autograder.mutation.probe_sources) must fire in a launch after its runs and timing (else
"did not run", or "not probed" where no trap could be placed), and its effect reaches the output: the kernel with the
changed value poisoned (autograder.poisons.poison_sources) must go wrong or hang (else "does not reach the output").
None of these is ever asked: a decoy copy of the day's code in a branch that never runs, or one that runs before the
real code writes over its work, would otherwise set its keys.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import queue
import sys
import threading
import time
from pathlib import Path

from .mutants_child import _course_failed  # noqa: F401 - the parent reads a failed child's traceback with it
from .mutants_child import classify  # the child decides with it whether to probe; the parent, each outcome
from .mutation import mutate
from .poisons import poisons_of
from .operators import MAX_SITES, Operator, OperatorError, parse_operator  # noqa: F401 - the operators' home
from kernels.compile import clean_source, NotAttempted
from .spec import all_specs
from kernels.paths import cache_dir, write_whole
from .answers import _source, cells_by_grade_id, read_answer
from .students import submission_folder
from .known import kernel_source

ROOT = Path(__file__).resolve().parents[1]
OUTCOMES = ("hangs", "wrong", "crashes", "slower", "faster", "no observable change", "does not compile",
            "not reproducible", "not measured", "not in the kernel", "did not run", "not probed",
            "does not reach the output")
# Per topic, answers that attack the understanding checks, measured beside the recorded answers (make gpu-test
# --mutant-answers topic=path) and kept in the topic's table: none of their mutants may be asked.
# decoy: the day's code written the operators' way in a branch that never runs, the real code in a form none matches.
ATTACK_ANSWERS = {"naive_loads": {"decoy": "kernels/naive_loads/grading/decoy.cu",
                                  "decoy_runs": "kernels/naive_loads/grading/decoy_runs.cu",
                                  "decoy_senses": "kernels/naive_loads/grading/decoy_senses.cu",
                                  "decoy_names": "kernels/naive_loads/grading/decoy_names.cu"}}
# How outcomes are measured (part of each cached outcome's key): a CUDA context per mutant, then the probes, then the
# poisons launched the instrument's way (an outcome cached while they launched the bench shape first is not reused)
METHOD = "context per mutant; probes; poisons at the test shapes"


# ------------------------------------------------------------------------------------------------ on the GPU (parent)
def outcome(slug: str, exercise: str | None, mutant: str, base: str, **kw) -> dict:
    """One mutant (source text) measured on this GPU: see outcomes."""
    return outcomes(slug, exercise, [mutant], base, **kw)[0]


def _next_run(recs: list[dict]) -> int:
    return 1 + max([r.get("run", -1) for r in recs] or [-1])


def outcomes(slug: str, exercise: str | None, sources: list[str], base: str, *, runs: int = 3, rounds: int = 8,
             seed: int = 7, bound_s: float = 1.0, timeout_s: float = 60, env: dict | None = None,
             device: str | None = None, cached_only: bool = False,
             probes: list[tuple[str, ...]] | None = None,
             poisons: list[tuple[tuple[str, str], ...]] | None = None) -> list[dict]:
    """Mutants (source texts) measured on this GPU: each `runs` runs of every test shape (debug build, fresh inputs),
    then its speed against `base` if it stayed correct, then, if nothing was observed, whether its change is in the
    compiled kernel and whether its changed line runs (`probes`: per mutant, autograder.mutation.probe_sources; none
    given, none asked). One process measures them one after another, each in CUDA contexts of its own (forked
    processes); a hang for good or a fault ends its fork and the next goes on where it stopped (a mutant is given at
    most `runs` forks). A fork silent for `timeout_s` is killed: its mutant "hangs" in a wait the debug build does not
    bound. Each
    outcome cached by (mutant, base, GPU, settings); "gpu_s": the seconds spent on it (a process's start counted on
    its first mutant)."""
    from .spawn import _as_file, _spawn

    if device is None:
        from kernels.device import gpu

        device = (gpu() or {}).get("name")
    results: list[dict | None] = [None] * len(sources)
    probes = probes or [()] * len(sources)
    poisons = poisons or [()] * len(sources)
    paths = []
    for i, src in enumerate(sources):
        key = hashlib.sha256(json.dumps([src, base, device, runs, rounds, seed, bound_s, slug, exercise, METHOD,
                                         list(probes[i]), list(poisons[i])]).encode()).hexdigest()[:24]
        paths.append(cache_dir("mutants") / f"outcome_{key}.json")
        if paths[i].exists():
            results[i] = {**json.loads(paths[i].read_text()), "cached": True}
    todo = [i for i, r in enumerate(results) if r is None]
    if cached_only and todo:
        raise LookupError(f"{slug}: no outcome of this mutant measured on {device} in {paths[todo[0]].parent}")
    st = {i: {"recs": [], "speed": None, "spawns": 0, "s": 0.0, "closed": False, "probed": bool(probes[i]),
              "probe": None, "same": False, "poison": None, "own": sources[i] == base} for i in todo}
    bfile, seen = _as_file(base), None
    while any(not st[i]["closed"] for i in todo):
        # a process measures every open mutant; it ends early only if it dies itself (its forks end on their own)
        open_ = sorted((i for i in todo if not st[i]["closed"]), key=lambda i: (bool(st[i]["recs"]), i))
        plan = {"base": bfile, "runs": runs, "rounds": rounds, "seed": seed, "bound": bound_s, "idle": timeout_s,
                "mutants": [{"m": i, "file": _as_file(sources[i]), "first_run": _next_run(st[i]["recs"]),
                             "time": all(r["class"] == "correct" for r in st[i]["recs"]),
                             "probes": [_as_file(p) for p in probes[i]],
                             "poisons": [[k, _as_file(p)] for k, p in poisons[i]]} for i in open_]}
        cmd = [sys.executable, "-m", "autograder.mutants_child", slug, "--plan", _as_file(json.dumps(plan, sort_keys=True))] \
            + (["--exercise", exercise] if exercise else [])
        t0 = time.time()
        # the child bounds each fork's silence by timeout_s; this bound is the backstop for the child itself
        run = _spawn(cmd, (timeout_s * (runs + 1) + 30) * len(open_), env=env, private_records=True,
                     idle_s=timeout_s + 30)
        # the child's records come on its private channel: the mutant kernel's printf reaches only run["text"]
        lines = [json.loads(ln[7:]) for ln in run["private"].splitlines() if ln.startswith("MUTANT {")]
        seen = seen or next((r["device"] for r in lines if r["event"] == "device"), None)
        if _after_process(st, open_, lines, run, t0, runs, timeout_s):
            break
    for i in todo:
        results[i] = _result(st[i], seen)
        paths[i].write_text(json.dumps(results[i]))
    return results


def _after_process(st: dict, open_: list[int], lines: list[dict], run: dict, t0: float, runs: int,
                   timeout_s: float) -> bool:
    """One measuring process's records taken into each mutant's state (its runs, speed, seconds; done once its done
    record came; "not measured" where the course's own code failed in it), then, if the process itself died inside a
    mutant, that end charged to it: a timeout is a hang where the debug build does not bound the wait, a death before
    the mutant's next run a crash. True when no mutant can be measured (the course failed before the first began)."""
    current, last_t, began = None, t0, False
    for r in lines:
        m = r.get("m")
        if r["event"] == "begin":
            current, began = m, True
            st[m]["spawns"] += 1
        elif r["event"] in ("run", "speed", "probe", "same", "poison", "done", "failed") and m in st:
            st[m]["s"] += max(0.0, r["t"] - last_t)  # a process's start is charged to its first mutant
            last_t = r["t"]
            if r["event"] == "run":
                st[m]["recs"].append(r)
            elif r["event"] == "speed":
                st[m]["speed"] = r
            elif r["event"] in ("probe", "poison"):
                st[m][r["event"]] = r
            elif r["event"] == "same":
                st[m]["same"] = True
            elif r["event"] == "failed":  # the course's own code failed measuring it: no outcome (a fault is a run's)
                if r["course"] and not st[m]["closed"]:
                    st[m]["recs"].append({"class": "not measured", "detail": r["detail"],
                                          "run": _next_run(st[m]["recs"])})
                    st[m]["closed"] = True
            else:
                st[m]["closed"], current = True, None
    failed = next((r for r in lines if r["event"] == "failed"), None)
    if current is None and not began:  # the process ended before its first mutant began
        if failed is not None and failed["course"]:  # the course's own code failed: no outcome of any mutant
            for i in open_:
                st[i]["recs"].append({"class": "not measured", "detail": failed["detail"], "run": 0})
                st[i]["closed"] = True
            return True
        current = open_[0]
        st[current]["spawns"] += 1
    if current is None or st[current]["closed"]:
        return False
    S = st[current]
    S["s"] += max(0.0, t0 + run["wall_s"] - last_t)
    last = next((i for i in range(len(lines) - 1, -1, -1) if lines[i]["event"] == "begin"), -1)
    got = [r for r in lines[last + 1:] if r["event"] == "run" and r.get("m") == current]
    if run["timed_out"]:
        S["recs"].append({"class": "hangs", "detail": f"no answer in {timeout_s:.0f} s: a wait the debug build does "
                          "not bound (__syncthreads, a cluster barrier, a spin loop)", "run": _next_run(S["recs"])})
    elif not got:  # the process died in this mutant before its next run's record (a fault, a signal)
        S["recs"].append({"class": "crashes", "detail": (failed or {}).get("detail") or run["text"][-600:],
                          "run": _next_run(S["recs"])})
    if any(r["class"] == "does not compile" for r in S["recs"]) or _next_run(S["recs"]) >= runs or S["spawns"] >= runs:
        S["closed"] = True
    return False


def _reached(res: dict, S: dict) -> dict:
    """A mutant that changed nothing observable, kept only where its change is in the kernel, its line runs and that
    line's effect reaches the output: the same SASS as the kernel's is "not in the kernel"; a probe's trap that never
    fired "did not run"; a poison of the changed line (the kernel with its value poisoned or its statement left out)
    that left the output right "does not reach the output"; no probe or poison that decided "not probed". None is
    asked: the key of a question about code that does not run, or whose work is overwritten, would be whatever its
    author chose (a decoy copy in a branch never taken, or one that runs before the real code writes over it)."""
    if res["outcome"] != "no observable change" or S.get("own"):  # (the unmutated kernel: the instrument's check)
        return res
    if S.get("same"):
        return {"outcome": "not in the kernel", "detail": "the change compiles to the very machine code your kernel "
                "does: the compiler removed what it touched"}
    detail = res["detail"]
    if S.get("probed"):
        probe = S.get("probe") or {"ran": None, "detail": "the probe was not launched"}
        if not probe["ran"]:
            return {"outcome": "did not run" if probe["ran"] is False else "not probed", "detail": probe["detail"]}
        detail += "; the changed line runs (a trap placed there fired)"
    poison = S.get("poison") or {"reaches": None, "detail": "no poison of the changed line was measured"}
    if poison["reaches"]:
        return {**res, "detail": detail + "; " + poison["detail"]}
    return {"outcome": "does not reach the output" if poison["reaches"] is False else "not probed",
            "detail": poison["detail"], "tries": poison.get("tries", [])}


def _result(S: dict, device: str | None) -> dict:
    """A mutant's outcome from its state: its class over the runs (and speed), the runs, the GPU and its seconds."""
    recs = S["recs"]
    speed = S["speed"] if recs and all(r["class"] == "correct" for r in recs) else None
    if any(r["class"] == "does not compile" for r in recs):
        res = {"outcome": "does not compile",
               "detail": next(r for r in recs if r["class"] == "does not compile")["detail"]}
    elif any(r["class"] == "not measured" for r in recs):
        res = {"outcome": "not measured", "detail": "the measuring process failed in the course's code: "
               + recs[-1]["detail"][-400:]}
    else:
        res = _reached(classify(recs, speed), S)
    res.update(runs=[{k: r.get(k) for k in ("run", "class", "detail")} for r in recs], speed=speed, device=device,
               gpu_s=round(S["s"], 1))
    return res


def measure_answer(slug: str, source: str, exercise: str | None = None, *, runs: int = 3, rounds: int = 8,
                   progress=print, env: dict | None = None, device: str | None = None,
                   cached_only: bool = False) -> dict:
    """Every mutant of `source` measured: {"mutants": [mutant dict + outcome], "gpu_s": the seconds their
    measurements took on the GPU (each kept with its outcome, so a table rebuilt from the cache keeps them)}. `env`:
    the environment of the measuring processes (a lane's CUDA_VISIBLE_DEVICES); `device`: that GPU's name (the
    cache's key); `cached_only`: read outcomes measured earlier, LookupError for one that was not (no GPU here)."""
    out = []
    ms = mutate(slug, source, exercise)
    # The instrument first: the unmutated kernel in the measuring build (debug barriers), same runs, untimed. A kernel
    # that is not right there (e.g. one that tests the build's macro) gets no outcome for any mutant: its keys would
    # be what it chose, not what its lines do.
    own = outcome(slug, exercise, source, source, runs=runs, rounds=0, env=env, device=device,
                  cached_only=cached_only) if ms else None
    if own is not None and own["outcome"] != "no observable change":
        got = [{"outcome": "not measured", "detail": "your kernel itself is not right in the measuring build "
                f"(debug barriers): {own['outcome']} — {own.get('detail', '')[:300]}", "runs": [], "speed": None,
                "device": own.get("device"), "gpu_s": 0.0} for _ in ms]
    else:
        got = outcomes(slug, exercise, [m.source for m in ms], source, runs=runs, rounds=rounds, env=env,
                       device=device, cached_only=cached_only, probes=[m.probes for m in ms],
                       poisons=[poisons_of(m, source) for m in ms]) if ms else []
    for i, (m, res) in enumerate(zip(ms, got)):
        out.append({**m.to_dict(), **res})
        if progress:
            progress(f"  [{i + 1}/{len(ms)}] {m.key} (line {m.line}): {res['outcome']} — {res.get('detail', '')[:140]}"
                     f" [{res['gpu_s']:.0f} s]")
    return {"slug": slug, "exercise": exercise, "source_digest": hashlib.sha256(source.encode()).hexdigest()[:16],
            "mutants": out, "own": own,
            "gpu_s": round(sum(r.get("gpu_s") or 0.0 for r in out) + ((own or {}).get("gpu_s") or 0.0), 1)}


# ------------------------------------------------------------------------------------------------ a class
def student_answers(submitted: Path, student: str, week: str) -> dict[str, str]:
    """{slug: kernel source} of the days of `week` whose exercise answer the grader reads from the student's
    notebook (autograder.answers.read_answer; a day with no notebook, an unreadable answer or the release's stub —
    not attempted — is left out)."""

    folder = submission_folder(submitted, student, week)
    out = {}
    for spec in all_specs():
        if spec.assignment != week or not any(ex.mutants for ex in spec.exercises.values()):
            continue
        ex = next(iter(spec.exercises.values()))
        try:
            nb = json.loads((folder / spec.notebook).read_text(encoding="utf-8"))
            cell = cells_by_grade_id(nb).get(ex.answer_cell)
        except (OSError, ValueError, AttributeError):
            continue
        ans = read_answer(_source(cell), ex.answer_var, ex.answer_cell) if cell else None
        if ans is not None and isinstance(ans.value, str) and ans.value.strip():
            try:
                clean_source(ans.value)
            except NotAttempted:
                continue
            out[spec.slug] = ans.value
    return out


def measure_class(grading: Path, week: str, students: list[str], lanes: list, *, runs: int = 3, rounds: int = 8,
                  out: Path | None = None, progress=print) -> dict:
    """Every student's mutants of every day of `week`, measured on every GPU lane of the host at once (one thread a
    lane takes the next (student, day) job; its processes see only its GPU). Writes <out>/<student>/<slug>.json (the
    measured dicts autograder.understanding's sheets read) and returns {"jobs", "gpu_s" per (student, slug),
    "wall_s"}. A job whose kernel the grader cannot read is left out (named)."""
    out = Path(out or grading / "understanding" / week / "measured")
    jobs: queue.Queue = queue.Queue()
    for s in students:
        for slug, src in student_answers(grading / "submitted", s, week).items():
            jobs.put((s, slug, src))
    total, done, lock, spent = jobs.qsize(), [0], threading.Lock(), {}
    t0 = time.perf_counter()

    def lane_worker(lane) -> None:
        while True:
            try:
                s, slug, src = jobs.get_nowait()
            except queue.Empty:
                return
            res = measure_answer(slug, src, runs=runs, rounds=rounds, progress=None, env=lane.env)
            path = out / s / f"{slug}.json"
            path.parent.mkdir(parents=True, exist_ok=True)
            write_whole(path, json.dumps({**res, "student": s, "lane": lane.label}, indent=1))
            with lock:
                done[0] += 1
                spent[f"{s}/{slug}"] = res["gpu_s"]
                if progress:
                    progress(f"[{lane.label}] {s} {slug}: {len(res['mutants'])} mutants in {res['gpu_s']:.0f} s "
                             f"({done[0]}/{total})")

    threads = [threading.Thread(target=lane_worker, args=(lane,), daemon=True) for lane in lanes]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return {"jobs": total, "gpu_s": spent, "wall_s": round(time.perf_counter() - t0, 1), "out": str(out)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m autograder.mutants", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("slug")
    ap.add_argument("--exercise")
    ap.add_argument("--answer", action="append", help="a known answer (solution, correct, ...) or a .cu file")
    ap.add_argument("--list", action="store_true", help="print the mutants (no GPU)")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--out", type=Path, help="write the outcomes (JSON) here")
    a = ap.parse_args(argv)

    results = {}
    for ans in a.answer or ["solution"]:
        src = Path(ans).read_text() if ans.endswith(".cu") else kernel_source(a.slug, ans)
        if a.list:
            for m in mutate(a.slug, src, a.exercise):
                print(f"{ans} {m.key} line {m.line}: {m.before}  =>  {m.after}")
            continue
        print(f"{a.slug} {ans}:", flush=True)
        results[ans] = measure_answer(a.slug, src, a.exercise, runs=a.runs, rounds=a.rounds,
                                      progress=lambda s: print(s, flush=True))
    if a.out and results:
        a.out.parent.mkdir(parents=True, exist_ok=True)
        a.out.write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
