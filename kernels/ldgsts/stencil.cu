// stencil.cu — day 3: cp.async (LDGSTS), global -> shared memory with no register in between.
//
// Part 1 (below): the cp.async instructions as inline-PTX wrappers, and the same operations as CUDA's pipeline
//   primitives. Part 2: stage_copy_* — a copy staged through shared memory with 4-, 8- and 16-byte cp.async (and
//   once with the pipeline primitives), to read each form's SASS. Part 3: a 7-point 1-D stencil (fp32, zero
//   outside [0, n)) in four rungs with one signature, (x, w, y, n):
//
//     y[i] = sum_{k=0..6} w[k] * x[i + k - 3]
//
//   stencil_direct     plain global loads; every x element is loaded by 7 threads (L1/L2 absorb the re-reads);
//                      4 dependent rounds of loads per thread (one per output)
//   stencil_smem_sync  New: the tile + halo staged in shared memory through registers (LDG.128 -> STS.128),
//                      __syncthreads, then every thread reads its 10 inputs from shared memory
//   stencil_ldgsts     New: the same staging with 16-byte cp.async — no register holds x, zero fill at the array
//                      ends by the copy itself; commit + wait_group 0 + __syncthreads
//   stencil_ldgsts_db  New: persistent blocks walk the tiles; tile i+1's copies are in flight while tile i is
//                      computed (two buffers, wait_group 1)
//
// SASS you should see:
//   stage_copy_4 / _8      LDGSTS.E / LDGSTS.E.64 (.ca), LDGDEPBAR, DEPBAR.LE SB0, 0x0
//   stage_copy_16_ca       LDGSTS.E.128            (.ca: may allocate in L1)
//   stage_copy_16          LDGSTS.E.BYPASS.128     (.cg: L2 only)
//   stage_copy_16_primitives  the same, written with __pipeline_memcpy_async / __pipeline_commit / _wait_prior
//   stencil_direct         LDG.E (x7 per output), no LDGSTS, no shared memory
//   stencil_smem_sync      LDG.E.128 + STS.128, BAR.SYNC, LDS.128; no LDGSTS
//   stencil_ldgsts         LDGSTS.E.BYPASS.128.ZFILL, LDGDEPBAR, DEPBAR.LE SB0, 0x0, BAR.SYNC; no LDG.E.128/STS.128
//   stencil_ldgsts_db      the same with DEPBAR.LE SB0, 0x1 inside the tile loop
// (LDG.E.CONSTANT loads of the 7 weights appear in every stencil: they are 4-byte, uniform, once per block.)

#include <cuda_pipeline_primitives.h>

#include "course.cuh"

// ============================================================================================================
// Part 1 — cp.async wrappers: kernels/include/cp_async.cuh (each PTX form, its SASS and the hardware contract)
// ============================================================================================================
#include "cp_async.cuh"

// ============================================================================================================
// Part 2 — stage_copy_*: y = x through shared memory, one cp.async size per kernel
// ============================================================================================================
// Block b stages the 1024 floats [1024 b, 1024 b + 1024) (4 KB) in shared memory with BYTES-wide copies, waits,
// then writes them out with plain stores. grid = ceil(n / 1024), block = 256. n must be a multiple of 4 floats
// (the launcher checks: the last tile ends on a whole 16-byte piece), x and y 16-byte aligned. The sizes differ in
// how many instructions move the same bytes (16-byte copies: one per thread; 4-byte: four), not in DRAM bytes.
#define SC_BLOCK 256
#define SC_TILE 1024  // floats per block: (SC_TILE) = 4 KB of shared memory

template <int BYTES, bool CG>
__device__ __forceinline__ void stage_copy(const float* __restrict__ x, float* __restrict__ y, long long n) {
    constexpr int V = BYTES / 4;  // floats per copy
    __shared__ __align__(16) float s[SC_TILE];
    const long long base = (long long)blockIdx.x * SC_TILE;
    const int valid = (int)min((long long)SC_TILE, n - base);  // a multiple of 4 >= V (launcher: n % 4 == 0)
#pragma unroll
    for (int k = 0; k < SC_TILE / (SC_BLOCK * V); ++k) {
        const int e = (k * SC_BLOCK + threadIdx.x) * V;  // consecutive threads: consecutive BYTES-wide pieces
        if (e < valid) {
            if constexpr (CG) cp_async_cg16(&s[e], x + base + e);
            else cp_async_ca<BYTES>(&s[e], x + base + e);
        }
    }
    cp_async_commit();
    cp_async_wait<0>();
    __syncthreads();
    for (int e = threadIdx.x; e < valid; e += SC_BLOCK) y[base + e] = s[e];
}

