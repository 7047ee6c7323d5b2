"""Issue 40's one comparison method, with no GPU: the GEMM parity rounds and the attention overlap rounds time every
side on both inputs (N(0, 1) and the exercise's) in interleaved rounds with balanced positions; their summaries per
data; the claims table's rows per claim and data with each side's top kernel; kernels.bench.kernel_names against a
faked profiler; and make gpu-test's 'claims rounds' step writing a whole record (the GPU work faked)."""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path
from types import SimpleNamespace

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import gpu_claims  # noqa: E402


def _row(name, shape, res, pred, **kw):
    return {"kernel": name, "shape": shape, "tflops": res.tflops, **kw}


def _passes(rows: list[dict], key: str = "goal_shape") -> dict:
    """{(shape, data, round): [rung, ...] in timing order}."""
    out: dict = {}
    for r in rows:
        out.setdefault((r.get(key), r["data"], r["round"]), []).append(r["rung"])
    return out


def _balanced(passes: dict, names) -> None:
    """Per shape and data, each name first, and last, of its round's pass equally often."""
    for group in {(s, d) for s, d, _ in passes}:
        orders = [o for (s, d, _), o in passes.items() if (s, d) == group]
        assert all(sorted(o) == sorted(names) for o in orders)
        for i in (0, -1):
            assert len(set(Counter(o[i] for o in orders)[n] for n in names)) == 1, (group, i)


def _gemm_rounds(monkeypatch, rounds):
    """parity_rounds with the course timer faked: rung 6 2 % ahead of cuBLAS, Triton 3 % and rung 5 5 % behind, every
    run 4 % slower on N(0, 1) than on the exercise's data, a clock that drifts 0.1 % a call."""
    from kernels.gemm import bench

    speed = {"store_warp": 1.02, "cublas": 1.0, "triton": 0.97, "cluster": 0.95}
    seen = []

    def fake(variant, stages, shape, data, pool, clock, reps, seed):
        seen.append(data)
        tf = 700.0 * speed[variant] * (0.96 if data == "normal" else 1.0) / (1 + 0.001 * len(seen))
        return SimpleNamespace(tflops=tf), 1700.0 + 50 * (data == "normal")

    monkeypatch.setattr(bench, "_time_rung", fake)
    monkeypatch.setattr(bench, "make_inputs", lambda shape, seed: None)
    monkeypatch.setattr(bench, "row", _row)
    return bench.parity_rounds(rounds=rounds), seen, speed


def test_gemm_parity_rounds_on_both_datas_balanced_and_summarised_per_data(monkeypatch):
    from kernels.compare import balanced_rounds
    from kernels.gemm import bench

    rounds = balanced_rounds(bench.PARITY)
    assert rounds == 24 and balanced_rounds(["a", "b"]) == 18  # four runs are balanced at 24 rounds, not 18
    rows, seen, speed = _gemm_rounds(monkeypatch, rounds)
    assert {r["data"] for r in rows} == set(bench.ROUND_DATA) == {"normal", "exercise"}
    passes = _passes(rows, "shape")
    assert len(passes) == 2 * rounds and all(len(o) == len(bench.PARITY) for o in passes.values())
    _balanced(passes, bench.PARITY)
    # one data per pass: the runs of a round's ratio were timed back to back on the same data
    assert all(len(set(seen[i:i + 4])) == 1 for i in range(0, len(seen), 4))
    assert seen[0] == "normal" and seen[4] == "exercise" and seen[8] == "exercise"  # datas swapped every other round
    names = {r["kernel"] for r in rows}
    assert {"store_warp (parity round 0)", "store_warp (parity round 0, normal data)"} <= names
    s = bench.parity_summary(rows)
    assert set(s["by_data"]) == {"normal", "exercise"}
    assert s["over_cublas"] == s["by_data"]["exercise"]["over_cublas"] and s["rounds"] == rounds
    assert s["goal_met"] is True and "goal" not in s["by_data"]["normal"]
    for data, d in s["by_data"].items():
        assert d["rounds"] == rounds and d["sm_mhz"]["cublas"] == 1700.0 + 50 * (data == "normal")
        for v, x in d["over_cublas"].items():
            assert x["lo"] - 0.01 <= speed[v] <= x["hi"] + 0.01, (data, v, x)
    # a record of the exercise's data only (the records before both datas): the same summary as before, by_data of one
    ex = bench.parity_summary([r for r in rows if r["data"] == "exercise"])
    assert set(ex["by_data"]) == {"exercise"} and ex["over_cublas"] == s["over_cublas"]


