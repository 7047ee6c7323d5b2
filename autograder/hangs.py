"""Hangs and races: which barrier and phase a hung kernel waits on, and what compute-sanitizer sees of it.

    python -m autograder.hangs warp_specialization.wrong_empty_parity     # a known answer (slug.answer)
    python -m autograder.hangs my_axpy.cu --exercise warp_specialization   # any .cu, under an exercise's launch contract

1. The debug build (autograder.hangs_trace). `debug_cubin` compiles a kernel with COURSE_DEBUG_BARRIERS through
   kernels.compile: the course's mbarrier waits (kernels/include/mbarrier_debug.cuh) then give up after a bound
   (default 2 s), record who waited on what into a __device__ trace, stop every other wait, and let the kernel end.
   `instrument` first names the kernel's `__shared__` barrier variables (full, empty, ...) in the trace, on the
   lines that declare them (line numbers unchanged). The launch goes through the course's runner
   (kernels.runner.checked_launch: poisoned output, deadline, checker), in a process of its own (autograder.spawn):
   a kernel that still hangs (a cluster barrier, __syncthreads, a spin loop: nothing the debug build can time out)
   costs that process only, and its trace is read while it runs. `decode_trace` reads the trace's bytes;
   `describe` prints one line per stuck warp,

       block 0 warp 0 (1 lane): waits on empty[0] parity 0, its 1st wait on it (for phase 0); ran out after 2.00 s;
       last completed: none

   and `diagnose` says what the counts mean (how many of a phase's arrivals came; whether the phase waits for
   transaction bytes that never landed; a first wait on parity 0).
2. compute-sanitizer. `sanitize` runs one answer under one tool (memcheck, racecheck, synccheck, initcheck) in a
   process group that a timeout kills, and `parse_sanitizer` (autograder.sanitizer) turns its output into counts
   and the first message.
   `hangs_and_races` (a step of `make gpu-test`) runs the debug build and the tools on week 2's known answers that
   hang or race and on the course solutions, and records per answer and tool what was caught
   (kernels/<slug>/sanitizer_<gpu>.json).

The trace layout is mbarrier_debug.cuh's: autograder.hangs_trace.TRACE_LAYOUT reads it back (change one, change
both).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from .hangs_trace import (DEFAULT_BOUND_S, debug_cubin, decode_trace, describe, diagnose, read_trace,
                          reset_trace)
from .sanitizer import parse_sanitizer, sanitizer_binary, sanitizer_version, verdict
from .spawn import _as_file, _spawn
from .spec import load
from .known import kernel_source
from kernels.runner import derive
from kernels.record import DEFAULT_TAG, device_tag, here
from kernels.compile import NotAttempted, clean_source

ROOT = Path(__file__).resolve().parents[1]


# Week 2's known answers that hang or race (kernels/<slug>/grading/known/expected.toml), measured by `make
# gpu-test` beside the course solution. tests/test_hangs.py holds the list to the files: every answer whose
# gpu_status allows "timeout" is here; each fails on the GPU, or is a latent race no run showed (its gpu_outcome).
HANGS_AND_RACES = {
    "warp_specialization": ("wrong_empty_parity", "missing_empty_arrive", "early_release"),
    "multicast": ("wrong_mask", "early_exit"),
    "gemm": ("missing_proxy_fence", "no_read_wait"),
    "attention": ("wrong_parity", "v_parity_of_k", "one_barrier", "k_early_release"),
}
TOOLS = ("memcheck", "racecheck", "synccheck")
HUNG = ("timeout", "hung")  # a launch's status when it did not end by itself
SANITIZE_BOUND_S = 10.0     # the debug build's bound under a sanitizer (a tool slows every wait's partner)


# ------------------------------------------------------------------------------------------ on the GPU (child)
@dataclass
class Target:
    label: str  # "slug.answer" or the .cu file's name
    slug: str
    source: str

    @property
    def exercise(self):
        return next(iter(load(self.slug).exercises.values()))


def resolve(target: str, exercise: str | None = None) -> Target:
    """"slug.answer" (a known answer; "slug.solution" is the solutions notebook's) or a .cu path (with
    `exercise`: the slug whose launch contract runs it)."""
    if "\n" in target:
        raise ValueError("a kernel's source: give it to explain() (it is written to a file first) or save it as a .cu")
    if target.endswith(".cu") or os.sep in target:
        path = Path(target)
        if not exercise:
            raise ValueError(f"{target}: name the exercise whose launch contract runs it (--exercise <slug>)")
        return Target(path.name, exercise, path.read_text())

    slug, _, name = target.partition(".")
    if not name:
        raise ValueError(f"{target!r}: give slug.answer (e.g. warp_specialization.wrong_empty_parity) or a .cu file")
    return Target(target, slug, kernel_source(slug, name))


def _emit(rec: dict) -> None:
    print("HANGS " + json.dumps(rec, default=str), flush=True)


def launch_shape(ex, wl, cubin, shape, seed: int, deadline: float | None, names: dict | None = None,
                 bound_s: float = DEFAULT_BOUND_S) -> dict:
    """One checked launch (kernels.runner.checked_launch) at `shape` on fresh inputs drawn from `seed`: {"shape",
    "status": ok | wrong | hung | error | wait ran out, "check", "wall_s"}; with `names` (a debug build: debug_cubin)
    the trace is reset before and read after — "trace", "lines" (describe) and "diagnosis". After "hung" or "error"
    this process's context cannot launch again (a kernel still runs, or faulted)."""
    from kernels.runner import KernelHang, checked_launch

    inputs = wl.make_inputs(list(shape), seed, device="cuda")
    ref = wl.reference(inputs)
    if names is not None and not names:  # nothing instrumented (a kernel with no mbarrier wait: week 1's days 1-4):
        names = None  # the build has no trace to reset or read; the host's deadline alone bounds the launch
    if names is not None:
        reset_trace(cubin, bound_s)
    rec, t0 = {"shape": list(shape)}, time.perf_counter()
    try:
        _, rep = checked_launch(ex, wl, cubin, inputs, ref, f"{ex.kernel} on shape {tuple(shape)}",
                                deadline_s=deadline)
        rec.update(status="ok" if rep.ok else "wrong", check="" if rep.ok else rep.message.splitlines()[0])
    except KernelHang as exc:
        rec.update(status="hung", check=str(exc))
    except Exception as exc:  # noqa: BLE001 - a fault: reported, and this process ends
        rec.update(status="error", check=f"{type(exc).__name__}: {exc}"[:2000])
    rec["wall_s"] = round(time.perf_counter() - t0, 3)
    if names is not None and rec["status"] == "error":  # the launch faulted: the context is gone, and its trace
        rec["trace"] = None                               # with it (reading it would only raise the fault again)
    elif names is not None:
        raw = read_trace(cubin)
        if raw is None:
            rec["trace"] = None
        else:
            tr = decode_trace(raw, names, keep_blocks={0})
            if tr.stuck and rec["status"] != "hung":  # a fault never gets here: its trace is not read
                rec["status"] = "wait ran out"
            rec.update(trace=tr.to_dict(), lines=describe(tr), diagnosis=diagnose(tr, rec["status"] == "hung"))
    return rec


