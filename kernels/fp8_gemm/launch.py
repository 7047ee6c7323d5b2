"""Launchers of week 3 day 1 (FP8 GEMM with block scaling).

    d = gemm_fp8(a, sa_t, b, sb)        # rung 1 (r1_block_scaled.cu): bf16 (M, N)
    d = gemm_fp8_wide(a, sa_t, b, sb)   # rung 2 (r2_wide.cu): the same, 128 x 256 tiles, persistent grid

gemm_fp8 computes D = bf16( sum_kb (A[:, kb] . B[:, kb]^T) * sa[m, kb] * sb[n // 128, kb] ) — DeepGEMM's "1D2D"
block scaling: A (M, K) and B (N, K) float8_e4m3fn, both K-major (FP8 wgmma on Hopper takes no other layout); sa_t
(K // 128, M) fp32, the 1 x 128 scales of A stored M-major (one k-block's scales of a 128-row tile are one 512-byte
run, loaded by TMA); sb (N // 128, K // 128) fp32, one scale per 128 x 128 block of B. kernels/fp8_gemm/workload.py
makes such inputs (quantize_rows, quantize_blocks, make_inputs) and the fp32 reference.

Inputs are checked here, before anything touches a GPU (so the checks run on CPU tensors too), each error naming the
argument, what it got and what it needs.
"""

from __future__ import annotations

from functools import lru_cache

import torch

from ..compile import compile_cuda, has_kernel_file, kernel_file
from ..launch import ceil_div, i32, launch
from ..tensormap import cached_tensor_map, validate_tensor

# Rung 1's constants (r1_block_scaled.cu; tests/test_fp8_gemm_kernel.py reads them back from the source).
KERNEL = "fp8_gemm_block_scaled"
BM, BN, BK = 128, 128, 128            # tile of D per CTA, and the k-block (= the scale block along K)
STAGES = 6                            # FP8_STAGES (the deepest ring that fits 227 KiB)
THREADS = 384                         # producer warpgroup + 2 consumer warpgroups
AB_BOX = (BM, BK)                     # A and B maps: 128 rows x 128 e4m3 (128 bytes: the 128B-swizzle span)
SA_BOX = (1, BM)                      # sa_t map: one k-block's 128 row scales (512 contiguous bytes), no swizzle
SWIZZLE = "128B"
STAGE_TILES = BM * BK + BN * BK       # 32 KiB of A + B tiles per stage
SA_BYTES = BM * 4                     # 512 B of row scales per stage
# Rung 1's promote() is the day's exercise answered (kernels/fp8_gemm/exercise.py: the same mainloop, promote left to
# the student), so the student release leaves its source out; the notebook shows the day's record instead of running it.
LEFT_OUT = ("rung 1 (kernels/fp8_gemm/r1_block_scaled.cu) holds the day's exercise answered (its promote(), the "
            "fp32 promotion of each k-block with its scales), so the student release leaves its source out; the "
            "notebook shows its recorded rows instead")
HAS_RUNG1 = has_kernel_file("fp8_gemm", "r1_block_scaled.cu")


def smem_bytes(stages: int = STAGES) -> int:
    """Dynamic shared memory of rung 1 (r1_block_scaled.cu SMEM_DYNAMIC): 1 KiB of alignment slack, the tile ring,
    the scale area rounded up to 1 KiB; the epilogue stores D from registers and uses none. 200704 B (196 KiB) at
    6 stages; 7 would need 234496 B, over the 227 KiB (232448 B) a block may have."""
    return 1024 + stages * STAGE_TILES + ceil_div(stages * SA_BYTES, 1024) * 1024


@lru_cache(maxsize=8)
def block_scaled_cubin(promote: bool = True, stages: int = STAGES):
    """Rung 1's module (r1_block_scaled.cu), through the course's one compile helper (cached on disk too).
    promote=False: the demonstration build (FP8_PROMOTE=0), all of K summed inside the tensor core. stages: the
    ring's depth (FP8_STAGES, 2 .. STAGES; a shallower ring is for measuring what the depth buys)."""
    if not 2 <= stages <= STAGES:
        raise ValueError(f"stages: got {stages}, needs 2 .. {STAGES} ({STAGES + 1} x 32 KiB exceed 227 KiB)")
    return compile_cuda(kernel_file("fp8_gemm", "r1_block_scaled.cu", left_out=LEFT_OUT),
                        defines=_defines(FP8_PROMOTE=(int(promote), 1), FP8_STAGES=(stages, STAGES)))


