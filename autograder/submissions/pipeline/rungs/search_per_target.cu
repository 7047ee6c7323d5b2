// search_per_target.cu — day 4: the resample exercise's first course solution, kept as a measured rung.
//
// What it shows: a pipeline hides the latency of the tiles *in* it, not the latency before it starts. Every thread
// binary-searches its own target's interval in global memory — ceil(log2(S + 1)) = 13 dependent loads at S = 4096,
// then 2 more for the interval's times — before the block knows its window and can issue its first tile. All blocks
// of a wave start together and do the same work, so they also search together: ~15 round trips in which the whole
// GPU has almost nothing in flight, once per wave of blocks. On the H100 (build/h100-run9, 2026-11-22, the grader's
// calibration) it ran at 2.42 TB/s, 0.81x the copy ceiling; the course solution
// (autograder/submissions/pipeline/correct.cu) finds the window in 2 rounds and streams the source times with the
// tiles. kernels/pipeline/model.py predicts both from the same constants (kind "search_per_target").
//
// Algorithm (the same results as the course solution): one upper-bound binary search per target, (i, alpha) in
// shared memory; the block's window [w0, wl + 1] in tiles of 16 rows overlapping by one through a 4-stage
// block-scope cuda::pipeline; per tile a binary search over the targets' intervals finds the tile's targets; one
// target per warp, 8 bf16 per lane, 16-byte stores.
// Launch: the exercise's contract (kernels/pipeline/exercise.py): block = 256, grid = (ceil(T / 256), B), dynamic
// smem = 64 * D * 2 + 256 * 8 bytes.
// SASS you should see: LDG.E.CONSTANT (the search), LDGSTS.E.BYPASS.128, ARRIVES.LDGSTSBAR.64.TRANSCNT,
// SYNCS.PHASECHK.TRANS64.TRYWAIT, LDS.128, STG.E.128. 48 registers: 5 blocks of 256 threads per SM.
#include <cooperative_groups.h>
#include <cuda/pipeline>
#include <cuda_bf16.h>

namespace cg = cooperative_groups;

