
#include <cuda_bf16.h>
#include "course.cuh"     // CUtensorMap (128 opaque bytes) and smem_addr(p): the 32-bit shared-memory address of p

// ---- Given: the course's wrappers (kernels/include/), one per PTX instruction. ------------------------------------
#include "mbarrier.cuh"   // mbar_init, fence_barrier_init, mbar_arrive_expect_tx, mbar_arrive, mbar_wait(bar, parity)
#include "tma.cuh"        // tma_load_2d(smem dst, &map, col, row, bar)
#include "warpgroup.cuh"  // warpgroup_index, warp_index_in_warpgroup, lane_index, elect_one_sync, setmaxnreg_*<N>
#include "wgmma_fp8.cuh"  // wgmma_m64n128k32_e4m3_ss(d, desc_a, desc_b, scale_d), and wgmma.cuh's descriptor
                          // (wgmma_desc_sw128, wgmma_desc_advance), wgmma_fence, wgmma_commit, wgmma_wait<N>

constexpr int BM = 128, BN = 128, BK = 128, STAGES = 6;     // (BM, BN, BK, STAGES): BK = one scale block of K
constexpr int TILE_A = BM * BK, TILE_B = BN * BK;            // 16 KiB each: one byte per e4m3
constexpr int STAGE_TILES = TILE_A + TILE_B;                 // a stage's tiles: 32 KiB, 1024-aligned
constexpr int SA_BYTES = BM * 4;                             // a stage's 128 row scales of A, fp32: 512 B
constexpr int STAGE_TX = STAGE_TILES + SA_BYTES;             // 33280 bytes counted on full[s]
constexpr int SA_BASE = STAGES * STAGE_TILES;                // the scale ring follows the tile ring
constexpr int SMEM_USED = 1024 + SA_BASE + (STAGES * SA_BYTES + 1023) / 1024 * 1024;  // align + tiles + scales
constexpr int SMEM_BYTES = 196 * 1024;                       // the launch's dynamic shared memory (200704 B)
constexpr int CONSUMER_WARPS = 8;                            // empty[s]'s arrival count
static_assert(SMEM_USED <= SMEM_BYTES, "the ring and its scales must fit the launch's dynamic shared memory");

// ---- Yours: the promotion of one k-block. --------------------------------------------------------------------------
// Called by every thread of consumer warpgroup c (c = 0, 1: tile rows 64 c .. 64 c + 63) once per k-block kb, after
// that k-block's 4 wgmma have retired (wgmma_wait<0>):
//   tmp      this thread's part of the k-block's product A[m0 + rows, 128 kb ..] . B[n0 + cols, 128 kb ..]^T: fp32,
//            unscaled, a fresh sum (the k-block's first wgmma has scale-d = 0)
//   acc      this thread's part of the fp32 accumulator, the same layout (zero before kb = 0)
//   sa_ring  the scale ring in shared memory: slot s = kb % STAGES holds the k-block's 128 row scales of A,
//            sa_ring[s * BM + r] = sa[m0 + r, kb] for tile row r (the producer's TMA brought them with the tiles of
//            stage s; the given code hands stage s back to the producer only after you return)
//   sb       the block scales of B in global memory, (N / 128, K / 128) row-major: sb[n_tile * kblocks + kb] is the
//            one scale of this CTA's whole (128 x 128) block of B
// Fold it in: acc[i] += tmp[i] * sa[m0 + row(i), kb] * sb[n_tile, kb] (FFMA, fp32), with row(i) the tile row of
// register i. The m64n128k32 fragment (wgmma_fp8.cuh): thread l of warp w of the warpgroup (warp_index_in_warpgroup(),
// lane_index()), j = 0 .. 15:
//   tmp[4 j + 0], tmp[4 j + 1]  ->  tile row 64 c + 16 w + l / 4,      cols 8 j + 2 (l % 4) + {0, 1}
//   tmp[4 j + 2], tmp[4 j + 3]  ->  tile row 64 c + 16 w + l / 4 + 8,  the same cols
__device__ __forceinline__ void promote(float (&acc)[64], const float (&tmp)[64], const float* sa_ring, int s,
                                        const float* __restrict__ sb, int n_tile, int kb, int kblocks, int c) {
    // This thread's two tile rows (wgmma_fp8.cuh's m64nNk32 layout): registers 4j+0,1 in row r, 4j+2,3 in row r + 8.
    const int r = 64 * c + 16 * warp_index_in_warpgroup() + lane_index() / 4;
    const float* sa_s = sa_ring + s * BM;            // slot s = kb % STAGES: k-block kb's 128 row scales of A
    const float scale_b = sb[n_tile * kblocks + kb]; // the one scale of this CTA's 128 x 128 block of B
    const float s_hi = sa_s[r] * scale_b, s_lo = sa_s[r + 8] * scale_b;
#pragma unroll
    for (int j = 0; j < 16; ++j) {
        acc[4 * j + 0] = fmaf(tmp[4 * j + 0], s_hi, acc[4 * j + 0]);
        acc[4 * j + 1] = fmaf(tmp[4 * j + 1], s_hi, acc[4 * j + 1]);
        acc[4 * j + 2] = fmaf(tmp[4 * j + 2], s_lo, acc[4 * j + 2]);
        acc[4 * j + 3] = fmaf(tmp[4 * j + 3], s_lo, acc[4 * j + 3]);
    }
}

