"""Launchers of week 2, day 4's GEMM ladder. Every rung has the same call shape: gemm(a, b, variant) -> c.

    c = gemm(a, b)                          # a (M, K), b (N, K) bf16 -> c = a @ b.T (M, N) bf16; rung 5 by default
    c = gemm(a, b, "tiled")                 # rung 1: shared-memory tiles + FMA
    c = gemm(a, b, "wgmma")                 # rung 2: TMA + wgmma, one warpgroup, one stage
    c = gemm(a, b, "pipelined")             # rung 3: STAGES-deep ring, producer warp + consumer warpgroup
    c = gemm(a, b, "persistent")            # rung 4: 2 consumer warpgroups, (128, 256) tiles, persistent grid
    c = gemm(a, b, "cluster")               # rung 5: rung 4 + cluster of 2 sharing B by TMA multicast
    c = gemm(a, b, "store_warp")            # rung 6: rung 5 + TMA-store epilogue by store threads, overlapped
    c = gemm(a, b, "store_warp", tune={"cluster": 1, "group_m": 8, "stages": 3, "slots": 4, "grid": "sms"})
    c = gemm(a, b, "triton")                # Triton: persistent matmul on tensor descriptors (triton_matmul.py)
    c = gemm(a, b, "cublas")                # torch.matmul(a, b.T): cuBLAS, the ceiling

Inputs are checked here, before anything touches a GPU, with errors that name the rule. Rung 6's source
(r6_store_warp.cu) answers the day's exercise and stays out of a student release (autograder.release
INSTRUCTOR_ONLY): there `gemm(..., "store_warp")` says so, and RUNGS lists what this copy of the course can run.
"""

from __future__ import annotations

from functools import lru_cache

import torch

from ..compile import compile_cuda, excerpt, has_kernel_file, kernel_file
from ..launch import ceil_div, gemm_operands, i32, launch
from ..tensormap import cached_tensor_map as cached, validate_tensor
from ..sass import disassemble
from ..tensormap import cached_tensor_map

VARIANTS = ("tiled", "wgmma", "pipelined", "persistent", "cluster", "store_warp", "triton", "cublas")
CUDA_VARIANTS = ("tiled", "wgmma", "pipelined", "persistent", "cluster", "store_warp")
BOX = (128, 64)             # every tensor map: 128 rows x 64 bf16 (128 bytes: the 128B-swizzle span)
SWIZZLE = "128B"
STAGE_SLACK = 1024          # the wgmma kernels align their shared-memory base to 1024 bytes themselves
_FILES = {"tiled": "r1_tiled.cu", "wgmma": "r2_wgmma.cu", "pipelined": "r3_pipelined.cu",
          "persistent": "r4_persistent.cu", "cluster": "r4_persistent.cu", "store_warp": "r6_store_warp.cu"}
_KERNELS = {"tiled": "gemm_tiled", "wgmma": "gemm_wgmma", "pipelined": "gemm_pipelined",
            "persistent": "gemm_persistent", "cluster": "gemm_cluster", "store_warp": "gemm_store_warp"}
# Rung 6 answers the day's exercise (an epilogue by TMA store, overlapped with the next tile): instructor-only.
INSTRUCTOR_ONLY_RUNGS = {"store_warp": "rung 6 (kernels/gemm/r6_store_warp.cu) answers the day's exercise — an "
                                       "epilogue by TMA store overlapped with the next tile — so the student "
                                       "release leaves its source out (an instructor-only file of the release "
                                       "builder); the notebook shows its recorded rows instead"}
