// Known answer "trap": vectorized like the solution, but a thread whose 8 elements straddle a row end executes
// `trap` (a device-side abort): the launch fails with an unspecified launch failure and the CUDA context is lost.
// Expected: path 2 (the SASS is fine), correctness 0, throughput 0, harness status "error" on the GPU; the batch
// goes on (the harness process dies alone).
#include <cuda_bf16.h>

extern "C" __global__ void row_bias(const __nv_bfloat16* __restrict__ x, const __nv_bfloat16* __restrict__ bias,
                                    __nv_bfloat16* __restrict__ y, long long n, int cols)
{
    const long long i0 = ((long long)blockIdx.x * blockDim.x + threadIdx.x) * 8;
    if (i0 >= n) return;
    int c = (int)(i0 % cols);
    if (c + 8 > cols) __trap();
    uint4 v = *reinterpret_cast<const uint4*>(x + i0);
    __nv_bfloat162* h = reinterpret_cast<__nv_bfloat162*>(&v);
#pragma unroll
    for (int k = 0; k < 4; ++k) {
        float2 f = __bfloat1622float2(h[k]);
        f.x += __bfloat162float(bias[c]); ++c;
        f.y += __bfloat162float(bias[c]); ++c;
        h[k] = __floats2bfloat162_rn(f.x, f.y);
    }
    *reinterpret_cast<uint4*>(y + i0) = v;
}
