"""Kernels, models and measuring tools of the Hopper async-memory course.

One of each piece of machinery, shared by every day, the notebooks and the grader:

    kernels.compile    .cu file or source string -> sm_90a cubin (NVRTC through cuda.core), cached
    kernels.sass       cubin -> SASS per kernel; required / forbidden instruction checks (works on CPU)
    kernels.launch     launching cubin kernels on torch's current stream
    kernels.tensormap  TMA tensor maps: a validator of the driver's rules + cuda.core descriptors
    kernels.check      poisoned outputs, bit-exact / tolerance comparison, mismatch reports
    kernels.bench      the course's one timer and the ceilings measured in the same run
    kernels.device     environment self-test and the one `requires_hopper` check
    kernels.sim        model base: roofline, Little's law, event simulation, H100 constants
    kernels.record     recorded_<gpu>.json read / write (one record per GPU kind)

Each topic lives in kernels/<slug>/ (naive_loads, smem_tiling, ldgsts, pipeline, tma, ...).
"""

__all__ = ["compile", "sass", "launch", "tensormap", "check", "bench", "device", "sim", "record"]
