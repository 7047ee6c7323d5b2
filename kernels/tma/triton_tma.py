"""The same TMA copy in Triton, with tensor descriptors — host-side and device-side — and what Triton emits.

    copy_triton(x, y, box=(64, 64))                           # host: triton.tools.tensor_descriptor.TensorDescriptor
    copy_triton(x, y, box=(64, 64), device_descriptors=True)  # device: tl.make_tensor_descriptor in the kernel
    art = aot_compile("host", box=(64, 64))                   # sm_90a cubin + PTX, compiled ahead of time (no GPU)
    kernels.sass.path_evidence(art["cubin"], art["name"], require=["UTMALDG", "UTMASTG"])

One program copies one (BM, BN) box: `desc.load([r, c])` becomes a TMA load (UTMALDG) into shared memory and
an mbarrier wait, the box goes through registers, and `desc.store` writes it back to shared memory and issues a
TMA store (UTMASTG). Out-of-bounds parts of edge boxes read as zero and are not stored, as in the CUDA kernels.

Host descriptors: the launcher encodes the tensor map (cuTensorMapEncodeTiled) before the launch and passes it
by value, like the CUDA kernels. Device descriptors: the kernel builds the 128-byte map itself in a global scratch
buffer (`tensormap.replace.*`, then `tensormap.cp_fenceproxy` and `fence.proxy.tensormap::generic.acquire`), so it
needs `triton.set_allocator`; this costs a little per program but lets the map depend on run-time values.

CPU: with TRITON_INTERPRET=1 set *before* this module is imported, the same kernels run in Triton's interpreter on
CPU tensors (keep grids tiny: about a millisecond per program instance). `aot_compile` works on CPU in either
mode: Triton compiles for GPUTarget("cuda", 90, 32) with its bundled ptxas and needs no driver.
Versions: written against Triton 3.6 (the H100 image) and 3.9 (this course's CPU venv); both have
`tl.make_tensor_descriptor`, `TensorDescriptor.from_tensor` and the "tensordesc<dtype[BM, BN]>" signature type.
"""

from __future__ import annotations

import os

import triton
import triton.language as tl
from ..compile import compile_triton

_DTYPE_NAMES = {"torch.bfloat16": "bf16", "torch.float16": "fp16", "torch.float32": "fp32"}


def _tma_copy(in_desc, out_desc, BM: tl.constexpr, BN: tl.constexpr):
    r = tl.program_id(0) * BM
    c = tl.program_id(1) * BN
    box = in_desc.load([r, c])  # TMA load of the box at (r, c) -> shared memory -> registers
    out_desc.store([r, c], box)  # registers -> shared memory -> TMA store (clipped at the edges)


def _tma_copy_device(x_ptr, y_ptr, M, N, BM: tl.constexpr, BN: tl.constexpr):
    # New: the descriptors are built on the device from a pointer, shape and strides (row stride N elements).
    x_desc = tl.make_tensor_descriptor(x_ptr, shape=[M, N], strides=[N, 1], block_shape=[BM, BN])
    y_desc = tl.make_tensor_descriptor(y_ptr, shape=[M, N], strides=[N, 1], block_shape=[BM, BN])
    r = tl.program_id(0) * BM
    c = tl.program_id(1) * BN
    y_desc.store([r, c], x_desc.load([r, c]))


# Launchable kernels: JIT functions on a GPU, interpreted functions under TRITON_INTERPRET=1.
tma_copy_kernel = triton.jit(_tma_copy)
tma_copy_device_kernel = triton.jit(_tma_copy_device)

KERNELS = {"host": _tma_copy, "device": _tma_copy_device}
NUM_WARPS = 4
LAST_COMPILED: dict = {}  # "host" / "device" -> the JIT's CompiledKernel of the last GPU launch (its cubin, PTX)


def interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


def _alloc(size: int, alignment: int, stream):
    """Global scratch for device-side tensor maps (128 bytes per descriptor per program)."""
    import torch

    return torch.empty(size, dtype=torch.int8, device="cpu" if interpreting() else "cuda")


def copy_triton(x, y, *, box=(64, 64), device_descriptors: bool = False, num_warps: int = NUM_WARPS):
    """y = x box by box; x, y row-major 2-D (CUDA tensors, or CPU tensors under TRITON_INTERPRET=1)."""
    from triton.tools.tensor_descriptor import TensorDescriptor

    rows, cols = x.shape
    bm, bn = box
    grid = (triton.cdiv(rows, bm), triton.cdiv(cols, bn))
    if device_descriptors:
        triton.set_allocator(_alloc)
        k = tma_copy_device_kernel[grid](x, y, rows, cols, BM=bm, BN=bn, num_warps=num_warps)
    else:
        k = tma_copy_kernel[grid](TensorDescriptor.from_tensor(x, [bm, bn]),
                                  TensorDescriptor.from_tensor(y, [bm, bn]), BM=bm, BN=bn, num_warps=num_warps)
    if hasattr(k, "asm"):  # a GPU launch returns the compiled kernel; the interpreter returns nothing
        LAST_COMPILED["device" if device_descriptors else "host"] = k
    return y


def aot_compile(kind: str = "host", *, box=(64, 64), dtype: str = "bf16", num_warps: int = NUM_WARPS,
                capability: int = 90) -> dict:
    """Compile one of the Triton copies ahead of time for sm_90a (no GPU needed) and return
    {"name", "cubin" (bytes), "ptx" (text), "shared" (bytes of shared memory), "triton" (version)}.

    The signature says what the launcher would have specialised on: for host descriptors the type
    "tensordesc<bf16[64, 64]>" (dtype and block shape), for device descriptors plain pointers and i32 sizes.
    """
    from triton.runtime.jit import JITFunction


    if kind not in KERNELS:
        raise ValueError(f"kind {kind!r}: choose one of {tuple(KERNELS)}")
    bm, bn = box
    fn = JITFunction(KERNELS[kind])  # a real JIT function even when TRITON_INTERPRET=1 is set
    if kind == "host":
        desc = f"tensordesc<{dtype}[{bm}, {bn}]>"
        signature = {"in_desc": desc, "out_desc": desc, "BM": "constexpr", "BN": "constexpr"}
    else:
        signature = {"x_ptr": f"*{dtype}", "y_ptr": f"*{dtype}", "M": "i32", "N": "i32", "BM": "constexpr",
                     "BN": "constexpr"}
    return compile_triton(fn, signature, {"BM": bm, "BN": bn}, num_warps=num_warps, capability=capability)


def ptx_lines(ptx: str, words=("cp.async.bulk", "mbarrier", "tensormap", "fence.proxy")) -> list[str]:
    """The PTX lines of a compiled kernel that belong to today's mechanism."""
    return [ln.strip() for ln in ptx.splitlines() if any(w in ln for w in words)]
