// promote_overlap.cuh — the consumer week 3 day 1's rungs 4-6 share (kernels/fp8_gemm/r4_overlap.cu,
// r5_overlap_cluster.cu, r6_tma_store.cu; rungs 4 and 6 also its producer): a warpgroup's (64, 128) piece of a
// 128 x 128 tile over the tile's k-blocks, each k-block's promotion run while the warpgroup's next k-block is in the
// tensor core (two fragments, wgmma_wait<1>), in steps of
// UNROLL k-blocks with nothing in flight across a step's end (r4_overlap.cu's header: the diagram, and why a fragment
// in flight across the loop's back-edge makes ptxas serialize every wgmma). What differs between the rungs is a
// template argument: the ring's depth and layout (OverlapRing) and how a stage is handed back (`release(s)`: this
// CTA's empty[s] in rung 4; both CTAs' in rung 5's cluster).
//
// Instructor-only (autograder/release_check.py INSTRUCTOR_ONLY): it calls block_scaled.cuh's promote() (week 3 day
// 1's exercise answered) and is left out of the student release with the rungs that include it.
//
// The stage layout both rungs use (1024-aligned): | A tile (128 rows x 128 B) 16 KiB | B tile (128 rows x 128 B)
// 16 KiB | (128B swizzle), and sa slot s (128 fp32 = 512 B) at SA_BASE + 512 s. Consumer c reads A rows 64 c ..
// 64 c + 63 (8 KiB into the A tile) and all of B.
#pragma once

#include "block_scaled.cuh"
#include "tma.cuh"

template <int STAGES_, int STAGE_TILES_, int SA_BASE_>
struct OverlapRing {
    static constexpr int STAGES = STAGES_, STAGE_TILES = STAGE_TILES_, SA_BASE = SA_BASE_;
    static constexpr int TILE_A = 128 * 128, SA_BYTES = 128 * 4;  // one byte per e4m3; 128 row scales
    const unsigned char* smem;  // the ring's first byte, generic (sa is read through it)
    unsigned base;              // the same byte, shared-window address (TMA and wgmma descriptors)
    unsigned long long* full;   // full[s]: the stage's tiles and scales have landed
};

// The producer of a CTA that walks 128 x 128 tiles alone (rungs 4 and 6; one elected thread): rung 1's three TMA loads
// per k-block, over every tile of this CTA (tiles b, b + grid, ...) in the grouped order (GROUP_M tile rows per
// group); `it` runs on across tiles (the ring's position). full[s] counts 1 arrival + 33280 bytes; empty[s] the 8
// consumer warps of this CTA. Coordinates are {inner, outer} in elements.
template <class Ring, int GROUP_M>
__device__ __forceinline__ void overlap_producer(const CUtensorMap* a_map, const CUtensorMap* b_map,
                                                 const CUtensorMap* sa_map, unsigned base, unsigned long long* full,
                                                 unsigned long long* empty, int M, int N, int kblocks) {
    constexpr int BM = 128, BN = 128, BK = 128, TILE_A = Ring::TILE_A, SA_BYTES = Ring::SA_BYTES;
    constexpr int STAGE_TX = TILE_A + BN * BK + SA_BYTES;  // 33280
    const int tiles_m = M / BM, tiles_n = N / BN, tiles = tiles_m * tiles_n;
    unsigned it = 0;
    for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
        int i, j;
        grouped_order(t, tiles_m, tiles_n, GROUP_M, i, j);
        const int m0 = i * BM, n0 = j * BN;
        for (int kb = 0; kb < kblocks; ++kb, ++it) {
            const unsigned s = it % Ring::STAGES, n = it / Ring::STAGES;
            const unsigned sA = base + s * Ring::STAGE_TILES, sB = sA + TILE_A;
            const unsigned sS = base + Ring::SA_BASE + s * SA_BYTES;
            const unsigned fb = smem_addr(&full[s]);
            mbar_wait(smem_addr(&empty[s]), (n & 1) ^ 1);  // the 8 consumer warps are done with round n - 1
            mbar_arrive_expect_tx(fb, STAGE_TX);             // 1 arrival + 33280 bytes complete the phase
            tma_load_2d(sA, a_map, kb * BK, m0, fb);         // A[m0 .., 128 kb ..]: (128, 128) e4m3, 128B swizzle
            tma_load_2d(sB, b_map, kb * BK, n0, fb);         // B[n0 .., 128 kb ..]: (128, 128) e4m3, 128B swizzle
            tma_load_2d(sS, sa_map, m0, kb, fb);             // sa_t[kb, m0 .. m0 + 127]: 512 contiguous B
        }
    }
}

