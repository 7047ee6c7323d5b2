"""Week 2, day 3's benchmark: check every cluster demo (DSMEM rotate by ld.shared::cluster and by st.async,
broadcast_sum with cluster 1 / 2 / 4) and the exercise's known answers, time them with the model's prediction beside
each row, and fit the model (kernels/multicast/model.py: FIT_ROWS fitted, HELD_OUT checked).

    python -m kernels.multicast.bench --out build/gpu     # kernels.topic's scaffold (run = TOPIC.run)

`claim_rounds()` times COPY_CLAIMS against the D2D copy of the same bytes in interleaved rounds (kernels.copy_rounds:
make gpu-test's 'claims rounds' step). Everything here needs an sm_90 GPU except `plot_traffic()` and `claims()`.
"""

from __future__ import annotations

import types
from functools import partial

from ..bench import bench, rotating_inputs
from ..check import compare, poison
from ..copy_rounds import REPS, claim_entry_points, claim_names, claim_runs, common_rounds
from ..topic import (Topic, answer_cubin, answer_row, check_answers, check_kernels, exercise_of, row, shipped,
                     time_answer)
from . import exercise, model
from .launch import ROTATE_VARIANTS, broadcast_sum, rotate, sum_ctas
from .workload import (CLUSTERS, ROTATE_SHAPE, ROTATE_TEST_SIZES, SUM_STAGES, SUM_TEST_TILES, SUM_TILES,
                       make_rotate_input, make_table, rotate_reference, sum_delivered_bytes, sum_reference)
from .counters import measure_all, TARGETS
from ..ncu import available

SLUG = "multicast"
# The exercise's known answers the benchmark times, with the cluster each is launched with.
EXERCISE_ROWS = {"bcast_add correct c2": ("correct", 2, True), "bcast_add correct c4": ("correct", 4, True),
                 "bcast_add per_cta c2": ("per_cta", 2, False)}


def workload_with_cluster(cluster: int):
    """kernels.multicast.exercise with launch_args for another cluster size (the bench's cluster-4 rows)."""
    ns = types.SimpleNamespace(**{k: getattr(exercise, k) for k in dir(exercise) if not k.startswith("__")})
    ns.launch_args = partial(exercise.launch_args, cluster=cluster)
    return ns


def check_all(seed: int = 1) -> list[str]:
    """Every demo against its reference (poisoned outputs, bit-exact) for clusters 1, 2, 4; the exercise's course
    solution (and the per-CTA known answer) on the spec's test shapes, cluster 2 and 4."""
    import torch

    failures = check_kernels(
        [(v, c) for v in ROTATE_VARIANTS for c in CLUSTERS], ROTATE_TEST_SIZES, inputs=make_rotate_input,
        reference_for=lambda run, x: rotate_reference(x, run[1]), check={"exact": True}, seed=seed,
        output=lambda x, run: torch.empty_like(x), launch=lambda run, x, out: rotate(x, run[1], run[0], out=out),
        label=lambda run: f"rotate {run[0]} c{run[1]}")
    for c in CLUSTERS:
        for stages in (SUM_STAGES, 2):
            for i, k in enumerate(SUM_TEST_TILES):
                t = make_table(k, seed + 10 + i)
                out = poison(broadcast_sum(t, c, stages=stages))
                out = broadcast_sum(t, c, stages=stages, out=out)
                torch.cuda.synchronize()
                rep = compare(out, sum_reference(t, out.shape[0]), exact=True)
                if not rep.ok:
                    failures.append(f"broadcast_sum c{c} s{stages} K={k}: {rep.message}")
    failures += check_answers(SLUG, ("correct", "per_cta"), seed=seed + 100)
    # the course solution with cluster 4 (the bench's other row)
    failures += check_answers(SLUG, ("correct",), seed=seed + 300, workload=workload_with_cluster(4),
                              note=" cluster 4")
    return failures


WARM_S = 0.25  # seconds of untimed launches before each broadcast_sum timing (kernels.bench.bench's warm_s)


