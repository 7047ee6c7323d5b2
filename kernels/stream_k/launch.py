"""Launchers of week 3 day 2 (the shapes where one big tile loses: split-K, the fix-up through TMA reduce-add).

    c = gemm_split_k(a, b)              # rung 1 (r1_split_k.cu): a (M, K), b (N, K) bf16 -> a @ b.T (M, N) bf16,
                                        #   split by the day's model (model.best_splits)
    c = gemm_split_k(a, b, splits=4)    # K cut in 4 (model.effective_splits: the ranges a launch really has)

Inputs are checked here, before anything touches a GPU (the checks run on CPU tensors too), each error naming the
argument, what it got and what it needs. The fp32 workspace and the tickets the fix-up needs are the launcher's, one
set per (GPU, stream, M, N): the kernel leaves them zero for the next launch, so two launches that could overlap (two
streams) must not share one.
"""

from __future__ import annotations

from collections import OrderedDict
from functools import lru_cache

import torch

from ..compile import compile_cuda, kernel_file
from ..launch import expect_tensor, gemm_operands, i32, launch
from ..tensormap import cached_tensor_map, validate_tensor
from . import model

KERNEL = "gemm_split_k"
BOX = (128, 64)            # B's map (and A's for 128-row tiles): 128 rows x 64 bf16 (128 bytes: the 128B-swizzle span)
W_BOX = (64, 32)           # the workspace's map: 64 rows x 32 fp32 (128 bytes)
SWIZZLE = "128B"
# The tiles r1_split_k.cu is built with (SPLITK_BM, SPLITK_BN, SPLITK_STAGES, SPLITK_CTAS): "wide" is the default build
# (two consumer warpgroups, one CTA per SM); "narrow" a (64, 128) tile with one consumer and a ring half as big, two
# CTAs per SM (one's fix-up runs while the other streams its k-tiles).
TILES = {"wide": {"bm": 128, "bn": 256, "stages": 4, "ctas": 1},
         "narrow": {"bm": 64, "bn": 128, "stages": 4, "ctas": 2},
         "deep": {"bm": 64, "bn": 64, "stages": 12, "ctas": 1},     # decode: many CTAs, 192 KiB in flight each
         "deep128": {"bm": 64, "bn": 128, "stages": 8, "ctas": 1}}
