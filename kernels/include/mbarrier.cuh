// mbarrier.cuh — shared-memory barriers with a transaction count (the barrier a TMA load completes).
// Every operand is a 32-bit shared-window address (smem_addr). Included by kernels/tma/tma_copy.cu.
#pragma once

#include "course.cuh"
#ifdef COURSE_DEBUG_BARRIERS
#include "mbarrier_debug.cuh"  // the debug build of these waits and arrivals (autograder.hangs); nothing otherwise
#endif


// The barrier's phase completes when `count` arrivals AND all transaction bytes announced with expect_tx have
// been counted (pending arrivals == 0 and tx-count == 0). Then the phase bit flips and the arrival count reloads.
__device__ __forceinline__ void mbar_init(unsigned bar, unsigned count) {
#ifdef COURSE_DEBUG_BARRIERS
    course_debug::note_init(bar, count);
#endif
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count) : "memory");
}

// Initialised barriers must be visible to the async proxy (the TMA unit) before a TMA signals them. This is
// CUTLASS's fence_barrier_init(); ptxas also places a FENCE.VIEW.ASYNC.S ahead of the mbarrier.init itself.
__device__ __forceinline__ void fence_barrier_init() {
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}

// One arrival, and tx-count += bytes: the phase now also waits for `bytes` bytes of TMA traffic.
__device__ __forceinline__ void mbar_arrive_expect_tx(unsigned bar, unsigned bytes) {
#ifdef COURSE_DEBUG_BARRIERS
    if (!course_debug::note_arrive(bar)) return;  // after an abort: no arrival (mbarrier_debug.cuh)
#endif
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes) : "memory");
}

// Spin until the phase with parity `parity` has completed. try_wait suspends the thread for a while in hardware
// before it returns false, so this loop does not hammer the barrier. (Debug build: a wait that does not complete
// within a bound is recorded and ends — mbarrier_debug.cuh.)
__device__ __forceinline__ void mbar_wait(unsigned bar, unsigned parity) {
#ifdef COURSE_DEBUG_BARRIERS
    course_debug::wait<false>(bar, parity);
#else
    unsigned done = 0;
    while (!done) {
        asm volatile(
            "{\n\t.reg .pred p;\n\t"
            "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n\t"
            "selp.u32 %0, 1, 0, p;\n\t}"
            : "=r"(done)
            : "r"(bar), "r"(parity)
            : "memory");
    }
#endif
}

// One arrival (no transaction bytes).
__device__ __forceinline__ void mbar_arrive(unsigned bar) {
#ifdef COURSE_DEBUG_BARRIERS
    if (!course_debug::note_arrive(bar)) return;
#endif
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory");
}

// Debug builds only: tag this warp's waits from here on with a number of the kernel's own (a k-tile, a use of the
// ring); a stuck wait is then reported with it. Emits nothing without COURSE_DEBUG_BARRIERS.
__device__ __forceinline__ void mbar_debug_tag(unsigned tag) {
#ifdef COURSE_DEBUG_BARRIERS
    course_debug::tag(tag);
#else
    (void)tag;
#endif
}
