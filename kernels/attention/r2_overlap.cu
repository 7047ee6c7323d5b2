// r2_overlap.cu — week 2, day 5, the rung after r1_attention.cu: the same attention forward (bf16 in and out,
// fp32 inside, O = softmax(Q K^T / sqrt(D)) V, causal or not), with the tensor core kept busy while the softmax runs.
//
// What changed from r1_attention.cu (whose consumer runs, per tile, the serial chain QK^T -> wait -> softmax -> PV ->
// wait, and whose two consumer warpgroups are ordered by nothing):
//   New 1, separate K and V rings (the day's exercise, attn_kv): K tiles in a ring of K_STAGES, V tiles in a ring of
//     V_STAGES, each stage with its own full / empty mbarrier; K is released as soon as its QK^T has read it.
//   New 2, intra-warpgroup overlap: in round j a consumer warpgroup issues S_j = Q K_j^T AND O += P_{j-1} V_{j-1}
//     back to back (two commit groups), waits only for the first (wait_group 1), and computes the softmax of S_j
//     while its own PV GEMM still runs on the tensor core.
//   New 3, inter-warpgroup ping-pong: two named barriers make the consumer warpgroups take turns issuing their GEMMs,
//     so that one warpgroup's softmax runs under the other's GEMMs (PINGPONG = 0 drops them: New 1 and 2 alone).
//   New 4, BN = 176 keys per tile at D = 128 (fewer, longer tiles: less per-tile overhead), beside BN = 128.
// FlashAttention-3 (Dao-AILab/flash-attention, hopper/) schedules its forward the same way; this file is the course's
// own code.
//
// SASS to expect in attn_overlap_*: UTMALDG.2D (Q once, K and V per tile), SYNCS.ARRIVE.TRANS64 / SYNCS.PHASECHK
// (the rings), HGMMA.64x{128,176}x16.F32.BF16 with two gdesc operands (SS: QK^T) and HGMMA.64x{128,64}x16 with a
// register A operand (RS: PV), WARPGROUP.DEPBAR.LE gsb0, 0x1 (S ready, PV still in flight) before the MUFU.EX2 of
// the softmax and WARPGROUP.DEPBAR.LE gsb0, 0x0 after them, BAR.SYNC / BAR.ARV with barrier ids 1 and 2 and 256
// threads (the ping-pong; none when PINGPONG = 0), USETMAXREG (producer 24, consumers 240). No LDL / STL.
//
// Tiles (BM, BN, D, K_STAGES, V_STAGES): (128, 128 | 176, 64 | 128, 2..4, 2..4). Block 384 threads = warpgroup 0
// (producer: one elected thread issues every TMA), warpgroups 1 and 2 (consumers: query rows [0, 64) and [64, 128)
// of the block's 128). Grid (ceil(S / BM), B * H); causal blocks run the longest rows first (blockIdx.x reversed).
// Global layout as r1_attention.cu: q, k, v, o are (B, H, S, D) bf16 contiguous, seen by the tensor maps as 2-D
// (B*H*S, D); a K/V tile that runs past S reads the next head's rows (or zero fill) and its keys are masked to -inf.
#include <cuda_bf16.h>
#include "course.cuh"
#include "mbarrier.cuh"
#include "tma.cuh"
#include "warpgroup.cuh"
#include "wgmma.cuh"
#include "softmax.cuh"  // fast_exp2 (MUFU.EX2), pack_bf16 (P as an RS-form A fragment)