STAGES = TILES["wide"]["stages"]
THREADS = 128 * (1 + TILES["wide"]["bm"] // 64)  # producer warpgroup + 2 consumer warpgroups
STAGE_BYTES = 48 * 1024    # A (128, 64) + B (256, 64) bf16
SMEM = 1024 + STAGES * STAGE_BYTES  # 1 KiB of alignment slack + the ring (the fix-up reuses the ring)


def tile_config(tile: str) -> dict:
    if tile not in TILES:
        raise ValueError(f"tile {tile!r}: one of {tuple(TILES)}")
    t = TILES[tile]
    stage = (t["bm"] + t["bn"]) * 64 * 2
    return t | {"threads": 128 * (1 + t["bm"] // 64), "stage_bytes": stage, "smem": 1024 + t["stages"] * stage}


@lru_cache(maxsize=8)
def cubin(reduce: bool = False, tile: str = "wide"):
    """Rung 1's module, through the course's one compile helper (cached on disk too). reduce=True: the build whose
    fix-up adds the partials by TMA reduce-add into one fp32 W (SPLITK_REDUCE=1); else each split's partial goes by
    TMA store into its own slot of W. tile: one of TILES (the default build: "wide")."""
    t = tile_config(tile)
    defines = {"SPLITK_REDUCE": int(bool(reduce))}
    if tile != "wide":
        defines |= {"SPLITK_BM": t["bm"], "SPLITK_BN": t["bn"], "SPLITK_STAGES": t["stages"], "SPLITK_CTAS": t["ctas"]}
    return compile_cuda(kernel_file("stream_k", "r1_split_k.cu"), defines=defines)


def check_inputs(a, b, out=None, splits=None) -> tuple[int, int, int]:
    """(M, N, K) of c = a @ b.T, or the error that names the rule broken."""
    expect_tensor("a", a, 2, "(M, K)")
    expect_tensor("b", b, 2, "(N, K)")
    m, n, k = gemm_operands(a, b)
    if m < 1 or n < BOX[0] or k < BOX[1]:
        raise ValueError(f"(M, N, K) = {(m, n, k)}: M >= 1, N >= {BOX[0]} and K >= {BOX[1]} (a TMA box may not be "
                         "larger than the tensor along N and K; rows of A past M are read as zeros)")
    if a.device != b.device:
        raise ValueError(f"a is on {a.device} and b on {b.device}: one GPU")
    if out is not None and (not isinstance(out, torch.Tensor) or tuple(out.shape) != (m, n)
                            or out.dtype != torch.bfloat16 or not out.is_contiguous() or out.device != a.device):
        raise ValueError(f"out must be a contiguous bf16 ({m}, {n}) tensor on {a.device}")
    if splits is not None and (isinstance(splits, bool) or not isinstance(splits, int)
                               or not 1 <= splits <= model.MAX_SPLITS):
        raise ValueError(f"splits = {splits!r}: an int in 1 .. {model.MAX_SPLITS}")
    return m, n, k


_WORK: OrderedDict = OrderedDict()
_MAX_WORK = 4  # the sweep walks 40 shapes: keep the last few workspaces, not all


def slot_rows(m: int) -> int:
    """Rows of one split's slot of W: M rounded up to the consumer's 64 rows (its TMA store of rows past M lands in
    the slot's padding, never in the next slot)."""
    return -(-m // 64) * 64


def workspace(device: torch.device, stream: int, m: int, n: int, splits: int,
              reduce: bool = False, tile: str = "wide") -> tuple[torch.Tensor, torch.Tensor]:
    """(W, flags) for launches on `stream`: W fp32, (splits x slot_rows(M), N) of slots or (reduce) one (M, N) that
    starts zero; the 2 x tiles tickets, zero. Kept, least recently used dropped first: the kernel leaves the tickets
    (and a reduce W) zero again."""
    key = (str(device), stream, m, n, 1 if reduce else splits, reduce, tile)
    if key not in _WORK:
        rows = m if reduce else splits * slot_rows(m)
        _WORK[key] = (torch.zeros(rows, n, dtype=torch.float32, device=device),
                      torch.zeros(2 * model.tiles((m, n, 0), tile), dtype=torch.int32, device=device))
        while len(_WORK) > _MAX_WORK:
            _WORK.popitem(last=False)
    _WORK.move_to_end(key)
    return _WORK[key]


def sm_count(device) -> int:
    return torch.cuda.get_device_properties(device).multi_processor_count


def gemm_split_k(a: torch.Tensor, b: torch.Tensor, splits: int | None = None, *,
                 out: torch.Tensor | None = None, reduce: bool = False, tile: str = "wide") -> torch.Tensor:
    """c = a @ b.T (bf16, fp32 accumulate) by rung 1: K cut into `splits` ranges (None: model.best_splits), the
    partial tiles written by TMA into an fp32 workspace (a slot per split; reduce=True: added by TMA reduce-add into
    one) and finished by the last CTA of each tile. tile: the build (TILES)."""
    t = tile_config(tile)
    m, n, k = check_inputs(a, b, out, splits)
    validate_tensor(a, BOX, swizzle=SWIZZLE)
    validate_tensor(b, BOX, swizzle=SWIZZLE)
    if not a.is_cuda:
        raise ValueError("gemm_split_k runs on an sm_90 GPU; the inputs are on the CPU (the layout checks above passed)")
    shape = (m, n, k)
    s = model.effective_splits(shape, splits if splits is not None else
                               model.best_splits(shape, sm_count(a.device), tile), tile)
    c = torch.empty(m, n, dtype=torch.bfloat16, device=a.device) if out is None else out
    w, flags = workspace(a.device, torch.cuda.current_stream(a.device).cuda_stream, m, n, s, reduce, tile)
    launch(cubin(reduce, tile), KERNEL, grid=model.tiles(shape, tile) * s, block=t["threads"], smem=t["smem"],
           args=(cached_tensor_map(a, (t["bm"], 64), SWIZZLE), cached_tensor_map(b, (min(t["bn"], 128), 64), SWIZZLE),
                 cached_tensor_map(w, W_BOX, SWIZZLE), w, flags, c, i32(m), i32(n), i32(k), i32(s),
                 i32(slot_rows(m))))
    return c
