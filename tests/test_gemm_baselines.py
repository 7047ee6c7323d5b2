"""The GEMM capstone's vendor baselines (kernels/gemm/baselines.py), with no GPU: cuBLASLt's best candidate is the
one the course timer found fastest (not the heuristic's first), Triton's autotune configs fit shared memory and
start from the course's fixed tile, and the claims rounds carry rung 6 against both with their intervals."""

from __future__ import annotations

import random
import sys
import types
from types import SimpleNamespace

import pytest

from kernels.gemm import baselines, bench, triton_matmul


def test_triton_choices_fit_shared_memory_and_begin_with_the_course_tile():
    assert baselines.TRITON_CHOICES, "no config fits"
    assert baselines.TRITON_CHOICES[0] == {"bm": triton_matmul.BM, "bn": triton_matmul.BN, "bk": triton_matmul.BK,
                                           "num_stages": triton_matmul.NUM_STAGES,
                                           "num_warps": triton_matmul.NUM_WARPS}
    for c in baselines.TRITON_CHOICES:
        assert baselines.smem_bytes(c["bm"], c["bn"], c["bk"], c["num_stages"]) <= baselines.SMEM_LIMIT
    # a tile that cannot fit is left out, not handed to Triton to fail on the GPU
    assert baselines.smem_bytes(128, 256, 64, 4) > baselines.SMEM_LIMIT
    assert len(baselines.TRITON_CHOICES) == sum(baselines.smem_bytes(*t[:4]) <= baselines.SMEM_LIMIT
                                                for t in baselines.TRITON_TILES)


def test_every_triton_choice_compiles_for_sm90a():
    """Each candidate tile is a kernel Triton can build for the GPU (ahead of time, no GPU): none fails at pick time."""
    import inspect

    from kernels.compile import compile_triton
    from triton.runtime.jit import JITFunction

    for c in baselines.TRITON_CHOICES:
        sig = {"a_desc": f"tensordesc<bf16[{c['bm']}, {c['bk']}]>", "b_desc": f"tensordesc<bf16[{c['bn']}, {c['bk']}]>",
               "c_desc": f"tensordesc<bf16[{c['bm']}, {c['bn']}]>", "M": "i32", "N": "i32", "K": "i32",
               "BM": "constexpr", "BN": "constexpr", "BK": "constexpr", "GROUP_M": "constexpr", "NUM_SMS": "constexpr"}
        art = compile_triton(JITFunction(triton_matmul._matmul_tma), sig,
                             {"BM": c["bm"], "BN": c["bn"], "BK": c["bk"], "GROUP_M": 8, "NUM_SMS": 132},
                             num_warps=c["num_warps"], num_stages=c["num_stages"], capability=90)
        assert art["cubin"] and art["shared"] <= baselines.SMEM_LIMIT, c
    assert "bm" in inspect.signature(triton_matmul.matmul_tma).parameters


class _FakeTensor:
    def __init__(self, ptr):
        self.ptr, self.shape = ptr, (256, 128)
        self.T = self

    def data_ptr(self):
        return self.ptr


