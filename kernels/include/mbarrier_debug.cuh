// mbarrier_debug.cuh — the debug build of the course's mbarrier waits: a hang becomes a line that names the barrier
// and the phase a warp waits on, instead of a GPU that never answers. Compiled in only with COURSE_DEBUG_BARRIERS
// (autograder.hangs compiles a kernel so); without the macro mbarrier.cuh, tma.cuh and cluster.cuh do not include this
// file and emit the same SASS as before, instruction for instruction (tests/test_headers.py holds every kernel's
// SASS to a record).
//
// What the debug build changes, wrapper by wrapper:
// - mbar_wait / mbar_wait_cluster poll with try_wait and read %globaltimer (ns). A wait that has not completed after
//   the bound (course_barrier_trace.timeout_ns, or COURSE_DEBUG_BARRIER_TIMEOUT_NS when the host left it 0) sets
//   the global abort flag. Every wait then in progress, in every block, records {block, warp, barrier, parity,
//   waits it completed on that barrier before, lanes, tag, time waited} into the trace and returns; every wait
//   that starts after the abort returns at once, unrecorded. So the trace is the wait-for picture at the moment
//   the first wait ran out, and the kernel runs to its end (its output is wrong: the checker says so).
// - After an abort, arrivals (mbar_arrive*, remote arrives) and asynchronous copies into shared memory (TMA loads,
//   multicast, st.async) are skipped: the kernel's control flow is kept (every thread still reaches its
//   __syncthreads and cluster barriers, which nothing here can time out), but no barrier is driven into a state
//   its contract forbids and no copy is still in flight when a block exits.
// - One lane per warp (the lowest active one) keeps the warp's record in global memory: its last completed wait
//   (barrier, parity), and per barrier how many waits it completed and how many arrivals it made. Block 0 records
//   each mbar_init (barrier, arrival count) and, where autograder.hangs named them, the barrier variables.
// - Why return and not __trap(): a trap ends the context, and the trace with it. Why the abort reaches every block:
//   a deadlock in one block leaves the others spinning on their own waits or on the grid's end.
//
// The trace is one __device__ variable, course_barrier_trace (extern "C": the host finds it by name); the host
// zeroes it before each launch and reads it after the launch (or, when a kernel still hangs, while it runs).
// Its layout is read back by autograder/hangs.py (TRACE_LAYOUT): change one, change both.
#pragma once

#include "course.cuh"

#ifndef COURSE_DEBUG_BARRIER_TIMEOUT_NS
#define COURSE_DEBUG_BARRIER_TIMEOUT_NS 2000000000ull  // 2 s: a wait on a live ring completes in microseconds
#endif
#ifndef COURSE_DEBUG_BARRIER_WARPS
#define COURSE_DEBUG_BARRIER_WARPS 16384  // warps whose record is kept (global warp index = block * warps + warp)
#endif
#ifndef COURSE_DEBUG_BARRIER_STUCK
#define COURSE_DEBUG_BARRIER_STUCK 4096   // stuck waits recorded (one per waiting warp; the count goes on)
#endif
#ifndef COURSE_DEBUG_BARRIER_SLOTS
#define COURSE_DEBUG_BARRIER_SLOTS 32     // barriers counted per warp
#endif
#define COURSE_DEBUG_BARRIER_NAMES 32     // barrier variables autograder.hangs can name
#define COURSE_DEBUG_BARRIER_INITS 64     // mbar_init calls of block 0 recorded

struct CourseBarrierSlot {   // one barrier as one warp saw it
    unsigned bar;            // shared::cta address (0: free slot)
    unsigned waits;          // waits on it this warp completed
    unsigned arrivals;       // arrivals on it this warp made (lanes x calls)
};

struct CourseBarrierWarp {   // one warp's record, kept by its lowest active lane
    unsigned block1;         // linear block index + 1 (0: the warp never completed a wait nor arrived)
    unsigned warp;           // warp index in its block
    unsigned last_bar;       // last completed wait: barrier ...
    unsigned last_parity;    // ... and the parity it waited on
    unsigned completed;      // waits completed
    unsigned tag;            // mbar_debug_tag's last value ...
    unsigned tagged;         // ... if ever set
    unsigned last_arrive;    // last barrier arrived on
    unsigned arrived;        // arrivals made
    unsigned pad;
    CourseBarrierSlot slots[COURSE_DEBUG_BARRIER_SLOTS];
};

