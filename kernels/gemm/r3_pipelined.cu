// r3_pipelined.cu — week 2 day 4, rung 3: a ring of STAGES shared-memory stages, a producer warp and a consumer
// warpgroup, full / empty mbarriers. (The day's exercise, gemm_epilogue, gives its mainloop — rung 4's roles with
// this rung's wait — and asks for the epilogue: a TMA store of C that no rung of the ladder has.)
//
// Same GEMM as every rung (r1_tiled.cu): C (M, N) = A (M, K) . B (N, K)^T, bf16 in, fp32 accumulate, bf16 out,
// A and B both K-major; K % 8 == 0, N % 8 == 0.
//
// New: the load of k-tile kt + 1 .. kt + STAGES - 1 overlaps the multiply of k-tile kt. Two roles:
//   producer warp (threads 128..159, one elected lane): for each k-tile, wait until its stage is free (empty[s]),
//       arm full[s] with the stage's bytes, TMA A's (128, 64) and B's (128, 64) tiles into stage s;
//   consumer warpgroup (threads 0..127): wait full[s], issue 4 k16 steps x 2 wgmma m64n128k16, commit, wait for
//       them, then tell the producer the stage is free (empty[s]: one arrival per consumer warp).
//
//   stage:   0    1    2    3    0    1   ...          k-tile kt uses stage s = kt % STAGES in round n = kt / STAGES
//   full:    TMA bytes landed  -> consumer may read     phase n completes with parity n % 2
//   empty:   4 warps done      -> producer may refill   the producer's wait for round n is on parity (n % 2) ^ 1:
//                                                       round 0 finds the barrier's "previous phase" complete and
//                                                       passes at once (the ring starts empty)
//
// SASS you should see: UTMALDG.2D, SYNCS.ARRIVE.TRANS64 (expect_tx), SYNCS.ARRIVE.TRANS64.A1T0 (the consumers'
// release), SYNCS.PHASECHK.TRANS64.TRYWAIT, WARPGROUP.ARRIVE, HGMMA.64x128x16.F32.BF16, WARPGROUP.DEPBAR.LE.
//
// Launch contract (kernels/gemm/launch.py, and the exercise: kernels/gemm/exercise.py): block = 160 threads;
// grid = (ceil(N / 128), ceil(M / 128)); dynamic shared memory = STAGES x 32 KiB + 1 KiB (the kernel aligns its
// base to 1024 bytes); both tensor maps with box (128, 64), 128B swizzle, out-of-bounds elements read as zero.

#include "course.cuh"
#include "mbarrier.cuh"
#include "tma.cuh"
#include "wgmma.cuh"
#include "wgmma_store.cuh"  // store_acc<NN>: a warpgroup's accumulator -> C as bf16, clipped
#include <cuda_bf16.h>

#ifndef GEMM_STAGES
#define GEMM_STAGES 4  // the benchmark's sweep of the pipeline model compiles 1, 2, 3, 4, 6
#endif
constexpr int BM = 128, BN = 128, BK = 64, STAGES = GEMM_STAGES;  // (BM, BN, BK, STAGES)
constexpr int TILE_A = BM * BK * 2, TILE_B = BN * BK * 2;  // 16 KiB each, 1024-aligned
constexpr int STAGE_BYTES = TILE_A + TILE_B;               // 32 KiB: what the TMA delivers per k-tile
constexpr int CONSUMER_WARPS = 4;

extern "C" __global__ void __launch_bounds__(160, 1)
gemm_pipelined(const __grid_constant__ CUtensorMap a_map, const __grid_constant__ CUtensorMap b_map,
               __nv_bfloat16* __restrict__ C, int M, int N, int K) {
    extern __shared__ unsigned char smem_raw[];
    const unsigned base = (smem_addr(smem_raw) + 1023u) & ~1023u;  // stage s: A at base + s * STAGE_BYTES, B after
    __shared__ __align__(8) unsigned long long full[STAGES], empty[STAGES];
    const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
    const int ktiles = (K + BK - 1) / BK;

    if (threadIdx.x == 0) {
        for (int s = 0; s < STAGES; ++s) {
            mbar_init(smem_addr(&full[s]), 1);                // the producer's arrive.expect_tx (+ the TMA bytes)
            mbar_init(smem_addr(&empty[s]), CONSUMER_WARPS);  // one arrival per consumer warp
        }
        fence_barrier_init();
    }
    __syncthreads();

    if (threadIdx.x >= 128) {  // ---- producer warp ----
        if (threadIdx.x == 128) {
            for (int kt = 0; kt < ktiles; ++kt) {
                const int s = kt % STAGES, n = kt / STAGES;
                const unsigned sA = base + s * STAGE_BYTES, sB = sA + TILE_A, fb = smem_addr(&full[s]);
                mbar_wait(smem_addr(&empty[s]), (n & 1) ^ 1);  // stage free (round 0: passes at once)
                mbar_arrive_expect_tx(fb, STAGE_BYTES);          // 1 arrival + 32 KiB of TMA bytes
                tma_load_2d(sA, &a_map, kt * BK, m0, fb);        // A box (128, 64) at (row m0, col kt * 64)
                tma_load_2d(sB, &b_map, kt * BK, n0, fb);        // B box (128, 64) at (row n0, col kt * 64)
            }
        }
        return;  // nothing else to do: the consumers keep the block (and its shared memory) alive
    }

    // ---- consumer warpgroup: rows m0 .. m0 + 63 in acc0, m0 + 64 .. m0 + 127 in acc1 ----
    float acc0[BN / 2], acc1[BN / 2];
#pragma unroll
    for (int i = 0; i < BN / 2; ++i) acc0[i] = acc1[i] = 0.f;

    for (int kt = 0; kt < ktiles; ++kt) {
        const int s = kt % STAGES, n = kt / STAGES;
        const unsigned sA = base + s * STAGE_BYTES, sB = sA + TILE_A;
        mbar_wait(smem_addr(&full[s]), n & 1);  // A and B of k-tile kt are in stage s
        const unsigned long long da = wgmma_desc_sw128(sA), db = wgmma_desc_sw128(sB);
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < BK / 16; ++kk) {  // k16 step: +32 bytes in the swizzled 128-byte row
            wgmma_m64n128k16_ss(acc0, wgmma_desc_advance(da, 32 * kk), wgmma_desc_advance(db, 32 * kk), 1);
            wgmma_m64n128k16_ss(acc1, wgmma_desc_advance(da, 32 * kk + 64 * 128), wgmma_desc_advance(db, 32 * kk), 1);
        }
        wgmma_commit();
        wgmma_wait<0>();  // this warp's wgmma are done with stage s ...
        if (threadIdx.x % 32 == 0) mbar_arrive(smem_addr(&empty[s]));  // ... so release it (one arrival per warp)
    }

    wgmma_fence_operand(acc0);
    wgmma_fence_operand(acc1);
    store_acc<BN>(C, acc0, m0, n0, M, N);
    store_acc<BN>(C, acc1, m0 + 64, n0, M, N);
}
