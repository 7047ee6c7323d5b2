// block_scope.cu — day 4: the resample exercise's course solution through a BLOCK-scope cuda::pipeline,
// kept as a measured rung of the lesson (not a known answer: kernels/pipeline/bench.py times it beside the others).
//
// What it shows: the price of a shared pipeline state when nothing needs it. The algorithm, the tiles and the
// order of the work are the course solution's (the solutions notebook's answer cell); what changed is the
// pipeline: cuda::pipeline_shared_state<thread_scope_block, 4> in shared memory, two mbarriers per stage
// ("produced", "consumed", each expecting 256 arrivals), and every tile pays a shared mbarrier hand-over:
// producer_acquire waits for all 256 threads to release the stage, producer_commit arrives on "produced" behind
// this thread's copies (cp.async.mbarrier.arrive), consumer_wait waits for the phase of the stage's "produced"
// barrier to flip (all 256 threads' copies landed), consumer_release arrives on "consumed". The thread-scope
// solution gets the same guarantees from each thread's own cp.async groups and one __syncthreads per tile. On the
// H100 (recorded_h100.json, rows "resample (block_scope)" and "resample (correct)", 2026-11-22 and again 2026-11-24)
// this kernel ran at 2.44 TB/s, 0.81x the copy ceiling — at the exercise's 0.80x bar — against 2.70 TB/s (0.90x) for
// the same algorithm at thread scope (the solution, and its __pipeline_* twin correct_primitives).
// kernels/pipeline/model.py prices the hand-over per tile (BLOCK_TILE_NS, kind "block_scope").
//
// Algorithm: the window's two ends by a 256-ary search (2 dependent rounds at S = 4096, __syncthreads_count), the
// window [w0, wl + 1] in tiles of ROWS = 16 rows overlapping by one row, each with its 16 source times (4-byte
// cp.async in the same stage), 4 stages; per tile a ballot over target times finds the tile's targets, a warp per
// target counts the tile times <= t (the interval), lerps the two rows (8 bf16 per lane), stores 16 bytes a lane.
// Launch: the exercise's contract (kernels/pipeline/exercise.py): block = 256, grid = (ceil(T / 256), B), dynamic
// smem = 64 * D * 2 + 256 * 8 bytes, + the pipeline_shared_state (static smem).
// SASS you should see: LDGSTS.E.BYPASS.128 (rows), LDGSTS.E (times), ARRIVES.LDGSTSBAR.64.TRANSCNT
// (producer_commit), SYNCS.PHASECHK.TRANS64.TRYWAIT (consumer_wait / producer_acquire), SYNCS.ARRIVE.TRANS64
// (consumer_release), BAR.RED.POPC (__syncthreads_count), VOTE.ANY (ballots), LDS.128, STG.E.128; no LDGDEPBAR /
// DEPBAR (no cp.async groups). 40 registers: 6 blocks of 256 threads per SM.
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
    constexpr int TARGETS = 256;  // targets per block (launch contract)
    constexpr int ROWS = 16;      // source rows per stage: 15 intervals + the row shared with the next tile
    constexpr int STAGES = 4;     // (ROWS, STAGES) = 64 rows: the contract's budget of feature rows
    // Dynamic smem (contract: 64 * D * 2 + TARGETS * 8 bytes, 16-byte aligned):
    //   ring [STAGES][ROWS][D] bf16 | tt[TARGETS] target times | ts[STAGES][ROWS] times of each stage's rows
    extern __shared__ __align__(16) unsigned char smem[];
    __nv_bfloat16* ring = reinterpret_cast<__nv_bfloat16*>(smem);
    float* tt = reinterpret_cast<float*>(smem + (size_t)STAGES * ROWS * D * 2);
    float* ts = tt + TARGETS;
    __shared__ cuda::pipeline_shared_state<cuda::thread_scope_block, STAGES> state;

    const int b = blockIdx.y;
    const int j0 = blockIdx.x * TARGETS;
    const int nt = min(TARGETS, T - j0);  // targets of this block (the last block of a batch may have fewer)
    const float* times = src_times + (size_t)b * S;
    const float* tgt = tgt_times + (size_t)b * T + j0;
    const __nv_bfloat16* feats = src_feats + (size_t)b * S * D;
    __nv_bfloat16* dst = out + ((size_t)b * T + j0) * D;

    // All threads: barriers initialised (expected arrivals = 256 per stage and role), then a block sync.
    cuda::pipeline<cuda::thread_scope_block> pipe = cuda::make_pipeline(cg::this_thread_block(), &state);

    // 1. The window. cnt(x) = #{k : times[k] <= x}; a target t lies in interval clamp(cnt(t) - 1, 0, S - 2), so the
    //    block needs intervals w0 = that of its first target .. wl = that of its last (targets are sorted).
    //    cnt(first) and cnt(last) are searched together: [lo, hi] holds cnt; a round probes THREADS positions
    //    spread over it (or every position once it is that short) and keeps the gap between the last probe <= x
    //    and the first > x. Times are sorted, so the probes <= x are a prefix: their count is where the gap is.
    if (threadIdx.x < nt) tt[threadIdx.x] = tgt[threadIdx.x];  // read by the tiles below (after a barrier)
    const float first = tgt[0], last = tgt[nt - 1];
    auto probe = [&](int lo, int hi) -> int {  // the position this thread probes in [lo, hi), -1: none
        const int n = hi - lo;
        if (n <= THREADS) return (int)threadIdx.x < n ? lo + (int)threadIdx.x : -1;
        return lo + (int)((long long)(threadIdx.x + 1) * n / (THREADS + 1));
    };
    auto narrow = [&](int& lo, int& hi, int c) {  // c = how many of this round's probes are <= the key
        const int n = hi - lo;
        if (n <= THREADS) { lo = hi = lo + c; return; }  // every position probed: cnt is known
        const int below = c > 0 ? lo + (int)((long long)c * n / (THREADS + 1)) + 1 : lo;         // probe c-1, + 1
        const int above = c < THREADS ? lo + (int)((long long)(c + 1) * n / (THREADS + 1)) : hi;  // probe c
        lo = below;
        hi = above;
    };
    int lo0 = 0, hi0 = S, lo1 = 0, hi1 = S;  // the same on every thread: the loop is block-uniform
    while (lo0 < hi0 || lo1 < hi1) {
        const int p0 = lo0 < hi0 ? probe(lo0, hi0) : -1, p1 = lo1 < hi1 ? probe(lo1, hi1) : -1;
        const bool le0 = p0 >= 0 && __ldg(times + p0) <= first;  // both loads in flight together
        const bool le1 = p1 >= 0 && __ldg(times + p1) <= last;
        const int c0 = __syncthreads_count(le0), c1 = __syncthreads_count(le1);  // BAR.RED.POPC
        if (lo0 < hi0) narrow(lo0, hi0, c0);
        if (lo1 < hi1) narrow(lo1, hi1, c1);
    }
    const int w0 = min(max(lo0 - 1, 0), S - 2), wl = min(max(lo1 - 1, 0), S - 2);

    // 2. Tile k: intervals [w0 + 15k, w0 + 15k + 15) -> rows r0 .. r0 + nrows - 1, contiguous in global and in
    //    shared memory (one flat run of nrows * D bf16, copied 16 bytes per cp.async), and their nrows times.
    const int ntiles = (wl - w0 + ROWS - 1) / (ROWS - 1);  // ceil((wl - w0 + 1) / (ROWS - 1))
    const int chunks_per_row = D >> 3;                      // 16-byte chunks (8 bf16) per row; D % 8 == 0
    auto issue = [&](int k) {
        const int r0 = w0 + k * (ROWS - 1);
        const int nrows = min(ROWS, wl + 2 - r0);
        const uint4* src = reinterpret_cast<const uint4*>(feats + (size_t)r0 * D);
        uint4* buf = reinterpret_cast<uint4*>(ring + (size_t)(k % STAGES) * ROWS * D);
        pipe.producer_acquire();  // waits until every thread released this stage's previous tile (k - STAGES)
#pragma unroll 1  // rolled loops keep the kernel at 40 registers: 6 resident blocks per SM, not 4
        for (int c = threadIdx.x; c < nrows * chunks_per_row; c += THREADS)
            cuda::memcpy_async(buf + c, src + c, cuda::aligned_size_t<16>(16), pipe);  // LDGSTS.E.BYPASS.128
        if ((int)threadIdx.x < nrows)                                                  // LDGSTS.E (4 bytes)
            cuda::memcpy_async(ts + (k % STAGES) * ROWS + threadIdx.x, times + r0 + threadIdx.x,
                               cuda::aligned_size_t<4>(4), pipe);
        pipe.producer_commit();   // the stage's "produced" phase completes when all 256 threads' copies landed
    };

    for (int k = 0; k < STAGES - 1 && k < ntiles; ++k) issue(k);  // prologue: 3 tiles in flight

    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    int jb = 0;  // first target of tile k
    for (int k = 0; k < ntiles; ++k) {
        if (k + STAGES - 1 < ntiles) issue(k + STAGES - 1);  // block-uniform condition: every thread commits
        pipe.consumer_wait();  // tile k landed, every thread's copies of it (parity of the stage's barrier)

        const int r0 = w0 + k * (ROWS - 1);
        const int nrows = min(ROWS, wl + 2 - r0);
        const float* tk = ts + (k % STAGES) * ROWS;
        const __nv_bfloat16* tile = ring + (size_t)(k % STAGES) * ROWS * D;
        // 3. Targets of tile k: jb .. je - 1, those before the time of row r0 + 15 (where the next tile's first
        //    interval starts); the last tile takes all the rest. Sorted targets: the matches are a prefix, found
        //    32 at a time by a ballot (every warp computes the same je).
        int je = nt;
        if (k + 1 < ntiles) {
            const float bound = tk[ROWS - 1];
            unsigned m;
            je = jb;
            do {
                const int j = je + lane;
                m = __ballot_sync(0xffffffffu, j < nt && tt[j] < bound);
                je += __popc(m);
            } while (m == 0xffffffffu);
        }
        // Lane m holds the time of the tile's row m. A target's interval in the tile is i = #{m in [1, nrows - 2] :
        // time of row m <= t}: rows 1 .. nrows - 2 are where an interval of this tile can start. (Its times are >=
        // the time of row 0 — or it is before the first source time, w0 = 0, and i = 0 with alpha clamped to 0 —
        // and, outside the last tile, < the time of row 15.)
        const float tm = lane < nrows ? tk[lane] : 0.0f;
        for (int j = jb + warp; j < je; j += THREADS / 32) {
            const float t = tt[j];
            const int i = __popc(__ballot_sync(0xffffffffu, lane >= 1 && lane <= nrows - 2 && tm <= t));
            const float t0 = __shfl_sync(0xffffffffu, tm, i), t1 = __shfl_sync(0xffffffffu, tm, i + 1);
            const float a = fminf(fmaxf((t - t0) / (t1 - t0), 0.0f), 1.0f);  // strictly increasing: t1 > t0
            const uint4* f0 = reinterpret_cast<const uint4*>(tile + (size_t)i * D);
            const uint4* f1 = reinterpret_cast<const uint4*>(tile + (size_t)(i + 1) * D);
            uint4* o = reinterpret_cast<uint4*>(dst + (size_t)j * D);
#pragma unroll 1
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
