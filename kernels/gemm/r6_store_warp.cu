// r6_store_warp.cu — week 2 day 4, rung 6: the epilogue leaves the consumers. They hand bf16 pieces of C to
// store threads through shared-memory slots and mbarriers, and go back to the tensor core while the TMA writes C.
// (Instructor-only: this file answers the day's exercise in spirit — autograder/release.py INSTRUCTOR_ONLY.)
//
// Same GEMM as every rung (r1_tiled.cu): C (M, N) = A (M, K) . B (N, K)^T, bf16 in, fp32 accumulate, bf16 out,
// A and B both K-major; K % 8 == 0, N % 8 == 0.
//
// The mainloop is rung 5's (r4_persistent.cu: (128, 256) tiles, producer warpgroup + 2 consumer warpgroups,
// setmaxnreg 40 / 232, a persistent grid, wait_group 1, cluster-2 multicast of B when GEMM_CLUSTER = 2). New:
// - New: the epilogue by TMA store through a store stage. Rung 5's consumers store C with 64 plain STG.E per thread
//   and tile (the SASS of gemm_cluster: one bf16x2 per 4-byte store) while the tensor core idles (the model's fitted
//   EPILOGUE_NS, 5.73 us a tile: kernels/gemm/model.py rung6_gain, "cluster"). Here each consumer converts
//   its m64n256 accumulator to bf16 and writes it, one (64, 64) piece at a time, with stmatrix into a 128B-swizzled
//   slot of shared memory, then arrives on the slot's c_full barrier and moves on. A store thread of the producer
//   warpgroup (not the TMA-load thread) waits on c_full, issues the TMA store, waits for the store's shared-memory
//   READS only (cp.async.bulk.wait_group.read 0) and arrives on c_empty: the global writes drain under the next
//   tile's mainloop, and the consumers wait for nothing unless both of their slots are still being read.
//
//     warpgroup 0 (producer):  warp 0 lane 0: TMA loads (the ring)     warp 1 lane 0: stores of consumer 0
//                              warp 3: idle                            warp 2 lane 0: stores of consumer 1
//     warpgroups 1, 2:         consumer c: rows 64 c .. 64 c + 63 of the tile (wgmma m64n256k16)
//
//   store slots of consumer c (SLOTS of them, 8 KiB each = one (64, 64) bf16 box of the C map, 1024-aligned):
//     piece q of consumer c (q counts 0, 1, 2, ... over all its tiles; 4 pieces a tile: cols 64 p .. 64 p + 63)
//     uses slot q % SLOTS in round n = q / SLOTS.
//     consumer (128 threads):  wait c_empty[slot] parity (n & 1) ^ 1  (round 0 passes at once: fresh barrier)
//                              stmatrix its 16 rows x 64 cols; fence.proxy.async; arrive on c_full[slot]
//     store thread:            wait c_full[slot] parity n & 1          (phase completes at 128 arrivals)
//                              TMA store the box; commit; wait_group.read 0; arrive on c_empty[slot] (1 arrival)
//   c_full: init count 128 — every writing thread arrives after its own fence.proxy.async, so each thread's
//   generic-proxy writes are ordered before the TMA (async proxy) reads them; the mbarrier's release / acquire
//   carries them to the store thread. c_empty: init count 1 — the store thread, after wait_group.read says the
//   TMA has finished reading the slot (the global writes may still be in flight: they no longer need the slot).
// - New: no zeroing loop. The first wgmma of a tile runs with scale_d = 0 (d = A B^T, the old accumulator is not
//   read); every later one with scale_d = 1 (d += A B^T). wgmma_fence orders the epilogue's reads of the old
//   accumulator before it.
// - New: a grouped tile order sized to the machine. A wave of ~ 132 CTAs walks GROUP_M tile rows down one tile
//   column before the next column: per k-tile the wave pulls GROUP_M x 128 rows of A and (132 / GROUP_M) x 256
//   rows of B through L2; the sum is smallest when the two are equal, GROUP_M ~ sqrt(132 x 2) ~ 16 (16 x 128 =
//   2048 rows of A, 8 x 256 = 2048 rows of B). Rung 5 counts GROUP_M = 8 in cluster rows: the same 16 tile rows;
//   here GROUP_M counts tile rows for both cluster sizes (GEMM_GROUP_M). All CTAs of a wave then share 16 A panels
//   and ~ 8 B panels: at 8192^3 a k-tile's working set is 2 x 2048 x 128 B = 512 KiB, far inside the 50 MB L2, so
//   a panel is read from DRAM once per wave (model.wave_traffic).
// - New: a balanced persistent grid (kernels/gemm/launch.py grid): CTAs = ceil(tiles / rounds), rounds =
//   ceil(tiles / SMs). At 8192^3, 2048 tiles: 132 CTAs run 15 full rounds and a 16th of 68 tiles; 128 CTAs run
//   16 full rounds — the same length (the busiest CTA has 16 tiles either way), with 4 SMs idle throughout instead
//   of 64 in the last round.
//
//   stage layout (48 KiB):  | A (128 rows x 128 B) | B rows 0..127 | B rows 128..255 |   each box (128, 64), 16 KiB
//   dynamic shared memory:  | 1 KiB align | STAGES x 48 KiB ring | 2 consumers x SLOTS x 8 KiB store slots |
//     STAGES 4, SLOTS 2: 1 + 192 + 32 = 225 KiB (+ the static barriers) <= 227 KiB: the default
//     STAGES 3, SLOTS 4: 1 + 144 + 64 = 209 KiB: a consumer's whole accumulator fits, it never waits on a store
//
// Cluster 2 (GEMM_CLUSTER = 2, rung 5's contract, unchanged): CTAs on tile rows (2 p, n) and (2 p + 1, n) share B;
// rank r loads B rows 128 r .. 128 r + 127 once and multicasts them into both CTAs (ctaMask 0b11):
//     rank:          0   1
//     B half 0:      X   X     issued by rank 0
//     B half 1:      X   X     issued by rank 1
// full[s] counts 48 KiB in each CTA (its A + both B halves); empty[s] 16 arrivals (2 CTAs x 8 consumer warps, each
// consumer warp arrives on its own CTA's barrier and the peer's). The store slots are each CTA's own: no cluster.
//
// SASS you should see: UTMALDG.2D (A; B too with cluster 1), UTMALDG.2D.MULTICAST (B, cluster 2),
// HGMMA.64x256x16.F32.BF16, STSM.16.M88.4 (stmatrix), FENCE.VIEW.ASYNC.S (fence.proxy.async), UTMASTG.2D (the TMA
// store), UTMACMDFLUSH (commit), DEPBAR (wait_group.read), USETMAXREG; no STG, no LDL / STL (no spills).
//
// Launch contract (kernels/gemm/launch.py): block = 384 threads; grid = CLUSTER x ceil(units / rounds) with units
// = ceil(tile rows / CLUSTER) x tile columns and rounds = ceil(units / (SMs / CLUSTER)), cluster = CLUSTER;
// dynamic shared memory = 1 KiB + STAGES x 48 KiB + 2 x SLOTS x 8 KiB; A and B maps with box (128, 64), the C
// map with box (64, 64), all 128B swizzle (out-of-bounds loads read zero; a store is clipped at C's edges).

