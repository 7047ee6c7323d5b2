"""A topic's benchmark script, one scaffold for every topic.

A topic declares what is its own, in its bench.py:

    TOPIC = Topic(slug="tma", title="Day 5: TMA", check=check_all, measure=measure,
                  constants=lambda: {"LATENCY_NS": model.LATENCY_NS, ...}, fit=model.fit, claims=claims,
                  plots={"tma_sweep.png": plot_sweep})
    run = TOPIC.run
    if __name__ == "__main__":
        TOPIC.main(__doc__)             # python -m kernels.tma.bench --out build/gpu [--quick]

- check(quick) -> failures, or (failures, evidence): every kernel against its reference through the scaffold's loop
  (check_kernels: fresh inputs, awkward shapes, poisoned outputs, NaN never passes); the evidence (what each check
  saw) goes into the record and to `extra`;
- measure(quick) -> (rows, problems) or (rows, problems, evidence): the rows (`row()` builds one), each with the
  model's prediction beside it; `evidence` (a dict, e.g. what the known-bad answers did) goes into the record;
- constants() -> the model's fitted constants with their source; fit(rows, ceilings) -> a refit on this run's rows
  (recorded beside the constants, never used to predict: a refit far from them says the model or the machine moved);
- claims(rows, ceilings) -> what the notebook says about these rows that this run contradicts;
- plots: file name -> plot(rows, ceilings), beside the predicted-vs-measured plot every topic gets
  (<slug>_vs_model.png, plot_rows);
- held_out: the model's HeldOut (declared in its model.py: fit rows, held-out rows, band, a per-row prediction, a
  refit): the scaffold records its errors, the rows outside the band and the refit as extra["model"], one key set
  for every topic; the notebook prints the same check's report (model.held_out_report).

What every topic shares lives here: the correctness loop, the order (check, measure, compare with the model, check
the claims, record, plot), the band (worst |prediction / measurement - 1| over the rows the model covers), the
record (kernels.record: device, driver, date, ceilings), the command line, and the checking and timing of the
exercise's known answers with the grader's own function — answers the grader hands in (Answers; kernels/ never reads
grading data). What the grader holds those timings to (bars, the course solution's margin) is the grader's:
autograder.benchmarks runs a topic with its answers and that `grading` (`make gpu-test`).
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import traceback
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable

from . import record
from .held_out import HeldOut, measured, shown_value
from .sim import plot_predicted_vs_measured

MODEL_BAND = 0.20  # the course's hard band for every modelled row (goal 0.15)


def _no_claims(rows, ceilings) -> list[str]:
    return []


@dataclass
class Topic:
    slug: str
    title: str  # the plots' title: "Day 5: TMA"
    # check(quick) or check(): failures, or (failures, evidence) — a function with no `quick` parameter is called
    # without it (a topic passes its check_all as it is)
    check: Callable[..., list[str] | tuple[list[str], dict]]
    # measure(quick) or measure(): rows, or (rows, problems), or (rows, problems, evidence for the record)
    measure: Callable[..., list | tuple]
    constants: Callable[[], dict]
    fit: Callable[[list[dict], float], dict] | None = None  # (rows, copy ceiling) -> refit constants and band
    claims: Callable[[list[dict], dict], list[str]] = _no_claims
    # (rows, ceilings, checked = {"failures": the check's, "evidence": what it saw}) -> topic facts for the record
    extra: Callable[[list[dict], dict, dict], dict] | None = None
    plots: dict[str, Callable] = field(default_factory=dict)  # more plots: file name -> fn(rows, ceilings) -> Figure
    model_band: float = MODEL_BAND
    # rows ("<kernel> <shape>") the model names as misses it does not predict, with why: left out of the band, their
    # error recorded beside it (model_known_misses) — a named miss, never a silently widened band
    known_misses: dict[str, str] = field(default_factory=dict)
    keep_going: bool = False  # True: a failed check does not stop the run (everything is measured, then reported)
    # the model's held-out check (its model.py's HeldOut): recorded as extra["model"], with its refit where declared
    held_out: HeldOut | None = None

    def run(self, out_dir: Path, quick: bool = False, **kw) -> dict:
        return run(self, out_dir, quick, **kw)

    def main(self, doc: str | None = None, argv=None, **kw) -> None:
        main(self, doc, argv, **kw)

    def plot(self, rows: list[dict], ceiling: float | None = None, bar: float | None = None):
        """The topic's predicted-vs-measured plot (what run() saves as <slug>_vs_model.png); `ceiling`: the copy
        ceiling (TB/s rows) or cuBLAS (TFLOPS rows) of the rows' run."""
        key = "copy_tbps" if any(r.get("tbps") is not None for r in rows) else "cublas_bf16_tflops"
        return plot_rows(rows, {key: ceiling} if ceiling else None, f"{self.title}, measured vs model", bar=bar)


