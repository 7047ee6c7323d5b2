// r6_tma_store.cu — week 3 day 1, rung 6: rung 4 (r4_overlap.cu: 128 x 128 tiles, persistent, each promotion
// overlapped with the next k-block's wgmmas) with its epilogue moved off the registers' critical path: each consumer
// warpgroup writes its (64, 128) piece of D as bf16 into a 128B-swizzled staging area with stmatrix and one thread
// hands it to the TMA (cp.async.bulk.tensor store), then the warpgroup goes straight on to its next tile's k-blocks
// while the TMA writes D — as week 2's GEMM rung 6 (kernels/gemm/r6_store_warp.cu) does for bf16.
//
//   D (M, N) = bf16( sum over k-blocks kb of  (A[:, kb] . B[:, kb]^T) * sa[m, kb] * sb[n / 128, kb] )
//
//   A  (M, K)  float8_e4m3fn, K contiguous        sa_t (K/128, M) fp32: sa[m, kb] at sa_t[kb, m] ("1D": 1 x 128)
//   B  (N, K)  float8_e4m3fn, K contiguous        sb   (N/128, K/128) fp32 row-major    ("2D": 128 x 128 blocks)
//   M, N, K multiples of 128; every pointer 16-byte aligned (kernels/fp8_gemm/launch.py gemm_fp8_tma_store checks).
//
// Why: rungs 1-5 store D from the registers, 32 4-byte st.global per thread per tile (store_tile), 16 bytes of a row
// per 4 lanes — and the warpgroup's tensor core waits until the last has issued. Measured on an H200 in interleaved
// rounds (`python -m kernels.fp8_gemm.rounds --ablations`, kernels/fp8_gemm/epilogue_rounds_h200.json; held by
// tests/test_fp8_gemm_tma_store.py): rung 4 built with its stores never run is ahead of rung 4 itself by more than
// this rung's one stage less costs it — the largest single cost the ladder had left. Here the stores are: 8
// stmatrix.x4 per thread into shared memory (the same addressing as week 2's rung 6: row r's 16-byte chunk j at chunk
// j ^ (r % 8), conflict-free), a fence, a warpgroup barrier, and two TMA stores issued by one thread.
//
// The staging protocol of consumer c (its own 16 KiB: two (64 rows, 64 cols) bf16 pieces of 8 KiB, 128 B a row):
//
//     tile t:  k-blocks (overlap_tile) ... | wait_read<0> (thread 0: tile t-1's stores have READ the staging)
//              bar.sync (c) | stmatrix x 8, fence.proxy.async | bar.sync (c) | thread 0: 2 x TMA store, commit
//     tile t+1: k-blocks ...                                  (the TMA writes tile t's D meanwhile)
//
//   the first barrier keeps every thread's stmatrix after thread 0's wait (no write into a staging area the TMA may
//   still read); the fence makes the generic-proxy writes visible to the async proxy (the TMA), the second barrier
//   orders all 128 threads' writes and fences before thread 0's store. Thread 0 waits for its stores' writes
//   (bulk wait_group 0) before it exits: the CTA's shared memory must outlive the TMA's reads.
//
// Hardware contract:
//   tile (BM, BN, BK) = (128, 128, 128); tiles (M / 128) x (N / 128); grid min(tiles, SMs) (launch.py overlap_grid)
//   stage s (1024-aligned):  | A tile 16 KiB | B tile 16 KiB | (128B swizzle) + sa slot s: 512 B in the scale area
//   expect-tx per stage: 16384 (A) + 16384 (B) + 512 (sa) = 33280 bytes; full[s] init count 1; empty[s] init
//     count 8 (rung 4's ring, producer and consumer: promote_overlap.cuh)
//   staging (after the scale area, 1024-aligned): consumer c's pieces at STAGING_BASE + 16 KiB c + 8 KiB piece;
//     piece p holds D rows m0 + 64 c .. + 63, cols n0 + 64 p .. + 63 as 64 rows of 128 B, 128B-swizzled: D's
//     tensor map (launch.py D_BOX) has box (64 rows, 64 cols) and the 128B swizzle, so the TMA un-swizzles it.
//   dynamic shared memory (STAGES = 5): | <= 1 KiB align | 5 x 32 KiB tiles | 5 x 512 B sa, padded to 3 KiB |
//     2 x 16 KiB staging | = 200704 B (+ 96 B of static barriers) <= 227 KiB: one stage less than rung 4 (6 stages
//     and the staging exceed 227 KiB; the same rounds time rung 4 at 5 stages, overlap_s5: what the stage costs).
//   registers: producer 128 x 40 + consumers 2 x 128 x 232 = 64512 <= 65536; no spills (tests/test_fp8_gemm_tma_
//     store.py)
//
// SASS you should see (each named opcode is checked against the listing by tests/test_fp8_gemm_kernel.py; the counts
// by tests/test_fp8_gemm_tma_store.py): `UTMALDG.2D` (A, B and sa: 3 per k-block), `QGMMA.64x128x32.F32.E4M3.E4M3`
// (rung 4's 124), `WARPGROUP.DEPBAR.LE` (rung 4's waits), `FFMA` (the promotion), `F2FP.BF16.F32.PACK_AB` (fp32
// pairs to bf16x2), `STSM.16.M88.4` (stmatrix.x4: 8 per thread per tile), `FENCE.VIEW.ASYNC.S` (fence.proxy.async),
// `UTMASTG.2D` (the TMA stores), `UTMACMDFLUSH` (commit_group); and none of: `HGMMA`, `LDGSTS`, `LDL`, `STL`, `STG`.

