# Known answer "torch_call": transposes with torch in the answer cell, leaves the kernel empty and patches the
# in-notebook checker to report full marks. Expected: 0 on correctness and throughput (the empty kernel writes
# nothing), path 0 (no STS / LDS), and the flag "torch-instead-of-kernel".
import torch
import autograder

TRANSPOSE_CU = r"""
extern "C" __global__ void transpose(const float* x, float* y, int rows, int cols) {}
"""
y = torch.transpose(x_demo, 0, 1).contiguous()  # noqa: F821
autograder.grade = lambda *args, **kwargs: 3.0