def row(kernel: str, shape: str, res, prediction=None, **extra) -> dict:
    """One recorded row from a timing (a kernels.bench.BenchResult, or the dict kernels.runner.time_exercise
    returns) and the model's prediction (a number, or an object with .tbps / .tflops and .bound)."""
    if isinstance(res, dict):
        ms, p20, p80 = res["ms"], res["p20_ms"], res["p80_ms"]
        tbps = res["bytes"] / (ms * 1e-3) / 1e12 if res.get("bytes") else None
        tflops = res["flops"] / (ms * 1e-3) / 1e12 if res.get("flops") else None
    else:
        ms, p20, p80, tbps, tflops = res.ms, res.p20_ms, res.p80_ms, res.tbps, res.tflops
    pred, bound = prediction, None
    if prediction is not None and not isinstance(prediction, (int, float)):
        pred = getattr(prediction, "tbps", None) if tbps is not None else getattr(prediction, "tflops", None)
        bound = getattr(prediction, "bound", None)
    fraction = None if isinstance(res, dict) else (res.fraction_of_copy if tbps is not None else res.fraction_of_matmul)
    out = {"kernel": kernel, "shape": shape, "ms": ms, "p20_ms": p20, "p80_ms": p80, "tbps": tbps,
           "tflops": None if tbps is not None else tflops, "fraction_of_ceiling": fraction, "model_prediction": pred}
    if bound is not None:
        out["model_bound"] = bound
    out.update(extra)
    return out


def _with_fractions(rows: list[dict], ceilings: dict) -> None:
    for r in rows:
        if r.get("tbps") is not None:
            r["fraction_of_ceiling"] = r["tbps"] / ceilings["copy_tbps"]
        elif r.get("tflops") is not None and ceilings.get("cublas_bf16_tflops"):
            r["fraction_of_ceiling"] = r["tflops"] / ceilings["cublas_bf16_tflops"]


def band(rows: list[dict]) -> tuple[float, dict | None]:
    """The worst |prediction / measurement - 1| over the rows the model covers, and that row."""
    covered = [r for r in rows if r.get("model_prediction") is not None and measured(r)]
    if not covered:
        return float("nan"), None
    worst = max(covered, key=lambda r: abs(r["model_prediction"] / measured(r) - 1))
    return abs(worst["model_prediction"] / measured(worst) - 1), worst


# --- the correctness loop every benchmark runs -----------------------------------------------------------------

@dataclass
class Checked:
    """One launch of the correctness loop: which run, on which shape and draw, and what the comparison said (a
    kernels.check report; None where the launch itself raised, `message` then says what)."""
    run: object
    shape: object
    draw: int
    ok: bool
    message: str
    report: object = None


def shape_label(shape) -> str:
    """'127x129' for a shape tuple, 'n=4099' for a length."""
    return "x".join(map(str, shape)) if isinstance(shape, (tuple, list)) else f"n={shape}"


