// Base of day 3's mutated known answers, not a known answer itself (expected.toml: ca_16, race_no_wait, no_commit,
// edge_off_by_one, cg_8_bytes, misaligned and correct_primitives are this kernel with a few named changes).
// It is the course's first solution of smooth_bf16: tile + halo with 16-byte cp.async.cg (zero fill at the array
// ends), commit, the weights loaded while the copies fly, wait_group 0, __syncthreads, then 8 consecutive outputs per
// thread from shared memory (two float4 stores 32 bytes apart). The course solution (correct.cu) has since loaded the
// weights before the copies and stored whole sectors; the known answers built on this kernel were graded on the H100
// in this form, so it stays their base. SASS: LDGSTS.E.BYPASS.128.ZFILL, LDGDEPBAR, DEPBAR.LE SB0, 0x0, BAR.SYNC.
#include <cuda_bf16.h>

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

    // Chunk c covers x[g .. g+7], g = base - 8 + 8c: a multiple of 8 elements, so x + g is 16-byte aligned.
    // Only the elements inside [0, n) are read (src_bytes); the copy zero-fills the rest of the 16 bytes.
    auto load_chunk = [&](int c) {
        const long long g = base - VEC + 8LL * c;
        const long long valid = g < 0 ? 0 : max(0LL, min((long long)VEC, n - g));
        const int src_bytes = 2 * (int)valid;
        const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(&s[c]));
        const __nv_bfloat16* src = src_bytes ? x + g : x;  // a zero-byte copy still needs a valid address
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes)
                     : "memory");
    };
    load_chunk(t);
    if (t < CHUNKS - 256) load_chunk(256 + t);  // threads 0, 1: the right halo
    asm volatile("cp.async.commit_group;\n" ::: "memory");
    float wr[TAPS];
#pragma unroll
    for (int k = 0; k < TAPS; ++k) wr[k] = w[k];  // overlaps the copies in flight
    asm volatile("cp.async.wait_group 0;\n" ::: "memory");  // my copies landed
    __syncthreads();                                          // everyone's copies landed

    // Thread t: output base + 8t + m (m = 0..7) reads x[base + 8t + m - 4 + k] = v[4 + m + k], v = chunks t..t+2.
    float v[3 * VEC];
#pragma unroll
    for (int j = 0; j < 3; ++j) {
        const uint4 q = s[t + j];
        const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&q);
#pragma unroll
        for (int p = 0; p < 4; ++p) {
            const float2 f = __bfloat1622float2(h[p]);
            v[8 * j + 2 * p] = f.x;
            v[8 * j + 2 * p + 1] = f.y;
        }
    }
    float out[VEC];
#pragma unroll
    for (int m = 0; m < VEC; ++m) {
        float acc = 0.f;
#pragma unroll
        for (int k = 0; k < TAPS; ++k) acc = fmaf(wr[k], v[4 + m + k], acc);
        out[m] = acc;
    }
    const long long i = base + 8LL * t;
    if (i + VEC <= n) {
        float4* y4 = reinterpret_cast<float4*>(y + i);  // i is a multiple of 8: 32-byte aligned
        y4[0] = make_float4(out[0], out[1], out[2], out[3]);
        y4[1] = make_float4(out[4], out[5], out[6], out[7]);
    } else {
#pragma unroll
        for (int m = 0; m < VEC; ++m)
            if (i + m < n) y[i + m] = out[m];  // the last, partial chunk of the array
    }
}
