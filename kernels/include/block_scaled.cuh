// block_scaled.cuh — what week 3 day 1's three FP8 GEMM rungs share (kernels/fp8_gemm/r1_block_scaled.cu,
// r2_wide.cu, r3_cluster.cu): the ring's set-up, one k-block's m64n128k32 MMA of a (64, 128) piece, its promotion
// with its row scales and one sb float, the bf16x2 store of (64, 128) pieces, the grouped order of a persistent walk,
// and rungs 2 and 3's consumer over one 128 x 256 tile. Each rung keeps its own tile, ring and producer; what
// differs between them (the ring's depth and layout, how a stage is released) is a template argument.
//
// Instructor-only (autograder/release_check.py INSTRUCTOR_ONLY): promote() is week 3 day 1's exercise (fp8_promote)
// answered; the student release leaves this header out with the three rungs that include it.
//
// Shapes every piece assumes (the day's block scaling, kernels/fp8_gemm/launch.py): a k-block is BK = 128 e4m3 along
// K (one 128-byte row of a 128B-swizzled tile: 4 x k32) and the scale block of both A (1 x 128) and B (128 x 128);
// a consumer warpgroup owns 64 rows of a 128-row tile; a piece is 128 columns of D (one m64n128 fragment, 64 fp32 a
// thread: wgmma_fp8.cuh's layout, thread l of warp w holding d[4j + 0, 1] in row 16 w + l / 4 and d[4j + 2, 3] in
// row 16 w + l / 4 + 8, columns 8 j + 2 (l % 4) + {0, 1}, j = 0 .. 15).
#pragma once

#include <cuda_bf16.h>
#include "course.cuh"
#include "mbarrier.cuh"
#include "warpgroup.cuh"
#include "wgmma_fp8.cuh"

// The ring's base: the dynamic shared memory aligned up to the 128B swizzle's 1024-byte period (by arithmetic, not
// by __align__ on the extern array: that pads the static shared memory to 1 KiB). `smem` gets the same byte as a
// generic pointer (the consumers read sa through it); the launcher's SMEM_DYNAMIC holds the <= 1 KiB of slack.
__device__ __forceinline__ unsigned align_ring(const unsigned char* smem_raw, const unsigned char*& smem) {
    const unsigned raw = smem_addr(smem_raw);
    const unsigned base = (raw + 1023u) & ~1023u;
    smem = smem_raw + (base - raw);
    return base;
}

// Thread 0 initialises the ring's barriers: full[s] count 1 (the producer's arrive.expect_tx; the phase completes
// when that arrival and all the stage's tx bytes are in), empty[s] count `empty_arrivals` (lane 0 of each consumer
// warp that must be done with the stage: 8 in a CTA, 16 in rung 3's cluster of 2), then fence_barrier_init. The
// caller's barrier (__syncthreads, or cluster_sync where a peer arrives or multicasts) makes them visible before use.
template <int STAGES>
__device__ __forceinline__ void init_ring(unsigned long long* full, unsigned long long* empty,
                                          unsigned empty_arrivals) {
    if (threadIdx.x == 0) {
        for (int s = 0; s < STAGES; ++s) {
            mbar_init(smem_addr(&full[s]), 1);
            mbar_init(smem_addr(&empty[s]), empty_arrivals);
        }
        fence_barrier_init();
    }
}

// Every rung's entry takes the same arguments: A's and B's tensor maps ((M, K) and (N, K) e4m3, K-major, 128B
// swizzle), sa_t's ((K / 128, M) fp32: A's 1 x 128 row scales, transposed), D ((M, N) bf16), B's 128 x 128 block
// scales sb ((N / 128, K / 128) fp32), and the problem size (kernels/fp8_gemm/launch.py checks every one of them).
#define FP8_GEMM_ARGS                                                                                              \
    const __grid_constant__ CUtensorMap a_map, const __grid_constant__ CUtensorMap b_map,                          \
        const __grid_constant__ CUtensorMap sa_map, __nv_bfloat16* __restrict__ D, const float* __restrict__ sb,  \
        int M, int N, int K

// The rungs' shared memory: the dynamic part (the ring) aligned to the 128B swizzle's 1024-byte period (align_ring:
// `base` its shared address, `smem` the same byte as a generic pointer) and the ring's barriers full[s], empty[s].
#define FP8_RING_SMEM(STAGES)                                \
    extern __shared__ unsigned char smem_raw[];              \
    const unsigned char* smem;                               \
    const unsigned base = align_ring(smem_raw, smem);        \
    __shared__ __align__(8) unsigned long long full[STAGES], empty[STAGES]

