# Known answer "stub": the release's answer cell, untouched. Expected: 0 everywhere, "exercise not attempted".
GEMM_EPILOGUE_CU = r"""
#include <cuda_bf16.h>
#include "course.cuh"  // CUtensorMap (128 opaque bytes) and smem_addr(p): the 32-bit shared-memory address of p

// ---- Given: the course's wrappers (printed in sections 4 and 5), one per PTX instruction. -------------------------
#include "mbarrier.cuh"   // mbar_init, fence_barrier_init, mbar_arrive_expect_tx, mbar_arrive, mbar_wait(bar, parity)
#include "tma.cuh"        // tma_load_2d(smem dst, &map, col, row, bar); tma_store_2d(&map, col, row, smem src),
                          // bulk_commit, bulk_wait_read<N>, bulk_wait<N>, fence_proxy_async (week 1, day 5)
#include "warpgroup.cuh"  // warpgroup_index, setmaxnreg_dec<N>, setmaxnreg_inc<N>, named_barrier_sync(id, threads)
#include "wgmma.cuh"      // wgmma_desc_sw128, wgmma_desc_advance, wgmma_fence, wgmma_commit, wgmma_wait<N>,
                          // wgmma_m64n256k16_ss(acc, desc_a, desc_b, scale_d), wgmma_fence_operand

constexpr int BM = 128, BN = 256, BK = 64;          // (BM, BN, BK): a CTA's tile of C, one k-tile of A and B
constexpr unsigned BOX_BYTES = 128 * BK * 2;        // one (128, 64) bf16 box of the A / B maps: 16 KiB
constexpr unsigned STAGE_BYTES = 3 * BOX_BYTES;     // stage s = [A rows m0.. | B rows n0.. | B rows n0 + 128..]
constexpr int CONSUMER_WARPS = 8;                   // warpgroups 1 and 2
constexpr unsigned SMEM_BYTES = 225 * 1024;         // the launch's dynamic shared memory (227 KiB less 2 for static)

// Given: tile t of the grid (tiles_m x tiles_n of (128, 256)) in a grouped order — 8 tile rows sweep the tile
// columns together, so CTAs that run at the same time share A rows and B columns in L2.
__device__ __forceinline__ void tile_origin(int t, int tiles_m, int tiles_n, int& m0, int& n0) {
    const int per_group = 8 * tiles_n, first = (t / per_group) * 8, height = min(tiles_m - first, 8);
    m0 = (first + (t % per_group) % height) * BM;
    n0 = ((t % per_group) / height) * BN;
}

// Given: the plain-store epilogue — a consumer warpgroup's m64n256 accumulator (rows r0 .. r0 + 63, cols c0 .. c0 +
// 255 of C) stored as bf16 with ordinary stores (STG), clipped at (M, N). Correct, but it earns no path points: the
// exercise is to replace it. Layout (wgmma.cuh): acc[4j + {0,1}] -> row 16 w + l / 4, cols 8 j + 2 (l % 4) + {0, 1};
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

// ---- Yours (1): the design — the ring's depth STAGES and STAGING_BYTES, the staging shared memory of ONE consumer
// warpgroup (the given code places consumer c's at base + STAGES * STAGE_BYTES + c * STAGING_BYTES) — and any
// helpers of your epilogue (2), which moves a consumer's accumulator to C through it by TMA store (the C map: box
// (64 rows, 64 cols), 128B swizzle). The static_assert below the region checks that your layout fits SMEM_BYTES.
# YOUR CODE HERE
raise NotImplementedError()

static_assert(STAGING_BYTES % 1024 == 0, "each consumer's staging must start 1024-aligned (a 128B swizzle atom)");
static_assert(1024 + STAGES * STAGE_BYTES + 2 * STAGING_BYTES <= SMEM_BYTES,
              "the ring (STAGES x 48 KiB), two consumers' staging and the 1 KiB alignment slack must fit SMEM_BYTES");

// ---- The kernel. Launch contract: block 384 (warpgroup 0 produces, 1 and 2 consume), grid min(tiles, SMs) —
// persistent, block b takes tiles b, b + gridDim.x, ... — SMEM_BYTES (225 KiB) of dynamic shared memory; the A and B
// maps with box (128, 64), the C map with box (64, 64), all 128B swizzle. C = A B^T: A (M, K), B (N, K), C (M, N),
// all row-major bf16; K % 8 == N % 8 == 0. A TMA store writes nothing outside C: edge tiles need no masking.
extern "C" __global__ void __launch_bounds__(384, 1)
gemm_epilogue(const __grid_constant__ CUtensorMap a_map, const __grid_constant__ CUtensorMap b_map,
              const __grid_constant__ CUtensorMap c_map, __nv_bfloat16* C, int M, int N, int K)
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
            for (int kt = 0; kt < ktiles; ++kt, ++it) {
                const int s = it % STAGES;
                mbar_wait(smem_addr(&empty[s]), ((it / STAGES) & 1) ^ 1);  // use n waits for release n - 1
                const unsigned bar = smem_addr(&full[s]), st = base + s * STAGE_BYTES;
                mbar_arrive_expect_tx(bar, STAGE_BYTES);  // 1 arrival + 3 whole boxes (zero fill is counted)
                tma_load_2d(st, &a_map, kt * BK, m0, bar);
                tma_load_2d(st + BOX_BYTES, &b_map, kt * BK, n0, bar);
                tma_load_2d(st + 2 * BOX_BYTES, &b_map, kt * BK, n0 + 128, bar);
            }
        }
        return;
    }

    setmaxnreg_inc<232>();                   // consumers take them: 128 x 40 + 256 x 232 = 64512 <= 65536
    const int c = warpgroup_index() - 1;     // consumer c owns rows 64 c .. 64 c + 63 of the tile
    // Consumer c's staging shared memory (STAGING_BYTES, 1024-aligned), as a shared address and a generic pointer.
    const unsigned staging_addr = base + STAGES * STAGE_BYTES + c * STAGING_BYTES;
    unsigned char* staging = smem_raw + (staging_addr - smem_addr(smem_raw));
    float acc[BN / 2];                       // m64n256 fp32 accumulator: 128 registers per thread
    int it = 0;
    for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
        int m0, n0;
        tile_origin(t, tiles_m, tiles_n, m0, n0);
#pragma unroll
        for (int i = 0; i < BN / 2; ++i) acc[i] = 0.f;
        for (int kt = 0; kt < ktiles; ++kt, ++it) {
            const int s = it % STAGES;
            mbar_wait(smem_addr(&full[s]), (it / STAGES) & 1);  // use n of stage s: parity n & 1
            const unsigned st = base + s * STAGE_BYTES;
            const unsigned long long da = wgmma_desc_sw128(st + c * 64 * 128);  // my 64 rows of A (8 KiB in)
            const unsigned long long db = wgmma_desc_sw128(st + BOX_BYTES);    // all 256 rows of B
            wgmma_fence();  // acc was written by ordinary instructions (zeroed) or by the last group
#pragma unroll
            for (int kk = 0; kk < BK / 16; ++kk)
                wgmma_m64n256k16_ss(acc, wgmma_desc_advance(da, 32 * kk), wgmma_desc_advance(db, 32 * kk), 1);
            wgmma_commit();   // the 4 wgmma are one group ...
            wgmma_wait<0>();  // ... retired: acc is final for this k-tile, stage s is no longer read
            if (threadIdx.x % 32 == 0) mbar_arrive(smem_addr(&empty[s]));  // one arrival per warp
        }
        wgmma_fence_operand(acc);
        // ---- Yours (2): this tile's epilogue — consumer c's accumulator to C rows m0 + 64 c .., cols n0 .., by TMA
        // store through your staging, the stores left in flight while the next tile's mainloop runs.
# YOUR CODE HERE
raise NotImplementedError()
    }
    // Given: thread 0 of each consumer warpgroup — the thread that issues its TMA stores — waits until every store it
    // committed is complete before the block may exit (its shared memory must outlive the stores' reads).
    if (threadIdx.x % 128 == 0) bulk_wait<0>();
}
"""
