// r1_attention.cu — week 2, day 5: attention forward, O = softmax(Q K^T / sqrt(D)) V, bf16 in and out, fp32 inside.
//
// What it shows: the two capstone mechanisms of week 2 working together.
//   - K/V tiles arrive by TMA (UTMALDG.2D, 128B swizzle) into a ring of STAGES stages, each guarded by a full and an
//     empty mbarrier (day 2's ring): one producer thread fills it, two consumer warpgroups drain it.
//   - Each consumer warpgroup owns 64 query rows and runs, per K/V tile,
//       S = Q K^T           WGMMA, SS form (Q and K both in shared memory, K-major descriptors)
//       online softmax      running row max m, running sum l, rescale of O by exp2(m_old - m_new)
//       O += P V            WGMMA, RS form (P from registers: S's accumulator layout IS the A-fragment layout;
//                           V is read "N-major" from shared memory: imm-trans-b = 1)
// What changed from day 4 (gemm): the B operand of the second GEMM is the transposed tile (V is (keys, D), row-major,
// and the GEMM wants V^T's K-major form) and the A operand comes from registers: P never touches shared memory.
//
// SASS to expect in attn_fwd_*: UTMALDG.2D (Q once, K and V per tile), SYNCS.ARRIVE.TRANS64 (expect_tx),
// SYNCS.PHASECHK.TRANS64 (the waits), HGMMA.64x128x16.F32.BF16 with gdesc (SS), HGMMA.64x128x16.F32.BF16 with a
// register A operand (RS; 64x64x16 for D = 64), WARPGROUP.ARRIVE / WARPGROUP.DEPBAR, MUFU.EX2 (the exponentials),
// USETMAXREG (the producer gives registers to the consumers). No LDG of Q, K or V.
//
// Tiles (BM, BN, D, STAGES): (128, 128, 64 | 128, 1..4). Block 384 threads = warpgroup 0 (producer: one elected
// thread issues every TMA), warpgroups 1 and 2 (consumers, query rows [0, 64) and [64, 128) of the block's tile).
// Grid (ceil(S / BM), B * H); causal blocks run the longest rows first (blockIdx.x reversed).
//
// Global layout: q, k, v, o are (B, H, S, D) bf16, contiguous. The tensor maps see them as 2-D (B*H*S, D): row
// bh * S + s. A K/V tile that runs past S reads the next head's rows (or zero fill past the tensor's end): the
// consumer masks those key columns to -inf, so they get P = 0 and add nothing to O (see `mask`).
#include <cuda_bf16.h>
#include "course.cuh"
#include "mbarrier.cuh"
#include "tma.cuh"
#include "warpgroup.cuh"
#include "wgmma.cuh"
#include "softmax.cuh"  // fast_exp2 (MUFU.EX2), pack_bf16 (P as an RS-form A fragment)