// ---- Given: the producer, one elected thread. Per k-block: wait until stage s is free, arm full[s] with the stage's
// bytes, issue the three TMA loads that deliver them. Coordinates are {inner, outer}, in elements.
__device__ __forceinline__ void producer(const CUtensorMap* a_map, const CUtensorMap* b_map, const CUtensorMap* sa_map,
                                         unsigned base, unsigned long long* full, unsigned long long* empty, int m0,
                                         int n0, int kblocks) {
    for (int kb = 0; kb < kblocks; ++kb) {
        const int s = kb % STAGES, n = kb / STAGES;  // k-block kb is stage s's n-th use
        const unsigned sA = base + s * STAGE_TILES, sB = sA + TILE_A, sS = base + SA_BASE + s * SA_BYTES;
        const unsigned bar = smem_addr(&full[s]);
        mbar_wait(smem_addr(&empty[s]), (n & 1) ^ 1);  // the 8 consumer warps released use n - 1 (use 0: at once)
        mbar_arrive_expect_tx(bar, STAGE_TX);           // 1 arrival + 33280 bytes complete the phase
        tma_load_2d(sA, a_map, kb * BK, m0, bar);       // A[m0 .., 128 kb ..]: (128, 128) e4m3, 128B swizzle
        tma_load_2d(sB, b_map, kb * BK, n0, bar);       // B[n0 .., 128 kb ..]: (128, 128) e4m3, 128B swizzle
        tma_load_2d(sS, sa_map, m0, kb, bar);           // sa_t[kb, m0 ..]: (1, 128) fp32, 512 contiguous bytes
    }
}

// ---- Given: one consumer warpgroup's k-loop. Per k-block: wait for the stage, 4 k32 wgmma into the fresh fragment
// tmp (scale-d = 0 on the first), commit, wait for them, promote (yours), hand the stage back.
__device__ __forceinline__ void consumer(float (&acc)[64], const unsigned char* smem, unsigned base,
                                         unsigned long long* full, unsigned long long* empty,
                                         const float* __restrict__ sb, int c, int kblocks) {
    const float* sa_ring = reinterpret_cast<const float*>(smem + SA_BASE);
    float tmp[64];
#pragma unroll
    for (int i = 0; i < 64; ++i) acc[i] = 0.f, tmp[i] = 0.f;
    for (int kb = 0; kb < kblocks; ++kb) {
        const int s = kb % STAGES, n = kb / STAGES;
        mbar_wait(smem_addr(&full[s]), n & 1);  // tiles and row scales of k-block kb have landed
        const unsigned sA = base + s * STAGE_TILES, sB = sA + TILE_A;
        // consumer c's 64 rows of A start 64 x 128 B = 8 KiB into the tile (a multiple of the 1024-byte atom)
        const unsigned long long da = wgmma_desc_sw128(sA + c * 64 * 128), db = wgmma_desc_sw128(sB);
        wgmma_fence();  // tmp was last read by the promotion (ordinary instructions): order that first
#pragma unroll
        for (int kk = 0; kk < BK / 32; ++kk)  // 4 x k32: +32 bytes along the 128-byte row per step
            wgmma_m64n128k32_e4m3_ss(tmp, wgmma_desc_advance(da, 32 * kk), wgmma_desc_advance(db, 32 * kk), kk > 0);
        wgmma_commit();
        wgmma_wait<0>();  // tmp final for this k-block; the tensor core has read the stage's A and B
        wgmma_fence_operand(tmp);
        promote(acc, tmp, sa_ring, s, sb, blockIdx.x, kb, kblocks, c);
        __syncwarp();     // every lane of the warp has read the stage's row scales ...
        if (lane_index() == 0) mbar_arrive(smem_addr(&empty[s]));  // ... before its lane 0 releases the stage
    }
}

