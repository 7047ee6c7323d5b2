"""kernels/topic.py, the one bench scaffold: run() on a fake topic (no GPU), the band, rows, the correctness loop,
known answers handed in; the grader's half (autograder.benchmarks): the exercise margin."""

from __future__ import annotations

import json
import random
import re

import pytest

import torch

import kernels.bench
import kernels.device
from autograder import benchmarks
from autograder.spec import SOLUTION_MARGIN, load
from kernels import held_out, topic


class _Res:
    def __init__(self, ms, nbytes=0, flops=0):
        self.ms, self.p20_ms, self.p80_ms = ms, ms * 0.99, ms * 1.01
        self.tbps = nbytes / (ms * 1e-3) / 1e12 if nbytes else None
        self.tflops = flops / (ms * 1e-3) / 1e12 if flops else None
        self.fraction_of_copy = self.tbps / 3.0 if self.tbps else None
        self.fraction_of_matmul = None


class _Pred:
    tbps, bound = 2.0, "dram"


def test_row_from_a_bench_result_and_from_a_harness_timing():
    r = topic.row("k", "n=8", _Res(1.0, nbytes=2_000_000_000), _Pred(), extra_key=3)
    assert r["tbps"] == pytest.approx(2.0) and r["tflops"] is None and r["fraction_of_ceiling"] == pytest.approx(2 / 3)
    assert r["model_prediction"] == 2.0 and r["model_bound"] == "dram" and r["extra_key"] == 3
    timed = {"ms": 0.5, "p20_ms": 0.4, "p80_ms": 0.6, "bytes": 0, "flops": 10**12}
    r = topic.row("g", "8x8", timed, 1.5)
    assert r["tflops"] == pytest.approx(2000.0) and r["tbps"] is None and r["model_prediction"] == 1.5
    for key in ("kernel", "shape", "ms", "tbps", "tflops", "fraction_of_ceiling", "model_prediction"):
        assert key in r


def test_band_is_the_worst_covered_row():
    rows = [{"kernel": "a", "tbps": 2.0, "model_prediction": 2.2}, {"kernel": "b", "tbps": 1.0,
            "model_prediction": 0.7}, {"kernel": "c", "tbps": 1.0, "model_prediction": None}]
    band, worst = topic.band(rows)
    assert worst["kernel"] == "b" and band == pytest.approx(0.3)
    assert topic.band([{"kernel": "c", "tbps": 1.0, "model_prediction": None}])[1] is None


def _fake_gpu(monkeypatch, name="NVIDIA H100 80GB HBM3", copy=3.0):
    monkeypatch.setattr(kernels.device, "is_hopper", lambda: True)
    monkeypatch.setattr(kernels.device, "gpu", lambda: {"name": name, "driver": "580.0"})
    monkeypatch.setattr(kernels.bench, "ceilings", lambda refresh=False: {"copy_tbps": copy,
                                                                          "cublas_bf16_tflops": 800.0})


def _topic(rows, *, check=(), claims=(), band=topic.MODEL_BAND, keep_going=False, slug="tma", evidence=None):
    return topic.Topic(slug=slug, title="Fake", check=lambda quick: list(check),
                       measure=lambda quick: ([dict(r) for r in rows], [], *([evidence] if evidence else [])),
                       constants=lambda: {"C": 1.0},
                       fit=lambda rows, copy: {"C": 1.5}, claims=lambda rows, c: list(claims), model_band=band,
                       keep_going=keep_going)


def _rows(pred_scale=1.0, solution_tbps=None):
    rng = random.Random()
    rows = [{"kernel": f"k{i}", "shape": "n", "ms": 1.0, "p20_ms": 1.0, "p80_ms": 1.0, "tbps": t, "tflops": None,
             "fraction_of_ceiling": None, "model_prediction": t * pred_scale}
            for i, t in enumerate(rng.uniform(1.0, 2.5) for _ in range(4))]
    if solution_tbps:
        rows.append({"kernel": "tma_add correct", "shape": "s", "ms": 1.0, "p20_ms": 1.0, "p80_ms": 1.0,
                     "tbps": solution_tbps, "tflops": None, "fraction_of_ceiling": None, "model_prediction": None,
                     "exercise": "tma_add", "answer": "correct"})
    return rows


def _solution_at(margin, copy=3.0):
    """The solution's TB/s that clears the spec's own fraction of `copy` by `margin`."""
    return load("tma").exercises["tma_add"].parts["throughput"].fraction * copy * margin


