"""TMA tensor maps: the driver's rules checked in Python, then a real descriptor built through cuda.core.

A TMA load (`cp.async.bulk.tensor`, SASS `UTMALDG`) reads a *box* of a tensor described by a 128-byte
`CUtensorMap`. The host builds that descriptor with the driver's `cuTensorMapEncodeTiled`, which answers a bad
field with a bare `CUDA_ERROR_INVALID_VALUE`. This module checks every documented rule first, in Python, so the
student reads which field, which dimension, which value and which rule — on CPU too.

Two orders of dimensions (read this once, carefully)
----------------------------------------------------
Everything you pass here is in **PyTorch order**: outermost first, like `tensor.shape` / `tensor.stride()`. For a
row-major (M, K) matrix: `shape=(M, K)`, `box_dim=(BM, BK)`.

The driver wants **innermost first** (its dimension 0 is the contiguous one):

    PyTorch index  i            ->  driver index  rank - 1 - i
    shape    (M, K)             ->  globalDim     {K, M}
    stride() (K, 1) * elt bytes ->  globalStrides {K * elt}          (rank - 1 of them: the innermost is implicit)
    box_dim  (BM, BK)           ->  boxDim        {BK, BM}

cuda.core's `StridedMemoryView.as_tensor_map(box_dim=...)` also takes `box_dim` (and `element_strides`) in the
tensor's own row-major order and reverses them itself (cuda.core 1.2.x docstring: "Specified in the same
(row-major) order as the tensor shape"), so `make_tensor_map` passes `box_dim` through unchanged. Error messages
name the PyTorch index and, in brackets, the driver's.

The rules (CUDA driver API, "Tensor Map Object Management", cuTensorMapEncodeTiled)
------------------------------------------------------------------------------------
- tensorRank 1..5; 3..5 when interleaved.
- globalAddress 16-byte aligned (32-byte with CU_TENSOR_MAP_INTERLEAVE_32B).
- globalDim[i] in 1..2^32.
- globalStrides[i] (bytes, the rank - 1 outer dimensions) a multiple of 16 (32 with INTERLEAVE_32B) and < 2^40.
  The innermost dimension has no stride field: it must be contiguous.
- boxDim[i] in 1..256; with INTERLEAVE_NONE, boxDim[0] * elementSize a multiple of 16 bytes.
- elementStrides[i] in 1..8 (elementStrides[0] is ignored with INTERLEAVE_NONE).
- swizzle 32B / 64B / 128B (with INTERLEAVE_NONE): the box's inner dimension in bytes <= 32 / 64 / 128.
- INTERLEAVE_32B requires SWIZZLE_32B.
- oobFill NAN_REQUEST_ZERO_FMA only for floating-point data types.
- element sizes: 1, 2, 4 or 8 bytes (uint8 .. float64; the packed 4/6-bit types are not used in this course).

CCCL's stricter rules (`cuda_core_rules=True`)
----------------------------------------------
cuda.core's source encodes through CCCL's `cuda::make_tma_descriptor` when the wheel was built with it, and
calls cuTensorMapEncodeTiled directly otherwise. CCCL adds: each box dimension <= the tensor's size in that
dimension; each element stride <= that size; strides that do not overlap (stride[i] == 0 or
stride[i] >= shape[i+1] * stride[i+1]); the whole box fits the device's opt-in shared memory per block (227 KB on
H100). The cuda.core 1.2.0 wheel on the course's H100 image takes the driver path (checked on an H100: a
(64, 32) float32 box over a (32, 32) tensor is accepted, as the driver allows), so these rules are off by
default; `make_tensor_map` re-checks with them only if cuda.core reports a CCCL failure, to explain it.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from math import prod
from typing import Any, Sequence

from .tensormap_rules import (DRIVER_RULE, H100_SMEM_OPTIN_BYTES, INTERLEAVES, L2_PROMOTIONS, OOB_FILLS, box_rules,
                              byte_strides, cccl_rules, element_stride_rules, mode_rules, rank_address_dim_rules,
                              stride_rules)

__all__ = [
    "TensorMapError",
    "TensorMapUnavailable",
    "TiledParams",
    "validate_tiled",
    "validate_tensor",
    "make_tensor_map",
    "cuda_core_enums",
]


class TensorMapError(ValueError):
    """A tensor map that the driver (or cuda.core) would reject. `.violations` lists every broken rule."""

    def __init__(self, violations: Sequence[str]):
        self.violations = list(violations)
        if len(self.violations) == 1:
            msg = self.violations[0]
        else:
            msg = f"{len(self.violations)} tensor map rules broken:\n" + "\n".join(
                f"  - {v}" for v in self.violations)
        super().__init__(msg)


class TensorMapUnavailable(RuntimeError):
    """The rules passed but no descriptor can be built here (no GPU, CPU tensor, pre-Hopper device)."""


def _norm_swizzle(s: Any) -> str:
    if s is None:
        return "none"
    name = getattr(s, "name", None)  # a cuda.core TensorMapSwizzle member (an IntEnum: test it before int)
    if isinstance(name, str):
        return {"NONE": "none", "SWIZZLE_32B": "32B", "SWIZZLE_64B": "64B", "SWIZZLE_128B": "128B"}.get(name, name)
    if isinstance(s, int) and not isinstance(s, bool):
        return "none" if s == 0 else f"{s}B"
    t = str(s).strip()
    return "none" if t.lower() == "none" else t.upper().replace("BYTES", "B")


def _norm_choice(v: Any, choices: Sequence[str]) -> str:
    if v is None:
        return "none"
    name = getattr(v, "name", None)
    if isinstance(name, str):  # cuda.core enum member (an IntEnum: test it before int)
        t = name.replace("INTERLEAVE_", "").replace("L2_", "")
        t = {"NONE": "none", "NAN_REQUEST_ZERO_FMA": "nan"}.get(t, t)
    elif isinstance(v, int) and not isinstance(v, bool):
        t = "none" if v == 0 else f"{v}B"
    else:
        t = str(v).strip()
    for c in choices:
        if t.lower() == c.lower():
            return c
    return t


@dataclass(frozen=True)
class TiledParams:
    """The validated fields, in the driver's order (innermost first), plus the PyTorch-order inputs."""

    rank: int
    global_address: int
    element_bytes: int
    global_dim: tuple[int, ...]        # driver order: [0] is the contiguous dimension
    global_strides: tuple[int, ...]    # driver order, bytes, rank - 1 entries (dims 1..rank-1)
    box_dim: tuple[int, ...]           # driver order
    element_strides: tuple[int, ...]   # driver order
    interleave: str
    swizzle: str
    oob_fill: str
    shape: tuple[int, ...] = field(default=())         # PyTorch order, as given
    box_dim_torch: tuple[int, ...] = field(default=())  # PyTorch order, as given

    @property
    def box_bytes(self) -> int:
        """Bytes one TMA load of this box writes to shared memory (the mbarrier's expect_tx count)."""
        return prod(self.box_dim) * self.element_bytes

    @property
    def box_inner_bytes(self) -> int:
        return self.box_dim[0] * self.element_bytes

    def describe(self) -> str:
        """Field-by-field table of what cuTensorMapEncodeTiled receives (for the notebook)."""
        lines = [
            f"tensorRank     = {self.rank}",
            f"globalAddress  = 0x{self.global_address:x}  (mod 16 = {self.global_address % 16})",
            f"globalDim      = {{{', '.join(map(str, self.global_dim))}}}   innermost first; "
            f"PyTorch shape {self.shape}",
            f"globalStrides  = {{{', '.join(map(str, self.global_strides))}}}   bytes, dims 1..{self.rank - 1}",
            f"boxDim         = {{{', '.join(map(str, self.box_dim))}}}   innermost first; "
            f"PyTorch box_dim {self.box_dim_torch}",
            f"elementStrides = {{{', '.join(map(str, self.element_strides))}}}",
            f"element size   = {self.element_bytes} B; box = {self.box_bytes} B "
            f"(inner row {self.box_inner_bytes} B)",
            f"interleave = {self.interleave}, swizzle = {self.swizzle}, oobFill = {self.oob_fill}",
        ]
        return "\n".join(lines)


