# Known answer "stub": the release's answer cell, untouched. Expected: 0 everywhere, "exercise not attempted".
TMA_ADD_CU = r"""
#include <cuda_bf16.h>
#include "course.cuh"  // CUtensorMap (128 opaque bytes) and smem_addr(p): the 32-bit shared-memory address of p

// ---- Given: the course's wrappers of today's PTX (printed in section 4), one per instruction. ----------------------
#include "mbarrier.cuh"  // mbar_init, fence_barrier_init, mbar_arrive_expect_tx, mbar_arrive, mbar_wait(bar, parity)
#include "tma.cuh"       // tma_load_2d, tma_store_2d, bulk_commit, bulk_wait_read<N>, bulk_wait<N>, fence_proxy_async
#include "bf16x2.cuh"    // add_bf16x2(a, b): two bf16 lanes of a 32-bit word added in fp32, one rounding

// ---- Yours: the kernel. Launch contract: block 128, persistent grid min(boxes, 2 x SMs), 97 KiB of dynamic
// shared memory, maps with box (64 rows, 64 cols) of bf16 (8 KiB). ------------------------------------------------
extern "C" __global__ void __launch_bounds__(128)
tma_add(const __grid_constant__ CUtensorMap x_map, const __grid_constant__ CUtensorMap y_map,
        const __grid_constant__ CUtensorMap z_map, const __nv_bfloat16* x, const __nv_bfloat16* y,
        __nv_bfloat16* z, int rows, int cols)
{
    # YOUR CODE HERE
    raise NotImplementedError()
}
"""
