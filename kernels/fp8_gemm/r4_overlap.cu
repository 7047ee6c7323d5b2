// r4_overlap.cu — week 3 day 1, rung 4: rung 1's 128 x 128 tile (r1_block_scaled.cu: the same inputs, maps, ring
// stage and math), walked persistently as rung 2 walks its tiles (r2_wide.cu), with a consumer that promotes one
// k-block while its own wgmmas of the next are in the tensor core.
//
//   D (M, N) = bf16( sum over k-blocks kb of  (A[:, kb] . B[:, kb]^T) * sa[m, kb] * sb[n / 128, kb] )
//
//   A  (M, K)  float8_e4m3fn, K contiguous        sa_t (K/128, M) fp32: sa[m, kb] at sa_t[kb, m] ("1D": 1 x 128)
//   B  (N, K)  float8_e4m3fn, K contiguous        sb   (N/128, K/128) fp32 row-major    ("2D": 128 x 128 blocks)
//   M, N, K multiples of 128; every pointer 16-byte aligned (kernels/fp8_gemm/launch.py gemm_fp8_overlap checks).
//
// What changes against rungs 1 and 2:
// - New: two promotion fragments, t0 and t1 (t[0], t[1] in the code). Rungs 1-3 wait for a k-block's wgmmas
//   (wgmma_wait<0>) before promoting them, so a warpgroup's own tensor-core work stops during its 64 FFMAs; only the
//   other warpgroup's wgmmas fill the gap. Here a warpgroup issues k-block kb + 1's 4 wgmmas into one fragment,
//   then waits with wgmma_wait<1> — every group but the newest retired: kb's is done, kb + 1's still runs — and
//   promotes kb's fragment meanwhile. acc 64 + t0 64 + t1 64 = 192 of the 232 registers a consumer has. (Rung 2's
//   (64, 256) accumulator leaves room for one fragment only — 128 + 2 x 64 = 256 > 232 — which is why this rung
//   goes back to rung 1's tile.)
// - The register contract (PTX ISA, wgmma.mma_async: the accumulators of a wgmma in flight must not be accessed
//   until a wgmma.wait_group retires it): the kernel keeps it. Where ptxas cannot prove that a non-wgmma
//   instruction reads only retired fragments, its repair is silent serialization of every wgmma (advisory C7514,
//   and C7517 where it injects a wait); kernels/compile.py keeps the advisories, tests/test_fp8_gemm_overlap.py
//   requires none. ptxas cannot prove it with a fragment in flight across the k-loop's back-edge: a rolling t0/t1
//   pipeline (issue kb + 1, retire kb, around the loop) draws C7514, and the test compiles that variant to show it.
//   So the k-loop goes by UNROLL k-blocks (FP8_UNROLL, 16 by default), and every group is retired before the
//   back-edge (as FA3's mainloop retires its softmax GEMM before the next iteration). For UNROLL = 4:
//
//       issue t0 <- kb      issue t1 <- kb+1   wait<1>: promote t0 (kb)  || tensor core: kb+1
//       issue t0 <- kb+2    wait<1>: promote t1 (kb+1)                   || tensor core: kb+2
//       issue t1 <- kb+3    wait<1>: promote t0 (kb+2)                   || tensor core: kb+3
//       wait<0>: promote t1 (kb+3)                                       || the other warpgroup's wgmmas
//
//   three promotions of four overlap the warpgroup's own wgmmas; with UNROLL k-blocks a step, UNROLL - 1 of UNROLL
//   (15 of 16). K / 128 k-blocks not a multiple of UNROLL: the rest in steps of UNROLL / 2, ..., 2, 1 (one for each
//   binary digit of kblocks % UNROLL; a step of 1 is rung 1's order: issue, wait<0>, promote). Why 16: steps of 4,
//   8, 16 (the default) and 32 side by side in interleaved rounds at 8192^3 (`python -m kernels.fp8_gemm.rounds
//   --unrolls 4 8 32`, recorded on an H200 in kernels/fp8_gemm/unroll_rounds_h200.json): 16 fastest; 32's code, its
//   body and tail fully unrolled, is 8200 SASS instructions.
// - Persistent, as rung 2: grid = min(tiles, SMs) CTAs; CTA b computes tiles b, b + grid, ... in rung 2's grouped
//   order (grouped_order, GROUP_M tile rows per group); the ring's count `it` runs on across tiles, so the producer
//   fills the next tile's first stages while the consumers store this one's D.
//
//     warpgroup 0 (producer):   warp 0, one elected lane: TMA loads of A, B, sa (the ring); setmaxnreg 40
//     warpgroups 1, 2:          consumer c: rows 64 c .. 64 c + 63 of the tile (one m64 row of wgmma); setmaxnreg 232
//
// Hardware contract:
//   tile (BM, BN, BK) = (128, 128, 128); tiles (M / 128) x (N / 128); grid min(tiles, SMs) (launch.py overlap_grid)
//   stage s (1024-aligned):  | A tile (128 rows x 128 B) 16 KiB | B tile (128 rows x 128 B) 16 KiB |  (128B swizzle)
//                            + sa slot s: 128 fp32 = 512 B in the scale area (512-byte aligned, no swizzle)
//   expect-tx per stage: 16384 (A) + 16384 (B) + 512 (sa) = 33280 bytes; full[s] init count 1 (the producer's
//     arrive.expect_tx). empty[s] init count 8: lane 0 of each of the 8 consumer warps, once the k-block's wgmmas are
//     retired (wait<1> or wait<0>: the tensor core has read the tiles) and its warp has read sa (a __syncwarp).
//   parity: the CTA's k-block it (counted over all its tiles) uses stage s = it % STAGES in round n = it / STAGES;
//     the consumers wait full[s] with parity n & 1; the producer waits empty[s] with parity (n & 1) ^ 1. A consumer
//     holds at most 2 stages at once (kb's until its wait<1> after kb + 1 is issued): 6 stages leave the producer 4
//     ahead.
//   dynamic shared memory (STAGES = 6): rung 1's | <= 1 KiB align | 6 x 32 KiB tiles | 6 x 512 B sa, padded to 3 KiB |
//     = 200704 B (+ 96 B of static barriers) <= 227 KiB.
//   registers: producer 128 x 40 + consumers 2 x 128 x 232 = 64512 <= 65536; no spills (tests/test_fp8_gemm_overlap.py)
//   epilogue: rung 1's (store_tile): 32 4-byte st.global of bf16 pairs per thread per tile, from the registers.
//
// SASS you should see (each named opcode is checked against the listing by tests/test_fp8_gemm_kernel.py; the counts
// by tests/test_fp8_gemm_overlap.py): `UTMALDG.2D` (A, B and sa: 3 per k-block), `SYNCS.EXCH.64` (mbarrier.init),
// `SYNCS.ARRIVE.TRANS64` (the producer's arrive.expect_tx), `SYNCS.PHASECHK.TRANS64.TRYWAIT` (every mbarrier wait),
// `SYNCS.ARRIVE.TRANS64.A1T0` (a consumer warp releasing a stage: one per retirement, 31), `USETMAXREG` (40 / 232),
// `WARPGROUP.ARRIVE` (wgmma_fence, 31), `QGMMA.64x128x32.F32.E4M3.E4M3` (4 per k-block of code: the body's 16
// k-blocks and the tail's 8 + 4 + 2 + 1, 124), `WARPGROUP.DEPBAR.LE` (gsb0, 0x1 for the 26 overlapped retirements;
// gsb0, 0x0 for the last of each step, 5), `FFMA` (the promotion), `F2FP.BF16.F32.PACK_AB`, `STG.E` (rung 1's
// epilogue: 32 per thread); and none of: `HGMMA`, `LDGSTS`, `LDL`, `STL`, `STSM`, `UTMASTG`.

