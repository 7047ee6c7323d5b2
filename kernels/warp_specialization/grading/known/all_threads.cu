// Known answer "all_threads": correct, but not warp-specialized — day 5's shape under this exercise's contract. All
// 12 warps read every stage; thread 0 also issues the loads, after the block-wide __syncthreads() that says the
// stage is free; one barrier per stage (full), no empty ring, no setmaxnreg. Every byte read still arrives by TMA.
// Expected: correctness 3, path 0 (the SASS has no USETMAXREG: the spec's static rule for a specialized block),
// throughput by the H100's measurement (not graded elsewhere).
#include <cuda_bf16.h>
#include "course.cuh"
#include "mbarrier.cuh"
#include "tma.cuh"

constexpr int BM = 64, BN = 64;
constexpr int STAGES = 8;
constexpr unsigned BOX_BYTES = BM * BN * 2;
constexpr unsigned STAGE_BYTES = 2 * BOX_BYTES;
constexpr int THREADS = 384;

__device__ __forceinline__ unsigned axpy_bf16x2(float a, unsigned x2, unsigned y2) {
    const float2 fx = __bfloat1622float2(*reinterpret_cast<__nv_bfloat162*>(&x2));
    const float2 fy = __bfloat1622float2(*reinterpret_cast<__nv_bfloat162*>(&y2));
    __nv_bfloat162 r = __floats2bfloat162_rn(__fadd_rn(__fmul_rn(a, fx.x), fy.x), __fadd_rn(__fmul_rn(a, fx.y), fy.y));
    return *reinterpret_cast<unsigned*>(&r);
}

extern "C" __global__ void __launch_bounds__(384, 1)
ws_axpy(const __grid_constant__ CUtensorMap x_map, const __grid_constant__ CUtensorMap y_map,
        const __nv_bfloat16* x, const __nv_bfloat16* y, __nv_bfloat16* z, float a, int rows, int cols)
{
    __shared__ __align__(8) unsigned long long full[STAGES];
    extern __shared__ unsigned char smem_raw[];
    const unsigned base = (smem_addr(smem_raw) + 127u) & ~127u;
    const unsigned char* gbase = smem_raw + (base - smem_addr(smem_raw));
    const int tiles_c = (cols + BN - 1) / BN;
    const int tiles = tiles_c * ((rows + BM - 1) / BM);
    const int mine = blockIdx.x < tiles ? (tiles - 1 - blockIdx.x) / gridDim.x + 1 : 0;
    const int tid = threadIdx.x;

    if (tid == 0) {
        for (int s = 0; s < STAGES; ++s) mbar_init(smem_addr(&full[s]), 1);
        fence_barrier_init();
    }
    __syncthreads();
    auto issue = [&](int k) {
        const int s = k % STAGES, t = blockIdx.x + k * gridDim.x;
        const unsigned bar = smem_addr(&full[s]);
        mbar_arrive_expect_tx(bar, STAGE_BYTES);
        tma_load_2d(base + s * STAGE_BYTES, &x_map, (t % tiles_c) * BN, (t / tiles_c) * BM, bar);
        tma_load_2d(base + s * STAGE_BYTES + BOX_BYTES, &y_map, (t % tiles_c) * BN, (t / tiles_c) * BM, bar);
    };
    if (tid == 0)
        for (int k = 0; k < STAGES && k < mine; ++k) issue(k);

    for (int k = 0; k < mine; ++k) {
        const int s = k % STAGES, t = blockIdx.x + k * gridDim.x;
        const int r0 = (t / tiles_c) * BM, c0 = (t % tiles_c) * BN;
        mbar_wait(smem_addr(&full[s]), (k / STAGES) & 1);
        const uint4* xs = reinterpret_cast<const uint4*>(gbase + s * STAGE_BYTES);
        const uint4* ys = reinterpret_cast<const uint4*>(gbase + s * STAGE_BYTES + BOX_BYTES);
        for (int v = tid; v < 512; v += THREADS) {  // 512 16-byte chunks per box: row v / 8, cols 8 (v % 8) ..
            const uint4 cx = xs[v], cy = ys[v];
            const int r = r0 + v / 8, col = c0 + 8 * (v % 8);
            if (r < rows && col < cols)
                *reinterpret_cast<uint4*>(z + static_cast<size_t>(r) * cols + col) = make_uint4(
                    axpy_bf16x2(a, cx.x, cy.x), axpy_bf16x2(a, cx.y, cy.y), axpy_bf16x2(a, cx.z, cy.z),
                    axpy_bf16x2(a, cx.w, cy.w));
        }
        __syncthreads();  // every thread has read stage s ...
        if (tid == 0 && k + STAGES < mine) issue(k + STAGES);  // ... so thread 0 refills it
    }
}
