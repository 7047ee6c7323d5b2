// cluster.cuh — thread-block clusters (sm_90): the CTA's rank in its cluster, cluster-scope barriers, distributed
// shared memory (DSMEM: mapa + ld.shared::cluster, st.async with an mbarrier complete_tx on the remote CTA) and the
// TMA load that multicasts one box into several CTAs of the cluster (ctaMask). One wrapper per PTX form; the
// instruction each emits and its contract are written above it. Shared-memory operands are 32-bit addresses:
// a `shared::cta` address (smem_addr) names this CTA's shared memory, a `shared::cluster` address (mapa) names any
// CTA's shared memory in the cluster. Included by kernels/multicast/*.cu.
//
// The launch must say how many CTAs a cluster has (kernels.launch.launch(..., cluster=N), cuda.core's
// LaunchConfig(cluster=N)); without it every CTA is a cluster of 1 and rank 0.
//
// The rule every kernel with a cluster obeys: a CTA must not exit while a peer may still read or write its shared
// memory (ld.shared::cluster, st.async, a remote mbarrier arrive, or a multicast TMA whose ctaMask names it). The
// usual way to obey it is a cluster barrier (cluster_arrive + cluster_wait) as the last thing every CTA does, after
// its last access to a peer and after everything addressed to it has landed.
#pragma once

#include "course.cuh"
#ifdef COURSE_DEBUG_BARRIERS
#include "mbarrier_debug.cuh"  // the debug build of the cluster-scope wait, remote arrivals and copies (autograder.hangs)
#endif

// ---------------------------------------------------------------------------------------------------------------
// Who am I: %cluster_ctarank (0 .. size-1, the CTA's rank in its cluster) and %cluster_nctarank (the cluster size
// the launch asked for). For a 1-D cluster the rank is blockIdx.x % size. SASS: S2R / S2UR of SR_CgaCtaId etc.
// ---------------------------------------------------------------------------------------------------------------
__device__ __forceinline__ unsigned cluster_ctarank() {
    unsigned r;
    asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
    return r;
}

__device__ __forceinline__ unsigned cluster_nctarank() {
    unsigned n;
    asm volatile("mov.u32 %0, %%cluster_nctarank;" : "=r"(n));
    return n;
}

// ---------------------------------------------------------------------------------------------------------------
// Cluster-scope barrier, split in two: arrive (release: this thread's earlier writes — shared memory of any CTA of
// the cluster included — are visible to every thread that has waited on the same barrier phase) and wait (acquire:
// returns once every thread of every CTA of the cluster has arrived). `.aligned`: every thread of the warp executes
// the same instruction, so call both from all threads of the block, not under a thread-dependent branch.
// SASS: UCGABAR_ARV (arrive) and UCGABAR_WAIT (wait).
// Uses: (1) after mbarrier.init + fence_barrier_init, before any peer may signal those barriers (a multicast TMA or
// an st.async targeting them); (2) as the last thing each CTA does: nobody exits while peers still touch it.
// ---------------------------------------------------------------------------------------------------------------
__device__ __forceinline__ void cluster_arrive() {
    asm volatile("barrier.cluster.arrive.release.aligned;" ::: "memory");
}

__device__ __forceinline__ void cluster_wait() {
    asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory");
}

__device__ __forceinline__ void cluster_sync() {
    cluster_arrive();
    cluster_wait();
}

// ---------------------------------------------------------------------------------------------------------------
// DSMEM address of the same variable in CTA `rank` of the cluster: mapa.shared::cluster.u32 (SASS: MAPA — or,
// as ptxas 13 compiles it for sm_90a, (U)PRMT Rd, Rrank, 0x654, Raddr: the rank goes into bits 24..31 of the
// shared::cluster address).
// `addr` is a shared::cta address in *this* CTA (smem_addr(&x)); the result is a shared::cluster address of x in
// CTA `rank` (every CTA runs the same kernel, so the variable sits at the same offset there). mapa of this CTA's
// own rank gives the shared::cluster address of its own x.
// ---------------------------------------------------------------------------------------------------------------
__device__ __forceinline__ unsigned mapa_shared(unsigned addr, unsigned rank) {
    unsigned out;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(out) : "r"(addr), "r"(rank));
    return out;
}

// Load 4 bytes from a shared::cluster address (any CTA of the cluster): ld.shared::cluster.u32 (SASS: LD with a
// DSMEM address — ptxas emits a generic-space LD, the window decides which SM answers). The peer must have written
// the value before a barrier both sides passed (cluster_arrive/cluster_wait), and must not exit before this load
// has returned (the final cluster barrier).
__device__ __forceinline__ unsigned ld_shared_cluster_u32(unsigned cluster_addr) {
    unsigned v;
    asm volatile("ld.shared::cluster.u32 %0, [%1];" : "=r"(v) : "r"(cluster_addr) : "memory");
    return v;
}

// 16 bytes, same contract (address 16-byte aligned).
__device__ __forceinline__ uint4 ld_shared_cluster_v4(unsigned cluster_addr) {
    uint4 v;
    asm volatile("ld.shared::cluster.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "r"(cluster_addr) : "memory");
    return v;
}

// ---------------------------------------------------------------------------------------------------------------
// st.async: store into a peer's shared memory and count the bytes on the peer's mbarrier (SASS: STAS).
//   st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.b32 [remote_addr], {a, b, c, d}, [remote_bar];
// Both addresses are shared::cluster addresses in the *same* destination CTA (mapa of the same rank). The store is
// asynchronous: the writer does not wait for it; the *receiver* arms its own barrier with expect_tx(bytes it will
// receive) and waits on it — the phase completes when its arrivals are in and every announced byte has landed,
// and then the bytes are visible to the waiting threads. The barrier must be initialised (and that made visible to
// the cluster: fence_barrier_init + a cluster barrier) before the first st.async targets it. Address 16-byte
// aligned.
// ---------------------------------------------------------------------------------------------------------------
__device__ __forceinline__ void st_async_v4(unsigned remote_addr, uint4 v, unsigned remote_bar) {
#ifdef COURSE_DEBUG_BARRIERS
    if (!course_debug::may_issue()) return;
#endif
    asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.b32 [%0], {%1, %2, %3, %4}, [%5];"
                 ::"r"(remote_addr), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w), "r"(remote_bar)
                 : "memory");
}