def test_attention_overlap_rounds_on_both_datas_balanced_and_summarised_per_data(monkeypatch):
    from kernels.attention import bench

    true = {"d128": 1.01, "d128 causal": 1.04, "d64": 0.92}
    seen = []

    def fake(variant, stages, shape, data, pool, clock, reps, seed, entry=None):
        seen.append((shape, data))
        tag = next(t for t, s in bench.SHAPES.items() if s == shape)
        base = 600.0 * (0.97 if data == "normal" else 1.0) / (1 + 0.001 * len(seen))
        return SimpleNamespace(tflops=base * (true[tag] if variant == "overlap" else 1.0)), 1800.0

    monkeypatch.setattr(bench, "_time", fake)
    monkeypatch.setattr(bench, "_pool", lambda shape, seed: None)
    monkeypatch.setattr(bench, "row", _row)
    rows = bench.overlap_rounds(rounds=18)
    passes = _passes(rows)
    assert len(passes) == 3 * 2 * 18
    _balanced(passes, bench.ROUND_RUNS)
    assert all(len(set(seen[i:i + 2])) == 1 for i in range(0, len(seen), 2))
    s = bench.rounds_summary(rows)
    assert set(s) == set(true)
    for tag, v in s.items():
        assert set(v["by_data"]) == {"normal", "exercise"}
        assert {k: v[k] for k in ("median", "lo", "hi", "rounds")} == \
            {k: v["by_data"]["exercise"][k] for k in ("median", "lo", "hi", "rounds")}
        for d in v["by_data"].values():
            assert d["rounds"] == 18 and d["lo"] - 0.01 <= true[tag] <= d["hi"] + 0.01
    # the rows of a record before both datas (no `data` key at all): the exercise's, as before
    old = [{k: x for k, x in r.items() if k != "data"} for r in rows if r["data"] == "exercise"]
    assert {t: v["median"] for t, v in bench.rounds_summary(old).items()} == {t: v["median"] for t, v in s.items()}


def _record(monkeypatch):
    """A synthetic rounds record of each topic (both datas, each side's kernels), as the writer leaves it."""
    rows, _, _ = _gemm_rounds(monkeypatch, 24)
    gemm = {"device": "NVIDIA H200", "driver": "test", "date": "2026-12-03", "rows": rows,
            "kernels": {"store_warp": ["gemm_store_warp"], "cublas": ["nvjet_tst_256x128", "splitK_reduce"],
                        "triton": ["matmul_kernel_tma"], "cluster": []}}
    att = [{"kernel": "x", "shape": "s", "tflops": 600.0 * (1.01 if run == "overlap" else 1) * (1 + 0.001 * k),
            "lesson": "rounds", "round": k, "rung": run, "goal_shape": "d128", "data": data, "sm_mhz": 1800.0}
           for k in range(18) for data in ("normal", "exercise") for run in ("overlap", "cudnn")]
    attention = {"device": "NVIDIA H200", "driver": "test", "date": "2026-12-03", "rows": att,
                 "kernels": {"d128": {"overlap": ["attn_overlap_d128"], "cudnn": ["cudnn_generated_fort_native"]}}}
    return gemm, attention


def test_claims_rows_per_claim_and_data_with_each_sides_top_kernel(monkeypatch):
    from kernels import claims

    gemm, attention = _record(monkeypatch)
    rows = claims.doc_claims("gemm", gemm)
    assert [(r["claim"].split(" / ")[0], r["data"]) for r in rows] == \
        [(v, d) for v in ("store_warp", "triton", "cluster") for d in ("exercise", "normal")]
    assert all(r["rounds"] == 24 for r in rows)
    assert rows[0]["kernels"] == {"store_warp": "gemm_store_warp", "cublas": "nvjet_tst_256x128"}
    assert next(r for r in rows if r["claim"].startswith("cluster"))["kernels"] == {"cublas": "nvjet_tst_256x128"}
    att = claims.doc_claims("attention", attention)
    assert [(r["claim"], r["data"]) for r in att] == [("overlap rung / cuDNN, d128", d) for d in ("exercise", "normal")]
    assert att[0]["kernels"] == {"overlap": "attn_overlap_d128", "cudnn": "cudnn_generated_fort_native"}
    # the table over these records: the inputs and the top kernels as columns
    monkeypatch.setattr(claims, "rounds_records", lambda: [("attention", "h200", attention), ("gemm", "h200", gemm)])
    md = claims.claims_markdown().splitlines()
    assert "| inputs |" in md[0] and md[0].endswith("| top kernel, each side |") and len(md) == 2 + 2 + 6
    assert "| N(0,1) |" in md[3] and "overlap `attn_overlap_d128`; cudnn `cudnn_generated_fort_native`" in md[2]


