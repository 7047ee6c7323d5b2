// cluster_demo.cu — week 2, day 3: thread-block clusters. Two demos of what CTAs of one cluster can do for each
// other: read each other's shared memory (distributed shared memory, DSMEM), and share one TMA load (multicast).
//
// What changed from the previous days: until now a CTA's shared memory was its own. A cluster (N CTAs launched
// together on one GPC: kernels.launch.launch(..., cluster=N)) lets every CTA address every peer's shared memory,
// and lets one TMA load write the same box into several CTAs.
//
//   dsmem_rotate_ld      each CTA fills its shared buffer, cluster barrier, then reads its NEIGHBOUR's buffer
//                        (rank (r + 1) % N) with mapa + ld.shared::cluster and writes it out; final cluster barrier.
//   dsmem_rotate_stas    New: the same rotation pushed instead of pulled: each CTA st.async's its block into the
//                        neighbour ((r + N - 1) % N)'s buffer, counted on the neighbour's mbarrier (complete_tx);
//                        each CTA waits on its OWN barrier for the bytes pushed into it.
//   broadcast_sum        operand broadcast: every CTA sums the same K tiles of a table (all CTAs need every tile).
//                        Cluster of 1: each CTA loads every tile itself (K x 8 KiB of L2 -> SM traffic per CTA).
//                        Cluster of N: rank 0 loads each tile ONCE with a multicast TMA into all N CTAs: the L2
//                        reads per CTA drop to K x 8 KiB / N.
//
// SASS you should see (kernels/sass.py):
//   UCGABAR_ARV / UCGABAR_WAIT          barrier.cluster.arrive.release / barrier.cluster.wait.acquire
//   MAPA, or PRMT Rd, Rrank, 0x654, Ra  mapa.shared::cluster (a peer's address of the same variable). Where the
//                                       rank is a plain register ptxas builds the address itself: the rank goes
//                                       into bits 24..31 of the shared::cluster address (the PRMT).
//   LD.E (generic, DSMEM window)        ld.shared::cluster
//   STAS                                st.async.shared::cluster.mbarrier::complete_tx::bytes
//   UTMALDG.2D.MULTICAST                cp.async.bulk.tensor.2d ... .multicast::cluster (broadcast_sum, N > 1)
//   UTMALDG.2D                          the same load without multicast (broadcast_sum, N == 1)
//   SYNCS.ARRIVE.TRANS64.RED.A1T0       mbarrier.arrive.shared::cluster (a remote arrive: broadcast_sum)
//
// Launch contracts (kernels/multicast/launch.py): block = 128 threads; the dsmem demos take BLOCK_WORDS = 1024
// fp32 per CTA and no dynamic shared memory; broadcast_sum takes STAGES x 8 KiB + 128 bytes of dynamic shared
// memory, a (K x 64, 64) bf16 table with a tensor map of box (64, 64), and writes one 64 x 64 fp32 tile per CTA.

#include <cuda_bf16.h>
#include "course.cuh"
#include "mbarrier.cuh"
#include "tma.cuh"
#include "cluster.cuh"  // New today: rank, cluster barrier, mapa, ld.shared::cluster, st.async, multicast TMA

#define BLOCK_WORDS 1024  // fp32 per CTA in the dsmem demos: 4 KiB
#define THREADS 128
#define TILE 64           // broadcast_sum: tiles are TILE x TILE bf16 = 8 KiB
#define MAX_STAGES 8

// ---------------------------------------------------------------------------------------------------------------
// Demo 1: pull. out[block b] = x[block of rank (r + 1) % N in b's cluster].
// grid = n / BLOCK_WORDS (a multiple of N), cluster = N.
// ---------------------------------------------------------------------------------------------------------------
extern "C" __global__ void __launch_bounds__(THREADS)
dsmem_rotate_ld(const float* __restrict__ x, float* __restrict__ out) {
    __shared__ __align__(16) float buf[BLOCK_WORDS];
    const unsigned rank = cluster_ctarank(), n = cluster_nctarank();
    const size_t base = (size_t)blockIdx.x * BLOCK_WORDS;
    for (int i = threadIdx.x; i < BLOCK_WORDS; i += THREADS) buf[i] = x[base + i];

    // Every CTA's buffer written (release) before any peer reads it (acquire). __syncthreads would order this
    // CTA's threads only; the peer's threads need the cluster barrier.
    cluster_sync();

    const unsigned peer = (rank + 1) % n;
    const unsigned remote = mapa_shared(smem_addr(buf), peer);  // the same buffer, in the neighbour's CTA
    for (int i = threadIdx.x; i < BLOCK_WORDS; i += THREADS)
        out[base + i] = __uint_as_float(ld_shared_cluster_u32(remote + 4u * i));

    // The rule: the neighbour is still reading MY buffer. Leaving now could free it under the neighbour's loads.
    cluster_sync();
}

