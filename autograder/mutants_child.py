"""The measuring side of the understanding checks (autograder.mutants is the parent that plans and classifies): a
process that imports torch and the course once, never touches the GPU itself, and measures each mutant of its plan in
a process forked from it with a CUDA context of its own; its records go on the private channel
(autograder.spawn.emit_record) where no kernel printf reaches.

    python -m autograder.mutants_child tma --plan PLAN.json [--exercise tma_add]     # started by mutants.outcomes
"""

from __future__ import annotations

import argparse
import json
import os
import re
import select
import signal
import sys
import time
import traceback
from pathlib import Path

from kernels.compare import interleaved
from kernels.compile import CompileError
from kernels.runner import derive

from .hangs import launch_shape
from .spawn import emit_record
from .spec import load
from kernels.sass import disassemble


def _emit(rec: dict) -> None:
    emit_record("MUTANT " + json.dumps(rec, default=str))


def classify(runs: list[dict], speed: dict | None, tolerance: float = 0.03) -> dict:
    """The outcome of a mutant from its runs and (when every run was correct) its speed: one of OUTCOMES, with the
    detail a question shows. Runs of different classes: "not reproducible" (never asked)."""
    classes = {r["class"] for r in runs}
    if not runs:
        return {"outcome": "not reproducible", "detail": "no run finished"}
    if len(classes) > 1:
        return {"outcome": "not reproducible", "detail": "runs: " + ", ".join(r["class"] for r in runs)}
    c = runs[0]["class"]
    if c != "correct":
        return {"outcome": c, "detail": runs[0].get("detail", ""), "lines": runs[0].get("lines", [])}
    if not speed:
        return {"outcome": "no observable change", "detail": "correct on every shape in every run (not timed)"}
    if not all(speed.get("outputs_ok", {}).values()):
        return {"outcome": "wrong", "detail": "wrong at the bench shape (the test shapes were right)"}
    r = speed["ratio"]
    if r["lo"] > 1 + tolerance:
        return {"outcome": "slower", "detail": f"{100 * (r['median'] - 1):.0f} % slower ({r['says']})",
                "slower_pct": 100 * (r["median"] - 1), "interval_pct": [100 * (r["lo"] - 1), 100 * (r["hi"] - 1)]}
    if r["hi"] < 1 - tolerance:
        return {"outcome": "faster", "detail": f"{100 * (1 - r['median']):.0f} % faster ({r['says']})"}
    return {"outcome": "no observable change",
            "detail": f"correct in every run and within {100 * tolerance:.0f} % of the kernel's time ({r['says']}); "
                      "a race the GPU did not show stays a race"}


def _run_once(ex, wl, cubin, names, seed: int, bound_s: float, shapes=None) -> dict:
    """Every test shape (or `shapes`) once on fresh inputs (debug build, autograder.hangs.launch_shape): {"class",
    "detail", "lines"}; the first shape that is not right decides."""

    for i, shape in enumerate(ex.test_shapes if shapes is None else shapes):
        rec = launch_shape(ex, wl, cubin, shape, derive(seed, "mutant", i), 2 * bound_s + 3, names, bound_s)
        where = f"shape {tuple(shape)}: "
        if rec["status"] == "error":  # a fault: this process's context is gone
            return {"class": "crashes", "detail": (where + rec["check"])[:600], "fatal": True}
        if rec["status"] in ("hung", "wait ran out"):
            lines = (rec.get("lines") or []) + (rec.get("diagnosis") or [])
            return {"class": "hangs", "detail": where + (lines[0] if lines else rec["check"]), "lines": lines,
                    "fatal": rec["status"] == "hung"}
        if rec["status"] == "wrong":
            return {"class": "wrong", "detail": (where + rec["check"])[:600]}
    return {"class": "correct", "detail": ""}