def _fp8_ladder(ratios: dict) -> dict:
    """A kernels.fp8_gemm.rounds.ladder_rounds document with these {candidate: median ratio} over cuBLASLt."""
    return {"shape": [8192, 8192, 8192], "rounds": 24, "baseline": "cublaslt_blockwise", "device": "NVIDIA H200",
            "kernels": {"cublaslt_blockwise": ["nvjet_sm90_qqtst_128x128"], "triton_fp8": [],
                        **{n: [f"fp8_gemm_{n}"] for n in ratios if n != "triton_fp8"}},
            "sm_mhz": {"cublaslt_blockwise": 1500.0, **{n: 1550.0 for n in ratios}, "triton_fp8": None},
            "ratios": {n: {"a": n, "b": "cublaslt_blockwise", "median": m, "lo": m - 0.02, "hi": m + 0.01,
                           "rounds": 24, "says": f"behind: {m:.3f}x (95 % interval ...)"} for n, m in ratios.items()}}


def test_the_fp8_gemm_ladder_rounds_give_a_claim_per_candidate(monkeypatch):
    from kernels import claims
    from kernels.fp8_gemm import rounds as fp8_rounds

    lad = _fp8_ladder({"block_scaled": 0.84, "overlap": 0.987, "triton_fp8": 0.7})
    seen = []
    monkeypatch.setattr(fp8_rounds, "ladder_rounds", lambda shape, rounds: seen.append((shape, rounds)) or lad)
    m = gpu_claims.measure_rounds("fp8_gemm")
    assert seen == [((8192, 8192, 8192), 18)] and gpu_claims.rounds_for("fp8_gemm") == 18
    assert m == {"kernels": lad["kernels"], "rows": [lad], "rounds": 24, "datas": ["exercise"]}
    doc = {"device": "NVIDIA H200", "driver": "580.test", "date": "2026-12-04", **m}
    rows = claims.doc_claims("fp8_gemm", doc)
    assert [r["claim"] for r in rows] == [f"{n} / cuBLASLt block-scaled FP8, 8192x8192x8192"
                                          for n in ("block_scaled", "overlap", "triton_fp8")]
    over = rows[1]
    assert (over["median"], over["lo"], over["hi"], over["says"], over["rounds"]) == (0.987, 0.967, 0.997, "behind", 24)
    assert over["kernels"] == {"overlap": "fp8_gemm_overlap", "cublaslt_blockwise": "nvjet_sm90_qqtst_128x128"}
    assert over["sm_mhz"] == {"overlap": 1550.0, "cublaslt_blockwise": 1500.0} and over["data"] == "exercise"
    assert rows[2]["kernels"] == {"cublaslt_blockwise": "nvjet_sm90_qqtst_128x128"}  # no name, no clock: left out
    assert rows[2]["sm_mhz"] == {"cublaslt_blockwise": 1500.0}


def test_records_before_both_datas_still_give_their_rows_and_the_same_table(monkeypatch):
    """A record from before both datas (the H100 GEMM ladder's parity rounds: exercise's data, no kernel names): one
    row per claim, data "exercise", no kernels; a table of such records alone has no "inputs" column."""
    from kernels import claims
    from kernels.record import load

    old = claims.doc_claims("gemm", load("gemm", "h100"))
    assert old and all(r["data"] == "exercise" and r["kernels"] == {} for r in old)
    monkeypatch.setattr(claims, "claims_table", lambda slug=None: old)
    assert "inputs" not in claims.claims_markdown().splitlines()[0]


