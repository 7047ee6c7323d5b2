// r3_cluster.cu — week 3 day 1, rung 3: rung 2 (r2_wide.cu: 128 x 256 tiles, two consumer warpgroups, two halves of
// m64n128k32 per k-block, a persistent grouped walk) run in clusters of 2 CTAs that share B by TMA multicast — what
// cuBLASLt's blockwise FP8 kernel does (nvjet_sm90_qqtst_128x128_128x6_2x1_..: a 2 x 1 cluster). The inputs, maps,
// scales and math are rung 1's and rung 2's:
//
//   D (M, N) = bf16( sum over k-blocks kb of  (A[:, kb] . B[:, kb]^T) * sa[m, kb] * sb[n / 128, kb] )
//
//   A  (M, K)  float8_e4m3fn, K contiguous        sa_t (K/128, M) fp32: sa[m, kb] at sa_t[kb, m] ("1D": 1 x 128)
//   B  (N, K)  float8_e4m3fn, K contiguous        sb   (N/128, K/128) fp32 row-major    ("2D": 128 x 128 blocks)
//   M, N, K multiples of 128 (kernels/fp8_gemm/launch.py gemm_fp8_cluster checks); N % 256 == 128: a half tile column
//   at N's edge (rung 2's); M / 128 odd: the last tile pair has one live CTA (below).
//
// Why (day's model, kernels/fp8_gemm/model.py): rung 1 is bound by the bytes L2 sends to the SMs, not the tensor core.
// Rung 2 brought them from 32 KiB per 4.2 MFLOP to 48 KiB per 8.4 MFLOP; here each CTA still RECEIVES 48 KiB per
// k-block, but L2 SENDS only 16 (A) + 16 (its half of B) = 32 KiB per CTA: one read of each B half feeds both CTAs.
//
// New against rung 2: a cluster of 2 CTAs along M. Cluster c computes the tile pair (m, n) and (m + 128, n): rank r
// the tile at m0 = 128 (2 p + r). Both need the same 256 rows of B per k-block; rank r loads HALF of them, B rows
// n0 + 128 r .. n0 + 128 r + 127, ONCE from L2 and the TMA writes that box into the same offset of BOTH CTAs' stage
// (ctaMask 0b11), counting its bytes on the same-offset full[s] of each:
//
//                  +------- B0 from rank 0, 0b11 --------+              B0 = B rows n0 + 0 .. 127
//                  |    +----- B1 from rank 1, 0b11 -----|----+         B1 = B rows n0 + 128 .. 255
//                  |    |                                |    |
//                  v    v                                v    v
//   rank 0: [ A0 | B0 | B1 | sa0 ]        rank 1: [ A1 | B0 | B1 | sa1 ]   stage s, same offsets
//   A0, sa0: A rows m0 .., sa_t[kb, m0 ..], rank 0's own plain TMA; A1, sa1: rows m0 + 128 .., rank 1's own.
//   (each B box: ONE L2 read, one cp.async.bulk.tensor...multicast::cluster, written into both CTAs)
//
//     ctaMask bit r = CTA rank r:   rank:  0 1
//                                   B0:    X X   (issued by rank 0: dst sB + 0,      rows n0 + 0 ..)
//                                   B1:    X X   (issued by rank 1: dst sB + 16 KiB, rows n0 + 128 ..)
//     a half tile (n0 + 256 > N): one B box, rows n0 .. n0 + 127: rank 0 multicasts it, rank 1 issues no B.
//
// - full[s] of each CTA still expects 49664 bytes per k-block (its own A 16 KiB + sa 512 B + both B halves 32 KiB:
//   one from its own TMA, one from the peer's); a peer's bytes may land before the local arrive.expect_tx — the
//   tx-count goes negative for a while, and the phase cannot complete before the local arrival (count 1).
// - empty[s] is cluster-wide: a stage is refilled only when the consumers of BOTH CTAs are done with it (rank r's
//   refill of its B half writes into the peer's stage too). Each consumer warp's lane 0 arrives on its own CTA's
//   empty[s] and on the peer's (mapa + mbarrier.arrive.shared::cluster): init count 2 CTAs x 8 warps = 16.
// - both CTAs of a cluster walk the same tile pairs (units) in the same order (cluster id = blockIdx.x / 2, step =
//   gridDim.x / 2): the same k-block sequence, so stage s and round n mean the same k-block in both.
// - the M tail (M / 128 odd): the last pair row's rank-1 tile lies wholly below M. That CTA stays in the lockstep
//   (its B half and its releases are the peer's operands and signals): per k-block it arms full[s] for the B bytes
//   only (32 KiB, or 16 KiB for a half tile), multicasts its B half, its consumers wait and release both CTAs'
//   stage — but it loads no A, no sa, runs no wgmma and stores nothing (drain_tile). Chosen over refusing odd M / 128
//   (every shape rung 2 takes, this rung takes) and over the lone CTA loading all of B itself (the two CTAs' rings
//   would then count different k-blocks and a multicast would land in the wrong round).
// - barriers initialised and made visible cluster-wide (fence_barrier_init + cluster_sync) before any multicast or
//   remote arrive; a final cluster_sync: no CTA exits while its peer may still multicast into it or arrive on it.
//
//     warpgroup 0 (producer):   warp 0, one elected lane: TMA loads of A, sa, B's half (multicast); setmaxnreg 40
//     warpgroups 1, 2:          consumer c: rows 64 c .. 64 c + 63 of the tile, all 256 columns; setmaxnreg 232
//
// Hardware contract:
//   tile (BM, BN, BK) = (128, 256, 128); units (tile pairs): ceil(M / 256) x ceil(N / 256); grid = 2 x min(units,
//     SMs / 2) CTAs in clusters of 2 (launch.py cluster_grid; launched with cluster = 2)
//   stage s (1024-aligned): | A (128 rows x 128 B) 16 KiB | B rows 0..127 16 KiB | B rows 128..255 16 KiB |
//     (each a 128B-swizzled box of rung 1's maps: box (128 rows, 128 B)) + sa slot s: 128 fp32 = 512 B (no swizzle)
//   expect-tx per stage: 16384 (A) + 2 x 16384 (B: own half + peer's half) + 512 (sa) = 49664 bytes (a half tile:
//     33280, one B box; a drained tile: the B bytes only, 32768 or 16384).
//     full[s] init count 1 (this CTA's producer's arrive.expect_tx). empty[s] init count 16 (8 consumer warps x 2
//     CTAs, once the tensor core has read the stage and the warp has read sa).
//   multicast: cp.async.bulk.tensor...multicast::cluster, ctaMask 0b11 (cluster_mask_all(2)); dst and barrier are
//     this CTA's offsets, the same in the peer (every CTA runs the same kernel, the same shared-memory layout).
//   parity: the CTA's k-block it (counted over all its units) uses stage s = it % STAGES in round n = it / STAGES —
//     the same it in both CTAs of the cluster (lockstep walk); consumers wait full[s] with parity n & 1; the
//     producer waits empty[s] with parity (n & 1) ^ 1 (round 0 passes at once on a fresh barrier).
//   dynamic shared memory (STAGES = 4): rung 2's, | <= 1 KiB align | 4 x 48 KiB tiles | 4 x 512 B sa = 2 KiB |
//     = 1 + 192 + 2 = 195 KiB (199680 B; + 64 B of static barriers) <= 227 KiB (232448 B).
//   registers: producer 128 x 40 + consumers 2 x 128 x 232 = 64512 <= 65536; no spills (tests/test_fp8_gemm_cluster.py)
//   epilogue: rung 2's (one 4-byte st.global per bf16 pair, from registers); a drained tile stores nothing.
//
// SASS you should see (each named opcode is checked against the listing by tests/test_fp8_gemm_cluster.py):
// `UTMALDG.2D` (A and sa: 2 per k-block), `UTMALDG.2D.MULTICAST` (this CTA's half of B, into both CTAs),
// `SYNCS.EXCH.64` (mbarrier.init), `SYNCS.ARRIVE.TRANS64` (the producer's arrive.expect_tx),
// `SYNCS.PHASECHK.TRANS64.TRYWAIT` (every mbarrier wait), `SYNCS.ARRIVE.TRANS64.A1T0` (a consumer warp releasing its
// own CTA's stage), `SYNCS.ARRIVE.TRANS64.RED.A1T0` (... and the peer's), `UCGABAR_ARV` and `UCGABAR_WAIT` (the
// cluster barriers), `ELECT` (the producer's thread), `USETMAXREG` (40 / 232), `WARPGROUP.ARRIVE` (wgmma_fence),
// `QGMMA.64x128x32.F32.E4M3.E4M3` (x 8 per k-block: two halves of 4), `WARPGROUP.DEPBAR.LE` (wgmma_wait<0>),
// `FFMA` (the promotion: 128 per k-block), `F2FP.BF16.F32.PACK_AB` (fp32 pairs to bf16x2), `STG.E` (the epilogue);
// and none of: `HGMMA`, `LDGSTS`, `LDL`, `STL`, `STSM`, `UTMASTG` (no 16-bit MMA, no cp.async, no spills, no staging
// of D, no TMA store).

