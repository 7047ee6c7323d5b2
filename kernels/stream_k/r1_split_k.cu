// r1_split_k.cu — week 3 day 2, rung 1: split-K. The tiles of C are too few to fill the GPU when M is small (an LLM's
// decode rows: M = 64 or 128 gives N / 256 tiles of (128, 256) — 16 to 224 CTAs for 132 SMs), so each tile's K is cut
// into `splits` ranges, one CTA per (tile, range), and the partial sums meet in an fp32 workspace written by the TMA
// (stores into a slot per split, or reduce-adds into one: SPLITK_REDUCE), finished by the tile's last CTA.
//
// Same GEMM as week 2's ladder (kernels/gemm/r1_tiled.cu): C (M, N) = A (M, K) . B (N, K)^T, bf16 in, fp32 accumulate,
// bf16 out, A and B both K-major; K % 8 == 0, N % 8 == 0.
//
// Work: unit u = tile * splits + split (the splits of a tile side by side in the grid, so they run at the same time);
// tile = tile row * tiles_n + tile col; split s owns k-tiles [s * per, min((s + 1) * per, ktiles)), per = ceil(ktiles /
// splits) (the launcher passes splits = ceil(ktiles / per): no range is empty). One unit per CTA, grid = tiles x splits.
//
// Mainloop: week 2's rung 4 (r4_persistent.cu) without the persistence: a (128, 256) tile, 384 threads — the producer
// (warpgroup 0, one thread issues the TMA) and two consumers (warpgroup c in {1, 2} owns rows 64 (c - 1) .. + 63 and
// issues wgmma m64n256k16: 128 fp32 accumulators per thread), a STAGES-deep ring of 48 KiB stages, wgmma_wait<1>.
//
// Epilogue, splits == 1: each consumer writes its 64 x 256 accumulator to C as bf16 (wgmma_store.cuh's store_acc).
// Epilogue, splits > 1 — the fix-up (the day's graded idea):
//   1. both consumers wait on named barrier 1 (256 threads): every wgmma has retired, the ring is free to reuse;
//   2. consumer c writes its 64 x 256 fp32 partial into the ring at c x 64 KiB as 8 boxes of (64 rows, 32 fp32),
//      128B-swizzled (the 16-byte chunk q of row r at chunk q ^ (r % 8): a warp's float2 stores touch 16 chunks x 2,
//      two wavefronts, no bank conflict), fence.proxy.async, named barrier 2 + c (its 128 threads);
//   3. one thread writes those boxes to the fp32 workspace W by TMA, commits them and waits for the writes to complete
//      (bulk_wait<0>, not .read: the partial must be in W before anyone reads it), then a proxy fence and a gpu-scope
//      fence, and takes a ticket: old = atomicAdd(&flags[2 tile + c], 1). Two ways to write (SPLITK_REDUCE):
//        0 (the default): 8 TMA stores into this split's own slot of W (splits slots of slot_rows = 64 ceil(M / 64)
//          rows each: W is (splits x slot_rows, N); rows past M land in the slot's padding, never in the next slot);
//        1: 8 TMA reduce-adds into one W (M, N): W += partial, each fp32 add done at L2 (clipped at (M, N)). One
//          read back instead of splits - 1, but every element is an L2 atomic. The H200 sweep (sweep_h200.json, the
//          rounds of both at the model's split): reduce ahead at 8 splits of 16 tiles (N = 4096: the last CTA's
//          gather of 7 slots is the longer wait), behind everywhere else it ran (15 of 19 shapes; down to a third).
//   4. the consumer whose ticket is the last (old == splits - 1) holds the only CTA that knows every partial is in W:
//      after a gpu-scope fence it gathers its 64 x 256 sums (ld.global.cg: L2, never a stale L1 line) — slots: its own
//      partial plus the other splits' slots; reduce: W itself, zeroed behind it for the next launch — writes them to
//      C as bf16 and resets the ticket to 0. Nobody waits for anybody: the last to arrive finishes the tile (no spin,
//      so no deadlock whatever order the CTAs are scheduled in); the workspace needs no memset between launches.
//   With reduce-adds the order of the adds varies from run to run (C not bitwise reproducible when splits > 1); the
//   slots are added in split order by one thread per element, but which split is last varies: the same holds there.
//
//   W tile of consumer c, 64 x 256 fp32 = 8 boxes of (64, 32):   | box 0 | box 1 | ... | box 7 |   8 KiB each
//   each 1024-byte aligned in shared memory (the swizzle atom), rows of 128 bytes = 32 fp32.
//
// SASS you should see: UTMALDG.2D (A, B), HGMMA.64x256x16.F32.BF16, UTMASTG.2D (slots) or UTMAREDG.2D.ADD (reduce),
// ATOMG.E.ADD.STRONG.GPU (the ticket), LDG.E.64.STRONG.GPU (the last consumer's reads of W), USETMAXREG.
//
// Launch contract (kernels/stream_k/launch.py): block = 384 threads; grid = tiles x splits; dynamic shared memory =
// STAGES x 48 KiB + 1 KiB; A and B tensor maps with box (128, 64), 128B swizzle; W's map fp32 (splits x slot_rows, N)
// (reduce: (M, N), zero before the first launch), box (64, 32), 128B swizzle; flags: 2 x tiles int32, zero before the
// first launch (the launcher's workspace, one per stream).