def _fake_nvmath(monkeypatch, times_ms):
    """A Matmul whose plan returns one algorithm per entry of `times_ms`; `executed` logs (algorithm, operands)."""
    log = {"executed": [], "reset": 0}

    class Algo:
        def __init__(self, i):
            self.algorithm_id, self.tile, self.stages, self.split_k = 66, (128 + 8 * i, 128), (64, "AUTO"), 1

    class Matmul:
        def __init__(self, a, b):
            self.a = a

        def plan(self, preferences=None):
            assert preferences.limit == baselines.LT_CANDIDATES
            return [Algo(i) for i in range(len(times_ms))]

        def reset_operands(self, a, b):
            log["reset"] += 1
            self.a = a

        def execute(self, algorithm):
            log["executed"].append((algorithm, self.a))
            return "c"

    adv = types.ModuleType("nvmath.linalg.advanced")
    adv.Matmul = Matmul
    adv.MatmulPlanPreferences = lambda limit: SimpleNamespace(limit=limit)
    for name, mod in (("nvmath", types.ModuleType("nvmath")), ("nvmath.linalg", types.ModuleType("nvmath.linalg")),
                      ("nvmath.linalg.advanced", adv)):
        monkeypatch.setitem(sys.modules, name, mod)

    import kernels.bench as timer

    rng = random.Random(7)

    def fake_bench(fn, make_args, reps, flops):
        fn(*make_args())
        algo = log["executed"][-1][0]
        return SimpleNamespace(ms=times_ms[(algo.tile[0] - 128) // 8] * (1 + 0.01 * rng.random()))

    monkeypatch.setattr(timer, "bench", fake_bench)
    return log


@pytest.mark.parametrize("seed", range(4))
def test_lt_best_keeps_the_fastest_measured_candidate_not_the_heuristics_first(monkeypatch, seed):
    rng = random.Random(seed)
    times = [rng.uniform(1.3, 2.1) for _ in range(rng.randint(2, 8))]
    log = _fake_nvmath(monkeypatch, times)
    pool = [{"a": _FakeTensor(10), "b": _FakeTensor(11)}, {"a": _FakeTensor(20), "b": _FakeTensor(21)}]
    refreshed = []
    lt = baselines.LtBest.pick(pool, refreshed.append, flops=1)
    want = min(range(len(times)), key=times.__getitem__)
    assert lt.choice["heuristic_rank"] == want and lt.algo.tile[0] == 128 + 8 * want
    assert [c["tile"] for c in lt.choice["candidates"]] == [[128 + 8 * i, 128] for i in range(len(times))]
    assert all(c["median_ms"] == pytest.approx(t, rel=0.011) for c, t in zip(lt.choice["candidates"], times))
    assert refreshed and all(x in pool for x in refreshed)  # every timing on fresh draws of the pool's buffers
    # the kept algorithm runs, rebinding operands only when the pointers change
    n, before = log["reset"], lt._bound
    lt(pool[1]["a"], pool[1]["b"])
    lt(pool[1]["a"], pool[1]["b"])
    assert log["reset"] == n + (before != (20, 21)) and lt._bound == (20, 21)
    lt(pool[0]["a"], pool[0]["b"])
    assert log["reset"] == n + (before != (20, 21)) + 1
    assert log["executed"][-1] == (lt.algo, pool[0]["a"]) and log["executed"][-2] == (lt.algo, pool[1]["a"])


def test_claims_rounds_carry_rung6_against_the_vendors_best(monkeypatch):
    from kernels.claims import doc_claims
    from kernels.compare import balanced_rounds

    speed = {"store_warp": 1.02, "cublas": 1.0, "triton": 0.97, "cluster": 0.95, "cublaslt": 1.03,
             "triton_tuned": 0.99}
    rng = random.Random(3)

    def fake(variant, stages, shape, data, pool, clock, reps, seed):
        return SimpleNamespace(tflops=700.0 * speed[variant] * (1 + 0.002 * rng.random())), 1700.0

    monkeypatch.setattr(bench, "_time_rung", fake)
    monkeypatch.setattr(bench, "make_inputs", lambda shape, seed: None)
    monkeypatch.setattr(bench, "row", lambda name, shape, res, pred, **kw: {"kernel": name, "shape": shape,
                                                                            "tflops": res.tflops, **kw})
    rounds = balanced_rounds(bench.CLAIM_RUNS)
    assert rounds % (2 * len(bench.CLAIM_RUNS)) == 0
    rows = bench.parity_rounds(rounds=rounds, runs=bench.CLAIM_RUNS)
    s = bench.parity_summary(rows)["by_data"]["exercise"]
    assert set(s["vs"]) == {"store_warp/cublaslt", "store_warp/triton_tuned"}
    lt = s["vs"]["store_warp/cublaslt"]
    assert lt["hi"] < 1 and lt["says"].startswith("behind")  # 1.02 / 1.03: rung 6 behind cuBLASLt's best
    assert s["vs"]["store_warp/triton_tuned"]["says"].startswith("ahead")
    doc = {"device": "NVIDIA H100 80GB HBM3", "driver": "d", "date": "2026-12-02", "rows": rows,
           "kernels": {"store_warp": ["gemm_store_warp"], "cublaslt": ["nvjet_x"], "cublas": ["nvjet_y"]}}
    claims = {(c["claim"], c["data"]): c for c in doc_claims("gemm", doc)}
    c = claims[("store_warp / cuBLASLt's best candidate, " + rows[0]["shape"], "normal")]
    assert c["says"] == "behind" and c["kernels"] == {"store_warp": "gemm_store_warp", "cublaslt": "nvjet_x"}
    assert ("store_warp / Triton autotuned, " + rows[0]["shape"], "exercise") in claims
