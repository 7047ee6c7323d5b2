"""recorded_<gpu>.json: the numbers a topic's benchmark script measured on one GPU (never written by hand).

One file per GPU that ran the topic's benchmark (`kernels/<slug>/recorded_h100.json`, `recorded_h200.json`, ...),
named by `device_tag` of the GPU that wrote it. A notebook shows the record of the GPU it runs on, else the H100's
(the course's reference GPU), else another GPU's, and every table names the record's device (`load`, `table`).

Format (COURSE.md): {"device", "driver", "torch", "triton", "date", "ceilings": {"copy_tbps", "cublas_bf16_tflops"},
"rows": [{"kernel", "shape", "ms", "tbps", "tflops", "fraction_of_ceiling", "model_prediction"}]}; a record taken
outside the course's own runs says where it came from in "provenance".
"""

from __future__ import annotations

import datetime as _dt
import importlib.metadata as md
import json
import re
from pathlib import Path
from . import device

KERNELS = Path(__file__).resolve().parent
REQUIRED_ROW_KEYS = ("kernel", "shape", "ms", "tbps", "tflops", "fraction_of_ceiling", "model_prediction")
DEFAULT_TAG = "h100"  # the course's reference GPU: its record is shown where this GPU has none


def device_tag(name: str | None) -> str:
    """"NVIDIA H100 80GB HBM3" -> "h100", "NVIDIA H200" -> "h200": the record file a run on that GPU writes."""
    m = re.search(r"\b([A-Z]+\d{2,4})\b", name or "")
    return m.group(1).lower() if m else "unknown"


def here() -> str | None:
    """The device tag of the GPU this process runs on ("h100", "h200", ...); None in CPU mode."""
    g = device.gpu()
    return device_tag(g["name"]) if g else None


def path(slug: str, tag: str = DEFAULT_TAG) -> Path:
    return KERNELS / slug / f"recorded_{tag}.json"


def tags(slug: str) -> list[str]:
    """The tags of the GPUs the topic has a record of, sorted ("h100", "h200")."""
    return sorted(p.stem.removeprefix("recorded_") for p in (KERNELS / slug).glob("recorded_*.json"))


def load_all(slug: str) -> dict[str, dict]:
    """Every record of the topic, by GPU tag."""
    return {t: json.loads(path(slug, t).read_text()) for t in tags(slug)}


def rounds_records() -> list[tuple[str, str, dict]]:
    """Every record of interleaved rounds: (slug, GPU tag, document), sorted — each rounds file, and each ladder
    record holding rounds (rows of lesson "parity" or "rounds") of a GPU with no rounds file for that topic."""
    out = {(f.parent.name, f.stem.split("_", 1)[1]): f for f in KERNELS.glob("*/rounds_*.json")}
    for f in KERNELS.glob("*/recorded_*.json"):
        key = (f.parent.name, f.stem.split("_", 1)[1])
        if key not in out and any(r.get("lesson") in ("parity", "rounds") for r in json.loads(f.read_text())["rows"]):
            out[key] = f
    return [(*k, json.loads(out[k].read_text())) for k in sorted(out)]


def load(slug: str, tag: str | None = None) -> dict | None:
    """The record of GPU `tag` if given (None if it has none); else the record of the GPU this process runs on if
    the topic has one, else the H100's, else another GPU's (the first tag in sorted order); None if there is none.
    Its "device" names the GPU its numbers came from: print it beside them (`table` does)."""
    if tag is not None:
        p = path(slug, tag)
        return json.loads(p.read_text()) if p.exists() else None
    have = tags(slug)
    for t in (here(), DEFAULT_TAG, *have):
        if t in have:
            return json.loads(path(slug, t).read_text())
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
        return "(no recorded numbers for this topic yet: `make gpu-test` on a Hopper GPU writes them)"
    lines = [f"{title} recorded on {doc['device']} (driver {doc['driver']}), {doc['date']}; "
             f"copy ceiling {doc['ceilings']['copy_tbps']:.2f} TB/s"]
    mine = here()
    if mine is not None and device_tag(doc["device"]) != mine:
        lines.append(f"(this GPU has no record of its own here: these are the numbers of the {doc['device']})")
    lines.append(f"{'kernel':<28}{'shape':<22}{'ms':>9}{'TB/s':>8}{'TFLOPS':>9}{'of ceil.':>9}{'model':>8}")
    for r in doc["rows"]:
        f = lambda v, p: "-" if v is None else f"{v:.{p}f}"  # noqa: E731
        lines.append(f"{r['kernel']:<28}{r['shape']:<22}{f(r['ms'], 3):>9}{f(r['tbps'], 2):>8}"
                     f"{f(r['tflops'], 1):>9}{f(r['fraction_of_ceiling'], 2):>9}{f(r['model_prediction'], 2):>8}")
    return "\n".join(lines)
