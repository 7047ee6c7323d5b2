# Known answer "side_stream": the kernel is launched on a stream of its own, so CUDA events recorded on the timed
# stream see nothing, and the in-notebook launcher is patched to do so for every later launch. A 2-byte-load kernel
# that cannot reach the bar would then look instant. The grader never runs this cell: it reads ROW_BIAS_CU as data
# and launches it on its own timed stream (and its timer's wall-clock check raises on work off that stream; the GPU
# check proves it on the H100). Expected: graded as the kernel it is — correct (3), no 128-bit loads (path 0), too
# slow for the bar (throughput 0) — and the flag "torch-instead-of-kernel" for the code in the answer cell.
import torch
import kernels.launch

ROW_BIAS_CU = r"""
#include <cuda_bf16.h>
extern "C" __global__ void row_bias(const __nv_bfloat16* __restrict__ x, const __nv_bfloat16* __restrict__ bias,
                                    __nv_bfloat16* __restrict__ y, long long n, int cols)
{
    const long long i0 = ((long long)blockIdx.x * blockDim.x + threadIdx.x) * 8;
    for (long long i = i0; i < i0 + 8 && i < n; ++i)  // LDG.E.U16: one bf16 at a time
        y[i] = __float2bfloat16(__bfloat162float(x[i]) + __bfloat162float(bias[i % cols]));
}
"""
_side = torch.cuda.Stream()
_launch = kernels.launch.launch


def _launch_on_side_stream(*args, **kwargs):
    with torch.cuda.stream(_side):  # the timer's events sit on the current stream: they time an empty interval
        _launch(*args, **kwargs)


kernels.launch.launch = _launch_on_side_stream
