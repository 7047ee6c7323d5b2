// bf16x2.cuh — arithmetic on two bf16 lanes packed in one 32-bit word, as the elementwise exercises hand it to their
// kernels (day 5's tma_add and week 2 day 3's bcast_add read and write 16-byte chunks: four such words).
// The contract: each lane is widened to fp32, added in fp32 and rounded once to bf16 (round to nearest even), so
// the result is the bf16 rounding of the exact sum (what torch computes for x + y in bf16).
#pragma once

#include <cuda_bf16.h>

__device__ __forceinline__ unsigned add_bf16x2(unsigned a, unsigned b) {  // two bf16 lanes: fp32 add, one rounding
    float2 fa = __bfloat1622float2(*reinterpret_cast<__nv_bfloat162*>(&a));
    float2 fb = __bfloat1622float2(*reinterpret_cast<__nv_bfloat162*>(&b));
    __nv_bfloat162 r = __floats2bfloat162_rn(fa.x + fb.x, fa.y + fb.y);
    return *reinterpret_cast<unsigned*>(&r);
}
