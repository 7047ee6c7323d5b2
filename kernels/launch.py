"""Launch cubin kernels through cuda.core on torch's current stream.

A cuda.core launch on a stream of its own is not ordered with torch's stream: torch's CUDA events around it
would time nothing. Every launch of the course goes through `launch()`, which wraps torch's current stream.

    y = torch.empty_like(x)
    launch(cubin, "copy_vec16", grid=n // 2048, block=256, args=(x, y, i64(n)))
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from .compile import Cubin
from .sass import functions

i32, i64, u32, u64, f32 = np.int32, np.int64, np.uint32, np.uint64, np.float32


def expect_tensor(name: str, t, dims: int, layout: str = "", dtype_name: str = "bfloat16") -> None:
    """A launcher's first check of a tensor argument, before any CUDA call: a torch.Tensor (TypeError), `dims`-D of
    the dtype (ValueError naming the layout, e.g. "(B, H, S, D)"), contiguous (ValueError: what to call)."""
    import torch

    dtype = getattr(torch, dtype_name)
    short = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32"}.get(dtype_name, dtype_name)
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    if t.dim() != dims or t.dtype != dtype:
        raise ValueError(f"{name} must be a {dims}-D {layout + ' ' if layout else ''}{short} tensor, got "
                         f"{t.dim()}-D {t.dtype}")
    if not t.is_contiguous():
        raise ValueError(f"{name} must be contiguous (strides {t.stride()}): call .contiguous() first")


def gemm_operands(a, b) -> tuple[int, int, int]:
    """(M, N, K) of c = a @ b.T for 2-D a (M, K) and b (N, K) that passed their tensor checks, or the error that names
    the rule: one K, and K and N multiples of 8 (the tensor maps' 16-byte row stride). The GEMM launchers' shared
    rule; each adds its own bounds."""
    (m, k), (n, kb) = a.shape, b.shape
    if k != kb:
        raise ValueError(f"a is (M, K) = {tuple(a.shape)} and b is (N, K) = {tuple(b.shape)}: K differs. b is given "
                         "transposed (N rows of K): pass w, not w.T, for c = a @ w.T")
    if k % 8 or n % 8:
        raise ValueError(f"K = {k} and N = {n} must be multiples of 8 (16-byte rows: the tensor-map stride rule)")
    return m, n, k


@lru_cache(maxsize=1)
def _device():
    from cuda.core import Device

    dev = Device(0)
    dev.set_current()
    return dev


@lru_cache(maxsize=256)
def _module(data: bytes):
    from cuda.core import ObjectCode

    _device()
    return ObjectCode.from_cubin(data)


def get_kernel(cubin: Cubin, name: str):
    """The cuda.core Kernel `name` of a compiled module (module loaded once per process, kernel looked up once)."""
    return _kernel(cubin.data, name, cubin.name)


@lru_cache(maxsize=1024)
def _kernel(data: bytes, name: str, module_name: str):
    try:
        return _module(data).get_kernel(name)
    except Exception as exc:  # noqa: BLE001

        raise KeyError(f"kernel {name!r} not found in {module_name}; it has {functions(data)}") from exc


def device_global(cubin: Cubin, name: str) -> tuple[int, int]:
    """(device address, size in bytes) of the module's `__device__` variable `name` (an extern "C" one: its name is
    not mangled), e.g. the debug barrier trace (autograder.hangs). The module is the one launch() loads."""
    from cuda.bindings import driver

    err, ptr, size = driver.cuLibraryGetGlobal(_module(cubin.data).handle, name.encode())
    if err != driver.CUresult.CUDA_SUCCESS:
        raise KeyError(f"no __device__ variable {name!r} in {cubin.name} ({err})")
    return int(ptr), int(size)


_streams: dict = {}


def torch_stream():
    """torch's current CUDA stream as a cuda.core Stream (so launches order with torch's work and events)."""
    import torch

    ts = torch.cuda.current_stream()
    key = ts.cuda_stream
    if key not in _streams:
        _streams[key] = (ts, _device().create_stream(ts))  # keep torch's stream object alive with its wrapper
    return _streams[key][1]


def _arg(a):
    try:
        import torch

        if isinstance(a, torch.Tensor):
            if not a.is_cuda:
                raise TypeError("kernel argument is a CPU tensor: move it to the GPU first")
            return np.uint64(a.data_ptr())
    except ImportError:
        pass
    if isinstance(a, bool) or (isinstance(a, int) and not isinstance(a, np.integer)):
        raise TypeError(f"plain Python int {a!r} as a kernel argument: say its C type (i32(...) or i64(...))")
    if isinstance(a, float):
        raise TypeError(f"plain Python float {a!r} as a kernel argument: say its C type (f32(...))")
    return a


_smem_set: dict = {}


def set_max_dynamic_smem(kernel, nbytes: int) -> None:
    """Allow more than 48 KB of dynamic shared memory for `kernel` (Hopper: up to 227 KB per block)."""
    # kernels come from the lru cache above, so the object (and its id) lives as long as the process
    if nbytes <= 48 * 1024 or _smem_set.get(id(kernel), (None, 0))[1] >= nbytes:
        return
    from cuda.bindings import driver

    attr = driver.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
    handle = kernel._handle  # cuda.core wraps a CUkernel (library API)
    err, = driver.cuKernelSetAttribute(attr, nbytes, handle, _device().device_id)
    if err != driver.CUresult.CUDA_SUCCESS:
        raise RuntimeError(f"cuKernelSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES={nbytes}) failed: {err}")
    _smem_set[id(kernel)] = (kernel, nbytes)  # holding the kernel keeps its id from being reused


def launch(cubin: Cubin, name: str, *, grid, block, args=(), smem: int = 0, cluster=None) -> None:
    """Launch kernel `name` of `cubin` on torch's current stream. Tensors pass as pointers; ints need a C type."""
    from cuda.core import LaunchConfig, launch as core_launch

    kernel = get_kernel(cubin, name)
    set_max_dynamic_smem(kernel, smem)
    if cluster is not None:
        # With a cluster, cuda.core's grid counts clusters; the course always speaks in blocks.
        gx = grid if isinstance(grid, int) else grid[0]
        cx = cluster if isinstance(cluster, int) else cluster[0]
        if gx % cx:
            raise ValueError(f"grid {grid} is not a multiple of the cluster size {cluster}")
        grid = gx // cx if isinstance(grid, int) else (gx // cx, *grid[1:])
    config = LaunchConfig(grid=grid, block=block, shmem_size=smem, cluster=cluster)
    core_launch(torch_stream(), config, kernel, *(_arg(a) for a in args))


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def box_count(shape, box) -> int:
    """How many (box rows, box cols) boxes cover a (rows, cols) tensor, partial boxes at its edges counted."""
    return ceil_div(shape[0], box[0]) * ceil_div(shape[1], box[1])
