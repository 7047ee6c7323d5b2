// Known answer "no_sync": the solution without __syncthreads() between writing the tile and reading it back.
// A warp reads a tile column whose words 7 other warps write; nothing makes it wait for them, so it reads whatever
// the shared memory held before (another block's tile). Expected: correctness 0 — the large test shape
// (4095 x 4097: 16 K blocks) shows stale values reliably; path full (STS, LDS present: SASS cannot see the
// missing BAR.SYNC's consequence); throughput 0 (not correct: not timed).
extern "C" __global__ void transpose(const float* __restrict__ x, float* __restrict__ y, int rows, int cols)
{
    __shared__ float tile[32][33];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int bx = blockIdx.x * 32, by = blockIdx.y * 32;
#pragma unroll
    for (int j = 0; j < 32; j += 8) {
        const int r = by + ty + j, c = bx + tx;
        if (r < rows && c < cols) tile[ty + j][tx] = x[(long long)r * cols + c];
    }
    // BUG: no __syncthreads() here
#pragma unroll
    for (int j = 0; j < 32; j += 8) {
        const int yr = bx + ty + j, yc = by + tx;
        if (yr < cols && yc < rows) y[(long long)yr * rows + yc] = tile[tx][ty + j];
    }
}