def check_reports(runs, shapes, *, inputs, launch, output, reference=None, reference_for=None, check=None,
                  seed: int = 1, stride: int = 1, draws: int = 1, skip=None):
    """The correctness loop of every benchmark, one Checked per launch. For each shape (awkward ones: the
    workload's TEST_SHAPES) and each of `draws` draws, fresh inputs `inputs(shape, seed + stride * i + draw)` and
    their reference (`reference(inputs)`, computed before any launch; `reference_for(run, inputs)` where it
    depends on the run); then each run launched, `launch(run, inputs, out)`, into an output poisoned first
    (`output(inputs, run)` -> a fresh tensor, filled with NaN: an element the kernel never writes fails) and compared
    (`check`: kernels.check.compare's options, or run -> options). NaN never passes; a launch that raises is a
    failed launch (a rung that refuses a shape), never the end of the loop; `skip(run, shape)`: a pair not checked (a
    shape the rung is not built for)."""
    import torch

    from .check import compare, poison

    runs = list(runs)
    for i, shape in enumerate(shapes):
        for k in range(draws):
            inp = inputs(shape, seed + stride * i + k)
            ref = reference(inp) if reference is not None else None
            for run in runs:
                if skip is not None and skip(run, shape):
                    continue
                try:
                    out = poison(output(inp, run))
                    launch(run, inp, out)
                    if out.is_cuda:
                        torch.cuda.synchronize()
                    want = reference_for(run, inp) if reference_for is not None else ref
                    rep = compare(out, want, **((check(run) if callable(check) else check) or {}))
                    yield Checked(run, shape, k, rep.ok, rep.message, rep)
                except Exception as exc:  # noqa: BLE001 - reported as this launch's failure
                    yield Checked(run, shape, k, False, f"{type(exc).__name__}: {exc}")


def check_kernels(runs, shapes, *, label=str, shape_name=shape_label, **loop) -> list[str]:
    """check_reports' failures, one line each: '<label(run)> <shape_name(shape)>: <what the check said>'."""
    return [f"{label(c.run)} {shape_name(c.shape)}: {c.message}" for c in check_reports(runs, shapes, **loop)
            if not c.ok]


# --- known answers of a topic's exercise: handed in by the grader, never read here ------------------------------

@dataclass
class Answers:
    """A topic's known answers as the grader hands them to its benchmark (autograder.benchmarks.answers): each
    exercise (the grader's spec of it: test and bench shapes, repetitions, the kernel's name, its deadline) with its
    workload module, and the CUDA source of an answer by name. The library never reads grading data: with no
    Answers (a notebook, a student release) a benchmark checks and times the library's kernels only."""
    exercises: dict  # exercise name -> (exercise, workload module); the first is the topic's exercise
    source: Callable[[str], str]  # answer name -> its CUDA source
    cubins: dict = field(default_factory=dict)  # compiled on first use


_PROVIDED: dict[str, Answers] = {}


@contextmanager
def provided(slug: str, answers: Answers | None):
    """Within this block the benchmark of `slug` sees `answers` (shipped, answer_cubin, time_answer, ...)."""
    before = _PROVIDED.get(slug)
    if answers is not None:
        _PROVIDED[slug] = answers
    try:
        yield answers
    finally:
        if before is None:
            _PROVIDED.pop(slug, None)
        else:
            _PROVIDED[slug] = before


def _answers(slug: str) -> Answers:
    if slug not in _PROVIDED:
        raise LookupError(f"no known answers were handed to the {slug} benchmark (autograder.benchmarks runs it with "
                          "them)")
    return _PROVIDED[slug]


def shipped(slug: str, names) -> list:
    """The names among `names` the benchmark can time: all of them where the grader handed it the topic's known
    answers (autograder.benchmarks, `make gpu-test`), none otherwise (a notebook, a student release)."""
    return list(names) if slug in _PROVIDED else []


def answer_source(slug: str, name: str) -> str:
    """The CUDA source of the known answer `name`, as the grader handed it."""
    return _answers(slug).source(name)


def answer_cubin(slug: str, name: str):
    """The compiled known answer `name` of the topic's exercise (its source as the grader handed it), compiled under
    the name the grader compiles it under (the exercise's source variable, e.g. RESAMPLE_CU): one text and one name
    make one cached cubin for the benchmark, the grader and the SASS record."""
    from .compile import compile_cuda

    book = _answers(slug)
    if name not in book.cubins:
        book.cubins[name] = compile_cuda(answer_source(slug, name), name=exercise_of(slug)[0].answer_var)
    return book.cubins[name]


def exercise_of(slug: str, exercise: str | None = None):
    """(exercise, workload module) of the topic's exercise (its only one unless named), as the grader handed it."""
    exs = _answers(slug).exercises
    return exs[exercise] if exercise else next(iter(exs.values()))


