"""recorded_h100.json: the numbers a topic's benchmark script measured on the H100 (never written by hand).

Format (COURSE.md): {"device", "driver", "torch", "triton", "date", "ceilings": {"copy_tbps", "cublas_bf16_tflops"},
"rows": [{"kernel", "shape", "ms", "tbps", "tflops", "fraction_of_ceiling", "model_prediction"}]}
"""

from __future__ import annotations

import datetime as _dt
import importlib.metadata as md
import json
from pathlib import Path

KERNELS = Path(__file__).resolve().parent
REQUIRED_ROW_KEYS = ("kernel", "shape", "ms", "tbps", "tflops", "fraction_of_ceiling", "model_prediction")


def device_tag(name: str | None) -> str:
    """"NVIDIA H100 80GB HBM3" -> "h100": the file a run may write. Only an H100 run writes recorded_h100.json."""
    import re

    m = re.search(r"\b([A-Z]+\d{2,4})\b", name or "")
    return m.group(1).lower() if m else "unknown"


def path(slug: str, tag: str = "h100") -> Path:
    return KERNELS / slug / f"recorded_{tag}.json"


def load(slug: str, *, any_hopper: bool = False) -> dict | None:
    """The topic's H100 record; with any_hopper, another Hopper GPU's record (recorded_h200.json) when the topic has
    no H100 record yet — its "device" says which GPU it is, and table() prints it."""
    for tag in ("h100", "h200") if any_hopper else ("h100",):
        p = path(slug, tag)
        if p.exists():
            return json.loads(p.read_text())
    return None


def write(slug: str, rows: list[dict], ceilings: dict, extra: dict | None = None, out: Path | None = None) -> Path:
    """Write the topic's recorded numbers (to `out` if given, else next to the code)."""
    from .device import gpu

    g = gpu() or {}
    for r in rows:
        missing = [k for k in REQUIRED_ROW_KEYS if k not in r]
        if missing:
            raise ValueError(f"row {r.get('kernel')} lacks {missing}")

    def ver(d):
        try:
            return md.version(d)
        except md.PackageNotFoundError:
            return None

    doc = {
        "device": g.get("name"), "driver": g.get("driver"), "torch": ver("torch"), "triton": ver("triton"),
        "cuda_core": ver("cuda-core"), "date": _dt.date.today().isoformat(),
        "ceilings": {"copy_tbps": ceilings["copy_tbps"], "cublas_bf16_tflops": ceilings.get("cublas_bf16_tflops")},
        "rows": rows, **(extra or {}),
    }
    tag = device_tag(doc["device"])
    if out is not None:
        target = out.with_name(f"recorded_{tag}.json") if out.name == "recorded_h100.json" else out
    else:
        target = path(slug, tag)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(doc, indent=1) + "\n")
    return target


def this_run(rows: list[dict], ceilings: dict) -> dict:
    """The reader's own run as a record (device and driver of this machine, not written anywhere): for `table`."""
    from .device import gpu

    g = gpu() or {}
    return {"device": g.get("name", "this machine"), "driver": g.get("driver", "?"), "date": "this run",
            "ceilings": ceilings, "rows": rows}


def table(doc: dict | None, title: str = "") -> str:
    """A plain-text table of recorded rows (the notebook prints it beside the reader's own run)."""
    if not doc:
        return "(no recorded H100 numbers yet: run `make gpu-test` on an H100)"
    lines = [f"{title} recorded on {doc['device']} (driver {doc['driver']}), {doc['date']}; "
             f"copy ceiling {doc['ceilings']['copy_tbps']:.2f} TB/s"]
    lines.append(f"{'kernel':<28}{'shape':<22}{'ms':>9}{'TB/s':>8}{'TFLOPS':>9}{'of ceil.':>9}{'model':>8}")
    for r in doc["rows"]:
        f = lambda v, p: "-" if v is None else f"{v:.{p}f}"  # noqa: E731
        lines.append(f"{r['kernel']:<28}{r['shape']:<22}{f(r['ms'], 3):>9}{f(r['tbps'], 2):>8}"
                     f"{f(r['tflops'], 1):>9}{f(r['fraction_of_ceiling'], 2):>9}{f(r['model_prediction'], 2):>8}")
    return "\n".join(lines)
