"""Every claim against a baseline the records support, in one table: the GEMM's parity rounds (rung 6, Triton and
rung 5 against cuBLAS), the attention overlap rung's rounds against cuDNN, the FP8 GEMM's rungs against cuBLASLt's
block-scaled FP8 (kernels.fp8_gemm.rounds) and week 2 days 1-3's rounds against the D2D copy of the same bytes
(kernels.copy_rounds.copy_summary), each read with its topic's own summary (so the table, the notebooks and the README
agree), each with its GPU, driver and date, one row per claim and input distribution the rounds ran on (the
exercise's data; N(0, 1) where the record has it), and each side's kernel — the longest-running one the profiler saw
— where the record names them ("kernels", written by make gpu-test's 'claims rounds' step).

    python -m kernels.claims [--markdown]      # the README's table is the --markdown output (a test holds it)

The comparison method itself is kernels.compare's; the rounds are kernels/<slug>/rounds_<gpu>.json, or a ladder
record's rows of lesson "parity" / "rounds" (kernels.record.rounds_records).
"""

from __future__ import annotations

from .attention.bench import rounds_summary
from .gemm.bench import parity_summary
from .bench import top
from .copy_rounds import COPY, copy_summary
from .record import rounds_records

DATA_ORDER = ("exercise", "normal")  # the exercise's data first: the rows of records before N(0, 1) rounds
DATA_LABEL = {"exercise": "exercise's", "normal": "N(0,1)"}
COPY_DAYS = ("swizzle", "warp_specialization", "multicast")  # week 2 days 1-3: claims against the D2D copy
BASELINE = {"cublaslt": "cuBLASLt's best candidate", "triton_tuned": "Triton autotuned"}  # kernels.gemm.baselines
FP8_BASELINE = {"cublaslt_blockwise": "cuBLASLt block-scaled FP8"}  # kernels.fp8_gemm.rounds.BASELINE


def _datas(by_data: dict) -> list[str]:
    return sorted(by_data, key=lambda d: (DATA_ORDER.index(d) if d in DATA_ORDER else len(DATA_ORDER), d))


def _row(where: dict, slug: str, claim: str, data: str, x: dict, rounds: int, sm_mhz: dict, kernels: dict) -> dict:
    return {**where, "slug": slug, "claim": claim, "data": data, "rounds": rounds, "median": x["median"],
            "lo": x["lo"], "hi": x["hi"], "says": x["says"].split(":")[0], "sm_mhz": sm_mhz,
            "kernels": {k: n for k, n in kernels.items() if n}}


def doc_claims(slug: str, doc: dict) -> list[dict]:
    """The claims one rounds record supports (module docstring), one row per claim and data: the GPU, driver and date,
    the claim, its data, the rounds, the median ratio, its 95 % interval, what the interval supports, each side's mean
    SM clock where the rounds sampled it and each side's top kernel where the record names them."""
    where = {"device": doc["device"], "driver": doc.get("driver"), "date": doc.get("date")}
    kern = doc.get("kernels") or {}
    out = []
    if slug == "gemm":
        by = parity_summary(doc["rows"]).get("by_data", {})
        shape = next((r["shape"] for r in doc["rows"] if r.get("lesson") == "parity"), None)
        for v in dict.fromkeys(v for d in _datas(by) for v in by[d]["over_cublas"]):
            for data in (d for d in _datas(by) if v in by[d]["over_cublas"]):
                s = by[data]
                out.append(_row(where, slug, f"{v} / cuBLAS, {shape}", data, s["over_cublas"][v], s["rounds"],
                                {k: s["sm_mhz"][k] for k in (v, "cublas") if k in s["sm_mhz"]},
                                {k: top(kern.get(k)) for k in (v, "cublas")}))
        for pair in dict.fromkeys(p for d in _datas(by) for p in by[d].get("vs", {})):  # against the vendor's best
            a, b = pair.split("/")
            for data in (d for d in _datas(by) if pair in by[d].get("vs", {})):
                s = by[data]
                out.append(_row(where, slug, f"{a} / {BASELINE.get(b, b)}, {shape}", data, s["vs"][pair], s["rounds"],
                                {k: s["sm_mhz"][k] for k in (a, b) if k in s["sm_mhz"]},
                                {k: top(kern.get(k)) for k in (a, b)}))
    elif slug == "attention":
        for shape, x in rounds_summary(doc["rows"]).items():
            for data in _datas(x["by_data"]):
                d = x["by_data"][data]
                out.append(_row(where, slug, f"overlap rung / cuDNN, {shape}", data, d, d["rounds"],
                                {k: v for k, v in d["sm_mhz"].items() if v},
                                {k: top(kern.get(shape, {}).get(k)) for k in ("overlap", "cudnn")}))
    elif slug == "fp8_gemm":  # rows: kernels.fp8_gemm.rounds.ladder_rounds documents, one per shape
        for r in doc["rows"]:
            shape, base = "x".join(map(str, r["shape"])), r["baseline"]
            for name, x in r["ratios"].items():
                out.append(_row(where, slug, f"{name} / {FP8_BASELINE.get(base, base)}, {shape}", "exercise", x,
                                x["rounds"], {k: r["sm_mhz"][k] for k in (name, base) if r["sm_mhz"].get(k)},
                                {k: top(kern.get(k)) for k in (name, base)}))
    elif slug in COPY_DAYS:
        for claim, x in copy_summary(doc["rows"]).items():
            by = x["by_data"]
            for rung in dict.fromkeys(v for d in _datas(by) for v in by[d]):
                for data in (d for d in _datas(by) if rung in by[d]):
                    d = by[data][rung]
                    out.append(_row(where, slug, f"{rung} / D2D copy, {x['shape']}", data, d, d["rounds"],
                                    {k: v for k, v in d["sm_mhz"].items() if v},
                                    {k: top(kern.get(claim, {}).get(k)) for k in (rung, COPY)}))
    return out


