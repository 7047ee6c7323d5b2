// transpose.cu — day 2: the same out-of-place transpose four ways, to see what shared memory staging buys and what
// a bank conflict costs.
//
// Every kernel computes y = x^T for a row-major float32 matrix x of shape (rows, cols) into a row-major y of shape
// (cols, rows): y[c * rows + r] = x[r * cols + c]. One signature for every rung:
//     (const float* x, float* y, int rows, int cols)
// One launch for every rung: block (32, 8) = 256 threads, grid (ceil(cols / 32), ceil(rows / 32)); block (bx, by)
// owns the 32x32 tile of x whose top-left element is (32 * by, 32 * bx), and each thread moves 4 elements of it
// (rows threadIdx.y + 0, 8, 16, 24 of the tile). Shapes need not be multiples of 32: every access is guarded, and
// a partial tile simply leaves the unused part of its shared-memory tile unwritten and unread.
//
// Why float32 and not bf16: one element is one 4-byte bank word, so a 32-element tile row spans the 32 banks
// exactly once and a tile column falls into ONE bank — the textbook 32-way conflict — and one padding element is
// one bank of skew. (With 2-byte elements two neighbours share a word, and the picture halves and blurs.)
//
// SASS you should see (tests/test_smem_tiling.py checks it; loads show as LDG.E.CONSTANT: x is const __restrict__):
//   transpose_naive     LDG.E / STG.E only: no shared memory. Loads coalesced (a warp reads 128 contiguous bytes
//                       of one row); stores uncoalesced (a warp writes 32 floats `rows * 4` bytes apart: 32
//                       sectors for 128 useful bytes).
//   transpose_smem      LDG.E -> STS x4, BAR.SYNC, LDS x4 -> STG.E: both global sides coalesced. The LDS reads a tile
//                       column: 32 lanes, 32 words, all in one bank -> 32 wavefronts per LDS (32-way conflict).
//   transpose_padded    same instructions; tile[32][33]: row stride 33 words, the column's 32 words land in 32
//                       different banks -> 1 wavefront per LDS. The stride shows in the STS immediates:
//                       +0x420 = 8 rows x 132 bytes (transpose_smem: +0x400 = 8 x 128).
//   transpose_swizzled  same instructions, no padding; column index XOR row index (LOP3.LUT in the address math):
//                       a tile column is spread over the 32 banks -> 1 wavefront per LDS.
// None of them needs local memory (no LDL / STL).

#include "course.cuh"

#define TILE 32        // the tile is TILE x TILE floats: one 128-byte row per warp access
#define BLOCK_ROWS 8   // blockDim = (TILE, BLOCK_ROWS): each thread moves TILE / BLOCK_ROWS = 4 elements

// Index of element (r, c) of a row-major matrix with `ld` columns, in 64 bits (rows * cols may exceed 2^31).
__device__ __forceinline__ long long at(int r, int c, int ld) { return (long long)r * ld + c; }

// Rung 1: no shared memory. Thread (tx, ty) reads x[r][c] along a row (coalesced) and writes y[c][r] straight away:
// consecutive lanes write addresses `rows * 4` bytes apart (a column of y), 32 sectors per warp store.
extern "C" __global__ void __launch_bounds__(TILE * BLOCK_ROWS)
transpose_naive(const float* __restrict__ x, float* __restrict__ y, int rows, int cols) {
    const int c = blockIdx.x * TILE + threadIdx.x;
    const int r0 = blockIdx.y * TILE + threadIdx.y;
#pragma unroll
    for (int j = 0; j < TILE; j += BLOCK_ROWS) {
        const int r = r0 + j;
        if (r < rows && c < cols) y[at(c, r, rows)] = x[at(r, c, cols)];
    }
}

