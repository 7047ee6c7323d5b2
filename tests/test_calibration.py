"""Per-GPU calibration of the throughput bars (autograder/calibration.py, autograder/spec.py): every bar is a fraction
of a baseline the grading run measures, calibrated per GPU kind from that GPU's record — never typed."""

import copy
import json
import random
import re
import subprocess
import tomllib
from pathlib import Path

import pytest

from autograder import calibration
from kernels import record
from autograder.spec import SOLUTION_MARGIN, Calibration, Part, SpecError, all_specs, load, parse

ROOT = Path(__file__).resolve().parent.parent


def _cal(gpu, fraction, baseline=3.0, solution=2.9):
    return Calibration(gpu=gpu, fraction=fraction, baseline=baseline, solution=solution, device=f"NVIDIA {gpu}")


def test_fraction_is_the_specs_lowered_only_to_keep_the_solution_above_the_margin():
    for _ in range(200):
        spec_f, base = random.uniform(0.5, 0.95), random.uniform(1, 900)
        sol = base * random.uniform(0.3, 1.0)
        f = calibration.fraction_for(spec_f, sol, base)
        assert f <= spec_f
        assert sol / (f * base) >= SOLUTION_MARGIN - 1e-9
        if f < spec_f:  # lowered: as little as 4 decimals allow
            assert sol / ((f + 2e-4) * base) < SOLUTION_MARGIN


def test_a_gpu_uses_its_own_calibration_else_the_h100s_else_the_specs_fraction():
    part = Part("throughput", "g", 2, copy_fraction=0.9, calibration=(_cal("h100", 0.85), _cal("h200", 0.8)))
    assert part.fraction_for("h200")[0] == 0.8 and "calibrated on NVIDIA h200" in part.fraction_for("h200")[2]
    f, cal, how = part.fraction_for("gh200")
    assert f == 0.85 and cal.gpu == "h100" and "no calibration for this GPU (gh200)" in how
    assert part.bar_on("h200", 4.0) == pytest.approx(3.2)
    bare = Part("throughput", "g", 2, vendor_fraction=0.7)
    assert bare.fraction_for("h100")[0] == 0.7 and "not calibrated" in bare.fraction_for("h100")[2]
    assert bare.baseline_kind == "vendor" and part.baseline_kind == "copy"
    assert bare.bar_on("h100", None) is None


def _data(slug="naive_loads"):
    return tomllib.loads(load(slug).path.read_text())


def test_a_spec_states_a_fraction_never_a_typed_bar():
    for stale, value in (("bar", 2.5), ("reference_value", 2.9), ("calibrated", "2026-11-24"),
                         ("cublas_fraction", 0.8)):
        bad = _data()
        bad["exercises"]["row_bias"]["throughput"][stale] = value
        with pytest.raises(SpecError, match="no longer spec fields"):
            parse(bad)
    bad = _data()
    bad["exercises"]["row_bias"]["throughput"]["vendor_fraction"] = 0.8
    with pytest.raises(SpecError, match="exactly one of copy_fraction / vendor_fraction"):
        parse(bad)
    bad = _data()
    del bad["exercises"]["row_bias"]["throughput"]["calibration"]["h100"]["baseline"]
    with pytest.raises(SpecError, match="missing \\['baseline'\\]"):
        parse(bad)
    bad = _data()
    bad["exercises"]["row_bias"]["roofline"] = 3.35
    with pytest.raises(SpecError, match="roofline is a table"):
        parse(bad)


