# Known answer "stub": the release's answer cell, untouched. Expected: 0 everywhere, "exercise not attempted".
GEMM_MAINLOOP_CU = r"""
#include <cuda_bf16.h>
#include "course.cuh"  // CUtensorMap (128 opaque bytes) and smem_addr(p): the 32-bit shared-memory address of p

// ---- Given: the course's wrappers (printed in section 4), one per PTX instruction. --------------------------------
#include "mbarrier.cuh"   // mbar_init, fence_barrier_init, mbar_arrive_expect_tx, mbar_arrive, mbar_wait(bar, parity)
#include "tma.cuh"        // tma_load_2d(smem dst, &map, col, row, bar)
#include "warpgroup.cuh"  // warpgroup_index, setmaxnreg_dec<N>, setmaxnreg_inc<N>
#include "wgmma.cuh"      // wgmma_desc_sw128, wgmma_desc_advance, wgmma_fence, wgmma_commit, wgmma_wait<N>,
                          // wgmma_m64n256k16_ss(acc, desc_a, desc_b, scale_d), wgmma_fence_operand

constexpr int BM = 128, BN = 256, BK = 64;          // (BM, BN, BK): a CTA's tile of C, one k-tile of A and B
constexpr int STAGES = 4;                           // ring depth: 4 x 48 KiB of the contract's 193 KiB
constexpr unsigned BOX_BYTES = 128 * BK * 2;        // one (128, 64) bf16 box of a map: 16 KiB
constexpr unsigned STAGE_BYTES = 3 * BOX_BYTES;     // stage s = [A rows m0.. | B rows n0.. | B rows n0 + 128..]
constexpr int CONSUMER_WARPS = 8;                   // warpgroups 1 and 2

// Given: tile t of the grid (tiles_m x tiles_n of (128, 256)) in a grouped order — 8 tile rows sweep the tile
// columns together, so CTAs that run at the same time share A rows and B columns in L2.
__device__ __forceinline__ void tile_origin(int t, int tiles_m, int tiles_n, int& m0, int& n0) {
    const int per_group = 8 * tiles_n, first = (t / per_group) * 8, height = min(tiles_m - first, 8);
    m0 = (first + (t % per_group) % height) * BM;
    n0 = ((t % per_group) / height) * BN;
}

// Given: a consumer warpgroup's m64n256 accumulator (rows r0 .. r0 + 63, cols c0 .. c0 + 255 of C) stored as bf16,
// clipped at (M, N). Layout (wgmma.cuh): acc[4j + {0,1}] -> row 16 w + l / 4, cols 8 j + 2 (l % 4) + {0, 1};
// acc[4j + {2,3}] -> the same columns, 8 rows lower (w = warp in the warpgroup, l = lane).
__device__ __forceinline__ void store_acc(__nv_bfloat16* C, const float (&acc)[BN / 2], int r0, int c0, int M, int N) {
    const int t = threadIdx.x % 128, w = t / 32, l = t % 32, row = r0 + 16 * w + l / 4;
#pragma unroll
    for (int j = 0; j < BN / 8; ++j) {
        const int col = c0 + 8 * j + 2 * (l % 4);  // even, and N % 8 == 0: col < N implies col + 1 < N
        if (col >= N) continue;
        if (row < M)
            *reinterpret_cast<__nv_bfloat162*>(C + (size_t)row * N + col) = __floats2bfloat162_rn(acc[4 * j], acc[4 * j + 1]);
        if (row + 8 < M)
            *reinterpret_cast<__nv_bfloat162*>(C + (size_t)(row + 8) * N + col) =
                __floats2bfloat162_rn(acc[4 * j + 2], acc[4 * j + 3]);
    }
}

// ---- The kernel. Launch contract: block 384 (warpgroup 0 produces, 1 and 2 consume), grid min(tiles, SMs) —
// persistent, block b takes tiles b, b + gridDim.x, ... — 193 KiB of dynamic shared memory, both maps with box
// (128, 64) and 128B swizzle. C = A B^T: A (M, K), B (N, K), C (M, N), all row-major bf16; K % 8 == N % 8 == 0.
extern "C" __global__ void __launch_bounds__(384, 1)
gemm_mainloop(const __grid_constant__ CUtensorMap a_map, const __grid_constant__ CUtensorMap b_map,
              __nv_bfloat16* C, int M, int N, int K)
{
    __shared__ __align__(8) unsigned long long full[STAGES];   // full[s]:  1 arrival (expect_tx) + 48 KiB of tx bytes
    __shared__ __align__(8) unsigned long long empty[STAGES];  // empty[s]: 8 arrivals, one per consumer warp
    extern __shared__ unsigned char smem_raw[];
    const unsigned base = (smem_addr(smem_raw) + 1023u) & ~1023u;  // stage s at base + s * STAGE_BYTES (1024-aligned:
                                                                   // the 128B swizzle repeats every 1024 bytes)
    const int tiles_m = (M + BM - 1) / BM, tiles_n = (N + BN - 1) / BN, tiles = tiles_m * tiles_n;
    const int ktiles = (K + BK - 1) / BK;  // the last k-tile runs past K: the TMA fills it with zeros
    // The block's k-tiles are numbered it = 0, 1, 2, ... across all of its tiles: k-tile `it` lives in stage
    // s = it % STAGES and is that stage's n-th use, n = it / STAGES (the same count on both sides).

    if (threadIdx.x == 0) {
        for (int s = 0; s < STAGES; ++s) {
            mbar_init(smem_addr(&full[s]), 1);
            mbar_init(smem_addr(&empty[s]), CONSUMER_WARPS);
        }
        fence_barrier_init();
    }
    __syncthreads();

    if (warpgroup_index() == 0) {
        setmaxnreg_dec<40>();           // the whole producer warpgroup gives its registers back
        if (threadIdx.x != 0) return;   // one thread issues every load
        int it = 0;
        for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
            int m0, n0;
            tile_origin(t, tiles_m, tiles_n, m0, n0);
            // ---- Yours (1): the producer's k-loop. For each k-tile kt of this tile (and it = the block's running
            // count): wait until stage s is free, arm full[s] with the bytes that will land, and issue the three
            // TMA loads into the stage's layout: A rows m0.., B rows n0.., B rows n0 + 128.. (columns kt * BK).
# YOUR CODE HERE
raise NotImplementedError()
        }
        return;
    }

    setmaxnreg_inc<232>();                   // consumers take them: 128 x 40 + 256 x 232 = 64512 <= 65536
    const int c = warpgroup_index() - 1;     // consumer c owns rows 64 c .. 64 c + 63 of the tile
    float acc[BN / 2];                       // m64n256 fp32 accumulator: 128 registers per thread
    int it = 0;
    for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
        int m0, n0;
        tile_origin(t, tiles_m, tiles_n, m0, n0);
#pragma unroll
        for (int i = 0; i < BN / 2; ++i) acc[i] = 0.f;
        // ---- Yours (2): the consumer's k-loop. For each k-tile: wait until stage s has landed; describe your 64
        // rows of A and the 256 rows of B to the tensor core; issue the 4 k16 steps of wgmma m64n256k16 (a k16
        // step is +32 bytes along the 128-byte swizzled row) in the wgmma discipline (fence, commit, wait); then
        // release the stage (one arrival per warp) — only once the tensor core is done reading it.
# YOUR CODE HERE
raise NotImplementedError()
        wgmma_fence_operand(acc);
        store_acc(C, acc, m0 + 64 * c, n0, M, N);
    }
}
"""