def measure(reps: int = 20, seed: int = 0) -> list[dict]:
    import torch

    from ..bench import ceilings
    from ..runner import time_exercise

    ceil = ceilings()["copy_tbps"]
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    rows = []
    table = [make_table(SUM_TILES, seed + k) for k in range(2)]
    for c in CLUSTERS:
        n = sum_ctas(sms, c)
        out = torch.empty(n, 64, 64, dtype=torch.float32, device="cuda")
        res = bench(lambda t, c=c, out=out: broadcast_sum(t, c, out=out), rotating_inputs(table),
                    bytes=sum_delivered_bytes(SUM_TILES, n), reps=reps, warm_s=WARM_S)
        cfg = {"kernel": "broadcast_sum", "cluster": c, "multicast": c > 1, "stages": SUM_STAGES}
        tr = model.traffic(model.SUM_TILE_BYTES, SUM_TILES, c, multicast=c > 1)
        rows.append(row(f"broadcast_sum c{c}", f"{SUM_TILES} tiles x {n} CTAs", res,
                        model.predict_config(model.Config(**cfg), ceil, n_sm=sms), config=cfg,
                        l2_bytes=tr["l2_per_cta"] * n, delivered_bytes=tr["delivered_per_cta"] * n,
                        note="TB/s = bytes delivered into shared memory; L2 read = delivered / cluster"))
    xs = [make_rotate_input(ROTATE_SHAPE, seed + k) for k in range(2)]
    for variant in ROTATE_VARIANTS:
        for c in CLUSTERS:
            y = torch.empty_like(xs[0])
            res = bench(lambda x, c=c, v=variant, y=y: rotate(x, c, v, out=y), rotating_inputs(xs),
                        bytes=2 * 4 * ROTATE_SHAPE, reps=reps)
            rows.append(row(f"dsmem_rotate_{variant} c{c}", str(ROTATE_SHAPE), res, None, config=None))
    del table, xs
    for name, (answer, c, mc) in EXERCISE_ROWS.items():
        if not shipped(SLUG, [answer]):
            continue
        ex, _ = exercise_of(SLUG)
        cfg = {"kernel": "bcast_add", "cluster": c, "multicast": mc}
        pred = model.predict_config(model.Config(**cfg), ceil, n_sm=sms)
        if c == exercise.CLUSTER:
            res = time_answer(SLUG, answer, reps=reps, seed=seed)
        else:
            res = time_exercise(ex, workload_with_cluster(c), answer_cubin(SLUG, answer), seed, name)
        rows.append(answer_row(SLUG, answer, res, pred, kernel=name, config=cfg,
                               traffic=model.exercise_traffic(c, mc)))
    torch.cuda.empty_cache()
    return rows


# The day's claims against the D2D copy of the same bytes, in interleaved rounds (kernels.copy_rounds; make gpu-test's
# 'claims rounds' step): claim -> (its rungs, named as the ladder's rows, and their shape). broadcast_sum without
# multicast (cluster 1) and with it (clusters 2 and 4), SUM_TILES tiles into every CTA (the bytes delivered); the
# exercise's course solution (multicast) and its per-CTA answer, whose bar is a fraction of the copy ceiling, timed
# only where the grader hands the known answers in (ANSWER_RUNGS: rung -> answer).
BROADCAST = {f"broadcast_sum c{c}": c for c in CLUSTERS}
EXERCISE_SHAPE = (8192, 8192)  # the exercise's bench shape (the spec's bench_shape: a test holds them equal)
COPY_CLAIMS = {"broadcast_sum": (tuple(BROADCAST), SUM_TILES),
               "bcast_add": (("bcast_add correct c2", "bcast_add per_cta c2"), EXERCISE_SHAPE)}
ANSWER_RUNGS = {name: a for name, (a, c, _) in EXERCISE_ROWS.items() if c == exercise.CLUSTER}
CLAIM_ROUNDS = common_rounds(claim_names(rungs) for rungs, _ in COPY_CLAIMS.values())


def _claim_ctas() -> int:
    """broadcast_sum's CTAs in the claim rounds: 2 per SM in whole clusters of the largest cluster, one count for
    every cluster (the bytes each delivers must be the copy's); on 132 SMs the ladder's count for each."""
    import torch

    return sum_ctas(torch.cuda.get_device_properties(0).multi_processor_count, max(CLUSTERS))


