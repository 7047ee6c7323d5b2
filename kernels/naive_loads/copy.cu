// copy.cu — day 1: the same copy four ways, to see what coalescing, vector width and bytes in flight buy.
//
// Every kernel copies n 4-byte words x -> y. They differ only in which thread touches which address and how many
// bytes each thread has in flight.
//
// SASS you should see:
//   copy_strided     LDG.E      / STG.E       (4 B, and a warp's 32 addresses in 32 different 32-byte sectors)
//   copy_scalar      LDG.E      / STG.E       (4 B, a warp reads one 128-byte line: 4 sectors)
//   copy_vec16       LDG.E.128  / STG.E.128   (16 B per thread: a warp reads 512 contiguous bytes)
//   copy_grid_stride LDG.E.128 x4 before the first STG.E.128 (64 B in flight per thread)

#include "course.cuh"

// (rows, cols) view of x in row-major order; thread t reads element (t % rows, t / rows): a column walk.
// Consecutive threads are 4*cols bytes apart, so each 4-byte load pulls a whole 32-byte sector for 4 useful bytes.
extern "C" __global__ void copy_strided(const float* __restrict__ x, float* __restrict__ y, long long n, int cols) {
    long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= n) return;
    long long rows = n / cols;  // the launcher guarantees n % cols == 0
    long long i = (t % rows) * cols + t / rows;
    y[i] = x[i];
}

// New: thread t reads element t. A warp's 32 loads fall in one 128-byte line (4 sectors): coalesced.
extern "C" __global__ void copy_scalar(const float* __restrict__ x, float* __restrict__ y, long long n) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i];
}

// New: 16 bytes per thread (float4). x and y must be 16-byte aligned and n a multiple of 4 (the launcher checks).
// One LDG.E.128 per thread: 4x fewer instructions and 4x the bytes in flight per thread of copy_scalar.
extern "C" __global__ void copy_vec16(const float4* __restrict__ x, float4* __restrict__ y, long long n4) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n4) y[i] = x[i];
}

// New: a persistent grid (a few blocks per SM) walks the array; each thread issues UNROLL independent 16-byte loads
// before the first store, so 64 bytes per thread are in flight (Little's law: bandwidth = bytes in flight / latency).
#define UNROLL 4
extern "C" __global__ void copy_grid_stride(const float4* __restrict__ x, float4* __restrict__ y, long long n4) {
    const long long stride = (long long)gridDim.x * blockDim.x;
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    for (; i + (UNROLL - 1) * stride < n4; i += UNROLL * stride) {
        float4 v[UNROLL];
#pragma unroll
        for (int k = 0; k < UNROLL; ++k) v[k] = x[i + k * stride];  // UNROLL loads in flight
#pragma unroll
        for (int k = 0; k < UNROLL; ++k) y[i + k * stride] = v[k];
    }
    for (; i < n4; i += stride) y[i] = x[i];  // the tail
}
