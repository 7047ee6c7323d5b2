// Known answer "correct": the course solution of the resample exercise. Expected: full points (correctness 3,
// path 2, throughput 2 on an H100).
//
// out[b, j, :] = lerp of the two source rows around tgt_times[b, j] (see kernels/pipeline/exercise.py).
// A block owns TARGETS = 256 consecutive (sorted) targets of one batch. Its targets need a contiguous window of
// source rows, [w0, wl + 1], where w0 and wl are the intervals of its first and last target:
//   1. the window: both ends found together by a 256-ary search (each round every thread probes one position per
//      end, __syncthreads_count counts the probes <= the key): 2 dependent rounds of loads at S = 4096 instead of
//      the 13 of a binary search — the block has nothing in flight until they are done;
//   2. the window streams through a 4-stage ring in tiles of ROWS = 16 rows that overlap by one row (15 intervals
//      per tile), each tile with its 16 source times (4-byte cp.async in the same stage), through a THREAD-scope
//      cuda::pipeline: every thread is producer and consumer of its own copies, and one __syncthreads per tile
//      shares them with the block;
//   3. per tile, the targets before the next tile's first time are this tile's (a ballot over target times); for
//      each, a warp counts the tile times <= t (one ballot: the interval), lerps the two rows (8 bf16 per lane)
//      and stores the row with 16-byte stores, while tiles k+1 .. k+3 are in flight.
// No per-target search in global memory: the times a target needs arrive with its tile.
// Hardware contract of the thread-scope pipeline (cuda::make_pipeline(): two counters in registers, no shared
// state, no mbarrier):
//   producer_acquire()                     nothing (the thread itself knows which of its slots are free)
//   cuda::memcpy_async                     cp.async: LDGSTS.E.BYPASS.128 (16-byte rows), LDGSTS.E (4-byte times)
//   producer_commit()                      cp.async.commit_group: LDGDEPBAR
//   pipeline_consumer_wait_prior<2>(pipe)  cp.async.wait_group 2: DEPBAR.LE SB0, 0x2 — this thread's copies of the
//                                          oldest tile landed, nobody else's
//   consumer_release()                     nothing
// pipe.consumer_wait() waits for the same group, but computes "groups still allowed in flight" at run time from
// the two counters; NVRTC does not fold it here, so its SASS is a switch over DEPBAR.LE SB0, 0x0 .. 0x8 (9 waits,
// one taken). The count is a compile-time STAGES - 2, so the kernel says it (as kernels/pipeline/stream.cu does).
// With it the kernel compiles to the SASS of correct_primitives (expected.toml: this file on the __pipeline_*
// primitives), instruction for instruction with NVRTC 13.5 (768 instructions, the same registers). What crosses
// threads is one BAR.SYNC per tile; compared with kernels/pipeline/grading/known/rungs/block_scope.cu (the same algorithm
// through a block-scope cuda::pipeline), no tile waits on a shared mbarrier phase.
// SASS: LDGSTS.E.BYPASS.128 (rows), LDGSTS.E (times), LDGDEPBAR (producer_commit), DEPBAR.LE SB0, 0x2 (the wait),
// BAR.SYNC (the tile barrier), BAR.RED.POPC (__syncthreads_count), VOTE.ANY (ballots), LDS.128, STG.E.128; no
// SYNCS.* (no mbarrier). 38 registers, no local memory: 6 resident blocks of 256 threads per SM.
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

    const int b = blockIdx.y;
    const int j0 = blockIdx.x * TARGETS;
    const int nt = min(TARGETS, T - j0);  // targets of this block (the last block of a batch may have fewer)
    const float* times = src_times + (size_t)b * S;
    const float* tgt = tgt_times + (size_t)b * T + j0;
    const __nv_bfloat16* feats = src_feats + (size_t)b * S * D;
    __nv_bfloat16* dst = out + ((size_t)b * T + j0) * D;

    // Thread scope: every thread its own producer and consumer; no shared state, nothing to initialise.
    cuda::pipeline<cuda::thread_scope_thread> pipe = cuda::make_pipeline();

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
    // Every thread commits one group per tile, even an empty one (a thread with no chunk, a tile past the window),
    // so that group g is tile g for every thread and the wait's count (STAGES - 2) holds on every thread.
    auto issue = [&](int k) {
        pipe.producer_acquire();  // thread scope: nothing to wait for
        if (k < ntiles) {
            const int r0 = w0 + k * (ROWS - 1);
            const int nrows = min(ROWS, wl + 2 - r0);
            const uint4* src = reinterpret_cast<const uint4*>(feats + (size_t)r0 * D);
            uint4* buf = reinterpret_cast<uint4*>(ring + (size_t)(k % STAGES) * ROWS * D);
#pragma unroll 1  // a rolled loop keeps the kernel at 38 registers: 6 resident blocks per SM
            for (int c = threadIdx.x; c < nrows * chunks_per_row; c += THREADS)
                cuda::memcpy_async(buf + c, src + c, cuda::aligned_size_t<16>(16), pipe);  // LDGSTS.E.BYPASS.128
            if ((int)threadIdx.x < nrows)                                                  // LDGSTS.E (4 bytes)
                cuda::memcpy_async(ts + (k % STAGES) * ROWS + threadIdx.x, times + r0 + threadIdx.x,
                                   cuda::aligned_size_t<4>(4), pipe);
        }
        pipe.producer_commit();  // LDGDEPBAR: closes this thread's group k
    };

    for (int k = 0; k < STAGES - 1; ++k) issue(k);  // prologue: groups 0 .. STAGES-2 (tiles 0 .. 2)

    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    int jb = 0;  // first target of tile k
    for (int k = 0; k < ntiles; ++k) {
        // STAGES-1 + k groups committed; at most STAGES-2 pending -> group k (this thread's part of tile k) landed.
        cuda::pipeline_consumer_wait_prior<STAGES - 2>(pipe);  // DEPBAR.LE SB0, 0x2
        // The wait is per thread: only this thread's copies. The barrier makes every thread's copies of tile k
        // visible to all, and tells everyone that all threads finished tile k - 1 (its slot is refilled next).
        __syncthreads();
        issue(k + STAGES - 1);  // into tile k - 1's slot; past the window an empty group

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
        pipe.consumer_release();  // thread scope: nothing
    }
    cuda::pipeline_consumer_wait_prior<0>(pipe);  // DEPBAR.LE SB0, 0x0: no copy may still be landing at exit
}