def _graded(t, tmp_path, slug="tma"):
    """A run with the grader's half (autograder.benchmarks.grading: the course solution's margin)."""
    return topic.run(t, tmp_path, grading=lambda rows, c, device: benchmarks.grading(slug, rows, c, device))


def test_run_records_plots_and_passes(tmp_path, monkeypatch):
    _fake_gpu(monkeypatch)
    sol = _solution_at(SOLUTION_MARGIN + 0.02)
    res = _graded(_topic(_rows(1.05, solution_tbps=sol), evidence={"known_bad": {"no_sync": [3, 5]}}), tmp_path)
    assert res["ok"], res["failures"]
    doc = json.loads((tmp_path / "tma" / "recorded_h100.json").read_text())
    assert doc["device"] == "NVIDIA H100 80GB HBM3" and doc["ceilings"]["copy_tbps"] == 3.0
    assert doc["model_band"] == pytest.approx(0.05) and doc["model_fit"] == {"C": 1.5}
    assert doc["model_constants"] == {"C": 1.0} and doc["known_bad"] == {"no_sync": [3, 5]}
    m = doc["exercise_margins"]["tma_add"]
    tp = load("tma").exercises["tma_add"].parts["throughput"]
    assert m["solution"] == pytest.approx(sol) and m["baseline"]["value"] == 3.0 and m["baseline"]["kind"] == "copy"
    assert m["fraction_graded_here"] == tp.calibration_for("h100").fraction and "calibrated on" in m["how"]
    assert m["over_bar_here"] == pytest.approx(sol / (tp.calibration_for("h100").fraction * 3.0))
    assert all(r["fraction_of_ceiling"] == pytest.approx(r["tbps"] / 3.0) for r in doc["rows"])
    assert (tmp_path / "tma" / "tma_vs_model.png").stat().st_size > 1000


@pytest.mark.parametrize("case", ["band", "claim", "margin", "check", "wrong_launch"])
def test_run_fails_with_the_reason(tmp_path, monkeypatch, case):
    """'margin': a solution so slow on this GPU that calibration would have to cut the spec's fraction by more than
    CALIBRATION_FLOOR allows."""
    _fake_gpu(monkeypatch)
    rows = _rows(1.30 if case == "band" else 1.0,
                 solution_tbps=_solution_at(SOLUTION_MARGIN * (benchmarks.CALIBRATION_FLOOR - 0.02 if case == "margin"
                                                               else 1.05)))
    if case == "wrong_launch":
        rows[0]["wrong_launches"] = 2
    t = _topic(rows, claims=["a claim broke"] if case == "claim" else (),
               check=["kernel x wrong"] if case == "check" else ())
    res = _graded(t, tmp_path)
    assert not res["ok"]
    text = "\n".join(res["failures"])
    assert {"band": "model off by 30.0%", "claim": "a claim broke", "margin": "make the solution faster",
            "check": "kernel x wrong", "wrong_launch": "2 timed launch(es) wrong"}[case] in text
    if case == "check":  # a failed check stops the run before anything is measured or recorded
        assert res["rows"] == [] and not (tmp_path / "tma" / "recorded_h100.json").exists()


def test_keep_going_measures_and_records_after_a_failed_check(tmp_path, monkeypatch):
    _fake_gpu(monkeypatch)
    res = topic.run(_topic(_rows(), check=["kernel x wrong"], keep_going=True), tmp_path)
    assert not res["ok"] and res["rows"] and (tmp_path / "tma" / "recorded_h100.json").exists()


def test_a_solution_just_under_the_specs_fraction_passes_calibration_lowers_the_bar(tmp_path, monkeypatch):
    """On an H200 (its own copy ceiling) a solution that clears the spec's fraction by less than SOLUTION_MARGIN
    is no failure: calibrating from this record lowers the fraction (within CALIBRATION_FLOOR); the record is named
    by its GPU."""
    from autograder.calibration import from_record

    _fake_gpu(monkeypatch, name="NVIDIA H200", copy=4.2)
    sol = _solution_at(1.01, copy=4.2)
    res = _graded(_topic(_rows(solution_tbps=sol)), tmp_path)
    assert res["ok"], res["failures"]
    path = tmp_path / "tma" / "recorded_h200.json"
    doc = json.loads(path.read_text())
    cal = from_record(load("tma"), doc, path.name)["tma_add"]
    assert cal.gpu == "h200" and cal.baseline == 4.2 and cal.margin >= SOLUTION_MARGIN
    assert cal.fraction < load("tma").exercises["tma_add"].parts["throughput"].fraction