namespace attn_ov {

constexpr int BM = 128;                     // query rows per block (2 consumer warpgroups x 64)
constexpr int WG_ROWS = 64;                 // query rows per consumer warpgroup (WGMMA M = 64)
constexpr int CONSUMER_WARPS = 8;           // every empty barrier counts one arrival per consumer warp
constexpr unsigned Q_SUB = WG_ROWS * 128;   // one 64-column slice of a warpgroup's Q: 64 rows x 128 B = 8 KiB
// The ping-pong's named barriers (0 is __syncthreads). Consumer warpgroup c waits on PP_BAR + c before it issues
// its GEMMs; the other warpgroup arrives there once it has issued its own. 256 = 128 that sync + 128 that arrive.
constexpr unsigned PP_BAR = 1, PP_THREADS = 256;
#define NEG_INF (-__int_as_float(0x7f800000))  // -inf (NVRTC has no <cmath> INFINITY)

// S = Q K^T over one K tile (SS form, D / 16 k-steps; the first one overwrites S: scale_d = 0), issued, not waited.
template <int D, int BN>
__device__ __forceinline__ void qk_issue(float (&s)[BN / 2], unsigned q_mine, unsigned k_src) {
    constexpr unsigned KV_SUB = BN * 128;  // one 64-column slice of the K tile: BN rows x 128 B
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {  // k-step kk: slice kk / 4, +32 B per step inside the 128-byte row
        const unsigned qo = (kk / 4) * Q_SUB + (kk % 4) * 32, ko = (kk / 4) * KV_SUB + (kk % 4) * 32;
        if constexpr (BN == 176)
            wgmma_m64n176k16_ss(s, wgmma_desc_sw128(q_mine + qo), wgmma_desc_sw128(k_src + ko), kk > 0);
        else
            wgmma_m64n128k16_ss(s, wgmma_desc_sw128(q_mine + qo), wgmma_desc_sw128(k_src + ko), kk > 0);
    }
}

// O += P V over one V tile (RS form: P's k-step kk = keys 16 kk .. 16 kk + 15 from registers; V read N-major from
// its stage, imm-trans-b = 1, +16 rows x 128 B = 2048 B per k-step, LBO = the slice stride BN x 128 B). Not waited.
template <int D, int BN>
__device__ __forceinline__ void pv_issue(float (&o)[D / 2], const unsigned (&pa)[BN / 16][4], unsigned v_src) {
#pragma unroll
    for (int kk = 0; kk < BN / 16; ++kk) {
        if constexpr (D == 128) wgmma_m64n128k16_rs_tb(o, pa[kk], wgmma_desc_sw128_mn(v_src + kk * 2048, BN * 128));
        else wgmma_m64n64k16_rs_tb(o, pa[kk], wgmma_desc_sw128_mn(v_src + kk * 2048, BN * 128));
    }
}

// The online softmax of one score tile, in place: keys past the sequence (and, causal, after the query) to -inf, the
// new running max m (log2 units), S <- 2^(S * scale_log2 - m), l <- l * alpha + row sums; returns alpha = 2^(m_old -
// m_new) per row, the factor O must be rescaled by once the PV GEMM that still reads the old P has completed.
template <int BN>
__device__ __forceinline__ void online_softmax(float (&s)[BN / 2], float (&m)[2], float (&l)[2], float (&alpha)[2],
                                               int k0, int qr0, int q_first, int seq, int causal, float scale_log2) {
    const int lane = threadIdx.x % 32;
    // Only the last tile (keys past seq) and, causal, the diagonal tiles need the mask: uniform per warpgroup.
    //   key:    k0 ...            seq      (non-causal)        causal, diagonal tile:  key > query -> -inf
    //   S row:  x  x  x  x  x  x | -inf -inf                   row r:  x x x x -inf -inf ...
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
    float mx[2] = {NEG_INF, NEG_INF}, ms[2], rs[2] = {0.f, 0.f};
#pragma unroll
    for (int i = 0; i < BN / 8; ++i) {
        mx[0] = fmaxf(mx[0], fmaxf(s[4 * i], s[4 * i + 1]));
        mx[1] = fmaxf(mx[1], fmaxf(s[4 * i + 2], s[4 * i + 3]));
    }
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 1));  // a row lives on the 4 lanes of a quad
        mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 2));
        const float mn = fmaxf(m[h], mx[h] * scale_log2);
        ms[h] = mn == NEG_INF ? 0.f : mn;  // nothing unmasked yet: subtract 0, never -inf (no NaN)
        alpha[h] = fast_exp2(m[h] - ms[h]);
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
}

// P = S as bf16 pairs, the RS A fragment (wgmma.cuh): k-step kk = S's registers 8 kk .. 8 kk + 7.
template <int BN>
__device__ __forceinline__ void pack_p(const float (&s)[BN / 2], unsigned (&pa)[BN / 16][4]) {
#pragma unroll
    for (int kk = 0; kk < BN / 16; ++kk)
#pragma unroll
        for (int r = 0; r < 4; ++r) pa[kk][r] = pack_bf16(s[8 * kk + 2 * r], s[8 * kk + 2 * r + 1]);
}

