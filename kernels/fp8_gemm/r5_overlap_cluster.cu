// r5_overlap_cluster.cu — week 3 day 1, rung 5: rung 4 (r4_overlap.cu: 128 x 128 tiles, persistent, each promotion
// overlapped with the next k-block's wgmmas) run in clusters of 2 CTAs along M that share each B tile by TMA
// multicast, as rung 3 (r3_cluster.cu) does for rung 2 — the shape of cuBLASLt's blockwise FP8 kernel
// (nvjet_sm90_qqtst_128x128_128x6_2x1_..: 128 x 128 tiles, 6 stages, a 2 x 1 cluster). Inputs, maps, scales and math
// are rung 1's:
//
//   D (M, N) = bf16( sum over k-blocks kb of  (A[:, kb] . B[:, kb]^T) * sa[m, kb] * sb[n / 128, kb] )
//
//   A  (M, K)  float8_e4m3fn, K contiguous        sa_t (K/128, M) fp32: sa[m, kb] at sa_t[kb, m] ("1D": 1 x 128)
//   B  (N, K)  float8_e4m3fn, K contiguous        sb   (N/128, K/128) fp32 row-major    ("2D": 128 x 128 blocks)
//   M, N, K multiples of 128 (kernels/fp8_gemm/launch.py gemm_fp8_overlap_cluster checks); M / 128 odd: the last tile
//   pair has one live CTA (below).
//
// The question this rung asks: is rung 4 behind cuBLASLt because its 128 x 128 tile asks L2 for 32 KiB per k-block
// (2 x 128^3 FLOPs) — twice rung 2's bytes per FLOP? Here the two CTAs of a cluster compute vertically adjacent
// tiles, (m0, n0) and (m0 + 128, n0), which need the same B tile; each loads HALF of it (64 rows) ONCE from L2 and
// the TMA writes that box into both CTAs' stage: L2 sends 16 (A) + 8 (half of B) = 24 KiB per CTA per k-block, each
// CTA still receives 32 KiB. The answer, measured (kernels/fp8_gemm/rounds_h200.json, the README's claims table;
// tests/test_fp8_gemm_overlap_cluster.py holds this sentence to the record): on an H200 this rung is BEHIND rung 4 —
// L2's bytes are not what holds rung 4 back, and the cluster's lockstep (a stage refilled only when both CTAs are
// done with it) costs more than the bytes it saves. cuBLASLt's 2 x 1 cluster is not, by itself, its lead.
//
//                  +---- B0 from rank 0, ctaMask 0b11 ----+              B0 = B rows n0 + 0 .. 63
//                  |    +-- B1 from rank 1, ctaMask 0b11 -|----+         B1 = B rows n0 + 64 .. 127
//                  v    v                                 v    v
//   rank 0: [ A0 | B0 | B1 | sa0 ]         rank 1: [ A1 | B0 | B1 | sa1 ]    stage s, same offsets in both CTAs
//   A0, sa0: A rows m0 .., sa_t[kb, m0 ..] (rank 0's own plain TMA); A1, sa1: rows m0 + 128 .. (rank 1's own).
//   B0 lands at sB + 0, B1 at sB + 8 KiB: a (64 rows, 128 B) box of B's own map (launch.py HALF_B_BOX), 128B-swizzled;
//   8 KiB is a whole number of the swizzle's 1 KiB periods, so the two boxes make the same 16 KiB tile one (128, 128)
//   box would, and the wgmma descriptor reads it unchanged.
//
// - full[s] of each CTA expects 33280 bytes per k-block, as in rung 4 (its A 16 KiB + sa 512 B + both B halves
//   16 KiB: one from its own TMA, one from the peer's); a peer's bytes may land before the local arrive.expect_tx.
// - empty[s] is cluster-wide: rank r's refill of its B half writes into the peer's stage too, so a stage is refilled
//   only when the consumers of BOTH CTAs are done with it. Each consumer warp's lane 0 arrives on its own CTA's
//   empty[s] and on the peer's (mapa + mbarrier.arrive.shared::cluster): init count 2 CTAs x 8 warps = 16.
// - both CTAs walk the same tile pairs (units) in the same order (cluster id = blockIdx.x / 2, step gridDim.x / 2):
//   the same k-block sequence, so stage s and round n mean the same k-block in both.
// - the M tail (M / 128 odd): the last pair row's rank-1 tile lies below M. That CTA stays in the lockstep: per
//   k-block it arms full[s] for the B bytes only (16 KiB), multicasts its B half, its consumers wait and release both
//   CTAs' stage; it loads no A, no sa, runs no wgmma and stores nothing (drain_tile). As in rung 3.
// - barriers initialised and made visible cluster-wide (fence_barrier_init + cluster_sync) before any multicast or
//   remote arrive; a final cluster_sync: no CTA exits while its peer may still multicast into it or arrive on it.
//
//     warpgroup 0 (producer):   warp 0, one elected lane: TMA loads of A, sa, B's half (multicast); setmaxnreg 40
//     warpgroups 1, 2:          consumer c: rows 64 c .. 64 c + 63 of the tile (promote_overlap.cuh); setmaxnreg 232
//
// Hardware contract:
//   tile (BM, BN, BK) = (128, 128, 128); units (tile pairs): ceil(M / 256) x (N / 128); grid = 2 x min(units,
//     SMs / 2) CTAs in clusters of 2 (launch.py overlap_cluster_grid; launched with cluster = 2)
//   stage s (1024-aligned): | A (128 rows x 128 B) 16 KiB | B rows 0..63 8 KiB | B rows 64..127 8 KiB |  (128B
//     swizzle) + sa slot s: 128 fp32 = 512 B in the scale area (no swizzle)
//   expect-tx per stage: 16384 (A) + 2 x 8192 (B: own half + peer's half) + 512 (sa) = 33280 bytes (a drained tile:
//     16384, the B halves only). full[s] init count 1 (this CTA's producer's arrive.expect_tx). empty[s] init count
//     16 (8 consumer warps x 2 CTAs, once their k-block's wgmmas are retired and the warp has read sa).
//   multicast: cp.async.bulk.tensor...multicast::cluster, ctaMask 0b11 (both ranks); dst and barrier are this CTA's
//     offsets, the same in the peer (the same kernel, the same shared-memory layout).
//   parity: the CTA's k-block it (counted over all its units) uses stage s = it % STAGES in round n = it / STAGES,
//     the same it in both CTAs; consumers wait full[s] with parity n & 1; the producer waits empty[s] with parity
//     (n & 1) ^ 1. A consumer holds at most 2 stages at once (rung 4's overlap).
//   dynamic shared memory (STAGES = 6): rung 4's, | <= 1 KiB align | 6 x 32 KiB tiles | 6 x 512 B sa, padded to
//     3 KiB | = 200704 B (+ 96 B of static barriers) <= 227 KiB.
//   registers: producer 128 x 40 + consumers 2 x 128 x 232 = 64512 <= 65536; no spills (tests/test_fp8_gemm_overlap_
//     cluster.py)
//   epilogue: rung 1's (store_tile): 32 4-byte st.global of bf16 pairs per thread per tile; a drained tile: none.
//
// SASS you should see (each named opcode is checked against the listing by tests/test_fp8_gemm_kernel.py; the counts
// by tests/test_fp8_gemm_overlap_cluster.py): `UTMALDG.2D` (A and sa: 2 per k-block), `UTMALDG.2D.MULTICAST` (this
// CTA's half of B, into both CTAs), `SYNCS.EXCH.64` (mbarrier.init), `SYNCS.ARRIVE.TRANS64` (arrive.expect_tx),
// `SYNCS.PHASECHK.TRANS64.TRYWAIT` (every mbarrier wait), `SYNCS.ARRIVE.TRANS64.A1T0` (a consumer warp releasing its
// own CTA's stage), `SYNCS.ARRIVE.TRANS64.RED.A1T0` (... and the peer's), `UCGABAR_ARV` and `UCGABAR_WAIT` (the
// cluster barriers), `USETMAXREG` (40 / 232), `WARPGROUP.ARRIVE` (wgmma_fence), `QGMMA.64x128x32.F32.E4M3.E4M3` (4
// per k-block of code: rung 4's 124), `WARPGROUP.DEPBAR.LE` (rung 4's 26 overlapped retirements and 5 full ones),
// `FFMA` (the promotion), `F2FP.BF16.F32.PACK_AB`, `STG.E` (the epilogue); and none of: `HGMMA`, `LDGSTS`, `LDL`,
// `STL`, `STSM`, `UTMASTG`.

