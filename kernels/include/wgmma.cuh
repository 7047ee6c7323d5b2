// wgmma.cuh — Hopper's warpgroup matrix multiply (wgmma.mma_async, sm_90a): the shared-memory matrix descriptor
// for 128B-swizzled K-major bf16 tiles, the fence / commit_group / wait_group discipline, and
// m64nNk16 bf16 x bf16 -> f32 in two forms: SS (A and B both from shared memory, N = 64, 128, 176, 256) and RS (A from
// registers, B from shared memory, N = 64, 128; attention's P.V). One wrapper per PTX form, the PTX and its contract
// above it. Included by kernels/gemm/*.cu and kernels/attention/*.cu.
//
// SASS to expect: HGMMA.64x256x16.F32.BF16 (SS: both operands named by descriptors, "gdesc[UR..]"),
// HGMMA.64x128x16.F32.BF16 with a register A (RS), WARPGROUP.ARRIVE (the fence), WARPGROUP.DEPBAR.LE gsb0, 0x0
// (the wait). Checked against CUTLASS cute/arch/mma_sm90_gmma.hpp and mma_sm90_desc.hpp (same PTX, own code).
//
// The contract of every wgmma in this file:
// - All 128 threads of one warpgroup (threads [128 w, 128 w + 128) of the block, warpgroup.cuh) execute it together
//   (.sync.aligned): never under a branch that splits the warpgroup.
// - It is asynchronous. The accumulator registers d[] belong to the tensor core from the wgmma until a
//   wgmma_wait<N>() that retires its group: reading or writing d[] before that is a race (garbage, or a result
//   that silently misses k-steps). The shared-memory operands must stay unchanged until the same wait.
// - Before the first wgmma that touches registers written by ordinary instructions (d[] zeroed or scaled, A
//   fragments of the RS form), and before the first wgmma of a batch, the warpgroup executes wgmma_fence().
// - Shared-memory operands written by ordinary st.shared must be made visible to the async proxy first
//   (fence.proxy.async, tma.cuh's fence_proxy_async()); operands written by TMA need only the mbarrier wait.
//
//   one k-block:   wgmma_fence();                       // WARPGROUP.ARRIVE: registers are ready
//                  for k16 in the tile: wgmma_m64n256k16_ss(acc, da + k16 step, db + k16 step, 1);   // HGMMA x 4
//                  wgmma_commit();                      // close the group of 4
//                  wgmma_wait<0>();                     // WARPGROUP.DEPBAR: all groups retired, acc readable,
//                                                       //   smem tiles of this k-block reusable
//   (wgmma_wait<1>() keeps the newest group in flight: the smem of the *previous* k-block is then free.)
#pragma once

#include "course.cuh"

// ---------------------------------------------------------------------------------------------------------------
// The shared-memory matrix descriptor (64 bits; PTX ISA "Matrix Descriptor Format"; CUTLASS GmmaDescriptor):
//   bits  0..13  start address >> 4            (shared::cta byte address of the tile's first 16-byte chunk)
//   bits 16..29  leading-dimension byte offset >> 4   (unused for swizzled K-major layouts: set to 1)
//   bits 32..45  stride-dimension byte offset >> 4    (bytes between consecutive 8-row core-matrix groups)
//   bits 49..51  base offset                   (0: the tile's swizzle pattern starts on a 1024-byte boundary)
//   bits 62..63  layout: 0 none (interleave), 1 = 128B swizzle, 2 = 64B swizzle, 3 = 32B swizzle
//
// Our tiles: R rows x 64 bf16 (one 128-byte row per M or N index, K contiguous: "K-major"), loaded by a TMA with
// CU_TENSOR_MAP_SWIZZLE_128B, so inside each 8-row x 128-byte atom (1024 bytes) the 16-byte chunk c of row r sits at
// chunk c ^ (r % 8). 8 rows x 128 B = 1024 B between row groups -> stride byte offset 1024.
//
//      K (64 bf16 = 128 B) ->
//   row 0  | c0 c1 c2 c3 c4 c5 c6 c7 |   atom 0 (1024 B, rows 0..7)
//   row 1  | c1 c0 c3 c2 c5 c4 c7 c6 |
//   ...                                  atom 1 starts 1024 B later (SBO), and so on for R / 8 atoms
//
// Tile base must be 1024-byte aligned (base offset 0). A k16 step inside the 128-byte row is +32 bytes on the
// start address (desc + 2 in the low field): the hardware applies the swizzle to the address it forms, so the
// same XOR pattern the TMA wrote is undone (CUTLASS and the public Hopper GEMMs advance the descriptor this way).
// ---------------------------------------------------------------------------------------------------------------
__device__ __forceinline__ unsigned long long wgmma_desc_sw128(unsigned smem_byte_addr) {
    unsigned long long d = 0;
    d |= static_cast<unsigned long long>((smem_byte_addr & 0x3FFFFu) >> 4);  // start address
    d |= static_cast<unsigned long long>(1) << 16;                            // LBO (ignored for SW128 K-major)
    d |= static_cast<unsigned long long>(1024 >> 4) << 32;                    // SBO = 8 rows x 128 B
    d |= static_cast<unsigned long long>(1) << 62;                            // layout: 128B swizzle
    return d;
}