// O *= alpha (per row) once the PV GEMM that wrote O has completed, then P = bf16(S) into the registers it freed.
template <int D, int BN>
__device__ __forceinline__ void rescale_and_pack(float (&o)[D / 2], const float (&alpha)[2], const float (&s)[BN / 2],
                                                 unsigned (&pa)[BN / 16][4]) {
#pragma unroll
    for (int i = 0; i < D / 8; ++i) {
        o[4 * i + 0] *= alpha[0];
        o[4 * i + 1] *= alpha[0];
        o[4 * i + 2] *= alpha[1];
        o[4 * i + 3] *= alpha[1];
    }
    pack_p<BN>(s, pa);
}

template <int BN>
__device__ __forceinline__ void fence_p(unsigned (&pa)[BN / 16][4]) {
#pragma unroll
    for (int kk = 0; kk < BN / 16; ++kk) wgmma_fence_operand(pa[kk]);
}

// The ping-pong (PINGPONG = 1). Consumer warpgroup c (0 or 1) issues its GEMMs between
//     pp_wait(c):   bar.sync   PP_BAR + c,     256     (my turn: the other warpgroup has issued its previous round)
//     pp_pass(c):   bar.arrive PP_BAR + 1 - c, 256     (the other warpgroup's turn)
// Warpgroup 1 arrives once on barrier PP_BAR before its first round, so warpgroup 0 goes first; it skips its pass in
// its last round (warpgroup 0 never waits again), so both barriers end with every phase complete: barrier PP_BAR
// sees n syncs of warpgroup 0 and 1 + (n - 1) arrivals of warpgroup 1; barrier PP_BAR + 1, n arrivals of warpgroup
// 0 and n syncs of warpgroup 1 (n = rounds = K/V tiles of the block, the same for both warpgroups).
//
//   tensor core:  | QK0 PV0 (wg 0) | QK1 PV1 (wg 1) | QK0 PV0 (wg 0) | QK1 PV1 (wg 1) | ...
//   wg 0:         issue, pass ---- softmax of its S ----- wait, issue, pass ---- softmax ----
//   wg 1:           wait ---------- issue, pass ---- softmax of its S ------ wait, issue, pass ---
// (QKc = S_j of warpgroup c, PVc = its O += P_{j-1} V_{j-1}: each softmax runs under the other warpgroup's GEMMs.)
template <bool PINGPONG>
__device__ __forceinline__ void pp_wait(int wg) {
    if constexpr (PINGPONG) {
        if (wg == 0) named_barrier_sync(PP_BAR, PP_THREADS);
        else named_barrier_sync(PP_BAR + 1, PP_THREADS);
    }
}

template <bool PINGPONG>
__device__ __forceinline__ void pp_pass(int wg, bool last) {
    if constexpr (PINGPONG) {
        if (wg == 0) named_barrier_arrive(PP_BAR + 1, PP_THREADS);
        else if (!last) named_barrier_arrive(PP_BAR, PP_THREADS);
    }
}

