// stream.cu — day 4: a streaming sum through an N-stage shared-memory pipeline, three ways.
//
// Every kernel computes partial[b] = sum of the float32 tiles block b owns, for a long array x of n floats.
// A persistent grid (a fixed number of blocks per SM) walks the array in tiles of 4 KiB (256 float4): block b owns
// tiles b, b + gridDim.x, b + 2 * gridDim.x, ... Each tile is copied global -> shared with cp.async (no registers
// in between) and summed from shared memory. STAGES (a macro: compile with defines={"STAGES": s}) is how many tiles
// a block may have in flight: 1 = load, wait, add, load, ... (synchronous); 4 = three tiles are on their way
// while the fourth is summed. Bytes in flight per SM = blocks per SM x STAGES x 4 KiB (Little's law does the rest).
//
// What changed from day 3 (ldgsts): the same LDGSTS, but organised as a ring of STAGES buffers with a commit/wait
// discipline instead of one staged tile. The three kernels differ only in the API that runs the ring:
//
//   stream_sum_prim   __pipeline_memcpy_async / __pipeline_commit / __pipeline_wait_prior (the primitives):
//                     thread scope. Every thread copies 16 bytes of each tile and reads back only those 16 bytes,
//                     so waiting for its own copies is enough: no block barrier anywhere.
//   stream_sum_pipe   the same ring through cuda::pipeline<cuda::thread_scope_thread> (cuda::make_pipeline()):
//                     producer_acquire / memcpy_async / producer_commit / consumer_wait / consumer_release.
//                     Same SASS as the primitives.
//   stream_sum_roles  New: a block-scope pipeline (cuda::pipeline_shared_state<thread_scope_block, STAGES>) with
//                     roles: warp 0 produces (issues every copy of a tile), warps 1-4 consume (sum what warp 0
//                     copied). Data crosses threads, so each stage has two mbarriers in shared memory: "produced"
//                     (consumers wait on it) and "consumed" (the producer waits on it before reusing the buffer).
//
// Launch: grid = blocks_per_sm x SMs (persistent); block = 256 threads (prim, pipe) or 160 (roles: 32 + 128);
// no dynamic shared memory. x must be 16-byte aligned; any n >= 0 (the last tile may be partial and the n % 4
// floats after the last float4 are added by block 0 with plain loads).
//
// SASS you should see:
//   stream_sum_prim, stream_sum_pipe   LDGSTS.E.BYPASS.128 (cp.async.cg, 16 B, L1 bypassed), LDGDEPBAR (commit),
//                                      DEPBAR.LE SB0, STAGES-1 (wait_prior), LDS.128. No BAR.SYNC in the loop.
//   stream_sum_roles                   LDGSTS.E.BYPASS.128, ARRIVES.LDGSTSBAR.64 (cp.async.mbarrier.arrive: the
//                                      barrier completes when this thread's copies land),
//                                      SYNCS.PHASECHK.TRANS64.TRYWAIT (wait on a barrier phase),
//                                      SYNCS.ARRIVE.TRANS64 (arrive), LDS.128.

#include <cooperative_groups.h>
#include <cuda/pipeline>
#include <cuda_pipeline_primitives.h>

#include "course.cuh"

namespace cg = cooperative_groups;

#ifndef STAGES
#define STAGES 4
#endif
static_assert(STAGES >= 1 && STAGES <= 8, "STAGES: 1..8 (cp.async.wait_group takes 0..7 pending groups)");

#define TILE_VEC 256  // float4 per tile: 4 KiB. (TILE_VEC, STAGES) = one block's ring: STAGES x 4 KiB of smem.
#define THREADS 256   // prim, pipe: thread t copies and sums float4 t of every tile

// Sum of a block's per-thread values -> partial[blockIdx.x]; block 0 also adds the n % 4 trailing floats.
__device__ __forceinline__ void finish_block(float acc, const float* __restrict__ x, float* __restrict__ partial,
                                             long long n) {
    __shared__ float warp_sums[32];
    if (blockIdx.x == 0 && threadIdx.x < (n & 3)) acc += x[(n & ~3LL) + threadIdx.x];  // the ragged tail
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, off);
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, nwarps = (blockDim.x + 31) >> 5;
    if (lane == 0) warp_sums[warp] = acc;
    __syncthreads();
    if (warp == 0) {
        acc = lane < nwarps ? warp_sums[lane] : 0.0f;
#pragma unroll
        for (int off = 16; off > 0; off >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, off);
        if (lane == 0) partial[blockIdx.x] = acc;
    }
}

// Tiles of block b: b, b + G, ... below ntiles. How many?
__device__ __forceinline__ long long tiles_of_block(long long ntiles) {
    return ntiles > blockIdx.x ? (ntiles - 1 - blockIdx.x) / gridDim.x + 1 : 0;
}

