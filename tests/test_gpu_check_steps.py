"""make gpu-test's understanding step (tools/gpu_mutants.understanding_checks) with the GPU measurement faked: one
worker per visible GPU, each answer measured in processes that see only its GPU, a deadline after which answers are
written as not measured, and each topic's file rewritten after every answer (a step cut short keeps what it has)."""

from __future__ import annotations

import json
import re
import sys
import threading
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import gpu_mutants  # noqa: E402

from kernels import cycles as kernel_cycles  # noqa: E402


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


def test_the_cohort_step_measures_every_members_kernels_and_records_them_for_the_sheets(tmp_path, monkeypatch):
    """tools/gpu_mutants.understanding_cohort with the GPU faked: the gpu9 cohort is written as hand-ins, each member's
    attempted kernels of week 1 are measured (the students with no kernel the grader reads — blank, malformed — get
    none), the record keeps each measured dict, and sheets are built from that record with no GPU."""
    import autograder.mutants as mutants
    import autograder.plan as plan
    import autograder.understanding as u
    import autograder.understanding_records as ur
    import kernels.device as device
    from autograder.cohort import GPU9

    (tmp_path / "autograder").mkdir()
    monkeypatch.setattr(gpu_mutants, "ROOT", tmp_path)
    monkeypatch.setattr("autograder.release.ROOT", tmp_path)
    monkeypatch.setenv("COURSE_RECORD", "1")
    monkeypatch.setattr(device, "gpu", lambda: {"name": "NVIDIA H200", "driver": "test"})
    monkeypatch.setattr(plan, "lanes_for", lambda gpus: [plan.Lane("0", {"CUDA_VISIBLE_DEVICES": "0"}, "GPU 0")])
    real_mutate = mutants.mutate

    def fake(slug, src, runs, rounds, progress, env):
        ms = real_mutate(slug, src, None)
        return {"slug": slug, "gpu_s": 1.5, "own": {"outcome": "no observable change"},
                "mutants": [{**m.to_dict(), "outcome": ("hangs", "wrong", "slower")[i % 3], "detail": "d",
                             "slower_pct": 12.0, "interval_pct": [9.0, 15.0], "gpu_s": 0.5}
                            for i, m in enumerate(ms)]}

    monkeypatch.setattr(mutants, "measure_answer", fake)
    res = gpu_mutants.understanding_cohort(tmp_path / "out", "week1", "gpu9")
    rec = json.loads((tmp_path / "autograder" / "recorded_understanding_h200.json").read_text())
    assert res["ok"] and len(rec["students"]) == len(GPU9) and rec["device"] == "NVIDIA H200"
    assert set(rec["measured"]["good"]) == {"naive_loads", "smem_tiling", "ldgsts", "pipeline", "tma"}
    assert "blank" not in rec["measured"] and "malformed" not in rec["measured"]
    assert set(rec["measured"]["tma-wrong-expect-tx"]) == {"tma"}
    assert set(res["gpu_s"]) == {f"{s}/{d}" for s, days in rec["measured"].items() for d in days}
    files = ur.measured_from_cohort_record(tmp_path / "m", "week1")
    cohort, notes = u.read_measured(tmp_path / "m", "week1")
    assert len(files) == sum(len(d) for d in rec["measured"].values()) and set(cohort) == set(rec["measured"])
    assert ur.measured_from_cohort_record(tmp_path / "w2", "week2") == []  # a week-1 record is no week-2 key


def test_the_practice_cells_output_is_read_from_an_executed_notebook():
    """What make gpu-test keeps of an executed notebook's practice cell: the text it displayed, tags gone."""
    import gpu_check

    nb = {"cells": [{"cell_type": "code", "source": ["x = 1"], "outputs": []},
                    {"cell_type": "code", "source": ['what_if = autograder.what_if("tma", "tma_add", TMA_ADD_CU)'],
                     "outputs": [{"output_type": "display_data", "data": {
                         "text/html": "<p>Your kernel, 7 changes, each measured on this GPU (23 s):</p><ol><li>"
                                      "<b>hangs</b> &amp; waits</li></ol>"}}]}]}
    got = gpu_check.practice_output(nb)
    assert got.startswith("Your kernel, 7 changes, each measured on this GPU") and "<" not in got
    assert "hangs & waits" in got  # entities decoded
    assert gpu_check.practice_output({"cells": nb["cells"][:1]}) is None


def test_the_step_list_and_gpu_args_that_run_the_cycles_step_alone():
    """Every step tools/gpu_check.py's main() can skip is named in its SKIPPABLE (the cycles step among them), and
    kernels.cycles.GPU_ARGS (the README's command) skips every one of them but 'cycles'."""
    import gpu_check

    src = (ROOT / "tools" / "gpu_check.py").read_text()
    named = set(re.findall(r'"(\w+)" (?:not )?in args\.skip', src))
    assert named == set(gpu_check.SKIPPABLE)
    skip = kernel_cycles.GPU_ARGS.split("--slugs")[0].split()[1:]
    assert set(skip) == set(gpu_check.SKIPPABLE) - {"cycles"}
    assert kernel_cycles.GPU_ARGS.split("--slugs")[1].split() == list(kernel_cycles.SLUGS)
    assert "kernels/*/cycles_*.json" in (ROOT / "tools" / "gpu_test.sh").read_text()  # packed with the records
