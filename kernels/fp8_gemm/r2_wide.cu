// r2_wide.cu — week 3 day 1, rung 2: rung 1's block-scaled FP8 GEMM (r1_block_scaled.cu: the same inputs, maps and
// math) with a 128 x 256 tile and a persistent grid, aimed at the gap to cuBLASLt's blockwise FP8 GEMM (rung 1:
// ~ 1040 TFLOPS at 8192^3 on an H200, cuBLASLt ~ 1340).
//
//   D (M, N) = bf16( sum over k-blocks kb of  (A[:, kb] . B[:, kb]^T) * sa[m, kb] * sb[n / 128, kb] )
//
//   A  (M, K)  float8_e4m3fn, K contiguous        sa_t (K/128, M) fp32: sa[m, kb] at sa_t[kb, m] ("1D": 1 x 128)
//   B  (N, K)  float8_e4m3fn, K contiguous        sb   (N/128, K/128) fp32 row-major    ("2D": 128 x 128 blocks)
//   M, N, K multiples of 128; every pointer 16-byte aligned (kernels/fp8_gemm/launch.py gemm_fp8_wide checks). N need
//   not be a multiple of 256: where it is not, the last tile column is a half tile (below).
//
// What changes against rung 1:
// - New: BN = 256. Per k-block a CTA loads 16 KiB of A and 32 KiB of B (two 128-row boxes of rung 1's B map) for
//   twice rung 1's work: 48 KiB of TMA traffic into shared memory per 8.4 MFLOP instead of 32 KiB per 4.2 MFLOP.
//   Why that should matter (an estimate from byte counts, not a measurement): at the FP8 peak (~ 8192 FLOP per clock
//   per SM) rung 1's k-block lasts ~ 512 clocks, in which the TMA writes 32 KiB into shared memory (64 B / clock) and
//   the 8 wgmmas read 8 x 6 KiB of A and B from it (96 B / clock): 160 B / clock against the 128 B / clock shared
//   memory serves. Here the TMA writes 48 B / clock; the wgmmas still read 96 (the same m64n128k32 shape: A 2 KiB +
//   B 4 KiB per 64 clocks): 144. (m64n256k32 would read 80 — 10 KiB per 128 clocks — but does not fit, below.)
// - The tile spans two 128-column blocks of sb: two sb floats per k-block, one per half.
// - Registers: each consumer warpgroup holds a (64, 256) fp32 accumulator, acc[128] per thread. The k-block's
//   tensor-core sum cannot be one m64n256k32 fragment (tmp[128] + acc[128] = 256 registers > the 232 a consumer
//   gets, > the 255 any thread may have), so a k-block is two halves through one tmp[64]: 4 x m64n128k32 for the
//   left 128 columns into tmp, wait, promote into acc[0..63]; 4 more for the right 128 (B rows 128..255: its
//   descriptor 16 KiB further) into the same tmp, wait, promote into acc[64..127]. acc 128 + tmp 64 = 192 of the
//   232; the rest holds addresses, scales and counters. (A second tmp, to overlap the right half's wgmmas with the
//   left half's promotion in one warpgroup, needs 64 more: 256 > 232. The overlap comes from the other consumer
//   warpgroup instead, as in rung 1: its 4 wgmmas, ~ 256 clocks of tensor-core work, cover this one's 64-FFMA
//   promotion.)
// - New: a persistent grid. grid = min(tiles, SMs) CTAs; CTA b computes tiles b, b + grid, b + 2 grid, ... in a
//   grouped order (tile_coords: GROUP_M = 16 tile rows per group, column by column inside a group), so the ~ 132
//   tiles in flight at a time share 16 row blocks of A and ~ 8 column blocks of B in L2 (a K-slab of 16 x 128 +
//   8 x 256 rows, balanced: 16 x 128 ~ 132 / 16 x 256). The producer and the consumers walk the same tiles; the ring
//   runs on across tiles (one k-block counter `it` for the whole CTA), so while the consumers store tile t's D the
//   producer already fills the ring with tile t + grid's first k-blocks: the epilogue no longer leaves the tensor
//   core without operands at the start of the next tile. The launch's 2048 tiles (8192^3) are 15.5 waves of 132.
// - The half tile: where N % 256 == 128, the last tile column is 128 wide. Its k-blocks load one B box (33280 tx
//   bytes, rung 1's), read one sb float, run only the left half, store only 64 acc registers. The branch is on
//   `wide`, the same for the whole CTA: both warpgroups (every thread of each) take the same side.
//
//     warpgroup 0 (producer):   warp 0, one elected lane: TMA loads of A, B (2 boxes), sa (the ring); setmaxnreg 40
//     warpgroups 1, 2:          consumer c: rows 64 c .. 64 c + 63 of the tile, all 256 columns; setmaxnreg 232
//
// Hardware contract:
//   tile (BM, BN, BK) = (128, 256, 128); tiles: (M / 128) x ceil(N / 256); grid min(tiles, SMs) (launch.py grid)
//   stage s (1024-aligned): | A (128 rows x 128 B) 16 KiB | B rows 0..127 16 KiB | B rows 128..255 16 KiB |
//     (each a 128B-swizzled box of rung 1's maps: box (128 rows, 128 B)) + sa slot s: 128 fp32 = 512 B (no swizzle)
//   expect-tx per stage: 16384 (A) + 2 x 16384 (B) + 512 (sa) = 49664 bytes (a half tile: 33280, one B box);
//     full[s] init count 1 (the producer's arrive.expect_tx) -> the phase completes when that arrival AND all the
//     bytes are in. empty[s] init count 8: lane 0 of each of the 8 consumer warps, once the tensor core has read
//     the stage (after the last half's wgmma_wait<0>) and its warp has read sa (after a __syncwarp).
//   parity: the CTA's k-block it (counted over all its tiles) uses stage s = it % STAGES in round n = it / STAGES;
//     the consumers wait full[s] with parity n & 1; the producer waits empty[s] with parity (n & 1) ^ 1 (round 0
//     passes at once on a fresh barrier).
//   dynamic shared memory (STAGES = 4): the ring and the scales, nothing else (the epilogue uses none)
//     | <= 1 KiB align | 4 x 48 KiB tiles | 4 x 512 B sa = 2 KiB |
//     = 1 + 192 + 2 = 195 KiB (199680 B; + 64 B of static barriers) <= 227 KiB (232448 B).
//     (5 stages: 1 + 240 + 3 = 244 KiB = 249856 B, over: 4 is the deepest ring that fits.)
//   registers: producer 128 x 40 + consumers 2 x 128 x 232 = 64512 <= 65536; no spills (tests/test_fp8_gemm_wide.py)
//   epilogue: as rung 1's, twice as wide: consumer c's thread l of warp w stores acc[4 j + {0, 1}] to
//     D[m0 + 64 c + 16 w + l / 4, n0 + 8 j + 2 (l % 4) + {0, 1}] and acc[4 j + {2, 3}] 8 rows lower, j = 0 .. 31
//     (0 .. 15 for a half tile): one 4-byte st.global per bf16 pair, 64 per thread per tile, from registers.
//
// SASS you should see (each named opcode is checked against the listing by tests/test_fp8_gemm_wide.py):
// `UTMALDG.2D` (A, B's two boxes and sa: 4 per k-block of a wide tile), `SYNCS.EXCH.64` (mbarrier.init),
// `SYNCS.ARRIVE.TRANS64` (the producer's arrive.expect_tx), `SYNCS.PHASECHK.TRANS64.TRYWAIT` (every mbarrier wait),
// `SYNCS.ARRIVE.TRANS64.A1T0` (a consumer warp releasing a stage), `ELECT` (the producer's thread), `USETMAXREG`
// (40 / 232), `WARPGROUP.ARRIVE` (wgmma_fence), `QGMMA.64x128x32.F32.E4M3.E4M3` (x 8 per k-block: two halves of
// 4), `WARPGROUP.DEPBAR.LE` (wgmma_wait<0>, once per half), `FFMA` (the promotion: 128 per k-block),
// `F2FP.BF16.F32.PACK_AB` (fp32 pairs to bf16x2), `STG.E` (the epilogue: one per bf16 pair); and none of: `HGMMA`,
// `LDGSTS`, `LDL`, `STL`, `STSM`, `UTMASTG` (no 16-bit MMA, no cp.async, no spills, no staging of D, no TMA store).

