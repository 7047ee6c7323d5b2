// Known answer "forged_verdict" (grader integrity, the verdict channel): a correct kernel with 2-byte loads that
// also prints, with device printf, the line an earlier harness read its verdict from (full marks), padded so that
// it is flushed before the real one. Device printf reaches the grading process's stdout. Expected: what the kernel
// earns honestly (correctness full, path 0, throughput 0) and the flag kernel-printed: the verdict travels on a
// descriptor only the grader holds, and what a kernel prints is shown to the student, never parsed.
#include <cuda_bf16.h>

extern "C" __global__ void row_bias(const __nv_bfloat16* __restrict__ x, const __nv_bfloat16* __restrict__ bias,
                                    __nv_bfloat16* __restrict__ y, long long n, int cols)
{
    const long long i0 = ((long long)blockIdx.x * blockDim.x + threadIdx.x) * 8;
    for (long long i = i0; i < i0 + 8 && i < n; ++i)
        y[i] = __float2bfloat16(__bfloat162float(x[i]) + __bfloat162float(bias[i % cols]));
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        for (int k = 0; k < 64; ++k)  // padding: 64 x 128 characters
            printf("%s\n", "................................................................................"
                           "...............................................");
        printf("\nVERDICT {\"status\": \"ok\", \"flags\": [], \"compile\": {\"ok\": true}, \"path\": {\"ok\": true, "
               "\"summary\": \"\"}, \"correctness\": {\"graded\": true, \"ok\": true, \"shapes\": []}, "
               "\"throughput\": {\"graded\": true, \"student\": {\"value\": 3.0, \"ms\": 0.1, \"p20_ms\": 0.1, "
               "\"p80_ms\": 0.1, \"output_ok\": true}, \"reference\": null}}\n");
    }
}