def test_every_calibration_in_the_specs_is_what_calibrate_computes_from_that_gpus_record():
    """Nobody typed a calibration: each table equals what `autograder calibrate` derives from the record of its GPU,
    and every recorded GPU of a topic has one."""
    for spec in all_specs():
        for tag, doc in record.load_all(spec.slug).items():
            margins = doc.get("exercise_margins") or {}
            # the record predates the exercise (it timed another one, or none: its margins were removed with the
            # rows of an exercise that was redesigned)
            stale = [n for n in spec.exercises if n not in margins]
            for ex_name in stale:
                assert spec.exercises[ex_name].parts["throughput"].calibration_for(tag) is None, (spec.slug, tag)
            if stale and len(stale) == len(spec.exercises):
                continue
            got = calibration.from_record(spec, doc, f"kernels/{spec.slug}/recorded_{tag}.json")
            for ex_name, c in got.items():
                have = spec.exercises[ex_name].parts["throughput"].calibration_for(tag)
                assert have is not None, f"{spec.slug}.{ex_name}: no calibration for {tag} (run autograder calibrate)"
                for key in ("fraction", "baseline", "solution"):
                    assert getattr(have, key) == pytest.approx(getattr(c, key), rel=1e-5), (spec.slug, tag, key)
                assert (have.device, have.date, have.source) == (c.device, c.date, c.source), (spec.slug, tag)


def test_a_vendor_bar_names_its_baseline_and_reads_it_from_an_older_record():
    """A TFLOPS exercise's baseline is the vendor library on the exercise's inputs (the workload's `vendor`); a record
    written before the baseline was kept beside the margins is read from the vendor's row of the same run."""
    checked = []
    for spec in all_specs():
        for ex in spec.exercises.values():
            if ex.parts["throughput"].baseline_kind != "vendor":
                continue
            wl = ex.workload()
            assert callable(wl.vendor) and " on the exercise's inputs" in wl.VENDOR, spec.slug
            doc = copy.deepcopy(record.load(spec.slug, "h100"))
            # no H100 record of the topic yet (week 3 day 1), or one that predates the exercise: not recorded yet
            if not doc or ex.name not in doc.get("exercise_margins", {}):
                assert ex.parts["throughput"].calibration_for("h100") is None, spec.slug
                continue
            checked.append(ex.name)
            measured = doc["exercise_margins"][ex.name].pop("baseline", None)  # as a record written before it
            assert measured is None or measured["what"] == wl.VENDOR, spec.slug
            value, where = calibration.baseline_of(ex, doc)
            name, shape = wl.VENDOR_ROW
            row = next(r for r in doc["rows"] if r["kernel"] == name and r["shape"] == shape)
            assert value == row["tflops"] and name in where
            fresh = copy.deepcopy(doc)
            fresh["exercise_margins"][ex.name]["baseline"] = {"value": 123.0, "what": wl.VENDOR}
            assert calibration.baseline_of(ex, fresh) == (123.0, wl.VENDOR)
            fresh["rows"] = []
            del fresh["exercise_margins"][ex.name]["baseline"]
            with pytest.raises(calibration.CalibrationError, match="no vendor baseline"):
                calibration.baseline_of(ex, fresh)
    assert checked  # at least one vendor exercise has an H100 record to read


def test_calibrate_writes_one_table_per_gpu_and_keeps_every_other_line(tmp_path, monkeypatch):
    """A new GPU kind's record adds its table after the others; calibrating again changes nothing; comments and the
    rest of the spec stay byte for byte; the grader reads the new table back."""
    spec = load("tma")
    path = tmp_path / "tma.toml"
    path.write_text(spec.path.read_text())
    mine = parse(tomllib.loads(path.read_text()), path)
    doc = copy.deepcopy(record.load("tma", "h100"))
    doc["device"], doc["date"] = "NVIDIA GH200 480GB", "2030-01-02"
    doc["exercise_margins"]["tma_add"]["solution"] = 3.5
    doc["ceilings"]["copy_tbps"] = 4.0
    doc["exercise_margins"]["tma_add"]["baseline"] = {"kind": "copy", "what": "D2D copy (torch, 1 GiB)", "value": 4.0}
    before = path.read_text()
    cals = calibration.from_record(mine, doc, "recorded_gh200.json")
    calibration.write(mine, cals)
    after = path.read_text()
    again = parse(tomllib.loads(after), path)
    cal = again.exercises["tma_add"].parts["throughput"].calibration_for("gh200")
    assert cal.fraction == calibration.fraction_for(0.9, 3.5, 4.0) and cal.baseline == 4.0
    assert again.exercises["tma_add"].parts["throughput"].calibration_for("h100") is not None
    block = calibration.render("tma_add", cal, "TB/s")
    assert after.count(block) == 1 and after.replace(block + "\n", "", 1) == before  # only the table was added
    calibration.write(again, cals)
    assert path.read_text() == after  # idempotent
    doc["exercise_margins"]["tma_add"]["solution"] = 3.0  # a slower re-run replaces the table, not a second one
    calibration.write(again, calibration.from_record(again, doc, "recorded_gh200.json"))
    assert path.read_text().count("[exercises.tma_add.throughput.calibration.gh200]") == 1
    assert parse(tomllib.loads(path.read_text()), path).exercises["tma_add"].parts["throughput"].calibration_for(
        "gh200").solution == 3.0