// ---- the producer warpgroup: Q once, then K one tile ahead of V (one elected thread issues every TMA load)
template <int D, int BN, int K_STAGES, int V_STAGES>
__device__ __forceinline__ void produce(const CUtensorMap* q_map, const CUtensorMap* k_map, const CUtensorMap* v_map,
                                        unsigned long long* k_full, unsigned long long* k_empty,
                                        unsigned long long* v_full, unsigned long long* v_empty,
                                        unsigned long long& q_full, unsigned q_s, unsigned k_s, unsigned v_s, int row0,
                                        int q0, int n_tiles) {
    constexpr int NSUB = D / 64;
    constexpr unsigned KV_SUB = BN * 128;
    constexpr unsigned Q_BYTES = BM * D * 2;
    constexpr unsigned TILE_BYTES = BN * D * 2;
    setmaxnreg_dec<24>();                             // 128 x 24 + 256 x 240 = 64512 <= 65536 registers
    if (threadIdx.x / 32 != 0 || !elect_one_sync()) return;
    // Q: once, 2 x NSUB boxes of (64 rows, 64 cols) = Q_BYTES on q_full.
    mbar_arrive_expect_tx(smem_addr(&q_full), Q_BYTES);
    for (int w = 0; w < 2; ++w)
        for (int c = 0; c < NSUB; ++c)
            tma_load_2d(q_s + (w * NSUB + c) * Q_SUB, q_map, c * 64, row0 + q0 + w * WG_ROWS, smem_addr(&q_full));
    // Step j: K_j (j < n_tiles), then V_{j-1} (j > 0): K runs one tile ahead of V, the order in which the
    // consumers' round j needs them (S_j = Q K_j^T with O += P_{j-1} V_{j-1}). Each tile: NSUB boxes of
    // (BN, 64), TILE_BYTES on its full barrier (rows past the tensor's end are zero-filled and still counted).
    for (int j = 0; j <= n_tiles; ++j) {
        if (j < n_tiles) {
            const int s = j % K_STAGES, n = j / K_STAGES;
            mbar_wait(smem_addr(&k_empty[s]), (n & 1) ^ 1);
            mbar_arrive_expect_tx(smem_addr(&k_full[s]), TILE_BYTES);
            for (int c = 0; c < NSUB; ++c)
                tma_load_2d(k_s + s * TILE_BYTES + c * KV_SUB, k_map, c * 64, row0 + j * BN, smem_addr(&k_full[s]));
        }
        if (j > 0) {
            const int t = j - 1, s = t % V_STAGES, n = t / V_STAGES;
            mbar_wait(smem_addr(&v_empty[s]), (n & 1) ^ 1);
            mbar_arrive_expect_tx(smem_addr(&v_full[s]), TILE_BYTES);
            for (int c = 0; c < NSUB; ++c)
                tma_load_2d(v_s + s * TILE_BYTES + c * KV_SUB, v_map, c * 64, row0 + t * BN, smem_addr(&v_full[s]));
        }
    }
}

// ---- round 0: S_0 = Q K_0^T alone (no P yet), K_0 released, then its softmax
template <int D, int BN, bool PINGPONG>
__device__ __forceinline__ void first_round(float (&sacc)[BN / 2], float (&m)[2], float (&l)[2], float (&alpha)[2],
                                            unsigned long long* k_full, unsigned long long* k_empty, unsigned q_mine,
                                            unsigned k_s, int wg, int lane, int n_tiles, int qr0, int q_first, int seq,
                                            int causal, float scale_log2) {
    mbar_wait(smem_addr(&k_full[0]), 0);
    pp_wait<PINGPONG>(wg);
    wgmma_fence();
    qk_issue<D, BN>(sacc, q_mine, k_s);
    wgmma_commit();
    pp_pass<PINGPONG>(wg, n_tiles == 1);
    wgmma_wait<0>();
    wgmma_fence_operand(sacc);
    __syncwarp();
    if (lane == 0) mbar_arrive(smem_addr(&k_empty[0]));  // K_0 read
    online_softmax<BN>(sacc, m, l, alpha, 0, qr0, q_first, seq, causal, scale_log2);
    wgmma_fence_operand(sacc);
}

// ---- the last PV, outside the ping-pong: O += P_{n-1} V_{n-1}, then V_{n-2} and V_{n-1} released
template <int D, int BN, int V_STAGES>
__device__ __forceinline__ void last_pv(float (&oacc)[D / 2], const float (&alpha)[2], float (&sacc)[BN / 2],
                                        unsigned (&pa)[BN / 16][4], unsigned long long* v_full,
                                        unsigned long long* v_empty, unsigned v_s, int n_tiles, int lane) {
    constexpr unsigned TILE_BYTES = BN * D * 2;
    const int t = n_tiles - 1, vs = t % V_STAGES;
    mbar_wait(smem_addr(&v_full[vs]), (t / V_STAGES) & 1);
    wgmma_wait<0>();                                  // PV_{n-2} complete (n = 1: nothing in flight)
    wgmma_fence_operand(oacc);
    fence_p<BN>(pa);
    __syncwarp();
    if (t >= 1 && lane == 0) mbar_arrive(smem_addr(&v_empty[(t - 1) % V_STAGES]));  // V_{n-2} read
    rescale_and_pack<D, BN>(oacc, alpha, sacc, pa);
    wgmma_fence();
    pv_issue<D, BN>(oacc, pa, v_s + vs * TILE_BYTES);
    wgmma_commit();
    wgmma_wait<0>();
    wgmma_fence_operand(oacc);
    fence_p<BN>(pa);
    __syncwarp();
    if (lane == 0) mbar_arrive(smem_addr(&v_empty[vs]));  // V_{n-1} read
}

