"""A topic's benchmark script, one scaffold for every topic.

A topic declares what is its own, in its bench.py:

    TOPIC = Topic(slug="tma", title="Day 5: TMA", check=check_all, measure=measure,
                  constants=lambda: {"LATENCY_NS": model.LATENCY_NS, ...}, fit=model.fit, claims=claims,
                  plots={"tma_sweep.png": plot_sweep})
    run = TOPIC.run                     # python -m kernels.tma.bench --out build/gpu  (script_main)

- check(quick) -> failures, or (failures, evidence): every kernel against its reference (fresh inputs, awkward
  shapes, poisoned outputs); the evidence (what each check saw) goes into the record and to `extra`;
- measure(quick) -> (rows, problems) or (rows, problems, evidence): the rows (`row()` builds one), each with the
  model's prediction beside it; `evidence` (a dict, e.g. what the known-bad answers did) goes into the record;
- constants() -> the model's fitted constants with their source; fit(rows, ceilings) -> a refit on this run's rows
  (recorded beside the constants, never used to predict: a refit far from them says the model or the machine moved);
- claims(rows, ceilings) -> what the notebook says about these rows that this run contradicts;
- plots: file name -> plot(rows, ceilings), beside the predicted-vs-measured plot every topic gets
  (<slug>_vs_model.png, plot_rows).

What every topic shares lives here: the order (check, measure, compare with the model, check the claims and the
exercise's margin, record, plot), the band (worst |prediction / measurement - 1| over the rows the model covers),
the record (kernels.record: device, driver, date, ceilings), the margin of each exercise's course solution over
its bar (kernels.spec.SOLUTION_MARGIN), and the timing of known answers with the grader's own function.
"""

from __future__ import annotations

import importlib
import os
import traceback
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Callable

from . import record

MODEL_BAND = 0.20  # the course's hard band for every modelled row (goal 0.15)


def _no_claims(rows, ceilings) -> list[str]:
    return []


@dataclass
class Topic:
    slug: str
    title: str  # the plots' title: "Day 5: TMA"
    check: Callable[[bool], list[str] | tuple[list[str], dict]]  # failures, or (failures, evidence)
    measure: Callable[[bool], tuple]  # (rows, problems) or (rows, problems, evidence for the record)
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

    def run(self, out_dir: Path, quick: bool = False) -> dict:
        return run(self, out_dir, quick)

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


def measured(r: dict) -> float | None:
    return r.get("tbps") if r.get("tbps") is not None else r.get("tflops")


def band(rows: list[dict]) -> tuple[float, dict | None]:
    """The worst |prediction / measurement - 1| over the rows the model covers, and that row."""
    covered = [r for r in rows if r.get("model_prediction") is not None and measured(r)]
    if not covered:
        return float("nan"), None
    worst = max(covered, key=lambda r: abs(r["model_prediction"] / measured(r) - 1))
    return abs(worst["model_prediction"] / measured(worst) - 1), worst


# --- known answers of a topic's exercise (the .cu files the grader's tests use, read as data) -------------------

def shipped(slug: str, names) -> list:
    """The names among `names` whose known answer is here: all of them in the course repository, none in a student
    release (which carries no known answer: autograder.release). The benchmarks time what is here."""
    from .known import SUBMISSIONS

    return list(names) if (SUBMISSIONS / slug / "expected.toml").exists() else []


@lru_cache(maxsize=None)
def answer_cubin(slug: str, name: str):
    """The compiled known answer `name` of the topic's exercise (autograder/submissions/<slug>/, read by path)."""
    from .compile import compile_cuda
    from .known import kernel_source

    return compile_cuda(kernel_source(slug, name), name=f"{slug}_{name}.cu")


def exercise_of(slug: str, exercise: str | None = None):
    """(spec exercise, workload module) of the topic's exercise (its only one unless named)."""
    from .spec import load

    exs = load(slug).exercises
    ex = exs[exercise] if exercise else next(iter(exs.values()))
    return ex, importlib.import_module(ex.module)


def run_answer(slug: str, cubin, inputs: dict, out, exercise: str | None = None):
    """Launch a compiled answer with the exercise's fixed launch contract, as the grader does."""
    from .runner import launch_contract

    ex, wl = exercise_of(slug, exercise)
    launch_contract(ex, cubin, wl.launch_args(inputs, out))
    return out


def check_answers(slug: str, names, shapes=None, seed: int = 1, runs: int = 1, exercise: str | None = None,
                  cubins: dict | None = None) -> list[str]:
    """Each named answer on each test shape (the spec's unless given), `runs` fresh draws each, poisoned output,
    the exercise's tolerance. Returns the failures: 'answer shape: message'."""
    import torch

    from .check import compare, poison

    ex, wl = exercise_of(slug, exercise)
    failures = []
    for name in names if cubins else shipped(slug, names):
        cub = (cubins or {}).get(name) or answer_cubin(slug, name)
        for i, shape in enumerate(shapes or ex.test_shapes):
            for k in range(runs):
                inputs = wl.make_inputs(shape, seed + 1000 * i + k, device="cuda")
                ref = wl.reference(inputs)
                out = poison(wl.make_output(inputs))
                run_answer(slug, cub, inputs, out, exercise)
                torch.cuda.synchronize()
                rep = compare(out, ref, **dict(wl.CHECK))
                if not rep.ok:
                    failures.append(f"{ex.name} ({name}) {'x'.join(map(str, shape))}: {rep.message}")
    return failures