// Issue k-block kb of the tile (ring position it): wait for its stage, read this thread's two row scales times the
// block's sb float (lo, hi), 4 k32 wgmmas into t (scale-d = 0 on the first: t = this k-block's A B^T alone),
// commit. No wait: the group runs on while the caller promotes an older fragment.
template <class Ring>
__device__ __forceinline__ void issue(float (&t)[64], const Ring& r, const float* __restrict__ sb_row, int c, int row,
                                      int kb, unsigned it, float& lo, float& hi) {
    const unsigned s = it % Ring::STAGES, n = it / Ring::STAGES;
    const float sb = __ldg(sb_row + kb);
    mbar_wait(smem_addr(&r.full[s]), n & 1);  // tiles and scales of round n have landed
    const float* sa = reinterpret_cast<const float*>(r.smem + Ring::SA_BASE + s * Ring::SA_BYTES);
    lo = sa[row] * sb, hi = sa[row + 8] * sb;
    const unsigned sA = r.base + s * Ring::STAGE_TILES, sB = sA + Ring::TILE_A;
    const unsigned long long da = wgmma_desc_sw128(sA + c * 64 * 128), db = wgmma_desc_sw128(sB);
    wgmma_fence();  // t was last read by a promotion (ordinary FFMAs): order that before the wgmmas
#pragma unroll
    for (int kk = 0; kk < 4; ++kk)  // 4 x k32: +32 bytes along the 128-byte row per step
        wgmma_m64n128k32_e4m3_ss(t, wgmma_desc_advance(da, 32 * kk), wgmma_desc_advance(db, 32 * kk), kk > 0);
    wgmma_commit();
}

// Retire the k-block at ring position it whose fragment is t: wgmma_wait<PENDING> (PENDING = 1: every group but the
// newest — the k-block issued after this one — is done), hand the stage back (every lane's sa read done: __syncwarp;
// then release(s)), promote t into acc with its scales.
template <int PENDING, class Ring, class Release>
__device__ __forceinline__ void retire(float (&acc)[64], float (&t)[64], const Ring& r, Release& release, unsigned it,
                                       float lo, float hi) {
    wgmma_wait<PENDING>();
    wgmma_fence_operand(t);
    __syncwarp();
    release(it % Ring::STAGES);
    promote(acc, t, lo, hi);
}

// U k-blocks from kb (ring position it), overlapped (r4_overlap.cu's diagram, there for U = 4): k-block kb + u
// issued into fragment u % 2, then kb + u - 1 retired (wait<1>) while it runs; the last retired with wait<0>, so
// nothing is in flight when this returns. U = 1 is rung 1's order (issue, wait<0>, promote). Fully unrolled: every
// t[u % 2] is a register, the fragments never touch local memory.
template <int U, class Ring, class Release>
__device__ __forceinline__ void overlap_steps(float (&acc)[64], float (&t)[2][64], float (&lo)[2], float (&hi)[2],
                                              const Ring& r, Release& release, const float* __restrict__ sb_row,
                                              int c, int row, int kb, unsigned it) {
    issue(t[0], r, sb_row, c, row, kb, it, lo[0], hi[0]);
#pragma unroll
    for (int u = 1; u < U; ++u) {
        issue(t[u % 2], r, sb_row, c, row, kb + u, it + u, lo[u % 2], hi[u % 2]);
        retire<1>(acc, t[(u - 1) % 2], r, release, it + u - 1, lo[(u - 1) % 2], hi[(u - 1) % 2]);  // kb + u - 1
    }
    retire<0>(acc, t[(U - 1) % 2], r, release, it + U - 1, lo[(U - 1) % 2], hi[(U - 1) % 2]);
}