#include "course.cuh"
#include "mbarrier.cuh"
#include "tma.cuh"
#include "warpgroup.cuh"
#include "wgmma_fp8.cuh"
#include "block_scaled.cuh"  // store_tile, grouped_order, align_ring, init_ring, split_roles
#include "promote_overlap.cuh"  // overlap_producer, overlap_consumer (the persistent walk, the overlapped promotion)
#include <cuda_bf16.h>

#ifndef FP8_STAGES
#define FP8_STAGES 6        // the ring's depth (rung 1's budget: 6 fits, 7 does not)
#endif
#ifndef FP8_GROUP_M
#define FP8_GROUP_M 16      // tile rows per group of the persistent walk
#endif

constexpr int BM = 128, BN = 128, BK = 128, STAGES = FP8_STAGES;  // (BM, BN, BK, STAGES)
constexpr int TILE_A = BM * BK, TILE_B = BN * BK;                 // 16 KiB each: one byte per e4m3
constexpr int STAGE_TILES = TILE_A + TILE_B;                      // 32 KiB (1024-aligned stages)
constexpr int SA_BYTES = BM * 4;                                  // 128 row scales, fp32: 512 B
constexpr int STAGE_TX = TILE_A + TILE_B + SA_BYTES;              // 33280 B counted on full[s]
constexpr int SA_BASE = STAGES * STAGE_TILES;                     // the scale area follows the tiles
constexpr int SMEM_DYNAMIC = 1024 + SA_BASE + (STAGES * SA_BYTES + 1023) / 1024 * 1024;  // align + ring + scales
constexpr int CONSUMER_WARPS = 8;                                 // empty[s]'s arrival count
constexpr int GROUP_M = FP8_GROUP_M;
#ifndef FP8_UNROLL
#define FP8_UNROLL 16       // k-blocks per step of the k-loop (a power of two; the rest: its binary digits)
#endif
constexpr int UNROLL = FP8_UNROLL;                                // k-blocks per iteration of the k-loop