#include "course.cuh"
#include "mbarrier.cuh"
#include "tma.cuh"
#include "cluster.cuh"
#include "swizzle.cuh"      // stsm_x4: stmatrix.sync.aligned.m8n8.x4 (STSM.16.M88.4)
#include "warpgroup.cuh"
#include "wgmma.cuh"
#include <cuda_bf16.h>

#ifndef GEMM_CLUSTER
#define GEMM_CLUSTER 2      // 1: every CTA loads its own B; 2: rung 5's multicast of B
#endif
#ifndef GEMM_GROUP_M
#define GEMM_GROUP_M 16     // tile rows per scheduling group (a multiple of GEMM_CLUSTER)
#endif
#ifndef GEMM_STAGES
#define GEMM_STAGES 4       // the ring's depth: 4 (with 2 slots) or 3 (room for 4 slots)
#endif
#ifndef GEMM_SLOTS
#define GEMM_SLOTS 2        // store slots per consumer warpgroup (8 KiB each): 2 or 4
#endif

constexpr int BM = 128, BN = 256, BK = 64, STAGES = GEMM_STAGES;  // (BM, BN, BK, STAGES)
constexpr int CLUSTER = GEMM_CLUSTER, GROUP_M = GEMM_GROUP_M, SLOTS = GEMM_SLOTS;
constexpr int BOX_BYTES = 128 * BK * 2;                  // one (128, 64) box of A or B: 16 KiB
constexpr int TILE_A = BM * BK * 2, TILE_B = BN * BK * 2;  // 16 KiB + 32 KiB
constexpr int STAGE_BYTES = TILE_A + TILE_B;             // 48 KiB per k-tile
constexpr int PIECE_COLS = 64;                           // a piece of C = the C map's box: (64 rows, 64 cols)
constexpr int PIECE_BYTES = 64 * PIECE_COLS * 2;         // 8 KiB: 64 rows of 128 B, 8 swizzle atoms of 1024 B
constexpr int PIECES = BN / PIECE_COLS;                  // 4 pieces per consumer per tile
constexpr int SLOT_BASE = STAGES * STAGE_BYTES;          // the slots follow the ring (1024-aligned)
constexpr int SMEM_DYNAMIC = 1024 + SLOT_BASE + 2 * SLOTS * PIECE_BYTES;

