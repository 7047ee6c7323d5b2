// Known answer "correct": the course solution of week 2 day 3's bcast_add (the solutions notebook's answer cell,
// without the nbgrader markers; tests/test_multicast.py holds them equal). One (64 x 128) tile per CTA; the W tile
// every CTA of the cluster needs is split in N row slices, rank r loads slice r ONCE and multicasts it into all N
// CTAs; each CTA loads its own x tile; the sum is written in place and stored by TMA; cluster barriers before the
// first multicast and before exit.
// Expected: full points — correctness, path (UTMALDG.2D.MULTICAST + the cluster barrier, no LDG/STG), throughput.
#include <cuda_bf16.h>
#include "course.cuh"     // CUtensorMap (128 opaque bytes) and smem_addr(p): the 32-bit shared-memory address of p

// ---- Given: the course's wrappers of the PTX (printed in section 4), one per instruction. -------------------------
#include "mbarrier.cuh"   // mbar_init, fence_barrier_init, mbar_arrive_expect_tx, mbar_wait(bar, parity)
#include "tma.cuh"        // tma_load_2d, tma_store_2d, bulk_commit, bulk_wait<N>, fence_proxy_async
#include "cluster.cuh"    // cluster_ctarank, cluster_nctarank, cluster_sync, tma_load_2d_multicast, cluster_mask_all
#include "bf16x2.cuh"    // add_bf16x2(a, b): two bf16 lanes of a 32-bit word added in fp32, one rounding

// ---- Yours: the kernel. Launch contract: block 128, grid (round_up(ceil(rows/64), N), ceil(cols/128)), cluster
// (N, 1, 1) with N = 2, 33 KiB of dynamic shared memory; x_map / z_map box (64 rows, 128 cols), w_map box
// (64 / N rows, 128 cols) of bf16. ------------------------------------------------------------------------------
extern "C" __global__ void __launch_bounds__(128)
bcast_add(const __grid_constant__ CUtensorMap x_map, const __grid_constant__ CUtensorMap w_map,
          const __grid_constant__ CUtensorMap z_map, const __nv_bfloat16* x, const __nv_bfloat16* w,
          __nv_bfloat16* z, int rows, int cols)
{
    constexpr int BM = 64, BN = 128, THREADS = 128;   // (BM, BN) = the x / z maps' box
    constexpr unsigned TILE_BYTES = BM * BN * 2;       // 16384: one x tile, or the whole W tile
    __shared__ __align__(8) unsigned long long full;   // "my x tile and all N slices of W have landed"
    extern __shared__ unsigned char smem_raw[];

    // Dynamic shared memory, base aligned to 128 bytes for TMA: [x tile (z in place)] [W tile] = 32 KiB + slack.
    // The W tile sits at the same offset in every CTA: a multicast writes the same offset everywhere.
    const unsigned raw = smem_addr(smem_raw);
    const unsigned xs = (raw + 127u) & ~127u;
    const unsigned ws = xs + TILE_BYTES;
    unsigned char* gx = smem_raw + (xs - raw);  // the same bytes as a generic pointer, for the threads

    const unsigned rank = cluster_ctarank(), n = cluster_nctarank();
    const unsigned slice_rows = BM / n, slice_bytes = TILE_BYTES / n;  // w_map's box: (64 / N, 128)
    const unsigned bar = smem_addr(&full);
    const int r0 = blockIdx.x * BM, c0 = blockIdx.y * BN;  // the cluster's CTAs: consecutive row tiles, one column

    if (threadIdx.x == 0) {
        mbar_init(bar, 1);     // 1 arrival: my own arrive.expect_tx
        fence_barrier_init();  // the init visible to the async proxy and the cluster
    }
    // (1) Every CTA's barrier is initialised before any peer's multicast may count bytes on it.
    cluster_sync();

    if (threadIdx.x == 0) {
        // Arm MY barrier with every byte that will land in MY shared memory: my x tile (16 KiB) and all N slices of
        // W (16 KiB in all), N - 1 of them sent by peers. Whole boxes, even past the tensor's edge (zero-filled).
        mbar_arrive_expect_tx(bar, 2 * TILE_BYTES);
        tma_load_2d(xs, &x_map, c0, r0, bar);
        // New: my slice of W, read once from L2, written at the same offset of every CTA of the cluster.
        //   mask 0b0011 (N = 2):  rank: 0 1      slice 0 from rank 0, slice 1 from rank 1: each lands in both
        //                         W:    X X
        tma_load_2d_multicast(ws + rank * slice_bytes, &w_map, c0, rank * slice_rows, bar, cluster_mask_all(n));
    }
    mbar_wait(bar, 0);  // first (only) use of the barrier: phase parity 0

    // z = x + W, in place in the x tile: 1024 x 16 bytes, 8 per thread, conflict-free.
    uint4* x4 = reinterpret_cast<uint4*>(gx);
    const uint4* w4 = reinterpret_cast<const uint4*>(gx + TILE_BYTES);
#pragma unroll
    for (int j = 0; j < (int)(TILE_BYTES / 16) / THREADS; ++j) {
        const int v = threadIdx.x + j * THREADS;
        const uint4 a = x4[v], b = w4[v];
        x4[v] = make_uint4(add_bf16x2(a.x, b.x), add_bf16x2(a.y, b.y), add_bf16x2(a.z, b.z), add_bf16x2(a.w, b.w));
    }
    // Written by the threads (generic proxy), read by the TMA store (async proxy): fence, then hand over.
    fence_proxy_async();
    __syncthreads();
    if (threadIdx.x == 0) {
        tma_store_2d(&z_map, c0, r0, xs);  // clipped at the tensor's edges
        bulk_commit();
        bulk_wait<0>();
    }
    // (2) The rule: my barrier told me what landed in ME, not whether my slice has landed in my peers. Nobody
    // leaves while a peer's multicast may still be writing into it.
    cluster_sync();
}
