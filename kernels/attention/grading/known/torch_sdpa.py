# Known answer "torch_sdpa": computes the attention with torch's SDPA in the answer cell, leaves the kernel empty and
# patches the in-notebook checker to report full marks. Expected: 0 on correctness and throughput (the empty kernel
# writes nothing: the poisoned output stays NaN), path 0 (no UTMALDG, no HGMMA), and the flag
# "torch-instead-of-kernel".
import torch
import autograder

ATTN_KV_CU = r"""
#include <cuda_bf16.h>
#include "course.cuh"
extern "C" __global__ void attn_kv(const __grid_constant__ CUtensorMap q_map, const __grid_constant__ CUtensorMap k_map,
                                   const __grid_constant__ CUtensorMap v_map, const __nv_bfloat16* q,
                                   const __nv_bfloat16* k, const __nv_bfloat16* v, __nv_bfloat16* out, int seq,
                                   int causal) {}
"""
o = torch.nn.functional.scaled_dot_product_attention(q_demo, k_demo, v_demo)  # noqa: F821
autograder.grade = lambda *args, **kwargs: 3.0