// Advance a descriptor by `bytes` along K (a multiple of 32 bytes = one k16 step of bf16; < 128 inside one atom row).
__device__ __forceinline__ unsigned long long wgmma_desc_advance(unsigned long long desc, unsigned bytes) {
    return desc + static_cast<unsigned long long>(bytes >> 4);
}

// ---------------------------------------------------------------------------------------------------------------
// PTX: wgmma.fence.sync.aligned;                 SASS: WARPGROUP.ARRIVE
// Orders this warpgroup's earlier register (and shared-memory) accesses before the wgmma that follow: required
// before the first wgmma, and whenever the accumulator or an RS A fragment was touched by ordinary instructions.
// ---------------------------------------------------------------------------------------------------------------
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }

// PTX: wgmma.commit_group.sync.aligned;          (no SASS of its own: it closes the group the wait counts)
// Closes the batch of wgmma issued since the last commit into one "wgmma-group".
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }

// PTX: wgmma.wait_group.sync.aligned N;          SASS: WARPGROUP.DEPBAR.LE gsb0, N
// Blocks until at most N committed groups are pending. N = 0: every accumulator is final and every shared-memory
// operand read. N = 1: the newest group may still run (the usual mainloop: release the *previous* stage's buffers).
template <int N>
__device__ __forceinline__ void wgmma_wait() {
    static_assert(N >= 0 && N <= 7, "wgmma.wait_group: N in 0..7");
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}

// Compiler-only fence on the accumulator (CUTLASS warpgroup_fence_operand): emits nothing, but keeps the compiler
// from moving reads/writes of d[] across a wgmma / wait (the asm above does not name d[] in the wait).
template <int R>
__device__ __forceinline__ void wgmma_fence_operand(float (&d)[R]) {
#pragma unroll
    for (int i = 0; i < R; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

// The same for an RS form's A fragment (bf16 pairs): placed after the wait that retires the wgmma, it keeps a[] alive
// (and its registers unreused) until then — without it the compiler may hand a[]'s registers to other values while
// the tensor core still reads them, since the wgmma asm is a[]'s last visible use.
template <int R>
__device__ __forceinline__ void wgmma_fence_operand(unsigned (&a)[R]) {
#pragma unroll
    for (int i = 0; i < R; ++i) asm volatile("" : "+r"(a[i])::"memory");
}

// ---------------------------------------------------------------------------------------------------------------
// The accumulator operands every wrapper spells out, written once: WGMMA_REGS<R> is the PTX operand list
// "%0, ..., %(R - 1)" of an R-register fragment (R = N / 2: 32, 64, 88, 128 for N = 64, 128, 176, 256), so the
// wrapper's other operands are numbered from R on; WGMMA_D<R>(d) binds them to d[0 .. R - 1], read and written
// ("+f": the tensor core accumulates into them). Macros, not templates: an asm's operand list is fixed text.
// ---------------------------------------------------------------------------------------------------------------
#define WGMMA_REGS_0_31 \
    "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, " \
    "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
#define WGMMA_REGS_32_63 \
    "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, " \
    "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
#define WGMMA_REGS_64_87 \
    "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, " \
    "%80, %81, %82, %83, %84, %85, %86, %87"
#define WGMMA_REGS_88_127 \
    "%88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, " \
    "%104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, " \
    "%120, %121, %122, %123, %124, %125, %126, %127"
#define WGMMA_REGS32 WGMMA_REGS_0_31
#define WGMMA_REGS64 WGMMA_REGS_0_31 ", " WGMMA_REGS_32_63
#define WGMMA_REGS88 WGMMA_REGS64 ", " WGMMA_REGS_64_87
#define WGMMA_REGS128 WGMMA_REGS88 ", " WGMMA_REGS_88_127
#define WGMMA_D_0_31(d) \
    "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), \
    "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), \
    "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), \
    "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
#define WGMMA_D_32_63(d) \
    "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), \
    "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), \
    "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), \
    "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
#define WGMMA_D_64_87(d) \
    "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), \
    "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), \
    "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87])
#define WGMMA_D_88_127(d) \
    "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), \
    "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), \
    "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]), \
    "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), \
    "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