#include "course.cuh"
#include "mbarrier.cuh"
#include "tma.cuh"
#include "cluster.cuh"
#include "warpgroup.cuh"
#include "wgmma_fp8.cuh"
#include "block_scaled.cuh"  // consumer_tile (promote, kblock_mma), store_tile, grouped_order, the ring
#include <cuda_bf16.h>

#ifndef FP8_STAGES
#define FP8_STAGES 4        // the ring's depth (the byte budget above: 4 fits, 5 does not)
#endif
#ifndef FP8_GROUP_M
#define FP8_GROUP_M 16      // tile rows per group of the persistent walk (8 tile pairs; unit_coords)
#endif

constexpr int BM = 128, BN = 256, BK = 128, STAGES = FP8_STAGES;  // (BM, BN, BK, STAGES)
constexpr int CLUSTER = 2;                                        // CTAs per cluster, along M
constexpr int HALF = 128;                                         // one m64n128 half; sb's block along N
constexpr int TILE_A = BM * BK, TILE_B_HALF = HALF * BK;          // 16 KiB each: one byte per e4m3
constexpr int STAGE_TILES = TILE_A + 2 * TILE_B_HALF;             // 48 KiB (1024-aligned stages)
constexpr int SA_BYTES = BM * 4;                                  // 128 row scales, fp32: 512 B
constexpr int STAGE_TX = TILE_A + 2 * TILE_B_HALF + SA_BYTES;     // 49664 B counted on full[s] (a wide tile)
constexpr int SA_BASE = STAGES * STAGE_TILES;                     // the scale area follows the tiles
constexpr int SMEM_DYNAMIC = 1024 + SA_BASE + (STAGES * SA_BYTES + 1023) / 1024 * 1024;  // align + ring + scales
constexpr int CONSUMER_WARPS = 8;                                 // per CTA
constexpr int EMPTY_ARRIVALS = CLUSTER * CONSUMER_WARPS;          // 16: empty[s] hears from both CTAs' consumers
constexpr int GROUP_M = FP8_GROUP_M, GROUP_PAIRS = GROUP_M / CLUSTER;
constexpr unsigned short CTA_MASK = 0b11;                         // multicast into ranks 0 and 1

