// Known answer "correct": the course solution of week 2 day 5's attn_kv (the solutions notebook's answer cell,
// without the nbgrader markers; tests/test_attention.py holds them equal). One producer thread fills a 2-stage ring
// of K/V tiles with TMA (full[s] armed with expect_tx), two consumer warpgroups wait full[s] with the parity of the
// stage's use, run S = Q K^T, the online softmax and O += P V on it, and release it on empty[s].
// Expected: full points — correctness, path (UTMALDG + HGMMA, no LDG), throughput.
#include <cuda_bf16.h>
#include "course.cuh"     // CUtensorMap (128 opaque bytes) and smem_addr(p): the 32-bit shared-memory address of p

// ---- Given: the course's wrappers (printed in section 4), one per PTX instruction. --------------------------------
#include "mbarrier.cuh"   // mbar_init, fence_barrier_init, mbar_arrive_expect_tx, mbar_arrive, mbar_wait(bar, parity)
#include "tma.cuh"        // tma_load_2d(smem dst, &map, col, row, bar)
#include "warpgroup.cuh"  // warpgroup_index, elect_one_sync, setmaxnreg_dec<N>, setmaxnreg_inc<N>
#include "wgmma.cuh"      // wgmma_desc_sw128, wgmma_fence / commit / wait<N>, wgmma_m64n128k16_ss, wgmma_fence_operand

constexpr int D = 128;                         // head dimension (the contract's only one)
constexpr int BM = 128, BN = 128;              // query rows per block (2 warpgroups x 64), keys per K/V tile
constexpr int STAGES = 2;                      // ring depth: Q 32 KiB + 2 x 64 KiB of the contract's 225 KiB
constexpr int NSUB = D / 64;                   // 64-column slices: one 128-byte swizzled row each
constexpr unsigned Q_SUB = 64 * 128;           // a warpgroup's Q slice: 64 rows x 128 B
constexpr unsigned KV_SUB = BN * 128;          // a K or V slice: 128 rows x 128 B = 16 KiB
constexpr unsigned Q_BYTES = BM * D * 2;       // 32 KiB
constexpr unsigned KV_BYTES = BN * D * 2;      // one K (or V) tile: 32 KiB
constexpr unsigned STAGE_BYTES = 2 * KV_BYTES; // stage s = [K tile | V tile]: what full[s] waits for
constexpr int CONSUMER_WARPS = 8;              // warpgroups 1 and 2
#define NEG_INF (-__int_as_float(0x7f800000))

// Given: O += P V for one k-step, P (64 x 16 keys) from registers, V (16 keys x 128) read N-major from the stage
// (wgmma RS form with imm-trans-b = 1; desc_b's LBO = bytes between the two 64-column slices of V).
__device__ __forceinline__ void pv_step(float (&d)[64], const unsigned (&a)[4], unsigned v_addr) {
    wgmma_m64n128k16_rs_tb(d, a, wgmma_desc_sw128_mn(v_addr, KV_SUB));  // wgmma.cuh: RS form, B N-major
}
__device__ __forceinline__ float fast_exp2(float x) { float y; asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x)); return y; }
__device__ __forceinline__ unsigned pack_bf16(float lo, float hi) {
    __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<unsigned*>(&v);
}

// Given: one K/V tile's work for a consumer warpgroup — S = Q K^T (SS), mask, online softmax (running max m,
// rescale alpha = 2^(m_old - m_new) of O and l), O += P V (RS). Returns when the tile's shared memory is read.
__device__ __forceinline__ void consume_tile(float (&o)[64], float (&m)[2], float (&l)[2], unsigned q_mine,
                                             unsigned k_src, unsigned v_src, int k0, int qr0, int q_first,
                                             int seq, int causal, float scale_log2) {
    const int lane = threadIdx.x % 32;
    float s[64];
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {  // k-step kk: slice kk / 4, +32 B per step inside the slice
        const unsigned qo = (kk / 4) * Q_SUB + (kk % 4) * 32, ko = (kk / 4) * KV_SUB + (kk % 4) * 32;
        wgmma_m64n128k16_ss(s, wgmma_desc_sw128(q_mine + qo), wgmma_desc_sw128(k_src + ko), kk > 0);
    }
    wgmma_commit();
    wgmma_wait<0>();
    wgmma_fence_operand(s);
    // keys past the sequence (the tile ran into the next head, or zero fill) and, causal, keys after the query: -inf
    if (k0 + BN > seq || (causal && k0 + BN - 1 > q_first)) {
#pragma unroll
        for (int i = 0; i < BN / 8; ++i)
#pragma unroll
            for (int e = 0; e < 2; ++e) {
                const int key = k0 + 8 * i + 2 * (lane % 4) + e;
                if (key >= seq || (causal && key > qr0)) s[4 * i + e] = NEG_INF;
                if (key >= seq || (causal && key > qr0 + 8)) s[4 * i + 2 + e] = NEG_INF;
            }
    }
    float mx[2] = {NEG_INF, NEG_INF};
#pragma unroll
    for (int i = 0; i < BN / 8; ++i) {
        mx[0] = fmaxf(mx[0], fmaxf(s[4 * i], s[4 * i + 1]));
        mx[1] = fmaxf(mx[1], fmaxf(s[4 * i + 2], s[4 * i + 3]));
    }
    float ms[2], alpha[2], rs[2] = {0.f, 0.f};
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 1));  // a row lives on the 4 lanes of a quad
        mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 2));
        const float mn = fmaxf(m[h], mx[h] * scale_log2);               // the new running max (log2 units)
        ms[h] = mn == NEG_INF ? 0.f : mn;                               // nothing unmasked yet: subtract 0, not -inf
        alpha[h] = fast_exp2(m[h] - ms[h]);                             // rescale of what O and l hold so far
        m[h] = mn;
    }