def run_answer(slug: str, cubin, inputs: dict, out, exercise: str | None = None):
    """Launch a compiled answer with the exercise's fixed launch contract, as the grader does."""
    from .runner import launch_contract

    ex, wl = exercise_of(slug, exercise)
    launch_contract(ex, cubin, wl.launch_args(inputs, out))
    return out


def check_answers(slug: str, names, shapes=None, seed: int = 1, runs: int = 1, exercise: str | None = None,
                  workload=None, note: str = "") -> list[str]:
    """Each named answer on each test shape (the exercise's unless given), `runs` fresh draws each, poisoned output,
    the exercise's tolerance (the scaffold's loop, check_kernels); `workload`: another launch of the same exercise
    (e.g. another cluster size). Returns the failures: '<exercise> (<answer>)<note> <shape>: message'."""
    from .runner import launch_contract

    names = shipped(slug, names)
    if not names:
        return []
    ex, wl = exercise_of(slug, exercise)
    wl = workload or wl
    cubs = {n: answer_cubin(slug, n) for n in names}
    return check_kernels(names, shapes or ex.test_shapes, label=lambda n: f"{ex.name} ({n}){note}",
                         inputs=lambda shape, s: wl.make_inputs(shape, s, device="cuda"),
                         reference=wl.reference, output=lambda inp, n: wl.make_output(inp),
                         launch=lambda n, inp, out: launch_contract(ex, cubs[n], wl.launch_args(inp, out)),
                         check=dict(wl.CHECK), seed=seed, stride=1000, draws=runs)


def time_answer(slug: str, name: str, *, shape=None, reps: int | None = None, seed: int = 0,
                exercise: str | None = None, cubin=None) -> dict:
    """Time a known answer (or `cubin`) with the grader's own function, kernels.runner.time_exercise: every launch
    verified, the counts drawn from the seed. At the exercise's bench shape and repetitions unless given."""
    from .runner import time_exercise

    ex, wl = exercise_of(slug, exercise)
    ex = replace(ex, bench_shape=tuple(shape or ex.bench_shape), bench_reps=int(reps or ex.bench_reps))
    return time_exercise(ex, wl, cubin or answer_cubin(slug, name), seed, name)


def answer_row(slug: str, name: str, res: dict, prediction=None, *, kernel: str | None = None, shape: str | None = None,
               exercise: str | None = None, **extra) -> dict:
    """A recorded row for a known answer timed by time_answer (named `kernel`, default "<exercise> (<answer>)"):
    `exercise`, `answer` and whether every timed launch was right are part of it (the grader's margin check reads
    them)."""
    from .bench import ceilings

    ex, _ = exercise_of(slug, exercise)
    shape = shape or "x".join(map(str, ex.bench_shape))
    out = row(kernel or f"{ex.name} ({name})", shape, res, prediction, exercise=ex.name, answer=name,
              output_ok=res["output_ok"], wrong_launches=res["wrong_launches"], launches=res["launches"],
              timed_by="kernels.runner.time_exercise", **extra)
    _with_fractions([out], ceilings())  # the same process's ceilings (measured once, cached)
    return out


def fit_table(fit: dict, constants: dict | None = None, *, fit_rows=(), held_out=()) -> str:
    """A model's fit as a table a reader can scan (every topic's notebook prints this, not the dicts): where it was
    fitted (device, driver, date, source), each constant with its value, the rows it was fitted on and the rows held
    out, and any named misses (`held_out_outside_band`: GPU -> row -> error)."""
    lines = []
    where = ", ".join(str(fit[k]) for k in ("device", "driver", "date") if fit.get(k))
    if where:
        lines.append(f"fitted on   {where}")
    if fit.get("source"):
        lines.append(f"source      {fit['source']}")
    consts = dict(constants or {})
    if consts:
        width = max(len(k) for k in consts)
        lines.append("constant".ljust(width) + "   value")
        for k, v in consts.items():
            lines.append(f"{k:<{width}}   {shown_value(v)}")
    for title, names in (("fit rows", fit_rows), ("held out", held_out)):
        names = list(names)
        if names:
            lines.append(f"{title:<11} " + names[0])
            lines += [" " * 12 + n for n in names[1:]]
    for gpu, misses in (fit.get("held_out_outside_band") or {}).items():
        for name, err in (misses or {}).items():
            lines.append(f"named miss  {gpu}: {name} {err:+.1%}")
    return "\n".join(lines)