struct CourseBarrierStuck {  // one wait in progress when the first wait ran out
    unsigned block, warp;    // linear block index, warp in the block
    unsigned bar, parity;    // the barrier and the parity waited on
    unsigned waits;          // waits on bar this warp had completed before (0xffffffff: warp not tracked)
    unsigned flags;          // 1: its own bound ran out (else: waiting when the abort came); 2: cluster-scope wait;
                             // 4: warp beyond COURSE_DEBUG_BARRIER_WARPS (no record)
    unsigned lanes;          // active mask at the wait
    unsigned tag, tagged;    // the warp's tag
    unsigned pad;
    unsigned long long waited_ns;
};

struct CourseBarrierTrace {
    unsigned abort;                                   // set by the first wait that ran out
    unsigned n_stuck;                                 // stuck waits (may exceed COURSE_DEBUG_BARRIER_STUCK)
    unsigned long long timeout_ns;                    // the bound; 0: COURSE_DEBUG_BARRIER_TIMEOUT_NS
    unsigned long long abort_ns;                      // %globaltimer when the abort was set
    unsigned n_init;                                  // mbar_init calls of block 0 (may exceed the table)
    unsigned pad;
    unsigned names[COURSE_DEBUG_BARRIER_NAMES][2];    // name id -> {address, bytes} (autograder.hangs.instrument)
    unsigned inits[COURSE_DEBUG_BARRIER_INITS][2];    // {address, arrival count} of block 0's mbar_init calls
    CourseBarrierStuck stuck[COURSE_DEBUG_BARRIER_STUCK];
    CourseBarrierWarp warps[COURSE_DEBUG_BARRIER_WARPS];
};

extern "C" {
__device__ CourseBarrierTrace course_barrier_trace;
}

namespace course_debug {

__device__ __forceinline__ unsigned long long now_ns() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

__device__ __forceinline__ unsigned lane() {
    unsigned l;
    asm volatile("mov.u32 %0, %%laneid;" : "=r"(l));
    return l;
}

__device__ __forceinline__ unsigned block_linear() {
    return blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
}

__device__ __forceinline__ unsigned warp_in_block() {
    return (threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z)) / 32;
}

__device__ __forceinline__ bool first_thread_of_grid() {
    return block_linear() == 0 && threadIdx.x == 0 && threadIdx.y == 0 && threadIdx.z == 0;
}

// The lowest active lane speaks for the warp (a producer's one elected lane, or lane 0 of a converged warp).
__device__ __forceinline__ bool leads(unsigned mask) { return lane() == static_cast<unsigned>(__ffs(mask) - 1); }

__device__ __forceinline__ bool aborted() {
    return *reinterpret_cast<volatile unsigned*>(&course_barrier_trace.abort) != 0;
}

__device__ __forceinline__ CourseBarrierWarp* my_warp() {
    const unsigned long long wpb = (blockDim.x * blockDim.y * blockDim.z + 31) / 32;
    const unsigned long long w = block_linear() * wpb + warp_in_block();
    return w < COURSE_DEBUG_BARRIER_WARPS ? &course_barrier_trace.warps[w] : nullptr;
}

__device__ __forceinline__ CourseBarrierSlot* slot_of(CourseBarrierWarp* w, unsigned bar) {
#pragma unroll 1  // a loop, not 32 copies at every wait and arrival: the debug build of a many-wait kernel stays small
    for (int i = 0; i < COURSE_DEBUG_BARRIER_SLOTS; ++i) {
        const unsigned b = w->slots[i].bar;
        if (b == bar) return &w->slots[i];
        if (b == 0) {
            w->slots[i].bar = bar;
            return &w->slots[i];
        }
    }
    return nullptr;  // more barriers than slots: this one is not counted
}

__device__ __forceinline__ void note_done(unsigned bar, unsigned parity) {
    CourseBarrierWarp* w = my_warp();
    if (!w) return;
    w->block1 = block_linear() + 1;
    w->warp = warp_in_block();
    w->last_bar = bar;
    w->last_parity = parity;
    w->completed += 1;
    if (CourseBarrierSlot* s = slot_of(w, bar)) s->waits += 1;
}

// An arrival about to be made on a local barrier: counted, unless an abort came first (then: skip it).
__device__ __forceinline__ bool note_arrive(unsigned bar) {
    if (aborted()) return false;
    const unsigned mask = __activemask();
    if (leads(mask)) {
        if (CourseBarrierWarp* w = my_warp()) {
            w->block1 = block_linear() + 1;
            w->warp = warp_in_block();
            w->last_arrive = bar;
            w->arrived += __popc(mask);
            if (CourseBarrierSlot* s = slot_of(w, bar)) s->arrivals += __popc(mask);
        }
    }
    return true;
}