#include "course.cuh"
#include "mbarrier.cuh"
#include "tma.cuh"
#include "warpgroup.cuh"
#include "wgmma.cuh"
#include "wgmma_store.cuh"
#include <cuda_bf16.h>

#ifndef SPLITK_STAGES
#define SPLITK_STAGES 4
#endif
#ifndef SPLITK_BM  // tile rows: 128 (two consumer warpgroups) or 64 (one)
#define SPLITK_BM 128
#endif
#ifndef SPLITK_BN  // tile columns: 256 or 128 (the wgmma's N)
#define SPLITK_BN 256
#endif
#ifndef SPLITK_CTAS  // CTAs an SM holds at once (__launch_bounds__'s minimum): 2 where two rings fit
#define SPLITK_CTAS 1
#endif
#ifndef SPLITK_REDUCE  // 1: the partials added into one fp32 W by TMA reduce-add; 0: each split's partial in its slot
#define SPLITK_REDUCE 0
#endif

constexpr int BM = SPLITK_BM, BN = SPLITK_BN, BK = 64, STAGES = SPLITK_STAGES;  // (BM, BN, BK, STAGES)
constexpr int CONSUMERS = BM / 64, THREADS = 128 * (1 + CONSUMERS);
static_assert((BM == 64 || BM == 128) && (BN == 64 || BN == 128 || BN == 256), "64 or 128 rows, 64-256 columns");
constexpr int B_BOX = BN < 128 ? BN : 128;                            // B's box rows (its tensor map: (B_BOX, 64))
constexpr int BOX_BYTES = B_BOX * BK * 2;                             // one (128, 64) bf16 box: 16 KiB
constexpr int TILE_A = BM * BK * 2, TILE_B = BN * BK * 2;             // 16 KiB + 32 KiB (default)
constexpr int STAGE_BYTES = TILE_A + TILE_B;                          // 48 KiB per k-tile (default)
constexpr int W_COLS = 32;                                            // (64, 32) fp32 box: 128-byte rows
constexpr int W_BOX_BYTES = 64 * W_COLS * 4;                          // 8 KiB
constexpr int W_BOXES = BN / W_COLS;                                  // 8 boxes per consumer: 64 KiB (default)
static_assert(STAGES * STAGE_BYTES >= CONSUMERS * W_BOXES * W_BOX_BYTES, "the ring holds every consumer's partial");

struct Unit {
    int m0, n0, k0, k1, tile, split;
};

__device__ __forceinline__ Unit unit_of(int u, int N, int K, int splits) {
    const int tiles_n = (N + BN - 1) / BN, ktiles = (K + BK - 1) / BK, per = (ktiles + splits - 1) / splits;
    const int tile = u / splits, split = u % splits;
    return {(tile / tiles_n) * BM, (tile % tiles_n) * BN, split * per, min((split + 1) * per, ktiles), tile, split};
}

// The producer: one thread streams the unit's k-tiles of A and B through the ring.
__device__ __forceinline__ void produce(const CUtensorMap* a_map, const CUtensorMap* b_map, unsigned base,
                                        unsigned long long* full, unsigned long long* empty, const Unit& w) {
    for (int kt = w.k0, i = 0; kt < w.k1; ++kt, ++i) {
        const int s = i % STAGES, n = i / STAGES;
        const unsigned sA = base + s * STAGE_BYTES, sB = sA + TILE_A, fb = smem_addr(&full[s]);
        mbar_wait(smem_addr(&empty[s]), (n & 1) ^ 1);
        mbar_arrive_expect_tx(fb, STAGE_BYTES);  // A (BM rows) + BN / B_BOX boxes of B land on full[s]
        tma_load_2d(sA, a_map, kt * BK, w.m0, fb);
#pragma unroll
        for (int h = 0; h < BN / B_BOX; ++h) tma_load_2d(sB + h * BOX_BYTES, b_map, kt * BK, w.n0 + B_BOX * h, fb);
    }
}

