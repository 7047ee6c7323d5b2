// wgmma_fp8.cuh — Hopper's warpgroup MMA on FP8 operands (sm_90a): m64nNk32 f32 += e4m3 x e4m3, SS form (A and B
// both from shared memory, named by wgmma.cuh's 128B-swizzle descriptors), N = 128 and 256. One wrapper per PTX form,
// the PTX and its contract above it. Included by kernels/fp8_gemm/r1_block_scaled.cu.
//
// SASS to expect: QGMMA.64x128x32.F32.E4M3.E4M3 R.., gdesc[UR..], R.., gsb0 (QGMMA.64x256x32.F32.E4M3.E4M3 for
// N = 256), WARPGROUP.ARRIVE (wgmma_fence), WARPGROUP.DEPBAR.LE gsb0, 0x0 (wgmma_wait<0>). QGMMA, not HGMMA: nvdisasm
// names the 8-bit-float tensor-core MMA apart from the 16-bit one (read off the course's own compile;
// tests/test_fp8_gemm_kernel.py holds it). PTX checked against CUTLASS
// cute/arch/mma_sm90_gmma.hpp (SM90_64x128x32_F32E4M3E4M3_SS_TN) — same PTX, own code.
//
// The contract is wgmma.cuh's (one warpgroup executes it together, asynchronous until a wgmma_wait retires its
// group, wgmma_fence before a batch and after ordinary instructions touched d[]), plus what FP8 changes:
// - K per instruction is 32 (32 bytes of e4m3 = the same 32 bytes of a K-major row as bf16's k16). One 128-byte
//   swizzle row holds 128 e4m3 values, so a (rows, 128) e4m3 tile loaded by a TMA with CU_TENSOR_MAP_SWIZZLE_128B is
//   exactly wgmma.cuh's atom layout: wgmma_desc_sw128(tile) describes it unchanged (SBO 1024 B = 8 rows x 128 B), and
//   the k32 step kk inside the tile is wgmma_desc_advance(desc, 32 * kk) — the same +32 bytes as bf16's k16.
// - Both operands must be K-major. PTX allows imm-trans-a / imm-trans-b only for .f16 / .bf16 (the operand list
//   below has no transpose immediates at all): an FP8 B stored N-major (K rows of N contiguous values) cannot be fed
//   to wgmma from shared memory; it has to be transposed first (in global memory, or while staging into shared
//   memory). That is attention's problem with V: P.V contracts over the key index, which is V's *row* index, so
//   row-major V (keys x head_dim, head_dim contiguous) is MN-major for that product — FP8 attention kernels (FA3)
//   store V transposed or transpose it in shared memory, where bf16 simply sets imm-trans-b = 1.
// - The accumulator is f32 in registers, but the tensor core's FP8 datapath does not keep a full fp32 sum inside:
//   DeepGEMM measured about 14 bits of mantissa kept across the k32 steps of an accumulation (fp32 has 23 + 1). Long
//   K must therefore be "promoted": accumulate a short run (one 128-wide k-block: 4 instructions) into a fresh
//   fragment, then add it into an fp32 accumulator with ordinary FFMA (r1_block_scaled.cu does, scaled by the
//   block scales on the way).
//
// Accumulator layout of m64nNk32 (f32, N/2 registers per thread): the same as m64nNk16 (wgmma.cuh). Thread t of the
// warpgroup, warp w = t / 32, lane l = t % 32; for j in 0 .. N/8 - 1:
//   d[4j + 0], d[4j + 1]  ->  row 16 w + l / 4,      cols 8 j + 2 (l % 4) + {0, 1}
//   d[4j + 2], d[4j + 3]  ->  row 16 w + l / 4 + 8,  cols 8 j + 2 (l % 4) + {0, 1}
//
// PTX (SS): wgmma.mma_async.sync.aligned.m64nNk32.f32.e4m3.e4m3 {d...}, desc_a, desc_b, p, 1, 1;
//   d += A(64 x 32, K-major, desc_a) * B(N x 32, K-major, desc_b)^T   (p = scale_d != 0; p false: d = A * B^T)
//   imm-scale-a = imm-scale-b = 1 (no negation); no imm-trans operands (FP8: K-major only, see above).
// SASS: QGMMA.64xNx32.F32.E4M3.E4M3 R.., gdesc[UR..], R.., gsb0 (the first of a batch with scale-d known false at
// compile time reads RZ for the old d: "QGMMA... R24, gdesc[UR8], RZ, !UPT")
#pragma once

#include "course.cuh"
#include "wgmma.cuh"  // the descriptor (wgmma_desc_sw128 / _advance), fence, commit, wait, fence_operand

__device__ __forceinline__ void wgmma_m64n128k32_e4m3_ss(float (&d)[64], unsigned long long desc_a,
                                                         unsigned long long desc_b, int scale_d) {
    WGMMA_SS_ASM("m64n128k32.f32.e4m3.e4m3", 64, 64, 65, 66, "1, 1", d, desc_a, desc_b, scale_d);
}

// m64n256k32, SS: a (64, 256) fragment, 128 accumulators per thread (for a BN = 256 tile). SASS:
// QGMMA.64x256x32.F32.E4M3.E4M3.
__device__ __forceinline__ void wgmma_m64n256k32_e4m3_ss(float (&d)[128], unsigned long long desc_a,
                                                         unsigned long long desc_b, int scale_d) {
    WGMMA_SS_ASM("m64n256k32.f32.e4m3.e4m3", 128, 128, 129, 130, "1, 1", d, desc_a, desc_b, scale_d);
}
