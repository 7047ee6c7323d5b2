// softmax.cuh — the two primitives of an online softmax over bf16 attention tiles (week 2 day 5's kernels).
#pragma once

#include <cuda_bf16.h>

// PTX: ex2.approx.ftz.f32 (SASS MUFU.EX2): 2^x, the softmax's exponential in base 2 (scores are pre-scaled by
// log2(e) / sqrt(D), so exp(x / sqrt(D) - m) = 2^(x * scale_log2 - m2)). ex2(-inf) = +0.
__device__ __forceinline__ float fast_exp2(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}

// Two fp32 values -> one 32-bit word of two bf16 (round to nearest even), the lower column in the low 16 bits: the
// A-fragment layout an RS-form WGMMA reads P from.
__device__ __forceinline__ unsigned pack_bf16(float lo, float hi) {
    __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<unsigned*>(&v);
}