def _speed(ex, wl, base_src: str, mutant_src: str, rounds: int, seed: int) -> dict:
    """The mutant against the unmutated kernel at the bench shape (plain builds, same inputs): kernels.compare's
    interleaved rounds; each measurement a short kernels.bench run. Both outputs checked after."""
    from kernels.bench import bench
    from kernels.check import compare, poison
    from kernels.compile import compile_cuda
    from kernels.runner import derive, launch_contract, wait

    cubins = {"kernel": compile_cuda(base_src, name=ex.answer_var),
              "mutant": compile_cuda(mutant_src, name=ex.answer_var)}
    inputs = wl.make_inputs(list(ex.bench_shape), derive(seed, "mutant", "bench"), device="cuda")
    ref = wl.reference(inputs)
    outs = {k: wl.make_output(inputs) for k in cubins}
    args = {k: wl.launch_args(inputs, outs[k]) for k in cubins}

    def measure(k):
        return lambda: bench(lambda: launch_contract(ex, cubins[k], args[k]), reps=5, warmup=1, flush=True,
                             wall_check=False, with_ceilings=False).ms

    cmp = interleaved({k: measure(k) for k in cubins}, rounds=rounds)
    checks = {}
    for k in cubins:
        poison(outs[k])
        launch_contract(ex, cubins[k], args[k])
        wait(ex.launch_timeout_s, k)
        checks[k] = compare(outs[k], ref, **dict(wl.CHECK)).ok
    r = cmp.ratio("kernel", "mutant")  # the mutant's time / the kernel's: > 1 the mutant is slower
    return {"ratio": r.to_dict(), "ms": {k: cmp.median_ms(k) for k in cubins}, "outputs_ok": checks}


_NOW: dict = {"m": None}  # the mutant the child is measuring (an escaping exception is reported as its)


def _child(a) -> int:
    """A plan of mutants measured one after another (each in forked processes: a stretch of runs, then its speed),
    each result a record on the private channel. A fatal run (a hang for good, a fault) ends its fork; the next fork
    goes on where it stopped (_measured). An exception that escapes is reported there too, with its mutant: a fault of
    the kernel ("crashes") or a failure of the course's own code ("not measured"), told apart from the real
    exception's traceback (never from the kernel's output)."""
    try:
        return _child_plan(json.loads(Path(a.plan).read_text()), a.slug, a.exercise)
    except Exception:  # noqa: BLE001 - reported, then the process ends (a faulted context cannot be trusted)
        tb = traceback.format_exc()
        _emit({"event": "failed", "m": _NOW["m"], "course": _course_failed(tb), "detail": tb[-600:],
               "t": time.time()})
        sys.stdout.flush()
        _end(4)


def _child_plan(plan: dict, slug: str, exercise: str | None) -> int:
    """plan: {"base", "runs", "rounds", "seed", "bound", "idle", "mutants": [{"m", "file", "first_run", "time",
    "probes", "poisons"}]}. This process imports torch and the course once (about as long as a mutant's three runs:
    measured on an H200, 2026-12-02) and never touches the GPU; each mutant is measured in processes forked from it,
    each with a CUDA context of its own (_fresh_context): nothing a kernel leaves in GPU memory reaches the next
    mutant, and a fatal run (a hang for good, a fault) ends only its fork (_measured)."""
    import torch  # noqa: F401 - imported once, here, for every forked measuring process

    ex = load(slug).exercises[exercise] if exercise else next(iter(load(slug).exercises.values()))
    wl = ex.workload()
    base = Path(plan["base"]).read_text()
    for job in plan["mutants"]:
        _NOW["m"] = job["m"]
        got = _measured(plan, job, ex, wl, base)
        if job.get("poisons") and any(r["event"] == "unchanged" or (r["event"] == "probe" and r["ran"]) for r in got):
            _emit({"event": "poison", "m": job["m"], **_poisoned(plan, job, ex, wl), "t": time.time()})
    _NOW["m"] = None
    return 0