extern "C" __global__ void __launch_bounds__(SC_BLOCK) stage_copy_4(const float* __restrict__ x,
                                                                      float* __restrict__ y, long long n) {
    stage_copy<4, false>(x, y, n);
}
extern "C" __global__ void __launch_bounds__(SC_BLOCK) stage_copy_8(const float* __restrict__ x,
                                                                      float* __restrict__ y, long long n) {
    stage_copy<8, false>(x, y, n);
}
extern "C" __global__ void __launch_bounds__(SC_BLOCK) stage_copy_16_ca(const float* __restrict__ x,
                                                                          float* __restrict__ y, long long n) {
    stage_copy<16, false>(x, y, n);
}
extern "C" __global__ void __launch_bounds__(SC_BLOCK) stage_copy_16(const float* __restrict__ x,
                                                                       float* __restrict__ y, long long n) {
    stage_copy<16, true>(x, y, n);
}

// New: the same 16-byte copy through CUDA's pipeline primitives instead of inline PTX. Same SASS as stage_copy_16:
// LDGSTS.E.BYPASS.128, LDGDEPBAR, DEPBAR.LE SB0, 0x0 — the primitives are a spelling, not another mechanism.
extern "C" __global__ void __launch_bounds__(SC_BLOCK) stage_copy_16_primitives(const float* __restrict__ x,
                                                                                  float* __restrict__ y,
                                                                                  long long n) {
    __shared__ __align__(16) float s[SC_TILE];
    const long long base = (long long)blockIdx.x * SC_TILE;
    const int valid = (int)min((long long)SC_TILE, n - base);
    const int e = threadIdx.x * 4;
    if (e < valid) __pipeline_memcpy_async(&s[e], x + base + e, 16);  // cp.async ... 16
    __pipeline_commit();                                               // cp.async.commit_group
    __pipeline_wait_prior(0);                                          // cp.async.wait_group 0
    __syncthreads();
    for (int i = threadIdx.x; i < valid; i += SC_BLOCK) y[base + i] = s[i];
}

// ============================================================================================================
// Part 3 — the stencil rungs
// ============================================================================================================
// Every rung: grid = ceil(n / TILE) blocks of BLOCK threads (stencil_ldgsts_db: a persistent grid of a few
// blocks per SM), x, w, y float32; x and y 16-byte aligned; any n >= 1. Block b owns outputs
// [b * TILE, b * TILE + TILE).
#define R 3                   // stencil radius
#define TAPS (2 * R + 1)      // 7 weights
#define BLOCK 256             // threads per block
#define VEC 4                 // floats per 16-byte chunk
#define TILE (BLOCK * VEC)    // 1024 outputs per tile: thread t computes outputs 4t .. 4t+3
#define CHUNKS (TILE / VEC + 2)  // 258 16-byte chunks: 1 halo chunk (4 floats >= R) | 256 tile chunks | 1 halo
// Shared tile: (CHUNKS x 16 B) = 4128 bytes per buffer, 16-byte aligned (float4).
// Chunk c of tile b holds x[g .. g+3] with g = b * TILE - VEC + 4c (zeros where g+j is outside [0, n)).

__device__ __forceinline__ void load_weights(const float* __restrict__ w, float (&wr)[TAPS]) {
#pragma unroll
    for (int k = 0; k < TAPS; ++k) wr[k] = __ldg(w + k);
}

// Thread t's four outputs from shared chunks t, t+1, t+2 (12 floats; its 10 inputs are v[1..10]):
// output o = b*TILE + 4t + m reads x[o - R + k] = v[m + 1 + k]. Three LDS.128 per thread: a warp reads 512
// consecutive bytes per instruction, the minimum 4 wavefronts, no bank conflict.
__device__ __forceinline__ void compute_store(const float4* s, const float (&wr)[TAPS], float* __restrict__ y,
                                              long long n, long long tile) {
    const int t = threadIdx.x;
    const float4 a = s[t], b = s[t + 1], c = s[t + 2];
    const float v[12] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w, c.x, c.y, c.z, c.w};
    float out[VEC];
