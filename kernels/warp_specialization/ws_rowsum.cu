// ws_rowsum.cu — week 2, day 2: one ring of TMA stages, three ways to run it. The task: the row sums of a bf16
// matrix, out[r] = sum_c x[r, c] in fp32 — a streaming reduction that reads every byte once and writes almost
// nothing, so the ring is all there is to it.
//
// Tiles are TMA boxes of (BM, BN) = (32, 256) bf16 = 16 KiB, row-major over the (ceil(rows/32), ceil(cols/256))
// tile grid; a persistent block walks tiles blockIdx.x, + gridDim.x, ... Tile k of a block lives in stage
// s = k % stages and is that stage's n-th use, n = k / stages. Eight compute warps read a tile: warp w sums rows
// 4w .. 4w+3, lane l the 16 bytes at column 8 l of each (one 512-byte row per warp instruction: conflict-free),
// reduces each row over the warp and adds it to out[row] with one atomicAdd (out is zeroed by the launcher;
// boxes past the edge arrive zero-filled and add nothing).
//
//   rowsum_uniform   rung 1 — no specialization: 256 threads = the 8 compute warps; thread 0 also issues. Each
//                    tile: wait full[s] -> sum -> __syncthreads() -> thread 0 refills stage s. One barrier per
//                    stage (full); the block-wide __syncthreads() is what says "stage s is free".
//   rowsum_ws        rung 2 — New: warp-specialized, 384 threads = producer warpgroup + 2 consumer warpgroups.
//                    One elected lane of warp 0 issues every load; the consumers never wait for each other. New:
//                    a second barrier per stage, empty[s], on which each consumer warp arrives once it has read
//                    the stage; the producer waits on it (parity ((k / stages) & 1) ^ 1) before refilling.
//   rowsum_ws_regs   rung 3 — New: + setmaxnreg: the producer warpgroup gives registers back (dec 40), the
//                    consumers take them (inc 232). The same SASS loop otherwise.
//
// SASS you should see (kernels/sass.py): SYNCS.EXCH.64 (mbarrier.init), SYNCS.ARRIVE.TRANS64 (arrive.expect_tx),
// UTMALDG.2D (the box load), SYNCS.PHASECHK.TRANS64.TRYWAIT (the parity waits), in rungs 2-3 a plain
// SYNCS.ARRIVE (the consumers' release of empty[s]) and ELECT (elect.sync), in rung 3 USETMAXREG; no LDG: every
// byte of x arrives by TMA.
//
// Launch contract (kernels/warp_specialization/launch.py): grid = min(tiles, SMs), one block per SM (so `stages`
// alone sets the loads in flight per SM); dynamic shared memory = stages x 16 KiB + 128 (the kernel re-aligns
// the base to 128 bytes); the map's box (32, 256); out zeroed; stages in 1..MAX_STAGES.

#include "course.cuh"
#include "mbarrier.cuh"   // mbar_init, fence_barrier_init, mbar_arrive_expect_tx, mbar_arrive, mbar_wait
#include "tma.cuh"        // tma_load_2d
#include "warpgroup.cuh"  // warpgroup_index, lane_index, elect_one_sync, setmaxnreg_dec / _inc

#define MAX_STAGES 8

constexpr int BM = 32, BN = 256;                           // (BM, BN): the map's box, rows x cols
constexpr unsigned TILE_BYTES = BM * BN * 2;               // 16384: what expect_tx announces per stage
constexpr int COMPUTE_WARPS = 8;                           // every rung: 8 warps read a tile
constexpr int ROWS_PER_WARP = BM / COMPUTE_WARPS;          // 4

__device__ __forceinline__ unsigned aligned_dynamic_smem(const void* raw) {
    return (smem_addr(raw) + 127u) & ~127u;  // TMA boxes without swizzle: 128-byte aligned shared memory
}

// Sum of the 8 bf16 in 16 bytes, in fp32 (a bf16 is the top half of an fp32: shift, no rounding).
__device__ __forceinline__ float sum8(uint4 v) {
    const unsigned w[4] = {v.x, v.y, v.z, v.w};
    float s = 0.f;
#pragma unroll
    for (int i = 0; i < 4; ++i) s += __uint_as_float(w[i] << 16) + __uint_as_float(w[i] & 0xffff0000u);
    return s;
}