// Launch contract: block = 256 threads, grid = (ceil(T / 256), B), dynamic smem = 64 * D * 2 + 256 * 8 bytes.
extern "C" __global__ void __launch_bounds__(256) resample(
    const float* __restrict__ src_times, const __nv_bfloat16* __restrict__ src_feats,
    const float* __restrict__ tgt_times, __nv_bfloat16* __restrict__ out, int S, int T, int D)
{
    constexpr int THREADS = 256;  // launch contract
    constexpr int TARGETS = 256;  // targets per block, one per thread (launch contract)
    constexpr int ROWS = 16;      // source rows per stage: 15 intervals + the row shared with the next tile
    constexpr int STAGES = 4;     // (ROWS, STAGES) = 64 rows: the contract's budget of feature rows
    // Dynamic smem (contract: 64 * D * 2 + TARGETS * 8 bytes, 16-byte aligned):
    //   [STAGES][ROWS][D] bf16 ring | idx[TARGETS] int | alpha[TARGETS] float
    extern __shared__ __align__(16) unsigned char smem[];
    __nv_bfloat16* ring = reinterpret_cast<__nv_bfloat16*>(smem);
    int* s_idx = reinterpret_cast<int*>(smem + (size_t)STAGES * ROWS * D * 2);
    float* s_alpha = reinterpret_cast<float*>(s_idx + TARGETS);
    __shared__ cuda::pipeline_shared_state<cuda::thread_scope_block, STAGES> state;

    const int b = blockIdx.y;
    const int j0 = blockIdx.x * TARGETS;
    const int nt = min(TARGETS, T - j0);  // targets of this block (the last block of a batch may have fewer)
    const float* times = src_times + (size_t)b * S;
    const __nv_bfloat16* feats = src_feats + (size_t)b * S * D;
    __nv_bfloat16* dst = out + ((size_t)b * T + j0) * D;

    // All threads: barriers initialised (expected arrivals = 256 per stage and role), then a block sync.
    cuda::pipeline<cuda::thread_scope_block> pipe = cuda::make_pipeline(cg::this_thread_block(), &state);

    // 1. One binary search per target. cnt = how many source times are <= t (upper bound); the interval is
    //    i = cnt - 1 clamped to [0, S - 2]: t before the first source time -> i = 0, alpha < 0 -> clamped to 0;
    //    t at or after the last -> i = S - 2, alpha >= 1 -> 1. A target exactly on src_times[k] gets i = k, alpha 0.
    if (threadIdx.x < nt) {
        const float t = tgt_times[(size_t)b * T + j0 + threadIdx.x];
        int lo = 0, len = S;
        while (len > 0) {
            const int half = len >> 1;
            if (__ldg(times + lo + half) <= t) { lo += half + 1; len -= half + 1; }
            else len = half;
        }
        const int i = min(max(lo - 1, 0), S - 2);
        const float t0 = __ldg(times + i), t1 = __ldg(times + i + 1);  // strictly increasing: t1 > t0
        s_idx[threadIdx.x] = i;
        s_alpha[threadIdx.x] = fminf(fmaxf((t - t0) / (t1 - t0), 0.0f), 1.0f);
    }
    __syncthreads();

    // 2. The window: intervals [w0, wl] -> rows [w0, wl + 1]. Targets are sorted, so their intervals are too.
    const int w0 = s_idx[0], wl = s_idx[nt - 1];
    const int ntiles = (wl - w0 + ROWS - 1) / (ROWS - 1);  // ceil((wl - w0 + 1) / (ROWS - 1))
    const int chunks_per_row = D >> 3;                      // 16-byte chunks (8 bf16) per row; D % 8 == 0

    // Tile k: intervals [w0 + 15k, w0 + 15k + 15) -> rows r0 .. r0 + nrows - 1; rows are contiguous in global and in
    // shared memory, so the tile is one flat run of nrows * D bf16, copied 16 bytes per cp.async.
    auto issue = [&](int k) {
        const int r0 = w0 + k * (ROWS - 1);
        const int nrows = min(ROWS, wl + 2 - r0);
        const uint4* src = reinterpret_cast<const uint4*>(feats + (size_t)r0 * D);
        uint4* buf = reinterpret_cast<uint4*>(ring + (size_t)(k % STAGES) * ROWS * D);
        pipe.producer_acquire();  // waits until every thread released this stage's previous tile (k - STAGES)
        for (int c = threadIdx.x; c < nrows * chunks_per_row; c += THREADS)
            cuda::memcpy_async(buf + c, src + c, cuda::aligned_size_t<16>(16), pipe);  // LDGSTS.E.BYPASS.128
        pipe.producer_commit();   // the stage's "produced" phase completes when all 256 threads' copies landed
    };

    for (int k = 0; k < STAGES - 1 && k < ntiles; ++k) issue(k);  // prologue: 3 tiles in flight

    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    int jb = 0;  // first target of tile k
    for (int k = 0; k < ntiles; ++k) {
        if (k + STAGES - 1 < ntiles) issue(k + STAGES - 1);  // block-uniform condition: every thread commits
        pipe.consumer_wait();  // tile k landed, every thread's copies of it (parity of the stage's barrier)

        // Targets of tile k: jb .. je - 1 with s_idx < w0 + 15(k + 1) (a binary search in shared memory).
        const int r0 = w0 + k * (ROWS - 1);
        const int bound = r0 + (ROWS - 1);
        int lo = jb, len = nt - jb;
        while (len > 0) {
            const int half = len >> 1;
            if (s_idx[lo + half] < bound) { lo += half + 1; len -= half + 1; }
            else len = half;
        }
        const int je = lo;
        const __nv_bfloat16* tile = ring + (size_t)(k % STAGES) * ROWS * D;
        for (int j = jb + warp; j < je; j += THREADS / 32) {
            const int i = s_idx[j] - r0;  // row of the tile holding t_i; row i + 1 holds t_{i+1}
            const float a = s_alpha[j];
            const uint4* f0 = reinterpret_cast<const uint4*>(tile + (size_t)i * D);
            const uint4* f1 = reinterpret_cast<const uint4*>(tile + (size_t)(i + 1) * D);
            uint4* o = reinterpret_cast<uint4*>(dst + (size_t)j * D);
            for (int c = lane; c < chunks_per_row; c += 32) {
                uint4 u = f0[c], v = f1[c], w;  // LDS.128 x 2
                const __nv_bfloat162* u2 = reinterpret_cast<const __nv_bfloat162*>(&u);
                const __nv_bfloat162* v2 = reinterpret_cast<const __nv_bfloat162*>(&v);
                __nv_bfloat162* w2 = reinterpret_cast<__nv_bfloat162*>(&w);
#pragma unroll
                for (int q = 0; q < 4; ++q) {
                    const float2 x = __bfloat1622float2(u2[q]), y = __bfloat1622float2(v2[q]);
                    w2[q] = __floats2bfloat162_rn(fmaf(a, y.x - x.x, x.x), fmaf(a, y.y - x.y, x.y));
                }
                o[c] = w;  // STG.E.128: a warp writes 512 contiguous bytes of one output row
            }
        }
        jb = je;
        pipe.consumer_release();  // this thread is done with tile k's stage
    }
}