#pragma unroll
    for (int i = 0; i < BN / 8; ++i)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            s[4 * i + 2 * h] = fast_exp2(fmaf(s[4 * i + 2 * h], scale_log2, -ms[h]));
            s[4 * i + 2 * h + 1] = fast_exp2(fmaf(s[4 * i + 2 * h + 1], scale_log2, -ms[h]));
            rs[h] += s[4 * i + 2 * h] + s[4 * i + 2 * h + 1];
        }
#pragma unroll
    for (int h = 0; h < 2; ++h) l[h] = l[h] * alpha[h] + rs[h];
#pragma unroll
    for (int i = 0; i < D / 8; ++i) {
        o[4 * i] *= alpha[0]; o[4 * i + 1] *= alpha[0]; o[4 * i + 2] *= alpha[1]; o[4 * i + 3] *= alpha[1];
    }
    unsigned pa[BN / 16][4];  // P's k-step kk = S's registers 8 kk .. 8 kk + 7 as bf16 pairs (the RS A fragment)
#pragma unroll
    for (int kk = 0; kk < BN / 16; ++kk)
#pragma unroll
        for (int r = 0; r < 4; ++r) pa[kk][r] = pack_bf16(s[8 * kk + 2 * r], s[8 * kk + 2 * r + 1]);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < BN / 16; ++kk) pv_step(o, pa[kk], v_src + kk * 2048);  // 16 keys x 128 B per k-step
    wgmma_commit();
    wgmma_wait<0>();  // the stage's K and V are read
    wgmma_fence_operand(o);
}

