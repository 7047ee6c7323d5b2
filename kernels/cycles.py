"""The capstones against their vendor kernels in a measure the SM clock does not move: SM cycles per launch, read
with Nsight Compute.

    doc = measure("gemm", workdir)                # on a Hopper GPU with ncu: the record make gpu-test writes
    python -m kernels.cycles --markdown           # the README's table (a test holds it to the records)

The claims (kernels.compare, kernels.claims) time each side in interleaved rounds at whatever clock the GPU runs: a
ratio within a round is fair (both sides saw the same clock), but the time of each side still follows the clock,
which follows power and temperature. The usual remedy, timing both under one locked clock (`ncu --clock-control
base`, `nvidia-smi -lgc`), changes a GPU setting, which the course never does on the machines it runs on (every ncu
call here keeps `--clock-control none`: kernels.ncu). So the comparison is made in what a locked clock would have
held fixed: for each launch ncu reads `sm__cycles_elapsed.max` (the SM cycles from the launch's start to its end),
`gpu__time_duration.sum` (its duration) and `smsp__cycles_elapsed.avg.per_second` (the mean SM clock over it), one
counter pass, each launch serialized and the caches flushed before it (ncu's default cache control). The speed of
the course's kernel relative to the vendor's is the vendor's cycles over the course's, per round, summarised like
every claim (kernels.compare.Ratio.of: median, 95 % bootstrap interval, what it says); the same ratio of durations
and each side's median SM clock are reported beside it. Cycles leave the clock out where a kernel is bound by its
SMs (tensor cores, issue); where it waits on DRAM, whose clock is its own, a faster SM clock spends more cycles
waiting, which is why each side's clock stands next to the ratio.

What is counted: the kernels each side's call launches that match its regex (plan()'s "kernels"), summed over a call.
cuDNN's side (torch SDPA, `attention(..., "cudnn", out=o)`) also copies its result into `o`: that copy is not a
cuDNN kernel and is left out here, though the claims' timed rounds include it.

The profiled process (`python -m kernels.cycles --child <slug>`) builds every comparison's inputs and warms each
side up, then, between cudaProfilerStart and cudaProfilerStop (ncu's `--profile-from-start off`), launches a marker
kernel before each comparison and each side once per round, ROUNDS rounds in kernels.compare.round_orders' order
(`sequence`). The parent (`measure`) splits ncu's launches at the markers, assigns them to rounds and sides by that
same sequence (`pair`) and summarises each comparison (`summarise`). Records: kernels/<slug>/cycles_<gpu>.json
(make gpu-test's step 'cycles': tools/gpu_cycles.py).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import re
import statistics
import subprocess
import sys
from collections import Counter
from pathlib import Path

from . import device, ncu
from .compare import Ratio, round_orders
from .record import KERNELS

ROOT = KERNELS.parent
SLUGS = ("gemm", "attention")
ROUNDS = 6  # each side first and last equally often (2 sides: any multiple of 2, kernels.compare.balanced_rounds)
WARMUP = 2  # calls of each side before the profiled window (compiles, cuDNN's plan, cuBLASLt's pick)
SEED = 1
CYCLES, NS, HZ = "sm__cycles_elapsed.max", "gpu__time_duration.sum", "smsp__cycles_elapsed.avg.per_second"
METRICS = (CYCLES, NS, HZ)  # one counter pass: ncu replays each launch once
MARK = "cycles_mark"  # the marker kernel launched before each comparison
MARK_SOURCE = 'extern "C" __global__ void cycles_mark() {}\n'
GEMM_SHAPE = (8192, 8192, 8192)
GEMM_VENDOR = "nvjet|xmma|cutlass"  # cuBLAS / cuBLASLt kernels at this shape (kernels/gemm/rounds_*.json "kernels")
ATTENTION_VENDOR = "cudnn|xmma"     # cuDNN's SDPA kernels (kernels/attention/rounds_*.json "kernels")
# make gpu-test with every other step skipped: what writes the records (tools/gpu_check.py's step names).
GPU_ARGS = ("--skip traps ranges bench claims counters calibrate known sanitizer notebooks autograde residue "
            "--slugs gemm attention")
ABOUT = {"gemm": "GEMM rung 6 (store_warp) against cuBLAS (torch.matmul) and cuBLASLt's best candidate at 8192^3 on "
                 "the exercise's inputs",
         "attention": "the attention overlap rung's default entry against cuDNN at the bench's shapes "
                      "(kernels.attention.bench.SHAPES) on the exercise's inputs"}


def plan(slug: str) -> list[dict]:
    """The comparisons of a capstone, as data: each {"name", "shape", "course", "vendor" (side labels, a round's
    forward order), "kernels": {side: the regex of its kernels' names}, "run": {side: how the child calls it}}."""
    if slug == "gemm":
        from .gemm.launch import KERNELS as GEMM_KERNELS  # noqa: PLC0415 - imports torch: only where a plan is made

        course = f"^{GEMM_KERNELS.get('store_warp', 'gemm_store_warp')}$"
        shape = "x".join(map(str, GEMM_SHAPE))
        return [{"name": f"store_warp / {label}, {shape}", "shape": list(GEMM_SHAPE), "course": "store_warp",
                 "vendor": vendor, "kernels": {"store_warp": course, vendor: GEMM_VENDOR},
                 "run": {"store_warp": {"variant": "store_warp"}, vendor: {"variant": vendor}}}
                for vendor, label in (("cublas", "cuBLAS"), ("cublaslt", "cuBLASLt's best"))]
    if slug == "attention":
        from .attention.bench import SHAPES  # noqa: PLC0415 - imports torch: only where a plan is made
        from .attention.launch import DEFAULT_OVERLAP, overlap_kernel_name  # noqa: PLC0415 - with it

        out = []
        for tag, shape in SHAPES.items():
            entry = DEFAULT_OVERLAP[shape[3]]
            out.append({"name": f"overlap / cuDNN, {tag}", "shape": list(shape), "course": "overlap",
                        "vendor": "cudnn",
                        "kernels": {"overlap": f"^{overlap_kernel_name(shape[3], entry)}$", "cudnn": ATTENTION_VENDOR},
                        "run": {"overlap": {"variant": "overlap", "config": entry}, "cudnn": {"variant": "cudnn"}}})
        return out
    raise ValueError(f"{slug}: no capstone comparison (one of {SLUGS})")


def kernel_filter(comps: list[dict]) -> str:
    """ncu's --kernel-name for a plan: every side's regex and the marker's."""
    pats = dict.fromkeys(p for c in comps for p in c["kernels"].values())  # alternations of anchored names: no groups
    return "regex:" + "|".join([*pats, f"^{MARK}$"])


def sequence(comps: list[dict], rounds: int = ROUNDS) -> list[tuple]:
    """The profiled window's calls, in order: ("mark", i) before comparison i, then ("call", i, round, side) for each
    side of each round in round_orders' order (course first in round 0)."""
    out: list[tuple] = []
    for i, c in enumerate(comps):
        out.append(("mark", i))
        for r, order in enumerate(round_orders([c["course"], c["vendor"]], rounds)):
            out += [("call", i, r, side) for side in order]
    return out


def pair(comp: dict, launches: list[dict], rounds: int = ROUNDS) -> list[dict]:
    """One comparison's launches (those between its marker and the next) assigned to its rounds and sides: each side
    launches the same number of matching kernels per call (its count over `rounds`), in sequence's order; a launch
    whose name matches no side, or the other side where the sequence wants this one, raises ncu.ProfileError. Per
    round {"round", "order", side: {"cycles", "ns" (sums over the call's kernels), "mhz" (their mean SM clock,
    weighted by duration), "kernels", "ids"}}."""
    sides = [comp["course"], comp["vendor"]]

    def side_of(launch: dict) -> str:
        hit = [s for s in sides if re.search(comp["kernels"][s], launch["kernel"])]
        if len(hit) != 1:
            raise ncu.ProfileError(f"{comp['name']}: launch {launch['id']} ({launch['kernel']}) matches "
                                   f"{hit or 'no side'}")
        return hit[0]

    got = [side_of(x) for x in launches]
    counts = Counter(got)
    per_call = {s: counts[s] // rounds for s in sides}
    if any(counts[s] == 0 or counts[s] % rounds for s in sides):
        raise ncu.ProfileError(f"{comp['name']}: {dict(counts)} launches over {rounds} rounds: not the same number "
                               "per call of each side")
    out, i = [], 0
    for r, order in enumerate(round_orders(sides, rounds)):
        rec: dict = {"round": r, "order": order}
        for s in order:
            chunk, names = launches[i:i + per_call[s]], got[i:i + per_call[s]]
            if any(n != s for n in names):
                raise ncu.ProfileError(f"{comp['name']}: round {r} wants {s} at launch {launches[i]['id']}, ncu saw "
                                       f"{[x['kernel'] for x in chunk]}")
            rec[s] = _call(chunk)
            i += per_call[s]
        out.append(rec)
    return out


def _call(chunk: list[dict]) -> dict:
    ns = sum(x[NS] for x in chunk)
    cycles = sum(x[CYCLES] for x in chunk)
    hz = [(x[HZ], x[NS]) for x in chunk if x.get(HZ)]
    mhz = sum(h * t for h, t in hz) / sum(t for _, t in hz) / 1e6 if hz else cycles / ns * 1e3
    return {"cycles": cycles, "ns": ns, "mhz": mhz, "kernels": [x["kernel"] for x in chunk],
            "ids": [x["id"] for x in chunk]}


def split(comps: list[dict], launches: list[dict]) -> list[list[dict]]:
    """ncu's launches cut at the markers: one list per comparison (a marker launched before each)."""
    parts: list[list[dict]] = []
    for x in launches:
        if x["kernel"] == MARK:
            parts.append([])
        elif not parts:
            raise ncu.ProfileError(f"launch {x['id']} ({x['kernel']}) came before the first marker")
        else:
            parts[-1].append(x)
    if len(parts) != len(comps):
        raise ncu.ProfileError(f"{len(parts)} markers for {len(comps)} comparisons")
    return parts


def summarise(comp: dict, per_round: list[dict]) -> dict:
    """One comparison's rounds (pair) summarised: the course's speed over the vendor's in SM cycles and in ncu's
    duration (vendor / course per round: kernels.compare.Ratio), each side's median SM MHz and kernels."""
    a, b = comp["course"], comp["vendor"]
    cyc = Ratio.of(a, b, [r[b]["cycles"] / r[a]["cycles"] for r in per_round])
    dur = Ratio.of(a, b, [r[b]["ns"] / r[a]["ns"] for r in per_round])
    return {"comparison": comp["name"], "course": a, "vendor": b, "shape": comp["shape"], "rounds": len(per_round),
            "cycles": cyc.to_dict(), "duration": dur.to_dict(),
            "sm_mhz": {s: statistics.median(r[s]["mhz"] for r in per_round) for s in (a, b)},
            "kernels": {s: sorted({k for r in per_round for k in r[s]["kernels"]}) for s in (a, b)},
            "per_round": per_round}


def comparisons(comps: list[dict], launches: list[dict], skipped: dict, rounds: int = ROUNDS) -> list[dict]:
    """Every comparison of a plan from ncu's launches: summarised, or {"comparison", "skipped": why} where the child
    could not run it (its launches then are none)."""
    out = []
    for comp, part in zip(comps, split(comps, launches)):
        if comp["name"] in skipped:
            out.append({"comparison": comp["name"], "course": comp["course"], "vendor": comp["vendor"],
                        "skipped": skipped[comp["name"]]})
        else:
            out.append(summarise(comp, pair(comp, part, rounds)))
    return out


def measure(slug: str, workdir: Path, command: str = "", rounds: int = ROUNDS, timeout_s: float = 600) -> dict:
    """The record of one capstone (module docstring): the child run under ncu, its launches paired and summarised,
    with this GPU, its driver, ncu's version, today's date and the exact command that ran."""
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    comps, status_file = plan(slug), workdir / "child.json"
    status_file.unlink(missing_ok=True)
    cmd = [sys.executable, "-m", "kernels.cycles", "--child", slug, "--rounds", str(rounds), "--status",
           str(status_file)]
    got = ncu.launches(cmd, list(METRICS), kernel=kernel_filter(comps), workdir=workdir, from_start=False,
                       timeout_s=timeout_s, cwd=str(ROOT))
    if not status_file.exists():
        err = workdir / "probe_stderr.txt"
        raise ncu.ProfileError("the profiled process did not finish its rounds: "
                               + (err.read_text(errors="replace")[-1500:] if err.exists() else ""))
    status = json.loads(status_file.read_text())
    g = device.gpu() or {}
    return {"device": g.get("name"), "driver": g.get("driver"), "ncu": _ncu_version(),
            "date": dt.date.today().isoformat(), "what": command,
            "about": f"{ABOUT[slug]}: {rounds} interleaved rounds, each launch under ncu (--clock-control none, "
                     "caches flushed), written by make gpu-test's 'cycles' step",
            "metrics": list(METRICS), "rounds": rounds,
            "comparisons": comparisons(comps, got, status.get("skipped", {}), rounds), "launches": got}


def _ncu_version() -> str | None:
    exe = ncu.find_ncu()
    if exe is None:
        return None
    try:
        p = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return (p.stdout.strip().splitlines() or [None])[-1]


# ---------------------------------------------------------------------------------------------- the profiled child
def _calls(slug: str, comp: dict) -> dict:
    """{side: a call of it} on the exercise's inputs at the comparison's shape, each into an output of its own."""
    import torch  # noqa: PLC0415 - the child only

    shape = tuple(comp["shape"])
    if slug == "gemm":
        from .gemm.launch import RUNGS, gemm  # noqa: PLC0415 - the child only
        from .gemm.workload import make_inputs  # noqa: PLC0415 - the child only

        if "store_warp" not in RUNGS:
            raise LookupError("rung 6 (r6_store_warp.cu) is not in this copy of the course")
        x = make_inputs(shape, SEED)
        c = torch.empty(shape[0], shape[1], dtype=torch.bfloat16, device="cuda")
        calls = {"store_warp": lambda: gemm(x["a"], x["b"], "store_warp", out=c)}
        if comp["vendor"] == "cublas":
            calls["cublas"] = lambda: gemm(x["a"], x["b"], "cublas", out=c)
        else:
            try:
                from .gemm import baselines  # noqa: PLC0415 - may be absent or in flux

                lt = baselines.launcher("cublaslt", shape)
            except (ImportError, AttributeError) as exc:
                raise LookupError(f"cuBLASLt's best is not available here: {type(exc).__name__}: {exc}") from exc
            calls["cublaslt"] = lambda: lt(x)
        return calls
    from .attention.launch import attention, overlap_available  # noqa: PLC0415 - the child only
    from .attention.workload import make_inputs as attention_inputs  # noqa: PLC0415 - the child only

    if not overlap_available():
        raise LookupError("the overlap rung (r2_overlap.cu) is not in this copy of the course")
    x = attention_inputs(shape, SEED)
    o = torch.empty_like(x["q"])

    def call(run: dict):
        return lambda: attention(x["q"], x["k"], x["v"], bool(x["causal"]), run["variant"],
                                 config=run.get("config"), out=o)

    return {side: call(run) for side, run in comp["run"].items()}


def child(slug: str, rounds: int, status: Path) -> None:
    """The profiled process: every comparison's calls built and warmed up, then the window of `sequence`."""
    import torch  # noqa: PLC0415 - the child only

    from .compile import compile_cuda  # noqa: PLC0415 - the child only
    from .launch import launch  # noqa: PLC0415 - the child only

    comps, calls, skipped = plan(slug), [], {}
    mark = compile_cuda(MARK_SOURCE, name="cycles_mark.cu")
    for comp in comps:
        try:
            fns = _calls(slug, comp)
        except LookupError as exc:
            skipped[comp["name"]], fns = str(exc), {}
        for _ in range(WARMUP):
            for fn in fns.values():
                fn()
        calls.append(fns)
    torch.cuda.synchronize()
    torch.cuda.profiler.start()
    for step in sequence(comps, rounds):
        if step[0] == "mark":
            launch(mark, MARK, grid=1, block=32)
        elif calls[step[1]]:
            calls[step[1]][step[3]]()
    torch.cuda.synchronize()
    torch.cuda.profiler.stop()
    Path(status).write_text(json.dumps({"done": True, "skipped": skipped}))


# ---------------------------------------------------------------------------------------------- the records, a table
def records() -> list[tuple[str, str, dict]]:
    """Every cycles record: (slug, GPU tag, document), sorted."""
    return [(f.parent.name, f.stem.split("_", 1)[1], json.loads(f.read_text()))
            for f in sorted(KERNELS.glob("*/cycles_*.json"))]


def _ratio(x: dict) -> str:
    return f"{x['median']:.3f}x ({x['lo']:.3f}-{x['hi']:.3f}x)"


def _says(x: dict) -> str:
    return x["says"].split(":")[0]


def lines(doc: dict) -> list[str]:
    """One line per comparison of a record: what the step prints."""
    out = []
    for c in doc["comparisons"]:
        if "skipped" in c:
            out.append(f"{c['comparison']}: not measured ({c['skipped']})")
            continue
        mhz = ", ".join(f"{s} {m:.0f}" for s, m in c["sm_mhz"].items())
        out.append(f"{c['comparison']}: SM cycles {_ratio(c['cycles'])} {_says(c['cycles'])}; ncu duration "
                   f"{_ratio(c['duration'])} {_says(c['duration'])}; median SM MHz {mhz}; {c['rounds']} rounds")
    return out


NO_RECORD = (f'No cycles record yet: `make gpu-test GPU_ARGS="{GPU_ARGS}"` on a Hopper GPU writes '
             "`kernels/<slug>/cycles_<gpu>.json`.")


def markdown(recs: list[tuple[str, str, dict]] | None = None) -> str:
    """The README's table: one row per comparison of every record (its GPU, driver and date), or one line where none
    exists."""
    recs = records() if recs is None else recs
    if not recs:
        return NO_RECORD
    out = ["| GPU (driver, date) | comparison | rounds | SM cycles, vendor / course | the interval says | "
           "ncu duration, vendor / course | the interval says | median SM MHz under ncu | kernels, each side |",
           "|---|---|---|---|---|---|---|---|---|"]
    for _, _, doc in recs:
        where = f"{doc['device']} ({doc.get('driver')}, {doc.get('date')})"
        for c in doc["comparisons"]:
            if "skipped" in c:
                out.append(f"| {where} | {c['comparison']} | - | not measured: {c['skipped'][:100]} | | | | | |")
                continue
            mhz = ", ".join(f"{s} {m:.0f}" for s, m in c["sm_mhz"].items())
            kern = "; ".join(f"{s} " + ", ".join(f"`{k}`" for k in ks) for s, ks in c["kernels"].items())
            out.append(f"| {where} | {c['comparison']} | {c['rounds']} | {_ratio(c['cycles'])} | "
                       f"{_says(c['cycles'])} | {_ratio(c['duration'])} | {_says(c['duration'])} | {mhz} | {kern} |")
    return "\n".join(out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--markdown", action="store_true", help="the README's table")
    ap.add_argument("--child", choices=SLUGS, help="(the profiled process) run a capstone's comparisons")
    ap.add_argument("--rounds", type=int, default=ROUNDS)
    ap.add_argument("--status", type=Path, help="(with --child) where the child says it finished")
    a = ap.parse_args(argv)
    if a.child:
        child(a.child, a.rounds, a.status or Path("cycles_child.json"))
        return 0
    if a.markdown:
        print(markdown())
        return 0
    for slug, tag, doc in records():
        print(f"{slug} on {doc['device']} ({doc.get('date')}):")
        for ln in lines(doc):
            print("  " + ln)
    if not records():
        print(NO_RECORD)
    return 0


if __name__ == "__main__":
    sys.exit(main())