#include "course.cuh"
#include "mbarrier.cuh"
#include "tma.cuh"
#include "warpgroup.cuh"
#include "wgmma_fp8.cuh"
#include "block_scaled.cuh"  // consumer_tile (promote, kblock_mma), store_tile, grouped_order, the ring
#include <cuda_bf16.h>

#ifndef FP8_STAGES
#define FP8_STAGES 4        // the ring's depth (the byte budget above: 4 fits, 5 does not)
#endif
#ifndef FP8_GROUP_M
#define FP8_GROUP_M 16      // tile rows per group of the persistent walk (tile_coords)
#endif

constexpr int BM = 128, BN = 256, BK = 128, STAGES = FP8_STAGES;  // (BM, BN, BK, STAGES)
constexpr int HALF = 128;                                         // one m64n128 half; sb's block along N
constexpr int TILE_A = BM * BK, TILE_B_HALF = HALF * BK;          // 16 KiB each: one byte per e4m3
constexpr int STAGE_TILES = TILE_A + 2 * TILE_B_HALF;             // 48 KiB (1024-aligned stages)
constexpr int SA_BYTES = BM * 4;                                  // 128 row scales, fp32: 512 B
constexpr int STAGE_TX = TILE_A + 2 * TILE_B_HALF + SA_BYTES;     // 49664 B counted on full[s] (a wide tile)
constexpr int STAGE_TX_HALF = TILE_A + TILE_B_HALF + SA_BYTES;    // 33280 B (the half tile at N's edge)
constexpr int SA_BASE = STAGES * STAGE_TILES;                     // the scale area follows the tiles
constexpr int SMEM_DYNAMIC = 1024 + SA_BASE + (STAGES * SA_BYTES + 1023) / 1024 * 1024;  // align + ring + scales
constexpr int CONSUMER_WARPS = 8;                                 // empty[s]'s arrival count
constexpr int GROUP_M = FP8_GROUP_M;

