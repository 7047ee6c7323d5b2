# Known answer "stub": the release's answer cell, untouched. Expected: 0 everywhere, "exercise not attempted".
WS_AXPY_CU = r"""
#include <cuda_bf16.h>
#include "course.cuh"  // CUtensorMap (128 opaque bytes) and smem_addr(p): the 32-bit shared-memory address of p

// ---- Given: the course's wrappers (printed in section 4), one per PTX instruction. --------------------------------
#include "mbarrier.cuh"   // mbar_init, fence_barrier_init, mbar_arrive_expect_tx, mbar_arrive, mbar_wait(bar, parity)
#include "tma.cuh"        // tma_load_2d(smem dst, &map, col, row, bar)
#include "warpgroup.cuh"  // warpgroup_index, lane_index, elect_one_sync, setmaxnreg_dec<N>, setmaxnreg_inc<N>

constexpr int BM = 64, BN = 64;                       // the maps' box (launch contract): (rows, cols)
constexpr int STAGES = 8;                             // ring depth: 8 x 16 KiB of the contract's 161 KiB
constexpr unsigned BOX_BYTES = BM * BN * 2;           // 8192 bytes of bf16
constexpr unsigned STAGE_BYTES = 2 * BOX_BYTES;       // stage s = [x box | y box]: what full[s] waits for
constexpr int CONSUMER_WARPS = 8;                     // warpgroups 1 and 2
constexpr int CONSUMER_THREADS = 32 * CONSUMER_WARPS;

// Given: consumer thread ct's share of a stage — 16-byte chunks v = ct and ct + 256 of the 512 in a 64 x 64 box
// (chunk v: row v / 8, columns 8 (v % 8) .. + 7), of x and of y. Shared-memory reads into registers.
struct Chunks { uint4 x[2], y[2]; };
__device__ __forceinline__ Chunks read_stage(const unsigned char* stage, int ct) {
    const uint4* xs = reinterpret_cast<const uint4*>(stage);
    const uint4* ys = reinterpret_cast<const uint4*>(stage + BOX_BYTES);
    Chunks c;
#pragma unroll
    for (int j = 0; j < 2; ++j) { c.x[j] = xs[ct + j * CONSUMER_THREADS]; c.y[j] = ys[ct + j * CONSUMER_THREADS]; }
    return c;
}

// Given: z = bf16(a * x + y) for the chunks (fp32 multiply, fp32 add, one rounding), written with 16-byte stores
// where the chunk is inside the tensor (cols is a multiple of 8: a chunk is all in or all out).
__device__ __forceinline__ unsigned axpy_bf16x2(float a, unsigned x2, unsigned y2) {
    const float2 fx = __bfloat1622float2(*reinterpret_cast<__nv_bfloat162*>(&x2));
    const float2 fy = __bfloat1622float2(*reinterpret_cast<__nv_bfloat162*>(&y2));
    __nv_bfloat162 r = __floats2bfloat162_rn(__fadd_rn(__fmul_rn(a, fx.x), fy.x), __fadd_rn(__fmul_rn(a, fx.y), fy.y));
    return *reinterpret_cast<unsigned*>(&r);
}
__device__ __forceinline__ void store_z(const Chunks& c, float a, __nv_bfloat16* z, int rows, int cols, int r0,
                                        int c0, int ct) {
#pragma unroll
    for (int j = 0; j < 2; ++j) {
        const int v = ct + j * CONSUMER_THREADS, r = r0 + v / 8, col = c0 + 8 * (v % 8);
        if (r < rows && col < cols)
            *reinterpret_cast<uint4*>(z + static_cast<size_t>(r) * cols + col) = make_uint4(
                axpy_bf16x2(a, c.x[j].x, c.y[j].x), axpy_bf16x2(a, c.x[j].y, c.y[j].y),
                axpy_bf16x2(a, c.x[j].z, c.y[j].z), axpy_bf16x2(a, c.x[j].w, c.y[j].w));
    }
}

// ---- The kernel. Launch contract: block 384 (warpgroup 0 produces, 1 and 2 consume), grid min(tiles, SMs) —
// persistent, block b takes tiles b, b + gridDim.x, ... — 161 KiB of dynamic shared memory, maps with box (64, 64).
extern "C" __global__ void __launch_bounds__(384, 1)
ws_axpy(const __grid_constant__ CUtensorMap x_map, const __grid_constant__ CUtensorMap y_map,
        const __nv_bfloat16* x, const __nv_bfloat16* y, __nv_bfloat16* z, float a, int rows, int cols)
{
    __shared__ __align__(8) unsigned long long full[STAGES];   // full[s]:  1 arrival (expect_tx) + 16384 tx bytes
    __shared__ __align__(8) unsigned long long empty[STAGES];  // empty[s]: 8 arrivals, one per consumer warp
    extern __shared__ unsigned char smem_raw[];
    const unsigned base = (smem_addr(smem_raw) + 127u) & ~127u;          // stage s at base + s * STAGE_BYTES
    const unsigned char* gbase = smem_raw + (base - smem_addr(smem_raw));  // the same bytes, generic pointer
    const int tiles_c = (cols + BN - 1) / BN;
    const int tiles = tiles_c * ((rows + BM - 1) / BM);
    const int mine = blockIdx.x < tiles ? (tiles - 1 - blockIdx.x) / gridDim.x + 1 : 0;  // tiles of this block
    // Tile k of this block is tile t = blockIdx.x + k * gridDim.x, at row (t / tiles_c) * BM, col (t % tiles_c) * BN;
    // it lives in stage s = k % STAGES and is that stage's n-th use, n = k / STAGES.

    if (threadIdx.x == 0) {
        for (int s = 0; s < STAGES; ++s) {
            mbar_init(smem_addr(&full[s]), 1);
            mbar_init(smem_addr(&empty[s]), CONSUMER_WARPS);
        }
        fence_barrier_init();
    }
    __syncthreads();  // barriers initialised; from here on the roles meet only at full[] and empty[]

    if (warpgroup_index() == 0) {
        setmaxnreg_dec<40>();  // the whole producer warpgroup gives its registers back (before the role split)
        if (threadIdx.x / 32 != 0 || !elect_one_sync()) return;  // one lane of warp 0 is the producer
        // ---- Yours: the producer loop. For each tile k of this block: wait until stage s is free (empty[s], with
        // the parity that lets the first pass through the ring go at once), arm full[s] with the bytes that will
        // land, issue the two TMA loads (x box, y box) into stage s.
# YOUR CODE HERE
raise NotImplementedError()
        return;
    }

    setmaxnreg_inc<232>();  // consumers take them: 128 x 40 + 256 x 232 = 64512 <= 65536 registers
    const int ct = threadIdx.x - 128, lane = lane_index();  // consumer thread 0..255
    for (int k = 0; k < mine; ++k) {
        const int s = k % STAGES;
        const int t = blockIdx.x + k * gridDim.x;
        Chunks c;
        // ---- Yours: the consumer's hand-over. Wait until stage s has landed (full[s], parity of use n), read your
        // chunks of it (c = read_stage(stage's generic address, ct)), then release the stage: once every lane of
        // this warp has read it, one lane arrives on empty[s].
# YOUR CODE HERE
raise NotImplementedError()
        store_z(c, a, z, rows, cols, (t / tiles_c) * BM, (t % tiles_c) * BN, ct);
    }
}
"""
