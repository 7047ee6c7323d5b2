// tma.cuh — the tensor memory accelerator: 2-D box loads into shared memory (completing an mbarrier, see
// mbarrier.cuh) and box stores from shared memory (completing bulk groups). The tensor map operand is the generic
// address of a __grid_constant__ CUtensorMap parameter; shared-memory operands are 32-bit shared-window addresses.
// Included by kernels/tma/tma_copy.cu.
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
