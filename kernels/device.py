"""The environment self-test and the course's one `requires_hopper` check.

GPU-only cells and tests call `requires_hopper("what this needs the GPU for")`: on an sm_90 GPU it returns True;
anywhere else it prints one line and returns False, so notebooks run top to bottom in CPU mode.
"""

from __future__ import annotations

import ctypes
import importlib.metadata as md
import json
import os
import sys
from functools import lru_cache
from pathlib import Path
from . import compile as cc
import subprocess


@lru_cache(maxsize=1)
def gpu() -> dict | None:
    """Name, compute capability, SM count and driver of GPU 0, or None with no usable CUDA device."""
    if os.environ.get("COURSE_FORCE_CPU") or not _cuda_driver_loadable():
        return None
    try:
        import torch

        if not torch.cuda.is_available():
            return None
        props = torch.cuda.get_device_properties(0)
        return {
            "name": props.name,
            "cc": (props.major, props.minor),
            "sms": props.multi_processor_count,
            "l2_bytes": getattr(props, "L2_cache_size", None),
            "memory_bytes": props.total_memory,
            "driver": driver_version(),
        }
    except Exception:  # noqa: BLE001 - a broken driver is "no GPU" for the course
        return None


def _cuda_driver_loadable() -> bool:
    """Can the CUDA driver library be loaded here? torch sees a GPU only through it (libcuda ships with the NVIDIA
    driver, never in a wheel), so where it cannot be loaded there is no GPU, and no torch import (a second of CPU in
    every grading process) is needed to say so. Checked on Linux; elsewhere torch is asked."""
    if not sys.platform.startswith("linux"):
        return True

    try:
        ctypes.CDLL("libcuda.so.1")
    except OSError:
        return False
    return True


def driver_version() -> str | None:
    try:

        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True, text=True, timeout=20,
        )
        return out.stdout.strip().splitlines()[0] if out.returncode == 0 and out.stdout.strip() else None
    except Exception:  # noqa: BLE001
        return None


def is_hopper() -> bool:
    g = gpu()
    return bool(g and g["cc"] == (9, 0))


def is_h100() -> bool:
    g = gpu()
    return bool(g and g["cc"] == (9, 0) and "H100" in g["name"])


def cpu_mode_reason() -> str:
    g = gpu()
    if g is None:
        return "no CUDA GPU here (CPU mode)"
    return f"{g['name']} is sm_{g['cc'][0]}{g['cc'][1]}, not sm_90"


def requires_hopper(what: str = "this cell runs kernels") -> bool:
    """True on an sm_90 GPU; otherwise print one line saying what was skipped and return False."""
    if os.environ.get("NBGRADER_EXECUTION"):
        # nbgrader runs the notebook only to restore its cells; the trusted harness grades outside it.
        print(f"[grading] skipped: {what} — not needed to grade this notebook")
        return False
    if is_hopper():
        return True
    print(f"[CPU mode] skipped: {what} — needs an sm_90 GPU ({cpu_mode_reason()}); "
          "compile and SASS checks still run here.")
    return False


def _version(dist: str) -> str:
    try:
        return md.version(dist)
    except md.PackageNotFoundError:
        return "not installed"


def self_test(verbose: bool = True) -> dict:
    """One line each: GPU, cuda.core / triton / torch versions, NVRTC sm_90a, tensor-map support."""
    facts: dict[str, str] = {}
    g = gpu()
    facts["gpu"] = (f"{g['name']} (sm_{g['cc'][0]}{g['cc'][1]}, {g['sms']} SMs, driver {g['driver']})"
                    if g else "none — CPU mode: kernels compile and their SASS is read; nothing is launched or timed")
    facts["torch"] = _version("torch")
    facts["triton"] = _version("triton")
    facts["cuda.core"] = _version("cuda-core")
    try:
        cubin = cc.compile_cuda('extern "C" __global__ void probe(int* p) { if (p) *p = 1; }', name="probe.cu")
        facts["nvrtc"] = f"NVRTC {cc.nvrtc_version()} compiles for {cc.ARCH} ({len(cubin.data)} byte cubin)"
    except Exception as exc:  # noqa: BLE001
        facts["nvrtc"] = f"FAILED: {exc}"
    try:
        from cuda.core.utils import StridedMemoryView

        ok = hasattr(StridedMemoryView, "as_tensor_map")
        facts["tensor maps"] = ("StridedMemoryView.as_tensor_map available"
                                + ("" if g else " (building one needs the driver: GPU only)")) if ok else "missing"
    except Exception as exc:  # noqa: BLE001
        facts["tensor maps"] = f"unavailable: {exc}"
    if g:  # only where numbers are measured does a version the record did not use matter
        drift = recorded_version_drift(facts)
        if drift:
            facts["versions"] = ("your numbers come from " + ", ".join(drift) + ": compare them with the recorded "
                                 "numbers knowing that")
    if verbose:
        for k, v in facts.items():
            print(f"{k:>12}: {v}")
    return facts


def recorded_version_drift(facts: dict) -> list[str]:
    """'triton 3.9.0 (recorded with 3.6.0)' for each package whose installed version differs from every version the
    recorded numbers were measured with (kernels/*/recorded_*.json: every GPU's records)."""
    recorded: dict[str, set] = {}
    for p in sorted(Path(__file__).resolve().parent.glob("*/recorded_*.json")):
        doc = json.loads(p.read_text())
        for dist, key in (("triton", "triton"), ("cuda.core", "cuda_core"), ("torch", "torch")):
            if doc.get(key):
                recorded.setdefault(dist, set()).add(doc[key])
    out = []
    for dist, versions in recorded.items():
        mine = facts.get(dist)
        if mine and mine not in versions and mine.split("+")[0] not in {v.split("+")[0] for v in versions}:
            out.append(f"{dist} {mine} (recorded with {', '.join(sorted(versions))})")
    return out
