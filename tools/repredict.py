"""Put the current model's predictions beside measurements an H100 run recorded earlier.

    python tools/repredict.py tma build/h100-run9/tma/recorded_h100.json

For a topic whose model was refit after its benchmark last ran on the GPU: the measured fields (device, driver,
date, ceilings, ms, TB/s) are kept exactly as the GPU script wrote them; only `model_prediction` is recomputed by the
topic's model (`predict(rows, ceiling)` or `predict(row, ceiling)`), and `predictions` says when and by what.
The next `make gpu-test` rewrites the whole file from a fresh run.
"""

from __future__ import annotations

import datetime as dt
import importlib
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def repredict(slug: str, measured: Path) -> Path:
    doc = json.loads(Path(measured).read_text())
    if "H100" not in (doc.get("device") or ""):
        raise SystemExit(f"{measured} was not measured on an H100 ({doc.get('device')})")
    model = importlib.import_module(f"kernels.{slug}.model")
    ceiling = doc["ceilings"]["copy_tbps"]
    rows = doc["rows"]
    preds = []
    for r in rows:
        p = None
        for call in (lambda: model.predict([r], ceiling)[0], lambda: model.predict(r, ceiling)):
            try:
                p = call()
                break
            except (TypeError, KeyError, ValueError, AttributeError, IndexError):
                continue  # the other calling convention, or a kernel the model does not cover
        preds.append(p)
    for r, p in zip(rows, preds):
        r["model_prediction"] = None if p is None else float(p)
    doc["predictions"] = {"recomputed": dt.date.today().isoformat(), "by": "tools/repredict.py",
                          "from": str(Path(measured).relative_to(ROOT) if Path(measured).is_absolute() else measured),
                          "note": "measurements as recorded on the H100; model_prediction from the model as refit"}
    out = ROOT / "kernels" / slug / "recorded_h100.json"
    out.write_text(json.dumps(doc, indent=1) + "\n")
    return out


if __name__ == "__main__":
    print(repredict(sys.argv[1], Path(sys.argv[2]).resolve()))