# The variants this copy of the course can run (a student release has no rung 6), and their sources and entries.
RUNGS = tuple(v for v in VARIANTS if v not in _FILES or has_kernel_file("gemm", _FILES[v]))
FILES = {v: f for v, f in _FILES.items() if v in RUNGS}
KERNELS = {v: k for v, k in _KERNELS.items() if v in RUNGS}
# Per rung: (BM, BN) tile of C per CTA, threads per block, stages, bytes per stage (the .cu files' constants;
# tests/test_gemm.py reads them back from the sources).
CONFIG = {
    "tiled": {"tile": (64, 64), "block": 256, "stages": 1, "stage_bytes": 0, "cluster": 1},
    "wgmma": {"tile": (128, 128), "block": 128, "stages": 1, "stage_bytes": 32 * 1024, "cluster": 1},
    "pipelined": {"tile": (128, 128), "block": 160, "stages": 4, "stage_bytes": 32 * 1024, "cluster": 1},
    "persistent": {"tile": (128, 256), "block": 384, "stages": 4, "stage_bytes": 48 * 1024, "cluster": 1},
    "cluster": {"tile": (128, 256), "block": 384, "stages": 4, "stage_bytes": 48 * 1024, "cluster": 2},
    # rung 6: + 2 consumers x `slots` store slots of 8 KiB (one (64, 64) bf16 box of C each) after the ring
    "store_warp": {"tile": (128, 256), "block": 384, "stages": 4, "stage_bytes": 48 * 1024, "cluster": 2,
                   "slots": 2, "slot_bytes": 8 * 1024, "group_m": 16, "grid": "balanced"},
}
C_BOX = (64, 64)            # rung 6's C map: 64 rows x 64 bf16 (128 bytes: the 128B-swizzle span), one store slot
# Rung 6's compile-time switches (r6_store_warp.cu's GEMM_* defines) and its grid rule, each with what it may be.
TUNE = {"cluster": (1, 2), "group_m": (1, 2, 4, 8, 16, 32, 64), "stages": (2, 3, 4), "slots": (1, 2, 3, 4),
        "grid": ("balanced", "sms")}
SMEM_LIMIT = 227 * 1024 - 2048  # dynamic bytes a block may have, ~ 2 KiB left for the static barriers (exercise.py)


MAX_STAGES = {"pipelined": 6}  # 6 x 32 KiB + 1 KiB <= 227 KiB


def tuned(tune: dict | None = None) -> dict:
    """Rung 6's settings: CONFIG["store_warp"]'s defaults overridden by `tune` (keys and values of TUNE), checked
    here with errors that name the rule."""
    cfg = CONFIG["store_warp"]
    out = {k: cfg[k] for k in TUNE}
    for k, v in (tune or {}).items():
        if k not in TUNE:
            raise ValueError(f"tune key {k!r}: rung 6 takes {tuple(TUNE)}")
        if v not in TUNE[k]:
            raise ValueError(f"tune {k} = {v!r}: one of {TUNE[k]}")
        out[k] = v
    if out["group_m"] % out["cluster"]:
        raise ValueError(f"group_m = {out['group_m']} tile rows is not a multiple of the cluster ({out['cluster']})")
    dyn = STAGE_SLACK + out["stages"] * cfg["stage_bytes"] + 2 * out["slots"] * cfg["slot_bytes"]
    if dyn > SMEM_LIMIT:
        raise ValueError(f"stages = {out['stages']} and slots = {out['slots']}: 1 KiB + {out['stages']} x 48 KiB + "
                         f"2 x {out['slots']} x 8 KiB = {dyn // 1024} KiB of shared memory, more than the "
                         f"{SMEM_LIMIT // 1024} KiB a block may have beside its barriers")
    return out


def _tune_key(tune: dict | None):
    return None if not tune else tuple(sorted(tuned(tune).items()))


def _source_file(variant: str):
    """The rung's .cu file (kernels.compile.kernel_file: SourceLeftOut, with the reason, for rung 6 in a release)."""
    return kernel_file("gemm", _FILES[variant], left_out=INSTRUCTOR_ONLY_RUNGS.get(variant))


def cubin(variant: str, stages: int | None = None, tune: dict | None = None):
    """The rung's compiled module; `stages` (rung 3 only) recompiles r3_pipelined.cu with GEMM_STAGES; `tune`
    (rung 6 only) recompiles r6_store_warp.cu with its GEMM_* defines."""
    _source_file(variant)
    return _cubin(variant, stages, _tune_key(tune) if variant == "store_warp" else None)