// An asynchronous copy (or a remote arrival) about to be issued: skipped after an abort.
__device__ __forceinline__ bool may_issue() { return !aborted(); }

__device__ __forceinline__ void note_init(unsigned bar, unsigned count) {
    if (block_linear() != 0) return;
    const unsigned i = atomicAdd(&course_barrier_trace.n_init, 1u);
    if (i < COURSE_DEBUG_BARRIER_INITS) {
        course_barrier_trace.inits[i][0] = bar;
        course_barrier_trace.inits[i][1] = count;
    }
}

__device__ __forceinline__ void name_barrier(unsigned addr, unsigned bytes, unsigned id) {
    if (first_thread_of_grid() && id < COURSE_DEBUG_BARRIER_NAMES) {
        course_barrier_trace.names[id][0] = addr;
        course_barrier_trace.names[id][1] = bytes;
    }
}

__device__ __forceinline__ void tag(unsigned value) {
    const unsigned mask = __activemask();
    if (!leads(mask)) return;
    if (CourseBarrierWarp* w = my_warp()) {
        w->block1 = block_linear() + 1;
        w->warp = warp_in_block();
        w->tag = value;
        w->tagged = 1;
    }
}

__device__ __forceinline__ void note_stuck(unsigned bar, unsigned parity, unsigned mask, bool own, bool cluster,
                                           unsigned long long waited) {
    const unsigned i = atomicAdd(&course_barrier_trace.n_stuck, 1u);
    if (i >= COURSE_DEBUG_BARRIER_STUCK) return;
    CourseBarrierWarp* w = my_warp();
    CourseBarrierSlot* s = w ? slot_of(w, bar) : nullptr;
    CourseBarrierStuck& r = course_barrier_trace.stuck[i];
    r.block = block_linear();
    r.warp = warp_in_block();
    r.bar = bar;
    r.parity = parity;
    r.waits = s ? s->waits : 0xffffffffu;
    r.flags = (own ? 1u : 0u) | (cluster ? 2u : 0u) | (w ? 0u : 4u);
    r.lanes = mask;
    r.tag = w ? w->tag : 0u;
    r.tagged = w ? w->tagged : 0u;
    r.waited_ns = waited;
}

template <bool CLUSTER>
__device__ __forceinline__ bool try_wait(unsigned bar, unsigned parity) {
    unsigned done;
    if (CLUSTER) {
        asm volatile(
            "{\n\t.reg .pred p;\n\t"
            "mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 p, [%1], %2;\n\t"
            "selp.u32 %0, 1, 0, p;\n\t}"
            : "=r"(done) : "r"(bar), "r"(parity) : "memory");
    } else {
        asm volatile(
            "{\n\t.reg .pred p;\n\t"
            "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n\t"
            "selp.u32 %0, 1, 0, p;\n\t}"
            : "=r"(done) : "r"(bar), "r"(parity) : "memory");
    }
    return done != 0;
}

// The debug wait (see the top of this file): try_wait until the phase completes, the bound runs out, or another
// wait's bound ran out.
template <bool CLUSTER>
__device__ __forceinline__ void wait(unsigned bar, unsigned parity) {
    if (aborted()) return;
    const unsigned mask = __activemask();
    unsigned long long t0 = 0;
    while (!try_wait<CLUSTER>(bar, parity)) {
        const unsigned long long t = now_ns();
        if (t0 == 0) t0 = t;
        const unsigned long long bound =
            course_barrier_trace.timeout_ns ? course_barrier_trace.timeout_ns : COURSE_DEBUG_BARRIER_TIMEOUT_NS;
        const bool own = t - t0 > bound;
        if (own || aborted()) {
            if (own && atomicExch(&course_barrier_trace.abort, 1u) == 0) course_barrier_trace.abort_ns = t;
            if (leads(mask)) note_stuck(bar, parity, mask, own, CLUSTER, t - t0);
            return;
        }
    }
    if (leads(mask)) note_done(bar, parity);
}

}  // namespace course_debug

// Name a barrier variable in the trace (autograder.hangs inserts these after the kernel's __shared__ barrier
// declarations in a debug build; a kernel need not write them).
#define COURSE_DEBUG_NAME_BARRIER(var, id) course_debug::name_barrier(smem_addr(&(var)), sizeof(var), id)
