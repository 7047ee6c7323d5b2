// r2_wgmma.cu — week 2 day 4, rung 2: the tensor cores through TMA + WGMMA, one warpgroup, one stage.
//
// Same GEMM as every rung (r1_tiled.cu): C (M, N) = A (M, K) . B (N, K)^T, bf16 in, fp32 accumulate, bf16 out,
// A and B both K-major; K % 8 == 0, N % 8 == 0.
//
// New: no thread loads A or B. One thread asks the TMA for A's (128, 64) and B's (128, 64) tiles — both tensor maps
// were built with CU_TENSOR_MAP_SWIZZLE_128B, so each 128-byte row of a tile lands with its 16-byte chunks XORed by
// (row % 8) — and the whole warpgroup (128 threads) hands the tiles to the tensor core by *descriptor*
// (wgmma.cuh: start address, 1024-byte stride between 8-row groups, 128B-swizzle mode). Per 64-wide k-tile:
//   4 k16 steps x 2 (rows 0..63 and 64..127 of A) wgmma.mma_async m64n128k16, committed as one group, then waited.
// Out-of-bounds rows / columns of a tile (M, N, K not multiples of 128 / 128 / 64) arrive as zeros from the TMA:
// zeros add nothing to the dot products, so the K tail needs no special code.
//
// What it does not do yet: overlap. Load -> wait -> multiply -> wait -> load: the tensor core idles during every
// TMA round trip and the TMA idles during every multiply (rung 3 fixes it with a ring of stages).
//
// SASS you should see: UTMALDG.2D, SYNCS.ARRIVE.TRANS64, SYNCS.PHASECHK.TRANS64.TRYWAIT, WARPGROUP.ARRIVE,
// HGMMA.64x128x16.F32.BF16, WARPGROUP.DEPBAR.LE, and no LDG of A or B.
//
// Launch contract (kernels/gemm/launch.py): block = 128 threads (one warpgroup); grid = (ceil(N / 128),
// ceil(M / 128)); dynamic shared memory = 32 KiB + 1 KiB (the kernel aligns its base to 1024 bytes: the swizzle
// pattern repeats every 1024 bytes and the descriptors assume a tile starts on one); both maps with box (128, 64).

#include "course.cuh"
#include "mbarrier.cuh"
#include "tma.cuh"
#include "wgmma.cuh"
#include "wgmma_store.cuh"  // store_acc<NN>: a warpgroup's accumulator -> C as bf16, clipped
#include <cuda_bf16.h>

constexpr int BM = 128, BN = 128, BK = 64;           // (BM, BN, BK): block tile and k-tile (64 bf16 = 128 B rows)
constexpr int TILE_A = BM * BK * 2, TILE_B = BN * BK * 2;  // 16 KiB each

extern "C" __global__ void __launch_bounds__(128)
gemm_wgmma(const __grid_constant__ CUtensorMap a_map, const __grid_constant__ CUtensorMap b_map,
           __nv_bfloat16* __restrict__ C, int M, int N, int K) {
    extern __shared__ unsigned char smem_raw[];
    const unsigned base = (smem_addr(smem_raw) + 1023u) & ~1023u;  // 1024-aligned: the swizzle atom
    const unsigned sA = base, sB = base + TILE_A;
    __shared__ __align__(8) unsigned long long full;               // "this k-tile's A and B have landed"
    const unsigned bar = smem_addr(&full);
    const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;

    if (threadIdx.x == 0) {
        mbar_init(bar, 1);
        fence_barrier_init();
    }
    __syncthreads();

    float acc0[BN / 2], acc1[BN / 2];  // rows m0 .. m0 + 63 and m0 + 64 .. m0 + 127 (64 fp32 registers each)
#pragma unroll
    for (int i = 0; i < BN / 2; ++i) acc0[i] = acc1[i] = 0.f;

    const int ktiles = (K + BK - 1) / BK;
    for (int kt = 0; kt < ktiles; ++kt) {
        if (threadIdx.x == 0) {
            // One arrival + 32 KiB of transaction bytes: the phase completes when both boxes have landed (the TMA
            // counts the full box, zero-filled part included).
            mbar_arrive_expect_tx(bar, TILE_A + TILE_B);
            tma_load_2d(sA, &a_map, kt * BK, m0, bar);  // box (128 rows, 64 cols) at (row m0, col k)
            tma_load_2d(sB, &b_map, kt * BK, n0, bar);
        }
        mbar_wait(bar, kt & 1);  // phase kt completes with parity kt % 2

        const unsigned long long da = wgmma_desc_sw128(sA), db = wgmma_desc_sw128(sB);
        wgmma_fence();  // the accumulators were written by ordinary instructions (zeroing) or the last wait
#pragma unroll
        for (int kk = 0; kk < BK / 16; ++kk) {  // k16 step = +32 bytes inside the 128-byte swizzled row
            wgmma_m64n128k16_ss(acc0, wgmma_desc_advance(da, 32 * kk), wgmma_desc_advance(db, 32 * kk), 1);
            wgmma_m64n128k16_ss(acc1, wgmma_desc_advance(da, 32 * kk + 64 * 128), wgmma_desc_advance(db, 32 * kk), 1);
        }
        wgmma_commit();
        wgmma_wait<0>();   // accumulators final for this k-tile; the tensor core is done reading sA / sB
        __syncthreads();   // ... in every warp, before thread 0 lets the TMA overwrite them
    }
    wgmma_fence_operand(acc0);
    wgmma_fence_operand(acc1);
    store_acc<BN>(C, acc0, m0, n0, M, N);
    store_acc<BN>(C, acc1, m0 + 64, n0, M, N);
}