static_assert(CLUSTER == 1 || CLUSTER == 2, "GEMM_CLUSTER: 1 or 2");
static_assert(GROUP_M >= CLUSTER && GROUP_M % CLUSTER == 0, "GEMM_GROUP_M: a multiple of the cluster size");
static_assert(SLOTS >= 1 && SLOTS <= 4, "GEMM_SLOTS: 1..4 slots per consumer");
static_assert(SMEM_DYNAMIC + 2048 <= 227 * 1024,
              "the ring, the store slots, 1 KiB of alignment and ~ 2 KiB of static shared memory exceed 227 KiB");

// Tile t of the grouped order -> (row unit p, tile column q); a row unit is CLUSTER tile rows.
__device__ __forceinline__ void tile_coords(int t, int rows, int cols, int& p, int& q) {
    constexpr int G = GROUP_M / CLUSTER;        // row units per group
    const int per_group = G * cols;
    const int first = (t / per_group) * G;
    const int height = min(rows - first, G);
    p = first + (t % per_group) % height;
    q = (t % per_group) / height;
}

__device__ __forceinline__ unsigned bf16x2_bits(float lo, float hi) {
    __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<unsigned*>(&v);
}

// New: the store thread of consumer c (warp 1 or 2 of the producer warpgroup): each piece of each of its tiles,
// once consumer c has written it to slot s (c_full), goes to C by one TMA store; the slot is handed back (c_empty) as
// soon as the TMA has read it (bulk_wait_read), while its global writes may still be in flight.
__device__ __forceinline__ void store_thread(const CUtensorMap* c_map, unsigned long long (*c_full)[SLOTS],
                                             unsigned long long (*c_empty)[SLOTS], unsigned base, unsigned rank, int c,
                                             int first, int tiles, int step, int rows, int cols, int M) {
    int qn = 0;  // piece counter of consumer c, the same count the consumer keeps
    for (int t = first; t < tiles; t += step) {
        int p, q;
        tile_coords(t, rows, cols, p, q);
        const int m0 = (p * CLUSTER + rank) * BM + 64 * c, n0 = q * BN;
        for (int piece = 0; piece < PIECES; ++piece, ++qn) {
            const int s = qn % SLOTS, n = qn / SLOTS;
            mbar_wait(smem_addr(&c_full[c][s]), n & 1);  // all 128 writes of round n are in (and fenced)
            if (m0 < M) {  // a CTA on rows wholly below M (cluster 2's last pair) stores nothing
                // {col, row}: the box (64, 64) at C[m0.., n0 + 64 piece ..], clipped at (M, N) by the TMA
                tma_store_2d(c_map, n0 + piece * PIECE_COLS, m0, base + SLOT_BASE + (c * SLOTS + s) * PIECE_BYTES);
                bulk_commit();
                bulk_wait_read<0>();  // the TMA has read the slot; its global writes may still be in flight
            }
            mbar_arrive(smem_addr(&c_empty[c][s]));  // slot s free for round n + 1
        }
    }
    bulk_wait<0>();  // every store complete before the CTA (and its shared memory) may go
}