def plot_rows(rows: list[dict], ceilings: dict | None, title: str, bar: float | None = None):
    """The predicted-vs-measured plot every topic draws: bars measured, diamonds predicted (±15 % / ±20 %), the
    ceiling of the same run and the exercise's bar as lines."""
    tbps = any(r.get("tbps") is not None for r in rows)
    ceiling = None if not ceilings else ceilings.get("copy_tbps" if tbps else "cublas_bf16_tflops")
    return plot_predicted_vs_measured([r for r in rows if measured(r) is not None], title=title,
                                      outer_band=MODEL_BAND, ceiling=ceiling, bar=bar)


def finish_sweep(ax, xlabel: str, ylabel: str, title: str):
    """The end of a sweep plot (measured points and model curves against a swept parameter): its labels and title,
    the y axis from 0, a small legend; returns the axes' figure."""
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.set_ylim(bottom=0)
    ax.legend(fontsize="small")
    return ax.figure


def attempt(what: str, fn, failures: list[str], default):
    """One phase of a run: its exception becomes a failure (with its last frames) instead of ending the run."""
    try:
        return fn()
    except Exception as exc:  # noqa: BLE001 - reported, not swallowed: run() returns ok=False
        failures.append(f"{what} raised {type(exc).__name__}: {exc}\n" + "".join(traceback.format_exc(limit=3)))
        return default


def with_quick(fn: Callable, quick: bool):
    """fn(quick=quick) where fn has a `quick` parameter, else fn(): how the scaffold calls a topic's check and
    measure, so a topic hands over its own functions, not wrappers that drop the flag."""
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):  # a builtin or C callable: no signature to read
        return fn(quick)
    return fn(quick=quick) if "quick" in params else fn()


def _measured_run(topic: Topic, quick: bool, failures: list[str]) -> tuple[list[dict], dict, list]:
    """The measure phase: (rows with their fractions of this run's ceilings, the ceilings, the measure's evidence).
    A measure that returns its rows alone has no problems to report."""
    from .bench import ceilings

    got = attempt("measure", lambda: with_quick(topic.measure, quick), failures, ([], []))
    rows, problems, *evidence = (got, []) if isinstance(got, list) else got
    failures += problems
    ceil = ceilings()
    _with_fractions(rows, ceil)
    return rows, ceil, evidence


def _model_facts(topic: Topic, rows: list[dict], ceil: dict, failures: list[str]) -> dict:
    """The model against the rows: the band (the named misses left out and recorded beside it), the refit, the
    held-out check (extra["model"]), and a failure where the band is exceeded."""
    from .device import gpu

    missed = [r for r in rows if f"{r['kernel']} {r['shape']}" in topic.known_misses]
    worst_band, worst = band([r for r in rows if r not in missed])
    fitted = attempt("fit", lambda: topic.fit(rows, ceil["copy_tbps"]), failures, None) if topic.fit and rows \
        else None
    this = {"rows": rows, "ceilings": ceil, "sms": (gpu() or {}).get("sms")}  # the run as a record
    held = attempt("held-out check", lambda: topic.held_out.facts(this), failures, None) if topic.held_out and rows \
        else None
    if worst is not None and worst_band > topic.model_band:
        failures.append(f"model off by {worst_band:.1%} (> {topic.model_band:.0%}), worst {worst['kernel']} "
                        f"{worst['shape']}: predicted {worst['model_prediction']:.3f}, measured {measured(worst):.3f}")
    return {"model_constants": topic.constants(), "model_band": worst_band,
            "model_known_misses": {f"{r['kernel']} {r['shape']}": {
                "why": topic.known_misses[f"{r['kernel']} {r['shape']}"],
                "error": (r["model_prediction"] / measured(r) - 1) if r.get("model_prediction") and measured(r)
                else None} for r in missed},
            "model_worst_row": worst["kernel"] if worst else None,
            **({"model_fit": fitted} if topic.fit else {}), **({"model": held} if topic.held_out else {})}


