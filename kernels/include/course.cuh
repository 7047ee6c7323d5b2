// course.cuh — the few declarations every kernel of the course shares.
//
// NVRTC cannot include <cuda.h> (a host header). Kernels that receive a TMA tensor map take it as a
// `const __grid_constant__ CUtensorMap` parameter; the type is 128 opaque bytes, 64-byte aligned in cuda.h 12 and
// 128-byte aligned in cuda.h 13 — we declare it as cuda.h 13 does.
#pragma once

#ifndef COURSE_CUTENSORMAP_DECLARED
#define COURSE_CUTENSORMAP_DECLARED
struct CUtensorMap_st { alignas(128) unsigned long long opaque[16]; };
typedef struct CUtensorMap_st CUtensorMap;
#endif

// Shared-memory address of a generic pointer, as the PTX state-space instructions (cp.async, mbarrier, TMA) want it.
__device__ __forceinline__ unsigned smem_addr(const void* p) {
    return static_cast<unsigned>(__cvta_generic_to_shared(p));
}
