// warpgroup.cuh — warp specialization: which warpgroup a thread belongs to, one elected lane per warp, setmaxnreg
// (moving registers between the warpgroups of a block) and a named barrier (one warpgroup synchronising alone).
// Included by kernels/warp_specialization/ws_rowsum.cu, by week 2 day 2's exercise and by day 4's (gemm).
#pragma once

#include "course.cuh"

// A warpgroup is 4 consecutive warps = 128 threads: warpgroup w holds threads [128 w, 128 w + 128) of the block.
// Hopper's warpgroup instructions (setmaxnreg here, wgmma later) are executed by all 128 threads of one warpgroup.
//
//   block of 384 threads:  | warpgroup 0 (producer) | warpgroup 1 (consumer) | warpgroup 2 (consumer) |
//   warps:                 |   0    1    2    3     |   4    5    6    7     |   8    9   10   11     |
//
// The index is read from lane 0 with a shuffle so that the compiler knows it is the same in every lane of the warp
// (warp-uniform): a branch on it never diverges inside a warp (CUTLASS: canonical_warp_group_idx()).
__device__ __forceinline__ int warpgroup_index() {
    return __shfl_sync(0xffffffffu, static_cast<int>(threadIdx.x) / 128, 0);
}

// Warp 0..3 inside its warpgroup (warp-uniform, as above).
__device__ __forceinline__ int warp_index_in_warpgroup() {
    return __shfl_sync(0xffffffffu, (static_cast<int>(threadIdx.x) / 32) % 4, 0);
}

__device__ __forceinline__ int lane_index() { return static_cast<int>(threadIdx.x) % 32; }

// PTX: elect.sync d|p, membermask;  (PTX ISA 8.0, sm_90)           SASS: ELECT
// Every lane of `membermask` (here the whole warp) must execute it together; exactly one of them gets p = true
// (the lowest active lane; d receives its lane number). It replaces `lane == 0`: the hardware picks a lane that is
// really active, and the compiler sees a warp-collective (CUTLASS: cute::elect_one_sync()).
__device__ __forceinline__ bool elect_one_sync() {
    unsigned pred = 0, lane = 0;
    asm volatile(
        "{\n\t.reg .b32 rx;\n\t.reg .pred px;\n\t"
        "elect.sync rx|px, %2;\n\t"
        "@px mov.u32 %1, 1;\n\t"
        "mov.u32 %0, rx;\n\t}"
        : "+r"(lane), "+r"(pred)
        : "r"(0xffffffffu));
    return pred != 0;
}

// PTX: setmaxnreg.dec.sync.aligned.u32 N;   setmaxnreg.inc.sync.aligned.u32 N;   (PTX ISA 8.0, sm_90a)
// SASS: USETMAXREG (.DEALLOC / .TRYALLOC, the latter in a retry loop)
//
// The contract:
// - Registers are a per-block pool. .dec gives the executing warps' registers above N back to the pool; .inc takes
//   registers from it up to N per thread, and *blocks* until the pool has them (so the producer's .dec must be
//   able to run: never make the .dec wait for something the consumers do after their .inc).
// - All 128 threads of a warpgroup execute the same setmaxnreg (.sync.aligned): call it before any branch that
//   splits a warpgroup, never inside `if (elect_one_sync())`. Between two setmaxnreg of one warpgroup its warps
//   must synchronise.
// - N is an immediate, a multiple of 8 in 24..256. The block starts with the count the compiler gave the kernel:
//   with __launch_bounds__(384, 1) at most 65536 / 384 = 170 -> 168 per thread. The budget must balance:
//   producer 128 x 40 + consumers 2 x 128 x 232 = 64512 <= 65536 registers of the SM (CUTLASS's 40 / 232 split).
// - Registers gained by .inc hold garbage until written; the compiler keeps the code after a .dec within N
//   (ptxas warns, and ignores the instruction, when it cannot tell the kernel's register count at entry: give the
//   kernel __launch_bounds__ with a minimum of 1 block).
template <unsigned N>
__device__ __forceinline__ void setmaxnreg_dec() {
    static_assert(N % 8 == 0 && N >= 24 && N <= 256, "setmaxnreg: a multiple of 8 in 24..256");
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(N));
}

template <unsigned N>
__device__ __forceinline__ void setmaxnreg_inc() {
    static_assert(N % 8 == 0 && N >= 24 && N <= 256, "setmaxnreg: a multiple of 8 in 24..256");
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(N));
}

// PTX: bar.sync a, b;   (barrier.sync.aligned; sm_30+)                                  SASS: BAR.SYNC
// Named barrier `id` for `threads` threads: each executing warp waits until `threads` threads (a multiple of 32,
// whole warps) have arrived at barrier `id`; then all of them go on, their shared-memory writes before it visible
// to each other after it. A block has 16 of them (id 0..15); __syncthreads() is barrier 0 for the whole block, so
// a warpgroup that synchronises alone (the other warpgroups never reach this barrier) takes another id and
// threads = 128 — e.g. consumer warpgroup c of day 4's GEMM uses id 1 + c. Every warp of the 128 must execute it
// with the same id and count, and no other warp may use that id meanwhile.
__device__ __forceinline__ void named_barrier_sync(unsigned id, unsigned threads) {
    asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(threads) : "memory");
}

// PTX: bar.arrive a, b;   (barrier.arrive.aligned; sm_30+)                              SASS: BAR.ARV
// Arrive at named barrier `id` (counted towards its `threads`) without waiting: the producer side of a hand-over
// between warpgroups. With bar.sync on the same id and count it makes a one-way signal: warpgroup A arrives (128
// threads), warpgroup B syncs (128 threads), threads = 256 — B goes on once A has arrived, A never waits. Every
// warp of the arriving side executes it with the same id and count; a phase completes when `threads` threads have
// arrived or synced, then the barrier resets for its next phase (r2_overlap.cu's ping-pong: ids 1 and 2).
__device__ __forceinline__ void named_barrier_arrive(unsigned id, unsigned threads) {
    asm volatile("bar.arrive %0, %1;" ::"r"(id), "r"(threads) : "memory");
}
