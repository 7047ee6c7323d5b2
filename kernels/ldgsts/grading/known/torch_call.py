# Known answer "torch_call": blurs with torch in the answer cell, leaves the kernel empty and patches the
# in-notebook checker to report full marks. Expected: 0 on correctness and throughput (the empty kernel writes
# nothing), path 0 (no LDGSTS), and the flag "torch-instead-of-kernel".
import torch
import autograder

BLUR2D_BF16_CU = r"""
#include <cuda_bf16.h>
extern "C" __global__ void blur2d_bf16(const __nv_bfloat16* x, const float* w, float* y, int H, int W, int ld) {}
"""
y = torch.nn.functional.conv2d(x_demo.float()[None, None], w_demo.view(1, 1, 3, 3), padding=1)[0, 0]  # noqa: F821
autograder.grade = lambda *args, **kwargs: 3.0