// One compute warp's share of tile t sitting at shared address `tile` (generic pointer): 4 rows.
__device__ __forceinline__ void sum_rows(const unsigned char* tile, int warp, int lane, int t, int tiles_c,
                                         int rows, float* out) {
    float s[ROWS_PER_WARP];
#pragma unroll
    for (int i = 0; i < ROWS_PER_WARP; ++i)  // read all four rows first: the stage can be released after this
        s[i] = sum8(*reinterpret_cast<const uint4*>(tile + (warp * ROWS_PER_WARP + i) * BN * 2 + lane * 16));
#pragma unroll
    for (int i = 0; i < ROWS_PER_WARP; ++i)
#pragma unroll
        for (int d = 16; d; d >>= 1) s[i] += __shfl_xor_sync(0xffffffffu, s[i], d);
    const int r0 = (t / tiles_c) * BM + warp * ROWS_PER_WARP;
    if (lane < ROWS_PER_WARP && r0 + lane < rows) {
        float mine = s[0];
#pragma unroll
        for (int i = 1; i < ROWS_PER_WARP; ++i) mine = lane == i ? s[i] : mine;
        atomicAdd(out + r0 + lane, mine);
    }
}

__device__ __forceinline__ void tile_origin(int t, int tiles_c, int& c0, int& c1) {
    c0 = (t % tiles_c) * BN;  // column of the box's first element (TMA coordinates: innermost first)
    c1 = (t / tiles_c) * BM;  // its row
}

// ---------------------------------------------------------------------------------------------------------------
// Rung 1: no specialization. block = 256 (the 8 compute warps); thread 0 issues too.
// ---------------------------------------------------------------------------------------------------------------
extern "C" __global__ void __launch_bounds__(256, 1)
rowsum_uniform(const __grid_constant__ CUtensorMap x_map, float* out, int rows, int cols, int stages) {
    extern __shared__ unsigned char smem_raw[];
    __shared__ __align__(8) unsigned long long full[MAX_STAGES];  // full[s]: "stage s has landed"
    const unsigned base = aligned_dynamic_smem(smem_raw);
    const unsigned char* gbase = smem_raw + (base - smem_addr(smem_raw));
    const int tiles_c = (cols + BN - 1) / BN;
    const int tiles = tiles_c * ((rows + BM - 1) / BM);
    const int mine = blockIdx.x < tiles ? (tiles - 1 - blockIdx.x) / gridDim.x + 1 : 0;  // tiles of this block
    const int warp = threadIdx.x / 32, lane = lane_index();

    if (threadIdx.x == 0) {
        for (int s = 0; s < stages; ++s) mbar_init(smem_addr(&full[s]), 1);  // 1 arrival: the issuing thread's
        fence_barrier_init();
    }
    __syncthreads();

    auto issue = [&](int k) {
        const int s = k % stages;
        const unsigned bar = smem_addr(&full[s]);
        int c0, c1;
        tile_origin(blockIdx.x + k * gridDim.x, tiles_c, c0, c1);
        mbar_arrive_expect_tx(bar, TILE_BYTES);  // 1 arrival + 16384 bytes (whole box, edges zero-filled)
        tma_load_2d(base + s * TILE_BYTES, &x_map, c0, c1, bar);
    };
    if (threadIdx.x == 0)
        for (int k = 0; k < stages && k < mine; ++k) issue(k);  // prologue: fill the ring

    for (int k = 0; k < mine; ++k) {
        const int s = k % stages;
        mbar_wait(smem_addr(&full[s]), (k / stages) & 1);  // n-th use of stage s: the phase of parity n & 1
        sum_rows(gbase + s * TILE_BYTES, warp, lane, blockIdx.x + k * gridDim.x, tiles_c, rows, out);
        __syncthreads();  // every warp has read stage s ... (and waits for the slowest one)
        if (threadIdx.x == 0 && k + stages < mine) issue(k + stages);  // ... so thread 0 refills it
    }
}