def test_kernel_names_ranks_the_profiled_kernels_without_copies_and_the_flush(monkeypatch):
    from torch.autograd import DeviceType

    import kernels.bench as timer

    def ev(name, us, dev=DeviceType.CUDA):
        return SimpleNamespace(name=name, device_type=dev, self_device_time_total=us)

    fill = "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<int>, std::array<char*, 1ul> >"
    trace, calls = [], []
    monkeypatch.setattr(timer, "_flush", lambda: trace.append(ev(fill, 400.0)))

    class FakeProfile:
        def __enter__(self):
            trace.clear()
            return self

        def __exit__(self, *exc):
            self.seen = list(trace)
            return False

        def events(self):
            return self.seen

    def fn():
        calls.append(1)
        trace.extend([ev("aten::mm", 900.0, DeviceType.CPU), ev("Memcpy DtoD (Device -> Device)", 50.0),
                      ev("Memset (Device)", 5.0), ev("nvjet_small", 20.0), ev("nvjet_big", 300.0),
                      ev("nvjet_small", 290.0)])

    assert timer.kernel_names(fn, profile=FakeProfile) == ["nvjet_small", "nvjet_big"]  # 310 us before 300 us
    assert len(calls) == 2  # one warm-up, one profiled call
    assert timer.kernel_names(fn, warmup=0, flush=False, profile=FakeProfile) == ["nvjet_small", "nvjet_big"]
    assert timer.flush_kernel_names(FakeProfile) == [fill]
    assert timer.device_kernels([ev(fill, 1.0), ev("k", 1.0)]) == [fill, "k"]  # ties: first launched first
    assert timer.top([]) is None and timer.top(["a", "b"]) == "a"


def test_the_claims_step_writes_each_record_whole(tmp_path, monkeypatch, fake_claims_step):
    gemm, attention = _record(monkeypatch)
    measured = {"gemm": {"kernels": gemm["kernels"], "rows": gemm["rows"], "rounds": 24},
                "attention": {"kernels": attention["kernels"], "rows": attention["rows"], "rounds": 18}}
    asked, fake = fake_claims_step(measured, "NVIDIA H200")
    cmd = "python3 tools/gpu_check.py --skip traps --slugs gemm attention tma"
    res = gpu_claims.claims_rounds(["tma", "attention", "gemm"], tmp_path / "out", cmd)
    assert res["ok"] and asked == ["gemm", "attention"]
    for slug, doc in (("gemm", gemm), ("attention", attention)):
        out = json.loads((tmp_path / "out" / slug / "rounds_h200.json").read_text())
        assert out == json.loads((tmp_path / "kernels" / slug / "rounds_h200.json").read_text())
        assert {"device", "driver", "torch", "date", "what", "rounds", "datas", "kernels", "rows"} <= set(out)
        assert out["what"] == cmd and out["device"] == "NVIDIA H200" and out["driver"] == "580.test"
        assert out["datas"] == ["normal", "exercise"] and out["rounds"] == measured[slug]["rounds"]
        assert out["kernels"] == doc["kernels"] and out["rows"] == doc["rows"]
        assert res[slug]["claims"] and {c["data"] for c in res[slug]["claims"]} == {"normal", "exercise"}
    monkeypatch.delenv("COURSE_RECORD")
    gpu_claims.claims_rounds(["gemm"], tmp_path / "out2", cmd)
    assert (tmp_path / "out2" / "gemm" / "rounds_h200.json").exists()
    # a topic whose GPU work fails is reported, the other still written
    monkeypatch.setattr(gpu_claims, "measure_rounds", lambda slug, rounds=None: 1 / 0 if slug == "gemm" else fake(slug))
    res = gpu_claims.claims_rounds(["gemm", "attention"], tmp_path / "out3", cmd)
    assert not res["ok"] and "ZeroDivisionError" in res["gemm"]["error"] and res["attention"]["claims"]


def test_the_claims_step_is_wired_into_make_gpu_test():
    text = (ROOT / "tools" / "gpu_check.py").read_text()
    assert 'if "claims" not in args.skip and set(CLAIM_SLUGS + SWEEP_SLUGS) & set(slugs):' in text
    assert 'step("claims rounds", claims_rounds, summary, slugs, out, command)' in text
    assert gpu_claims.rounds_for("gemm") == 24 and gpu_claims.rounds_for("attention") == 18