// ---- epilogue: l summed over the quad, O / l, bf16 pairs straight to global (rows < seq only)
template <int D>
__device__ __forceinline__ void epilogue(const float (&oacc)[D / 2], float (&l)[2], __nv_bfloat16* o, int row0,
                                         int qr0, int seq, int lane) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        l[h] += __shfl_xor_sync(0xffffffffu, l[h], 1);
        l[h] += __shfl_xor_sync(0xffffffffu, l[h], 2);
    }
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        const int r = qr0 + 8 * h;
        if (r >= seq) continue;
        __nv_bfloat16* dst = o + (static_cast<size_t>(row0) + r) * D + 2 * (lane % 4);
        const float inv = 1.f / l[h];
#pragma unroll
        for (int i = 0; i < D / 8; ++i)
            *reinterpret_cast<unsigned*>(dst + 8 * i) = pack_bf16(oacc[4 * i + 2 * h] * inv, oacc[4 * i + 2 * h + 1] * inv);
    }
}

template <int D, int BN, int K_STAGES, int V_STAGES, bool PINGPONG>
__device__ __forceinline__ void attention_body(const CUtensorMap* q_map, const CUtensorMap* k_map,
                                               const CUtensorMap* v_map, __nv_bfloat16* o, int seq, int causal) {
    constexpr int NSUB = D / 64;                          // 64-column slices (one 128-byte swizzle row each)
    constexpr unsigned KV_SUB = BN * 128;                 // one slice of a K or V tile: BN rows x 128 B
    constexpr unsigned Q_BYTES = BM * D * 2;              // 2 warpgroups x NSUB slices x 8 KiB
    constexpr unsigned TILE_BYTES = BN * D * 2;           // one K (or V) tile = one stage of its ring
    static_assert(KV_SUB % 1024 == 0, "K/V slices must start on 1024-byte swizzle atoms (BN a multiple of 8)");
    static_assert(1024 + Q_BYTES + (K_STAGES + V_STAGES) * TILE_BYTES <= 227 * 1024, "the rings do not fit 227 KiB");
    __shared__ __align__(8) unsigned long long k_full[K_STAGES];   // 1 arrival (expect_tx) + TILE_BYTES: K landed
    __shared__ __align__(8) unsigned long long k_empty[K_STAGES];  // CONSUMER_WARPS arrivals: K read by QK^T
    __shared__ __align__(8) unsigned long long v_full[V_STAGES];   // 1 arrival (expect_tx) + TILE_BYTES: V landed
    __shared__ __align__(8) unsigned long long v_empty[V_STAGES];  // CONSUMER_WARPS arrivals: V read by PV
    __shared__ __align__(8) unsigned long long q_full;             // 1 arrival + Q_BYTES
    extern __shared__ unsigned char smem_raw[];
    // 128B-swizzled tiles start on a 1024-byte boundary (descriptor base offset 0): the launcher adds 1024 B of slack.
    const unsigned base = (smem_addr(smem_raw) + 1023u) & ~1023u;
    const unsigned q_s = base;                            // [wg][slice][64 rows][128 B]
    const unsigned k_s = base + Q_BYTES;                  // K stage s at k_s + s * TILE_BYTES
    const unsigned v_s = k_s + K_STAGES * TILE_BYTES;     // V stage s at v_s + s * TILE_BYTES

    const int m_block = causal ? gridDim.x - 1 - blockIdx.x : blockIdx.x;  // causal: long rows first
    const int row0 = blockIdx.y * seq;                    // this head's first row in the 2-D (B*H*S, D) view
    const int q0 = m_block * BM;
    const int kv_end = causal ? min(seq, q0 + BM) : seq;  // keys this block needs: [0, kv_end)
    const int n_tiles = (kv_end + BN - 1) / BN;           // >= 1: every block has a key
    // Tile j (keys j * BN ..): K in K stage j % K_STAGES, that stage's use j / K_STAGES; V in V stage j % V_STAGES,
    // use j / V_STAGES. Use n of a stage waits full with parity n & 1; its refill waits empty with parity
    // (n & 1) ^ 1 (n = 0: parity 1, the phase before the first, complete from the start: no wait).

    if (threadIdx.x == 0) {
        for (int s = 0; s < K_STAGES; ++s) {
            mbar_init(smem_addr(&k_full[s]), 1);
            mbar_init(smem_addr(&k_empty[s]), CONSUMER_WARPS);
        }
        for (int s = 0; s < V_STAGES; ++s) {
            mbar_init(smem_addr(&v_full[s]), 1);
            mbar_init(smem_addr(&v_empty[s]), CONSUMER_WARPS);
        }
        mbar_init(smem_addr(&q_full), 1);
        fence_barrier_init();
    }
    __syncthreads();

    if (warpgroup_index() == 0) {                         // the producer warpgroup: one thread issues every load
        produce<D, BN, K_STAGES, V_STAGES>(q_map, k_map, v_map, k_full, k_empty, v_full, v_empty, q_full, q_s, k_s,
                                           v_s, row0, q0, n_tiles);
        return;
    }

    setmaxnreg_inc<240>();
    const int wg = warpgroup_index() - 1;                 // consumer 0 or 1
    const int tid = threadIdx.x % 128, lane = tid % 32;
    const int q_first = q0 + wg * WG_ROWS;                // this warpgroup's first query
    const int qr0 = q_first + (tid / 32) * 16 + lane / 4; // this thread's rows: qr0 and qr0 + 8 (accumulator layout)
    const float scale_log2 = 1.4426950408889634f * rsqrtf(static_cast<float>(D));  // log2(e) / sqrt(D)
    const unsigned q_mine = q_s + wg * NSUB * Q_SUB;

    float oacc[D / 2];                                    // O: 64 x D fp32 over the warpgroup
    float sacc[BN / 2];                                   // S_j, then P_j in fp32 (in place)
    unsigned pa[BN / 16][4];                              // P_{j-1} as bf16 pairs, read by the PV GEMM in flight
    float m[2] = {NEG_INF, NEG_INF}, l[2] = {0.f, 0.f}, alpha[2];
#pragma unroll
    for (int i = 0; i < D / 2; ++i) oacc[i] = 0.f;

    if (PINGPONG && wg == 1) named_barrier_arrive(PP_BAR, PP_THREADS);  // warpgroup 0 takes the first turn
    mbar_wait(smem_addr(&q_full), 0);                     // only use: parity 0

    // ---- round 0: S_0 alone (no P yet), then its softmax (alpha_0 = 0: O is 0 and stays 0).
    first_round<D, BN, PINGPONG>(sacc, m, l, alpha, k_full, k_empty, q_mine, k_s, wg, lane, n_tiles, qr0, q_first, seq,
                                 causal, scale_log2);

    // ---- rounds 1 .. n-1. Round j:
    //   wait k_full(j)                     K_j landed (a spin loop: a block of its own in SASS, see below)
    //   wait_group 0                       O += P_{j-2} V_{j-2} (issued in round j-1) complete; release V_{j-2}
    //   O *= alpha_{j-1}; P_{j-1} = bf16(S)  (registers the PV GEMM read until the wait)
    //   [ping-pong: my turn]  S_j = Q K_j^T (group 1); wait v_full(j-1); O += P_{j-1} V_{j-1} (group 2)  [pass]
    //   wait_group 1                       S_j complete, K_j read: release K_j; PV_{j-1} still runs ...
    //   softmax of S_j                     ... under this MUFU / FMA work
    // The wait_group 0 of round j sits behind round j+1's k_full spin loop on purpose: in the softmax's own block the
    // SASS scheduler, which does not model how long WARPGROUP.DEPBAR waits, slots it into the first stall of the
    // max reduction — and the whole softmax then runs after the PV GEMM instead of under it. It does not move the
    // wait (or the exponentials) across the loop.
    for (int j = 1; j < n_tiles; ++j) {
        const int ks = j % K_STAGES, vs = (j - 1) % V_STAGES;
        mbar_wait(smem_addr(&k_full[ks]), (j / K_STAGES) & 1);
        wgmma_wait<0>();                                  // PV_{j-2} complete (round 1: nothing in flight)
        wgmma_fence_operand(oacc);
        fence_p<BN>(pa);                                  // P_{j-2} stayed in its registers until here
        __syncwarp();
        if (j >= 2 && lane == 0) mbar_arrive(smem_addr(&v_empty[(j - 2) % V_STAGES]));  // V_{j-2} read
        rescale_and_pack<D, BN>(oacc, alpha, sacc, pa);   // O *= alpha_{j-1}, P_{j-1} = bf16(S_{j-1} after softmax)
        pp_wait<PINGPONG>(wg);
        wgmma_fence();                                    // P and O were written by ordinary instructions
        qk_issue<D, BN>(sacc, q_mine, k_s + ks * TILE_BYTES);
        wgmma_commit();
        mbar_wait(smem_addr(&v_full[vs]), ((j - 1) / V_STAGES) & 1);
        pv_issue<D, BN>(oacc, pa, v_s + vs * TILE_BYTES);
        wgmma_commit();
        pp_pass<PINGPONG>(wg, j == n_tiles - 1);
        wgmma_wait<1>();                                  // S_j complete (K_j read); PV_{j-1} may still run
        wgmma_fence_operand(sacc);
        __syncwarp();
        if (lane == 0) mbar_arrive(smem_addr(&k_empty[ks]));
        online_softmax<BN>(sacc, m, l, alpha, j * BN, qr0, q_first, seq, causal, scale_log2);
        wgmma_fence_operand(sacc);
    }

    // ---- the last PV, outside the ping-pong: O += P_{n-1} V_{n-1} (nothing of this warpgroup is left to overlap).
    last_pv<D, BN, V_STAGES>(oacc, alpha, sacc, pa, v_full, v_empty, v_s, n_tiles, lane);

    epilogue<D>(oacc, l, o, row0, qr0, seq, lane);
}

}  // namespace attn_ov

