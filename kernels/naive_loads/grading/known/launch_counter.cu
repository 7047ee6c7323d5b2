// Known answer "launch_counter" (grader integrity, timing): a correct kernel with 2-byte loads that counts its own
// launches in __device__ variables and, from its 31st launch on, does the work on one launch in twenty only: an
// earlier harness checked the correctness runs and the last output, at fixed launch counts, and timed the lazy
// launches. Expected: correctness full (every correctness run is among the first 30 launches), path 0, throughput
// 0, flag stale-output: every launch at the bench shape is verified, and the counts are drawn from the secret seed.
#include <cuda_bf16.h>

__device__ unsigned int blocks_done = 0;  // blocks of the running launch that finished
__device__ unsigned int launch_no = 0;    // launches finished: moves only when the last block of a launch ends

extern "C" __global__ void row_bias(const __nv_bfloat16* __restrict__ x, const __nv_bfloat16* __restrict__ bias,
                                    __nv_bfloat16* __restrict__ y, long long n, int cols)
{
    const unsigned int k = *(volatile unsigned int*)&launch_no;
    const bool lazy = k >= 30 && k % 20 != 0;
    if (!lazy) {
        const long long i0 = ((long long)blockIdx.x * blockDim.x + threadIdx.x) * 8;
        for (long long i = i0; i < i0 + 8 && i < n; ++i)
            y[i] = __float2bfloat16(__bfloat162float(x[i]) + __bfloat162float(bias[i % cols]));
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        __threadfence();
        if (atomicAdd(&blocks_done, 1u) == gridDim.x - 1) {  // the last block of this launch
            blocks_done = 0;
            __threadfence();
            atomicAdd(&launch_no, 1u);
        }
    }
}
