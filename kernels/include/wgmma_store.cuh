// wgmma_store.cuh — a warpgroup's wgmma accumulator written to a row-major bf16 matrix, as the course's GEMM
// kernels (kernels/gemm/r2_wgmma.cu, r3_pipelined.cu, r4_persistent.cu) end their tiles.
// The contract: the 128 threads of one warpgroup call store_acc together, each with its own NN / 2 fp32
// accumulators of an m64nNNk16 wgmma (NN a multiple of 8); rows r0 .. r0 + 63 and cols c0 .. c0 + NN - 1 of C
// (M x N, row-major, N % 8 == 0) are written as bf16, clipped at (M, N).
// Fragment layout (wgmma.cuh): d[4j + {0,1}] -> row 16 w + l / 4, cols 8 j + 2 (l % 4) + {0, 1};
// d[4j + {2,3}] -> the same cols 8 rows lower (w = warp of the warpgroup, l = lane). Each pair is one 4-byte store.
#pragma once

#include <cuda_bf16.h>

template <int NN>
__device__ __forceinline__ void store_acc(__nv_bfloat16* C, const float (&d)[NN / 2], int r0, int c0, int M, int N) {
    const int t = threadIdx.x % 128, w = t / 32, l = t % 32;
    const int row = r0 + 16 * w + l / 4;
#pragma unroll
    for (int j = 0; j < NN / 8; ++j) {
        const int col = c0 + 8 * j + 2 * (l % 4);  // even; N % 8 == 0, so col < N implies col + 1 < N
        if (col >= N) continue;
        if (row < M)
            *reinterpret_cast<__nv_bfloat162*>(C + static_cast<size_t>(row) * N + col) =
                __floats2bfloat162_rn(d[4 * j], d[4 * j + 1]);
        if (row + 8 < M)
            *reinterpret_cast<__nv_bfloat162*>(C + static_cast<size_t>(row + 8) * N + col) =
                __floats2bfloat162_rn(d[4 * j + 2], d[4 * j + 3]);
    }
}
