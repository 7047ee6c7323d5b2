// Known answer "correct": the course solution of day 5's tma_add (the solutions notebook's answer cell, without the
// nbgrader markers; tests/test_tma.py holds them equal). Persistent grid, 5-stage ring of (x, y) boxes loaded by
// TMA on one mbarrier per stage, threads add in shared memory, fence.proxy.async, TMA store from 2 z buffers.
// Expected: full points — correctness, path (UTMALDG + UTMASTG + the proxy fence, no LDG/STG), throughput.
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
    constexpr int BM = 64, BN = 64;           // the maps' box (fixed by the launch contract)
    constexpr int STAGES = 5;                 // input ring: up to 5 (x, y) box pairs in flight per block
    constexpr int NOUT = 2;                   // z buffers: one being stored while the threads fill the other
    constexpr int THREADS = 128;
    // (BM, BN, STAGES) = (64, 64, 5)
    constexpr unsigned BOX_BYTES = BM * BN * sizeof(__nv_bfloat16);  // 8192
    constexpr unsigned STAGE_BYTES = 2 * BOX_BYTES;                   // x box + y box
    __shared__ __align__(8) unsigned long long full[STAGES];          // full[s]: "stage s has landed"
    extern __shared__ unsigned char smem_raw[];

    // Dynamic shared memory, base aligned to 128 bytes for TMA: [STAGES x (x box, y box)] [NOUT x z box]
    // = 5 x 16 KiB + 2 x 8 KiB = 96 KiB, + up to 127 bytes of alignment: within the contract's 97 KiB.
    const unsigned raw = smem_addr(smem_raw);
    const unsigned base = (raw + 127u) & ~127u;
    unsigned char* gbase = smem_raw + (base - raw);  // the same bytes as a generic pointer, for the threads
    const unsigned out_base = base + STAGES * STAGE_BYTES;

    const int tid = threadIdx.x;
    const int boxes_c = (cols + BN - 1) / BN;
    const int boxes = boxes_c * ((rows + BM - 1) / BM);
    const int mine = blockIdx.x < boxes ? (boxes - 1 - blockIdx.x) / gridDim.x + 1 : 0;  // boxes of this block

    if (tid == 0) {
        for (int s = 0; s < STAGES; ++s) mbar_init(smem_addr(&full[s]), 1);  // 1 arrival: the producer's
        fence_barrier_init();
    }
    __syncthreads();  // barriers initialised before anyone waits on them

    // Producer (thread 0 only): box k of this block goes to stage k % STAGES.
    auto issue = [&](int k) {
        const int t = blockIdx.x + k * gridDim.x;
        const int s = k % STAGES;
        const unsigned bar = smem_addr(&full[s]);
        // One elected thread arms the barrier with the bytes the TMA will deliver; the phase completes when
        // arrivals (1) and transaction bytes (2 boxes x 64 x 64 x 2 B = 16384 — whole boxes even at the edges:
        // out-of-bounds elements are zero-filled and counted) both reach zero.
        mbar_arrive_expect_tx(bar, STAGE_BYTES);
        const int c0 = (t % boxes_c) * BN, c1 = (t / boxes_c) * BM;
        tma_load_2d(base + s * STAGE_BYTES, &x_map, c0, c1, bar);
        tma_load_2d(base + s * STAGE_BYTES + BOX_BYTES, &y_map, c0, c1, bar);
    };
    if (tid == 0)
        for (int k = 0; k < STAGES && k < mine; ++k) issue(k);  // prologue: fill the ring

    for (int k = 0; k < mine; ++k) {
        const int t = blockIdx.x + k * gridDim.x;
        const int s = k % STAGES;
        const int o = k % NOUT;
        // Box k is the n-th use of stage s (n = k / STAGES): wait for the barrier phase of parity n & 1.
        mbar_wait(smem_addr(&full[s]), (k / STAGES) & 1);

        const uint4* xs = reinterpret_cast<const uint4*>(gbase + s * STAGE_BYTES);
        const uint4* ys = reinterpret_cast<const uint4*>(gbase + s * STAGE_BYTES + BOX_BYTES);
        uint4* zs = reinterpret_cast<uint4*>(gbase + STAGES * STAGE_BYTES + o * BOX_BYTES);
#pragma unroll
        for (int j = 0; j < (int)(BOX_BYTES / 16) / THREADS; ++j) {  // 4 x 16 bytes per thread, conflict-free
            const int v = tid + j * THREADS;
            const uint4 a = xs[v], b = ys[v];
            zs[v] = make_uint4(add_bf16x2(a.x, b.x), add_bf16x2(a.y, b.y), add_bf16x2(a.z, b.z),
                               add_bf16x2(a.w, b.w));
        }
        // The z box was written by ordinary stores (generic proxy) and the TMA store reads it through the async
        // proxy: every writing thread fences before the barrier that hands the box to the storing thread.
        fence_proxy_async();
        __syncthreads();  // (A) stage s fully read, z buffer o fully written

        if (tid == 0) {
            tma_store_2d(&z_map, (t % boxes_c) * BN, (t / boxes_c) * BM, out_base + o * BOX_BYTES);
            bulk_commit();
            if (k + STAGES < mine) issue(k + STAGES);  // stage s is free again: refill it
            bulk_wait_read<NOUT - 1>();  // the store of box k - 1 has read z buffer (k + 1) % NOUT
        }
        __syncthreads();  // (B) nobody refills z buffer (k + 1) % NOUT before its store has read it
    }
    if (tid == 0) bulk_wait<0>();  // stores complete before the block's shared memory goes away
}