// The roles of a rung's 384 threads (setmaxnreg is per warpgroup: every thread of one takes the same branch):
//     warpgroup 0      gives registers back (40 a thread); one elected thread of its warp 0 runs produce()
//                      (it issues every TMA load of the ring)
//     warpgroups 1, 2  take 232 a thread and run consume(c), c = 0, 1: tile rows 64 c .. 64 c + 63
template <class Produce, class Consume>
__device__ __forceinline__ void split_roles(Produce&& produce, Consume&& consume) {
    const int wg = warpgroup_index();
    if (wg == 0) {
        setmaxnreg_dec<40>();
        if (warp_index_in_warpgroup() == 0 && elect_one_sync()) produce();
    } else {
        setmaxnreg_inc<232>();
        consume(wg - 1);
    }
}

// Unit t of a persistent walk over (units_m, units_n) units -> its (row, column): groups of `group` unit rows;
// inside a group column by column (the group's rows of one column are consecutive units), so the units in flight at
// once share rows of A and columns of B in L2. The last group has the rows that are left (units_m - first).
__device__ __forceinline__ void grouped_order(int t, int units_m, int units_n, int group, int& row, int& col) {
    const int per_group = group * units_n, g = t / per_group, first = g * group;
    const int rows = min(group, units_m - first), r = t - g * per_group;
    row = first + r % rows;
    col = r / rows;
}

// One k-block of a (64, 128) piece: 4 k32 wgmmas into d, commit, wait for them. da names the warpgroup's 64 rows of
// A, db the piece's 128 rows of B (wgmma_desc_sw128 of a 128B-swizzled (rows, 128) e4m3 tile). scale-d is 0 on the
// first unless `accumulate`: d = this k-block's A B^T alone (the promotion's fresh fragment); rung 1's demonstration
// build (FP8_PROMOTE = 0) accumulates all of K in d instead. On return d is final and the tensor core has read the
// stage's operands (wgmma_wait<0>): the stage may be released.
__device__ __forceinline__ void kblock_mma(float (&d)[64], unsigned long long da, unsigned long long db,
                                           bool accumulate) {
    wgmma_fence();  // d was last read by the promotion (ordinary FFMAs): order that before the wgmmas
#pragma unroll
    for (int kk = 0; kk < 4; ++kk)  // 4 x k32: +32 bytes along the 128-byte row per step
        wgmma_m64n128k32_e4m3_ss(d, wgmma_desc_advance(da, 32 * kk), wgmma_desc_advance(db, 32 * kk),
                                 kk > 0 || accumulate);
    wgmma_commit();
    wgmma_wait<0>();  // d final for this k-block; the tensor core has read the piece's A and B
    wgmma_fence_operand(d);
}

// Promotion of one piece: acc[OFF + i] += tmp[i] * (sa[row] * sb), FFMA in fp32 (the FP8 datapath keeps ~ 14 bits
// inside the tensor core: wgmma_fp8.cuh). Two rows per thread (the fragment above), so two scales: s_lo for
// tmp[4j + 0, 1] (row 16 w + l / 4), s_hi for tmp[4j + 2, 3] (8 rows below), each already multiplied by the piece's
// one sb float. OFF: where the piece lies in acc (0; 64 for the right half of a 256-wide tile).
template <int OFF = 0, int N>
__device__ __forceinline__ void promote(float (&acc)[N], const float (&tmp)[64], float s_lo, float s_hi) {
    static_assert(OFF % 64 == 0 && OFF + 64 <= N, "a piece is 64 registers of acc");
#pragma unroll
    for (int j = 0; j < 16; ++j) {
        acc[OFF + 4 * j + 0] = fmaf(tmp[4 * j + 0], s_lo, acc[OFF + 4 * j + 0]);
        acc[OFF + 4 * j + 1] = fmaf(tmp[4 * j + 1], s_lo, acc[OFF + 4 * j + 1]);
        acc[OFF + 4 * j + 2] = fmaf(tmp[4 * j + 2], s_hi, acc[OFF + 4 * j + 2]);
        acc[OFF + 4 * j + 3] = fmaf(tmp[4 * j + 3], s_hi, acc[OFF + 4 * j + 3]);
    }
}

// The bf16x2 store of one piece: acc[OFF .. OFF + 63] (columns 2 OFF .. 2 OFF + 127 of the warpgroup's tile) to D
// as bf16 pairs, straight from the registers. first: this thread's pair in its first row at the tile's column 0
// (store_tile's), second: 8 rows lower. j = OFF / 4 .. OFF / 4 + 15: acc[4 j + {0, 1}] -> first[8 j + {0, 1}],
// acc[4 j + {2, 3}] -> second[8 j + {0, 1}]. One 4-byte st.global per pair (F2FP.BF16.F32.PACK_AB, then STG.E).
template <int OFF, int NA>
__device__ __forceinline__ void store_piece(const float (&acc)[NA], __nv_bfloat16* first, __nv_bfloat16* second) {
    static_assert(OFF % 64 == 0 && OFF + 64 <= NA, "a piece is 64 registers of acc");
#pragma unroll
    for (int j = OFF / 4; j < OFF / 4 + 16; ++j) {
        *reinterpret_cast<__nv_bfloat162*>(first + 8 * j) = __floats2bfloat162_rn(acc[4 * j + 0], acc[4 * j + 1]);
        *reinterpret_cast<__nv_bfloat162*>(second + 8 * j) = __floats2bfloat162_rn(acc[4 * j + 2], acc[4 * j + 3]);
    }
}