static_assert(STAGES >= 2 && STAGES <= 4, "FP8_STAGES: 2..4 (5 x 48 KiB + the scales exceed 227 KiB)");
static_assert(SMEM_DYNAMIC + 1024 <= 227 * 1024, "the ring and the scales exceed 227 KiB");
static_assert(GROUP_M >= CLUSTER && GROUP_M % CLUSTER == 0, "FP8_GROUP_M: a positive multiple of the cluster (2)");
static_assert(STAGE_TX == 49664, "A + both B halves + sa");

// Unit u of the persistent walk (a tile pair: pair row p, tile column q) -> rank's tile (m0, n0). Rung 2's grouped
// order counted in pairs: groups of GROUP_PAIRS pair rows (GROUP_M tile rows), column by column inside a group.
__device__ __forceinline__ void unit_coords(int u, int pairs_m, int tiles_n, unsigned rank, int& m0, int& n0) {
    int p, q;
    grouped_order(u, pairs_m, tiles_n, GROUP_PAIRS, p, q);
    m0 = (CLUSTER * p + static_cast<int>(rank)) * BM;
    n0 = q * BN;
}

// The producer (one elected thread): per unit, per k-block, wait until the stage is free in BOTH CTAs (empty[s]
// counts both CTAs' consumers), arm full[s] with the bytes that will land HERE, issue this CTA's loads: its A and sa
// (plain TMA, skipped for a drained tile) and its half of B (multicast into both CTAs). Coordinates {inner, outer}.
__device__ __forceinline__ void producer(const CUtensorMap* a_map, const CUtensorMap* b_map, const CUtensorMap* sa_map,
                                         unsigned base, unsigned long long* full, unsigned long long* empty, int M,
                                         int N, int kblocks, unsigned rank) {
    const int pairs_m = (M / BM + CLUSTER - 1) / CLUSTER, tiles_n = (N + BN - 1) / BN, units = pairs_m * tiles_n;
    unsigned it = 0;  // this CTA's k-block count over all its units: the ring's position (the peer's is the same)
    for (int u = blockIdx.x / CLUSTER; u < units; u += gridDim.x / CLUSTER) {  // 1-D cluster: id = blockIdx.x / 2
        int m0, n0;
        unit_coords(u, pairs_m, tiles_n, rank, m0, n0);
        const bool wide = n0 + BN <= N, live = m0 < M;
        // bytes landing in THIS CTA's stage: own A + sa (if live) + every B box of the tile (own half + peer's half)
        const unsigned tx = (live ? TILE_A + SA_BYTES : 0) + (wide ? 2 : 1) * TILE_B_HALF;  // 49664 for a wide tile
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
            // B rows n0 + 128 rank ..: one L2 read, written at sB + 16 KiB x rank of both CTAs and counted on both
            // CTAs' full[s] (same offsets); a half tile has one box, rank 0's
            if (wide || rank == 0)
                tma_load_2d_multicast(sB + rank * TILE_B_HALF, b_map, kb * BK, n0 + HALF * static_cast<int>(rank), fb,
                                      CTA_MASK);
        }
    }
}