def time_answer(slug: str, name: str, *, shape=None, reps: int | None = None, seed: int = 0,
                exercise: str | None = None, cubin=None) -> dict:
    """Time a known answer (or `cubin`) with the grader's own function, kernels.runner.time_exercise: every launch
    verified, the counts drawn from the seed. At the spec's bench shape and repetitions unless given."""
    from dataclasses import replace

    from .runner import time_exercise

    ex, wl = exercise_of(slug, exercise)
    ex = replace(ex, bench_shape=tuple(shape or ex.bench_shape), bench_reps=int(reps or ex.bench_reps))
    return time_exercise(ex, wl, cubin or answer_cubin(slug, name), seed, name)


def answer_row(slug: str, name: str, res: dict, prediction=None, *, kernel: str | None = None, shape: str | None = None,
               exercise: str | None = None, **extra) -> dict:
    """A recorded row for a known answer timed by time_answer (named `kernel`, default "<exercise> (<answer>)"):
    `exercise`, `answer` and whether every timed launch was right are part of it (the margin check reads them)."""
    from .bench import ceilings

    ex, _ = exercise_of(slug, exercise)
    shape = shape or "x".join(map(str, ex.bench_shape))
    out = row(kernel or f"{ex.name} ({name})", shape, res, prediction, exercise=ex.name, answer=name,
               output_ok=res["output_ok"], wrong_launches=res["wrong_launches"], launches=res["launches"],
               timed_by="kernels.runner.time_exercise", **extra)
    _with_fractions([out], ceilings())  # the same process's ceilings (measured once, cached)
    return out


def exercise_margins(slug: str, rows: list[dict], ceilings: dict, device: str | None) -> tuple[dict, list[str]]:
    """For each exercise whose course solution ("correct") was timed: the exercise's baseline measured in this run
    (kernels.runner.exercise_baseline: the copy ceiling, or the vendor library on the exercise's inputs), the
    solution's fraction of it, and its margin over the bar this GPU kind is graded with (kernels.spec.Part.
    fraction_for). `autograder calibrate` turns these into the spec's per-GPU calibration; a solution that could not
    clear SOLUTION_MARGIN over the spec's own fraction on this GPU is reported (the calibration lowers the bar)."""
    from .runner import exercise_baseline
    from .spec import SOLUTION_MARGIN, calibrated_fraction, load

    spec = load(slug)
    out, problems = {}, []
    tag = record.device_tag(device)
    for ex in spec.exercises.values():
        sol = next((r for r in rows if r.get("exercise") == ex.name and r.get("answer") == "correct"), None)
        tp = ex.parts["throughput"]
        if sol is None or measured(sol) is None:
            continue
        value = measured(sol)
        base = attempt(f"{ex.name} baseline", lambda ex=ex: exercise_baseline(ex, ex.workload()), problems, None)
        if not base:
            continue
        fraction, cal, how = tp.fraction_for(tag)
        most = calibrated_fraction(1.0, value, base["value"])  # the largest fraction calibration could give this GPU
        out[ex.name] = {"solution": value, "baseline": base, "solution_fraction": value / base["value"],
                        "spec_fraction": tp.fraction, "fraction_graded_here": fraction, "how": how,
                        "over_bar_here": value / (fraction * base["value"]), "required": SOLUTION_MARGIN}
        if most < CALIBRATION_FLOOR * tp.fraction:
            problems.append(f"{ex.name}: the course solution reached {value / base['value']:.3f}x of its baseline "
                            f"({base['what']}) on this GPU: calibration would have to lower the spec's fraction "
                            f"{tp.fraction} to {most:.3f} (< {CALIBRATION_FLOOR} x it) to keep {SOLUTION_MARGIN}x; "
                            "make the solution faster or state a lower fraction in the spec")
    return out, problems


# Calibration may lower a spec's fraction on a GPU kind (the solution must clear its bar there by SOLUTION_MARGIN),
# but by at most this factor: below it the course solution is far slower than the course says it is on that GPU.
CALIBRATION_FLOOR = 0.90