// ---- The kernel. Launch contract: block 384 (warpgroup 0 produces, 1 and 2 consume), grid (ceil(S / 128), B * H),
// 225 KiB of dynamic shared memory; maps over the (B*H*S, 128) view of q / k / v, 128B swizzle, q box (64, 64),
// k and v box (128, 64). Row bh * S + s of the view is query / key s of head bh. (q, k, v: the same tensors as
// pointers, for a plain-load kernel; the path part wants TMA to carry their bytes.)
extern "C" __global__ void __launch_bounds__(384, 1)
attn_kv(const __grid_constant__ CUtensorMap q_map, const __grid_constant__ CUtensorMap k_map,
        const __grid_constant__ CUtensorMap v_map, const __nv_bfloat16* q, const __nv_bfloat16* k,
        const __nv_bfloat16* v, __nv_bfloat16* out, int seq, int causal)
{
    __shared__ __align__(8) unsigned long long full[STAGES];   // full[s]:  1 arrival (expect_tx) + STAGE_BYTES
    __shared__ __align__(8) unsigned long long empty[STAGES];  // empty[s]: 8 arrivals, one per consumer warp
    __shared__ __align__(8) unsigned long long q_full;         // 1 arrival + Q_BYTES
    extern __shared__ unsigned char smem_raw[];
    const unsigned base = (smem_addr(smem_raw) + 1023u) & ~1023u;  // swizzled tiles start on 1024 B
    const unsigned q_s = base;                                     // [warpgroup][slice][64 rows][128 B]
    const unsigned kv_s = base + Q_BYTES;                          // stage s: K at kv_s + s * STAGE_BYTES, V after
    const int m_block = causal ? gridDim.x - 1 - blockIdx.x : blockIdx.x;
    const int row0 = blockIdx.y * seq, q0 = m_block * BM;
    const int n_tiles = ((causal ? min(seq, q0 + BM) : seq) + BN - 1) / BN;
    // K/V tile j (keys j * BN ..) lives in stage s = j % STAGES and is that stage's use n = j / STAGES.

    if (threadIdx.x == 0) {
        for (int s = 0; s < STAGES; ++s) {
            mbar_init(smem_addr(&full[s]), 1);
            mbar_init(smem_addr(&empty[s]), CONSUMER_WARPS);
        }
        mbar_init(smem_addr(&q_full), 1);
        fence_barrier_init();
    }
    __syncthreads();

    if (warpgroup_index() == 0) {
        setmaxnreg_dec<24>();
        if (threadIdx.x / 32 != 0 || !elect_one_sync()) return;  // one lane of warp 0 is the producer
        mbar_arrive_expect_tx(smem_addr(&q_full), Q_BYTES);      // Q: once, 4 boxes of (64, 64)
        for (int w = 0; w < 2; ++w)
            for (int c = 0; c < NSUB; ++c)
                tma_load_2d(q_s + (w * NSUB + c) * Q_SUB, &q_map, c * 64, row0 + q0 + w * 64, smem_addr(&q_full));
        // ---- Yours: the producer loop. For each K/V tile j: wait until stage s is free (empty[s], with the parity
        // that lets the first pass through the ring go at once), arm full[s] with the bytes that will land, issue
        // the TMA loads of the tile's K and V slices (NSUB of each, box (128, 64)) into stage s.
        for (int j = 0; j < n_tiles; ++j) {
            const int s = j % STAGES;
            // Use n of stage s waits for the release of use n - 1: parity (n - 1) & 1 = (n & 1) ^ 1; for n = 0 that
            // is parity 1, the phase "before" the first, which counts as complete: the first pass goes at once.
            mbar_wait(smem_addr(&empty[s]), ((j / STAGES) & 1) ^ 1);
            const unsigned bar = smem_addr(&full[s]);
            mbar_arrive_expect_tx(bar, STAGE_BYTES);  // 1 arrival + K and V, whole boxes (zero fill is counted)
            const unsigned k_dst = kv_s + s * STAGE_BYTES;
            for (int c = 0; c < NSUB; ++c) {
                tma_load_2d(k_dst + c * KV_SUB, &k_map, c * 64, row0 + j * BN, bar);
                tma_load_2d(k_dst + KV_BYTES + c * KV_SUB, &v_map, c * 64, row0 + j * BN, bar);
            }
        }
        return;
    }

    setmaxnreg_inc<240>();  // 128 x 24 + 256 x 240 = 64512 <= 65536 registers
    const int wg = warpgroup_index() - 1, tid = threadIdx.x % 128, lane = tid % 32;
    const int q_first = q0 + wg * 64;                          // this warpgroup's first query
    const int qr0 = q_first + (tid / 32) * 16 + lane / 4;     // this thread's rows: qr0 and qr0 + 8
    const float scale_log2 = 1.4426950408889634f * rsqrtf((float)D);
    const unsigned q_mine = q_s + wg * NSUB * Q_SUB;
    float o[64], m[2] = {NEG_INF, NEG_INF}, l[2] = {0.f, 0.f};
#pragma unroll
    for (int i = 0; i < 64; ++i) o[i] = 0.f;
    mbar_wait(smem_addr(&q_full), 0);
    for (int j = 0; j < n_tiles; ++j) {
        const int s = j % STAGES;
        const unsigned k_src = kv_s + s * STAGE_BYTES, v_src = k_src + KV_BYTES;
        // ---- Yours: the consumer's hand-over. Wait until stage s has landed (full[s], parity of use n), run
        // consume_tile(o, m, l, q_mine, k_src, v_src, j * BN, qr0, q_first, seq, causal, scale_log2) on it, then
        // release the stage: once every lane of this warp is past consume_tile, one lane arrives on empty[s].
        mbar_wait(smem_addr(&full[s]), (j / STAGES) & 1);  // use n = j / STAGES of stage s: parity n & 1
        consume_tile(o, m, l, q_mine, k_src, v_src, j * BN, qr0, q_first, seq, causal, scale_log2);
        __syncwarp();
        if (lane == 0) mbar_arrive(smem_addr(&empty[s]));  // one arrival for the warp: stage s may be refilled
    }

    // Given: the epilogue — l summed over the quad, O / l to bf16, rows < seq written straight to global.
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        l[h] += __shfl_xor_sync(0xffffffffu, l[h], 1);
        l[h] += __shfl_xor_sync(0xffffffffu, l[h], 2);
    }
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        const int r = qr0 + 8 * h;
        if (r >= seq) continue;
        __nv_bfloat16* dst = out + (static_cast<size_t>(row0) + r) * D + 2 * (lane % 4);
        const float inv = 1.f / l[h];
#pragma unroll
        for (int i = 0; i < D / 8; ++i)
            *reinterpret_cast<unsigned*>(dst + 8 * i) = pack_bf16(o[4 * i + 2 * h] * inv, o[4 * i + 2 * h + 1] * inv);
    }
}
