// Known answer "off_by_one": vectorized like the solution, but the scalar tail stops one element short.
// Expected: correctness 0 (the last element of every tensor with n % 8 != 0 stays unwritten); path full;
// throughput 0 (a kernel that is not correct is not timed).
#include <cuda_bf16.h>

// Launch contract: block = 256, grid = ceil(n / 2048); thread t owns elements [8t, 8t + 8) of the flat tensor.
extern "C" __global__ void row_bias(const __nv_bfloat16* __restrict__ x, const __nv_bfloat16* __restrict__ bias,
                                    __nv_bfloat16* __restrict__ y, long long n, int cols)
{
    const long long i0 = ((long long)blockIdx.x * blockDim.x + threadIdx.x) * 8;
    if (i0 >= n) return;
    int c = (int)(i0 % cols);  // column of the first element; it wraps to 0 at each row end
    if (i0 + 8 <= n) {
        // One 16-byte load and one 16-byte store per thread (LDG.E.128 / STG.E.128): a warp moves 512
        // contiguous bytes each way. x + i0 is 16-byte aligned because i0 is a multiple of 8 bf16.
        uint4 v = *reinterpret_cast<const uint4*>(x + i0);
        __nv_bfloat162* h = reinterpret_cast<__nv_bfloat162*>(&v);
#pragma unroll
        for (int k = 0; k < 4; ++k) {
            float2 f = __bfloat1622float2(h[k]);
            f.x += __bfloat162float(bias[c]); c = (c + 1 == cols) ? 0 : c + 1;
            f.y += __bfloat162float(bias[c]); c = (c + 1 == cols) ? 0 : c + 1;
            h[k] = __floats2bfloat162_rn(f.x, f.y);  // one rounding to bf16, as the reference
        }
        *reinterpret_cast<uint4*>(y + i0) = v;
    } else {
        // The last thread may own fewer than 8 elements: scalar tail.
        for (long long i = i0; i < n - 1; ++i) {
            y[i] = __float2bfloat16(__bfloat162float(x[i]) + __bfloat162float(bias[c]));
            c = (c + 1 == cols) ? 0 : c + 1;
        }
    }
}