// ---------------------------------------------------------------------------------------------------------------
// Rungs 2 and 3 (New): warp-specialized. block = 384 = 3 warpgroups: warpgroup 0 produces (one elected lane of
// its warp 0 issues; its warps 1-3 have nothing to do), warpgroups 1 and 2 consume (compute warps 0..7).
// ---------------------------------------------------------------------------------------------------------------
template <bool SETMAXNREG>
__device__ __forceinline__ void rowsum_specialized(const CUtensorMap* x_map, float* out, int rows, int cols,
                                                   int stages) {
    extern __shared__ unsigned char smem_raw[];
    __shared__ __align__(8) unsigned long long full[MAX_STAGES];   // full[s]:  stage s landed (producer -> consumers)
    __shared__ __align__(8) unsigned long long empty[MAX_STAGES];  // New: empty[s]: stage s read (consumers -> producer)
    const unsigned base = aligned_dynamic_smem(smem_raw);
    const unsigned char* gbase = smem_raw + (base - smem_addr(smem_raw));
    const int tiles_c = (cols + BN - 1) / BN;
    const int tiles = tiles_c * ((rows + BM - 1) / BM);
    const int mine = blockIdx.x < tiles ? (tiles - 1 - blockIdx.x) / gridDim.x + 1 : 0;

    if (threadIdx.x == 0) {
        for (int s = 0; s < stages; ++s) {
            mbar_init(smem_addr(&full[s]), 1);               // 1 arrival (the producer's expect_tx) + tx bytes
            mbar_init(smem_addr(&empty[s]), COMPUTE_WARPS);  // New: 8 arrivals, one per consumer warp
        }
        fence_barrier_init();
    }
    __syncthreads();  // the last block-wide barrier: from here on the roles only meet at full[] and empty[]

    if (warpgroup_index() == 0) {
        // ---- producer warpgroup ----
        if (SETMAXNREG) setmaxnreg_dec<40>();  // New (rung 3): all 128 threads, before the role split below
        if (threadIdx.x / 32 != 0 || !elect_one_sync()) return;  // one lane of warp 0 issues everything
        for (int k = 0; k < mine; ++k) {
            const int s = k % stages;
            // Wait until the consumers released stage s's previous use (n - 1, parity (n - 1) & 1 = (n & 1) ^ 1).
            // The first pass (n = 0) must not wait: empty[s] is in its phase 0, nothing completed yet, and
            // try_wait.parity(1) asks "has the phase *before* the current one (parity 1) completed?" — it counts as
            // completed, so the wait returns at once. From n = 1 on it waits for the consumers' n-th release.
            mbar_wait(smem_addr(&empty[s]), ((k / stages) & 1) ^ 1);
            const unsigned bar = smem_addr(&full[s]);
            int c0, c1;
            tile_origin(blockIdx.x + k * gridDim.x, tiles_c, c0, c1);
            mbar_arrive_expect_tx(bar, TILE_BYTES);  // arm full[s]: 1 arrival + 16384 bytes
            tma_load_2d(base + s * TILE_BYTES, x_map, c0, c1, bar);
        }
        return;  // loads still in flight complete into shared memory the consumers keep alive
    }
    // ---- consumer warpgroups 1, 2 ----
    if (SETMAXNREG) setmaxnreg_inc<232>();  // New (rung 3): take the producer's registers (blocks until free)
    const int warp = threadIdx.x / 32 - 4, lane = lane_index();  // compute warp 0..7
    for (int k = 0; k < mine; ++k) {
        const int s = k % stages;
        mbar_wait(smem_addr(&full[s]), (k / stages) & 1);  // n-th use of stage s: parity n & 1
        sum_rows(gbase + s * TILE_BYTES, warp, lane, blockIdx.x + k * gridDim.x, tiles_c, rows, out);
        __syncwarp();  // every lane of this warp has read its rows of stage s (the sums are in registers) ...
        if (lane == 0) mbar_arrive(smem_addr(&empty[s]));  // ... so one lane releases it for the warp
    }
}

extern "C" __global__ void __launch_bounds__(384, 1)
rowsum_ws(const __grid_constant__ CUtensorMap x_map, float* out, int rows, int cols, int stages) {
    rowsum_specialized<false>(&x_map, out, rows, cols, stages);
}

extern "C" __global__ void __launch_bounds__(384, 1)
rowsum_ws_regs(const __grid_constant__ CUtensorMap x_map, float* out, int rows, int cols, int stages) {
    rowsum_specialized<true>(&x_map, out, rows, cols, stages);
}
