"""make gpu-test's residue step (tools/gpu_check.py): what one kernel launch can leave for a later one to find — the
channel a kernel that "remembers" would use to steer the understanding checks (autograder.mutants measures each mutant
in a CUDA context of its own, forked through mutants_child._fresh_context: this step measures through the same function).

Global memory: a freed block handed back by torch's caching allocator, and by cudaMalloc after empty_cache, within one
context; a fresh allocation in the next context. Shared memory: what a block finds in its (uninitialised) dynamic
shared memory, after another launch filled every SM's with a pattern, in the same context and in the next one.
Each as the fraction of words that still hold the pattern. Written to OUT/residue.json and, with COURSE_RECORD=1,
autograder/recorded_residue_<gpu>.json."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from autograder.mutants_child import _send
from autograder.spawn import _spawn
from kernels.device import driver_version
from kernels.record import device_tag

ROOT = Path(__file__).resolve().parent.parent
WORDS = 1 << 24  # 64 MiB of global memory
SOURCE = r'''
// Dynamic shared memory is not initialised: smem_read counts the words that still hold smem_write's pattern.
extern "C" __global__ void smem_write(unsigned pattern, int words) {
    extern __shared__ unsigned s[];
    for (int i = threadIdx.x; i < words; i += blockDim.x) s[i] = pattern ^ (unsigned)i;
    __syncthreads();
}
extern "C" __global__ void smem_read(unsigned pattern, int words, unsigned long long* hits) {
    extern __shared__ unsigned s[];
    unsigned n = 0;
    for (int i = threadIdx.x; i < words; i += blockDim.x) n += (s[i] == (pattern ^ (unsigned)i));
    atomicAdd(hits, (unsigned long long)n);
}
'''
PATTERN = 0x5A17C0DE  # fits an int32 (the global memory's fill) and a uint32 (the shared memory's)


def _smem(cubin, kernel: str, blocks: int, smem: int):
    import torch

    from kernels.launch import launch
    import numpy as np

    hits = torch.zeros(1, dtype=torch.int64, device="cuda")
    args = (np.uint32(PATTERN), np.int32(smem // 4)) + ((hits,) if kernel == "smem_read" else ())
    launch(cubin, kernel, grid=blocks, block=1024, args=args, smem=smem)
    torch.cuda.synchronize()
    return int(hits.item()) / (blocks * (smem // 4))


def _global_hits(t) -> float:
    import torch

    want = torch.full_like(t, PATTERN)
    return float((t == want).double().mean().item())


def _first_context(cubin, smem: int) -> None:
    import torch

    blocks = 4 * torch.cuda.get_device_properties(0).multi_processor_count
    x = torch.full((WORDS,), PATTERN, dtype=torch.int32, device="cuda")
    torch.cuda.synchronize()
    del x
    reused = _global_hits(torch.empty((WORDS,), dtype=torch.int32, device="cuda"))
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    remalloc = _global_hits(torch.empty((WORDS,), dtype=torch.int32, device="cuda"))
    _smem(cubin, "smem_write", blocks, smem)
    same_smem = _smem(cubin, "smem_read", blocks, smem)
    x = torch.full((WORDS,), PATTERN, dtype=torch.int32, device="cuda")  # left for the next context
    _smem(cubin, "smem_write", blocks, smem)
    torch.cuda.synchronize()

    _send({"event": "first", "caching_allocator": reused, "after_empty_cache": remalloc, "smem_same_context": same_smem,
           "device": torch.cuda.get_device_name(0), "driver": driver_version(), "t": time.time()})
    _send({"event": "done", "t": time.time()})
    del x


def _next_context(cubin, smem: int) -> None:
    import torch

    blocks = 4 * torch.cuda.get_device_properties(0).multi_processor_count
    fresh = _global_hits(torch.empty((WORDS,), dtype=torch.int32, device="cuda"))
    _send({"event": "next", "fresh_allocation": fresh, "smem_next_context": _smem(cubin, "smem_read", blocks, smem),
           "t": time.time()})
    _send({"event": "done", "t": time.time()})


def residue(out: Path) -> dict:
    """The measurement in a process of its own (the step's process has a CUDA context already: a fork of it could not
    make one)."""
    out.mkdir(parents=True, exist_ok=True)
    run = _spawn([sys.executable, __file__, str(out)], 300)  # its own process group, the course root on its path
    if run["rc"] not in (0, 1) or not (out / "residue.json").exists():
        return {"ok": False, "error": run["text"][-2000:]}
    rec = json.loads((out / "residue.json").read_text())
    return {"ok": run["rc"] == 0, **rec}


def main(out: Path) -> int:
    from autograder import mutants_child
    from kernels.compile import compile_cuda

    smem = 227 * 1024
    got: list[dict] = []
    real_emit, mutants_child._emit = mutants_child._emit, got.append
    try:
        # compiled in each context: this process must not initialise the driver (NVRTC through cuda.core does), or no
        # process forked from it can
        ends = [mutants_child._fresh_context(lambda: _first_context(compile_cuda(SOURCE, name="residue.cu"), smem)),
                mutants_child._fresh_context(lambda: _next_context(compile_cuda(SOURCE, name="residue.cu"), smem))]
        ok = [e == "done" for e in ends]
    finally:
        mutants_child._emit = real_emit
    rec = {k: v for r in got if r["event"] in ("first", "next") for k, v in r.items() if k not in ("event", "t")}
    rec["failed"] = [r["detail"] for r in got if r["event"] == "failed"]
    rec.update(date=time.strftime("%Y-%m-%d"), words=WORDS, smem_bytes=smem, contexts_finished=ok,
               method="tools/gpu_residue.py: each context a process forked through autograder.mutants_child._fresh_context")
    (out / "residue.json").write_text(json.dumps(rec, indent=1) + "\n")
    tag = device_tag(rec.get("device"))
    if os.environ.get("COURSE_RECORD") == "1" and tag and all(ok):
        (ROOT / "autograder" / f"recorded_residue_{tag}.json").write_text(json.dumps(rec, indent=1) + "\n")
    print(json.dumps(rec, indent=1))
    return 0 if all(ok) and rec.get("fresh_allocation") == 0.0 and rec.get("smem_next_context") == 0.0 else 1


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