// The k-blocks the body leaves (kblocks % UNROLL < UNROLL, UNROLL a power of two): one overlap_steps<U> for each
// binary digit of the remainder, U = UNROLL / 2, ..., 2, 1 — overlapped as far as the remainder allows.
template <int U, class Ring, class Release>
__device__ __forceinline__ void overlap_tail(float (&acc)[64], float (&t)[2][64], float (&lo)[2], float (&hi)[2],
                                             const Ring& r, Release& release, const float* __restrict__ sb_row, int c,
                                             int row, int kblocks, int& kb, unsigned& it) {
    if constexpr (U >= 1) {
        if (kb + U <= kblocks) {
            overlap_steps<U>(acc, t, lo, hi, r, release, sb_row, c, row, kb, it);
            kb += U, it += U;
        }
        overlap_tail<U / 2>(acc, t, lo, hi, r, release, sb_row, c, row, kblocks, kb, it);
    }
}

// One tile's mainloop of consumer c: acc = the tile's rows 64 c .. 64 c + 63, promoted, over all k-blocks; the body
// by UNROLL k-blocks (nothing in flight across its back-edge), then the tail. `it` (the ring's position) is carried
// from tile to tile. sb_row: sb[n0 / 128, :], the tile's column of B's block scales.
template <int UNROLL, class Ring, class Release>
__device__ __forceinline__ void overlap_tile(float (&acc)[64], const Ring& r, Release& release,
                                             const float* __restrict__ sb_row, int c, int kblocks, unsigned& it) {
    static_assert(UNROLL >= 2 && UNROLL <= 64 && (UNROLL & (UNROLL - 1)) == 0,
                  "FP8_UNROLL: a power of two, 2..64 (k-blocks per iteration of the k-loop)");
    const int row = 64 * c + 16 * warp_index_in_warpgroup() + lane_index() / 4;
    float t[2][64];  // never read before a wgmma with scale-d = 0 has written them: no zeroing needed
    float lo[2], hi[2];
#pragma unroll
    for (int i = 0; i < 64; ++i) acc[i] = 0.f;
    int kb = 0;
    for (; kb + UNROLL <= kblocks; kb += UNROLL, it += UNROLL)
        overlap_steps<UNROLL>(acc, t, lo, hi, r, release, sb_row, c, row, kb, it);
    overlap_tail<UNROLL / 2>(acc, t, lo, hi, r, release, sb_row, c, row, kblocks, kb, it);
}

// Consumer c of a CTA that walks 128 x 128 tiles alone (rungs 4 and 6): the same tiles in the same order as
// overlap_producer's (tiles b, b + grid, ..., grouped), each tile's k-blocks by overlap_tile — a stage handed back by
// lane 0 of each warp on this CTA's empty[s] — then epilogue(acc, m0, n0): acc holds D rows m0 .. m0 + 63 (this
// warpgroup's), cols n0 .. n0 + 127, promoted, in fp32. `it` (the ring's position) runs on across tiles, in step
// with the producer's.
template <int UNROLL, int GROUP_M, class Ring, class Epilogue>
__device__ __forceinline__ void overlap_consumer(const Ring& r, unsigned long long* empty, const float* __restrict__ sb,
                                                 int c, int M, int N, int kblocks, Epilogue&& epilogue) {
    const int tiles_m = M / 128, tiles_n = N / 128, tiles = tiles_m * tiles_n;
    auto release = [&](unsigned s) {
        if (lane_index() == 0) mbar_arrive(smem_addr(&empty[s]));
    };
    unsigned it = 0;  // the same count as the producer's
    float acc[64];
    for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
        int i, j;
        grouped_order(t, tiles_m, tiles_n, GROUP_M, i, j);
        overlap_tile<UNROLL>(acc, r, release, sb + static_cast<long long>(j) * kblocks, c, kblocks, it);
        epilogue(acc, i * 128 + 64 * c, j * 128);
    }
}
