// tma.cuh — the tensor memory accelerator: 2-D box loads into shared memory (completing an mbarrier, see
// mbarrier.cuh) and box stores from shared memory (completing bulk groups). The tensor map operand is the generic
// address of a __grid_constant__ CUtensorMap parameter; shared-memory operands are 32-bit shared-window addresses.
// Included by kernels/tma/tma_copy.cu and every TMA kernel after it.
#pragma once

#include "course.cuh"
#ifdef COURSE_DEBUG_BARRIERS
#include "mbarrier_debug.cuh"  // debug build: no load is issued after an abort (mbarrier_debug.cuh)
#endif

// TMA load of the box whose first element is (row = c1, col = c0) into shared memory at dst; the bytes are counted
// on barrier bar. Coordinates are in elements, innermost (column) first, and may run past the tensor's edge.
__device__ __forceinline__ void tma_load_2d(unsigned dst, const CUtensorMap* map, int c0, int c1, unsigned bar) {
#ifdef COURSE_DEBUG_BARRIERS
    if (!course_debug::may_issue()) return;
#endif
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];"
        ::"r"(dst), "l"(reinterpret_cast<unsigned long long>(map)), "r"(c0), "r"(c1), "r"(bar)
        : "memory");
}

// TMA store of the box at (row = c1, col = c0) from shared memory at src; completion is tracked by bulk groups.
__device__ __forceinline__ void tma_store_2d(const CUtensorMap* map, int c0, int c1, unsigned src) {
    asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%1, %2}], [%3];"
                 ::"l"(reinterpret_cast<unsigned long long>(map)), "r"(c0), "r"(c1), "r"(src)
                 : "memory");
}

// TMA reduce-add of the box at (row = c1, col = c0): global[box] += shared[box], element by element, the adds done at
// L2 (atomically per element: boxes of several CTAs on the same elements may overlap in time), in the map's data type
// (fp32 for kernels/stream_k's workspace); clipped at the tensor's edge like a store; completion tracked by bulk groups
// (bulk_commit, then bulk_wait<0>() before anyone reads the sums). SASS: UTMAREDG.2D.ADD.
__device__ __forceinline__ void tma_reduce_add_2d(const CUtensorMap* map, int c0, int c1, unsigned src) {
    asm volatile("cp.reduce.async.bulk.tensor.2d.global.shared::cta.add.tile.bulk_group [%0, {%1, %2}], [%3];"
                 ::"l"(reinterpret_cast<unsigned long long>(map)), "r"(c0), "r"(c1), "r"(src)
                 : "memory");
}

__device__ __forceinline__ void bulk_commit() { asm volatile("cp.async.bulk.commit_group;" ::: "memory"); }

// Wait until at most N committed bulk groups are still *reading* shared memory (the buffer may then be reused;
// the global writes may still be in flight).
template <int N>
__device__ __forceinline__ void bulk_wait_read() {
    asm volatile("cp.async.bulk.wait_group.read %0;" ::"n"(N) : "memory");
}

// Wait until at most N committed bulk groups are incomplete (global writes done too).
template <int N>
__device__ __forceinline__ void bulk_wait() {
    asm volatile("cp.async.bulk.wait_group %0;" ::"n"(N) : "memory");
}

// This thread's ordinary shared-memory writes made visible to the async proxy (the TMA unit) before a TMA store
// reads them: fence.proxy.async.shared::cta (SASS: MEMBAR.ALL.CTA + FENCE.VIEW.ASYNC.S).
__device__ __forceinline__ void fence_proxy_async() {
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}

// The same fence for global memory: this thread's view of global memory ordered between the async proxy and the generic
// one — after bulk_wait<0>() of TMA stores or reduce-adds, before a generic release (a flag, a ticket) that tells
// another CTA the data is there (kernels/stream_k/r1_split_k.cu). fence.proxy.async.global.
__device__ __forceinline__ void fence_proxy_async_global() {
    asm volatile("fence.proxy.async.global;" ::: "memory");
}