#pragma unroll
    for (int m = 0; m < VEC; ++m) {
        float acc = 0.f;
#pragma unroll
        for (int k = 0; k < TAPS; ++k) acc = fmaf(wr[k], v[m + 1 + k], acc);
        out[m] = acc;
    }
    const long long i = tile * TILE + 4LL * t;
    if (i + VEC <= n) {
        *reinterpret_cast<float4*>(y + i) = make_float4(out[0], out[1], out[2], out[3]);  // STG.E.128
    } else {
#pragma unroll
        for (int m = 0; m < VEC; ++m)
            if (i + m < n) y[i + m] = out[m];  // the array's last, partial chunk
    }
}

// --- rung 1: plain global loads -------------------------------------------------------------------------
// Thread t computes outputs b*TILE + t + 256 m (m = 0..3): each warp load covers 32 consecutive floats, so the
// loads are coalesced; each x element is loaded by 7 different load instructions, served from L1/L2 after the
// first. No shared memory. In the SASS each output is its own round: its 7 LDG, the FFMA chain, its STG, and only
// then the next output's loads (the bounds test of each output is a branch region). A thread has 4 bytes of x in
// flight at a time and waits the latency 4 times per tile: latency-bound even at full occupancy (Little's law,
// like day 1's copy_scalar), the reason this rung trails the staged ones (kernels/ldgsts/model.py, ROUNDS = 4).
extern "C" __global__ void __launch_bounds__(BLOCK) stencil_direct(const float* __restrict__ x,
                                                                     const float* __restrict__ w,
                                                                     float* __restrict__ y, long long n) {
    float wr[TAPS];
    load_weights(w, wr);
    const long long base = (long long)blockIdx.x * TILE + threadIdx.x;
#pragma unroll
    for (int m = 0; m < VEC; ++m) {
        const long long i = base + (long long)m * BLOCK;
        if (i < n) {
            float acc = 0.f;
#pragma unroll
            for (int k = 0; k < TAPS; ++k) {
                const long long j = i - R + k;
                acc = fmaf(wr[k], (j >= 0 && j < n) ? x[j] : 0.f, acc);  // LDG.E, zero outside [0, n)
            }
            y[i] = acc;
        }
    }
}

// Chunk c of `tile` into registers: one 16-byte load inside the array, element-wise loads at its ends.
__device__ __forceinline__ float4 load_chunk_sync(const float* __restrict__ x, long long n, long long tile, int c) {
    const long long g = tile * TILE - VEC + 4LL * c;
    if (g >= 0 && g + VEC <= n) return *reinterpret_cast<const float4*>(x + g);  // LDG.E.128
    float4 v;  // the array's ends: zeros outside [0, n)
    v.x = (g + 0 >= 0 && g + 0 < n) ? x[g + 0] : 0.f;
    v.y = (g + 1 >= 0 && g + 1 < n) ? x[g + 1] : 0.f;
    v.z = (g + 2 >= 0 && g + 2 < n) ? x[g + 2] : 0.f;
    v.w = (g + 3 >= 0 && g + 3 < n) ? x[g + 3] : 0.f;
    return v;
}

// --- rung 2: shared memory through registers ------------------------------------------------------------
// New: thread t loads chunk t (and threads 0, 1 the chunks 256, 257) into registers (LDG.E.128), stores it to
// shared memory (STS.128) once it arrived, __syncthreads, then computes from shared memory. Every x element is
// read from global memory once per tile (plus a 4-float halo each side). The thread stalls on its load before
// the STS: the data passes through 4 registers and the thread cannot do anything else meanwhile.
extern "C" __global__ void __launch_bounds__(BLOCK) stencil_smem_sync(const float* __restrict__ x,
                                                                        const float* __restrict__ w,
                                                                        float* __restrict__ y, long long n) {
    __shared__ float4 s[CHUNKS];  // (CHUNKS) 16-byte chunks = 4128 bytes
    float wr[TAPS];
    load_weights(w, wr);
    const long long tile = blockIdx.x;
    const int t = threadIdx.x;
    float4 v0 = load_chunk_sync(x, n, tile, t);  // New: LDG.E.128 into registers
    float4 v1;
    if (t < CHUNKS - BLOCK) v1 = load_chunk_sync(x, n, tile, BLOCK + t);  // threads 0, 1: the right halo
    s[t] = v0;                                   // New: STS.128 — waits for the load to land
    if (t < CHUNKS - BLOCK) s[BLOCK + t] = v1;
    __syncthreads();
    compute_store(s, wr, y, n, tile);
}

