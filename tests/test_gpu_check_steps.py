"""make gpu-test's understanding step (tools/gpu_mutants.understanding_checks) with the GPU measurement faked: one
worker per visible GPU, each answer measured in processes that see only its GPU, a deadline after which answers are
written as not measured, and each topic's file rewritten after every answer (a step cut short keeps what it has)."""

from __future__ import annotations

import json
import sys
import threading
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tools"))
import gpu_mutants  # noqa: E402


@pytest.mark.parametrize("visible", ["0,1,2", "4,6"])
def test_each_answer_runs_on_one_gpu_and_the_deadline_is_kept(tmp_path, monkeypatch, visible):
    import autograder.mutants as mutants
    import kernels.device as device

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
    monkeypatch.delenv("COURSE_RECORD", raising=False)
    monkeypatch.setattr(device, "gpu", lambda: {"name": "NVIDIA H200", "driver": "test"})
    seen, lock = [], threading.Lock()

    def fake(slug, src, runs, rounds, env, device, progress):
        with lock:
            seen.append((slug, env["CUDA_VISIBLE_DEVICES"], time.perf_counter()))
        time.sleep(0.2)
        return {"slug": slug, "mutants": [{"key": "k#1", "outcome": "hangs"}], "gpu_s": 0.2}

    monkeypatch.setattr(mutants, "measure_answer", fake)
    gpus = visible.split(",")
    res = gpu_mutants.understanding_checks(tmp_path, ["tma", "gemm", "swizzle"], ["solution", "slow", "assistant"],
                                         3, 8, deadline_s=0.3)
    assert {g for _, g, _ in seen} <= set(gpus) and len({g for _, g, _ in seen}) == len(gpus)
    measured = {k for k in res["rows"]}
    assert len(measured) == len(seen) and len(measured) + len(res["not_measured"]) == 9
    assert res["not_measured"] and not res["ok"]  # 9 answers of 0.2 s on 2-3 GPUs outlast a 0.3 s deadline
    for slug in ("tma", "gemm", "swizzle"):
        doc = json.loads((tmp_path / "mutants" / f"{slug}.json").read_text())
        assert doc["pending"] == 0 and len(doc["answers"]) + len(doc["not_measured"]) == 3
        assert all(a["gpu"] in gpus for a in doc["answers"].values())
