// tma_copy.cu — day 5: a 2-D copy through the Tensor Memory Accelerator (TMA), one tile per block, then persistent
// and multi-stage.
//
// Both kernels copy a row-major (rows, cols) tensor src -> dst box by box. A box is (box_rows, box_cols) elements;
// the host built one tensor map per tensor with that box (kernels/tensormap.make_tensor_map) and passes both maps
// by value as `const __grid_constant__ CUtensorMap` (128 bytes in the kernel's parameter space: the TMA unit reads
// the descriptor from there, so it must not be copied to a local variable).
//
// What changed from the previous days: no thread computes an address or moves a byte. One thread per block hands
// the TMA unit "box at (row, col) of this tensor map -> this shared-memory address, count the bytes on this
// mbarrier"; the unit walks the box, clips it at the tensor's edges (out-of-bounds elements read as zero, and a
// TMA store writes nothing out of bounds), and signals the barrier with the bytes it delivered.
//
//   tma_copy_tile       one box per block: load -> wait -> store. Requests in flight per SM = resident blocks.
//   tma_copy_pipelined  New: a persistent grid; each block walks boxes blockIdx.x, + gridDim.x, ... through a ring
//                       of `stages` shared-memory buffers, keeping up to `stages` loads in flight per block.
//
// SASS you should see (kernels/sass.py):
//   SYNCS.EXCH.64                      mbarrier.init
//   SYNCS.ARRIVE.TRANS64               mbarrier.arrive.expect_tx (arms the barrier with the transaction bytes)
//   UTMALDG.2D                         cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes
//   SYNCS.PHASECHK.TRANS64.TRYWAIT     mbarrier.try_wait.parity
//   UTMASTG.2D                         cp.async.bulk.tensor.2d.global.shared::cta.bulk_group
//   UTMACMDFLUSH                       cp.async.bulk.commit_group
//   and no LDG / STG: the data never passes through a register.
//
// Launch contract (kernels/tma/launch.py): block = 32 threads (one warp; lane 0 does all the work), dynamic shared
// memory = stages * round_up(box bytes, 128) + 128 (the 128 re-aligns the base), both maps with the same box and
// element type, box_rows/box_cols equal to the maps' box.

#include "course.cuh"

#define MAX_STAGES 8

// ---------------------------------------------------------------------------------------------------------------
// PTX wrappers: kernels/include/mbarrier.cuh (init, expect_tx, parity wait) and kernels/include/tma.cuh (box load,
// box store, bulk groups), each with its hardware contract.
// ---------------------------------------------------------------------------------------------------------------
#include "mbarrier.cuh"
#include "tma.cuh"

// Shared-memory address of the first 128-byte aligned byte of the dynamic buffer (TMA boxes without swizzle need
// 128-byte aligned shared-memory addresses; the launcher adds 128 bytes of slack).
__device__ __forceinline__ unsigned aligned_dynamic_smem(const void* raw) {
    return (smem_addr(raw) + 127u) & ~127u;
}

// ---------------------------------------------------------------------------------------------------------------
// Rung 1: one box per block.
// grid = (ceil(cols / box_cols), ceil(rows / box_rows)); block = 32.
// ---------------------------------------------------------------------------------------------------------------
extern "C" __global__ void __launch_bounds__(32)
tma_copy_tile(const __grid_constant__ CUtensorMap src, const __grid_constant__ CUtensorMap dst,
              int box_rows, int box_cols, int box_bytes) {
    extern __shared__ unsigned char smem_raw[];
    __shared__ __align__(8) unsigned long long full;  // one mbarrier: "the box has landed"
    if (threadIdx.x != 0) return;  // one thread issues everything; the other 31 lanes have nothing to do

    const unsigned buf = aligned_dynamic_smem(smem_raw);
    const unsigned bar = smem_addr(&full);
    const int c0 = blockIdx.x * box_cols;  // column of the box's first element
    const int c1 = blockIdx.y * box_rows;  // row of the box's first element

    mbar_init(bar, 1);     // 1 arrival per phase: the arrive.expect_tx below
    fence_barrier_init();  // ... visible to the TMA unit before it signals the barrier

    // One elected thread arms the barrier with the bytes the TMA will deliver; the barrier's phase completes when
    // arrivals (1) and transaction bytes (box_rows * box_cols * element size, the *whole* box even where it runs
    // past the tensor's edge: out-of-bounds elements are zero-filled and still counted) both reach zero.
    mbar_arrive_expect_tx(bar, box_bytes);
    tma_load_2d(buf, &src, c0, c1, bar);
    mbar_wait(bar, 0);  // first use of the barrier: wait for the phase with parity 0

    // The box was written by the async proxy (TMA) and is read by the async proxy (TMA store): no generic-proxy
    // write in between, so no fence.proxy.async is needed here (the exercise, where threads write, needs one).
    tma_store_2d(&dst, c0, c1, buf);  // clipped at the tensor's edge: nothing is written out of bounds
    bulk_commit();
    bulk_wait<0>();  // shared memory is released when the block exits: the store must have read it by then
}