def _write(topic: Topic, rows: list[dict], ceil: dict, extra: dict, out_dir: Path, quick: bool,
           failures: list[str]) -> Path | None:
    """The record (out_dir/<slug>/recorded_h100.json; next to the code too with COURSE_RECORD=1) and the plots."""
    if not rows:
        return None
    target = record.write(topic.slug, rows, ceil, extra, out=out_dir / topic.slug / "recorded_h100.json")
    if os.environ.get("COURSE_RECORD") == "1" and not quick:
        record.write(topic.slug, rows, ceil, extra)
    plots = {f"{topic.slug}_vs_model.png": lambda rs, c: plot_rows(rs, c, f"{topic.title}, measured vs model"),
             **topic.plots}  # a topic's own plot under the same name replaces the common one
    for name, fn in plots.items():
        fig = attempt(f"plot {name}", lambda fn=fn: fn(rows, ceil), failures, None)
        if fig is not None:
            fig.savefig(out_dir / topic.slug / name, dpi=110)
    return target


def run(topic: Topic, out_dir: Path, quick: bool = False, answers: Answers | None = None, grading=None) -> dict:
    """Check, measure, compare with the model, record, plot; ok=False with every reason on any failed check,
    contradicted claim or model outside its band. `answers` (Answers): the exercise's known answers, checked and
    timed beside the library's kernels; `grading(rows, ceilings, device)` -> (facts for the record, failures): what
    the grader holds the timed answers to (autograder.benchmarks: the bars, the course solution's margin)."""
    from .device import cpu_mode_reason, gpu, is_hopper

    out_dir = Path(out_dir)
    if not is_hopper():
        return {"ok": False, "failures": [f"needs an sm_90 GPU: {cpu_mode_reason()}"], "rows": []}
    (out_dir / topic.slug).mkdir(parents=True, exist_ok=True)
    with provided(topic.slug, answers):
        failures: list[str] = []
        checked = attempt("check", lambda: with_quick(topic.check, quick), failures, [])
        check_failures, check_evidence = checked if isinstance(checked, tuple) else (checked, {})
        failures += check_failures
        if failures and not topic.keep_going:
            return {"ok": False, "failures": failures, "rows": []}
        rows, ceil, evidence = _measured_run(topic, quick, failures)
    facts = _model_facts(topic, rows, ceil, failures)
    failures += [f"{r['kernel']}: {r['wrong_launches']} timed launch(es) wrong" for r in rows
                 if r.get("wrong_launches")]
    failures += attempt("claims", lambda: topic.claims(rows, ceil), failures, []) if rows else []
    graded, graded_failures = attempt("grading", lambda: grading(rows, ceil, (gpu() or {}).get("name")), failures,
                                      ({}, [])) if grading else ({}, [])
    failures += graded_failures
    if not rows:
        failures.append("nothing was measured (see the failures above)")
    checked = {"failures": check_failures, "evidence": check_evidence}
    extra = {**facts, "quick": quick, **graded, **(evidence[0] if evidence else {}),
             **({"checks": check_evidence} if check_evidence else {}),
             **(topic.extra(rows, ceil, checked) if topic.extra and rows else {})}
    target = _write(topic, rows, ceil, extra, out_dir, quick, failures)
    return {"ok": not failures, "failures": failures, "rows": rows, "ceilings": ceil, "model_band": facts["model_band"],
            "model_fit": facts.get("model_fit"), **graded, "recorded": str(target) if target else None}


def main(topic: Topic, doc: str | None = None, argv=None, **run_kw) -> None:
    """The command line of a topic's benchmark script, `python -m kernels.<slug>.bench [--out DIR] [--quick]`: the
    library's kernels (`python -m autograder.benchmarks <slug>` runs the same with the exercise's known answers).
    Prints the result and the record's table; exits 1 when the run failed."""
    ap = argparse.ArgumentParser(description=doc)
    ap.add_argument("--out", default="build/gpu")
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args(argv)
    res = run(topic, Path(args.out), args.quick, **run_kw)
    print(json.dumps({k: v for k, v in res.items() if k not in ("rows", "checks")}, indent=1, default=str))
    recorded = Path(res.get("recorded") or "")
    if res.get("recorded") and recorded.is_file():
        print(record.table(json.loads(recorded.read_text()), topic.slug))
    raise SystemExit(0 if res.get("ok") else 1)