#include "course.cuh"
#include "mbarrier.cuh"
#include "tma.cuh"
#include "cluster.cuh"
#include "warpgroup.cuh"
#include "wgmma_fp8.cuh"
#include "block_scaled.cuh"     // store_tile, grouped_order, align_ring, init_ring, split_roles
#include "promote_overlap.cuh"  // overlap_tile: rung 4's overlapped promotion, the release a template argument
#include <cuda_bf16.h>

#ifndef FP8_STAGES
#define FP8_STAGES 6        // the ring's depth (rung 4's budget: 6 fits, 7 does not)
#endif
#ifndef FP8_GROUP_M
#define FP8_GROUP_M 16      // tile rows per group of the persistent walk (8 tile pairs; unit_coords)
#endif
#ifndef FP8_UNROLL
#define FP8_UNROLL 16       // k-blocks per step of the k-loop (rung 4's; a power of two, the rest its binary digits)
#endif

constexpr int BM = 128, BN = 128, BK = 128, STAGES = FP8_STAGES;  // (BM, BN, BK, STAGES)
constexpr int CLUSTER = 2;                                        // CTAs per cluster, along M
constexpr int HALF_ROWS = BN / CLUSTER;                           // 64 rows of B per CTA's multicast box
constexpr int TILE_A = BM * BK, TILE_B = BN * BK;                 // 16 KiB each: one byte per e4m3
constexpr int HALF_B = HALF_ROWS * BK;                            // 8 KiB: a whole number of 1 KiB swizzle periods
constexpr int STAGE_TILES = TILE_A + TILE_B;                      // 32 KiB (1024-aligned stages)
constexpr int SA_BYTES = BM * 4;                                  // 128 row scales, fp32: 512 B
constexpr int STAGE_TX = TILE_A + TILE_B + SA_BYTES;              // 33280 B counted on full[s] (a live tile)
constexpr int SA_BASE = STAGES * STAGE_TILES;                     // the scale area follows the tiles
constexpr int SMEM_DYNAMIC = 1024 + SA_BASE + (STAGES * SA_BYTES + 1023) / 1024 * 1024;  // align + ring + scales
constexpr int CONSUMER_WARPS = 8;                                 // per CTA
constexpr int EMPTY_ARRIVALS = CLUSTER * CONSUMER_WARPS;          // 16: empty[s] hears from both CTAs' consumers
constexpr int GROUP_M = FP8_GROUP_M, GROUP_PAIRS = GROUP_M / CLUSTER;
constexpr int UNROLL = FP8_UNROLL;                                // k-blocks per step of the k-loop
constexpr unsigned short CTA_MASK = 0b11;                         // multicast into ranks 0 and 1