static_assert(STAGES >= 3 && STAGES <= 6, "FP8_STAGES: 3..6 (a consumer holds 2 stages; 7 exceed 227 KiB)");
static_assert(SMEM_DYNAMIC + 1024 <= 227 * 1024, "the ring and the scales exceed 227 KiB");
static_assert(GROUP_M >= 1, "FP8_GROUP_M: at least 1");

// The ring as the shared producer and consumer (promote_overlap.cuh) read it, and how a stage is handed back here:
// lane 0 of each consumer warp arrives on this CTA's empty[s] (8 arrivals complete it).
using Ring = OverlapRing<STAGES, STAGE_TILES, SA_BASE>;
static_assert(Ring::TILE_A == TILE_A && Ring::SA_BYTES == SA_BYTES, "the stage layout promote_overlap.cuh assumes");

extern "C" __global__ void __launch_bounds__(384, 1)
fp8_gemm_overlap(FP8_GEMM_ARGS) {
    FP8_RING_SMEM(STAGES);
    const int kblocks = K / BK;

    init_ring<STAGES>(full, empty, CONSUMER_WARPS);  // full[s]: the producer's arrive + 33280 B; empty[s]: 8 warps
    __syncthreads();

    split_roles([&] { overlap_producer<Ring, GROUP_M>(&a_map, &b_map, &sa_map, base, full, empty, M, N, kblocks); },
                [&](int c) {  // consumer c: tile rows 64 c .. 64 c + 63
                    const Ring r{smem, base, full};
                    // each tile's (64, 128) fp32 -> bf16 pairs, straight from the registers (rung 1's store_tile)
                    overlap_consumer<UNROLL, GROUP_M>(r, empty, sb, c, M, N, kblocks,
                                                      [&](const float (&acc)[64], int m0, int n0) {
                                                          store_tile(acc, D, N, m0, n0);
                                                      });
                });
}