// Rung 2: stage the tile in shared memory so that BOTH global sides are row-wise (coalesced).
//   phase 1: lane tx reads x[by + ty + j][bx + tx] (a row of x) and writes tile[ty + j][tx]     (a row of tile)
//   barrier: every element of the tile is written by some other warp than the one that reads it
//   phase 2: lane tx reads tile[tx][ty + j] (a COLUMN of tile) and writes y[bx + ty + j][by + tx] (a row of y)
// Bank of tile[a][b] = (32 * a + b) % 32 = b: the column read has 32 lanes in bank (ty + j), 32 different words:
// 32-way conflict, the LDS replays 32 times (32 wavefronts instead of 1).
extern "C" __global__ void __launch_bounds__(TILE * BLOCK_ROWS)
transpose_smem(const float* __restrict__ x, float* __restrict__ y, int rows, int cols) {
    __shared__ float tile[TILE][TILE];  // New: 4 KB per block, (TILE, TILE), no padding
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int bx = blockIdx.x * TILE, by = blockIdx.y * TILE;
#pragma unroll
    for (int j = 0; j < TILE; j += BLOCK_ROWS) {
        const int r = by + ty + j, c = bx + tx;
        if (r < rows && c < cols) tile[ty + j][tx] = x[at(r, c, cols)];  // STS: a tile row, conflict-free
    }
    // All 8 warps' STS must land before any warp reads a column: 28 of the 32 words a lane group reads in phase 2
    // were written by other warps. Without this barrier the kernel races (reads stale shared memory).
    __syncthreads();
#pragma unroll
    for (int j = 0; j < TILE; j += BLOCK_ROWS) {
        const int yr = bx + ty + j, yc = by + tx;  // y is (cols, rows): row yr < cols, column yc < rows
        if (yr < cols && yc < rows) y[at(yr, yc, rows)] = tile[tx][ty + j];  // LDS: a tile column, 32-way conflict
    }
}

// Rung 3: pad each tile row by one word. Bank of tile[a][b] = (33 * a + b) % 32 = (a + b) % 32: the column
// read (a = tx, b fixed) now walks all 32 banks; the row write (a fixed, b = tx) still does. 1 wavefront each.
// Cost: 32 * 4 = 128 bytes of shared memory per block that hold nothing.
extern "C" __global__ void __launch_bounds__(TILE * BLOCK_ROWS)
transpose_padded(const float* __restrict__ x, float* __restrict__ y, int rows, int cols) {
    __shared__ float tile[TILE][TILE + 1];  // New: (TILE, TILE + 1): row stride 33 words skews the banks
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int bx = blockIdx.x * TILE, by = blockIdx.y * TILE;
#pragma unroll
    for (int j = 0; j < TILE; j += BLOCK_ROWS) {
        const int r = by + ty + j, c = bx + tx;
        if (r < rows && c < cols) tile[ty + j][tx] = x[at(r, c, cols)];
    }
    __syncthreads();  // every warp's STS before any warp's LDS (see transpose_smem)
#pragma unroll
    for (int j = 0; j < TILE; j += BLOCK_ROWS) {
        const int yr = bx + ty + j, yc = by + tx;
        if (yr < cols && yc < rows) y[at(yr, yc, rows)] = tile[tx][ty + j];  // LDS: banks (tx + ty + j) % 32
    }
}

// Rung 4: no padding; instead store logical element (a, b) of the tile at physical column b ^ a of row a.
// a, b < 32, so b ^ a < 32 stays inside the row, and for a fixed a the map b -> b ^ a is a permutation (the row
// write is still conflict-free); for a fixed b the map a -> b ^ a is a permutation too, so the column read
// (a = tx) touches 32 different physical columns = 32 different banks. Same 4 KB as rung 2, no wasted bytes —
// the same idea as the TMA's 128-byte swizzle (week 2), which XORs 16-byte chunk indices instead of words.
extern "C" __global__ void __launch_bounds__(TILE * BLOCK_ROWS)
transpose_swizzled(const float* __restrict__ x, float* __restrict__ y, int rows, int cols) {
    __shared__ float tile[TILE][TILE];  // (TILE, TILE): no padding
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int bx = blockIdx.x * TILE, by = blockIdx.y * TILE;
#pragma unroll
    for (int j = 0; j < TILE; j += BLOCK_ROWS) {
        const int r = by + ty + j, c = bx + tx;
        if (r < rows && c < cols) tile[ty + j][tx ^ (ty + j)] = x[at(r, c, cols)];  // New: physical col b ^ a
    }
    __syncthreads();  // every warp's STS before any warp's LDS (see transpose_smem)
#pragma unroll
    for (int j = 0; j < TILE; j += BLOCK_ROWS) {
        const int yr = bx + ty + j, yc = by + tx;
        // New: logical (a, b) = (tx, ty + j) lives at physical column (ty + j) ^ tx: bank ((ty + j) ^ tx)
        if (yr < cols && yc < rows) y[at(yr, yc, rows)] = tile[tx][(ty + j) ^ tx];
    }
}
