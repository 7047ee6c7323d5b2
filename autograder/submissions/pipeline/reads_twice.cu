// Known answer "reads_twice": pipelined with cp.async like the solution, but every target fetches its own two rows
// (i and i + 1) instead of the block streaming its window once. Neighbouring targets share rows (target j's row
// i + 1 is target j + 1's row i when they sit in neighbouring intervals), so at T = S every source row crosses from
// L2 to the SM about twice. The bytes are counted once (the honest count), so whatever the second read costs shows
// as lower TB/s. Expected: correctness 3, path 2 (LDGSTS). Throughput: see expected.toml (the duplicate reads are
// L2 hits — the H100 run decides whether L2 absorbs them).
#include <cooperative_groups.h>
#include <cuda/pipeline>
#include <cuda_bf16.h>

namespace cg = cooperative_groups;

extern "C" __global__ void __launch_bounds__(256) resample(
    const float* __restrict__ src_times, const __nv_bfloat16* __restrict__ src_feats,
    const float* __restrict__ tgt_times, __nv_bfloat16* __restrict__ out, int S, int T, int D)
{
    constexpr int THREADS = 256, TARGETS = 256;
    constexpr int G = 8;        // targets per stage: one per warp
    constexpr int STAGES = 4;   // (2 G rows, STAGES) = 64 rows: the contract's budget
    extern __shared__ __align__(16) unsigned char smem[];
    uint4* ring = reinterpret_cast<uint4*>(smem);  // [STAGES][2 G][D / 8] 16-byte chunks
    int* s_idx = reinterpret_cast<int*>(smem + (size_t)64 * D * 2);
    float* s_alpha = reinterpret_cast<float*>(s_idx + TARGETS);
    __shared__ cuda::pipeline_shared_state<cuda::thread_scope_block, STAGES> state;

    const int b = blockIdx.y;
    const int j0 = blockIdx.x * TARGETS;
    const int nt = min(TARGETS, T - j0);
    const float* times = src_times + (size_t)b * S;
    const uint4* feats = reinterpret_cast<const uint4*>(src_feats + (size_t)b * S * D);
    __nv_bfloat16* dst = out + ((size_t)b * T + j0) * D;
    const int C = D >> 3;  // 16-byte chunks per row

    cuda::pipeline<cuda::thread_scope_block> pipe = cuda::make_pipeline(cg::this_thread_block(), &state);
    if (threadIdx.x < nt) {
        const float t = tgt_times[(size_t)b * T + j0 + threadIdx.x];
        int lo = 0, len = S;
        while (len > 0) {
            const int half = len >> 1;
            if (__ldg(times + lo + half) <= t) { lo += half + 1; len -= half + 1; }
            else len = half;
        }
        const int i = min(max(lo - 1, 0), S - 2);
        const float t0 = __ldg(times + i), t1 = __ldg(times + i + 1);
        s_idx[threadIdx.x] = i;
        s_alpha[threadIdx.x] = fminf(fmaxf((t - t0) / (t1 - t0), 0.0f), 1.0f);
    }
    __syncthreads();

    const int ngroups = (nt + G - 1) / G;
    // Group g: targets [G g, G g + G); slot 2 w holds target G g + w's row i, slot 2 w + 1 its row i + 1.
    auto issue = [&](int g) {
        const int jg = g * G, ng = min(G, nt - jg);
        uint4* buf = ring + (size_t)(g % STAGES) * 2 * G * C;
        pipe.producer_acquire();
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
            const uint4* buf = ring + (size_t)(g % STAGES) * 2 * G * C;
            const uint4* f0 = buf + (size_t)(2 * warp) * C;
            const uint4* f1 = f0 + C;
            const float a = s_alpha[j];
            uint4* o = reinterpret_cast<uint4*>(dst + (size_t)j * D);
            for (int c = lane; c < C; c += 32) {
                uint4 u = f0[c], v = f1[c], w;
                const __nv_bfloat162* u2 = reinterpret_cast<const __nv_bfloat162*>(&u);
                const __nv_bfloat162* v2 = reinterpret_cast<const __nv_bfloat162*>(&v);
                __nv_bfloat162* w2 = reinterpret_cast<__nv_bfloat162*>(&w);
#pragma unroll
                for (int q = 0; q < 4; ++q) {
                    const float2 x = __bfloat1622float2(u2[q]), y = __bfloat1622float2(v2[q]);
                    w2[q] = __floats2bfloat162_rn(fmaf(a, y.x - x.x, x.x), fmaf(a, y.y - x.y, x.y));
                }
                o[c] = w;
            }
        }
        pipe.consumer_release();
    }
}
