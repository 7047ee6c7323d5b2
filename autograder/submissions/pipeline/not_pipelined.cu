// Known answer "not_pipelined": the course solution's algorithm (one search per target, the block's window
// streamed through shared memory in 16-row tiles that overlap by one row) with plain synchronous loads instead of
// cp.async: every thread loads its 16-byte chunks into registers (LDG.E.128), stores them to shared memory
// (STS.128), the block waits at a barrier, lerps, waits again, and only then loads the next tile. No LDGSTS: the
// hardware-path check fails. Expected: correctness 3, path 0. Throughput: see expected.toml (while a tile is being
// lerped nothing is in flight for this block, but 5 resident blocks per SM each with an 8 KiB tile in flight may
// still cover the latency: the H100 run decides).
#include <cuda_bf16.h>

extern "C" __global__ void __launch_bounds__(256) resample(
    const float* __restrict__ src_times, const __nv_bfloat16* __restrict__ src_feats,
    const float* __restrict__ tgt_times, __nv_bfloat16* __restrict__ out, int S, int T, int D)
{
    constexpr int THREADS = 256, TARGETS = 256, ROWS = 16;
    extern __shared__ __align__(16) unsigned char smem[];
    __nv_bfloat16* tile = reinterpret_cast<__nv_bfloat16*>(smem);          // one buffer of ROWS rows
    int* s_idx = reinterpret_cast<int*>(smem + (size_t)64 * D * 2);
    float* s_alpha = reinterpret_cast<float*>(s_idx + TARGETS);

    const int b = blockIdx.y;
    const int j0 = blockIdx.x * TARGETS;
    const int nt = min(TARGETS, T - j0);
    const float* times = src_times + (size_t)b * S;
    const __nv_bfloat16* feats = src_feats + (size_t)b * S * D;
    __nv_bfloat16* dst = out + ((size_t)b * T + j0) * D;

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

    const int w0 = s_idx[0], wl = s_idx[nt - 1];
    const int ntiles = (wl - w0 + ROWS - 1) / (ROWS - 1);
    const int chunks_per_row = D >> 3;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    int jb = 0;
    for (int k = 0; k < ntiles; ++k) {
        const int r0 = w0 + k * (ROWS - 1);
        const int nrows = min(ROWS, wl + 2 - r0);
        const uint4* src = reinterpret_cast<const uint4*>(feats + (size_t)r0 * D);
        uint4* buf = reinterpret_cast<uint4*>(tile);
        __syncthreads();  // everyone finished lerping the previous tile: the buffer may be overwritten
        for (int c = threadIdx.x; c < nrows * chunks_per_row; c += THREADS) buf[c] = src[c];  // LDG.E.128 + STS.128
        __syncthreads();  // the tile is in shared memory

        const int bound = r0 + (ROWS - 1);
        int lo = jb, len = nt - jb;
        while (len > 0) {
            const int half = len >> 1;
            if (s_idx[lo + half] < bound) { lo += half + 1; len -= half + 1; }
            else len = half;
        }
        const int je = lo;
        for (int j = jb + warp; j < je; j += THREADS / 32) {
            const int i = s_idx[j] - r0;
            const float a = s_alpha[j];
            const uint4* f0 = reinterpret_cast<const uint4*>(tile + (size_t)i * D);
            const uint4* f1 = reinterpret_cast<const uint4*>(tile + (size_t)(i + 1) * D);
            uint4* o = reinterpret_cast<uint4*>(dst + (size_t)j * D);
            for (int c = lane; c < chunks_per_row; c += 32) {
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
        jb = je;
    }
}