#define WGMMA_D32(d) WGMMA_D_0_31(d)
#define WGMMA_D64(d) WGMMA_D_0_31(d), WGMMA_D_32_63(d)
#define WGMMA_D88(d) WGMMA_D64(d), WGMMA_D_64_87(d)
#define WGMMA_D128(d) WGMMA_D88(d), WGMMA_D_88_127(d)

// The SS form's asm for an R-register fragment, written once: the instruction's shape and types, then the operand
// numbers of desc_a, desc_b and scale_d (R, R + 1, R + 2: an asm's operand numbers are fixed text, so they are
// spelled out), and the immediates after the predicate (bf16: imm-scale-a, imm-scale-b, imm-trans-a, imm-trans-b =
// "1, 1, 0, 0"; e4m3 has no transpose immediates: "1, 1"). p = (scale_d != 0): false starts a fresh sum, d = A B^T.
#define WGMMA_SS_ASM(SHAPE_TYPES, R, DA, DB, P, IMM, d, desc_a, desc_b, scale_d)                                     \
    asm volatile("{\n\t.reg .pred p;\n\tsetp.ne.b32 p, %" #P ", 0;\n\t"                                              \
                 "wgmma.mma_async.sync.aligned." SHAPE_TYPES " {" WGMMA_REGS##R "}, %" #DA ", %" #DB ", p, " IMM   \
                 ";\n\t}"                                                                                           \
                 : WGMMA_D##R(d)                                                                                    \
                 : "l"(desc_a), "l"(desc_b), "r"(scale_d))

// ---------------------------------------------------------------------------------------------------------------
// Accumulator layout of m64nNk16 (f32, N/2 registers per thread), thread t of the warpgroup, warp w = t / 32,
// lane l = t % 32; for j in 0 .. N/8 - 1:
//   d[4j + 0], d[4j + 1]  ->  row 16 w + l / 4,      cols 8 j + 2 (l % 4) + {0, 1}
//   d[4j + 2], d[4j + 3]  ->  row 16 w + l / 4 + 8,  cols 8 j + 2 (l % 4) + {0, 1}
// (each warp owns 16 rows of the 64; the pattern is mma.sync m16n8's C fragment, repeated along N.)
//
// PTX (SS): wgmma.mma_async.sync.aligned.m64nNk16.f32.bf16.bf16 {d...}, desc_a, desc_b, p, 1, 1, 0, 0;
//   d += A(64 x 16, K-major, desc_a) * B(N x 16, K-major, desc_b)^T   (p = scale_d != 0; p false: d = A * B^T)
//   imm-scale-a = imm-scale-b = 1 (no negation), imm-trans-a = imm-trans-b = 0 (both operands K-major).
// SASS: HGMMA.64xNx16.F32.BF16 R.., gdesc[UR..], R.., gsb0
// ---------------------------------------------------------------------------------------------------------------

__device__ __forceinline__ void wgmma_m64n64k16_ss(float (&d)[32], unsigned long long desc_a,
                                                   unsigned long long desc_b, int scale_d) {
    WGMMA_SS_ASM("m64n64k16.f32.bf16.bf16", 32, 32, 33, 34, "1, 1, 0, 0", d, desc_a, desc_b, scale_d);
}

__device__ __forceinline__ void wgmma_m64n128k16_ss(float (&d)[64], unsigned long long desc_a,
                                                    unsigned long long desc_b, int scale_d) {
    WGMMA_SS_ASM("m64n128k16.f32.bf16.bf16", 64, 64, 65, 66, "1, 1, 0, 0", d, desc_a, desc_b, scale_d);
}

__device__ __forceinline__ void wgmma_m64n256k16_ss(float (&d)[128], unsigned long long desc_a,
                                                    unsigned long long desc_b, int scale_d) {
    WGMMA_SS_ASM("m64n256k16.f32.bf16.bf16", 128, 128, 129, 130, "1, 1, 0, 0", d, desc_a, desc_b, scale_d);
}

// m64n176k16, SS: r2_overlap.cu's S = Q K^T over a 176-key tile (88 accumulators per thread; N = 176 = 22
// groups of 8 keys, K-major tile of 176 rows, SBO 1024 B as above). SASS: HGMMA.64x176x16.F32.BF16.
__device__ __forceinline__ void wgmma_m64n176k16_ss(float (&d)[88], unsigned long long desc_a,
                                                    unsigned long long desc_b, int scale_d) {
    WGMMA_SS_ASM("m64n176k16.f32.bf16.bf16", 88, 88, 89, 90, "1, 1, 0, 0", d, desc_a, desc_b, scale_d);
}

