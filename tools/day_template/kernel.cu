// {slug}.cu — day {day} ({title}): the day's demo kernel. Replace it with the day's rungs, one file each.
//
// The stub is an elementwise bf16 copy, y[i] = x[i], one 2-byte element per thread.
// Hardware contract (what the launcher guarantees, launch.py):
//   block = 256 threads, grid = ceil(n / 256) blocks: thread t of block b owns element b * 256 + t;
//   x and y are contiguous bf16 tensors of n elements, not aliased; a thread past the end writes nothing.
// Consecutive lanes read consecutive 2-byte words: a warp's 32 loads fall in one 64-byte span (2 sectors).
//
// SASS you should see:
//   {slug}_copy   LDG.E.U16 / STG.E.U16   (2 B per lane)

#include "course.cuh"

#include <cuda_bf16.h>

extern "C" __global__ void {slug}_copy(const __nv_bfloat16* __restrict__ x, __nv_bfloat16* __restrict__ y,
                                       long long n) {
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long k = (long long)blockIdx.x * blockDim.x + threadIdx.x; k < n; k += stride) y[k] = x[k];
}
