"""Recorded H100 numbers: well-formed, written by the GPU script, and every model within its stated band of them."""

import json
from pathlib import Path

import pytest

from kernels import record

ROOT = Path(__file__).resolve().parent.parent
RECORDED = sorted((ROOT / "kernels").glob("*/recorded_h100.json"))
MODEL_BAND = 0.20  # the course's hard band; its goal is 0.15


@pytest.mark.parametrize("path", RECORDED, ids=[p.parent.name for p in RECORDED])
def test_recorded_numbers_are_complete_and_from_an_h100(path):
    doc = json.loads(path.read_text())
    assert "H100" in doc["device"] and doc["driver"] and doc["date"]
    assert doc["ceilings"]["copy_tbps"] > 1.0
    for row in doc["rows"]:
        for key in record.REQUIRED_ROW_KEYS:
            assert key in row, (path, row.get("kernel"), key)
        assert row["ms"] > 0
        if row["tbps"] is not None:
            # nothing that does the work is faster than the DRAM peak; the fraction is the same run's ceiling
            assert row["tbps"] < 3.35
            assert row["fraction_of_ceiling"] == pytest.approx(row["tbps"] / doc["ceilings"]["copy_tbps"])


@pytest.mark.parametrize("path", RECORDED, ids=[p.parent.name for p in RECORDED])
def test_model_within_band_of_measurement(path):
    doc = json.loads(path.read_text())
    rows = [r for r in doc["rows"] if r.get("model_prediction") is not None]
    assert rows, "no model predictions recorded"
    for r in rows:
        measured = r["tbps"] if r["tbps"] is not None else r["tflops"]
        err = abs(r["model_prediction"] / measured - 1)
        assert err <= MODEL_BAND, f"{path.parent.name}/{r['kernel']}: model {r['model_prediction']:.3f} vs {measured:.3f}"


def test_day1_sixteen_byte_copy_reaches_the_copy_ceiling():
    doc = record.load("naive_loads")
    best = max(r["tbps"] for r in doc["rows"] if r["kernel"] in ("copy_vec16", "copy_grid_stride"))
    assert best >= 0.90 * doc["ceilings"]["copy_tbps"]


def test_this_run_table_names_this_machine(monkeypatch):
    """The reader's own run is printed with this machine's device and driver, never an empty driver."""
    import kernels.device
    from kernels import record

    rows = [{"kernel": "k", "shape": "s", "ms": 1.0, "tbps": 2.0, "tflops": None, "fraction_of_ceiling": 0.66,
             "model_prediction": None}]
    monkeypatch.setattr(kernels.device, "gpu", lambda: {"name": "NVIDIA H100 80GB HBM3", "driver": "580.1"})
    text = record.table(record.this_run(rows, {"copy_tbps": 3.0}), "your run:")
    assert text.splitlines()[0].startswith("your run: recorded on NVIDIA H100 80GB HBM3 (driver 580.1), this run")
    monkeypatch.setattr(kernels.device, "gpu", lambda: None)
    assert "(driver ?)" in record.table(record.this_run(rows, {"copy_tbps": 3.0}))