// A consumer's k-loop: acc (its 64 rows of the tile) += A . B^T over the unit's k-tiles.
__device__ __forceinline__ void consume(float (&acc)[BN / 2], unsigned base, unsigned long long* full,
                                        unsigned long long* empty, const Unit& w, int c) {
    int prev = -1;
    for (int kt = w.k0, i = 0; kt < w.k1; ++kt, ++i) {
        const int s = i % STAGES, n = i / STAGES;
        const unsigned sA = base + s * STAGE_BYTES, sB = sA + TILE_A;
        mbar_wait(smem_addr(&full[s]), n & 1);
        const unsigned long long da = wgmma_desc_sw128(sA + c * 64 * 128), db = wgmma_desc_sw128(sB);
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < BK / 16; ++kk) {
#if SPLITK_BN == 256
            wgmma_m64n256k16_ss(acc, wgmma_desc_advance(da, 32 * kk), wgmma_desc_advance(db, 32 * kk), 1);
#elif SPLITK_BN == 128
            wgmma_m64n128k16_ss(acc, wgmma_desc_advance(da, 32 * kk), wgmma_desc_advance(db, 32 * kk), 1);
#else
            wgmma_m64n64k16_ss(acc, wgmma_desc_advance(da, 32 * kk), wgmma_desc_advance(db, 32 * kk), 1);
#endif
        }
        wgmma_commit();
        wgmma_wait<1>();  // the previous k-tile's group has retired: its stage goes back to the producer
        if (prev >= 0 && threadIdx.x % 32 == 0) mbar_arrive(smem_addr(&empty[prev]));
        prev = s;
    }
    wgmma_wait<0>();
    wgmma_fence_operand(acc);
}

// Step 2 of the fix-up: this thread's fragment of the partial into the swizzled (64, 32) boxes at `stage`.
// Fragment (wgmma.cuh): acc[4j + 2h + {0, 1}] -> row 16 w + l / 4 + 8 h, cols 8 j + 2 (l % 4) + {0, 1}.
__device__ __forceinline__ void stage_partial(const float (&acc)[BN / 2], unsigned stage) {
    const int t = threadIdx.x % 128, w = t / 32, l = t % 32;
#pragma unroll
    for (int j = 0; j < BN / 8; ++j) {
        const int col = 8 * j + 2 * (l % 4), box = col / W_COLS, q = (col % W_COLS) / 4;
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int row = 16 * w + l / 4 + 8 * h;
            const unsigned addr = stage + box * W_BOX_BYTES + row * 128 + ((q ^ (row % 8)) * 16) + (col % 4) * 4;
            asm volatile("st.shared.v2.f32 [%0], {%1, %2};" ::"r"(addr), "f"(acc[4 * j + 2 * h]),
                         "f"(acc[4 * j + 2 * h + 1]) : "memory");
        }
    }
}

// Step 4: the last consumer of the tile's rows gathers the sums. SPLITK_REDUCE: W holds them (every split added its
// partial); it reads them and zeroes W for the next launch. Slots: W holds each split's partial in its own slot of
// `slot_rows` rows; it adds the other splits' slots to its own partial (still in its registers).
// Fragment (wgmma.cuh): acc[4j + 2h + {0, 1}] -> row 16 w + l / 4 + 8 h, cols 8 j + 2 (l % 4) + {0, 1}.
__device__ __forceinline__ void take_sums(float (&acc)[BN / 2], float* W, int r0, int c0, int M, int N,
                                          int slot_rows, int splits, int mine) {
    const int t = threadIdx.x % 128, w = t / 32, l = t % 32;
#if SPLITK_REDUCE
    (void)slot_rows, (void)mine;
    splits = 1;  // one W: one pass
#endif
    constexpr int J = BN == 256 ? 8 : BN == 128 ? 4 : 8;  // column groups of 8 per pass: 16 (8) loads in flight a thread (all spill)
#pragma unroll
    for (int j0 = 0; j0 < BN / 8; j0 += J) {
        for (int s = 0; s < splits; ++s) {
#if SPLITK_REDUCE
            float* Ws = W;
#else
            if (s == mine) continue;  // my own partial is still in acc
            float* Ws = W + static_cast<size_t>(s) * slot_rows * N;
#endif
#pragma unroll
            for (int j = j0; j < j0 + J; ++j) {
                const int col = c0 + 8 * j + 2 * (l % 4);
#pragma unroll
                for (int h = 0; h < 2; ++h) {
                    const int row = r0 + 16 * w + l / 4 + 8 * h;
                    if (row >= M || col >= N) continue;
                    float2* p = reinterpret_cast<float2*>(Ws + static_cast<size_t>(row) * N + col);
                    const float2 v = __ldcg(p);
#if SPLITK_REDUCE
                    acc[4 * j + 2 * h] = v.x;
                    acc[4 * j + 2 * h + 1] = v.y;
                    __stcg(p, make_float2(0.f, 0.f));  // W zero again for the next launch
#else
                    acc[4 * j + 2 * h] += v.x;
                    acc[4 * j + 2 * h + 1] += v.y;
#endif
                }
            }
        }
    }
}