def validate_tiled(
    shape: Sequence[int],
    strides_bytes: Sequence[int] | None,
    dtype_bytes: int,
    box_dim: Sequence[int],
    *,
    base_ptr: int,
    element_strides: Sequence[int] | None = None,
    swizzle: Any = "none",
    interleave: Any = "none",
    oob_fill: Any = "none",
    is_float: bool = True,
    cuda_core_rules: bool = False,
    max_smem_bytes: int = H100_SMEM_OPTIN_BYTES,
) -> TiledParams:
    """Check a tiled tensor map against cuTensorMapEncodeTiled's rules; return it in the driver's order.

    shape, strides_bytes, box_dim, element_strides: PyTorch order (outermost first). strides_bytes has one
    entry per dimension (tensor.stride() times the element size; None means contiguous); its last entry must
    equal dtype_bytes, because TMA has no stride for the innermost dimension. base_ptr: the tensor's first byte
    (tensor.data_ptr()). swizzle: "none" | "32B" | "64B" | "128B" (or 32/64/128, or a cuda.core enum).
    interleave: "none" | "16B" | "32B". oob_fill: "none" (zeros) | "nan". is_float: whether the element type
    is floating point (NaN fill needs it). cuda_core_rules: also check the stricter rules of cuda.core/CCCL.

    Raises TensorMapError listing every violation (not just the first).
    """
    shape = tuple(int(s) for s in shape)
    box = tuple(int(b) for b in box_dim)
    rank = len(shape)
    swz = _norm_swizzle(swizzle)
    inter = _norm_choice(interleave, INTERLEAVES)
    oob = _norm_choice(oob_fill, OOB_FILLS)
    strides = byte_strides(shape, strides_bytes, dtype_bytes)
    es = tuple(int(e) for e in element_strides) if element_strides is not None else (1,) * rank
    v = mode_rules(swizzle, swz, interleave, inter, oob_fill, oob, dtype_bytes, is_float)
    v += rank_address_dim_rules(shape, inter, base_ptr)
    v += stride_rules(shape, strides, dtype_bytes, inter)
    v += box_rules(shape, box, dtype_bytes, inter, swz)
    v += element_stride_rules(rank, es)
    if cuda_core_rules and len(box) == rank and len(strides) == rank and len(es) == rank:
        v += cccl_rules(shape, strides, box, es, dtype_bytes, inter, max_smem_bytes)
    if v:
        raise TensorMapError(v)
    return TiledParams(
        rank=rank,
        global_address=int(base_ptr),
        element_bytes=int(dtype_bytes),
        global_dim=tuple(reversed(shape)),
        global_strides=tuple(strides[rank - 2 - j] for j in range(rank - 1)),
        box_dim=tuple(reversed(box)),
        element_strides=tuple(reversed(es)),
        interleave=inter,
        swizzle=swz,
        oob_fill=oob,
        shape=shape,
        box_dim_torch=box,
    )