// One entry per (D, BN, K_STAGES, V_STAGES, PINGPONG), all with the call shape (q_map, k_map, v_map, o, seq,
// causal); the launcher (launch.py, OVERLAP) names them attn_overlap_d{D}_n{BN}_k{K}v{V}_pp{0|1}.
#define ATTN_OV_ENTRY(D, BN, KS, VS, PP)                                                                             \
    extern "C" __global__ void __launch_bounds__(384, 1) attn_overlap_d##D##_n##BN##_k##KS##v##VS##_pp##PP(         \
        const __grid_constant__ CUtensorMap q_map, const __grid_constant__ CUtensorMap k_map,                       \
        const __grid_constant__ CUtensorMap v_map, __nv_bfloat16* o, int seq, int causal) {                         \
        attn_ov::attention_body<D, BN, KS, VS, PP != 0>(&q_map, &k_map, &v_map, o, seq, causal);                    \
    }

ATTN_OV_ENTRY(128, 128, 3, 2, 1)   // the default at D = 128 (shared memory: 1 + 32 + 5 x 32 = 193 KiB)
ATTN_OV_ENTRY(128, 128, 3, 2, 0)   // ping-pong off: the intra-warpgroup overlap alone
ATTN_OV_ENTRY(128, 128, 2, 2, 1)   // rings of 2 and 2
ATTN_OV_ENTRY(128, 128, 3, 3, 1)   // rings of 3 and 3 (225 KiB)
ATTN_OV_ENTRY(128, 176, 2, 2, 1)   // 176-key tiles (1 + 32 + 4 x 44 = 209 KiB)
ATTN_OV_ENTRY(128, 176, 2, 2, 0)
ATTN_OV_ENTRY(64, 128, 4, 4, 1)    // D = 64: tiles of 16 KiB (1 + 16 + 8 x 16 = 145 KiB)
ATTN_OV_ENTRY(64, 128, 4, 4, 0)
ATTN_OV_ENTRY(64, 176, 3, 3, 1)    // (1 + 16 + 6 x 22 = 149 KiB)