def _measured(plan: dict, job: dict, ex, wl, base: str) -> list[dict]:
    """One mutant's runs, each stretch in a forked process (a "begin" record each): after a fatal run the next fork
    goes on from the run after it, never timed, until `runs` runs or `runs` forks. A fork that dies before its first
    run's record leaves a "crashes" run; one silent for plan["idle"] seconds a "hangs" run (a wait the debug build does
    not bound); the course's own failure ends the mutant (the parent reads it as "not measured"). Its records."""
    m, first, timed, got = job["m"], job["first_run"], job["time"], []
    for _ in range(plan["runs"]):
        _emit({"event": "begin", "m": m, "t": time.time()})
        mine: list = []
        end = _fresh_context(lambda: _measure_job(plan, {**job, "first_run": first, "time": timed}, ex, wl, base),
                             mine, idle_s=plan.get("idle"))
        got += mine
        if end == "done":
            return got
        failed = next((r for r in mine if r["event"] == "failed"), None)
        if failed is not None and failed["course"]:
            break
        if not any(r["event"] == "run" for r in mine):
            rec = {"event": "run", "m": m, "run": first, "t": time.time(), **(
                {"class": "hangs", "detail": f"no answer in {plan['idle']:.0f} s: a wait the debug build does not "
                 "bound (__syncthreads, a cluster barrier, a spin loop)"} if end == "silent" else
                {"class": "crashes", "detail": ((failed or {}).get("detail") or "the measuring process died")[-600:]})}
            _emit(rec)
            got.append(rec)
        first, timed = 1 + max(r["run"] for r in got if r["event"] == "run"), False
        if first >= plan["runs"]:
            break
    _emit({"event": "done", "m": m, "t": time.time()})
    return got


def _end(rc: int) -> None:
    os._exit(rc)


_PIPE: dict = {"fd": None}  # in a forked measuring process: where its records go (its parent forwards them)


def _send(rec: dict) -> None:
    os.write(_PIPE["fd"], (json.dumps(rec, default=str) + "\n").encode())


def _fresh_context(measure, got: list | None = None, forward: bool = True, idle_s: float | None = None) -> str:
    """measure() in a forked process that makes its own CUDA context (this one never made one: a context does not
    survive a fork), its records (_send) forwarded here on this process's channel as they come (and kept in `got`). A
    fatal record kills it (its kernel may never end), and so does silence for idle_s seconds. "done" when it finished
    its mutant (a done record, a clean exit), else "fatal", "silent" or "died"."""

    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the measuring process: whatever happens, it ends here
        os.close(r)
        _PIPE["fd"], rc = w, 0
        try:
            measure()
        except BaseException:  # noqa: BLE001 - reported with its mutant: a fault of the kernel or the course's own
            tb = traceback.format_exc()
            _send({"event": "failed", "m": _NOW["m"], "course": _course_failed(tb), "detail": tb[-600:],
                   "t": time.time()})
            rc = 4
        sys.stdout.flush()
        os._exit(rc)
    os.close(w)
    done, end, buf = False, None, b""
    while end is None:
        if not select.select([r], [], [], idle_s)[0]:
            end = "silent"
            break
        chunk = os.read(r, 1 << 16)
        if not chunk:
            break
        *lines, buf = (buf + chunk).split(b"\n")
        for line in lines:
            rec = json.loads(line.decode("utf-8", "replace"))
            if forward:
                _emit(rec)
            if got is not None:
                got.append(rec)
            done = done or rec["event"] == "done"
            if rec.get("fatal"):
                end = "fatal"
                break
    if end is not None:
        os.kill(pid, signal.SIGKILL)
    os.close(r)
    _, status = os.waitpid(pid, 0)
    return end or ("done" if done and status == 0 else "died")


