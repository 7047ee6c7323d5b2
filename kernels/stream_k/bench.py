"""Week 3 day 2's benchmark (split-K, the fix-up through the TMA): check and time the day's kernel and cuBLAS, through
the course's scaffold.

    python -m kernels.stream_k.bench --out build/gpu [--quick]

The check: gemm_split_k at one split, at 3, at the most (16) and at the model's pick, with both fix-ups (slots and
reduce-add), against the fp32 product on awkward shapes (one row, a partial tile in M and N, one k-tile, more splits
than k-tiles), the output poisoned with NaN first. The rows: at the decode and prefill shapes of ROWS, every split the
model could pick (model.candidates) timed once (the model's cost beside it as its config), and cuBLAS at each; the
claim over the whole sweep is the rounds' (kernels/stream_k/sweep.py), not these single passes.
"""

from __future__ import annotations

from ..bench import bench
from ..topic import Topic, check_kernels, row
from . import model, workload
from .launch import gemm_split_k, sm_count

TEST_SHAPES = [(1, 256, 64), (64, 384, 200), (100, 1000, 1024), (300, 512, 4096), (257, 8200, 2056)]
RTOL = 4e-3  # ||C - ref|| / ||ref||: the bf16 rounding of C is ~1.7e-3 (tests/test_stream_k.py)
ROWS = [(64, 4096, 4096), (128, 8192, 28672), (512, 6144, 4096), (2048, 8192, 8192)]
RUNS = {"split1": (1, False), "split3": (3, False), "split16": (16, False), "model": (None, False),
        "split3 reduce": (3, True), "model reduce": (None, True)}


def _inputs(shape, seed):
    import torch

    m, n, k = shape
    g = torch.Generator(device="cuda").manual_seed(seed)
    return {"a": torch.randn(m, k, generator=g, device="cuda").bfloat16(),
            "b": torch.randn(n, k, generator=g, device="cuda").bfloat16()}


def check_all() -> list[str]:
    """Every run of RUNS against the fp32 reference on TEST_SHAPES, the output poisoned first (the scaffold's loop)."""
    import torch

    def launch(run, inp, out):
        splits, reduce = RUNS[run]
        gemm_split_k(inp["a"], inp["b"], splits, out=out, reduce=reduce)

    return check_kernels(list(RUNS), TEST_SHAPES, inputs=_inputs,
                         reference=lambda inp: inp["a"].float() @ inp["b"].float().T,
                         output=lambda inp, run: torch.empty(inp["a"].shape[0], inp["b"].shape[0],
                                                            dtype=torch.bfloat16, device="cuda"),
                         launch=launch, check={"rtol": RTOL})


def measure(quick: bool = False):
    shapes = ROWS[:1] if quick else ROWS
    rows = []
    for shape in shapes:
        a, b = workload.make_inputs(shape)
        sms = sm_count(a.device)
        pick = model.best_splits(shape, sms)
        name = workload.shape_name(shape)
        for s in model.candidates(shape):
            res = bench(lambda s=s: gemm_split_k(a, b, s), flops=int(workload.flops(shape)))
            rows.append(row(f"split_k s{s}", name, res, config={"splits": s, "model_pick": s == pick,
                                                               "model_cost": model.cost(shape, s, sms), "sms": sms}))
        rows.append(row("cublas", name, bench(lambda: a @ b.T, flops=int(workload.flops(shape)))))
    return rows, []


TOPIC = Topic(slug="stream_k", title="Week 3 day 2: split-K", check=check_all, measure=measure,
              constants=lambda: {"FILL": model.FILL, "FIXUP": model.FIXUP, "MIN_KTILES": model.MIN_KTILES})
run = TOPIC.run

if __name__ == "__main__":
    TOPIC.main(__doc__)