def _child(a) -> int:
    """One process: compile (debug or plain), then each shape through kernels.runner.checked_launch until one is not
    right. Prints a `HANGS {json}` line per event; ends itself (os._exit) after a hang or a fault."""
    from kernels.compile import compile_cuda
    from kernels.launch import get_kernel

    t = resolve(a.child, a.exercise)
    ex = t.exercise
    wl = ex.workload()
    names: dict[int, str] = {}
    if a.mode == "debug":
        cubin, names = debug_cubin(t.source, ex.answer_var)
    else:
        cubin = compile_cuda(t.source, name=ex.answer_var)
    get_kernel(cubin, ex.kernel)
    _emit({"event": "compiled", "kernel": ex.kernel, "mode": a.mode, "names": names})
    shapes = json.loads(a.shapes) if a.shapes else [list(s) for s in ex.test_shapes]
    # the debug build ends a hang after its bound: the host's deadline leaves room for that and the drain after it
    deadline = a.deadline if a.deadline is not None else (
        max(ex.launch_timeout_s, 2 * a.bound + 3) if a.mode == "debug" else None)
    for i, shape in enumerate(shapes):
        rec = {"event": "launch", **launch_shape(ex, wl, cubin, shape, derive(a.seed, "hangs", i), deadline,
                                                 names if a.mode == "debug" else None, a.bound)}
        _emit(rec)
        if rec["status"] in ("hung", "error"):
            sys.stdout.flush()
            os._exit(3)
        if rec["status"] != "ok" and not a.all_shapes:
            break
    return 0