// ---- Given: the epilogue of consumer c, plain stores: its (64, 128) accumulator to D as bf16 pairs, straight from
// the registers (acc[4 j + 0, 1] in this thread's upper row, acc[4 j + 2, 3] eight rows lower). Every tile is whole.
__device__ __forceinline__ void epilogue(const float (&acc)[64], __nv_bfloat16* __restrict__ D, int N, int c, int m0,
                                         int n0) {
    const int l = lane_index(), w = warp_index_in_warpgroup();
    __nv_bfloat16* upper = D + static_cast<long long>(m0 + 64 * c + 16 * w + l / 4) * N + n0 + 2 * (l % 4);
    __nv_bfloat16* lower = upper + 8 * static_cast<long long>(N);
#pragma unroll
    for (int j = 0; j < BN / 8; ++j) {
        *reinterpret_cast<__nv_bfloat162*>(upper + 8 * j) = __floats2bfloat162_rn(acc[4 * j + 0], acc[4 * j + 1]);
        *reinterpret_cast<__nv_bfloat162*>(lower + 8 * j) = __floats2bfloat162_rn(acc[4 * j + 2], acc[4 * j + 3]);
    }
}

// ---- The kernel. Launch contract: grid (N / 128, M / 128), CTA (x, y) computes D[128 y .., 128 x ..]; block 384
// (warpgroup 0 produces, 1 and 2 consume); SMEM_BYTES of dynamic shared memory. a_map, b_map: A (M, K) and B (N, K)
// e4m3, both K-major, box (128, 128), 128B swizzle; sa_map: sa_t (K / 128, M) fp32, box (1, 128); sb (N / 128,
// K / 128) fp32; D (M, N) bf16 row-major. M, N, K multiples of 128.
extern "C" __global__ void __launch_bounds__(384, 1)
fp8_promote(const __grid_constant__ CUtensorMap a_map, const __grid_constant__ CUtensorMap b_map,
            const __grid_constant__ CUtensorMap sa_map, __nv_bfloat16* __restrict__ D, const float* __restrict__ sb,
            int M, int N, int K) {
    extern __shared__ unsigned char smem_raw[];
    const unsigned raw = smem_addr(smem_raw);
    const unsigned base = (raw + 1023u) & ~1023u;  // stage s at base + s * STAGE_TILES: the 128B swizzle's period
    const unsigned char* smem = smem_raw + (base - raw);
    __shared__ __align__(8) unsigned long long full[STAGES];   // full[s]:  1 arrival (expect_tx) + 33280 tx bytes
    __shared__ __align__(8) unsigned long long empty[STAGES];  // empty[s]: 8 arrivals, lane 0 of each consumer warp
    const int kblocks = K / BK, m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
    if (m0 >= M || n0 >= N) return;  // the whole CTA (the launch contract's grid never makes one)

    if (threadIdx.x == 0) {
        for (int s = 0; s < STAGES; ++s) {
            mbar_init(smem_addr(&full[s]), 1);
            mbar_init(smem_addr(&empty[s]), CONSUMER_WARPS);
        }
        fence_barrier_init();
    }
    __syncthreads();

    const int wg = warpgroup_index();
    if (wg == 0) {  // producer warpgroup: its registers go back to the pool; one elected thread of warp 0 loads
        setmaxnreg_dec<40>();
        if (warp_index_in_warpgroup() == 0 && elect_one_sync())
            producer(&a_map, &b_map, &sa_map, base, full, empty, m0, n0, kblocks);
    } else {        // consumers: warpgroup 1 -> tile rows 0 .. 63, warpgroup 2 -> rows 64 .. 127
        setmaxnreg_inc<232>();
        float acc[64];
        consumer(acc, smem, base, full, empty, sb, wg - 1, kblocks);
        epilogue(acc, D, N, wg - 1, m0, n0);
    }
}