// --- rung 3: cp.async, one tile per block -----------------------------------------------------------------
// Issue the copies of chunk c of `tile` into s (all CHUNKS chunks, spread over the block's threads).
// Zero fill: chunk c covers x[g .. g+3]; its valid floats are those in [0, n): src_bytes = 4 * clamp(n - g, 0, 4)
// (0 for the left halo of tile 0, where g = -4). A zero-byte copy still gets a valid, aligned address (x).
__device__ __forceinline__ void load_chunk_async(float4* s, const float* __restrict__ x, long long n,
                                                 long long tile, int c) {
    const long long g = tile * TILE - VEC + 4LL * c;  // a multiple of 4: x + g is 16-byte aligned
    const long long valid = g < 0 ? 0 : max(0LL, min((long long)VEC, n - g));
    const int src_bytes = 4 * (int)valid;
    cp_async_cg16_zfill(&s[c], src_bytes ? x + g : x, src_bytes);  // New: LDGSTS.E.BYPASS.128.ZFILL
}

// All CHUNKS chunks of `tile`: thread t copies chunk t, threads 0 and 1 also the right halo chunks 256, 257.
__device__ __forceinline__ void load_tile_async(float4* s, const float* __restrict__ x, long long n,
                                                long long tile) {
    load_chunk_async(s, x, n, tile, threadIdx.x);
    if (threadIdx.x < CHUNKS - BLOCK) load_chunk_async(s, x, n, tile, BLOCK + threadIdx.x);
}

extern "C" __global__ void __launch_bounds__(BLOCK) stencil_ldgsts(const float* __restrict__ x,
                                                                     const float* __restrict__ w,
                                                                     float* __restrict__ y, long long n) {
    __shared__ float4 s[CHUNKS];  // (CHUNKS) 16-byte chunks = 4128 bytes
    const long long tile = blockIdx.x;
    load_tile_async(s, x, n, tile);  // New: copies in flight, no register holds them
    cp_async_commit();               // New: LDGDEPBAR — this thread's copies form group 0
    float wr[TAPS];
    load_weights(w, wr);             // independent work while the copies fly
    cp_async_wait<0>();              // New: DEPBAR.LE SB0, 0x0 — this thread's copies have landed
    __syncthreads();                 // ... and now everyone's: thread t reads chunks t+1, t+2 copied by others
    compute_store(s, wr, y, n, tile);
}

// --- rung 4: cp.async, double-buffered, persistent ---------------------------------------------------------
// New: gridDim.x blocks (a few per SM, the launcher sizes it) walk the tiles blockIdx.x, blockIdx.x + gridDim.x,
// ... Two buffers (2, CHUNKS) = 8256 bytes: while tile i is computed from buf[i & 1], tile i+1 is landing in
// buf[(i+1) & 1]. Every iteration commits exactly one group (empty when there is no next tile), so
// wait_group 1 — "all but the newest group have landed" — always means "tile i has landed".
extern "C" __global__ void __launch_bounds__(BLOCK) stencil_ldgsts_db(const float* __restrict__ x,
                                                                        const float* __restrict__ w,
                                                                        float* __restrict__ y, long long n) {
    __shared__ float4 s[2][CHUNKS];  // (2, CHUNKS): two buffers of 4128 bytes
    const long long ntiles = (n + TILE - 1) / TILE;
    long long tile = blockIdx.x;
    if (tile < ntiles) load_tile_async(s[0], x, n, tile);  // prologue: tile 0 of this block
    cp_async_commit();
    float wr[TAPS];
    load_weights(w, wr);
    for (int i = 0; tile < ntiles; ++i, tile += gridDim.x) {
        const long long next = tile + gridDim.x;
        // New: prefetch the next tile into the other buffer. Safe: the trailing __syncthreads of the previous
        // iteration guarantees no thread still reads that buffer.
        if (next < ntiles) load_tile_async(s[(i + 1) & 1], x, n, next);
        cp_async_commit();    // one group per iteration, possibly empty
        cp_async_wait<1>();   // New: DEPBAR.LE SB0, 0x1 — tile i landed; tile i+1 may still be in flight
        __syncthreads();      // everyone's copies of tile i are visible
        compute_store(s[i & 1], wr, y, n, tile);
        __syncthreads();      // everyone is done reading buf[i & 1] before iteration i+1 overwrites it
    }
}
