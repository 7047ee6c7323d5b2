// Known answer "correct": the course solution (the notebook's answer cell) — a 3x3 bf16 stencil over a pitch-linear
// image, staged with 16-byte cp.async.cg: the block's 16 x 128 output tile plus a one-row halo above and below and
// one 16-byte chunk of halo left and right (18 rows x 18 chunks), zero fill for rows outside the image and for the
// columns at and past W (the NaN padding is never read), commit, wait_group 0, __syncthreads; then each thread
// computes 2 rows x 4 columns from shared memory and stores them as two float4 (a warp's store covers 512
// consecutive bytes of one row). The weights are loaded before the copies so that their loads overlap them.
// Expected: correctness full, path full (LDGSTS in blur2d_bf16), throughput full. bench.py's reference.
#include <cuda_bf16.h>
#include "cp_async.cuh"  // cp_async_cg16_zfill, cp_async_commit, cp_async_wait<N> (section 4 prints them)

// 8 resident blocks of 256 threads per SM (full occupancy, as every stencil of the day runs at): at most 32
// registers a thread.
extern "C" __global__ void __launch_bounds__(256, 8) blur2d_bf16(const __nv_bfloat16* __restrict__ x,
                                                                  const float* __restrict__ w, float* __restrict__ y,
                                                                  int H, int W, int ld)
{
    constexpr int TR = 16, TC = 128;       // output tile (rows, columns): 2048 outputs (the launch contract)
    constexpr int SR = TR + 2;             // staged rows: r0 - 1 .. r0 + 16
    constexpr int SQ = TC / 8 + 2;         // 16-byte chunks per staged row: columns c0 - 8 .. c0 + 135
    constexpr int NQ = SR * SQ;            // 324 chunks = 5184 bytes; a staged row is 288 bytes
    __shared__ uint4 s[SR][SQ];
    const int t = threadIdx.x;
    const int r0 = blockIdx.y * TR, c0 = blockIdx.x * TC;

    float wr[9];  // first, so that these loads fly with the copies
#pragma unroll
    for (int k = 0; k < 9; ++k) wr[k] = w[k];

    // Staged chunk (i, j) = x[r][g .. g+7], r = r0 - 1 + i, g = c0 - 8 + 8j. g is a multiple of 8 and ld % 8 == 0,
    // so x + r*ld + g is 16-byte aligned. Read only what lies in the image: nothing for a row outside [0, H) or a
    // chunk left of column 0, W - g elements (< 8) for the chunk holding column W - 1: the padding after it is NaN.
    for (int q = t; q < NQ; q += 256) {  // chunks t and t + 256 (threads 0..67)
        const int i = q / SQ, j = q - i * SQ;
        const int r = r0 - 1 + i, g = c0 - 8 + 8 * j;
        const int valid = (r < 0 || r >= H || g < 0) ? 0 : max(0, min(8, W - g));
        const int src_bytes = 2 * valid;
        const __nv_bfloat16* src = src_bytes ? x + (long long)r * ld + g : x;  // zero bytes: still a valid address
        cp_async_cg16_zfill(&s[i][j], src, src_bytes);  // LDGSTS.E.BYPASS.128.ZFILL
    }
    cp_async_commit();
    cp_async_wait<0>();  // my copies landed
    __syncthreads();     // everyone's copies landed

    // Warp v owns output rows r0 + 2v, r0 + 2v + 1; lane l the columns c0 + 4l .. c0 + 4l + 3. Output (a, 4l + m)
    // of the tile reads staged rows a .. a + 2 and staged columns 4l + 7 + m .. 4l + 9 + m (column c of the image is
    // staged column c - c0 + 8), read as three 8-byte words per staged row from staged column 4l + 4 on (the
    // compiler keeps the loads of the values used: an LDS.64 of the middle word, an LDS.U16 on either side). A warp
    // reads one staged row at a time: its LDS.64 covers 256 consecutive bytes (no bank conflict, whatever the row
    // stride); its LDS.U16 hit words 2l + 3 and 2l + 6, two lanes per bank (2 wavefronts, as the LDS.64 takes).
    const int v = t >> 5, l = t & 31;
    const __nv_bfloat16* tile = reinterpret_cast<const __nv_bfloat16*>(s);
    float in[4][12];  // staged rows 2v .. 2v + 3, staged columns 4l + 4 .. 4l + 15
#pragma unroll
    for (int a = 0; a < 4; ++a) {
        const uint2* p = reinterpret_cast<const uint2*>(tile + (2 * v + a) * (SQ * 8) + 4 * l + 4);
#pragma unroll
        for (int k = 0; k < 3; ++k) {
            const uint2 u = p[k];
            const __nv_bfloat162* b = reinterpret_cast<const __nv_bfloat162*>(&u);
            const float2 lo = __bfloat1622float2(b[0]), hi = __bfloat1622float2(b[1]);
            in[a][4 * k] = lo.x;
            in[a][4 * k + 1] = lo.y;
            in[a][4 * k + 2] = hi.x;
            in[a][4 * k + 3] = hi.y;
        }
    }
    const int c = c0 + 4 * l;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        const int r = r0 + 2 * v + h;
        float out[4];
#pragma unroll
        for (int m = 0; m < 4; ++m) {
            float acc = 0.f;
#pragma unroll
            for (int dr = 0; dr < 3; ++dr)
#pragma unroll
                for (int dc = 0; dc < 3; ++dc) acc = fmaf(wr[3 * dr + dc], in[h + dr][3 + m + dc], acc);
            out[m] = acc;
        }
        if (r >= H) continue;
        float* row = y + (long long)r * ld;  // y has x's pitch: every row starts 32-byte aligned
        if (c + 4 <= W) {
            *reinterpret_cast<float4*>(row + c) = make_float4(out[0], out[1], out[2], out[3]);  // STG.E.128
        } else {
#pragma unroll
            for (int m = 0; m < 4; ++m)
                if (c + m < W) row[c + m] = out[m];  // the last, partial piece of a row
        }
    }
}
