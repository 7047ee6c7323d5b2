// Known answer "reads_twice": pipelined with cp.async like the solution, with the same fast window search, but every
// target fetches its own two rows (i and i + 1) instead of the block streaming its window once. Neighbouring targets
// share rows (target j's row i + 1 is target j + 1's row i when they sit in neighbouring intervals), so at T = S
// every source row crosses from L2 to the SM about twice. The bytes are counted once (the honest count), so
// whatever the second read costs shows as lower TB/s. To know which rows to fetch, each target's interval is found
// before the pipeline starts: in the window's source times staged in shared memory (a binary search per thread) —
// one more dependent round of loads than the solution. Expected: correctness 3, path 2 (LDGSTS). Throughput: see
// expected.toml (the duplicate reads are L2 hits: kernels/pipeline/model.py predicts L2 absorbs them; the H100 run
// decides).
#include <cooperative_groups.h>
#include <cuda/pipeline>
#include <cuda_bf16.h>

namespace cg = cooperative_groups;

// Launch contract: block = 256 threads, grid = (ceil(T / 256), B), dynamic smem = 64 * D * 2 + 256 * 8 bytes.
extern "C" __global__ void __launch_bounds__(256) resample(
    const float* __restrict__ src_times, const __nv_bfloat16* __restrict__ src_feats,
    const float* __restrict__ tgt_times, __nv_bfloat16* __restrict__ out, int S, int T, int D)
{
    constexpr int THREADS = 256, TARGETS = 256;
    constexpr int G = 8;        // targets per stage: one per warp
    constexpr int STAGES = 4;   // (2 G rows, STAGES) = 64 rows: the contract's budget
    // Dynamic smem (contract: 64 * D * 2 + TARGETS * 8 bytes): ring [STAGES][2 G][D] bf16 | s_idx[TARGETS] int |
    // s_alpha[TARGETS] float. Before the pipeline starts, the ring holds the window's source times.
    extern __shared__ __align__(16) unsigned char smem[];
    uint4* ring = reinterpret_cast<uint4*>(smem);  // [STAGES][2 G][D / 8] 16-byte chunks
    int* s_idx = reinterpret_cast<int*>(smem + (size_t)64 * D * 2);
    float* s_alpha = reinterpret_cast<float*>(s_idx + TARGETS);
    __shared__ cuda::pipeline_shared_state<cuda::thread_scope_block, STAGES> state;

    const int b = blockIdx.y;
    const int j0 = blockIdx.x * TARGETS;
    const int nt = min(TARGETS, T - j0);  // targets of this block (the last block of a batch may have fewer)
    const float* times = src_times + (size_t)b * S;
    const float* tgt = tgt_times + (size_t)b * T + j0;
    const uint4* feats = reinterpret_cast<const uint4*>(src_feats + (size_t)b * S * D);
    __nv_bfloat16* dst = out + ((size_t)b * T + j0) * D;

    // All threads: barriers initialised (expected arrivals = 256 per stage and role), then a block sync.
    cuda::pipeline<cuda::thread_scope_block> pipe = cuda::make_pipeline(cg::this_thread_block(), &state);

    // 1. The window. cnt(x) = #{k : times[k] <= x}; a target t lies in interval clamp(cnt(t) - 1, 0, S - 2), so the
    //    block needs intervals w0 = that of its first target .. wl = that of its last (targets are sorted).
    //    cnt(first) and cnt(last) are searched together: [lo, hi] holds cnt; a round probes THREADS positions
    //    spread over it (or every position once it is that short) and keeps the gap between the last probe <= x
    //    and the first > x. Times are sorted, so the probes <= x are a prefix: their count is where the gap is.
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

    // 2. Each target's interval. Its count within the window, cw = #{r < nwin : time of row w0 + r <= t}, gives
    //    i = clamp(w0 + cw - 1, w0, wl) (a target before the first source time has w0 = 0 and cw = 0; one at or past
    //    the last has wl = S - 2). The window's times are staged in the (still unused) ring if they fit.
    const int nwin = wl - w0 + 2;  // rows w0 .. wl + 1
    float* wt = reinterpret_cast<float*>(smem);
    const bool staged = nwin <= 64 * D * 2 / 4;
    if (staged)
        for (int r = threadIdx.x; r < nwin; r += THREADS) wt[r] = times[w0 + r];
    __syncthreads();
    if ((int)threadIdx.x < nt) {
        const float t = tgt[threadIdx.x];
        const float* wtimes = staged ? wt : times + w0;  // shared memory, or global memory for a huge window
        int lo = 0, len = nwin;
        while (len > 0) {
            const int half = len >> 1;
            if (wtimes[lo + half] <= t) { lo += half + 1; len -= half + 1; }
            else len = half;
        }
        const int i = min(max(w0 + lo - 1, w0), wl);
        const float t0 = wtimes[i - w0], t1 = wtimes[i - w0 + 1];
        s_idx[threadIdx.x] = i;
        s_alpha[threadIdx.x] = fminf(fmaxf((t - t0) / (t1 - t0), 0.0f), 1.0f);
    }
    __syncthreads();  // s_idx / s_alpha ready, and nobody reads the staged times any more: the ring is free

    const int C = D >> 3;  // 16-byte chunks per row
    const int ngroups = (nt + G - 1) / G;
    // Group g: targets [G g, G g + G); slot 2 w holds target G g + w's row i, slot 2 w + 1 its row i + 1.
    auto issue = [&](int g) {
        const int jg = g * G, ng = min(G, nt - jg);
        uint4* buf = ring + (size_t)(g % STAGES) * 2 * G * C;
        pipe.producer_acquire();
#pragma unroll 1
        for (int c = threadIdx.x; c < ng * 2 * C; c += THREADS) {
            const int slot = c / C, cc = c - slot * C;
            const int row = s_idx[jg + (slot >> 1)] + (slot & 1);  // a row the neighbour fetches too
            cuda::memcpy_async(buf + (size_t)slot * C + cc, feats + (size_t)row * C + cc,
                               cuda::aligned_size_t<16>(16), pipe);
        }
        pipe.producer_commit();
    };
    for (int g = 0; g < STAGES - 1 && g < ngroups; ++g) issue(g);

    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    for (int g = 0; g < ngroups; ++g) {
        if (g + STAGES - 1 < ngroups) issue(g + STAGES - 1);
        pipe.consumer_wait();
        const int j = g * G + warp;
        if (j < nt) {
            const uint4* f0 = ring + (size_t)(g % STAGES) * 2 * G * C + (size_t)(2 * warp) * C;
            const uint4* f1 = f0 + C;
            const float a = s_alpha[j];
            uint4* o = reinterpret_cast<uint4*>(dst + (size_t)j * D);
#pragma unroll 1
            for (int c = lane; c < C; c += 32) {
                uint4 u = f0[c], v = f1[c], w;  // LDS.128 x 2
                const __nv_bfloat162* u2 = reinterpret_cast<const __nv_bfloat162*>(&u);
                const __nv_bfloat162* v2 = reinterpret_cast<const __nv_bfloat162*>(&v);
                __nv_bfloat162* w2 = reinterpret_cast<__nv_bfloat162*>(&w);
#pragma unroll
                for (int q = 0; q < 4; ++q) {
                    const float2 x = __bfloat1622float2(u2[q]), y = __bfloat1622float2(v2[q]);
                    w2[q] = __floats2bfloat162_rn(fmaf(a, y.x - x.x, x.x), fmaf(a, y.y - x.y, x.y));
                }
                o[c] = w;  // STG.E.128
            }
        }
        pipe.consumer_release();
    }
}