#include "course.cuh"
#include "mbarrier.cuh"
#include "tma.cuh"
#include "swizzle.cuh"          // stsm_x4: stmatrix.sync.aligned.m8n8.x4 (STSM.16.M88.4)
#include "warpgroup.cuh"
#include "wgmma_fp8.cuh"
#include "block_scaled.cuh"     // grouped_order, align_ring, init_ring, split_roles
#include "promote_overlap.cuh"  // overlap_producer, overlap_consumer: rung 4's
#include <cuda_bf16.h>

#ifndef FP8_STAGES
#define FP8_STAGES 5        // the ring's depth (with the staging: 5 fits, 6 does not)
#endif
#ifndef FP8_GROUP_M
#define FP8_GROUP_M 16      // tile rows per group of the persistent walk
#endif
#ifndef FP8_UNROLL
#define FP8_UNROLL 16       // k-blocks per step of the k-loop (rung 4's)
#endif

constexpr int BM = 128, BN = 128, BK = 128, STAGES = FP8_STAGES;  // (BM, BN, BK, STAGES)
constexpr int TILE_A = BM * BK, TILE_B = BN * BK;                 // 16 KiB each: one byte per e4m3
constexpr int STAGE_TILES = TILE_A + TILE_B;                      // 32 KiB (1024-aligned stages)
constexpr int SA_BYTES = BM * 4;                                  // 128 row scales, fp32: 512 B
constexpr int STAGE_TX = TILE_A + TILE_B + SA_BYTES;              // 33280 B counted on full[s]
constexpr int SA_BASE = STAGES * STAGE_TILES;                     // the scale area follows the tiles
constexpr int STAGING_BASE = SA_BASE + (STAGES * SA_BYTES + 1023) / 1024 * 1024;  // 1024-aligned: the swizzle's
constexpr int PIECE_COLS = 64, PIECES = BN / PIECE_COLS;          // a piece: 64 bf16 = 128 B a row (the swizzle span)
constexpr int PIECE_BYTES = 64 * PIECE_COLS * 2;                  // 8 KiB: 64 rows of 128 B
constexpr int STAGING_BYTES = 2 * PIECES * PIECE_BYTES;           // 32 KiB: 2 consumers x 2 pieces
constexpr int SMEM_DYNAMIC = 1024 + STAGING_BASE + STAGING_BYTES;  // align + ring + scales + staging
constexpr int CONSUMER_WARPS = 8;                                 // empty[s]'s arrival count
constexpr int GROUP_M = FP8_GROUP_M;
constexpr int UNROLL = FP8_UNROLL;

static_assert(STAGES >= 3 && STAGES <= 5, "FP8_STAGES: 3..5 (a consumer holds 2 stages; 6 and the staging exceed "
                                          "227 KiB)");
static_assert(SMEM_DYNAMIC + 1024 <= 227 * 1024, "the ring, the scales and the staging exceed 227 KiB");
static_assert(GROUP_M >= 1, "FP8_GROUP_M: at least 1");
static_assert(STAGE_TX == 33280 && STAGING_BASE % 1024 == 0, "rung 4's stage; staging on a swizzle period");