namespace attn {

constexpr int BM = 128;                 // query rows per block (2 consumer warpgroups x 64)
constexpr int BN = 128;                 // keys per K/V tile
constexpr int WG_ROWS = 64;             // query rows per consumer warpgroup (WGMMA M = 64)
#define NEG_INF (-__int_as_float(0x7f800000))  // -inf (NVRTC has no <cmath> INFINITY)
constexpr int CONSUMER_WARPS = 8;       // empty[s] counts one arrival per consumer warp
constexpr unsigned Q_SUB = WG_ROWS * 128;   // one 64-column slice of a warpgroup's Q: 64 rows x 128 B = 8 KiB
constexpr unsigned KV_SUB = BN * 128;       // one 64-column slice of a K or V tile: 128 rows x 128 B = 16 KiB

template <int N>
__device__ __forceinline__ void pv_step(float (&o)[N / 2], const unsigned (&a)[4], unsigned long long desc_b) {
    if constexpr (N == 128) wgmma_m64n128k16_rs_tb(o, a, desc_b);
    else wgmma_m64n64k16_rs_tb(o, a, desc_b);
}

// ---- the producer warpgroup: Q once, then the K/V ring (one elected thread issues every TMA load)
template <int D, int STAGES>
__device__ __forceinline__ void produce(const CUtensorMap* q_map, const CUtensorMap* k_map, const CUtensorMap* v_map,
                                        unsigned long long* full, unsigned long long* empty,
                                        unsigned long long& q_full, unsigned q_s, unsigned kv_s, int row0, int q0,
                                        int n_tiles) {
    constexpr int NSUB = D / 64;
    constexpr unsigned Q_BYTES = BM * D * 2;
    constexpr unsigned KV_BYTES = BN * D * 2;
    constexpr unsigned STAGE_BYTES = 2 * KV_BYTES;
    setmaxnreg_dec<24>();                             // the producer needs few registers: give them away
    if (threadIdx.x / 32 != 0 || !elect_one_sync()) return;
    // Q: once, 2 x NSUB boxes of (64 rows, 64 cols) = Q_BYTES, completing q_full.
    mbar_arrive_expect_tx(smem_addr(&q_full), Q_BYTES);
    for (int w = 0; w < 2; ++w)
        for (int c = 0; c < NSUB; ++c)
            tma_load_2d(q_s + (w * NSUB + c) * Q_SUB, q_map, c * 64, row0 + q0 + w * WG_ROWS, smem_addr(&q_full));
    // The K/V ring. Tile j lives in stage s = j % STAGES and is that stage's use n = j / STAGES.
    for (int j = 0; j < n_tiles; ++j) {
        const int s = j % STAGES;
        // Refill of use n waits for the consumers' release of use n - 1: parity ((n - 1) & 1) = (n & 1) ^ 1.
        // n = 0: parity 1, the phase before the first, which counts as complete: the first pass does not wait.
        mbar_wait(smem_addr(&empty[s]), ((j / STAGES) & 1) ^ 1);
        const unsigned bar = smem_addr(&full[s]);
        // 1 arrival + the bytes of both tiles, whole boxes (rows past the tensor's end are zero-filled and
        // still counted): 2 x BN x D x 2 B.
        mbar_arrive_expect_tx(bar, STAGE_BYTES);
        const unsigned k_dst = kv_s + s * STAGE_BYTES, v_dst = k_dst + KV_BYTES;
        for (int c = 0; c < NSUB; ++c) {
            tma_load_2d(k_dst + c * KV_SUB, k_map, c * 64, row0 + j * BN, bar);
            tma_load_2d(v_dst + c * KV_SUB, v_map, c * 64, row0 + j * BN, bar);
        }
    }
}

// ---- online softmax of one S tile, in the consumer's registers: new running max, rescale factor, P = 2^(S *
// scale_log2 - m) in place of S, running sum; the old O rescaled
template <int D>
__device__ __forceinline__ void online_softmax(float (&sacc)[BN / 2], float (&oacc)[D / 2], float& m0, float& m1,
                                               float& l0, float& l1, float scale_log2) {
    float mx0 = NEG_INF, mx1 = NEG_INF;
#pragma unroll
    for (int i = 0; i < BN / 8; ++i) {
        mx0 = fmaxf(mx0, fmaxf(sacc[4 * i], sacc[4 * i + 1]));
        mx1 = fmaxf(mx1, fmaxf(sacc[4 * i + 2], sacc[4 * i + 3]));
    }
    // a row's 128 columns are spread over the 4 lanes of a quad: reduce across them
    mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 1));
    mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 2));
    mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 1));
    mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 2));
    const float mn0 = fmaxf(m0, mx0 * scale_log2), mn1 = fmaxf(m1, mx1 * scale_log2);
    // A row with nothing unmasked yet keeps m = -inf: subtract 0 instead (2^(-inf - 0) = 0, never NaN).
    const float ms0 = mn0 == NEG_INF ? 0.f : mn0, ms1 = mn1 == NEG_INF ? 0.f : mn1;
    const float alpha0 = fast_exp2(m0 - ms0), alpha1 = fast_exp2(m1 - ms1);  // rescale of the old O and l
    m0 = mn0;
    m1 = mn1;
    float rs0 = 0.f, rs1 = 0.f;
#pragma unroll
    for (int i = 0; i < BN / 8; ++i) {
        sacc[4 * i + 0] = fast_exp2(fmaf(sacc[4 * i + 0], scale_log2, -ms0));
        sacc[4 * i + 1] = fast_exp2(fmaf(sacc[4 * i + 1], scale_log2, -ms0));
        sacc[4 * i + 2] = fast_exp2(fmaf(sacc[4 * i + 2], scale_log2, -ms1));
        sacc[4 * i + 3] = fast_exp2(fmaf(sacc[4 * i + 3], scale_log2, -ms1));
        rs0 += sacc[4 * i] + sacc[4 * i + 1];
        rs1 += sacc[4 * i + 2] + sacc[4 * i + 3];
    }
    l0 = l0 * alpha0 + rs0;
    l1 = l1 * alpha1 + rs1;
#pragma unroll
    for (int i = 0; i < D / 8; ++i) {
        oacc[4 * i + 0] *= alpha0;
        oacc[4 * i + 1] *= alpha0;
        oacc[4 * i + 2] *= alpha1;
        oacc[4 * i + 3] *= alpha1;
    }
}