def claims_table(slug: str | None = None) -> list[dict]:
    """Every claim against a baseline that recorded rounds support (kernels/<slug>/rounds_<gpu>.json), one row each
    (doc_claims). Read with the topic's own summary (the GEMM's parity_summary, attention's rounds_summary, the copy
    days' kernels.copy_rounds.copy_summary), so the table and the notebooks agree."""
    return [r for s, _, doc in rounds_records() if slug is None or s == slug for r in doc_claims(s, doc)]


def claims_markdown(slug: str | None = None) -> str:
    """The recorded claims as a Markdown table (the README's, held to this by a test). The columns of the inputs and
    of each side's top kernel appear once a record holds rounds on N(0, 1) / names its kernels."""
    rows = claims_table(slug)
    data = any(r["data"] != "exercise" for r in rows)
    kern = any(r["kernels"] for r in rows)
    head = ["GPU (driver, date)", "claim"] + ["inputs"] * data + ["rounds", "median", "95 % interval",
                                                                  "the interval says", "mean SM MHz"] + \
        ["top kernel, each side"] * kern
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        clocks = ", ".join(f"{k} {v:.0f}" for k, v in r["sm_mhz"].items())
        cells = [f"{r['device']} ({r['driver']}, {r['date']})", r["claim"]] + \
            [DATA_LABEL.get(r["data"], r["data"])] * data + \
            [str(r["rounds"]), f"{r['median']:.3f}x", f"{r['lo']:.3f}-{r['hi']:.3f}x", r["says"], clocks] + \
            ["; ".join(f"{k} `{n}`" for k, n in r["kernels"].items())] * kern
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def print_claims(rows: list[dict] | str | None = None) -> None:
    """The recorded claims (all, or one topic's: print_claims("gemm")), one line each; each side's top kernel below
    its claim where the record names it."""
    rows = claims_table(rows) if rows is None or isinstance(rows, str) else rows
    w = max([38] + [len(r["claim"]) + 2 for r in rows])  # the claim column: the longest claim fits
    print(f"{'GPU (driver, date)':<48}{'claim':<{w}}{'inputs':<12}{'rounds':>7}{'median':>8}{'95 % interval':>16}  "
          f"{'says':<16}SM MHz")
    for r in rows:
        clocks = ", ".join(f"{k} {v:.0f}" for k, v in r["sm_mhz"].items())
        print(f"{r['device'] + ' (' + str(r['driver']) + ', ' + str(r['date']) + ')':<48}{r['claim']:<{w}}"
              f"{DATA_LABEL.get(r['data'], r['data']):<12}{r['rounds']:>7}{r['median']:>7.3f}x{r['lo']:>9.3f}-"
              f"{r['hi']:.3f}x  {r['says']:<16}{clocks}")
        for k, n in r.get("kernels", {}).items():
            print(f"{'':<48}  {k}: {n}")


if __name__ == "__main__":  # python -m kernels.claims [--markdown]: the recorded claims
    import sys

    if "--markdown" in sys.argv:
        print(claims_markdown())
    else:
        print_claims()
