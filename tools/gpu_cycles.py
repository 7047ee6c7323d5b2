"""make gpu-test's step 'cycles' (tools/gpu_check.py; `--skip cycles` leaves it out): the capstones against their
vendor kernels in SM cycles per launch under Nsight Compute (kernels.cycles: GEMM rung 6 against cuBLAS and
cuBLASLt's best at 8192^3, the attention overlap rung against cuDNN at the bench's shapes), a few interleaved rounds
each, every launch measured by ncu with the clocks left alone (--clock-control none).

Written to OUT/<slug>/cycles_<gpu>.json and, with COURSE_RECORD=1, to kernels/<slug>/cycles_<gpu>.json (what
`python -m kernels.cycles --markdown` and the README's cycles table read).
"""

from __future__ import annotations

import json
import os
import traceback
from pathlib import Path

from kernels import cycles
from kernels.record import device_tag

ROOT = Path(__file__).resolve().parent.parent


def cycles_step(slugs, out: Path, command: str, rounds: int = cycles.ROUNDS) -> dict:
    """For each capstone of kernels.cycles.SLUGS in `slugs`: its record measured (kernels.cycles.measure), written
    (module docstring) and printed. A capstone that fails is reported, the other still runs; a comparison the child
    could not run (cuBLASLt's binding absent, say) stays in the record with its reason and fails nothing."""
    res, ok = {}, True
    for slug in (s for s in cycles.SLUGS if s in slugs):
        try:
            doc = cycles.measure(slug, Path(out) / slug / "ncu_cycles", command, rounds=rounds)
        except Exception as exc:  # noqa: BLE001 - one capstone's failure must not cost the other its record
            traceback.print_exc()
            res[slug], ok = {"error": repr(exc)}, False
            continue
        name = f"cycles_{device_tag(doc['device'])}.json"
        files = [Path(out) / slug / name] + ([ROOT / "kernels" / slug / name]
                                             if os.environ.get("COURSE_RECORD") == "1" else [])
        for f in files:
            f.parent.mkdir(parents=True, exist_ok=True)
            f.write_text(json.dumps(doc, indent=1) + "\n")
        for line in cycles.lines(doc):
            print("  " + line)
        measured = [c for c in doc["comparisons"] if "skipped" not in c]
        ok &= bool(measured)
        res[slug] = {"files": [str(f) for f in files], "lines": cycles.lines(doc)}
    return {"ok": ok, **res}