# torch dtype name -> (cuda.core TensorMapDataType member, floating point?). TMA has no signed 8/16-bit or fp8
# type: those are moved as raw unsigned bits of the same width (a copy does not care; OOB fill is zero bits).
_TORCH_TO_TMA = {
    "uint8": ("UINT8", False), "int8": ("UINT8", False), "bool": ("UINT8", False),
    "float8_e4m3fn": ("UINT8", False), "float8_e5m2": ("UINT8", False),
    "uint16": ("UINT16", False), "int16": ("UINT16", False),
    "uint32": ("UINT32", False), "int32": ("INT32", False),
    "uint64": ("UINT64", False), "int64": ("INT64", False),
    "float16": ("FLOAT16", True), "bfloat16": ("BFLOAT16", True),
    "float32": ("FLOAT32", True), "float64": ("FLOAT64", True),
}


def _torch_dtype_name(dtype: Any) -> str:
    return str(dtype).replace("torch.", "")


def validate_tensor(
    tensor: Any,
    box_dim: Sequence[int],
    *,
    element_strides: Sequence[int] | None = None,
    swizzle: Any = "none",
    interleave: Any = "none",
    oob_fill: Any = "none",
    cuda_core_rules: bool = False,
) -> TiledParams:
    """validate_tiled() on a torch tensor's own shape, strides, dtype and data_ptr (works for CPU tensors)."""
    name = _torch_dtype_name(tensor.dtype)
    if name not in _TORCH_TO_TMA:
        raise TensorMapError([f"dtype {tensor.dtype}: no TMA data type for it ({DRIVER_RULE}; supported: "
                              f"{', '.join(sorted(_TORCH_TO_TMA))})"])
    esize = tensor.element_size()
    return validate_tiled(
        tuple(tensor.shape), tuple(s * esize for s in tensor.stride()), esize, box_dim,
        base_ptr=tensor.data_ptr(), element_strides=element_strides, swizzle=swizzle, interleave=interleave,
        oob_fill=oob_fill, is_float=_TORCH_TO_TMA[name][1], cuda_core_rules=cuda_core_rules,
    )


def cuda_core_enums() -> dict[str, Any]:
    """cuda.core's tensor-map enums (they live in cuda.core._tensor_map in 1.2.x; not re-exported at top level)."""
    try:
        import cuda.core._tensor_map as tm
    except ImportError:  # a future release may export them publicly
        import cuda.core as tm  # type: ignore[no-redef]
    names = ("TensorMapDataType", "TensorMapSwizzle", "TensorMapInterleave", "TensorMapL2Promotion",
             "TensorMapOOBFill")
    return {n: getattr(tm, n) for n in names}


def _strided_memory_view():
    try:
        from cuda.core.utils import StridedMemoryView  # cuda.core 1.2.x
    except ImportError:
        from cuda.core import StridedMemoryView  # type: ignore[no-redef,attr-defined]
    return StridedMemoryView