__device__ __forceinline__ float sum4(float4 v) { return (v.x + v.y) + (v.z + v.w); }

// prim, pipe: thread t's float4 of each of its block's tiles (tile k of block b is tile b + k G of x).
struct TileWalk {
    long long n4, mine;  // float4 of x (the n % 4 trailing floats are finish_block's); tiles of this block
    int t;
    // Element t of the block's k-th tile, or -1 past the end (the last tile may be partial).
    __device__ __forceinline__ long long chunk(long long k) const {
        const long long c = (blockIdx.x + k * gridDim.x) * TILE_VEC + t;
        return (k < mine && c < n4) ? c : -1;
    }
};
__device__ __forceinline__ TileWalk tile_walk(long long n) {
    const long long n4 = n >> 2, ntiles = (n4 + TILE_VEC - 1) / TILE_VEC;
    return {n4, tiles_of_block(ntiles), static_cast<int>(threadIdx.x)};
}

// ---------------------------------------------------------------------------------------------------------------
// Primitives: each thread's commits form its own FIFO of "groups"; __pipeline_wait_prior(N) returns when at most N
// of this thread's groups are still in flight. The ring: before summing tile k, tiles k+1 .. k+STAGES-1 were issued.
extern "C" __global__ void __launch_bounds__(THREADS) stream_sum_prim(const float* __restrict__ x,
                                                                      float* __restrict__ partial, long long n) {
    __shared__ alignas(16) float4 ring[STAGES][TILE_VEC];  // (TILE_VEC, STAGES)
    const float4* x4 = reinterpret_cast<const float4*>(x);  // 16-byte aligned: the launcher checks
    const TileWalk tiles = tile_walk(n);  // tiles.chunk(k): this thread's float4 of tile k, -1 past the end
    const long long mine = tiles.mine;
    const int t = tiles.t;

    // Prologue: STAGES-1 tiles in flight. Every thread commits a group per tile even when it copied nothing, so
    // that "group k" means "tile k" for every thread and wait_prior counts the same thing everywhere.
    for (int k = 0; k < STAGES - 1; ++k) {
        const long long c = tiles.chunk(k);
        if (c >= 0) __pipeline_memcpy_async(&ring[k][t], &x4[c], 16);  // LDGSTS.E.BYPASS.128
        __pipeline_commit();                                              // LDGDEPBAR
    }
    float acc = 0.0f;
    int slot = 0;  // ring slot of tile k
    for (long long k = 0; k < mine; ++k) {
        // Issue tile k+STAGES-1 into the slot tile k-1 used: this thread finished reading it last iteration.
        const long long c = tiles.chunk(k + STAGES - 1);
        const int next = slot == 0 ? STAGES - 1 : slot - 1;
        if (c >= 0) __pipeline_memcpy_async(&ring[next][t], &x4[c], 16);
        __pipeline_commit();
        __pipeline_wait_prior(STAGES - 1);  // DEPBAR.LE SB0, STAGES-1: tile k (this thread's 16 bytes) landed
        if (tiles.chunk(k) >= 0) acc += sum4(ring[slot][t]);  // LDS.128 of the bytes this thread copied
        slot = slot + 1 == STAGES ? 0 : slot + 1;
    }
    __pipeline_wait_prior(0);  // nothing may be in flight into shared memory when the block moves on
    finish_block(acc, x, partial, n);
}

// ---------------------------------------------------------------------------------------------------------------
// New: the same ring through cuda::pipeline at thread scope. producer_acquire is a no-op at thread scope (the
// thread itself knows when a slot is free); producer_commit = commit_group; consumer_wait = wait_group.
extern "C" __global__ void __launch_bounds__(THREADS) stream_sum_pipe(const float* __restrict__ x,
                                                                      float* __restrict__ partial, long long n) {
    __shared__ alignas(16) float4 ring[STAGES][TILE_VEC];  // (TILE_VEC, STAGES)
    const float4* x4 = reinterpret_cast<const float4*>(x);
    const TileWalk tiles = tile_walk(n);
    const long long mine = tiles.mine;
    const int t = tiles.t;
    cuda::pipeline<cuda::thread_scope_thread> pipe = cuda::make_pipeline();  // New

    for (int k = 0; k < STAGES - 1; ++k) {
        pipe.producer_acquire();
        const long long c = tiles.chunk(k);
        // aligned_size_t<16>: tells memcpy_async both pointers are 16-byte aligned -> one 16-byte cp.async.cg
        // (with a plain size_t it could only assume alignof(float4) of the type, fine here, but say it).
        if (c >= 0) cuda::memcpy_async(&ring[k][t], &x4[c], cuda::aligned_size_t<16>(16), pipe);
        pipe.producer_commit();
    }
    float acc = 0.0f;
    int slot = 0;
    for (long long k = 0; k < mine; ++k) {
        const long long c = tiles.chunk(k + STAGES - 1);
        const int next = slot == 0 ? STAGES - 1 : slot - 1;
        pipe.producer_acquire();
        if (c >= 0) cuda::memcpy_async(&ring[next][t], &x4[c], cuda::aligned_size_t<16>(16), pipe);
        pipe.producer_commit();
        // consumer_wait() would compute "groups still allowed in flight" at run time (a switch over 0..8 in the
        // SASS); the count is a compile-time STAGES-1 here, so say it: one DEPBAR.LE SB0, STAGES-1.
        cuda::pipeline_consumer_wait_prior<STAGES - 1>(pipe);
        if (tiles.chunk(k) >= 0) acc += sum4(ring[slot][t]);
        pipe.consumer_release();
        slot = slot + 1 == STAGES ? 0 : slot + 1;
    }
    cuda::pipeline_consumer_wait_prior<0>(pipe);
    finish_block(acc, x, partial, n);
}