static_assert(STAGES >= 3 && STAGES <= 6, "FP8_STAGES: 3..6 (a consumer holds 2 stages; 7 exceed 227 KiB)");
static_assert(SMEM_DYNAMIC + 1024 <= 227 * 1024, "the ring and the scales exceed 227 KiB");
static_assert(GROUP_M >= CLUSTER && GROUP_M % CLUSTER == 0, "FP8_GROUP_M: a positive multiple of the cluster (2)");
static_assert(HALF_B % 1024 == 0, "each B half must start on a 128B-swizzle period");
static_assert(STAGE_TX == 33280, "A + both B halves + sa");

using Ring = OverlapRing<STAGES, STAGE_TILES, SA_BASE>;
static_assert(Ring::TILE_A == TILE_A && Ring::SA_BYTES == SA_BYTES, "the stage layout promote_overlap.cuh assumes");

// Unit u of the persistent walk (a tile pair: pair row p, tile column q) -> rank's tile (m0, n0): rung 3's grouped
// order counted in pairs (groups of GROUP_PAIRS pair rows, column by column inside a group), over 128-wide columns.
__device__ __forceinline__ void unit_coords(int u, int pairs_m, int tiles_n, unsigned rank, int& m0, int& n0) {
    int p, q;
    grouped_order(u, pairs_m, tiles_n, GROUP_PAIRS, p, q);
    m0 = (CLUSTER * p + static_cast<int>(rank)) * BM;
    n0 = q * BN;
}