// 4 bytes, same contract.
__device__ __forceinline__ void st_async_u32(unsigned remote_addr, unsigned v, unsigned remote_bar) {
#ifdef COURSE_DEBUG_BARRIERS
    if (!course_debug::may_issue()) return;
#endif
    asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.b32 [%0], %1, [%2];"
                 ::"r"(remote_addr), "r"(v), "r"(remote_bar)
                 : "memory");
}

// ---------------------------------------------------------------------------------------------------------------
// Remote mbarrier arrive: one arrival on the barrier at shared::cluster address `remote_bar` (a peer's barrier,
// from mapa), with release semantics at cluster scope (this thread's earlier shared-memory reads and writes are
// ordered before it: "I am done with the buffer you will overwrite"). SASS: SYNCS.ARRIVE.TRANS64.RED.A1T0 (a
// remote arrive). The peer must not have exited (final cluster barrier).
// ---------------------------------------------------------------------------------------------------------------
__device__ __forceinline__ void mbar_arrive_cluster(unsigned remote_bar) {
#ifdef COURSE_DEBUG_BARRIERS
    if (!course_debug::may_issue()) return;
#endif
    asm volatile("mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%0];" ::"r"(remote_bar) : "memory");
}

// The same arrival with the default semantics (.release at CTA scope), the form CUTLASS's ClusterBarrier uses for a
// consumer's "buffer free" signal when the arriving CTA only READ the buffer. Practice, not derived: the PTX memory
// model does not promise that a CTA-scope release orders this CTA's reads before a peer's later write of the buffer
// (the release.cluster form above is the one it covers, and makes ptxas emit MEMBAR.ALL.GPU before the arrive).
//   mbarrier.arrive.shared::cluster.b64 _, [remote_bar];     SASS: SYNCS.ARRIVE.TRANS64.RED.A1T0
__device__ __forceinline__ void mbar_arrive_remote(unsigned remote_bar) {
#ifdef COURSE_DEBUG_BARRIERS
    if (!course_debug::may_issue()) return;
#endif
    asm volatile("mbarrier.arrive.shared::cluster.b64 _, [%0];" ::"r"(remote_bar) : "memory");
}

// Wait for the phase of parity `parity` of a *local* barrier with acquire semantics at cluster scope: what peers
// wrote into this CTA before signalling the barrier (st.async, remote arrive after their writes) is visible after
// it. (mbarrier.cuh's mbar_wait is the CTA-scope form; a TMA's complete_tx needs no more than that.)
__device__ __forceinline__ void mbar_wait_cluster(unsigned bar, unsigned parity) {
#ifdef COURSE_DEBUG_BARRIERS
    course_debug::wait<true>(bar, parity);
#else
    unsigned done = 0;
    while (!done) {
        asm volatile(
            "{\n\t.reg .pred p;\n\t"
            "mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 p, [%1], %2;\n\t"
            "selp.u32 %0, 1, 0, p;\n\t}"
            : "=r"(done)
            : "r"(bar), "r"(parity)
            : "memory");
    }
#endif
}

// ---------------------------------------------------------------------------------------------------------------
// TMA multicast: ONE read of the box at (row = c1, col = c0) from L2, written into shared memory at the same
// offset `dst` of every CTA whose bit is set in `cta_mask`; in each of them the bytes are counted on the mbarrier
// at the same offset `bar`. SASS: UTMALDG.2D.MULTICAST.
//   cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster
//       [dst], [map, {c0, c1}], [bar], cta_mask;
// Contract:
// - cta_mask is 16 bits, bit r = CTA rank r of this cluster. Bits of ranks that do not exist are a bug.
//     mask 0b0011, cluster of 2:     mask 0b1111, cluster of 4:     mask 0b0101, cluster of 4:
//       rank:  0 1                     rank:  0 1 2 3                 rank:  0 1 2 3
//       box:   X X                     box:   X X X X                 box:   X . X .
// - every CTA in the mask must have initialised its barrier `bar` (and the init must be visible: fence_barrier_init
//   then a cluster barrier) before the load is issued, must arm it with expect_tx for these bytes (its own
//   arrive.expect_tx: each receiver counts the box once, whoever issued it), and must not exit before the box has
//   landed in it (it waits on `bar`; and the final cluster barrier).
// - the issuing CTA need not be in the mask; usually it is (it needs the box too).
// ---------------------------------------------------------------------------------------------------------------
__device__ __forceinline__ void tma_load_2d_multicast(unsigned dst, const CUtensorMap* map, int c0, int c1,
                                                      unsigned bar, unsigned short cta_mask) {
#ifdef COURSE_DEBUG_BARRIERS
    if (!course_debug::may_issue()) return;
#endif
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster"
        " [%0], [%1, {%3, %4}], [%2], %5;"
        ::"r"(dst), "l"(reinterpret_cast<unsigned long long>(map)), "r"(bar), "r"(c0), "r"(c1), "h"(cta_mask)
        : "memory");
}

// The mask of the first n ranks: 0b1 for 1, 0b11 for 2, 0b1111 for 4.
__device__ __forceinline__ unsigned short cluster_mask_all(unsigned n) {
    return static_cast<unsigned short>((1u << n) - 1u);
}