def test_not_hopper_says_why(tmp_path, monkeypatch):
    monkeypatch.setattr(kernels.device, "is_hopper", lambda: False)
    res = topic.run(_topic(_rows()), tmp_path)
    assert not res["ok"] and "sm_90" in res["failures"][0]


def test_every_topic_declares_its_scaffold():
    """Every week-1 topic's bench is a Topic run by the shared scaffold (no hand-written run())."""
    import importlib

    from autograder.spec import all_specs

    for spec in all_specs():
        bench = importlib.import_module(f"kernels.{spec.slug}.bench")
        assert isinstance(bench.TOPIC, topic.Topic) and bench.TOPIC.slug == spec.slug
        assert bench.run == bench.TOPIC.run, spec.slug


def test_check_evidence_reaches_the_record_and_extra(tmp_path, monkeypatch):
    """A check may return (failures, evidence): the evidence is recorded under "checks" and handed to `extra` with
    the check's failures (no module state between check and extra)."""
    _fake_gpu(monkeypatch)
    seen = {"answer_a": [f"shape {random.randint(1, 999)}: ok"]}
    got = {}

    def extra(rows, ceil, checked):
        got.update(checked)
        return {"n_checked": len(checked["evidence"])}

    t = _topic(_rows())
    t.check, t.extra, t.keep_going = (lambda quick: (["kernel y wrong"], seen)), extra, True
    res = topic.run(t, tmp_path)
    assert not res["ok"] and "kernel y wrong" in res["failures"]
    assert got == {"failures": ["kernel y wrong"], "evidence": seen}
    doc = json.loads((tmp_path / "tma" / "recorded_h100.json").read_text())
    assert doc["checks"] == seen and doc["n_checked"] == 1


def test_fit_table_shows_every_constant_row_and_named_miss():
    import random

    from kernels.topic import fit_table

    consts = {f"C{i}": random.uniform(0.1, 5000.0) for i in range(random.randint(1, 6))}
    rows = [f"row {i}" for i in range(random.randint(1, 5))]
    held = [f"held {i}" for i in range(random.randint(1, 5))]
    fit = {"device": "NVIDIA H100 80GB HBM3", "driver": "580.159.04", "date": "2026-11-25", "source": "rec.json",
           "held_out_outside_band": {"h100": {held[0]: 0.137}}}
    text = fit_table(fit, consts, fit_rows=rows, held_out=held)
    assert "NVIDIA H100 80GB HBM3, 580.159.04, 2026-11-25" in text and "rec.json" in text
    for k, v in consts.items():
        assert any(line.startswith(k) and f"{v:,.4g}" in line for line in text.splitlines()), k
    for n in rows + held:
        assert sum(line.rstrip().endswith(n) for line in text.splitlines()) >= 1, n
    assert f"h100: {held[0]} +13.7%" in text and "{" not in text


def _held_out_check(rows, scale):
    """A fake model: predicts scale x the row's measured TB/s (a refit returns {"S": the mean ratio of its fit rows})."""
    names = [r["kernel"] for r in rows]
    fit = {"source": "fake.json", "held_out_outside_band": {"h100": {names[-1]: scale[names[-1]] - 1}}}

    def predict(row, record, constants=None):
        return row["tbps"] * (constants["S"] if constants else scale[row["kernel"]])

    def refit(record):
        return {"S": sum(scale[n] for n in names[:2]) / 2}

    return held_out.HeldOut(fit, tuple(names[:2]), tuple(reversed(names[2:])), band=0.10, predict=predict, unit="TB/s",
                         refit=refit, constants={"S": 1.0}, select=lambda r: True)