// A consumer warp is done with stage s (the tensor core has read it, every lane has read sa: after a __syncwarp):
// lane 0 arrives on this CTA's empty[s] and on the peer's (the peer's producer refills its B half of OUR stage too).
__device__ __forceinline__ void release_stage(unsigned long long* empty, unsigned s, unsigned peer) {
    if (lane_index() == 0) {
        const unsigned bar = smem_addr(&empty[s]);
        mbar_arrive(bar);                            // own CTA: SYNCS.ARRIVE.TRANS64.A1T0
        mbar_arrive_remote(mapa_shared(bar, peer));  // the peer's empty[s]: SYNCS.ARRIVE.TRANS64.RED.A1T0
    }
}

// A drained tile (rank 1's tile below M when M / 128 is odd): no A, no math, no store, but the ring still turns —
// wait for the B bytes the producers put here (keeps full[s]'s phases in step) and release the stage in both CTAs.
__device__ __forceinline__ void drain_tile(unsigned long long* full, unsigned long long* empty, int kblocks,
                                           unsigned peer, unsigned& it) {
    for (int kb = 0; kb < kblocks; ++kb, ++it) {
        const unsigned s = it % STAGES, n = it / STAGES;
        mbar_wait(smem_addr(&full[s]), n & 1);
        __syncwarp();
        release_stage(empty, s, peer);
    }
}

extern "C" __global__ void __launch_bounds__(384, 1)
fp8_gemm_cluster(FP8_GEMM_ARGS) {
    FP8_RING_SMEM(STAGES);
    const int kblocks = K / BK;
    const unsigned rank = cluster_ctarank(), peer = rank ^ 1u;  // cluster of 2 along M: rank = blockIdx.x % 2

    init_ring<STAGES>(full, empty, EMPTY_ARRIVALS);  // empty[s]: lane 0 of each consumer warp of BOTH CTAs
    cluster_sync();  // both CTAs' barriers initialised (and visible) before any multicast or remote arrive

    split_roles([&] { producer(&a_map, &b_map, &sa_map, base, full, empty, M, N, kblocks, rank); },
                [&](int c) {  // consumer c: tile rows 64 c .. 64 c + 63, all 256 columns
                    const int pairs_m = (M / BM + CLUSTER - 1) / CLUSTER, tiles_n = (N + BN - 1) / BN;
                    unsigned it = 0;  // the same count as the producer's (and the peer's)
                    float acc[128];
                    for (int u = blockIdx.x / CLUSTER; u < pairs_m * tiles_n; u += gridDim.x / CLUSTER) {
                        int m0, n0;
                        unit_coords(u, pairs_m, tiles_n, rank, m0, n0);
                        const bool wide = n0 + BN <= N;
                        if (m0 >= M) {  // rank 1's tile below M (M / 128 odd): keep the ring in step with the peer
                            drain_tile(full, empty, kblocks, peer, it);
                            continue;
                        }
                        // rung 2's, the release now cluster-wide (release_stage)
                        consumer_tile<STAGES, STAGE_TILES, SA_BASE>(
                            acc, smem, base, full, sb + static_cast<long long>(n0 / HALF) * kblocks, c, kblocks,
                            wide, it,
                            [&](unsigned s) { release_stage(empty, s, peer); });
                        store_tile(acc, D, N, m0 + 64 * c, n0, wide);  // (64, 256) fp32 -> bf16 (64, 128: a half)
                    }
                });
    __syncwarp();    // warp 0 of the producer reconverges (barrier.cluster is .aligned)
    cluster_sync();  // nobody exits while the peer may still multicast into it or arrive on its empty[s]
}
