"""Every claim against a baseline the records support, in one table: the GEMM's parity rounds (rung 6, Triton and
rung 5 against cuBLAS) and the attention overlap rung's rounds against cuDNN, each read with its topic's own summary
(so the table, the notebooks and the README agree), each with its GPU, driver and date.

    python -m kernels.claims [--markdown]      # the README's table is the --markdown output (a test holds it)

The comparison method itself is kernels.compare's; the rounds are kernels/<slug>/rounds_<gpu>.json, or a ladder
record's rows of lesson "parity" / "rounds" (kernels.record.rounds_records).
"""

from __future__ import annotations

from .attention.bench import rounds_summary
from .gemm.bench import parity_summary
from .record import rounds_records


def claims_table(slug: str | None = None) -> list[dict]:
    """Every claim against a baseline that recorded rounds support (kernels/<slug>/rounds_<gpu>.json), one row each:
    the GPU, driver and date, the claim, the rounds, the median ratio, its 95 % interval, what the interval supports,
    and each side's mean SM clock where the rounds sampled it. Read with the topic's own summary (the GEMM's
    parity_summary, attention's rounds_summary), so the table and the notebooks agree."""
    out = []
    only = slug
    for slug, tag, doc in rounds_records():
        if only is not None and slug != only:
            continue
        where = {"device": doc["device"], "driver": doc.get("driver"), "date": doc.get("date")}
        if slug == "gemm":
            s = parity_summary(doc["rows"])
            shape = next((r["shape"] for r in doc["rows"] if r.get("lesson") == "parity"), None)
            for v, x in s.get("over_cublas", {}).items():
                out.append({**where, "slug": slug, "claim": f"{v} / cuBLAS, {shape}",
                            "rounds": s["rounds"], "median": x["median"], "lo": x["lo"], "hi": x["hi"],
                            "says": x["says"].split(":")[0],
                            "sm_mhz": {k: s["sm_mhz"][k] for k in (v, "cublas") if k in s["sm_mhz"]}})
        elif slug == "attention":
            for shape, x in rounds_summary(doc["rows"]).items():
                out.append({**where, "slug": slug, "claim": f"overlap rung / cuDNN, {shape}", "rounds": x["rounds"],
                            "median": x["median"], "lo": x["lo"], "hi": x["hi"], "says": x["says"].split(":")[0],
                            "sm_mhz": {k: v for k, v in x["sm_mhz"].items() if v}})
    return out


def claims_markdown(slug: str | None = None) -> str:
    """The recorded claims as a Markdown table (the README's, held to this by a test)."""
    lines = ["| GPU (driver, date) | claim | rounds | median | 95 % interval | the interval says | mean SM MHz |",
             "|---|---|---|---|---|---|---|"]
    for r in claims_table(slug):
        clocks = ", ".join(f"{k} {v:.0f}" for k, v in r["sm_mhz"].items())
        lines.append(f"| {r['device']} ({r['driver']}, {r['date']}) | {r['claim']} | {r['rounds']} | "
                     f"{r['median']:.3f}x | {r['lo']:.3f}-{r['hi']:.3f}x | {r['says']} | {clocks} |")
    return "\n".join(lines)


def print_claims(rows: list[dict] | str | None = None) -> None:
    """The recorded claims (all, or one topic's: print_claims("gemm")), one line each."""
    rows = claims_table(rows) if rows is None or isinstance(rows, str) else rows
    print(f"{'GPU (driver, date)':<48}{'claim':<38}{'rounds':>7}{'median':>8}{'95 % interval':>16}  "
          f"{'says':<16}SM MHz")
    for r in rows:
        clocks = ", ".join(f"{k} {v:.0f}" for k, v in r["sm_mhz"].items())
        print(f"{r['device'] + ' (' + str(r['driver']) + ', ' + str(r['date']) + ')':<48}{r['claim']:<38}"
              f"{r['rounds']:>7}{r['median']:>7.3f}x{r['lo']:>9.3f}-{r['hi']:.3f}x  {r['says']:<16}{clocks}")


if __name__ == "__main__":  # python -m kernels.claims [--markdown]: the recorded claims
    import sys

    if "--markdown" in sys.argv:
        print(claims_markdown())
    else:
        print_claims()