def held_out_line(name: str, measured_: float, err: float, *, band: float, unit: str, named=(), width: int = 22,
                  fmt: str = ".3f", note: str = "") -> str:
    """One row of a model's held-out report (every topic's `held_out_report` prints these): measured, the model's
    figure (measured x (1 + err)), the error, and — outside `band` — whether the model's FIT names the miss."""
    flag = ""
    if abs(err) > band:
        flag = f"   <- outside +-{band:.0%}" + (": named in model.FIT" if name in named else ": NOT named in model.FIT")
        flag += note
    return (f"  {name:<{width}} measured {measured_:{fmt}}  model {measured_ * (1 + err):{fmt}} {unit} "
            f"({err:+.1%}){flag}")


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
            shown = f"{v:,.4g}" if isinstance(v, (int, float)) and not isinstance(v, bool) else str(v)
            lines.append(f"{k:<{width}}   {shown}")
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
    from .sim import plot_predicted_vs_measured

    tbps = any(r.get("tbps") is not None for r in rows)
    ceiling = None if not ceilings else ceilings.get("copy_tbps" if tbps else "cublas_bf16_tflops")
    return plot_predicted_vs_measured([r for r in rows if measured(r) is not None], title=title,
                                      outer_band=MODEL_BAND, ceiling=ceiling, bar=bar)


def attempt(what: str, fn, failures: list[str], default):
    """One phase of a run: its exception becomes a failure (with its last frames) instead of ending the run."""
    try:
        return fn()
    except Exception as exc:  # noqa: BLE001 - reported, not swallowed: run() returns ok=False
        failures.append(f"{what} raised {type(exc).__name__}: {exc}\n" + "".join(traceback.format_exc(limit=3)))
        return default


def run(topic: Topic, out_dir: Path, quick: bool = False) -> dict:
    """Check, measure, compare with the model, record, plot; ok=False with every reason on any failed check,
    contradicted claim, model outside its band or solution too close to its bar."""
    from .bench import ceilings
    from .device import cpu_mode_reason, gpu, is_hopper

    out_dir = Path(out_dir)
    if not is_hopper():
        return {"ok": False, "failures": [f"needs an sm_90 GPU: {cpu_mode_reason()}"], "rows": []}
    (out_dir / topic.slug).mkdir(parents=True, exist_ok=True)
    failures: list[str] = []
    checked = attempt("check", lambda: topic.check(quick), failures, [])
    check_failures, check_evidence = checked if isinstance(checked, tuple) else (checked, {})
    failures += check_failures
    if failures and not topic.keep_going:
        return {"ok": False, "failures": failures, "rows": []}
    rows, problems, *evidence = attempt("measure", lambda: topic.measure(quick), failures, ([], []))
    failures += problems
    ceil = ceilings()
    _with_fractions(rows, ceil)
    missed = [r for r in rows if f"{r['kernel']} {r['shape']}" in topic.known_misses]
    worst_band, worst = band([r for r in rows if r not in missed])
    fitted = attempt("fit", lambda: topic.fit(rows, ceil["copy_tbps"]), failures, None) if topic.fit and rows \
        else None
    failures += [f"{r['kernel']}: {r['wrong_launches']} timed launch(es) wrong" for r in rows
                 if r.get("wrong_launches")]
    failures += attempt("claims", lambda: topic.claims(rows, ceil), failures, []) if rows else []
    if worst is not None and worst_band > topic.model_band:
        failures.append(f"model off by {worst_band:.1%} (> {topic.model_band:.0%}), worst {worst['kernel']} "
                        f"{worst['shape']}: predicted {worst['model_prediction']:.3f}, measured {measured(worst):.3f}")
    device = (gpu() or {}).get("name")
    margins, margin_problems = exercise_margins(topic.slug, rows, ceil, device)
    failures += margin_problems
    if not rows:
        failures.append("nothing was measured (see the failures above)")
    extra = {"model_constants": topic.constants(), "model_band": worst_band,
             "model_known_misses": {f"{r['kernel']} {r['shape']}": {
                 "why": topic.known_misses[f"{r['kernel']} {r['shape']}"],
                 "error": (r["model_prediction"] / measured(r) - 1) if r.get("model_prediction") and measured(r)
                 else None} for r in missed},
             "model_worst_row": worst["kernel"] if worst else None, "model_fit": fitted, "quick": quick,
             "exercise_margins": margins, **(evidence[0] if evidence else {}),
             **({"checks": check_evidence} if check_evidence else {}),
             **(topic.extra(rows, ceil, {"failures": check_failures, "evidence": check_evidence}) if topic.extra and rows
                else {})}
    target = None
    if rows:
        target = record.write(topic.slug, rows, ceil, extra, out=out_dir / topic.slug / "recorded_h100.json")
        if os.environ.get("COURSE_RECORD") == "1" and not quick:
            record.write(topic.slug, rows, ceil, extra)
        plots = {f"{topic.slug}_vs_model.png": lambda rs, c: plot_rows(rs, c, f"{topic.title}, measured vs model"),
                 **topic.plots}  # a topic's own plot under the same name replaces the common one
        for name, fn in plots.items():
            fig = attempt(f"plot {name}", lambda fn=fn: fn(rows, ceil), failures, None)
            if fig is not None:
                fig.savefig(out_dir / topic.slug / name, dpi=110)
    return {"ok": not failures, "failures": failures, "rows": rows, "ceilings": ceil, "model_band": worst_band,
            "model_fit": fitted, "exercise_margins": margins, "recorded": str(target) if target else None}