@lru_cache(maxsize=None)
def _cubin(variant: str, stages: int | None, tune_key):
    defines = {"GEMM_STAGES": stages} if stages is not None else None
    if tune_key is not None:
        t = dict(tune_key)
        defines = {"GEMM_CLUSTER": t["cluster"], "GEMM_GROUP_M": t["group_m"], "GEMM_STAGES": t["stages"],
                   "GEMM_SLOTS": t["slots"]}
    return compile_cuda(_source_file(variant), defines=defines)


def source(variant: str, start: str | None = None, end: str | None = None) -> str:
    """The rung's .cu file, or the lines from the first containing `start` up to (not including) the first later
    line containing `end` (for the notebook)."""
    return excerpt(_source_file(variant), start, end)


def tensor_map(t: torch.Tensor):
    """The (128, 64)-box, 128B-swizzled map of a K-major operand (kernels.tensormap.cached_tensor_map)."""
    return cached(t, BOX, SWIZZLE)


def smem_bytes(variant: str, stages: int | None = None, tune: dict | None = None) -> int:
    cfg = CONFIG[variant]
    if variant == "store_warp":  # the ring, then the store slots (r6_store_warp.cu SMEM_DYNAMIC)
        t = tuned(tune)
        return STAGE_SLACK + t["stages"] * cfg["stage_bytes"] + 2 * t["slots"] * cfg["slot_bytes"]
    return (stages or cfg["stages"]) * cfg["stage_bytes"] + STAGE_SLACK if cfg["stage_bytes"] else 0