// ---------------------------------------------------------------------------------------------------------------
// Rung 2 (New): persistent and multi-stage. grid = min(boxes, blocks_per_sm * SMs); block = 32.
// Box k of this block is box t = blockIdx.x + k * gridDim.x (row-major over the box grid); it lives in stage
// s = k % stages and is that stage's n-th use, n = k / stages, so its barrier phase has parity n & 1.
// (box_rows, box_cols, stages): runtime arguments — the maps' box and the ring depth (1..MAX_STAGES).
// ---------------------------------------------------------------------------------------------------------------
extern "C" __global__ void __launch_bounds__(32)
tma_copy_pipelined(const __grid_constant__ CUtensorMap src, const __grid_constant__ CUtensorMap dst,
                   int rows, int cols, int box_rows, int box_cols, int box_bytes, int stages) {
    extern __shared__ unsigned char smem_raw[];
    __shared__ __align__(8) unsigned long long full[MAX_STAGES];  // New: one barrier per stage
    if (threadIdx.x != 0) return;

    const unsigned base = aligned_dynamic_smem(smem_raw);
    const unsigned stage_bytes = (box_bytes + 127) & ~127;  // every stage 128-byte aligned
    const int boxes_c = (cols + box_cols - 1) / box_cols;
    const int boxes = boxes_c * ((rows + box_rows - 1) / box_rows);
    const int mine = blockIdx.x < boxes ? (boxes - 1 - blockIdx.x) / gridDim.x + 1 : 0;  // boxes of this block

    for (int s = 0; s < stages; ++s) mbar_init(smem_addr(&full[s]), 1);
    fence_barrier_init();

    // Load box k of this block into its stage (the barrier of that stage is armed first).
    auto issue = [&](int k) {
        const int t = blockIdx.x + k * gridDim.x;
        const int s = k % stages;
        const unsigned bar = smem_addr(&full[s]);
        mbar_arrive_expect_tx(bar, box_bytes);
        tma_load_2d(base + s * stage_bytes, &src, (t % boxes_c) * box_cols, (t / boxes_c) * box_rows, bar);
    };

    // Prologue: fill the ring. `stages` loads are now in flight.
    for (int k = 0; k < stages && k < mine; ++k) issue(k);

    for (int k = 0; k < mine; ++k) {
        const int t = blockIdx.x + k * gridDim.x;
        const int s = k % stages;
        const unsigned parity = (k / stages) & 1;  // New: the n-th use of stage s waits for the phase of parity n&1
        mbar_wait(smem_addr(&full[s]), parity);
        tma_store_2d(&dst, (t % boxes_c) * box_cols, (t / boxes_c) * box_rows, base + s * stage_bytes);
        bulk_commit();
        // Refill stage s with box k + stages once the store has *read* it (the global write may still be in
        // flight). The other stages' loads stay in flight meanwhile, so `stages` requests are outstanding per block
        // except for this short read.
        if (k + stages < mine) {
            bulk_wait_read<0>();
            issue(k + stages);
        }
    }
    bulk_wait<0>();  // every store complete before the block's shared memory goes away
}