def make_tensor_map(
    tensor: Any,
    box_dim: Sequence[int],
    *,
    swizzle: Any = "none",
    oob_fill: Any = "none",
    l2_promotion: Any = "none",
    element_strides: Sequence[int] | None = None,
    interleave: Any = "none",
):
    """A cuda.core TensorMapDescriptor for `tensor` (a CUDA torch tensor), boxes of `box_dim` (PyTorch order).

    Validates first (the driver's rules) and raises TensorMapError listing every broken rule; raises
    TensorMapUnavailable when the rules pass but no descriptor can be built here (CPU tensor, no
    driver, not sm_90+). The descriptor is passed to a kernel as a `const __grid_constant__ CUtensorMap`
    parameter through cuda.core's launch.
    """
    rules = dict(element_strides=element_strides, swizzle=swizzle, interleave=interleave, oob_fill=oob_fill)
    params = validate_tensor(tensor, box_dim, **rules)
    l2 = _norm_choice(l2_promotion, L2_PROMOTIONS)
    if l2 not in L2_PROMOTIONS:
        raise TensorMapError([f"l2_promotion = {l2_promotion!r}: must be one of {', '.join(L2_PROMOTIONS)} "
                              f"({DRIVER_RULE})"])
    if not getattr(tensor, "is_cuda", False):
        raise TensorMapUnavailable(
            f"make_tensor_map needs a CUDA tensor on an sm_90 GPU (got a {tensor.device} tensor). The rules were "
            "checked here and pass:\n" + params.describe())
    try:
        from cuda.core import Device
        enums = cuda_core_enums()
        smv = _strided_memory_view()
    except Exception as exc:  # noqa: BLE001
        raise TensorMapUnavailable(f"cuda.core tensor maps are unavailable: {exc}") from exc

    dev = Device(tensor.device.index or 0)
    dev.set_current()  # the same primary context torch uses
    cc = tuple(dev.compute_capability)
    if cc < (9, 0):
        raise TensorMapUnavailable(f"tensor maps need compute capability 9.0+, {dev.name} is {cc[0]}.{cc[1]}")

    dt = enums["TensorMapDataType"][_TORCH_TO_TMA[_torch_dtype_name(tensor.dtype)][0]]
    sw = enums["TensorMapSwizzle"][{"none": "NONE", "32B": "SWIZZLE_32B", "64B": "SWIZZLE_64B",
                                     "128B": "SWIZZLE_128B"}[params.swizzle]]
    il = enums["TensorMapInterleave"][{"none": "NONE", "16B": "INTERLEAVE_16B",
                                        "32B": "INTERLEAVE_32B"}[params.interleave]]
    l2e = enums["TensorMapL2Promotion"][{"none": "NONE", "64B": "L2_64B", "128B": "L2_128B", "256B": "L2_256B"}[l2]]
    oob = enums["TensorMapOOBFill"][{"none": "NONE", "nan": "NAN_REQUEST_ZERO_FMA"}[params.oob_fill]]

    # stream_ptr=-1: no stream synchronisation; building a descriptor reads metadata only.
    view = smv.from_dlpack(tensor, stream_ptr=-1)
    # cuda.core takes box_dim / element_strides in the tensor's row-major (PyTorch) order and reverses them
    # for the driver itself, so they go through unchanged. data_type is explicit: cuda.core cannot infer
    # bfloat16 without ml_dtypes, and int8/fp8 travel as UINT8.
    try:
        return view.as_tensor_map(
            box_dim=tuple(int(b) for b in box_dim),
            element_strides=None if element_strides is None else tuple(int(e) for e in element_strides),
            data_type=dt, interleave=il, swizzle=sw, l2_promotion=l2e, oob_fill=oob,
        )
    except ValueError as exc:
        if "CCCL" in str(exc):  # a cuda.core built with CCCL: say which of CCCL's stricter rules failed
            validate_tensor(tensor, box_dim, cuda_core_rules=True, **rules)
        raise


# Descriptors are cached by (address, shape, strides, dtype, box, swizzle, device): building one costs tens of
# microseconds of host time, which must not land inside a timed repetition. A cached map of a freed tensor is still
# right for a new tensor at the same address with the same shape and strides (a map holds the address); cuda.core
# keeps the source tensor alive while its descriptor lives, so the cache is small. The one cache of the course:
# every topic's launcher asks it.
_MAPS: OrderedDict = OrderedDict()
_MAX_MAPS = 16  # a descriptor keeps its tensor alive: keep few


def cached_tensor_map(t, box, swizzle: str = "none"):
    """make_tensor_map(t, box, swizzle=...), cached (least recently used of _MAX_MAPS dropped first)."""
    key = (t.data_ptr(), tuple(t.shape), tuple(t.stride()), str(t.dtype), tuple(box), str(swizzle), str(t.device))
    m = _MAPS.get(key)
    if m is None:
        m = make_tensor_map(t, tuple(box), swizzle=swizzle)
        _MAPS[key] = m
        while len(_MAPS) > _MAX_MAPS:
            _MAPS.popitem(last=False)
    else:
        _MAPS.move_to_end(key)
    return m
