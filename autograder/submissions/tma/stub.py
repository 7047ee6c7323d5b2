# Known answer "stub": the release's answer cell, untouched. Expected: 0 everywhere, "exercise not attempted".
TMA_ADD_CU = r"""
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
__device__ __forceinline__ unsigned add_bf16x2(unsigned a, unsigned b) {  // two bf16 lanes: fp32 add, one rounding
    float2 fa = __bfloat1622float2(*reinterpret_cast<__nv_bfloat162*>(&a));
    float2 fb = __bfloat1622float2(*reinterpret_cast<__nv_bfloat162*>(&b));
    __nv_bfloat162 r = __floats2bfloat162_rn(fa.x + fb.x, fa.y + fb.y);
    return *reinterpret_cast<unsigned*>(&r);
}

// ---- Yours: the kernel. Launch contract: block 128, persistent grid min(boxes, 2 x SMs), 97 KiB of dynamic
// shared memory, maps with box (64 rows, 64 cols) of bf16 (8 KiB). ------------------------------------------------
extern "C" __global__ void __launch_bounds__(128)
tma_add(const __grid_constant__ CUtensorMap x_map, const __grid_constant__ CUtensorMap y_map,
        const __grid_constant__ CUtensorMap z_map, const __nv_bfloat16* x, const __nv_bfloat16* y,
        __nv_bfloat16* z, int rows, int cols)
{
    # YOUR CODE HERE
    raise NotImplementedError()
}
"""
