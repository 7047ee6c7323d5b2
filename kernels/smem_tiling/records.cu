// records.cu — day 2's demo: the sum of squares of every record of an array of records, four ways, to see what
// staging through shared memory buys a warp whose lanes each own one row, and what a bank conflict costs there.
//
// x is an array of n records of 32 float32 each (row-major (n, 32): record i is one 128-byte line); the result is
// out[i] = sum over k of x[i][k]^2, summed in the order k = 0, 1, ..., 31 by every rung (so all four agree
// bit-exactly with each other). One signature for every rung:
//     (const float* x, float* out, int n)
// One launch for every rung: block 256 threads = 8 warps, grid ceil(n / 256); warp w of block b owns the 32 records
// [32 (8 b + w), 32 (8 b + w) + 32): lane l sums record 32 (8 b + w) + l. n need not be a multiple of 32: a lane
// whose record lies past the end does nothing, and a warp's tile rows past the end stay unwritten and unread.
//
// The access problem: a lane that reads its own record walks along a row, so at each step the 32 lanes of the warp
// read 32 different lines, 128 bytes apart (one word of each). Reading the same 32 x 32 block of x row by row
// instead (at step j every lane reads one word of record j: one line, coalesced) puts the record a lane needs in
// other lanes' registers; shared memory moves it across. Each warp stages only its own records, so a warp-level
// barrier (__syncwarp) is enough: no other warp reads the tile.
//
// SASS you should see (tests/test_smem_tiling.py checks it):
//   records_naive      LDG.E.CONSTANT only: no shared memory; each LDG touches 32 lines (one word of each).
//   records_smem       LDG -> STS (a tile row), LDS (lane l reads tile[l][k]: a tile COLUMN across the
//                      warp, 32 words in one bank -> 32 wavefronts per LDS) -> STG. __syncwarp() leaves no
//                      instruction here: the warp is converged, and its shared-memory accesses stay in order.
//   records_padded     the same instructions; tile[32][33]: the column's 32 words in 32 banks, 1 wavefront.
//   records_swizzled   the same, tile[32][32] with physical column k ^ l (a LOP3.LUT in the address math).
// None of them needs local memory (no LDL / STL).

#include "course.cuh"

#define REC 32                 // floats per record: 128 bytes, one row of the warp's 32 x 32 tile
#define WARPS 8                // warps per block (blockDim.x = 32 * WARPS)
#define THREADS (32 * WARPS)

// Rung 1: each lane reads its own record straight from global memory. Coalescing fails at every step (32 lines per
// warp load, 4 useful bytes of each); the lines stay in L1 for the next 31 steps, so DRAM and L2 see each line
// about once, but every load instruction costs the L1 data stage one wavefront per line: 32.
extern "C" __global__ void __launch_bounds__(THREADS)
records_naive(const float* __restrict__ x, float* __restrict__ out, int n) {
    const long long rec = (long long)blockIdx.x * THREADS + threadIdx.x;
    if (rec >= n) return;
    float s = 0.0f;
#pragma unroll 8
    for (int k = 0; k < REC; ++k) {
        const float v = x[rec * REC + k];  // lanes 128 bytes apart: one word of 32 different lines
        s = fmaf(v, v, s);
    }
    out[rec] = s;
}

// Rungs 2-4 share one body; the tile layout is the only difference.
//   PAD = 1: float tile[32][33]       element (a, b) at word 33 a + b        -> bank (a + b) % 32
//   SWZ:     float tile[32][32]       element (a, b) at word 32 a + (b ^ a)  -> bank b ^ a
//   neither: float tile[32][32]       element (a, b) at word 32 a + b        -> bank b
// Phase 1 (STS): step j, lane l writes element (j, l): a tile row, 32 banks in every layout.
// Phase 2 (LDS): step k, lane l reads element (l, k): a tile column. Unpadded: bank k for all 32 lanes, 32 distinct
// words: a 32-way conflict (32 wavefronts). Padded: bank (l + k) % 32, swizzled: bank k ^ l — one lane per bank.
template <int PAD, bool SWZ>
__device__ __forceinline__ void records_staged(const float* __restrict__ x, float* __restrict__ out, int n) {
    __shared__ float tile[WARPS][REC][REC + PAD];  // 4 KB per warp (+128 bytes per warp when padded)
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const long long first = ((long long)blockIdx.x * WARPS + warp) * 32;  // the warp's first record
    float(*t)[REC + PAD] = tile[warp];
    // unrolled whole: the warp's 32 line loads are all in flight before the first STS (4 KB per warp: day 1's bytes in
    // flight; 8 at a time measured 0.74x of the copy ceiling on an H200, 32 at a time 0.82x)
#pragma unroll
    for (int j = 0; j < 32; ++j) {
        // record first + j, word `lane`: the warp reads one whole 128-byte line, coalesced
        if (first + j < n) t[j][SWZ ? (lane ^ j) : lane] = x[(first + j) * REC + lane];
    }
    __syncwarp();  // lane l reads words that the other 31 lanes of its warp wrote
    const long long rec = first + lane;
    if (rec >= n) return;
    float s = 0.0f;
    // unroll 1: one 4-byte LDS per step. Unrolled, the compiler merges four steps of the unpadded tile into one
    // LDS.128 (lane l reads tile[l][k..k+3], 16 bytes): served a quarter-warp at a time, 8 lanes 128 bytes apart
    // still share 4 banks, so 32 wavefronts buy 4 words instead of 1. Count it with model.wavefronts(..., 16).
#pragma unroll 1
    for (int k = 0; k < REC; ++k) {
        const float v = t[lane][SWZ ? (k ^ lane) : k];  // tile column k across the warp
        s = fmaf(v, v, s);
    }
    out[rec] = s;  // 32 consecutive floats per warp: one line, coalesced
}

// Rung 2: staged, unpadded tile — coalesced loads, and a 32-way bank conflict on every LDS.
extern "C" __global__ void __launch_bounds__(THREADS)
records_smem(const float* __restrict__ x, float* __restrict__ out, int n) { records_staged<0, false>(x, out, n); }

// Rung 3: staged, one padding word per tile row.
extern "C" __global__ void __launch_bounds__(THREADS)
records_padded(const float* __restrict__ x, float* __restrict__ out, int n) { records_staged<1, false>(x, out, n); }

// Rung 4: staged, XOR-swizzled tile.
extern "C" __global__ void __launch_bounds__(THREADS)
records_swizzled(const float* __restrict__ x, float* __restrict__ out, int n) { records_staged<0, true>(x, out, n); }