// ---------------------------------------------------------------------------------------------------------------
// Demo 2 (New): push with st.async. Each CTA sends its block to rank (r + N - 1) % N — so each CTA RECEIVES the
// block of rank (r + 1) % N, the same rotation as demo 1. out[block b] = x[block of rank (r + 1) % N].
// ---------------------------------------------------------------------------------------------------------------
extern "C" __global__ void __launch_bounds__(THREADS)
dsmem_rotate_stas(const float* __restrict__ x, float* __restrict__ out) {
    __shared__ __align__(16) float inbox[BLOCK_WORDS];
    __shared__ __align__(8) unsigned long long arrived;  // "my inbox is full"
    const unsigned rank = cluster_ctarank(), n = cluster_nctarank();
    const size_t base = (size_t)blockIdx.x * BLOCK_WORDS;
    const unsigned bar = smem_addr(&arrived);
    if (threadIdx.x == 0) {
        mbar_init(bar, 1);  // 1 arrival (the expect_tx below) + BLOCK_WORDS x 4 transaction bytes
        fence_barrier_init();
    }
    // Every CTA's barrier initialised, and that visible cluster-wide, before any peer's st.async may count on it.
    cluster_sync();
    if (threadIdx.x == 0) mbar_arrive_expect_tx(bar, BLOCK_WORDS * 4);  // the bytes the neighbour will push here

    const unsigned dst = (rank + n - 1) % n;
    const unsigned r_inbox = mapa_shared(smem_addr(inbox), dst);
    const unsigned r_bar = mapa_shared(bar, dst);
    const uint4* x4 = reinterpret_cast<const uint4*>(x + base);
    for (int i = threadIdx.x; i < BLOCK_WORDS / 4; i += THREADS)
        st_async_v4(r_inbox + 16u * i, x4[i], r_bar);  // 16 bytes into the peer, 16 counted on the peer's barrier

    // Wait for MY inbox: phase 0 completes when my expect_tx arrived and all 4096 bytes pushed here landed.
    mbar_wait_cluster(bar, 0);
    for (int i = threadIdx.x; i < BLOCK_WORDS; i += THREADS) out[base + i] = inbox[i];

    // My st.async's into the neighbour are complete once ITS barrier saw them — which it waits for before leaving;
    // the final barrier keeps the rule explicit (nobody leaves while a peer may still write or count on it).
    cluster_sync();
}

