// Known answer "plain_loads": correct, through 16-byte global loads and stores (LDG.E.128 / STG.E.128) from the
// pointers of the launch contract — no TMA. Expected: correctness full; path 0 (no UTMALDG / UTMASTG, and LDG / STG
// are forbidden in tma_add); throughput 0: the contract's 2 blocks x 128 threads per SM with two 16-byte loads each
// keep 8 KiB per SM in flight, Little's law puts that far below the bar (kernels/tma/model.py, "plain_loads").
#include <cuda_bf16.h>
#include "course.cuh"  // CUtensorMap (128 opaque bytes) and smem_addr(p): the 32-bit shared-memory address of p

// ---- Given: the PTX of today's Concept section, one wrapper per instruction. -------------------------------------
// Barrier phase rule: a phase completes when its pending arrivals AND its transaction bytes both reach zero; then
// the phase bit flips and the arrival count reloads. Wait on a phase by its parity (0, 1, 0, 1, ... per use).
__device__ __forceinline__ void mbar_init(unsigned bar, unsigned arrivals) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(arrivals) : "memory");
}
__device__ __forceinline__ void fence_barrier_init() {  // initialised barriers visible to the TMA unit
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}
__device__ __forceinline__ void mbar_arrive_expect_tx(unsigned bar, unsigned bytes) {  // 1 arrival, tx += bytes
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_arrive(unsigned bar) {  // 1 arrival
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory");
}
__device__ __forceinline__ void mbar_wait(unsigned bar, unsigned parity) {  // until the phase `parity` completed
    unsigned done = 0;
    while (!done) {
        asm volatile("{\n\t.reg .pred p;\n\tmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n\t"
                     "selp.u32 %0, 1, 0, p;\n\t}" : "=r"(done) : "r"(bar), "r"(parity) : "memory");
    }
}
// TMA load: the box whose first element is (row c1, col c0) -> shared memory at dst (128-byte aligned); its bytes
// are counted on barrier bar. Coordinates are elements, innermost (column) first; boxes may run past the edge.
__device__ __forceinline__ void tma_load_2d(unsigned dst, const CUtensorMap* map, int c0, int c1, unsigned bar) {
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%2, %3}], [%4];"
                 ::"r"(dst), "l"(reinterpret_cast<unsigned long long>(map)), "r"(c0), "r"(c1), "r"(bar) : "memory");
}
// TMA store: shared memory at src -> the box at (row c1, col c0); nothing is written out of bounds.
__device__ __forceinline__ void tma_store_2d(const CUtensorMap* map, int c0, int c1, unsigned src) {
    asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%1, %2}], [%3];"
                 ::"l"(reinterpret_cast<unsigned long long>(map)), "r"(c0), "r"(c1), "r"(src) : "memory");
}
__device__ __forceinline__ void bulk_commit() { asm volatile("cp.async.bulk.commit_group;" ::: "memory"); }
template <int N> __device__ __forceinline__ void bulk_wait_read() {  // <= N groups still reading shared memory
    asm volatile("cp.async.bulk.wait_group.read %0;" ::"n"(N) : "memory");
}
template <int N> __device__ __forceinline__ void bulk_wait() {  // <= N groups incomplete (global writes included)
    asm volatile("cp.async.bulk.wait_group %0;" ::"n"(N) : "memory");
}
__device__ __forceinline__ void fence_proxy_async() {  // this thread's smem writes visible to the async proxy (TMA)
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}
#include "bf16x2.cuh"    // add_bf16x2(a, b): two bf16 lanes of a 32-bit word added in fp32, one rounding

// ---- Yours: the kernel. Launch contract: block 128, persistent grid min(boxes, 2 x SMs), 97 KiB of dynamic
// shared memory, maps with box (64 rows, 64 cols) of bf16 (8 KiB). ------------------------------------------------
extern "C" __global__ void __launch_bounds__(128)
tma_add(const __grid_constant__ CUtensorMap x_map, const __grid_constant__ CUtensorMap y_map,
        const __grid_constant__ CUtensorMap z_map, const __nv_bfloat16* x, const __nv_bfloat16* y,
        __nv_bfloat16* z, int rows, int cols)
{
    // Plain loads: the same sum with 16-byte LDG / STG over a grid-stride loop; no tensor map, no TMA.
    const uint4* x4 = reinterpret_cast<const uint4*>(x);
    const uint4* y4 = reinterpret_cast<const uint4*>(y);
    uint4* z4 = reinterpret_cast<uint4*>(z);
    const long long n4 = (long long)rows * cols / 8;  // cols is a multiple of 8
    const long long step = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += step) {
        const uint4 a = x4[i], b = y4[i];
        z4[i] = make_uint4(add_bf16x2(a.x, b.x), add_bf16x2(a.y, b.y), add_bf16x2(a.z, b.z), add_bf16x2(a.w, b.w));
    }
}