def _measure_job(plan: dict, job: dict, ex, wl, base: str) -> None:
    """One mutant in its own CUDA context: its debug build, its stretch of runs, its speed when asked and every run
    was correct; then, if it changed nothing observable so far, whether its change is in the compiled kernel at all
    and whether the changed line runs (_probe)."""
    import torch

    from kernels.device import gpu

    from .hangs_trace import debug_cubin

    m = job["m"]
    _send({"event": "device", "device": (gpu() or {}).get("name")})
    torch.cuda.init()
    src = Path(job["file"]).read_text()
    try:
        cubin, names = debug_cubin(src, ex.answer_var)
    except CompileError as exc:
        _send({"event": "run", "m": m, "run": job["first_run"], "class": "does not compile", "detail": str(exc)[:600],
               "t": time.time()})
        _send({"event": "done", "m": m, "t": time.time()})
        return
    timed = (lambda: _speed(ex, wl, base, src, plan["rounds"], plan["seed"])) \
        if job["time"] and plan["rounds"] else None
    run_once = (lambda r: _run_once(ex, wl, cubin, names, plan["seed"] + r, plan["bound"]))
    ok, recs, speed = job["time"], [], None
    for rec in _stretch(run_once, job["first_run"], plan["runs"], timed):
        _send({**rec, "m": m, "t": time.time()})
        ok = ok and rec.get("class", "correct") == "correct"
        recs, speed = (recs + [rec], speed) if rec["event"] == "run" else (recs, rec)
        if rec.get("fatal"):
            return
    # only a mutant that changed nothing observable (this stretch was its every run: it was timed) is probed
    if ok and src != base and classify(recs, speed)["outcome"] == "no observable change":
        if _same_code(ex, base, src):
            _send({"event": "same", "m": m, "t": time.time()})
        elif job.get("probes"):
            _send({"event": "probe", "m": m, **_probe(ex, wl, job["probes"], plan), "t": time.time()})
        else:
            _send({"event": "unchanged", "m": m, "t": time.time()})
    _send({"event": "done", "m": m, "t": time.time()})


def _same_code(ex, base: str, src: str) -> bool:
    """Whether the mutant compiles to the very machine code the kernel does (plain builds, every function's SASS
    instruction by instruction; line tables aside): the compiler removed what the change touched, so nothing can be
    observed and no question is about the kernel."""
    from kernels.compile import compile_cuda

    def code(s):
        return {f: [i.text for i in instrs] for f, instrs in disassemble(compile_cuda(s, name=ex.answer_var)).items()}

    return code(base) == code(src)


def _probe(ex, wl, probe_files: list[str], plan: dict) -> dict:
    """The first probe (the mutant with a trap at its change: autograder.mutation.probe_sources) that compiles,
    launched after the mutant's runs and timing, at the bench shape and then every test shape until one is not right:
    {"ran": True} when the trap fired (the launch faulted: the changed line ran), False when every launch stayed right
    (it never ran), None when no probe compiled or a launch went wrong (what the line does is not known)."""
    from .hangs_trace import debug_cubin

    for f in probe_files:
        try:
            cubin, names = debug_cubin(Path(f).read_text(), ex.answer_var)
        except CompileError:
            continue
        got = _run_once(ex, wl, cubin, names, plan["seed"] + 1000, plan["bound"],
                        shapes=[list(ex.bench_shape), *ex.test_shapes])
        if got["class"] == "crashes":
            return {"ran": True, "detail": "the trap placed at the changed line fired: " + got["detail"][:200]}
        if got["class"] == "correct":
            return {"ran": False, "detail": "a trap placed at the changed line never fired, at the bench shape or any "
                    "test shape, in launches after the mutant's runs and timing: the line does not run"}
        return {"ran": None, "detail": f"the probe's launch {got['class']}: " + got["detail"][:200]}
    return {"ran": None, "detail": "no place for a trap at the changed line compiled"}


