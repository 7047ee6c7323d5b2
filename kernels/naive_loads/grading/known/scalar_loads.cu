// Known answer "scalar_loads": correct, but each thread loads its 8 elements one bf16 at a time (LDG.E.U16).
// Expected: correctness full; path 0 (no LDG.E.128 in row_bias); throughput 0 (2-byte loads cannot reach the bar).
#include <cuda_bf16.h>

extern "C" __global__ void row_bias(const __nv_bfloat16* __restrict__ x, const __nv_bfloat16* __restrict__ bias,
                                    __nv_bfloat16* __restrict__ y, long long n, int cols)
{
    const long long i0 = ((long long)blockIdx.x * blockDim.x + threadIdx.x) * 8;
    for (long long i = i0; i < i0 + 8 && i < n; ++i)
        y[i] = __float2bfloat16(__bfloat162float(x[i]) + __bfloat162float(bias[i % cols]));
}
