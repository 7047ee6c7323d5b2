# Known answer "stub": the release's answer cell, untouched. Expected: 0 everywhere, "exercise not attempted".
SMOOTH_BF16_CU = r"""
#include <cuda_bf16.h>
#include "cp_async.cuh"  // cp_async_cg16_zfill, cp_async_commit, cp_async_wait<N> (section 4 prints them)

extern "C" __global__ void smooth_bf16(const __nv_bfloat16* __restrict__ x, const float* __restrict__ w,
                                       float* __restrict__ y, long long n)
{
# YOUR CODE HERE
raise NotImplementedError()
}
"""