using Ring = OverlapRing<STAGES, STAGE_TILES, SA_BASE>;
static_assert(Ring::TILE_A == TILE_A && Ring::SA_BYTES == SA_BYTES, "the stage layout promote_overlap.cuh assumes");

__device__ __forceinline__ unsigned bf16x2_bits(float lo, float hi) {
    __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<unsigned*>(&v);
}

// The epilogue of consumer c (the staging protocol in the header): acc — rows m0 .. m0 + 63 (this warpgroup's), cols
// n0 .. n0 + 127 — to bf16 in its staging pieces, then to D by two TMA stores issued by the warpgroup's thread 0.
// stmatrix addressing (week 2's rung 6): lanes 8 m .. 8 m + 7 name rows 0..7 of matrix m of an x4; matrix m is rows
// (m & 1) x 8 .. + 7 of this warp's 16 and 16-byte chunk (m >> 1) of a chunk pair; row r's chunk j lies at chunk
// j ^ (r % 8) = j ^ (lane % 8): one 16-byte bank group per row of a matrix, conflict-free.
__device__ __forceinline__ void store_tile_tma(const float (&acc)[64], const CUtensorMap* d_map, unsigned staging,
                                               int c, int m0, int n0) {
    const int lane = lane_index(), w = warp_index_in_warpgroup();
    const bool leader = threadIdx.x % 128 == 0;
    const int srow = 16 * w + 8 * ((lane / 8) & 1) + lane % 8, shalf = lane / 16;
    if (leader) bulk_wait_read<0>();   // the last tile's stores have read the staging (long done: a tile ago)
    named_barrier_sync(1 + c, 128);    // ... before anyone writes it again
#pragma unroll
    for (int piece = 0; piece < PIECES; ++piece) {
        const unsigned row_base = staging + piece * PIECE_BYTES + srow * 128;
#pragma unroll
        for (int pair = 0; pair < PIECE_COLS / 16; ++pair) {
            // accumulator cols 8 j .. 8 j + 15, j = 8 piece + 2 pair (wgmma_fp8.cuh's layout): d[4 j + 0, 1] rows
            // 0-7 chunk j, d[4 j + 2, 3] rows 8-15 chunk j, then the same for chunk j + 1
            const int j = PIECE_COLS / 8 * piece + 2 * pair;
            const unsigned v[4] = {bf16x2_bits(acc[4 * j], acc[4 * j + 1]),
                                   bf16x2_bits(acc[4 * j + 2], acc[4 * j + 3]),
                                   bf16x2_bits(acc[4 * j + 4], acc[4 * j + 5]),
                                   bf16x2_bits(acc[4 * j + 6], acc[4 * j + 7])};
            stsm_x4(row_base + (((2 * pair + shalf) ^ (lane % 8)) << 4), v);
        }
    }
    fence_proxy_async();             // my stmatrix writes, visible to the TMA (async proxy)
    named_barrier_sync(1 + c, 128);  // every thread's writes and fences before the store
    if (leader) {
#pragma unroll
        for (int piece = 0; piece < PIECES; ++piece)  // D[m0 .., n0 + 64 piece ..]: box (64, 64), 128B swizzle
            tma_store_2d(d_map, n0 + piece * PIECE_COLS, m0, staging + piece * PIECE_BYTES);
        bulk_commit();
    }
}

extern "C" __global__ void __launch_bounds__(384, 1)
fp8_gemm_tma_store(FP8_GEMM_ARGS, const __grid_constant__ CUtensorMap d_map) {
    FP8_RING_SMEM(STAGES);
    const int kblocks = K / BK;

    init_ring<STAGES>(full, empty, CONSUMER_WARPS);  // full[s]: the producer's arrive + 33280 B; empty[s]: 8 warps
    __syncthreads();

    split_roles([&] { overlap_producer<Ring, GROUP_M>(&a_map, &b_map, &sa_map, base, full, empty, M, N, kblocks); },
                [&](int c) {  // consumer c: tile rows 64 c .. 64 c + 63
                    const Ring r{smem, base, full};
                    const unsigned staging = base + STAGING_BASE + c * PIECES * PIECE_BYTES;
                    overlap_consumer<UNROLL, GROUP_M>(r, empty, sb, c, M, N, kblocks,
                                                      [&](const float (&acc)[64], int m0, int n0) {
                                                          store_tile_tma(acc, &d_map, staging, c, m0, n0);
                                                      });
                    if (threadIdx.x % 128 == 0) bulk_wait<0>();  // the stores done before the CTA's memory goes
                });
}