static_assert(STAGES >= 2 && STAGES <= 4, "FP8_STAGES: 2..4 (5 x 48 KiB + the scales exceed 227 KiB)");
static_assert(SMEM_DYNAMIC + 1024 <= 227 * 1024, "the ring and the scales exceed 227 KiB");
static_assert(GROUP_M >= 1, "FP8_GROUP_M: at least 1");

// Tile t of the persistent walk -> its (m0, n0). Groups of GROUP_M tile rows; inside a group, column by column
// (the group's rows of one tile column are consecutive tiles), so concurrent CTAs share A's rows and B's columns.
__device__ __forceinline__ void tile_coords(int t, int tiles_m, int tiles_n, int& m0, int& n0) {
    int i, j;
    grouped_order(t, tiles_m, tiles_n, GROUP_M, i, j);
    m0 = i * BM;
    n0 = j * BN;
}

// The producer (one elected thread): for every tile of this CTA, per k-block, wait for the stage to be free, arm
// full[s] with the stage's bytes, issue the TMA loads that deliver them. Coordinates are {inner, outer} in elements.
__device__ __forceinline__ void producer(const CUtensorMap* a_map, const CUtensorMap* b_map, const CUtensorMap* sa_map,
                                         unsigned base, unsigned long long* full, unsigned long long* empty, int M,
                                         int N, int kblocks) {
    const int tiles_m = M / BM, tiles_n = (N + BN - 1) / BN, tiles = tiles_m * tiles_n;
    unsigned it = 0;  // this CTA's k-block count over all its tiles: the ring's position
    for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
        int m0, n0;
        tile_coords(t, tiles_m, tiles_n, m0, n0);
        const bool wide = n0 + BN <= N;
        for (int kb = 0; kb < kblocks; ++kb, ++it) {
            const unsigned s = it % STAGES, n = it / STAGES;
            const unsigned sA = base + s * STAGE_TILES, sB = sA + TILE_A, sS = base + SA_BASE + s * SA_BYTES;
            const unsigned fb = smem_addr(&full[s]);
            mbar_wait(smem_addr(&empty[s]), (n & 1) ^ 1);          // the 8 consumer warps are done with round n - 1
            mbar_arrive_expect_tx(fb, wide ? STAGE_TX : STAGE_TX_HALF);
            tma_load_2d(sA, a_map, kb * BK, m0, fb);                // A[m0 .., 128 kb ..]: (128, 128) e4m3
            tma_load_2d(sB, b_map, kb * BK, n0, fb);                // B[n0 .. n0 + 127, 128 kb ..]
            if (wide) tma_load_2d(sB + TILE_B_HALF, b_map, kb * BK, n0 + HALF, fb);  // B[n0 + 128 .. n0 + 255, ..]
            tma_load_2d(sS, sa_map, m0, kb, fb);                    // sa_t[kb, m0 .. m0 + 127]: 512 contiguous B
        }
    }
}

extern "C" __global__ void __launch_bounds__(384, 1)
fp8_gemm_wide(FP8_GEMM_ARGS) {
    FP8_RING_SMEM(STAGES);
    const int kblocks = K / BK;

    init_ring<STAGES>(full, empty, CONSUMER_WARPS);  // full[s]: the producer's arrive + the bytes; empty[s]: 8 warps
    __syncthreads();

    split_roles([&] { producer(&a_map, &b_map, &sa_map, base, full, empty, M, N, kblocks); },
                [&](int c) {  // consumer c: tile rows 64 c .. 64 c + 63, all 256 columns
                    const int tiles_m = M / BM, tiles_n = (N + BN - 1) / BN, tiles = tiles_m * tiles_n;
                    unsigned it = 0;  // the same count as the producer's
                    float acc[128];
                    for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
                        int m0, n0;
                        tile_coords(t, tiles_m, tiles_n, m0, n0);
                        const bool wide = n0 + BN <= N;
                        // a consumer warp's lane 0 releases a stage of its CTA
                        consumer_tile<STAGES, STAGE_TILES, SA_BASE>(
                            acc, smem, base, full, sb + static_cast<long long>(n0 / HALF) * kblocks, c, kblocks,
                            wide, it,
                            [&](unsigned s) { if (lane_index() == 0) mbar_arrive(smem_addr(&empty[s])); });
                        store_tile(acc, D, N, m0 + 64 * c, n0, wide);  // (64, 256) fp32 -> bf16 (64, 128: a half)
                    }
                });
}