// ---- epilogue: l summed over the quad, O / l, bf16 pairs straight to global (rows < seq only)
template <int D>
__device__ __forceinline__ void epilogue(const float (&oacc)[D / 2], float l0, float l1, __nv_bfloat16* o, int row0,
                                         int qr0, int qr1, int seq, int lane) {
    l0 += __shfl_xor_sync(0xffffffffu, l0, 1);
    l0 += __shfl_xor_sync(0xffffffffu, l0, 2);
    l1 += __shfl_xor_sync(0xffffffffu, l1, 1);
    l1 += __shfl_xor_sync(0xffffffffu, l1, 2);
    const float inv0 = 1.f / l0, inv1 = 1.f / l1;
    __nv_bfloat16* o0 = o + (static_cast<size_t>(row0) + qr0) * D;
    __nv_bfloat16* o1 = o + (static_cast<size_t>(row0) + qr1) * D;
#pragma unroll
    for (int i = 0; i < D / 8; ++i) {
        const int col = 8 * i + 2 * (lane % 4);
        if (qr0 < seq) *reinterpret_cast<unsigned*>(o0 + col) = pack_bf16(oacc[4 * i] * inv0, oacc[4 * i + 1] * inv0);
        if (qr1 < seq) *reinterpret_cast<unsigned*>(o1 + col) = pack_bf16(oacc[4 * i + 2] * inv1, oacc[4 * i + 3] * inv1);
    }
}

