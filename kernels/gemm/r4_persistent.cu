// r4_persistent.cu — week 2 day 4, rungs 4 and 5: two consumer warpgroups, a persistent tile-scheduled grid,
// and (rung 5) a cluster of 2 CTAs that share B through TMA multicast.
//
// Same GEMM as every rung (r1_tiled.cu): C (M, N) = A (M, K) . B (N, K)^T, bf16 in, fp32 accumulate, bf16 out,
// A and B both K-major; K % 8 == 0, N % 8 == 0.
//
// New in rung 4 (gemm_persistent), against rung 3:
// - a (128, 256) tile of C per CTA, three warpgroups: the producer (warpgroup 0; one elected thread issues the TMA)
//   and two consumers (warpgroups 1 and 2; consumer c owns rows 64 c .. 64 c + 63 of the tile and issues
//   wgmma m64n256k16: 128 fp32 accumulators per thread). Per k-tile the tensor core gets 2 x 4 wgmma of
//   64 x 256 x 16 from two independent warpgroups: while one waits for its group, the other's keeps it busy.
// - setmaxnreg: the producer gives registers back (40 per thread), the consumers take them (232):
//   128 x 40 + 2 x 128 x 232 = 64512 <= 65536 registers of the SM.
// - the consumers keep one wgmma group in flight (wgmma_wait<1>) and release the *previous* k-tile's stage.
// - a persistent grid: one CTA per SM walks tiles t = blockIdx.x, + gridDim.x, ... in a grouped order (GROUP_M
//   tile rows sweep one tile column before moving on: the A rows and B columns that CTAs running at the same time
//   need overlap, so L2 serves most of them). The producer runs ahead into the next tile while the consumers
//   store this one: the ring's phases continue across tiles (a running k-tile counter `it`).
//
//   stage layout (48 KiB):  | A (128 rows x 128 B) | B rows 0..127 | B rows 128..255 |   each box (128, 64), 16 KiB
//                           the two B boxes back to back are one 256-row tile for the descriptor (1024 B per 8 rows)
//
// New in rung 5 (gemm_cluster): cluster = 2 CTAs on vertically adjacent tiles (2 p, n) and (2 p + 1, n): they need
// the same B tile. Rank r loads B rows 128 r .. 128 r + 127 ONCE and multicasts it into both CTAs (ctaMask 0b11):
//     rank:          0   1
//     B half 0:      X   X     issued by rank 0
//     B half 1:      X   X     issued by rank 1
// so L2 serves B half as often. Every CTA still loads its own A. The contract that adds:
// - full[s] of each CTA counts 48 KiB: its A (16 KiB, own TMA) + both B halves (its own and the peer's multicast);
//   a peer's bytes may land before the local expect_tx: the phase cannot complete before the local arrival.
// - empty[s] must hear from the consumers of BOTH CTAs (a refill by rank r writes into both): 2 CTAs x 2 consumer
//   warpgroups x 4 warps = 16 arrivals; each consumer warp arrives on its own CTA's and the peer's barrier (mapa).
// - barriers initialised and made visible cluster-wide (fence_barrier_init + cluster_sync) before any multicast;
//   nobody exits before the peer is done with it (a final cluster_sync). Both CTAs walk the same number of tiles
//   (pairs of tile rows); a CTA whose tile lies wholly below M still takes part (zero-filled A, no store).
//
// SASS you should see: UTMALDG.2D (A; rung 4: B too), UTMALDG.2D.MULTICAST (rung 5: B), HGMMA.64x256x16.F32.BF16,
// USETMAXREG, SYNCS.ARRIVE.TRANS64.RED.A1T0 (rung 5: the remote release), UCGABAR_ARV / UCGABAR_WAIT (rung 5).
//
// Launch contract (kernels/gemm/launch.py): block = 384 threads; grid = min(tiles, SMs) (rung 4) or
// 2 x min(tile pairs, SMs / 2) with cluster 2 (rung 5); dynamic shared memory = STAGES x 48 KiB + 1 KiB;
// tensor maps with box (128, 64), 128B swizzle, out-of-bounds elements read as zero.

#include "course.cuh"
#include "mbarrier.cuh"
#include "tma.cuh"
#include "cluster.cuh"
#include "warpgroup.cuh"
#include "wgmma.cuh"
#include "wgmma_store.cuh"  // store_acc<NN>: a warpgroup's accumulator -> C as bf16, clipped
#include <cuda_bf16.h>

constexpr int BM = 128, BN = 256, BK = 64, STAGES = 4;  // (BM, BN, BK, STAGES)
constexpr int BOX_BYTES = 128 * BK * 2;                  // one (128, 64) box: 16 KiB
constexpr int TILE_A = BM * BK * 2, TILE_B = BN * BK * 2;  // 16 KiB + 32 KiB
constexpr int STAGE_BYTES = TILE_A + TILE_B;             // 48 KiB per k-tile
constexpr int GROUP_M = 8;                               // tile rows (cluster rows in rung 5) per scheduling group

// Tile t of the grouped order -> (tile row group p, tile column q). Rows are counted in units of CLUSTER tiles.
__device__ __forceinline__ void tile_coords(int t, int rows, int cols, int& p, int& q) {
    const int per_group = GROUP_M * cols;
    const int first = (t / per_group) * GROUP_M;
    const int height = min(rows - first, GROUP_M);
    p = first + (t % per_group) % height;
    q = (t % per_group) / height;
}