def _broadcast_run(name: str, reps: int, seed: int):
    """(timer, launch) of broadcast_sum at the cluster of `name` (BROADCAST), _claim_ctas() CTAs, a fresh table each
    repetition, WARM_S of untimed launches first (the ladder's timing)."""
    import torch

    c, n = BROADCAST[name], _claim_ctas()
    table = [make_table(SUM_TILES, seed + k) for k in range(2)]
    out = torch.empty(n, 64, 64, dtype=torch.float32, device="cuda")

    def fn(t):
        broadcast_sum(t, c, ctas=n, out=out)

    def timer(data: str, k: int):
        return bench(fn, rotating_inputs(table), bytes=sum_delivered_bytes(SUM_TILES, n), reps=reps, warm_s=WARM_S)

    return timer, lambda: fn(table[0])


def _claim_runs(claim: str, reps: int = REPS, seed: int = 0) -> tuple[dict, int, str]:
    """One claim of COPY_CLAIMS: ({rung: (timer, launch)}, the bytes each moves, the shape's name)."""
    rungs, shape = COPY_CLAIMS[claim]
    if claim == "broadcast_sum":
        n = _claim_ctas()
        nbytes, shape_name = sum_delivered_bytes(SUM_TILES, n), f"{SUM_TILES} tiles x {n} CTAs"
    else:
        nbytes, shape_name = exercise.bytes_moved(shape), None
    return claim_runs(SLUG, rungs, shape, lambda name: _broadcast_run(name, reps, seed), nbytes,
                      answers=ANSWER_RUNGS, reps=reps, seed=seed, shape_name=shape_name)


# _claim_runs looked up at each call (the lambda), so that a test's replacement of it is what runs
claim_kernels, claim_rounds = claim_entry_points(COPY_CLAIMS, lambda *a: _claim_runs(*a), rounds=CLAIM_ROUNDS)


def claims(rows: list[dict], ceilings: dict) -> list[str]:
    """What the notebook says about these rows: every demo and answer timed was right; the held-out rows sit within
    +-10 % of the model refit on this run's FIT_ROWS; the exercise's multicast and per-CTA answers run at the same
    speed (within 5 %: the exercise is DRAM-bound)."""
    bad = []
    by = {r["kernel"]: r for r in rows if r.get("tbps")}
    try:
        f = model.fit(rows, ceilings["copy_tbps"])
        bad += [f"held-out {k}: {e:+.1%} (> {model.HELD_OUT_BAND:.0%})" for k, e in f["held_out"].items()
                if abs(e) > model.HELD_OUT_BAND]
    except ValueError as exc:
        bad.append(str(exc))
    a, b = by.get("bcast_add correct c2"), by.get("bcast_add per_cta c2")
    if a and b and abs(a["tbps"] / b["tbps"] - 1) > 0.05:
        bad.append(f"bcast_add: multicast {a['tbps']:.2f} vs per-CTA {b['tbps']:.2f} TB/s differ by more than 5 %")
    return bad