# ----------------------------------------------------------------------------------------- on the GPU (parent)
def _child_cmd(target: str, mode: str, *, exercise=None, shapes=None, deadline=None, bound=DEFAULT_BOUND_S,
               seed: int = 7, all_shapes: bool = False) -> list[str]:
    cmd = [sys.executable, "-m", "autograder.hangs", "--child", target, "--mode", mode, "--bound", str(bound),
           "--seed", str(seed)]
    if exercise:
        cmd += ["--exercise", exercise]
    if shapes is not None:
        cmd += ["--shapes", json.dumps([list(s) for s in shapes])]
    if deadline is not None:
        cmd += ["--deadline", str(deadline)]
    if all_shapes:
        cmd.append("--all-shapes")
    return cmd


def _launches(run: dict) -> list[dict]:
    return [r for r in run["records"] if r.get("event") == "launch"]


def run_answer(target: str, *, mode: str = "debug", exercise: str | None = None, shapes=None,
               bound_s: float = DEFAULT_BOUND_S, timeout_s: float = 300) -> dict:
    """One answer in a child process (debug build with a bound, or the plain build), shapes in order until one is not
    right. {"target", "mode", "launches": [{"shape", "status", "check", "lines", "diagnosis", ...}], "child"}."""
    run = _spawn(_child_cmd(target, mode, exercise=exercise, shapes=shapes, bound=bound_s), timeout_s)
    launches = _launches(run)
    if run["timed_out"]:
        launches.append({"event": "launch", "status": "hung", "check": f"no answer within {timeout_s:.0f} s"})
    compiled = any(r.get("event") == "compiled" for r in run["records"])
    out = {"target": target, "mode": mode, "launches": launches, "child": {k: run[k] for k in ("rc", "wall_s")}}
    if not compiled or (run["rc"] not in (0, 3) and not launches):
        out["error"] = run["text"][-3000:]
    return out


def explain(target: str, *, exercise: str | None = None, shapes=None, bound_s: float = DEFAULT_BOUND_S,
            quiet: bool = False) -> dict:
    """The debug build of `target` run shape by shape, each launch printed with its stuck warps and a diagnosis.
    `target`: "slug.answer", a .cu path, or a kernel's source text (a notebook's answer string) with `exercise`."""
    from kernels.device import cpu_mode_reason, is_hopper

    label = "your kernel" if "\n" in target else target
    if not is_hopper():
        print(f"needs an sm_90 GPU: this runs the debug build of {label} ({cpu_mode_reason()})")
        return {"target": label, "skipped": cpu_mode_reason()}
    if "\n" in target:
        if not exercise:
            raise ValueError("a kernel's source needs exercise=<slug>: whose launch contract runs it")

        try:
            target = _as_file(clean_source(target))
        except NotAttempted as exc:
            print(exc)
            return {"target": label, "skipped": str(exc)}
    res = run_answer(target, mode="debug", exercise=exercise, shapes=shapes, bound_s=bound_s)
    if not quiet:
        print(f"{label}: debug build (COURSE_DEBUG_BARRIERS, bound {bound_s:g} s)")
        if "error" in res:
            print("  the run failed:\n" + res["error"])
        for r in res["launches"]:
            check = f" — {r['check']}" if r.get("check") else ""
            print(f"  shape {tuple(r.get('shape') or ())}: {r['status']}{check}")
            for line in r.get("lines") or ():
                print(f"    {line}")
            for line in r.get("diagnosis") or ():
                print(f"    -> {line}")
            if r["status"] in ("wait ran out", "hung", "error") and r.get("trace") is None and "lines" in r:
                print("    (no trace: the context was gone after the fault)")
    return res