// ---------------------------------------------------------------------------------------------------------------
// Demo 3: operand broadcast. out[cta] (TILE x TILE fp32) = sum over k < K of table tile k (bf16). Every CTA needs
// every tile; a ring of `stages` buffers per CTA, one mbarrier "full" per stage in every CTA, and in rank 0 one
// mbarrier "empty" per stage counting N arrivals: "every CTA of the cluster has finished with this stage".
//
//   tile k -> stage s = k % stages, use u = k / stages; full[s] phase parity u & 1 in every CTA.
//   rank 0 may overwrite stage s (in ALL CTAs, by multicast) only after empty[s] in rank 0 saw N arrivals.
//
// Multicast mask for N = 2 and N = 4 (all ranks of the cluster):
//   mask 0b0011:  rank: 0 1        mask 0b1111:  rank: 0 1 2 3
//                 tile: X X                      tile: X X X X
// ---------------------------------------------------------------------------------------------------------------
extern "C" __global__ void __launch_bounds__(THREADS)
broadcast_sum(const __grid_constant__ CUtensorMap table, float* __restrict__ out, int k_tiles, int stages) {
    extern __shared__ unsigned char smem_raw[];
    __shared__ __align__(8) unsigned long long full[MAX_STAGES], empty[MAX_STAGES];
    constexpr unsigned TILE_BYTES = TILE * TILE * 2;  // 8192
    const unsigned raw = smem_addr(smem_raw);
    const unsigned base = (raw + 127u) & ~127u;  // TMA boxes: 128-byte aligned destinations
    const unsigned char* gbase = smem_raw + (base - raw);
    const unsigned rank = cluster_ctarank(), n = cluster_nctarank();
    const int tid = threadIdx.x;

    if (tid == 0) {
        for (int s = 0; s < stages; ++s) {
            mbar_init(smem_addr(&full[s]), 1);   // 1 arrival: this CTA's own expect_tx
            mbar_init(smem_addr(&empty[s]), n);  // used in rank 0 only: one arrival per CTA of the cluster
        }
        fence_barrier_init();
    }
    cluster_sync();  // all barriers of all CTAs initialised before rank 0's first multicast signals them

    auto issue = [&](int k) {  // rank 0 only: tile k into stage k % stages of every CTA
        const int s = k % stages;
        if (n == 1)
            tma_load_2d(base + s * TILE_BYTES, &table, 0, k * TILE, smem_addr(&full[s]));
        else  // New: one L2 read, N deliveries, one complete_tx on full[s] in each CTA of the mask
            tma_load_2d_multicast(base + s * TILE_BYTES, &table, 0, k * TILE, smem_addr(&full[s]),
                                  cluster_mask_all(n));
    };
    if (tid == 0) {
        for (int k = 0; k < stages && k < k_tiles; ++k) mbar_arrive_expect_tx(smem_addr(&full[k]), TILE_BYTES);
        if (rank == 0)
            for (int k = 0; k < stages && k < k_tiles; ++k) issue(k);
    }

    float acc[32];
#pragma unroll
    for (int i = 0; i < 32; ++i) acc[i] = 0.f;
    for (int k = 0; k < k_tiles; ++k) {
        const int s = k % stages;
        mbar_wait(smem_addr(&full[s]), (k / stages) & 1);
        const uint4* t4 = reinterpret_cast<const uint4*>(gbase + s * TILE_BYTES);
#pragma unroll
        for (int j = 0; j < 4; ++j) {  // 4 x 8 bf16 per thread, conflict-free 16-byte reads
            uint4 v = t4[tid + j * THREADS];
            const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&v);
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                float2 f = __bfloat1622float2(h[e]);
                acc[j * 8 + 2 * e] += f.x;
                acc[j * 8 + 2 * e + 1] += f.y;
            }
        }
        __syncthreads();  // every thread of this CTA done with stage s
        if (tid == 0 && k + stages < k_tiles) {
            mbar_arrive_expect_tx(smem_addr(&full[s]), TILE_BYTES);       // arm my stage s for tile k + stages
            // Tell rank 0 "my stage s is free" with the plain remote arrive (release at CTA scope), as CUTLASS's
            // ClusterBarrier does for a buffer the arriving CTA only READ: practice, not derived from the PTX memory
            // model (a CTA-scope release does not order this CTA's reads before a peer's multicast into the stage).
            // The .release.cluster form the model covers would put a MEMBAR.ALL.GPU (~1 us) on every tile.
            mbar_arrive_remote(mapa_shared(smem_addr(&empty[s]), 0));
            if (rank == 0) {
                mbar_wait(smem_addr(&empty[s]), (k / stages) & 1);  // all N CTAs freed stage s
                issue(k + stages);
            }
        }
    }
    float4* o4 = reinterpret_cast<float4*>(out + (size_t)blockIdx.x * TILE * TILE);
#pragma unroll
    for (int j = 0; j < 4; ++j) {
        const int v = tid + j * THREADS;  // 8 consecutive elements v*8 .. v*8+7
        o4[2 * v] = make_float4(acc[j * 8], acc[j * 8 + 1], acc[j * 8 + 2], acc[j * 8 + 3]);
        o4[2 * v + 1] = make_float4(acc[j * 8 + 4], acc[j * 8 + 5], acc[j * 8 + 6], acc[j * 8 + 7]);
    }
    // The rule: rank 0's multicasts write into every CTA of the cluster, and the CTAs' arrivals land in rank 0:
    // nobody leaves while a peer may still write into it or count on its barriers.
    cluster_sync();
}
