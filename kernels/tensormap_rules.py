"""The rules of a tiled tensor map, in words: the driver's (cuTensorMapEncodeTiled) and cuda.core's stricter CCCL
ones, one function per group, each returning the rules a map breaks (kernels.tensormap.validate_tiled gathers them)."""

from __future__ import annotations

from math import prod

DRIVER_RULE = "driver rule for cuTensorMapEncodeTiled"
CCCL_RULE = ("cuda.core rule: it builds the map through CCCL's make_tma_descriptor, which is stricter than "
             "the driver")

MAX_RANK = 5
MAX_GLOBAL_DIM = 1 << 32          # globalDim[i] <= 2^32
MAX_GLOBAL_STRIDE = 1 << 40       # globalStrides[i] < 2^40
MAX_BOX_DIM = 256
MAX_ELEMENT_STRIDE = 8
H100_SMEM_OPTIN_BYTES = 227 * 1024  # cudaDevAttrMaxSharedMemoryPerBlockOptin on sm_90 (CUDA C++ Programming Guide)

# Swizzle mode -> the span (bytes) whose 16-byte chunks it permutes; the box's inner row must fit in it.
SWIZZLE_SPAN = {"none": None, "32B": 32, "64B": 64, "128B": 128}
INTERLEAVES = ("none", "16B", "32B")
L2_PROMOTIONS = ("none", "64B", "128B", "256B")
OOB_FILLS = ("none", "nan")       # "none" fills out-of-bounds elements with zeros
ELEMENT_SIZES = (1, 2, 4, 8)


def _drv(rank: int, i: int) -> str:
    """The driver's index of PyTorch dimension i (the driver counts from the innermost)."""
    return f"driver dim {rank - 1 - i}"


def byte_strides(shape, strides_bytes, dtype_bytes: int) -> tuple:
    """Strides in bytes, PyTorch order; None means contiguous."""
    if strides_bytes is not None:
        return tuple(int(s) for s in strides_bytes)
    st = [dtype_bytes] * len(shape)
    for i in range(len(shape) - 2, -1, -1):
        st[i] = st[i + 1] * shape[i + 1]
    return tuple(st)


def mode_rules(swizzle, swz, interleave, inter, oob_fill, oob, dtype_bytes: int, is_float: bool) -> list[str]:
    """The enums and the element size."""
    v = []
    if swz not in SWIZZLE_SPAN:
        v.append(f"swizzle = {swizzle!r}: must be one of none, 32B, 64B, 128B ({DRIVER_RULE}; the 128B_ATOM "
                 "modes are Blackwell-only)")
    if inter not in INTERLEAVES:
        v.append(f"interleave = {interleave!r}: must be one of none, 16B, 32B ({DRIVER_RULE})")
    if oob not in OOB_FILLS:
        v.append(f"oob_fill = {oob_fill!r}: must be 'none' (zero fill) or 'nan' ({DRIVER_RULE})")
    if dtype_bytes not in ELEMENT_SIZES:
        v.append(f"dtype_bytes = {dtype_bytes}: TMA element types are 1, 2, 4 or 8 bytes ({DRIVER_RULE})")
    if oob == "nan" and not is_float:
        v.append("oob_fill = 'nan': NaN_REQUEST_ZERO_FMA fill needs a floating-point data type; this tensor's "
                 f"type is not ({DRIVER_RULE})")
    if inter == "32B" and swz != "32B":
        v.append(f"interleave = '32B' with swizzle = '{swz}': INTERLEAVE_32B requires SWIZZLE_32B ({DRIVER_RULE})")
    return v


def rank_address_dim_rules(shape, inter, base_ptr: int) -> list[str]:
    """The rank, the global address's alignment, each global dimension."""
    v = []
    rank = len(shape)
    min_rank = 3 if inter in ("16B", "32B") else 1
    if not (min_rank <= rank <= MAX_RANK):
        extra = " when interleaved" if min_rank == 3 else ""
        v.append(f"rank = {rank} (shape {shape}): a tensor map has {min_rank}..{MAX_RANK} dimensions{extra} "
                 f"({DRIVER_RULE}); merge contiguous dimensions with .view() or split the work")
    align = 32 if inter == "32B" else 16
    off = int(base_ptr) % align
    if off:
        v.append(f"global address 0x{int(base_ptr):x} is not {align}-byte aligned: TMA needs the tensor's base "
                 f"{align}-byte aligned (got offset {off} mod {align}); a view that starts mid-row "
                 f"(x[:, 1:], or x[1:] of a 1-D bf16 tensor) moves it — copy it with .contiguous() or slice "
                 f"in multiples of {align} bytes ({DRIVER_RULE})")
    for i, s in enumerate(shape):
        if not (1 <= s <= MAX_GLOBAL_DIM):
            v.append(f"shape[{i}] = {s} ({_drv(rank, i)}): each global dimension must be 1..2^32 elements "
                     f"({DRIVER_RULE})")
    return v