def grid(variant: str, shape, sms: int, tune: dict | None = None):
    """The launch grid of a rung for (M, N, K) on a GPU with `sms` SMs."""
    m, n, _ = shape
    bm, bn = CONFIG[variant]["tile"]
    if variant == "store_warp":
        # Units of work: CLUSTER vertically adjacent tiles. Balanced: as many rounds as one CTA per SM needs, and
        # just enough CTAs for them (2048 tiles at 8192^3: 16 rounds, 128 CTAs rather than 132 — the same busiest
        # CTA, no CTA with one tile fewer); "sms": one CTA per SM, as rungs 4 and 5.
        t = tuned(tune)
        cl = t["cluster"]
        units, slots = ceil_div(ceil_div(m, bm), cl) * ceil_div(n, bn), max(1, sms // cl)
        if t["grid"] == "sms":
            return cl * max(1, min(units, slots))
        return cl * ceil_div(units, ceil_div(units, slots))
    if variant == "persistent":
        return max(1, min(ceil_div(m, bm) * ceil_div(n, bn), sms))
    if variant == "cluster":
        pairs = ceil_div(ceil_div(m, bm), 2) * ceil_div(n, bn)
        return 2 * max(1, min(pairs, sms // 2))
    return (ceil_div(n, bn), ceil_div(m, bm))


def check_inputs(a, b, out=None) -> tuple[int, int, int]:
    for name, t in (("a", a), ("b", b)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
        if t.dim() != 2 or t.dtype != torch.bfloat16 or not t.is_contiguous():
            raise ValueError(f"{name} must be a contiguous 2-D bf16 tensor, got {t.dtype} {tuple(t.shape)} "
                             f"strides {t.stride()}")
    m, n, k = gemm_operands(a, b)
    if m < BOX[0] or n < BOX[0] or k < BOX[1]:
        raise ValueError(f"(M, N, K) = {(m, n, k)}: M, N >= {BOX[0]} and K >= {BOX[1]} (a TMA box may not be "
                         "larger than the tensor)")
    if out is not None and (out.shape != (m, n) or out.dtype != torch.bfloat16 or not out.is_contiguous()):
        raise ValueError(f"out must be a contiguous bf16 ({m}, {n}) tensor")
    return m, n, k


def gemm(a: torch.Tensor, b: torch.Tensor, variant: str = "cluster", *, out: torch.Tensor | None = None,
         stages: int | None = None, tune: dict | None = None):
    """c = a @ b.T (bf16, fp32 accumulate) with the rung `variant` (`stages`: rung 3's ring depth, 1..6; `tune`:
    rung 6's switches, TUNE)."""
    if variant not in VARIANTS:
        raise ValueError(f"variant {variant!r}: choose one of {VARIANTS}")
    if variant in INSTRUCTOR_ONLY_RUNGS:
        _source_file(variant)
    if stages is not None and not (variant in MAX_STAGES and 1 <= stages <= MAX_STAGES[variant]):
        raise ValueError(f"stages = {stages}: only 'pipelined' takes a ring depth, 1..{MAX_STAGES['pipelined']} "
                         "(rung 6: tune={'stages': ...})")
    if tune is not None and variant != "store_warp":
        raise ValueError(f"tune: only rung 6 ('store_warp') takes compile-time switches, not {variant!r}")
    if variant == "store_warp":
        tuned(tune)
    m, n, k = check_inputs(a, b, out)
    if variant in ("wgmma", "pipelined", "persistent", "cluster", "store_warp", "triton"):
        validate_tensor(a, BOX, swizzle=SWIZZLE)
        validate_tensor(b, BOX, swizzle=SWIZZLE)
    if not a.is_cuda or not b.is_cuda:
        raise ValueError("gemm runs on an sm_90 GPU; the inputs are on the CPU (the layout checks above passed)")
    c = torch.empty(m, n, dtype=torch.bfloat16, device=a.device) if out is None else out
    if variant == "cublas":
        return torch.matmul(a, b.T, out=c)
    if variant == "triton":
        from .triton_matmul import matmul_tma

        return matmul_tma(a, b, c)
    sms = torch.cuda.get_device_properties(a.device).multi_processor_count
    cfg = CONFIG[variant]
    if variant == "store_warp":  # C by TMA store: a third map, box (64, 64), no pointer

        t = tuned(tune)
        launch(cubin(variant, tune=tune), KERNELS[variant], grid=grid(variant, (m, n, k), sms, tune),
               block=cfg["block"], smem=smem_bytes(variant, tune=tune),
               args=(tensor_map(a), tensor_map(b), cached_tensor_map(c, C_BOX, SWIZZLE), i32(m), i32(n), i32(k)),
               cluster=t["cluster"] if t["cluster"] > 1 else None)
        return c
    if variant == "tiled":
        args = (a, b, c, i32(m), i32(n), i32(k))
    else:
        args = (tensor_map(a), tensor_map(b), c, i32(m), i32(n), i32(k))
    launch(cubin(variant, stages), KERNELS[variant], grid=grid(variant, (m, n, k), sms), block=cfg["block"],
           smem=smem_bytes(variant, stages), args=args, cluster=2 if variant == "cluster" else None)
    return c


def release_order(cubin, kernel: str) -> list[str]:
    """The two instructions that follow the consumer's last HGMMA in `kernel`'s SASS, among the group wait
    (WARPGROUP.DEPBAR) and the stage release (SYNCS.ARRIVE.TRANS64.A1T0): ["WARPGROUP.DEPBAR.LE",
    "SYNCS.ARRIVE.TRANS64.A1T0"] when the tensor core is done with the stage before it goes back."""
    seq = [i.opcode for i in disassemble(cubin)[kernel]
           if i.opcode.startswith(("HGMMA", "WARPGROUP.DEPBAR", "SYNCS.ARRIVE.TRANS64.A1T0"))]
    last = max(k for k, o in enumerate(seq) if o.startswith("HGMMA"))
    return seq[last + 1:last + 3]


__all__ = ["release_order", "VARIANTS", "CUDA_VARIANTS", "RUNGS", "CONFIG", "TUNE", "tuned", "gemm", "cubin", "source",
           "grid", "smem_bytes", "tensor_map"]