def _defines(**given: tuple[int, int]) -> dict[str, int] | None:
    """A rung's -D macros: each (value, the file's default) that differs from the default, by name; None when none
    does (the build every tunable's default in the file gives, the one the SASS record holds)."""
    return {name: value for name, (value, default) in given.items() if value != default} or None


def _tensor(name: str, t, dtype: torch.dtype, shape: tuple[int, ...] | None = None) -> None:
    """`name` is a contiguous 2-D torch tensor of `dtype` (and `shape`), 16-byte aligned: else a ValueError (TypeError
    for a non-tensor) naming the argument, what it got and what it needs."""
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name}: got a {type(t).__name__}, needs a torch.Tensor")
    if t.dtype != dtype:
        raise ValueError(f"{name}: got dtype {t.dtype}, needs {dtype}")
    if t.dim() != 2:
        raise ValueError(f"{name}: got a {t.dim()}-D tensor of shape {tuple(t.shape)}, needs a 2-D one")
    if shape is not None and tuple(t.shape) != shape:
        raise ValueError(f"{name}: got shape {tuple(t.shape)}, needs {shape}")
    if not t.is_contiguous():
        raise ValueError(f"{name}: got strides {t.stride()} for shape {tuple(t.shape)}, needs a contiguous (row-major) "
                         f"tensor, strides {(t.shape[1], 1)} (call .contiguous())")
    if t.data_ptr() % 16:
        raise ValueError(f"{name}: got data_ptr 0x{t.data_ptr():x} ({t.data_ptr() % 16} mod 16), needs a 16-byte "
                         "aligned address (the TMA's rule): a fresh tensor, not a view at an odd offset")