def _poisoned(plan: dict, job: dict, ex, wl) -> dict:
    """Whether the changed line's effect reaches the output: the poisons (autograder.poisons.poison_sources, the
    unmutated kernel with the changed value poisoned or a statement left out) tried in order, each compiled and
    launched in a CUDA context of its own (a poison may fault), until one decides; a poison after the one that decides
    is never compiled. Output wrong, or a wait that runs out, reaches it; a right output from a "value" or "self" poison
    does not (the changed value, the changed statement, never reach it), from a "near" or "use" poison that statement
    does not (the next is tried); a fault or no compile says nothing.
    {"reaches": True / False / None (nothing decided), "detail", "tries": [{"kind", "class", "s"}]}."""
    from .hangs_trace import debug_cubin

    tries, quiet = [], []
    for kind, f in job["poisons"]:
        t0 = time.time()

        def run(f=f):
            try:
                cubin, names = debug_cubin(Path(f).read_text(), ex.answer_var)
            except CompileError:
                _send({"event": "try", "class": "does not compile", "detail": ""})
                return
            import torch  # noqa: F401 - in the forked process: its own CUDA context, made here

            torch.cuda.init()
            # launched the instrument's way (the test shapes in order, fresh inputs): a kernel that behaved otherwise
            # where a module's first launch is some other shape would tell a poison from the instrument
            got = _run_once(ex, wl, cubin, names, plan["seed"] + 2000, plan["bound"])
            _send({"event": "try", **got})
        recs: list = []
        end = _fresh_context(run, recs, forward=False, idle_s=plan.get("idle"))
        got = next((r for r in recs if r["event"] == "try"),
                   {"class": "hangs", "detail": f"no answer in {plan.get('idle')} s"} if end == "silent"
                   else {"class": "crashes", "detail": "the process died"})
        tries.append({"kind": kind, "class": got["class"], "s": round(time.time() - t0, 2)})
        if got["class"] in ("wrong", "hangs"):
            return {"reaches": True, "tries": tries, "detail": f"the changed line's effect reaches the output: with it "
                    f"poisoned ({kind}) the kernel {got['class'].replace('hangs', 'hung')}: " + got["detail"][:160]}
        if got["class"] == "correct":
            quiet.append(kind)
            if kind in ("value", "self"):
                break
    if quiet:
        return {"reaches": False, "tries": tries, "detail": "the changed line runs but its effect never reaches the "
                f"output: with it poisoned ({', '.join(quiet)}) the output stayed right"}
    return {"reaches": None, "tries": tries, "detail": "no poison of the changed line decided whether its effect "
            "reaches the output (none compiled, or each faulted)"}


def _stretch(run_once, first: int, runs: int, timed=None):
    """The records of one stretch of runs (run_once(r) for r in first..runs-1), then the speed record — only when every
    run of the stretch was correct. A mutant that hung, went wrong or crashed is never timed: its timing build is the
    plain one, with no bounded waits, so a hang there would run on until the parent's timeout (60 s a mutant, measured
    on an H200 on 2026-11-28 for every mutant that hung in the debug build) and its speed means nothing anyway."""
    ok = True
    for r in range(first, runs):
        rec = {"event": "run", "run": r, **run_once(r)}
        ok = ok and rec["class"] == "correct"
        yield rec
        if rec.get("fatal"):
            return
    if ok and timed is not None:
        yield {"event": "speed", **timed()}


def _course_failed(text: str) -> bool:
    """A Python traceback whose last frame is the course's code (autograder/, kernels/) and whose error is not the
    GPU's: the measuring failed, the mutant did not crash. A CUDA error (a fault, a launch failure) is the kernel's."""
    if "Traceback (most recent call last)" not in text and "\n  File \"" not in text:
        return False
    frames = re.findall(r'File "([^"]+)"', text)
    last = text.strip().splitlines()[-1] if text.strip() else ""
    gpu = re.search(r"CUDA_ERROR_(ILLEGAL|LAUNCH|MISALIGNED|HARDWARE|ASSERT|UNKNOWN|INVALID_PC|EXCEPTION)|"
                    r"illegal (memory|address|instruction)|launch failure|misaligned|unspecified|trap|segmentation fault|"
                    r"core dumped|abort", last, re.I)
    return bool(frames) and any(f"/{d}/" in frames[-1] for d in ("autograder", "kernels")) and not gpu


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m autograder.mutants_child")
    ap.add_argument("slug")
    ap.add_argument("--exercise")
    ap.add_argument("--plan", required=True)
    return _child(ap.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