# ------------------------------------------------------------------------------------------- compute-sanitizer
def sanitize(target: str, tool: str, shape, *, deadline_s: float, timeout_s: float | None = None,
             exercise: str | None = None, correct: bool = False, mode: str = "plain",
             bound_s: float = SANITIZE_BOUND_S) -> dict:
    """`target` at `shape` under compute-sanitizer's `tool`, killed at the timeout. The verdict, the tool's counts and
    first message, and what the launch itself said (ok / wrong / hung / error). mode "plain": the answer as graded;
    "debug": the debug barrier build (for an answer that hangs: its stuck waits end after `bound_s`, so the tool
    reports on a launch that ends instead of being killed with it)."""
    san = sanitizer_binary()
    if san is None:
        return {"tool": tool, "verdict": "error", "first": "compute-sanitizer not found (CUDA toolkit bin/)"}
    ex_kernel = resolve(target, exercise).exercise.kernel
    cmd = [san, "--tool", tool, "--kernel-name", f"kns={ex_kernel}", "--print-limit", "20",
           *_child_cmd(target, mode, exercise=exercise, shapes=[shape], deadline=deadline_s, bound=bound_s)]
    run = _spawn(cmd, timeout_s or deadline_s + 45)  # + the tool's start and the target's teardown
    launch = next(iter(_launches(run)), {})
    child = {"status": launch.get("status"), "check": launch.get("check"), "timed_out": run["timed_out"],
             "rc": run["rc"], "wall_s": run["wall_s"], "launch_wall_s": launch.get("wall_s")}
    parsed = parse_sanitizer(run["text"], tool)
    res = {"tool": tool, "shape": list(shape), "build": mode, "verdict": verdict(parsed, child, correct=correct),
           **parsed, "launch": child}
    if res["verdict"] == "error":
        res["tail"] = run["text"][-2000:]
    return res


# --------------------------------------------------------------------------------------------------- the record
def record_path(slug: str, tag: str) -> Path:
    return ROOT / "kernels" / slug / f"sanitizer_{tag}.json"


def load_record(slug: str) -> dict | None:
    """kernels/<slug>/sanitizer_<gpu>.json of the GPU this process runs on, else the H100's, else another GPU's;
    None if `make gpu-test` has written none. Its "device" and "date" say where and when it was measured."""
    found = sorted((ROOT / "kernels" / slug).glob("sanitizer_*.json"))
    for p in [record_path(slug, t) for t in (here(), DEFAULT_TAG) if t] + found:
        if p.exists():
            return json.loads(p.read_text())
    return None


def show_record(slug: str, width: int = 100) -> dict | None:
    """Print what the record says: per answer, the debug build's stuck warps and diagnosis, then each tool's verdict
    with its first message — every line under the GPU and date it was measured on."""
    doc = load_record(slug)
    if doc is None:
        print(f"no record yet of {slug}'s hangs and races: `make gpu-test` measures them "
              f"(kernels/{slug}/sanitizer_<gpu>.json)")
        return None
    print(f"Measured on {doc['device']} on {doc['date']} (compute-sanitizer: {doc.get('compute_sanitizer')}):")
    for name, a in doc["answers"].items():
        d = (a.get("debug") or [{}])[0]
        shape = tuple(a.get("shape") or ())
        print(f"\n{slug}.{name} at shape {shape}: plain build {a.get('plain_status')}; debug build {d.get('status')}")
        for line in (d.get("lines") or [])[:3] + [f"-> {x}" for x in (d.get("diagnosis") or [])[:3]]:
            print(f"    {line}"[:width + 40])
        for tool, r in (a.get("tools") or {}).items():
            first = f": {r['first']}" if r.get("first") else ""
            print(f"    {tool:<9} {r['verdict']:<11} ({r.get('errors')} errors){first}"[:width + 40])
    return doc