def test_held_out_check_errors_report_and_record(tmp_path, monkeypatch):
    """The one held-out mechanism: errors in the declared order, the rows outside the band (named in FIT or not),
    the report's lines, and the record's extra["model"] written by the scaffold (no bench writes its own)."""
    _fake_gpu(monkeypatch)
    rows = _rows()
    scale = {r["kernel"]: 1.0 + random.uniform(-0.05, 0.05) for r in rows}
    scale[rows[-1]["kernel"]] = 1.25  # outside the band, named in FIT
    scale[rows[-2]["kernel"]] = 0.8   # outside the band, not named
    check = _held_out_check(rows, scale)
    record = {"device": "NVIDIA H100 80GB HBM3", "date": "2026-11-25", "rows": rows, "ceilings": {"copy_tbps": 3.0}}
    errs = check.errors(record)
    assert list(errs) == [rows[3]["kernel"], rows[2]["kernel"]]
    assert errs == pytest.approx({n: scale[n] - 1 for n in errs})
    assert check.outside_band(record) == errs  # both outside +-10 %
    text = check.report(record)
    assert text.count("named in model.FIT") == 2 and text.count("NOT named in model.FIT") == 1
    assert "NVIDIA H100 80GB HBM3" in text and "its own fit rows refit: S" in text
    assert all(held_out.held_out_line(n, rows[i]["tbps"], errs[n], band=0.10, unit="TB/s",
                                   named=check.fit["held_out_outside_band"]["h100"]) in text.splitlines()
               for i, n in ((3, rows[3]["kernel"]), (2, rows[2]["kernel"])))
    t = _topic(rows)
    t.held_out, t.fit, t.keep_going = check, None, True
    res = topic.run(t, tmp_path)
    doc = json.loads((tmp_path / "tma" / "recorded_h100.json").read_text())
    m = doc["model"]
    assert "model_fit" not in doc and res["model_fit"] is None
    assert m["fit_rows"] == list(check.fit_rows) and m["held_out_rows"] == list(check.held_out) and m["band"] == 0.10
    assert m["held_out"] == pytest.approx(errs) and m["outside_band"] == pytest.approx(errs)
    assert m["refit"] == pytest.approx(check.refit(record)) and m["fitted_on"] == check.fit
    assert m["refit_held_out"] == pytest.approx({n: check.refit(record)["S"] - 1 for n in errs})


# --- the scaffold's correctness loop (check_kernels), on CPU with fake kernels -----------------------------------
SHAPES = (64, 127)  # one tile-aligned length, one awkward


def _copy_kernel(kind: str):
    """A fake copy "kernel" (CPU) that is right, or wrong in one of the ways the loop must catch."""
    def launch(run, x, out):
        if kind == "right":
            out.copy_(x)
        elif kind == "unwritten_tail":  # never writes the last element: only the poison can show it
            out[:-1] = x[:-1]
        elif kind == "edge_on_awkward":  # right on the aligned length, one wrong element past the last full tile
            out.copy_(x)
            if x.numel() % 64:
                out[-1] += 1.0
        elif kind == "nan":  # a NaN it produced itself: must fail even where a tolerance is given
            out.copy_(x)
            out[3] = float("nan")
        elif kind == "eats_input":  # rewrites its input, then "matches" what it left behind
            x.zero_()
            out.zero_()
        elif kind == "raises":
            raise ValueError("shape not supported")
    return launch


def _loop(kind: str, **kw):
    seeds = []

    def inputs(n, seed):
        seeds.append(seed)
        return torch.randn(n, generator=torch.Generator().manual_seed(seed))

    failures = topic.check_kernels([kind], SHAPES, inputs=inputs, reference=lambda x: x.clone(),
                                   output=lambda x, run: torch.empty_like(x), launch=_copy_kernel(kind),
                                   label=lambda run: f"copy_{run}", **kw)
    return failures, seeds


def test_the_loop_passes_a_right_kernel_on_fresh_inputs_per_shape():
    failures, seeds = _loop("right", check={"exact": True}, seed=7, stride=10, draws=2)
    assert failures == [] and seeds == [7, 8, 17, 18]  # fresh inputs per shape and draw


@pytest.mark.parametrize("kind,shapes", [("unwritten_tail", ["n=64", "n=127"]), ("edge_on_awkward", ["n=127"]),
                                         ("nan", ["n=64", "n=127"]), ("eats_input", ["n=64", "n=127"]),
                                         ("raises", ["n=64", "n=127"])])
def test_the_loop_catches_what_a_wrong_kernel_does(kind, shapes):
    """Unwritten elements (the output is poisoned first), one wrong element on the awkward shape only, a NaN under
    a tolerance, a kernel that rewrites its input (the reference is taken before the launch), a launch that raises
    (a failure, not the end of the loop): each named with its shape."""
    failures, _ = _loop(kind, check={"rtol": 1e-2} if kind == "nan" else {"exact": True})
    assert [f.split(":")[0] for f in failures] == [f"copy_{kind} {s}" for s in shapes], failures
    if kind == "unwritten_tail":
        assert "NaN" in failures[0]
    if kind == "raises":
        assert "ValueError: shape not supported" in failures[0]


def test_the_loop_skips_what_a_rung_is_not_built_for_and_checks_per_run_references():
    seen = []
    failures = topic.check_kernels(
        [1, 2], SHAPES, inputs=lambda n, s: torch.arange(n, dtype=torch.float32), output=lambda x, k: torch.empty_like(x),
        reference_for=lambda k, x: x * k, launch=lambda k, x, out: seen.append((k, x.numel())) or out.copy_(x * k),
        check={"exact": True}, skip=lambda k, n: k == 2 and n % 64)
    assert failures == [] and seen == [(1, 64), (2, 64), (1, 127)]