extern "C" __global__ void __launch_bounds__(384, 1)
gemm_store_warp(const __grid_constant__ CUtensorMap a_map, const __grid_constant__ CUtensorMap b_map,
                const __grid_constant__ CUtensorMap c_map, int M, int N, int K) {
    extern __shared__ unsigned char smem_raw[];
    const unsigned base = (smem_addr(smem_raw) + 1023u) & ~1023u;  // the 128B swizzle's 1024-byte period
    __shared__ __align__(8) unsigned long long full[STAGES], empty[STAGES];
    __shared__ __align__(8) unsigned long long c_full[2][SLOTS], c_empty[2][SLOTS];  // New: the store slots
    const unsigned rank = CLUSTER > 1 ? cluster_ctarank() : 0;
    const int ktiles = (K + BK - 1) / BK;
    const int rows = ((M + BM - 1) / BM + CLUSTER - 1) / CLUSTER, cols = (N + BN - 1) / BN;
    const int tiles = rows * cols, first = blockIdx.x / CLUSTER, step = gridDim.x / CLUSTER;

    if (threadIdx.x == 0) {
        for (int s = 0; s < STAGES; ++s) {
            mbar_init(smem_addr(&full[s]), 1);                 // 1 arrival (expect_tx) + 48 KiB of tx bytes
            mbar_init(smem_addr(&empty[s]), CLUSTER * 2 * 4);  // every consumer warp of every CTA of the cluster
        }
        for (int c = 0; c < 2; ++c)
            for (int s = 0; s < SLOTS; ++s) {
                mbar_init(smem_addr(&c_full[c][s]), 128);      // New: consumer c's 128 threads wrote the piece
                mbar_init(smem_addr(&c_empty[c][s]), 1);       // New: the store thread: the TMA has read it
            }
        fence_barrier_init();
    }
    if (CLUSTER > 1) cluster_sync(); else __syncthreads();

    const int wg = warpgroup_index();
    if (wg == 0) {  // ---------------- producer warpgroup: loads (warp 0), stores (warps 1, 2) ----------------
        setmaxnreg_dec<40>();
        if (threadIdx.x == 0) {  // the TMA-load thread: rung 5's producer
            int it = 0;
            for (int t = first; t < tiles; t += step) {
                int p, q;
                tile_coords(t, rows, cols, p, q);
                const int m0 = (p * CLUSTER + rank) * BM, n0 = q * BN;
                for (int kt = 0; kt < ktiles; ++kt, ++it) {
                    const int s = it % STAGES, n = it / STAGES;
                    const unsigned sA = base + s * STAGE_BYTES, sB = sA + TILE_A, fb = smem_addr(&full[s]);
                    mbar_wait(smem_addr(&empty[s]), (n & 1) ^ 1);  // free in this CTA and (cluster 2) in the peer
                    mbar_arrive_expect_tx(fb, STAGE_BYTES);          // A + both B halves land here (zero fill counts)
                    tma_load_2d(sA, &a_map, kt * BK, m0, fb);
                    if (CLUSTER == 1) {
                        tma_load_2d(sB, &b_map, kt * BK, n0, fb);
                        tma_load_2d(sB + BOX_BYTES, &b_map, kt * BK, n0 + 128, fb);
                    } else {  // my half of B, into both CTAs (same offsets, same barrier offset): mask 0b11
                        tma_load_2d_multicast(sB + rank * BOX_BYTES, &b_map, kt * BK, n0 + 128 * rank, fb,
                                              cluster_mask_all(CLUSTER));
                    }
                }
            }
        } else if (threadIdx.x == 32 || threadIdx.x == 64) {  // New: the store thread of consumer c
            store_thread(&c_map, c_full, c_empty, base, rank, threadIdx.x / 32 - 1, first, tiles, step, rows, cols, M);
        }
    } else {  // ---------------- consumers: warpgroup 1 -> rows 0..63 of the tile, 2 -> rows 64..127 ----------
        setmaxnreg_inc<232>();
        const int c = wg - 1;
        // stmatrix addressing, fixed per lane: lanes 8 m .. 8 m + 7 name rows 0..7 of matrix m of an x4; matrix m
        // is rows (m & 1) x 8 .. + 7 of this warp's 16 and 16-byte chunk (m >> 1) of a chunk pair. Row r of the
        // piece has r % 8 = lane % 8, so its chunk j sits at chunk j ^ (lane % 8) (128B swizzle: one 16-byte bank
        // group per row of a matrix -> conflict-free).
        const int lane = threadIdx.x % 32, w = (threadIdx.x % 128) / 32;
        const int srow = 16 * w + 8 * ((lane / 8) & 1) + lane % 8, shalf = lane / 16;
        const unsigned slots = base + SLOT_BASE + c * SLOTS * PIECE_BYTES + srow * 128;
        float accum[BN / 2];
        int it = 0, qn = 0;
        for (int t = first; t < tiles; t += step) {
            int prev = -1;
            for (int kt = 0; kt < ktiles; ++kt, ++it) {
                const int s = it % STAGES, n = it / STAGES;
                const unsigned sA = base + s * STAGE_BYTES, sB = sA + TILE_A;
                mbar_wait(smem_addr(&full[s]), n & 1);
                const unsigned long long da = wgmma_desc_sw128(sA + c * 64 * 128), db = wgmma_desc_sw128(sB);
                wgmma_fence();  // the accumulator was last touched by the epilogue's reads or by the last group
#pragma unroll
                for (int kk = 0; kk < BK / 16; ++kk)  // New: scale_d = 0 on the tile's first k16 step: d = A B^T
                    wgmma_m64n256k16_ss(accum, wgmma_desc_advance(da, 32 * kk), wgmma_desc_advance(db, 32 * kk),
                                        (kt > 0 || kk > 0) ? 1 : 0);
                wgmma_commit();
                wgmma_wait<1>();  // the previous k-tile's group has retired; this one may still run
                if (prev >= 0 && lane == 0) {
                    for (int r = 0; r < CLUSTER; ++r) {  // release the previous stage in every CTA of the cluster
                        if (CLUSTER == 1) mbar_arrive(smem_addr(&empty[prev]));
                        else mbar_arrive_remote(mapa_shared(smem_addr(&empty[prev]), r));
                    }
                }
                prev = s;
            }
            wgmma_wait<0>();
            if (prev >= 0 && lane == 0) {
                for (int r = 0; r < CLUSTER; ++r) {
                    if (CLUSTER == 1) mbar_arrive(smem_addr(&empty[prev]));
                    else mbar_arrive_remote(mapa_shared(smem_addr(&empty[prev]), r));
                }
            }
            wgmma_fence_operand(accum);
            // New: the epilogue hands the tile to the store thread, piece by piece (the producer is already loading
            // the next tile's first STAGES k-tiles; the store thread writes this one to C behind our backs).
#pragma unroll
            for (int piece = 0; piece < PIECES; ++piece, ++qn) {
                const int s = qn % SLOTS, n = qn / SLOTS;
                mbar_wait(smem_addr(&c_empty[c][s]), (n & 1) ^ 1);  // the store of round n - 1 has read slot s
                const unsigned slot = slots + s * PIECE_BYTES;
#pragma unroll
                for (int pair = 0; pair < PIECE_COLS / 16; ++pair) {
                    // accumulator cols 8 j .. 8 j + 15, j = 8 piece + 2 pair (wgmma.cuh's layout): d[4 j + 0, 1]
                    // rows 0-7 chunk j, d[4 j + 2, 3] rows 8-15 chunk j, then the same for chunk j + 1
                    const int j = PIECE_COLS / 8 * piece + 2 * pair;
                    const unsigned v[4] = {bf16x2_bits(accum[4 * j], accum[4 * j + 1]),
                                           bf16x2_bits(accum[4 * j + 2], accum[4 * j + 3]),
                                           bf16x2_bits(accum[4 * j + 4], accum[4 * j + 5]),
                                           bf16x2_bits(accum[4 * j + 6], accum[4 * j + 7])};
                    stsm_x4(slot + (((2 * pair + shalf) ^ (lane % 8)) << 4), v);
                }
                fence_proxy_async();                       // my stmatrix writes, visible to the TMA (async proxy)
                mbar_arrive(smem_addr(&c_full[c][s]));     // ... then hand them over (128 arrivals complete it)
            }
        }
    }
    if (CLUSTER > 1) cluster_sync();  // nobody leaves while the peer may still multicast into it or arrive on it
}
