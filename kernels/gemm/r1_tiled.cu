// r1_tiled.cu — week 2 day 4, rung 1: C = A B^T with shared-memory tiles and FMA (no tensor cores).
//
// The GEMM of the whole day (every rung has this signature and these layouts):
//   A: (M, K) bf16 row-major   — K contiguous ("K-major")
//   B: (N, K) bf16 row-major   — B is given TRANSPOSED (N rows of K): K contiguous too, the layout wgmma reads
//                                 without a transpose (imm-trans-b = 0) and nn.Linear stores its weight in
//   C: (M, N) bf16 row-major   — C[m, n] = bf16( sum_k float(A[m, k]) * float(B[n, k]) ), fp32 accumulation
// Contract: K % 8 == 0 and N % 8 == 0 (rows are multiples of 16 bytes: the tensor-map rule for A and B, 16-byte
// aligned output rows for C); M, N, K otherwise arbitrary (tiles at the edges are partial).
//
// What it shows: the week-1 recipe (stage a tile in shared memory, reuse it from there) applied to GEMM. A block
// computes a (BM, BN) tile of C; per k-step it loads A's (BM, BK) and B's (BN, BK) slices into shared memory (as
// float, transposed so the inner loop reads consecutive addresses), then each thread does (TM x TN) x BK FMAs from
// registers. Every A element is read from global memory N / BN times, every B element M / BM times.
//
// SASS you should see: LDG.E.128 (8 bf16 per load), STS, LDS.128, FFMA (the work), no HMMA / HGMMA.
// Why it is slow: fp32 FMA peaks at 128 lanes x 2 flops x 132 SMs x 1.98 GHz = ~ 67 TFLOPS on an H100 SXM, against
// ~ 990 TFLOPS for dense bf16 on its tensor cores; and the FFMAs here wait on shared-memory loads (LDS.128) too.

#include "course.cuh"
#include <cuda_bf16.h>

constexpr int BM = 64, BN = 64, BK = 32;  // (BM, BN, BK): the block's tile of C and k-slice
constexpr int TM = 4, TN = 4;             // each thread's (TM, TN) outputs
constexpr int THREADS = (BM / TM) * (BN / TN);  // 256

// Load a (64, BK) slice of a K-major matrix X (rows r0.., cols k0..) into shared memory transposed, as float:
// sX[k][r]. Thread t loads 8 consecutive k of row t / 4 (one 16-byte load); out-of-range elements are zero.
__device__ __forceinline__ void load_slice(float (*sX)[BM + 4], const __nv_bfloat16* X, int rows, int K, int r0,
                                           int k0) {
    const int t = threadIdx.x, r = t / 4, kc = (t % 4) * 8;
    const int gr = r0 + r, gk = k0 + kc;
    float v[8];
    if (gr < rows && gk < K) {  // K % 8 == 0: a chunk of 8 is all in or all out, 16-byte aligned
        const uint4 raw = *reinterpret_cast<const uint4*>(X + static_cast<size_t>(gr) * K + gk);
        const __nv_bfloat16* h = reinterpret_cast<const __nv_bfloat16*>(&raw);
#pragma unroll
        for (int i = 0; i < 8; ++i) v[i] = __bfloat162float(h[i]);
    } else {
#pragma unroll
        for (int i = 0; i < 8; ++i) v[i] = 0.f;
    }
#pragma unroll
    for (int i = 0; i < 8; ++i) sX[kc + i][r] = v[i];
}

extern "C" __global__ void __launch_bounds__(THREADS)
gemm_tiled(const __nv_bfloat16* __restrict__ A, const __nv_bfloat16* __restrict__ B, __nv_bfloat16* __restrict__ C,
           int M, int N, int K) {
    __shared__ float sA[BK][BM + 4];  // +4: the transposed stores spread over banks
    __shared__ float sB[BK][BN + 4];
    const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
    const int ty = threadIdx.x / (BN / TN), tx = threadIdx.x % (BN / TN);
    float acc[TM][TN] = {};

    for (int k0 = 0; k0 < K; k0 += BK) {
        load_slice(sA, A, M, K, m0, k0);
        load_slice(sB, B, N, K, n0, k0);
        __syncthreads();
#pragma unroll
        for (int k = 0; k < BK; ++k) {
            const float4 a = *reinterpret_cast<const float4*>(&sA[k][ty * TM]);
            const float4 b = *reinterpret_cast<const float4*>(&sB[k][tx * TN]);
            const float av[4] = {a.x, a.y, a.z, a.w}, bv[4] = {b.x, b.y, b.z, b.w};
#pragma unroll
            for (int i = 0; i < TM; ++i)
#pragma unroll
                for (int j = 0; j < TN; ++j) acc[i][j] = fmaf(av[i], bv[j], acc[i][j]);
        }
        __syncthreads();  // everyone done reading before the next slice overwrites
    }
#pragma unroll
    for (int i = 0; i < TM; ++i) {
        const int m = m0 + ty * TM + i;
        if (m >= M) continue;
#pragma unroll
        for (int j = 0; j < TN; j += 2) {
            const int n = n0 + tx * TN + j;  // n even, N % 8 == 0: n < N implies n + 1 < N
            if (n < N)
                *reinterpret_cast<__nv_bfloat162*>(C + static_cast<size_t>(m) * N + n) =
                    __floats2bfloat162_rn(acc[i][j], acc[i][j + 1]);
        }
    }
}