// The epilogue of a consumer warpgroup: its (64, 2 NA) accumulator — (64, 128) in rung 1, (64, 256) in rungs 2 and 3
// (the left piece only where !wide: a half tile) — to D, row-major with N columns, from the registers. row0: the
// warpgroup's first row of D (m0 + 64 c); thread l of warp w stores acc[4 j + {0, 1}] to
// D[row0 + 16 w + l / 4, n0 + 8 j + 2 (l % 4) + {0, 1}] and acc[4 j + {2, 3}] 8 rows lower: 32 4-byte stores per
// piece per thread, nothing to wait for before the CTA exits (no shared memory, no TMA store).
template <int NA>
__device__ __forceinline__ void store_tile(const float (&acc)[NA], __nv_bfloat16* __restrict__ D, int N, int row0,
                                           int n0, bool wide = true) {
    static_assert(NA == 64 || NA == 128, "one or two (64, 128) pieces");
    const int lane = lane_index(), w = warp_index_in_warpgroup();
    __nv_bfloat16* first = D + static_cast<long long>(row0 + 16 * w + lane / 4) * N + n0 + 2 * (lane % 4);
    __nv_bfloat16* second = first + 8 * static_cast<long long>(N);
    store_piece<0>(acc, first, second);
    if constexpr (NA == 128) {
        if (wide) store_piece<64>(acc, first, second);
    }
}

// Rungs 2 and 3's consumer warpgroup over one 128 x 256 tile (a half tile, 128 wide, where !wide): per k-block, wait
// for the stage, read this thread's two row scales and the tile's one or two sb floats, the left piece (kblock_mma,
// promote into acc[0 .. 63]), the right piece likewise into acc[64 .. 127] (B rows 128 .. 255: 16 KiB on), the stage
// released after the last wait and a __syncwarp (every lane's read of sa done): release(s) is lane 0's arrival(s) on
// empty[s]. `it` is the CTA's k-block count (the ring's position: stage it % STAGES, round it / STAGES, parity
// (it / STAGES) & 1 on full[s]), carried from tile to tile. The ring's stage s (1024-aligned, STAGE_TILES apart):
// | A 128 rows x 128 B | B rows 0 .. 127 | B rows 128 .. 255 |, its sa slot (128 fp32) at SA_BASE + 512 s.
// sb_row: the tile's row of sb (its left 128 columns' blocks; the right half's are the next row, kblocks on).
template <int STAGES, int STAGE_TILES, int SA_BASE, class Release>
__device__ __forceinline__ void consumer_tile(float (&acc)[128], const unsigned char* smem, unsigned base,
                                              unsigned long long* full, const float* __restrict__ sb_row, int c,
                                              int kblocks, bool wide, unsigned& it, Release release) {
    constexpr int TILE_A = 128 * 128, TILE_B_HALF = 128 * 128, SA_BYTES = 128 * 4;
    const int w = warp_index_in_warpgroup(), lane = lane_index();
    const int row = 64 * c + 16 * w + lane / 4;  // this thread's first tile row; the second is row + 8
    float tmp[64];
#pragma unroll
    for (int i = 0; i < 128; ++i) acc[i] = 0.f;
    for (int kb = 0; kb < kblocks; ++kb, ++it) {
        const unsigned s = it % STAGES, n = it / STAGES;
        const float sb0 = __ldg(sb_row + kb);                         // the left half's block of B
        const float sb1 = wide ? __ldg(sb_row + kblocks + kb) : 0.f;  // the right half's (the next row of sb)
        mbar_wait(smem_addr(&full[s]), n & 1);                        // the stage's tiles and scales have landed
        const float* sa = reinterpret_cast<const float*>(smem + SA_BASE + s * SA_BYTES);
        const float lo = sa[row], hi = sa[row + 8];
        const unsigned sA = base + s * STAGE_TILES, sB = sA + TILE_A;
        // consumer c's 64 rows of A start 64 x 128 B = 8 KiB into the tile (a multiple of the 1024-byte atom)
        const unsigned long long da = wgmma_desc_sw128(sA + c * 64 * 128);
        kblock_mma(tmp, da, wgmma_desc_sw128(sB), false);
        if (!wide) {  // the half tile: the stage is done after the left half
            __syncwarp();
            release(s);
        }
        promote<0>(acc, tmp, lo * sb0, hi * sb0);
        if (wide) {
            kblock_mma(tmp, da, wgmma_desc_sw128(sB + TILE_B_HALF), false);  // B rows 128..255: 16 KiB on (16 atoms)
            __syncwarp();  // every lane's read of sa is done before lane 0 releases the stage
            release(s);
            promote<64>(acc, tmp, lo * sb1, hi * sb1);
        }
    }
}
