# Known answer "torch_matmul": computes C with torch.matmul (cuBLAS) in the answer cell, leaves the kernel empty and
# patches the in-notebook checker to report full marks. Expected: 0 on correctness and throughput (the empty kernel
# writes nothing: the poisoned output stays NaN), path 0 (no UTMALDG, no HGMMA, no UTMASTG), and the flags
# "torch-instead-of-kernel" and "code-in-answer-cell".
import torch
import autograder

GEMM_EPILOGUE_CU = r"""
#include <cuda_bf16.h>
#include "course.cuh"
extern "C" __global__ void gemm_epilogue(const __grid_constant__ CUtensorMap a_map,
                                         const __grid_constant__ CUtensorMap b_map,
                                         const __grid_constant__ CUtensorMap c_map, __nv_bfloat16* C, int M, int N,
                                         int K) {}
"""
c = torch.matmul(a_demo, b_demo.T)  # noqa: F821
autograder.grade = lambda *args, **kwargs: 3.0