class _Ex:
    name, kernel, test_shapes, bench_shape = "fake_copy", "fake_copy", ((64,), (127,)), (4096,)
    answer_var = "FAKE_COPY_CU"


class _Wl:
    CHECK = {"exact": True}

    @staticmethod
    def make_inputs(shape, seed, device="cuda"):
        return {"x": torch.randn(shape[0], generator=torch.Generator().manual_seed(seed))}

    @staticmethod
    def reference(inputs):
        return inputs["x"].clone()

    @staticmethod
    def make_output(inputs):
        return torch.empty_like(inputs["x"])

    @staticmethod
    def launch_args(inputs, out):
        return {"grid": 1, "block": 1, "args": (inputs["x"], out)}


def test_known_answers_come_only_from_the_grader(monkeypatch):
    """Without Answers a benchmark checks no known answer (a notebook, a student release); with them, each answer
    runs through the same loop under the exercise's launch contract: the answer wrong at the tile edge is caught on
    the awkward shape only."""
    import kernels.compile
    import kernels.runner

    assert topic.shipped("fake", ["correct"]) == [] and topic.check_answers("fake", ["correct", "edge"]) == []
    monkeypatch.setattr(kernels.compile, "compile_cuda", lambda src, name: src)  # the "cubin" is the source's name

    def launch_contract(ex, cubin, la):
        x, out = la["args"]
        _copy_kernel("right" if cubin == "good.cu" else "edge_on_awkward")(None, x, out)

    monkeypatch.setattr(kernels.runner, "launch_contract", launch_contract)
    answers = topic.Answers({"fake_copy": (_Ex, _Wl)}, {"correct": "good.cu", "edge": "edge.cu"}.__getitem__)
    with topic.provided("fake", answers):
        assert topic.shipped("fake", ["correct"]) == ["correct"]
        assert topic.exercise_of("fake") == (_Ex, _Wl)
        failures = topic.check_answers("fake", ["correct", "edge"], runs=2)
    assert [f.split(":")[0] for f in failures] == ["fake_copy (edge) 127"] * 2, failures
    assert topic.shipped("fake", ["correct"]) == []  # handed in for that block only


def test_the_grader_hands_every_topic_its_answers():
    """autograder.benchmarks.answers: each spec's exercises with their workload modules, every known answer's and
    measured rung's CUDA source by name."""
    from autograder.known import known_answers
    from autograder.spec import all_specs

    for spec in all_specs():
        answers = benchmarks.answers(spec.slug)
        assert list(answers.exercises) == list(spec.exercises)
        for ex, wl in answers.exercises.values():
            assert wl.__name__ == ex.module and callable(wl.make_inputs)
        cu = [ka.name for ka in known_answers(spec.slug) if ka.base or ka.source.endswith(".cu")]
        assert all("__global__" in answers.source(n) for n in cu), spec.slug
    assert "__global__" in benchmarks.answers("pipeline").source("block_scope")
    with pytest.raises(KeyError):
        benchmarks.answers("tma").source("no_such_answer")


def test_a_topic_hands_over_its_own_functions_without_wrappers(tmp_path, monkeypatch):
    """The scaffold calls check and measure with `quick` only where they take it: a check_all(seed=1) is called with
    no argument (never check_all(True), which would be seed=True), a measure may return its rows alone; and no topic
    wraps its check_all in a lambda that only drops `quick`."""
    import importlib
    import inspect as insp

    from autograder.spec import all_specs

    _fake_gpu(monkeypatch)
    calls = []

    def check_all(seed: int = 1) -> list[str]:
        calls.append(("check", seed))
        return []

    def measure(quick: bool = False) -> list[dict]:
        calls.append(("measure", quick))
        return [dict(r) for r in _rows(1.05, solution_tbps=_solution_at(SOLUTION_MARGIN + 0.02))]

    t = _topic([])
    t.check, t.measure = check_all, measure
    res = _graded(t, tmp_path)
    assert res["ok"], res["failures"]
    assert calls == [("check", 1), ("measure", False)]
    assert topic.with_quick(lambda quick: quick, True) is True and topic.with_quick(lambda: "none", True) == "none"
    for spec in all_specs():
        src = insp.getsource(importlib.import_module(f"kernels.{spec.slug}.bench"))
        assert "check=lambda quick: check_all()," not in src, spec.slug
        assert not re.search(r"measure=lambda quick: \(measure\([^\n]*\), \[\]\),", src), spec.slug
