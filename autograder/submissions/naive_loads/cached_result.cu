// Known answer "cached_result": a cheat that computes the right answer on its first launch only and, on every later
// launch, returns at once (a __device__ flag remembers), leaving whatever the output buffer held. Fast, and right
// exactly once. Expected: correctness 0 (fresh inputs on the second run expose it), path 2, throughput 0, and the
// flag "inconsistent-results" on the GPU.
#include <cuda_bf16.h>

__device__ int computed_once = 0;

extern "C" __global__ void row_bias(const __nv_bfloat16* __restrict__ x, const __nv_bfloat16* __restrict__ bias,
                                    __nv_bfloat16* __restrict__ y, long long n, int cols)
{
    if (computed_once) return;  // "cached": skip the work
    const long long i0 = ((long long)blockIdx.x * blockDim.x + threadIdx.x) * 8;
    if (i0 < n) {
        int c = (int)(i0 % cols);
        if (i0 + 8 <= n) {
            uint4 v = *reinterpret_cast<const uint4*>(x + i0);
            __nv_bfloat162* h = reinterpret_cast<__nv_bfloat162*>(&v);
#pragma unroll
            for (int k = 0; k < 4; ++k) {
                float2 f = __bfloat1622float2(h[k]);
                f.x += __bfloat162float(bias[c]); c = (c + 1 == cols) ? 0 : c + 1;
                f.y += __bfloat162float(bias[c]); c = (c + 1 == cols) ? 0 : c + 1;
                h[k] = __floats2bfloat162_rn(f.x, f.y);
            }
            *reinterpret_cast<uint4*>(y + i0) = v;
        } else {
            for (long long i = i0; i < n; ++i) {
                y[i] = __float2bfloat16(__bfloat162float(x[i]) + __bfloat162float(bias[c]));
                c = (c + 1 == cols) ? 0 : c + 1;
            }
        }
    }
    if (blockIdx.x == gridDim.x - 1 && threadIdx.x == 0) computed_once = 1;  // later launches skip
}