// ---------------------------------------------------------------------------------------------------------------
// PTX (RS): wgmma.mma_async.sync.aligned.m64nNk16.f32.bf16.bf16 {d...}, {a0, a1, a2, a3}, desc_b, p, 1, 1, 0;
//   A (64 x 16 bf16) comes from registers: four 32-bit registers per thread, each two bf16 (low half = lower col):
//     a[0] -> row 16 w + l / 4,      cols 2 (l % 4) + {0, 1}
//     a[1] -> row 16 w + l / 4 + 8,  cols 2 (l % 4) + {0, 1}
//     a[2] -> row 16 w + l / 4,      cols 8 + 2 (l % 4) + {0, 1}
//     a[3] -> row 16 w + l / 4 + 8,  cols 8 + 2 (l % 4) + {0, 1}
//   which is the accumulator layout above for columns 16 k .. 16 k + 15: the f32 pairs d[8k + 0..1], d[8k + 2..3],
//   d[8k + 4..5], d[8k + 6..7] packed to bf16x2 are a[0..3] of k-step k (attention feeds P = softmax(S) this way).
//   B as in the SS form (K-major, imm-trans-b = 0). The a[] registers must not be changed before the wait that
//   retires the wgmma, and must be written before the wgmma_fence() that precedes it.
// SASS: HGMMA.64xNx16.F32.BF16 R.., R.., gdesc[UR..], R.., gsb0
// ---------------------------------------------------------------------------------------------------------------
__device__ __forceinline__ void wgmma_m64n64k16_rs(float (&d)[32], const unsigned (&a)[4],
                                                   unsigned long long desc_b, int scale_d) {
    asm volatile(
        "{\n\t.reg .pred p;\n\t"
        "setp.ne.b32 p, %37, 0;\n\t"
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
        "{"
        WGMMA_REGS32
        "}, {%32, %33, %34, %35}, %36, p, 1, 1, 0;\n\t}"
        : WGMMA_D32(d)
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(scale_d));
}

__device__ __forceinline__ void wgmma_m64n128k16_rs(float (&d)[64], const unsigned (&a)[4],
                                                   unsigned long long desc_b, int scale_d) {
    asm volatile(
        "{\n\t.reg .pred p;\n\t"
        "setp.ne.b32 p, %69, 0;\n\t"
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
        "{"
        WGMMA_REGS64
        "}, {%64, %65, %66, %67}, %68, p, 1, 1, 0;\n\t}"
        : WGMMA_D64(d)
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(scale_d));
}

// ---------------------------------------------------------------------------------------------------------------
// The RS form with a transposed (N-major) B — attention's O += P V, V read as it lies (keys x D, row-major).
// PTX: wgmma.mma_async.sync.aligned.m64nNk16.f32.bf16.bf16 {d...}, {a0..a3}, desc_b, p, 1, 1, 1;
//   imm-trans-b = 1: B (16 keys x N) is "N-major" in shared memory — V's rows are keys and its 64-element rows
//   (128 B) run along N. Canonical MN-major SW128 layout (CUTLASS mma_sm90_desc.hpp, in 16-byte units):
//   ((8, n), (8, k)) : ((1, LBO), (8, SBO)) -> 64 N-elements contiguous per 128-byte row, 8 key rows per 1024-byte
//   atom, SBO = 1024 B between 8-key groups, LBO = bytes between 64-column slices of N (the caller's slice stride).
//   These forms always accumulate (scale-d = 1): the caller zeroes d before the first k-step.
// SASS: HGMMA.64xNx16.F32.BF16 R.., R.., gdesc[UR..], R.., gsb0 (the register A operand).
__device__ __forceinline__ unsigned long long wgmma_desc_sw128_mn(unsigned addr, unsigned lbo_bytes) {
    unsigned long long d = wgmma_desc_sw128(addr);                      // start, SBO = 1024, 128B swizzle
    d &= ~(0x3FFFull << 16);
    d |= static_cast<unsigned long long>((lbo_bytes >> 4) & 0x3FFF) << 16;  // LBO: next 64 columns of N
    return d;
}

__device__ __forceinline__ void wgmma_m64n128k16_rs_tb(float (&d)[64], const unsigned (&a)[4],
                                                       unsigned long long desc_b) {
    asm volatile(
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
        "{"
        WGMMA_REGS64
        "}, {%64, %65, %66, %67}, %68, 1, 1, 1, 1;\n"
        : WGMMA_D64(d)
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b));
}

__device__ __forceinline__ void wgmma_m64n64k16_rs_tb(float (&d)[32], const unsigned (&a)[4],
                                                      unsigned long long desc_b) {
    asm volatile(
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
        "{"
        WGMMA_REGS32
        "}, {%32, %33, %34, %35}, %36, 1, 1, 1, 1;\n"
        : WGMMA_D32(d)
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b));
}