def stride_rules(shape, strides, dtype_bytes: int, inter) -> list[str]:
    """One stride per dimension; the innermost contiguous; each outer one a multiple of 16 (32) bytes, < 2^40."""
    rank = len(shape)
    if len(strides) != rank:
        return [f"strides_bytes has {len(strides)} entries for a rank-{rank} shape: give one stride (bytes) "
                "per dimension, PyTorch order"]
    v = []
    if rank >= 1 and strides[-1] != dtype_bytes:
        v.append(f"strides_bytes[{rank - 1}] = {strides[-1]} ({_drv(rank, rank - 1)}): the innermost dimension "
                 f"must be contiguous (stride = element size {dtype_bytes} B) — TMA has no innermost stride; "
                 f"a transposed view needs .contiguous() or a map of the transpose ({DRIVER_RULE})")
    smult = 32 if inter == "32B" else 16
    for i in range(rank - 1):
        s = strides[i]
        if s % smult != 0:
            v.append(f"strides_bytes[{i}] = {s} ({_drv(rank, i)}, globalStrides[{rank - 2 - i}]): each outer stride "
                     f"must be a multiple of {smult} bytes (got {s} mod {smult} = {s % smult}); e.g. a bf16 "
                     f"row of {s // max(dtype_bytes, 1)} elements — pad the row to a multiple of "
                     f"{smult // max(dtype_bytes, 1) or 1} elements ({DRIVER_RULE})")
        if not (0 <= s < MAX_GLOBAL_STRIDE):
            v.append(f"strides_bytes[{i}] = {s} ({_drv(rank, i)}): each outer stride must be in 0..2^40 - 1 bytes "
                     f"({DRIVER_RULE})")
    return v


def box_rules(shape, box, dtype_bytes: int, inter, swz) -> list[str]:
    """One box size per dimension, each 1..256; the inner box a multiple of 16 bytes and within the swizzle span."""
    rank = len(shape)
    if len(box) != rank:
        return [f"box_dim has {len(box)} entries for a rank-{rank} tensor (shape {shape}): give one box size "
                f"per dimension, PyTorch order ({DRIVER_RULE})"]
    v = []
    for i, b in enumerate(box):
        if not (1 <= b <= MAX_BOX_DIM):
            v.append(f"box_dim[{i}] = {b} ({_drv(rank, i)}): each box dimension must be 1..{MAX_BOX_DIM} elements "
                     f"({DRIVER_RULE}); load a bigger tile as several boxes")
    if rank and dtype_bytes in ELEMENT_SIZES:
        inner_bytes = box[-1] * dtype_bytes
        if inter == "none" and inner_bytes % 16 != 0:
            v.append(f"box_dim[{rank - 1}] = {box[-1]} ({_drv(rank, rank - 1)}): the box's inner dimension is "
                     f"{inner_bytes} bytes; with no interleave it must be a multiple of 16 bytes "
                     f"({16 // dtype_bytes} elements of {dtype_bytes} B) ({DRIVER_RULE})")
        span = SWIZZLE_SPAN.get(swz)
        if inter == "none" and span is not None and inner_bytes > span:
            v.append(f"box_dim[{rank - 1}] = {box[-1]} ({_drv(rank, rank - 1)}) with swizzle {swz}: the box's inner "
                     f"dimension is {inner_bytes} bytes but {swz} swizzle permutes 16-byte chunks within a "
                     f"{span}-byte span, so the inner box must be <= {span} bytes "
                     f"({span // dtype_bytes} elements) ({DRIVER_RULE})")
    return v


def element_stride_rules(rank: int, es) -> list[str]:
    if len(es) != rank:
        return [f"element_strides has {len(es)} entries for a rank-{rank} tensor ({DRIVER_RULE})"]
    return [f"element_strides[{i}] = {e} ({_drv(rank, i)}): each element stride must be 1..{MAX_ELEMENT_STRIDE} "
            f"({DRIVER_RULE})" for i, e in enumerate(es) if not (1 <= e <= MAX_ELEMENT_STRIDE)]


def cccl_rules(shape, strides, box, es, dtype_bytes: int, inter, max_smem_bytes: int) -> list[str]:
    """cuda.core / CCCL's stricter rules: box and element strides within the tensor, no overlapping dimensions, the
    box within the shared memory a block can opt in to."""
    v = []
    rank = len(shape)
    for i, (b, s) in enumerate(zip(box, shape)):
        if 1 <= b <= MAX_BOX_DIM and b > s >= 1:
            v.append(f"box_dim[{i}] = {b} > shape[{i}] = {s} ({_drv(rank, i)}): each box dimension must be <= the "
                     f"tensor's size there ({CCCL_RULE}; the driver alone would allow it and zero-fill)")
    for i, (e, s) in enumerate(zip(es, shape)):
        if (i != rank - 1 or inter != "none") and 1 <= e <= MAX_ELEMENT_STRIDE and e > s >= 1:
            v.append(f"element_strides[{i}] = {e} > shape[{i}] = {s} ({_drv(rank, i)}): ({CCCL_RULE})")
    for i in range(rank - 1):
        if strides[i] != 0 and strides[i] < shape[i + 1] * strides[i + 1]:
            v.append(f"strides_bytes[{i}] = {strides[i]} < shape[{i + 1}] * strides_bytes[{i + 1}] = "
                     f"{shape[i + 1] * strides[i + 1]}: dimensions overlap or are permuted; each stride must be "
                     f"0 or cover the next dimension ({CCCL_RULE}); make the tensor .contiguous()")
    if dtype_bytes in ELEMENT_SIZES and all(1 <= b <= MAX_BOX_DIM for b in box):
        nbytes = prod(box) * dtype_bytes
        if nbytes > max_smem_bytes:
            v.append(f"box_dim {box}: the box is {nbytes} bytes, more than the {max_smem_bytes} bytes of "
                     f"shared memory a block can opt in to ({CCCL_RULE})")
    return v
