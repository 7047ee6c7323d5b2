// cp_async.cuh — cp.async (LDGSTS): global -> shared copies that bypass registers, in commit / wait groups.
// One wrapper per PTX form the course uses; the kernels include this file (kernels/ldgsts/stencil.cu), and day 3's
// notebook prints it: the lesson is the instruction itself.
#pragma once

#include "course.cuh"  // smem_addr(p): the 32-bit shared-window address the state-space instructions take

//   PTX                                                  SASS (sm_90a)
//   cp.async.ca.shared.global [d], [s], 4;               LDGSTS.E
//   cp.async.ca.shared.global [d], [s], 8;               LDGSTS.E.64
//   cp.async.ca.shared.global [d], [s], 16;              LDGSTS.E.128
//   cp.async.cg.shared.global [d], [s], 16;              LDGSTS.E.BYPASS.128
//   cp.async.cg.shared.global [d], [s], 16, src_bytes;   LDGSTS.E.BYPASS.128.ZFILL
//   cp.async.commit_group;                               LDGDEPBAR
//   cp.async.wait_group N;                               DEPBAR.LE SB0, N
//
// The hardware contract:
// - Sizes: cp-size is 4, 8 or 16. `.cg` (cache in L2 only) takes only 16 — ptxas rejects `.cg ... 8` with
//   "expected to be 16"; `.ca` (cache at all levels) takes all three.
// - Alignment: both addresses aligned to the cp-size. A 16-byte copy from an address that is 8 mod 16 is not
//   split for you: the launch fails with a misaligned-address error.
// - Zero fill: with src_bytes < cp-size only src_bytes bytes are read and the rest of the destination is written
//   with zeros. src_bytes = 0 reads nothing, but the address must still be a valid, aligned global address: the
//   callers below pass the array's base rather than forming a pointer outside the array.
// - Groups: the copies a thread issued since its last commit_group form one group. wait_group N blocks the
//   thread until at most N of *its own* most recent groups are pending. Copies never committed belong to no
//   group and wait_group does not wait for them. (cp.async.wait_all = commit_group + wait_group 0.)
// - Visibility: a wait covers the waiting thread's own copies. A thread that reads bytes another thread copied
//   needs a __syncthreads() after everyone's wait.
//
// The same operations as CUDA's pipeline primitives (<cuda_pipeline_primitives.h>; stage_copy_16_primitives below
// uses them):
//   __pipeline_memcpy_async(dst, src, 16)         a 16-byte cp.async (the primitive chooses the cache hint)
//   __pipeline_memcpy_async(dst, src, 16, zfill)  16 - zfill bytes copied, zfill bytes of zeros (a run-time zfill
//                                                 compiles to a switch over its legal values: the PTX form above
//                                                 takes src_bytes in a register)
//   __pipeline_commit()                           cp_async_commit()
//   __pipeline_wait_prior(N)                      cp_async_wait<N>()

// .ca copy of BYTES = 4, 8 or 16. dst and src aligned to BYTES.
template <int BYTES>
__device__ __forceinline__ void cp_async_ca(void* smem_dst, const void* gmem_src) {
    static_assert(BYTES == 4 || BYTES == 8 || BYTES == 16, "cp.async copies 4, 8 or 16 bytes");
    asm volatile("cp.async.ca.shared.global [%0], [%1], %2;\n" ::"r"(smem_addr(smem_dst)), "l"(gmem_src),
                 "n"(BYTES)
                 : "memory");
}

// .cg copy of 16 bytes (L2 only: streaming data no other load of this SM will read again). 16-byte aligned.
__device__ __forceinline__ void cp_async_cg16(void* smem_dst, const void* gmem_src) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(smem_addr(smem_dst)), "l"(gmem_src)
                 : "memory");
}

// .cg copy of 16 bytes of which only the first src_bytes (0..16) are read; the rest of dst becomes zeros.
__device__ __forceinline__ void cp_async_cg16_zfill(void* smem_dst, const void* gmem_src, int src_bytes) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(smem_dst)), "l"(gmem_src),
                 "r"(src_bytes)
                 : "memory");
}

// Close the group of this thread's copies issued since its last commit.
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }

// Wait until at most N of this thread's committed groups are in flight (N = 0: all of them landed).
template <int N>
__device__ __forceinline__ void cp_async_wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}
