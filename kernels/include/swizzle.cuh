// swizzle.cuh — where a TMA swizzle mode puts each 16-byte chunk of a box in shared memory, and the shared-memory
// instructions that read and write swizzled tiles: a 16-byte load that is never merged (the demo's repeated
// passes), and the 8x8 matrix loads / stores of 16-bit elements (ldmatrix / stmatrix) that consume swizzled tiles.
// Included by kernels/swizzle/colsum.cu and by week 2, day 1's exercise.
//
// The rule (CU_TENSOR_MAP_SWIZZLE_32B / 64B / 128B; CuTe's Swizzle<1,4,3> / <2,4,3> / <3,4,3>). A TMA load writes
// the box row after row, densely (row r of a box whose inner dimension is S bytes starts at byte r * S), and then
// permutes 16-byte chunks inside each S-byte span: the chunk index (address bits 4..) is XORed with bits 7.. of
// the shared-memory ADDRESS:
//
//     128B:  bits 4-6 ^= bits 7-9     chunk' = chunk ^ (row % 8)         128-byte rows, repeats every 1024 B
//      64B:  bits 4-5 ^= bits 7-8     chunk' = chunk ^ ((row / 2) % 4)    64-byte rows, repeats every  512 B
//      32B:  bit  4   ^= bit  7       chunk' = chunk ^ ((row / 4) % 2)    32-byte rows, repeats every  256 B
//
//   128B, 8 rows x 8 chunks (the number = which logical chunk lands there):
//     row 0: 0 1 2 3 4 5 6 7      row 4: 4 5 6 7 0 1 2 3
//     row 1: 1 0 3 2 5 4 7 6      row 5: 5 4 7 6 1 0 3 2
//     row 2: 2 3 0 1 6 7 4 5      row 6: 6 7 4 5 2 3 0 1
//     row 3: 3 2 1 0 7 6 5 4      row 7: 7 6 5 4 3 2 1 0
//   A column of chunks (one logical chunk, rows 0..7) now sits in 8 different 16-byte bank groups: 8 lanes reading
//   it with 16-byte loads hit 32 different banks — one wavefront instead of eight.
//
// Because the XOR is taken from address bits, the pattern is anchored to 1024-byte boundaries of shared memory
// (512 / 256 for 64B / 32B), not to your buffer: put a 128B-swizzled box at a 1024-byte aligned address and row r
// of the box has (r % 8) in bits 7-9, so the functions below, applied to the offset inside the box, are right.
// Anywhere else the box starts mid-pattern and they are wrong. (Bytes inside a 16-byte chunk never move.)
#pragma once

#include "course.cuh"

// Byte offset inside a 1024-byte aligned (512 / 256 for 64B / 32B) destination -> where the TMA put that byte.
__device__ __forceinline__ unsigned swizzle_128b(unsigned off) { return off ^ (((off >> 7) & 7u) << 4); }
__device__ __forceinline__ unsigned swizzle_64b(unsigned off) { return off ^ (((off >> 7) & 3u) << 4); }
__device__ __forceinline__ unsigned swizzle_32b(unsigned off) { return off ^ (((off >> 7) & 1u) << 4); }

// SPAN = 0 (CU_TENSOR_MAP_SWIZZLE_NONE), 32, 64 or 128: the same, chosen at compile time.
template <int SPAN>
__device__ __forceinline__ unsigned swizzle_bytes(unsigned off) {
    static_assert(SPAN == 0 || SPAN == 32 || SPAN == 64 || SPAN == 128, "swizzle span: 0 (none), 32, 64 or 128");
    if constexpr (SPAN == 128) return swizzle_128b(off);
    else if constexpr (SPAN == 64) return swizzle_64b(off);
    else if constexpr (SPAN == 32) return swizzle_32b(off);
    else return off;
}

// The 128B rule for a box of 128-byte rows: the physical 16-byte chunk of logical chunk `chunk` (0..7) in row `row`.
__device__ __forceinline__ unsigned swz128(unsigned row, unsigned chunk) { return chunk ^ (row & 7u); }

// ld.volatile.shared.v4.b32 (SASS LDS.128): 16 bytes from a 16-byte aligned shared-memory address. Volatile so that
// a loop re-reading an unchanged tile really re-reads it (the demo's `passes`): a plain load could be hoisted.
__device__ __forceinline__ uint4 lds128_volatile(unsigned addr) {
    uint4 v;
    asm volatile("ld.volatile.shared.v4.b32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "r"(addr) : "memory");
    return v;
}

// ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 (SASS LDSM.16.MT88.4): four 8x8 matrices of 16-bit elements,
// transposed on the way. Warp-wide (all 32 lanes, converged): lanes 8m .. 8m+7 give the shared-memory addresses of
// rows 0..7 of matrix m, each row 8 elements = 16 contiguous, 16-byte aligned bytes. Afterwards lane t holds, in
// d[m], elements (2 (t % 4), t / 4) and (2 (t % 4) + 1, t / 4) of matrix m: row t / 4 of its TRANSPOSE, 2 columns.
// One matrix is one 128-byte wavefront when its 8 row addresses fall in 8 different 16-byte bank groups.
__device__ __forceinline__ void ldsm_x4_trans(unsigned (&d)[4], unsigned addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3]) : "r"(addr) : "memory");
}

// stmatrix.sync.aligned.m8n8.x4.shared.b16 (SASS STSM.16.M88.4, sm_90): the inverse of ldmatrix without .trans.
// Lanes 8m .. 8m+7 give the addresses of rows 0..7 of matrix m; lane t's s[m] holds elements (t / 4, 2 (t % 4))
// and (t / 4, 2 (t % 4) + 1) of matrix m. After ldsm_x4_trans, s = d stores each matrix's transpose.
__device__ __forceinline__ void stsm_x4(unsigned addr, const unsigned (&s)[4]) {
    asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};"
                 ::"r"(addr), "r"(s[0]), "r"(s[1]), "r"(s[2]), "r"(s[3]) : "memory");
}
