// Known answer "plain_loads": correct, but x is read with plain 16-byte global loads (LDG.E.128) from the contract's
// pointer into a shared-memory tile laid out as the TMA's 128B swizzle would lay it out; the rest (ldmatrix.trans /
// stmatrix with the swizzled index, fence, TMA store) as the course solution, one tile at a time, nothing in flight
// across tiles. Expected: correctness full; path 0 (no UTMALDG, and LDG is forbidden in swizzle_transpose; on the GPU
// the loads, not the TMA, carry the bytes read); throughput 0: with 8 KiB of loads in flight per block and no overlap
// of loading and storing it ran at 0.48 x the copy ceiling on an H200 (kernels/swizzle/fit_run_h200.json; the bar is
// 0.75 x), not modelled (kernels/swizzle/model.py).
#include <cuda_bf16.h>
#include "course.cuh"
#include "mbarrier.cuh"
#include "tma.cuh"
#include "swizzle.cuh"

extern "C" __global__ void __launch_bounds__(128)
swizzle_transpose(const __grid_constant__ CUtensorMap x_map, const __grid_constant__ CUtensorMap y_map,
                  const __nv_bfloat16* x, __nv_bfloat16* y, int rows, int cols)
{
    constexpr int T = 64;
    constexpr unsigned TILE_BYTES = T * T * sizeof(__nv_bfloat16);
    extern __shared__ unsigned char smem_raw[];
    const unsigned base = (smem_addr(smem_raw) + 1023u) & ~1023u;
    unsigned char* gbase = smem_raw + (base - smem_addr(smem_raw));  // the same bytes as a generic pointer
    const unsigned xt = base, yt = base + TILE_BYTES;
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, q = lane & 7, m = lane >> 3;
    const int tiles_c = (cols + T - 1) / T;
    const int tiles = tiles_c * ((rows + T - 1) / T);

    for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
        const int r0 = (t / tiles_c) * T, c0 = (t % tiles_c) * T;
        // Plain loads: 512 chunks of 16 bytes, 4 per thread, zeros past the edges (cols is a multiple of 8: a chunk
        // is wholly inside or wholly outside), stored where the TMA's 128B swizzle would have put them.
        for (int u = 0; u < 4; ++u) {
            const int v = tid + 128 * u, r = v >> 3, j = v & 7;
            uint4 val = make_uint4(0u, 0u, 0u, 0u);
            if (r0 + r < rows && c0 + 8 * j < cols)
                val = *reinterpret_cast<const uint4*>(x + (long long)(r0 + r) * cols + c0 + 8 * j);
            *reinterpret_cast<uint4*>(gbase + swizzle_128b(r * 128 + j * 16)) = val;
        }
        __syncthreads();
        for (int it = 0; it < 4; ++it) {
            const int b = (warp * 4 + it) * 4 + m, i = b >> 3, j = b & 7;
            unsigned v[4];
            ldsm_x4_trans(v, xt + swizzle_128b((8 * i + q) * 128 + j * 16));
            stsm_x4(yt + swizzle_128b((8 * j + q) * 128 + i * 16), v);
        }
        fence_proxy_async();
        __syncthreads();
        if (tid == 0) {
            tma_store_2d(&y_map, r0, c0, yt);
            bulk_commit();
            bulk_wait_read<0>();  // the y tile is rewritten by the next iteration
        }
        __syncthreads();
    }
    if (tid == 0) bulk_wait<0>();
}