def check_inputs(a, sa_t, b, sb, out=None) -> tuple[int, int, int]:
    """(M, N, K) of valid inputs, or the first broken rule as a ValueError naming the argument. Runs on CPU tensors:
    nothing here touches a GPU."""
    fp8 = torch.float8_e4m3fn
    _tensor("a", a, fp8)
    (m, k) = a.shape
    if m == 0 or m % BM:
        raise ValueError(f"a: got M = {m} rows, needs M a positive multiple of {BM} (the tile height: no edge tiles)")
    if k == 0 or k % BK:
        raise ValueError(f"a: got K = {k} columns, needs K a positive multiple of {BK} (the scale block along K)")
    _tensor("b", b, fp8)
    n, kb = b.shape
    if kb != k:
        raise ValueError(f"b: got shape {tuple(b.shape)}, needs (N, K) with K = {k} as a's: b is given K-major, (N, K) "
                         "with K contiguous (pass w, not w.T, for a @ w.T)")
    if n == 0 or n % BN:
        raise ValueError(f"b: got N = {n} rows, needs N a positive multiple of {BN} (the tile width, sb's block)")
    _tensor("sa_t", sa_t, torch.float32, (k // BK, m))
    _tensor("sb", sb, torch.float32, (n // BN, k // BK))
    if out is not None:
        _tensor("out", out, torch.bfloat16, (m, n))
    # the tensor-map rules (kernels.tensormap), on the CPU too: box sizes, strides, alignment
    a8, b8, sa_v = map_views(a, sa_t, b)
    validate_tensor(a8, AB_BOX, swizzle=SWIZZLE)
    validate_tensor(b8, AB_BOX, swizzle=SWIZZLE)
    validate_tensor(sa_v, SA_BOX)
    return m, n, k


def map_views(a, sa_t, b):
    """The tensors as their TMA maps see them. a and b as uint8: the same bytes (TMA has no FP8 type and moves raw
    bytes; cuda.core's DLPack bridge does not take torch's float8 dtypes). sa_t with its row stride spelled out: at
    K = 128 it has one row, and torch calls a (1, M) tensor contiguous whatever that row's stride says (sa.T of an
    (M, 1) sa has strides (1, 1)), which a tensor map's 16-byte stride rule refuses."""
    return a.view(torch.uint8), b.view(torch.uint8), sa_t.as_strided(tuple(sa_t.shape), (sa_t.shape[1], 1))


def grid(shape) -> tuple[int, int]:
    """One CTA per (128, 128) tile of D: x along N, y along M."""
    m, n, _ = shape
    return (n // BN, m // BM)


def gemm_fp8(a: torch.Tensor, sa_t: torch.Tensor, b: torch.Tensor, sb: torch.Tensor,
             out: torch.Tensor | None = None, *, promote: bool = True, stages: int = STAGES) -> torch.Tensor:
    """D = bf16(sum_kb (A[:, kb] B[:, kb]^T) sa[:, kb] sb[:, kb]) by r1_block_scaled.cu: a (M, K) and b (N, K)
    float8_e4m3fn, K-major; sa_t (K // 128, M) fp32; sb (N // 128, K // 128) fp32; returns bf16 (M, N) (`out` if
    given). promote=False runs the demonstration build (FP8_PROMOTE=0: no promotion; the last k-block's scales
    applied to the whole sum, so right only for scales constant along K) — to show what promotion buys. stages:
    the ring's depth (block_scaled_cubin), STAGES unless measuring a shallower one."""
    shape = check_inputs(a, sa_t, b, sb, out)
    return _run_rung("gemm_fp8", KERNEL, lambda: block_scaled_cubin(bool(promote), int(stages)), lambda: grid(shape),
                     smem_bytes(int(stages)), shape, a, sa_t, b, sb, out)


def _run_rung(fn: str, kernel: str, cubin, grid_of, smem: int, shape, a, sa_t, b, sb, out, b_box=AB_BOX,
              d_box=None, **launch_kw):
    """The launch the three rungs share, after check_inputs gave `shape`: CPU tensors refused (a ValueError naming
    them and `fn`), D allocated (bf16 (M, N), or `out`), the three tensor maps (A's and B's box (128, 128),
    128B-swizzled; sa_t's (1, 128)); only then the module (cubin()) and the grid (grid_of(): rungs 2 and 3 read the
    device's SM count); one launch of `kernel`, THREADS threads, `smem` bytes of dynamic shared memory (launch_kw:
    rung 3's cluster; b_box: B's box, rung 5's half tile). The kernels take (a_map, b_map, sa_map, D, sb, M, N, K), D
    and sb as plain pointers; with d_box also D's tensor map last (box d_box, 128B swizzle: rung 6's TMA stores)."""
    off = [name for name, t in (("a", a), ("sa_t", sa_t), ("b", b), ("sb", sb), ("out", out))
           if t is not None and not t.is_cuda]
    if off:
        raise ValueError(f"{', '.join(off)}: on the CPU, needs CUDA tensors: {fn} runs on an sm_90 GPU (the checks of "
                         "shapes, dtypes and layouts above passed)")
    m, n, k = shape
    d = torch.empty(m, n, dtype=torch.bfloat16, device=a.device) if out is None else out
    a8, b8, sa_v = map_views(a, sa_t, b)
    args = (cached_tensor_map(a8, AB_BOX, SWIZZLE), cached_tensor_map(b8, b_box, SWIZZLE),
            cached_tensor_map(sa_v, SA_BOX), d, sb, i32(m), i32(n), i32(k))  # D: a plain pointer
    if d_box is not None:
        args += (cached_tensor_map(d, d_box, SWIZZLE),)
    cub = cubin()
    launch(cub, kernel, grid=grid_of(), block=THREADS, smem=smem, args=args, **launch_kw)
    return d


# Rung 2's constants (r2_wide.cu; tests/test_fp8_gemm_wide.py reads them back from the source). The inputs, their
# checks (check_inputs) and the tensor maps (map_views; A's and B's box (128, 128), sa_t's (1, 128)) are rung 1's: B's
# 256 rows of a tile are two boxes of its map. N needs only be a multiple of 128: where N % 256 == 128 the last tile
# column is a half tile (r2_wide.cu's header).
WIDE_KERNEL = "fp8_gemm_wide"
WIDE_BN = 256                         # tile width: two 128-column blocks of sb
WIDE_STAGES = 4                       # FP8_STAGES of r2_wide.cu (the deepest ring that fits 227 KiB)
WIDE_GROUP_M = 16                     # FP8_GROUP_M: tile rows per group of the persistent walk
WIDE_STAGE_TILES = BM * BK + WIDE_BN * BK  # 48 KiB of A + B tiles per stage
WIDE_STAGE_TX = WIDE_STAGE_TILES + SA_BYTES  # 49664 B on full[s] (a half tile: STAGE_TILES + SA_BYTES = 33280)
HAS_RUNG2 = has_kernel_file("fp8_gemm", "r2_wide.cu")
LEFT_OUT_RUNG2 = ("rung 2 (kernels/fp8_gemm/r2_wide.cu) promotes each k-block as the day's exercise asks, so the "
                  "student release leaves its source out; the notebook shows its recorded rows instead")


def wide_smem_bytes(stages: int = WIDE_STAGES) -> int:
    """Dynamic shared memory of rung 2 (r2_wide.cu SMEM_DYNAMIC): 1 KiB of alignment slack, the ring of 48 KiB stages,
    the scale area rounded up to 1 KiB. 199680 B (195 KiB) at 4 stages; 5 would need 249856 B, over 227 KiB."""
    return 1024 + stages * WIDE_STAGE_TILES + ceil_div(stages * SA_BYTES, 1024) * 1024


@lru_cache(maxsize=8)
def wide_cubin(stages: int = WIDE_STAGES, group_m: int = WIDE_GROUP_M):
    """Rung 2's module (r2_wide.cu), through the course's one compile helper (cached on disk too). stages: the ring's
    depth (FP8_STAGES, 2 .. WIDE_STAGES); group_m: tile rows per group of the persistent walk (FP8_GROUP_M)."""
    if not 2 <= stages <= WIDE_STAGES:
        raise ValueError(f"stages: got {stages}, needs 2 .. {WIDE_STAGES} ({WIDE_STAGES + 1} x 48 KiB exceed 227 KiB)")
    if group_m < 1:
        raise ValueError(f"group_m: got {group_m}, needs at least 1")
    return compile_cuda(kernel_file("fp8_gemm", "r2_wide.cu", left_out=LEFT_OUT_RUNG2),
                        defines=_defines(FP8_STAGES=(stages, WIDE_STAGES), FP8_GROUP_M=(group_m, WIDE_GROUP_M)))


def wide_tiles(shape) -> int:
    """Tiles of D for rung 2: (M / 128) x ceil(N / 256) (the last column a half tile when N % 256 == 128)."""
    m, n, _ = shape
    return (m // BM) * ceil_div(n, WIDE_BN)


@lru_cache(maxsize=8)
def sm_count(device_index: int = 0) -> int:
    """Streaming multiprocessors of a CUDA device (132 on an H100 SXM / H200)."""
    return torch.cuda.get_device_properties(device_index).multi_processor_count


def wide_grid(shape, sms: int) -> tuple[int]:
    """Rung 2's persistent grid: one CTA per SM (one fits per SM: 384 threads, 195 KiB), no more CTAs than tiles."""
    if sms < 1:
        raise ValueError(f"sms: got {sms}, needs at least 1")
    return (min(wide_tiles(shape), int(sms)),)


def gemm_fp8_wide(a: torch.Tensor, sa_t: torch.Tensor, b: torch.Tensor, sb: torch.Tensor,
                  out: torch.Tensor | None = None, *, stages: int = WIDE_STAGES, sms: int | None = None) -> torch.Tensor:
    """gemm_fp8's product by r2_wide.cu (128 x 256 tiles, persistent grid): a (M, K) and b (N, K) float8_e4m3fn,
    K-major; sa_t (K // 128, M) fp32; sb (N // 128, K // 128) fp32; returns bf16 (M, N) (`out` if given). M, N, K
    multiples of 128 (gemm_fp8's checks). stages: the ring's depth (wide_cubin). sms: CTAs of the persistent grid
    (default: the device's SM count; fewer make each CTA walk more tiles — the tests use that)."""
    shape = check_inputs(a, sa_t, b, sb, out)
    return _run_rung("gemm_fp8_wide", WIDE_KERNEL, lambda: wide_cubin(int(stages)),
                     lambda: wide_grid(shape, sm_count(a.device.index or 0) if sms is None else int(sms)),
                     wide_smem_bytes(int(stages)), shape, a, sa_t, b, sb, out)

# Rung 3's constants (r3_cluster.cu; tests/test_fp8_gemm_cluster.py reads them back from the source): rung 2's tile,
# ring and stage bytes (WIDE_*), in clusters of 2 CTAs along M that share each k-block's B tile by TMA multicast (each
# CTA loads one 128-row half, into both). Inputs, checks and maps are rung 1's; M / 128 may be odd (the last tile pair
# then has one live CTA, the other only keeps the shared ring turning: r3_cluster.cu's header).
CLUSTER_KERNEL = "fp8_gemm_cluster"
CLUSTER_SIZE = 2                      # CTAs per cluster (along M): the launch's cluster = 2
CLUSTER_STAGES = WIDE_STAGES          # FP8_STAGES of r3_cluster.cu: rung 2's 4 x 48 KiB ring
CLUSTER_GROUP_M = WIDE_GROUP_M        # FP8_GROUP_M: tile rows (8 tile pairs) per group of the persistent walk
CLUSTER_STAGE_TX = WIDE_STAGE_TX      # 49664 B on full[s]: own A + sa, both B halves (own TMA + the peer's multicast)
HAS_RUNG3 = has_kernel_file("fp8_gemm", "r3_cluster.cu")
LEFT_OUT_RUNG3 = ("rung 3 (kernels/fp8_gemm/r3_cluster.cu) promotes each k-block as the day's exercise asks, so the "
                  "student release leaves its source out; the notebook shows its recorded rows instead")


@lru_cache(maxsize=8)
def cluster_cubin(stages: int = CLUSTER_STAGES, group_m: int = CLUSTER_GROUP_M):
    """Rung 3's module (r3_cluster.cu), through the course's one compile helper (cached on disk too). stages: the
    ring's depth (FP8_STAGES, 2 .. CLUSTER_STAGES); group_m: tile rows per group of the walk (FP8_GROUP_M, even)."""
    if not 2 <= stages <= CLUSTER_STAGES:
        raise ValueError(f"stages: got {stages}, needs 2 .. {CLUSTER_STAGES} ({CLUSTER_STAGES + 1} x 48 KiB exceed "
                         "227 KiB)")
    if group_m < CLUSTER_SIZE or group_m % CLUSTER_SIZE:
        raise ValueError(f"group_m: got {group_m}, needs a positive multiple of {CLUSTER_SIZE} (groups of tile pairs)")
    return compile_cuda(kernel_file("fp8_gemm", "r3_cluster.cu", left_out=LEFT_OUT_RUNG3),
                        defines=_defines(FP8_STAGES=(stages, CLUSTER_STAGES), FP8_GROUP_M=(group_m, CLUSTER_GROUP_M)))


def cluster_units(shape) -> int:
    """Units of work of rung 3: tile pairs (two vertically adjacent 128 x 256 tiles, one per CTA of a cluster),
    ceil(M / 256) x ceil(N / 256)."""
    m, n, _ = shape
    return ceil_div(m // BM, CLUSTER_SIZE) * ceil_div(n, WIDE_BN)


def _pairs_grid(units: int, sms: int) -> tuple[int]:
    """A persistent grid of clusters of 2, in CTAs: 2 x min(units, SMs // 2) — one cluster per pair of SMs (66 on 132
    SMs), no more clusters than tile pairs (units). sms: at least 2 (one cluster)."""
    if sms < CLUSTER_SIZE:
        raise ValueError(f"sms: got {sms}, needs at least {CLUSTER_SIZE} (one cluster of {CLUSTER_SIZE} CTAs, one "
                         "per SM)")
    return (CLUSTER_SIZE * min(units, int(sms) // CLUSTER_SIZE),)


def cluster_grid(shape, sms: int) -> tuple[int]:
    """Rung 3's persistent grid (_pairs_grid over its tile pairs, cluster_units)."""
    return _pairs_grid(cluster_units(shape), sms)


def gemm_fp8_cluster(a: torch.Tensor, sa_t: torch.Tensor, b: torch.Tensor, sb: torch.Tensor,
                     out: torch.Tensor | None = None, *, stages: int = CLUSTER_STAGES,
                     sms: int | None = None) -> torch.Tensor:
    """gemm_fp8's product by r3_cluster.cu (rung 2's 128 x 256 tiles and persistent grid, in clusters of 2 CTAs along
    M sharing B by TMA multicast): a (M, K) and b (N, K) float8_e4m3fn, K-major; sa_t (K // 128, M) fp32; sb
    (N // 128, K // 128) fp32; returns bf16 (M, N) (`out` if given). M, N, K multiples of 128 (gemm_fp8's checks;
    M / 128 may be odd). stages: the ring's depth (cluster_cubin). sms: SMs the persistent grid may use (default: the
    device's SM count; 2 x (sms // 2) CTAs at most — fewer make each cluster walk more tile pairs: the tests do)."""
    shape = check_inputs(a, sa_t, b, sb, out)
    if sms is not None:
        cluster_grid(shape, int(sms))  # a bad sms is refused here (ValueError), before anything touches a GPU
    return _run_rung("gemm_fp8_cluster", CLUSTER_KERNEL, lambda: cluster_cubin(int(stages)),
                     lambda: cluster_grid(shape, sm_count(a.device.index or 0) if sms is None else int(sms)),
                     wide_smem_bytes(int(stages)), shape, a, sa_t, b, sb, out, cluster=CLUSTER_SIZE)

# Rung 4's constants (r4_overlap.cu; tests/test_fp8_gemm_overlap.py reads them back from the source): rung 1's tile,
# ring and stage bytes (BM, BN, STAGES, smem_bytes), walked persistently in rung 2's grouped order, each consumer
# with two promotion fragments (one k-block promoted while its next k-block's wgmmas run). Inputs, checks and maps
# are rung 1's.
OVERLAP_KERNEL = "fp8_gemm_overlap"
OVERLAP_STAGES = STAGES               # FP8_STAGES of r4_overlap.cu: rung 1's 6 x 32 KiB ring
OVERLAP_MIN_STAGES = 3                # a consumer holds 2 stages at once (r4_overlap.cu's static_assert)
OVERLAP_GROUP_M = WIDE_GROUP_M        # FP8_GROUP_M: tile rows per group of the persistent walk
OVERLAP_UNROLL = 16                   # FP8_UNROLL: k-blocks per step of the k-loop (the rest: its binary digits)
OVERLAP_MAX_UNROLL = 64               # r4_overlap.cu's static_assert (a power of two, 2 .. 64)
HAS_RUNG4 = has_kernel_file("fp8_gemm", "r4_overlap.cu")
LEFT_OUT_RUNG4 = ("rung 4 (kernels/fp8_gemm/r4_overlap.cu) promotes each k-block as the day's exercise asks, so the "
                  "student release leaves its source out; the notebook shows its recorded rows instead")


def _overlap_build(source: str, left_out: str, stages: int, group_m: int, unroll: int, pairs: bool,
                   max_stages: int = OVERLAP_STAGES, over: str = "the scales"):
    """Rungs 4-6's module (their one producer and consumer, promote_overlap.cuh; the same tunables), through the
    course's one compile helper, after the tunables are checked: stages 3 .. max_stages (the file's default; more
    stages and `over` exceed 227 KiB); group_m at least 1 (pairs: a positive multiple of 2, whole tile pairs); unroll
    a power of two, 2 .. OVERLAP_MAX_UNROLL."""
    if not OVERLAP_MIN_STAGES <= stages <= max_stages:
        raise ValueError(f"stages: got {stages}, needs {OVERLAP_MIN_STAGES} .. {max_stages} (a consumer holds 2 "
                         f"stages; {max_stages + 1} x 32 KiB and {over} exceed 227 KiB)")
    if pairs and (group_m < CLUSTER_SIZE or group_m % CLUSTER_SIZE):
        raise ValueError(f"group_m: got {group_m}, needs a positive multiple of {CLUSTER_SIZE} (whole tile pairs)")
    if group_m < 1:
        raise ValueError(f"group_m: got {group_m}, needs at least 1")
    if not 2 <= unroll <= OVERLAP_MAX_UNROLL or unroll & (unroll - 1):
        raise ValueError(f"unroll: got {unroll}, needs a power of two, 2 .. {OVERLAP_MAX_UNROLL} (k-blocks per "
                         "iteration of the k-loop)")
    return compile_cuda(kernel_file("fp8_gemm", source, left_out=left_out),
                        defines=_defines(FP8_STAGES=(stages, max_stages), FP8_GROUP_M=(group_m, OVERLAP_GROUP_M),
                                         FP8_UNROLL=(unroll, OVERLAP_UNROLL)))


@lru_cache(maxsize=8)
def overlap_cubin(stages: int = OVERLAP_STAGES, group_m: int = OVERLAP_GROUP_M, unroll: int = OVERLAP_UNROLL):
    """Rung 4's module (r4_overlap.cu), cached on disk too. stages: the ring's depth (FP8_STAGES, 3 ..
    OVERLAP_STAGES); group_m: tile rows per group of the walk (FP8_GROUP_M); unroll: k-blocks per iteration of the
    k-loop (FP8_UNROLL, a power of two 2 .. 64: unroll - 1 of every unroll promotions overlapped)."""
    return _overlap_build("r4_overlap.cu", LEFT_OUT_RUNG4, stages, group_m, unroll, pairs=False)


def overlap_grid(shape, sms: int) -> tuple[int]:
    """Rung 4's persistent grid: one CTA per SM (rung 1's 384 threads and 196 KiB: one fits), no more than the
    (M / 128) x (N / 128) tiles."""
    if sms < 1:
        raise ValueError(f"sms: got {sms}, needs at least 1")
    m, n, _ = shape
    return (min((m // BM) * (n // BN), int(sms)),)


def gemm_fp8_overlap(a: torch.Tensor, sa_t: torch.Tensor, b: torch.Tensor, sb: torch.Tensor,
                     out: torch.Tensor | None = None, *, stages: int = OVERLAP_STAGES,
                     unroll: int = OVERLAP_UNROLL, sms: int | None = None) -> torch.Tensor:
    """gemm_fp8's product by r4_overlap.cu (rung 1's 128 x 128 tiles, persistent, a promotion overlapped with the
    next k-block's wgmmas): a (M, K) and b (N, K) float8_e4m3fn, K-major; sa_t (K // 128, M) fp32; sb
    (N // 128, K // 128) fp32; returns bf16 (M, N) (`out` if given). M, N, K multiples of 128 (gemm_fp8's checks).
    stages, unroll: the ring's depth and the k-loop's step (overlap_cubin). sms: CTAs of the persistent grid (default:
    the device's SM count)."""
    shape = check_inputs(a, sa_t, b, sb, out)
    if sms is not None:
        overlap_grid(shape, int(sms))  # a bad sms is refused here (ValueError), before anything touches a GPU
    return _run_rung("gemm_fp8_overlap", OVERLAP_KERNEL, lambda: overlap_cubin(int(stages), unroll=int(unroll)),
                     lambda: overlap_grid(shape, sm_count(a.device.index or 0) if sms is None else int(sms)),
                     smem_bytes(int(stages)), shape, a, sa_t, b, sb, out)

# Rung 5's constants (r5_overlap_cluster.cu; tests/test_fp8_gemm_overlap_cluster.py reads them back from the source):
# rung 4's tile, ring, stage bytes and consumer, in clusters of 2 CTAs along M (rung 3's), each CTA multicasting half
# of the B tile — 64 rows, a box of B's map of its own — into both.
OVERLAP_CLUSTER_KERNEL = "fp8_gemm_overlap_cluster"
HALF_B_BOX = (BN // CLUSTER_SIZE, BK)  # B's box in rung 5: 64 rows x 128 e4m3, 128B-swizzled (8 KiB, 8 periods)
HAS_RUNG5 = has_kernel_file("fp8_gemm", "r5_overlap_cluster.cu")
LEFT_OUT_RUNG5 = ("rung 5 (kernels/fp8_gemm/r5_overlap_cluster.cu) promotes each k-block as the day's exercise asks, "
                  "so the student release leaves its source out; the notebook shows its recorded rows instead")


@lru_cache(maxsize=8)
def overlap_cluster_cubin(stages: int = OVERLAP_STAGES, group_m: int = OVERLAP_GROUP_M,
                          unroll: int = OVERLAP_UNROLL):
    """Rung 5's module (r5_overlap_cluster.cu), cached on disk too: stages, unroll as rung 4's (overlap_cubin);
    group_m: tile rows per group of the walk, a positive multiple of 2."""
    return _overlap_build("r5_overlap_cluster.cu", LEFT_OUT_RUNG5, stages, group_m, unroll, pairs=True)


def overlap_cluster_units(shape) -> int:
    """Units of work of rung 5: tile pairs (two vertically adjacent 128 x 128 tiles, one per CTA of a cluster),
    ceil(M / 256) x (N / 128)."""
    m, n, _ = shape
    return ceil_div(m // BM, CLUSTER_SIZE) * (n // BN)


def overlap_cluster_grid(shape, sms: int) -> tuple[int]:
    """Rung 5's persistent grid (_pairs_grid over its tile pairs, overlap_cluster_units), in clusters of 2."""
    return _pairs_grid(overlap_cluster_units(shape), sms)


def gemm_fp8_overlap_cluster(a: torch.Tensor, sa_t: torch.Tensor, b: torch.Tensor, sb: torch.Tensor,
                             out: torch.Tensor | None = None, *, stages: int = OVERLAP_STAGES,
                             unroll: int = OVERLAP_UNROLL, sms: int | None = None) -> torch.Tensor:
    """gemm_fp8's product by r5_overlap_cluster.cu (rung 4 in clusters of 2 CTAs along M, B's tile shared by TMA
    multicast): rung 1's inputs and checks; returns bf16 (M, N) (`out` if given). stages, unroll: as rung 4's. sms:
    SMs the persistent grid may use (default: the device's SM count; at least 2)."""
    shape = check_inputs(a, sa_t, b, sb, out)
    if sms is not None:
        overlap_cluster_grid(shape, int(sms))  # a bad sms is refused here (ValueError), before anything touches a GPU
    return _run_rung("gemm_fp8_overlap_cluster", OVERLAP_CLUSTER_KERNEL,
                     lambda: overlap_cluster_cubin(int(stages), unroll=int(unroll)),
                     lambda: overlap_cluster_grid(shape, sm_count(a.device.index or 0) if sms is None else int(sms)),
                     smem_bytes(int(stages)), shape, a, sa_t, b, sb, out, b_box=HALF_B_BOX, cluster=CLUSTER_SIZE)

# Rung 6's constants (r6_tma_store.cu; tests/test_fp8_gemm_tma_store.py reads them back from the source): rung 4's
# tiles, walk and consumer with one stage less (the staging of D takes its 32 KiB), D written by TMA stores.
TMA_STORE_KERNEL = "fp8_gemm_tma_store"
TMA_STORE_STAGES = 5                  # FP8_STAGES of r6_tma_store.cu: 5 x 32 KiB and 32 KiB of staging
D_BOX = (64, 64)                      # D's box: 64 rows x 64 bf16 (128 B: the 128B-swizzle span)
STAGING_BYTES = 2 * 2 * 64 * 64 * 2   # 2 consumers x 2 pieces of (64, 64) bf16
HAS_RUNG6 = has_kernel_file("fp8_gemm", "r6_tma_store.cu")
LEFT_OUT_RUNG6 = ("rung 6 (kernels/fp8_gemm/r6_tma_store.cu) promotes each k-block as the day's exercise asks, so "
                  "the student release leaves its source out; the notebook shows its recorded rows instead")


@lru_cache(maxsize=8)
def tma_store_cubin(stages: int = TMA_STORE_STAGES, group_m: int = OVERLAP_GROUP_M, unroll: int = OVERLAP_UNROLL):
    """Rung 6's module (r6_tma_store.cu), cached on disk too: stages 3 .. 5, group_m and unroll as rung 4's."""
    return _overlap_build("r6_tma_store.cu", LEFT_OUT_RUNG6, stages, group_m, unroll, pairs=False,
                          max_stages=TMA_STORE_STAGES, over="the scales and the 32 KiB staging of D")


def tma_store_smem_bytes(stages: int = TMA_STORE_STAGES) -> int:
    """Rung 6's dynamic shared memory (r6_tma_store.cu SMEM_DYNAMIC): rung 1's ring and scales, then the staging."""
    return smem_bytes(stages) + STAGING_BYTES


def gemm_fp8_tma_store(a: torch.Tensor, sa_t: torch.Tensor, b: torch.Tensor, sb: torch.Tensor,
                       out: torch.Tensor | None = None, *, stages: int = TMA_STORE_STAGES,
                       unroll: int = OVERLAP_UNROLL, sms: int | None = None) -> torch.Tensor:
    """gemm_fp8's product by r6_tma_store.cu (rung 4, D written through shared memory by TMA stores): rung 1's inputs
    and checks; returns bf16 (M, N) (`out` if given). stages (3 .. 5), unroll: the ring's depth and the k-loop's
    step. sms: CTAs of the persistent grid (default: the device's SM count)."""
    shape = check_inputs(a, sa_t, b, sb, out)
    if sms is not None:
        overlap_grid(shape, int(sms))  # a bad sms is refused here (ValueError), before anything touches a GPU
    return _run_rung("gemm_fp8_tma_store", TMA_STORE_KERNEL, lambda: tma_store_cubin(int(stages), unroll=int(unroll)),
                     lambda: overlap_grid(shape, sm_count(a.device.index or 0) if sms is None else int(sms)),
                     tma_store_smem_bytes(int(stages)), shape, a, sa_t, b, sb, out, d_box=D_BOX)


# The ladder past rung 1, in order: name -> (this copy has the source, why not if not, the call fn(a, sa_t, b, sb,
# out=None)) — what the rounds (rounds.py) and the bench (bench.py) time beside rung 1.
LADDER = {"wide": (HAS_RUNG2, LEFT_OUT_RUNG2, gemm_fp8_wide), "cluster": (HAS_RUNG3, LEFT_OUT_RUNG3, gemm_fp8_cluster),
          "overlap": (HAS_RUNG4, LEFT_OUT_RUNG4, gemm_fp8_overlap),
          "overlap_cluster": (HAS_RUNG5, LEFT_OUT_RUNG5, gemm_fp8_overlap_cluster),
          "tma_store": (HAS_RUNG6, LEFT_OUT_RUNG6, gemm_fp8_tma_store)}

__all__ = ["gemm_fp8", "check_inputs", "map_views", "block_scaled_cubin", "smem_bytes", "grid", "KERNEL", "HAS_RUNG1",
           "LEFT_OUT", "gemm_fp8_wide", "wide_cubin", "wide_smem_bytes", "wide_grid", "wide_tiles", "sm_count",
           "WIDE_KERNEL", "HAS_RUNG2"]
__all__ += ["gemm_fp8_cluster", "cluster_cubin", "cluster_grid", "cluster_units", "CLUSTER_KERNEL", "HAS_RUNG3"]
__all__ += ["gemm_fp8_overlap", "overlap_cubin", "overlap_grid", "OVERLAP_KERNEL", "HAS_RUNG4"]
__all__ += ["gemm_fp8_overlap_cluster", "overlap_cluster_cubin", "overlap_cluster_grid", "overlap_cluster_units",
            "OVERLAP_CLUSTER_KERNEL", "HAS_RUNG5"]
__all__ += ["gemm_fp8_tma_store", "tma_store_cubin", "tma_store_smem_bytes", "TMA_STORE_KERNEL", "HAS_RUNG6", "LADDER"]