def plot_traffic(tiles_per_cta: int = SUM_TILES, ctas: int = 264):
    """L2 -> SM bytes and bytes delivered for clusters 1, 2, 4 (the model's traffic, no measurement needed)."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6.5, 3.6), layout="constrained")
    ax = fig.add_subplot()
    tab = model.traffic_table(model.SUM_TILE_BYTES, tiles_per_cta)
    xs = range(len(tab))
    ax.bar([x - 0.2 for x in xs], [t["l2_per_cta"] * ctas / 2**20 for t in tab], 0.4, label="L2 -> SM (read by L2)")
    ax.bar([x + 0.2 for x in xs], [t["delivered_per_cta"] * ctas / 2**20 for t in tab], 0.4,
           label="delivered into shared memory")
    ax.set_xticks(list(xs), [f"cluster {t['cluster']}" + (" (multicast)" if t["multicast"] else "") for t in tab])
    ax.set_ylabel("MiB per launch")
    ax.set_title(f"broadcast_sum: {ctas} CTAs x {tiles_per_cta} tiles of 8 KiB")
    ax.legend(fontsize="small")
    return fig


def plot_masks(masks=((0b0011, 2), (0b1111, 4), (0b0101, 4), (0b0001, 2))):
    """Each ctaMask drawn beside the CTAs of its cluster: a filled box for every rank whose bit is set (the box
    lands in that CTA's shared memory), bit r under rank r."""
    from matplotlib.figure import Figure
    from matplotlib.patches import Rectangle

    fig = Figure(figsize=(7.0, 0.9 * len(masks) + 0.4), layout="constrained")
    ax = fig.add_subplot()
    for row, (mask, cluster) in enumerate(masks):
        y = len(masks) - 1 - row
        ax.text(-0.3, y + 0.4, f"mask {mask:#06b}", ha="right", va="center", family="monospace")
        for r in range(cluster):
            hit = bool(mask >> r & 1)
            ax.add_patch(Rectangle((r * 1.2, y), 1.0, 0.8, facecolor="C0" if hit else "white", edgecolor="k"))
            ax.text(r * 1.2 + 0.5, y + 0.4, f"rank {r}\nbit {r}={int(hit)}", ha="center", va="center",
                    color="white" if hit else "k", fontsize=8)
    ax.set_xlim(-2.6, 4 * 1.2 + 0.2)
    ax.set_ylim(-0.2, len(masks))
    ax.axis("off")
    ax.set_title("ctaMask: bit r set = the multicast box lands in CTA rank r of the cluster")
    return fig


L2_READ_COUNTER = "lts__t_sectors_srcunit_tex_op_read.sum"  # x 32 bytes a sector: what L2 read for the SMs


def l2_reads(record: dict | None) -> dict:
    """The recorded counters' L2 reads of each profiled launch (L2_READ_COUNTER x 32 bytes) beside the traffic
    model's L2 -> SM bytes: name -> {kernel, answer, cluster, multicast, read, model, equal (to the byte)}; {} when
    the record has no counters."""
    counters = (record or {}).get("counters")
    if not isinstance(counters, dict) or "unavailable" in counters:
        return {}
    out = {}
    for name, v in counters.items():
        sectors = (v.get("values") or {}).get(L2_READ_COUNTER)
        if sectors is None or name not in TARGETS:
            continue
        kernel, (what, c) = TARGETS[name]
        read, want = sectors * 32, v["model"]["l2_to_sm"]
        out[name] = {"kernel": kernel, "answer": what, "cluster": c, "read": read, "model": want, "equal": read == want,
                     "multicast": c > 1 and (kernel == "broadcast_sum" or what == "correct")}
    return out


def l2_read_summary(record: dict | None) -> str:
    """What the recorded counters say about L2 reads, from l2_reads: each launch against the model, and each
    multicast kernel's reads at cluster 2 and 4 over its reads at cluster 1 (measured, and the model's ratio)."""
    reads = l2_reads(record)
    if not reads:
        return "no recorded counters"
    lines = [f"{record['device']} ({record['date']}): {L2_READ_COUNTER} x 32 against the model's L2 -> SM bytes"]
    for name, r in reads.items():
        vs = "= the model, to the byte" if r["equal"] else f"{r['read'] / r['model']:.2f}x the model"
        lines.append(f"  {name:<26}{r['read'] / 1e6:9.1f} MB  model {r['model'] / 1e6:7.1f} MB  {vs}"
                     f"{'  (multicast)' if r['multicast'] else ''}")
    for kernel, answer in (("broadcast_sum", "sum"), ("bcast_add", "correct")):
        by = {r["cluster"]: r for r in reads.values() if r["kernel"] == kernel and r["answer"] == answer}
        if 1 not in by:
            continue
        lines.append(f"  {kernel}: " + ", ".join(f"cluster {c} read {by[c]['read'] / by[1]['read']:.2f}x cluster 1 "
                                                 f"(model {by[c]['model'] / by[1]['model']:.2f}x)"
                                                 for c in sorted(by) if c > 1))
    return "\n".join(lines)


def _counters() -> dict:
    """The candidate counters for clusters 1 / 2 / 4 (kernels/multicast/counters.py), beside the model's bytes."""
    ok, why = available()
    return measure_all() if ok else {"unavailable": why}


TOPIC = Topic(
    slug=SLUG, title="Week 2 day 3: clusters and multicast",
    check=check_all,
    measure=lambda quick: (measure(reps=10 if quick else 20), [], {"counters": _counters()}),
    constants=lambda: {"L2_TBPS": model.L2_TBPS, "SUM_T0_NS": model.SUM_T0_NS,
                       "EX_LATENCY_NS": model.EX_LATENCY_NS},
    held_out=model.HELD_OUT_CHECK,  # recorded as extra["model"], with a refit on this run's fit rows
    claims=claims,
    plots={"multicast_traffic.png": lambda rows, c: plot_traffic()},
    keep_going=True)
run = TOPIC.run


if __name__ == "__main__":
    TOPIC.main(__doc__)
