"""compute-sanitizer, read: where the tool is, its version, and its output turned into counts and the first message
(`parse_sanitizer`) and a verdict. autograder.hangs runs it on an answer (`sanitize`)."""

from __future__ import annotations

import re
import subprocess
from kernels.paths import cuda_tool


# ------------------------------------------------------------------------------------------- compute-sanitizer
def sanitizer_binary() -> str | None:
    """compute-sanitizer: $COMPUTE_SANITIZER, PATH, the CUDA toolkit's bin/."""
    return cuda_tool("compute-sanitizer", env="COMPUTE_SANITIZER")


_SAN_LINE = re.compile(r"^=========(?P<indent>\s+)(?P<body>.*?)\s*$")


_ERR_SUMMARY = re.compile(r"ERROR SUMMARY: (\d+) errors?")


_RACE_SUMMARY = re.compile(r"RACECHECK SUMMARY: (\d+) hazards? displayed \((\d+) errors?, (\d+) warnings?\)")


_BANNERS = ("COMPUTE-SANITIZER", "ERROR SUMMARY", "RACECHECK SUMMARY", "LEAK SUMMARY")


def _kind(head: str) -> str:
    h = head.lower()
    if "race reported" in h or re.search(r"potential \w+ hazard", h):
        return "race"
    if "barrier error" in h:
        return "barrier"
    if h.startswith("program hit"):
        return "api"
    if "internal sanitizer error" in h:
        return "internal"
    if re.search(r"invalid __\w+__|misaligned|out of bounds|uninitialized|illegal|exception|leak", h):
        return "memory"
    return "note"


def parse_sanitizer(text: str, tool: str) -> dict:
    """compute-sanitizer's output (any tool) as facts: {"summary": seen, "errors" (the tool's own count),
    "warnings", "reports" (records of the device code: races, barrier errors, bad accesses), "api_errors",
    "by_kind", "first" (the first device report with its location), "notes"}. A record is a `========= ` line
    with one space of indent; lines with more indent continue it."""
    records: list[list[str]] = []
    summary, errors, warnings = False, None, 0
    current = None
    for line in text.splitlines():
        m = _SAN_LINE.match(line)
        if not m:
            continue
        body = m.group("body")
        if not body:
            current = None
            continue
        if len(m.group("indent").replace("\t", "    ")) > 1 and current is not None:
            current.append(body.strip())
            continue
        if (s := _RACE_SUMMARY.search(body)) is not None:
            summary, errors, warnings = True, int(s.group(2)), int(s.group(3))
            current = None
            continue
        if (s := _ERR_SUMMARY.search(body)) is not None:
            summary = True
            errors = int(s.group(1)) if tool != "racecheck" or errors is None else errors
            current = None
            continue
        if body.startswith(_BANNERS):
            current = None
            continue
        current = [body]
        records.append(current)
    kinds: dict[str, int] = {}
    for r in records:
        kinds[_kind(r[0])] = kinds.get(_kind(r[0]), 0) + 1
    device = [r for r in records if _kind(r[0]) in ("race", "barrier", "memory")]
    first = None
    if device:
        where = next((x for x in device[0][1:] if x.startswith(("at ", "and "))), "")
        first = device[0][0] + (f" ({where})" if where else "")
    return {"summary": summary, "errors": errors, "warnings": warnings, "reports": len(device),
            "api_errors": kinds.get("api", 0), "by_kind": kinds, "first": first,
            "internal_error": kinds.get("internal", 0) > 0,
            "notes": [r[0] for r in records if _kind(r[0]) in ("note", "internal")][:3]}


def verdict(parsed: dict, child: dict, *, correct: bool) -> str:
    """One word for one (answer, tool): caught / not caught (a bad answer), clean / false alarm (the solution),
    hung, or error (the tool said nothing usable, or the solution's launch failed). A bad answer whose launch fails
    under the tool as it does without it (a fault the tool reports only as the failed API call, no device-side
    report: measured on multicast.early_exit) is not caught: the tool added nothing to what the launch said."""
    if parsed["reports"]:
        return "false alarm" if correct else "caught"
    if child.get("timed_out") or child.get("status") == "hung":
        return "hung"
    if not parsed["summary"] or parsed["internal_error"] or child.get("status") is None \
            or (correct and child.get("status") == "error"):
        return "error"
    return "clean" if correct else "not caught"


def sanitizer_version() -> str | None:
    san = sanitizer_binary()
    if san is None:
        return None
    p = subprocess.run([san, "--version"], capture_output=True, text=True, timeout=60)
    return " ".join(line.strip() for line in p.stdout.splitlines() if line.strip())[-200:] or None
