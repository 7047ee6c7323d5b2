// Known answer "correct": the course solution (the notebook's answer cell) — tile + halo with 16-byte cp.async.cg
// (zero fill at the array ends), commit, wait_group 0, __syncthreads, then 8 outputs per thread from shared memory,
// written as two float4 1024 outputs apart (a warp's stores cover whole sectors). The weights are loaded before the
// copies so that their loads overlap them.
// Expected: correctness full, path full (LDGSTS in smooth_bf16), throughput full. bench.py's reference.
#include <cuda_bf16.h>
#include "cp_async.cuh"  // cp_async_cg16_zfill, cp_async_commit, cp_async_wait<N> (section 4 prints them)

extern "C" __global__ void smooth_bf16(const __nv_bfloat16* __restrict__ x, const float* __restrict__ w,
                                       float* __restrict__ y, long long n)
{
    constexpr int R = 4, TAPS = 2 * R + 1;  // 9 taps
    constexpr int VEC = 8;                  // bf16 per 16-byte chunk
    constexpr int TILE = 256 * VEC;         // 2048 outputs per block (the launch contract)
    constexpr int CHUNKS = 256 + 2;         // one halo chunk (8 elements >= R) each side: 258 x 16 B = 4128 B
    __shared__ uint4 s[CHUNKS];
    const int t = threadIdx.x;
    const long long base = (long long)blockIdx.x * TILE;

    // The weights first: these loads then fly together with the copies. (Loaded after the copies, the compiler
    // may schedule them after the wait below, and each block would wait one more round trip.)
    float wr[TAPS];
#pragma unroll
    for (int k = 0; k < TAPS; ++k) wr[k] = w[k];

    // Chunk c covers x[g .. g+7], g = base - 8 + 8c: a multiple of 8 elements, so x + g is 16-byte aligned.
    // Only the elements inside [0, n) are read (src_bytes); the copy zero-fills the rest of the 16 bytes.
    auto load_chunk = [&](int c) {
        const long long g = base - VEC + 8LL * c;
        const long long valid = g < 0 ? 0 : max(0LL, min((long long)VEC, n - g));
        const int src_bytes = 2 * (int)valid;
        const __nv_bfloat16* src = src_bytes ? x + g : x;  // a zero-byte copy still needs a valid address
        cp_async_cg16_zfill(&s[c], src, src_bytes);       // cp.async.cg.shared.global [dst], [src], 16, src_bytes
    };
    load_chunk(t);
    if (t < CHUNKS - 256) load_chunk(256 + t);  // threads 0, 1: the right halo
    cp_async_commit();
    cp_async_wait<0>();  // my copies landed
    __syncthreads();                                          // everyone's copies landed

    // Thread t computes two groups of 4 outputs, 1024 apart: o = base + 1024h + 4t + m (h = 0, 1; m = 0..3), so
    // the 32 float4 stores of a warp cover 512 consecutive bytes (whole 32-byte sectors). Output o reads
    // x[o - 4 + k] (k = 0..8), which sits at bf16 index o - base + 4 + k of the tile (chunk 0 starts at x[base-8]):
    // the 12 values v[0..11] from index e = 1024h + 4t + 4 on, read as three 8-byte words (e is a multiple of 4).
    const __nv_bfloat16* tile = reinterpret_cast<const __nv_bfloat16*>(s);
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        const uint2* p = reinterpret_cast<const uint2*>(tile + 1024 * h + 4 * t + 4);
        float v[12];
#pragma unroll
        for (int j = 0; j < 3; ++j) {
            const uint2 q = p[j];  // LDS.64: a warp reads 256 consecutive bytes, no bank conflict
            const __nv_bfloat162* b = reinterpret_cast<const __nv_bfloat162*>(&q);
            const float2 lo = __bfloat1622float2(b[0]), hi = __bfloat1622float2(b[1]);
            v[4 * j] = lo.x;
            v[4 * j + 1] = lo.y;
            v[4 * j + 2] = hi.x;
            v[4 * j + 3] = hi.y;
        }
        float out[4];
#pragma unroll
        for (int m = 0; m < 4; ++m) {
            float acc = 0.f;
#pragma unroll
            for (int k = 0; k < TAPS; ++k) acc = fmaf(wr[k], v[m + k], acc);
            out[m] = acc;
        }
        const long long i = base + 1024LL * h + 4LL * t;
        if (i + 4 <= n) {
            *reinterpret_cast<float4*>(y + i) = make_float4(out[0], out[1], out[2], out[3]);  // 16-byte aligned
        } else {
#pragma unroll
            for (int m = 0; m < 4; ++m)
                if (i + m < n) y[i + m] = out[m];  // the last, partial piece of the array
        }
    }
}