// Steps 1-4 for consumer c (its rows r0 .. r0 + 63 of the tile); all 256 consumer threads call it.
__device__ __forceinline__ void fix_up(float (&acc)[BN / 2], const CUtensorMap* w_map, float* W, int* flags,
                                       __nv_bfloat16* C, unsigned base, const Unit& u, int c, int M, int N,
                                       int splits, int slot_rows, int* last) {
    named_barrier_sync(1, 128 * CONSUMERS);  // 1. every consumer is past its last wgmma: the ring is free
    const int r0 = u.m0 + 64 * c;
    if (r0 >= M) return;  // rows wholly below M: no partial, no ticket (the same for every split of this tile)
    const unsigned stage = base + c * W_BOXES * W_BOX_BYTES;
    stage_partial(acc, stage);  // 2.
    fence_proxy_async();        // the st.shared above before the TMA reads them
    named_barrier_sync(2 + c, 128);
    if (threadIdx.x % 128 == 0) {  // 3.
        for (int b = 0; b < W_BOXES; ++b)
#if SPLITK_REDUCE
            tma_reduce_add_2d(w_map, u.n0 + W_COLS * b, r0, stage + b * W_BOX_BYTES);    // W += partial, at L2
#else
            tma_store_2d(w_map, u.n0 + W_COLS * b, u.split * slot_rows + r0, stage + b * W_BOX_BYTES);  // my slot
#endif
        bulk_commit();
        bulk_wait<0>();  // the writes are done in W (global), not only read out of shared memory
        fence_proxy_async_global();  // the async proxy's writes before the ticket
        __threadfence();
        const int old = atomicAdd(&flags[2 * u.tile + c], 1);
        last[c] = old == splits - 1;
        if (last[c]) {
            __threadfence();  // acquire: every other split's adds are visible to this CTA from here on
            flags[2 * u.tile + c] = 0;
        }
    }
    named_barrier_sync(2 + c, 128);
    if (!last[c]) return;
    take_sums(acc, W, r0, u.n0, M, N, slot_rows, splits, u.split);  // 4.
    store_acc<BN>(C, acc, r0, u.n0, M, N);
}

extern "C" __global__ void __launch_bounds__(THREADS, SPLITK_CTAS)
gemm_split_k(const __grid_constant__ CUtensorMap a_map, const __grid_constant__ CUtensorMap b_map,
             const __grid_constant__ CUtensorMap w_map, float* __restrict__ W, int* __restrict__ flags,
             __nv_bfloat16* __restrict__ C, int M, int N, int K, int splits, int slot_rows) {
    extern __shared__ unsigned char smem_raw[];
    const unsigned base = (smem_addr(smem_raw) + 1023u) & ~1023u;
    __shared__ __align__(8) unsigned long long full[STAGES], empty[STAGES];
    __shared__ int last[2];
    const Unit u = unit_of(blockIdx.x, N, K, splits);
    if (threadIdx.x == 0) {
        for (int s = 0; s < STAGES; ++s) {
            mbar_init(smem_addr(&full[s]), 1);
            mbar_init(smem_addr(&empty[s]), CONSUMERS * 4);  // every consumer warp
        }
        fence_barrier_init();
    }
    __syncthreads();

    const int wg = warpgroup_index();
    if (wg == 0) {  // ---------------- producer ----------------
        if constexpr (CONSUMERS == 2) setmaxnreg_dec<40>();
        if (threadIdx.x == 0) produce(&a_map, &b_map, base, full, empty, u);
        return;
    }
    if constexpr (CONSUMERS == 2) setmaxnreg_inc<232>();  // ---------------- consumers ----------------
    const int c = wg - 1;
    float acc[BN / 2];
#pragma unroll
    for (int i = 0; i < BN / 2; ++i) acc[i] = 0.f;
    consume(acc, base, full, empty, u, c);
    if (splits == 1) {
        store_acc<BN>(C, acc, u.m0 + 64 * c, u.n0, M, N);
        return;
    }
    fix_up(acc, &w_map, W, flags, C, base, u, c, M, N, splits, slot_rows, last);
}