template <int D, int STAGES>
__device__ __forceinline__ void attention_body(const CUtensorMap* q_map, const CUtensorMap* k_map,
                                               const CUtensorMap* v_map, __nv_bfloat16* o, int seq, int causal) {
    constexpr int NSUB = D / 64;                          // 64-column slices (one 128-byte swizzle row each)
    constexpr unsigned Q_BYTES = BM * D * 2;              // 2 warpgroups x NSUB slices x 8 KiB
    constexpr unsigned KV_BYTES = BN * D * 2;             // one K (or V) tile: NSUB slices x 16 KiB
    constexpr unsigned STAGE_BYTES = 2 * KV_BYTES;        // stage s = [K tile | V tile]: what full[s] waits for
    __shared__ __align__(8) unsigned long long full[STAGES];   // 1 arrival (expect_tx) + STAGE_BYTES tx bytes
    __shared__ __align__(8) unsigned long long empty[STAGES];  // CONSUMER_WARPS arrivals
    __shared__ __align__(8) unsigned long long q_full;         // 1 arrival + Q_BYTES
    extern __shared__ unsigned char smem_raw[];
    // 128B-swizzled tiles must start on a 1024-byte boundary (the swizzle pattern repeats every 8 rows x 128 B and
    // the WGMMA descriptor's base offset is 0): the launcher gives 1024 bytes of slack.
    const unsigned base = (smem_addr(smem_raw) + 1023u) & ~1023u;
    const unsigned q_s = base;                            // [wg][slice][64 rows][128 B]
    const unsigned kv_s = base + Q_BYTES;                 // stage s: K at kv_s + s*STAGE_BYTES, V KV_BYTES later

    const int m_block = causal ? gridDim.x - 1 - blockIdx.x : blockIdx.x;  // causal: long rows first
    const int bh = blockIdx.y;
    const int row0 = bh * seq;                            // this head's first row in the 2-D (B*H*S, D) view
    const int q0 = m_block * BM;                          // first query of the block
    const int kv_end = causal ? min(seq, q0 + BM) : seq;  // keys this block needs: [0, kv_end)
    const int n_tiles = (kv_end + BN - 1) / BN;

    if (threadIdx.x == 0) {
        for (int s = 0; s < STAGES; ++s) {
            mbar_init(smem_addr(&full[s]), 1);
            mbar_init(smem_addr(&empty[s]), CONSUMER_WARPS);
        }
        mbar_init(smem_addr(&q_full), 1);
        fence_barrier_init();
    }
    __syncthreads();

    if (warpgroup_index() == 0) {                         // the producer warpgroup: one thread issues every load
        produce<D, STAGES>(q_map, k_map, v_map, full, empty, q_full, q_s, kv_s, row0, q0, n_tiles);
        return;
    }

    setmaxnreg_inc<240>();                                // 128 x 24 + 256 x 240 = 64512 <= 65536 registers
    const int wg = warpgroup_index() - 1;                 // consumer 0 or 1
    const int tid = threadIdx.x % 128, warp = tid / 32, lane = tid % 32;
    // This thread's two query rows (accumulator layout, wgmma.cuh): r and r + 8 of the warpgroup's 64.
    const int qr0 = q0 + wg * WG_ROWS + warp * 16 + lane / 4, qr1 = qr0 + 8;
    const float scale_log2 = 1.4426950408889634f * rsqrtf(static_cast<float>(D));  // log2(e) / sqrt(D)

    float oacc[D / 2];                                    // O: 64 x D fp32 over the warpgroup
#pragma unroll
    for (int i = 0; i < D / 2; ++i) oacc[i] = 0.f;
    float m0 = NEG_INF, m1 = NEG_INF;                 // running max of rows qr0, qr1 (log2 units)
    float l0 = 0.f, l1 = 0.f;                             // running sums (this thread's columns only)
    const unsigned q_mine = q_s + wg * NSUB * Q_SUB;

    mbar_wait(smem_addr(&q_full), 0);                     // only use: parity 0
    for (int j = 0; j < n_tiles; ++j) {
        const int s = j % STAGES;
        mbar_wait(smem_addr(&full[s]), (j / STAGES) & 1); // use n = j / STAGES: parity n & 1
        const unsigned k_src = kv_s + s * STAGE_BYTES, v_src = k_src + KV_BYTES;

        // ---- S = Q K^T (64 x BN), D / 16 k-steps. k-step kk is slice kk / 4, +32 B per step inside the slice.
        float sacc[BN / 2];
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < D / 16; ++kk) {
            const unsigned off = (kk / 4) * Q_SUB + (kk % 4) * 32, koff = (kk / 4) * KV_SUB + (kk % 4) * 32;
            wgmma_m64n128k16_ss(sacc, wgmma_desc_sw128(q_mine + off), wgmma_desc_sw128(k_src + koff), kk > 0);
        }
        wgmma_commit();
        wgmma_wait<0>();
        wgmma_fence_operand(sacc);

        // ---- mask: keys >= seq (the tile ran past this head) and, causal, keys > query. Only the last tile and
        // the diagonal tiles need it (uniform per warpgroup).
        //   key:    k0 ...            seq      (non-causal)        causal, diagonal tile:  key > query -> -inf
        //   S row:  x  x  x  x  x  x | -inf -inf                   row r:  x x x x -inf -inf ...
        const int k0 = j * BN;
        const bool need_mask = (k0 + BN > seq) || (causal && k0 + BN - 1 > q0 + wg * WG_ROWS);
        if (need_mask) {
#pragma unroll
            for (int i = 0; i < BN / 8; ++i) {
#pragma unroll
                for (int e = 0; e < 2; ++e) {
                    const int key = k0 + 8 * i + 2 * (lane % 4) + e;
                    if (key >= seq || (causal && key > qr0)) sacc[4 * i + e] = NEG_INF;
                    if (key >= seq || (causal && key > qr1)) sacc[4 * i + 2 + e] = NEG_INF;
                }
            }
        }

        // ---- online softmax: new running max, rescale factor, P = 2^(S * scale_log2 - m), running sum.
        online_softmax<D>(sacc, oacc, m0, m1, l0, l1, scale_log2);

        // ---- O += P V. P's k-step kk (keys 16 kk .. 16 kk + 15) = S's accumulator registers 8 kk .. 8 kk + 7 packed
        // to bf16 pairs (wgmma.cuh: the RS A fragment). V: keys are rows -> +16 rows x 128 B = 2048 B per k-step.
        unsigned pa[BN / 16][4];
#pragma unroll
        for (int kk = 0; kk < BN / 16; ++kk) {
            pa[kk][0] = pack_bf16(sacc[8 * kk + 0], sacc[8 * kk + 1]);
            pa[kk][1] = pack_bf16(sacc[8 * kk + 2], sacc[8 * kk + 3]);
            pa[kk][2] = pack_bf16(sacc[8 * kk + 4], sacc[8 * kk + 5]);
            pa[kk][3] = pack_bf16(sacc[8 * kk + 6], sacc[8 * kk + 7]);
        }
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < BN / 16; ++kk)
            pv_step<D>(oacc, pa[kk], wgmma_desc_sw128_mn(v_src + kk * 2048, KV_SUB));
        wgmma_commit();
        wgmma_wait<0>();                                  // V's stage is read: it may be refilled
        wgmma_fence_operand(oacc);
        __syncwarp();
        if (lane == 0) mbar_arrive(smem_addr(&empty[s])); // one arrival per consumer warp (8 release the stage)
    }

    epilogue<D>(oacc, l0, l1, o, row0, qr0, qr1, seq, lane);
}

}  // namespace attn

// One entry per (D, STAGES): the same call shape, (q_map, k_map, v_map, o, seq, causal).
#define ATTN_ENTRY(D, ST)                                                                                            \
    extern "C" __global__ void __launch_bounds__(384, 1) attn_fwd_d##D##_s##ST(                                      \
        const __grid_constant__ CUtensorMap q_map, const __grid_constant__ CUtensorMap k_map,                       \
        const __grid_constant__ CUtensorMap v_map, __nv_bfloat16* o, int seq, int causal) {                         \
        attn::attention_body<D, ST>(&q_map, &k_map, &v_map, o, seq, causal);                                         \
    }

ATTN_ENTRY(128, 1)
ATTN_ENTRY(128, 2)
ATTN_ENTRY(128, 3)
ATTN_ENTRY(64, 1)
ATTN_ENTRY(64, 2)
ATTN_ENTRY(64, 4)