# ---------------------------------------------------------------------------------- the step of make gpu-test
def _first_failing(probe: dict):
    """(shape, status) of the first launch that was not right; (None, "ok") if all were; (None, "error") if the run
    never got to a launch (it did not compile, or the process died first)."""
    bad = next(((r.get("shape"), r["status"]) for r in probe["launches"] if r["status"] != "ok"), None)
    return bad or ((None, "error") if "error" in probe else (None, "ok"))


def hangs_and_races(out: Path, slugs=None, tools=TOOLS, record: bool | None = None) -> dict:
    """For each week-2 slug: every known answer that hangs or races (HANGS_AND_RACES) and the course solution,
    (1) the plain build over the spec's shapes until one fails (which shape shows the bug), (2) the debug build at
    that shape (the stuck warps' lines), (3) each compute-sanitizer tool at that shape — the solution first, at the
    largest shape any bad answer needed, whose time under the tool bounds the bad answers' deadline. Written to
    out/sanitizer/<slug>.json and, when recording (COURSE_RECORD=1), kernels/<slug>/sanitizer_<gpu>.json."""
    from kernels.device import gpu

    g = gpu() or {}
    record = os.environ.get("COURSE_RECORD") == "1" if record is None else record
    version = sanitizer_version()
    ok, docs = True, {}
    for slug in [s for s in (slugs or HANGS_AND_RACES) if s in HANGS_AND_RACES]:
        ex = next(iter(load(slug).exercises.values()))
        answers = {}
        for name in ("correct", *HANGS_AND_RACES[slug]):
            probe = run_answer(f"{slug}.{name}", mode="plain", timeout_s=600)
            shape, status = _first_failing(probe)
            answers[name] = {"plain": probe["launches"], "shape": shape, "plain_status": status}
            print(f"  {slug}.{name}: plain build {status}" + (f" at shape {tuple(shape)}" if shape else ""), flush=True)
        order = [list(s) for s in ex.test_shapes]
        bad_shapes = [a["shape"] for n, a in answers.items() if n != "correct" and a["shape"]]
        big = max(bad_shapes, key=lambda s: order.index(list(s)) if list(s) in order else -1) if bad_shapes \
            else order[0]
        answers["correct"]["shape"] = big
        for name, a in answers.items():
            shape = a["shape"] or list(ex.test_shapes[-1])
            dbg = run_answer(f"{slug}.{name}", mode="debug", shapes=[shape], timeout_s=120)
            a["debug"] = dbg["launches"][:1] or [{"status": "error", "check": dbg.get("error", "")[-1500:]}]
            for d in a["debug"]:  # the record keeps the lines and the diagnosis, not the whole trace
                tr = d.pop("trace", None)
                d["stuck_waits"] = tr["n_stuck"] if tr else None
            d = a["debug"][0]
            ok &= name != "correct" or d["status"] == "ok"  # the debug build leaves a right kernel right
            print(f"  {slug}.{name} debug build at {tuple(shape)}: {d['status']}", flush=True)
            for line in (d.get("lines") or [])[:4] + (d.get("diagnosis") or [])[:3]:
                print(f"      {line}", flush=True)
        for tool in tools:
            base = sanitize(f"{slug}.correct", tool, answers["correct"]["shape"], deadline_s=600, timeout_s=900,
                            correct=True)
            answers["correct"].setdefault("tools", {})[tool] = base
            took = base["launch"].get("launch_wall_s") or 60
            for name in HANGS_AND_RACES[slug]:
                a = answers[name]
                hangs = a["plain_status"] in HUNG  # under the tool it would hang too: the debug build ends it
                res = sanitize(f"{slug}.{name}", tool, a["shape"] or answers["correct"]["shape"],
                               deadline_s=min(300.0, max(20.0, 3 * took)) + (SANITIZE_BOUND_S if hangs else 0),
                               correct=False, mode="debug" if hangs else "plain")
                a.setdefault("tools", {})[tool] = res
            for name in ("correct", *HANGS_AND_RACES[slug]):
                r = answers[name]["tools"][tool]
                print(f"  {tool:<9} {slug}.{name:<22} {r['verdict']:<11} errors {r.get('errors')} "
                      f"{(r.get('first') or '')[:110]}", flush=True)
                ok &= r["verdict"] != "error"  # a false alarm on the solution is a finding, recorded
        doc = {"device": g.get("name"), "driver": g.get("driver"), "date": time.strftime("%Y-%m-%d"),
               "compute_sanitizer": version, "tools": list(tools), "bound_s": DEFAULT_BOUND_S,
               "what": "week 2 known answers that hang or race, and the course solution: the plain build over the "
                       "spec's shapes (first failing shape), the debug build (COURSE_DEBUG_BARRIERS) and "
                       "compute-sanitizer at that shape (autograder.hangs.hangs_and_races)",
               "answers": answers}
        docs[slug] = doc
        (out / "sanitizer").mkdir(parents=True, exist_ok=True)
        (out / "sanitizer" / f"{slug}.json").write_text(json.dumps(doc, indent=1, default=str) + "\n")
        if record:
            record_path(slug, device_tag(g.get("name"))).write_text(
                json.dumps(doc, indent=1, default=str) + "\n")
    verdicts = {s: {n: {t: r["verdict"] for t, r in a.get("tools", {}).items()} for n, a in d["answers"].items()}
                for s, d in docs.items()}
    return {"ok": ok, "compute_sanitizer": version, "verdicts": verdicts}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m autograder.hangs", description=__doc__.split("\n\n")[0])
    ap.add_argument("target", nargs="?", help="slug.answer (a known answer) or a .cu file (with --exercise)")
    ap.add_argument("--exercise", help="the slug whose launch contract runs a .cu file")
    ap.add_argument("--shapes", help='JSON list of shapes (default: the spec\'s test shapes), e.g. "[[4096, 4104]]"')
    ap.add_argument("--bound", type=float, default=DEFAULT_BOUND_S, help="seconds a wait may take (debug build)")
    ap.add_argument("--tool", choices=("memcheck", "racecheck", "synccheck", "initcheck"),
                    help="run under compute-sanitizer instead (the plain build, the first shape given)")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--mode", choices=("debug", "plain"), default="debug", help=argparse.SUPPRESS)
    ap.add_argument("--deadline", type=float, help=argparse.SUPPRESS)
    ap.add_argument("--seed", type=int, default=7, help=argparse.SUPPRESS)
    ap.add_argument("--all-shapes", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.child:
        return _child(a)
    if not a.target:
        ap.error("name a target: slug.answer or a .cu file")
    shapes = json.loads(a.shapes) if a.shapes else None
    if a.tool:
        t = resolve(a.target, a.exercise)
        shape = (shapes or [list(t.exercise.test_shapes[0])])[0]
        res = sanitize(a.target, a.tool, shape, deadline_s=120, exercise=a.exercise)
        print(json.dumps(res, indent=1, default=str))
        return 0
    res = explain(a.target, exercise=a.exercise, shapes=shapes, bound_s=a.bound)
    return 0 if "skipped" in res or all(r["status"] == "ok" for r in res.get("launches", [])) else 1


if __name__ == "__main__":
    sys.exit(main())