// ---------------------------------------------------------------------------------------------------------------
// New: a block-scope pipeline with producer and consumer roles.
#define PRODUCERS 32    // warp 0: issues all TILE_VEC copies of a tile, TILE_VEC / 32 = 8 per thread
#define CONSUMERS 128   // warps 1-4: each sums TILE_VEC / 128 = 2 float4 of every tile
static_assert(TILE_VEC % PRODUCERS == 0 && TILE_VEC % CONSUMERS == 0, "tile split");

extern "C" __global__ void __launch_bounds__(PRODUCERS + CONSUMERS) stream_sum_roles(const float* __restrict__ x,
                                                                                    float* __restrict__ partial,
                                                                                    long long n) {
    __shared__ alignas(16) float4 ring[STAGES][TILE_VEC];  // (TILE_VEC, STAGES)
    // Two mbarriers per stage + a reference count. make_pipeline (below, called by every thread of the block)
    // initialises them: "produced" expects PRODUCERS arrivals, "consumed" expects CONSUMERS arrivals.
    __shared__ cuda::pipeline_shared_state<cuda::thread_scope_block, STAGES> state;
    const float4* x4 = reinterpret_cast<const float4*>(x);
    const long long n4 = n >> 2, ntiles = (n4 + TILE_VEC - 1) / TILE_VEC;
    const long long mine = tiles_of_block(ntiles);
    const bool producer = threadIdx.x < PRODUCERS;  // whole warps: a role is never split inside a warp
    float acc = 0.0f;
    {
        cuda::pipeline<cuda::thread_scope_block> pipe = cuda::make_pipeline(
            cg::this_thread_block(), &state, producer ? cuda::pipeline_role::producer : cuda::pipeline_role::consumer);
        if (producer) {
            for (long long k = 0, slot = 0; k < mine; ++k) {
                // Waits until all CONSUMERS released this slot's previous tile (k - STAGES); free the first lap.
                pipe.producer_acquire();
                const long long base = (blockIdx.x + k * gridDim.x) * TILE_VEC;
#pragma unroll
                for (int i = 0; i < TILE_VEC / PRODUCERS; ++i) {
                    const int e = i * PRODUCERS + threadIdx.x;  // a warp copies 512 contiguous bytes per i
                    if (base + e < n4)
                        cuda::memcpy_async(&ring[slot][e], &x4[base + e], cuda::aligned_size_t<16>(16), pipe);
                }
                // cp.async.mbarrier.arrive on the slot's "produced" barrier (ARRIVES.LDGSTSBAR): the phase can
                // only complete once this thread's copies have landed; then an ordinary arrive.
                pipe.producer_commit();
                slot = slot + 1 == STAGES ? 0 : slot + 1;
            }
        } else {
            const int ct = threadIdx.x - PRODUCERS;
            for (long long k = 0, slot = 0; k < mine; ++k) {
                pipe.consumer_wait();  // the slot's "produced" phase: every producer's copies of tile k landed
                const long long base = (blockIdx.x + k * gridDim.x) * TILE_VEC;
#pragma unroll
                for (int i = 0; i < TILE_VEC / CONSUMERS; ++i) {
                    const int e = i * CONSUMERS + ct;  // bytes copied by some other thread (warp 0)
                    if (base + e < n4) acc += sum4(ring[slot][e]);
                }
                pipe.consumer_release();  // arrive on "consumed": the producer may refill the slot
                slot = slot + 1 == STAGES ? 0 : slot + 1;
            }
        }
    }  // pipe.quit() (its destructor): the last thread to leave invalidates the barriers
    finish_block(acc, x, partial, n);
}