template <int CLUSTER>
__device__ __forceinline__ void gemm_body(const CUtensorMap* a_map, const CUtensorMap* b_map, __nv_bfloat16* C,
                                          int M, int N, int K) {
    extern __shared__ unsigned char smem_raw[];
    const unsigned base = (smem_addr(smem_raw) + 1023u) & ~1023u;
    __shared__ __align__(8) unsigned long long full[STAGES], empty[STAGES];
    const unsigned rank = CLUSTER > 1 ? cluster_ctarank() : 0;
    const int ktiles = (K + BK - 1) / BK;
    const int rows = ((M + BM - 1) / BM + CLUSTER - 1) / CLUSTER, cols = (N + BN - 1) / BN;
    const int tiles = rows * cols, first = blockIdx.x / CLUSTER, step = gridDim.x / CLUSTER;

    if (threadIdx.x == 0) {
        for (int s = 0; s < STAGES; ++s) {
            mbar_init(smem_addr(&full[s]), 1);
            mbar_init(smem_addr(&empty[s]), CLUSTER * 2 * 4);  // every consumer warp of every CTA of the cluster
        }
        fence_barrier_init();
    }
    if (CLUSTER > 1) cluster_sync(); else __syncthreads();

    const int wg = warpgroup_index();
    if (wg == 0) {  // ---------------- producer ----------------
        setmaxnreg_dec<40>();
        if (threadIdx.x == 0) {
            int it = 0;
            for (int t = first; t < tiles; t += step) {
                int p, q;
                tile_coords(t, rows, cols, p, q);
                const int m0 = (p * CLUSTER + rank) * BM, n0 = q * BN;
                for (int kt = 0; kt < ktiles; ++kt, ++it) {
                    const int s = it % STAGES, n = it / STAGES;
                    const unsigned sA = base + s * STAGE_BYTES, sB = sA + TILE_A, fb = smem_addr(&full[s]);
                    mbar_wait(smem_addr(&empty[s]), (n & 1) ^ 1);  // free in this CTA and (rung 5) in the peer
                    mbar_arrive_expect_tx(fb, STAGE_BYTES);          // A + both B halves land here
                    tma_load_2d(sA, a_map, kt * BK, m0, fb);
                    if (CLUSTER == 1) {
                        tma_load_2d(sB, b_map, kt * BK, n0, fb);
                        tma_load_2d(sB + BOX_BYTES, b_map, kt * BK, n0 + 128, fb);
                    } else {  // New (rung 5): my half of B, into both CTAs (same offsets, same barrier offset)
                        tma_load_2d_multicast(sB + rank * BOX_BYTES, b_map, kt * BK, n0 + 128 * rank, fb,
                                              cluster_mask_all(CLUSTER));
                    }
                }
            }
        }
    } else {  // ---------------- consumers: warpgroup 1 -> rows 0..63 of the tile, 2 -> rows 64..127 ----------
        setmaxnreg_inc<232>();
        const int c = wg - 1;
        float accum[BN / 2];
        int it = 0;
        for (int t = first; t < tiles; t += step) {
            int p, q;
            tile_coords(t, rows, cols, p, q);
            const int m0 = (p * CLUSTER + rank) * BM, n0 = q * BN;
#pragma unroll
            for (int i = 0; i < BN / 2; ++i) accum[i] = 0.f;
            int prev = -1;
            for (int kt = 0; kt < ktiles; ++kt, ++it) {
                const int s = it % STAGES, n = it / STAGES;
                const unsigned sA = base + s * STAGE_BYTES, sB = sA + TILE_A;
                mbar_wait(smem_addr(&full[s]), n & 1);
                const unsigned long long da = wgmma_desc_sw128(sA + c * 64 * 128), db = wgmma_desc_sw128(sB);
                wgmma_fence();
#pragma unroll
                for (int kk = 0; kk < BK / 16; ++kk)
                    wgmma_m64n256k16_ss(accum, wgmma_desc_advance(da, 32 * kk), wgmma_desc_advance(db, 32 * kk), 1);
                wgmma_commit();
                wgmma_wait<1>();  // New: the previous k-tile's group has retired; this one may still run
                if (prev >= 0 && threadIdx.x % 32 == 0) {
                    for (int r = 0; r < CLUSTER; ++r) {  // release the previous stage in every CTA of the cluster
                        if (CLUSTER == 1) mbar_arrive(smem_addr(&empty[prev]));
                        else mbar_arrive_remote(mapa_shared(smem_addr(&empty[prev]), r));
                    }
                }
                prev = s;
            }
            wgmma_wait<0>();
            if (prev >= 0 && threadIdx.x % 32 == 0) {
                for (int r = 0; r < CLUSTER; ++r) {
                    if (CLUSTER == 1) mbar_arrive(smem_addr(&empty[prev]));
                    else mbar_arrive_remote(mapa_shared(smem_addr(&empty[prev]), r));
                }
            }
            wgmma_fence_operand(accum);
            store_acc<BN>(C, accum, m0 + 64 * c, n0, M, N);  // the producer is already loading the next tile
        }
    }
    if (CLUSTER > 1) cluster_sync();  // nobody leaves while the peer may still multicast into it or arrive on it
}

extern "C" __global__ void __launch_bounds__(384, 1)
gemm_persistent(const __grid_constant__ CUtensorMap a_map, const __grid_constant__ CUtensorMap b_map,
                __nv_bfloat16* __restrict__ C, int M, int N, int K) {
    gemm_body<1>(&a_map, &b_map, C, M, N, K);
}

extern "C" __global__ void __launch_bounds__(384, 1)
gemm_cluster(const __grid_constant__ CUtensorMap a_map, const __grid_constant__ CUtensorMap b_map,
             __nv_bfloat16* __restrict__ C, int M, int N, int K) {
    gemm_body<2>(&a_map, &b_map, C, M, N, K);
}