// The producer (one elected thread): per unit, per k-block, wait until the stage is free in BOTH CTAs, arm full[s]
// with the bytes that will land HERE, issue this CTA's loads: its A and sa (plain TMA; none for a drained tile) and
// its half of B (multicast into both CTAs). Coordinates {inner, outer} in elements.
__device__ __forceinline__ void producer(const CUtensorMap* a_map, const CUtensorMap* b_map, const CUtensorMap* sa_map,
                                         unsigned base, unsigned long long* full, unsigned long long* empty, int M,
                                         int N, int kblocks, unsigned rank) {
    const int pairs_m = (M / BM + CLUSTER - 1) / CLUSTER, tiles_n = N / BN, units = pairs_m * tiles_n;
    unsigned it = 0;  // this CTA's k-block count over all its units: the ring's position (the peer's is the same)
    for (int u = blockIdx.x / CLUSTER; u < units; u += gridDim.x / CLUSTER) {  // 1-D cluster: id = blockIdx.x / 2
        int m0, n0;
        unit_coords(u, pairs_m, tiles_n, rank, m0, n0);
        const bool live = m0 < M;
        const unsigned tx = (live ? TILE_A + SA_BYTES : 0) + TILE_B;  // 33280, or 16384 for a drained tile
        for (int kb = 0; kb < kblocks; ++kb, ++it) {
            const unsigned s = it % STAGES, n = it / STAGES;
            const unsigned sA = base + s * STAGE_TILES, sB = sA + TILE_A, sS = base + SA_BASE + s * SA_BYTES;
            const unsigned fb = smem_addr(&full[s]);
            mbar_wait(smem_addr(&empty[s]), (n & 1) ^ 1);  // 16 consumer warps of both CTAs are done with round n - 1
            mbar_arrive_expect_tx(fb, tx);
            if (live) {
                tma_load_2d(sA, a_map, kb * BK, m0, fb);  // A[m0 .., 128 kb ..]: (128, 128) e4m3, this CTA only
                tma_load_2d(sS, sa_map, m0, kb, fb);      // sa_t[kb, m0 .. m0 + 127]: 512 contiguous B
            }
            // B rows n0 + 64 rank .. + 63: one L2 read, written at sB + 8 KiB x rank of both CTAs and counted on both
            // CTAs' full[s] (same offsets)
            tma_load_2d_multicast(sB + rank * HALF_B, b_map, kb * BK, n0 + HALF_ROWS * static_cast<int>(rank), fb,
                                  CTA_MASK);
        }
    }
}

// A consumer warp is done with stage s (its k-block retired, every lane has read sa: retire's __syncwarp): lane 0
// arrives on this CTA's empty[s] and on the peer's (the peer's producer refills its B half of OUR stage too).
struct ClusterRelease {
    unsigned long long* empty;
    unsigned peer;
    __device__ __forceinline__ void operator()(unsigned s) const {
        if (lane_index() == 0) {
            const unsigned bar = smem_addr(&empty[s]);
            mbar_arrive(bar);                            // own CTA: SYNCS.ARRIVE.TRANS64.A1T0
            mbar_arrive_remote(mapa_shared(bar, peer));  // the peer's empty[s]: SYNCS.ARRIVE.TRANS64.RED.A1T0
        }
    }
};

// A drained tile (rank 1's tile below M when M / 128 is odd): no A, no math, no store, but the ring still turns —
// wait for the B bytes the producers put here (keeps full[s]'s phases in step) and release the stage in both CTAs.
__device__ __forceinline__ void drain_tile(unsigned long long* full, const ClusterRelease& release, int kblocks,
                                           unsigned& it) {
    for (int kb = 0; kb < kblocks; ++kb, ++it) {
        const unsigned s = it % STAGES, n = it / STAGES;
        mbar_wait(smem_addr(&full[s]), n & 1);
        __syncwarp();
        release(s);
    }
}

extern "C" __global__ void __launch_bounds__(384, 1)
fp8_gemm_overlap_cluster(FP8_GEMM_ARGS) {
    FP8_RING_SMEM(STAGES);
    const int kblocks = K / BK;
    const unsigned rank = cluster_ctarank(), peer = rank ^ 1u;  // cluster of 2 along M: rank = blockIdx.x % 2

    init_ring<STAGES>(full, empty, EMPTY_ARRIVALS);  // empty[s]: lane 0 of each consumer warp of BOTH CTAs
    cluster_sync();  // both CTAs' barriers initialised (and visible) before any multicast or remote arrive

    split_roles([&] { producer(&a_map, &b_map, &sa_map, base, full, empty, M, N, kblocks, rank); },
                [&](int c) {  // consumer c: tile rows 64 c .. 64 c + 63
                    const int pairs_m = (M / BM + CLUSTER - 1) / CLUSTER, tiles_n = N / BN;
                    const Ring r{smem, base, full};
                    ClusterRelease release{empty, peer};
                    unsigned it = 0;  // the same count as the producer's (and the peer's)
                    float acc[64];
                    for (int u = blockIdx.x / CLUSTER; u < pairs_m * tiles_n; u += gridDim.x / CLUSTER) {
                        int m0, n0;
                        unit_coords(u, pairs_m, tiles_n, rank, m0, n0);
                        if (m0 >= M) {  // rank 1's tile below M (M / 128 odd): keep the ring in step with the peer
                            drain_tile(full, release, kblocks, it);
                            continue;
                        }
                        overlap_tile<UNROLL>(acc, r, release, sb + static_cast<long long>(n0 / BN) * kblocks, c,
                                             kblocks, it);
                        store_tile(acc, D, N, m0 + 64 * c, n0);  // (64, 128) fp32 -> bf16 pairs
                    }
                });
    __syncwarp();    // warp 0 of the producer reconverges (barrier.cluster is .aligned)
    cluster_sync();  // nobody exits while the peer may still multicast into it or arrive on its empty[s]
}
