# Known answer "stub": the release's answer cell, untouched. Expected: 0 everywhere, "exercise not attempted".
SWIZZLE_CU = r"""
#include <cuda_bf16.h>
#include "course.cuh"    // CUtensorMap (128 opaque bytes) and smem_addr(p): the 32-bit shared-memory address of p

// ---- Given: the course's wrappers (printed in sections 4 and 5), one per instruction. ----------------------------
#include "mbarrier.cuh"  // mbar_init, fence_barrier_init, mbar_arrive_expect_tx, mbar_wait(bar, parity)
#include "tma.cuh"       // tma_load_2d, tma_store_2d, bulk_commit, bulk_wait_read<N>, bulk_wait<N>, fence_proxy_async
#include "swizzle.cuh"   // swizzle_128b / _64b / _32b(byte offset), ldsm_x4_trans, stsm_x4

// ---- Yours: the kernel. Launch contract: block 128, persistent grid min(tiles, 2 x SMs), 65 KiB of dynamic shared
// memory; x_map / y_map: boxes of (64 rows, 64 cols) bf16 = 64 rows x 128 B, CU_TENSOR_MAP_SWIZZLE_128B. -----------
extern "C" __global__ void __launch_bounds__(128)
swizzle_transpose(const __grid_constant__ CUtensorMap x_map, const __grid_constant__ CUtensorMap y_map,
                  const __nv_bfloat16* x, __nv_bfloat16* y, int rows, int cols)
{
# YOUR CODE HERE
raise NotImplementedError()
}
"""