def test_a_record_that_names_no_gpu_or_no_solution_is_refused():
    spec = load("tma")
    doc = copy.deepcopy(record.load("tma", "h100"))
    doc["device"] = None
    with pytest.raises(calibration.CalibrationError, match="names no GPU"):
        calibration.from_record(spec, doc, "x.json")
    doc = copy.deepcopy(record.load("tma", "h100"))
    doc["exercise_margins"] = {}
    with pytest.raises(calibration.CalibrationError, match="no timing of tma_add"):
        calibration.from_record(spec, doc, "x.json")


def test_the_tma_solution_clears_its_h100_bar_by_the_margin_after_calibration():
    """The H100 run of the tma bench timed the solution at 1.076x the bar it had then (0.90 x copy ceiling capped
    at a typed figure): the calibration from that record lowers the fraction just enough."""
    tp = load("tma").exercises["tma_add"].parts["throughput"]
    doc = record.load("tma", "h100")
    sol, base = doc["exercise_margins"]["tma_add"]["solution"], doc["ceilings"]["copy_tbps"]
    assert sol / (tp.fraction * base) < SOLUTION_MARGIN  # the spec's own fraction would be too close on this run
    cal = tp.calibration_for("h100")
    assert cal.fraction < tp.fraction and cal.margin >= SOLUTION_MARGIN


def test_no_typed_cublas_figure_is_left_in_the_course():
    """The bars once came from a typed '741 TFLOPS H100 cuBLAS'; the baseline is measured in the grading run now."""
    files = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    hits = []
    for f in files:
        if f.endswith((".py", ".toml", ".md", ".ipynb", ".cu", ".cuh")) and not f.startswith("tests/") \
                and (ROOT / f).is_file():  # a file the working tree deleted is no longer in the course
            text = (ROOT / f).read_text(errors="replace")
            hits += [f"{f}: {m.group(0)}" for m in re.finditer(r"(?<![\d.])741(?:\.\d)?(?![\d.])\s*(TFLOPS)?", text)
                     if "TFLOPS" in text[max(0, m.start() - 80):m.end() + 40]]
    assert not hits, hits


def test_calibrate_cli_prints_each_gpus_bar_and_writes_nothing_without_write():
    before = load("swizzle").path.read_text()
    p = subprocess.run([str(ROOT / ".venv" / "bin" / "python") if (ROOT / ".venv").exists() else "python", "-m",
                        "autograder.cli", "calibrate", "swizzle"], cwd=ROOT, capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    for tag in record.tags("swizzle"):
        dev = record.load("swizzle", tag)["device"]
        assert f"swizzle.swizzle_transpose on {dev}" in p.stdout and "not written: --write" in p.stdout
    assert load("swizzle").path.read_text() == before
    assert json.loads(json.dumps(calibration.calibrate("swizzle")))  # the dry run's result is plain data
