// Known answer "naive": correct, but no shared memory: each thread writes y[c][r] straight from x[r][c], so a
// warp's store hits 32 different 128-byte lines. Expected: correctness full; path 0 (no STS / LDS in transpose);
// throughput 0 (uncoalesced stores: 32 L2 requests of 4 bytes per warp store, request-bound; below the bar).
extern "C" __global__ void transpose(const float* __restrict__ x, float* __restrict__ y, int rows, int cols)
{
    const int c = blockIdx.x * 32 + threadIdx.x;
#pragma unroll
    for (int j = 0; j < 32; j += 8) {
        const int r = blockIdx.y * 32 + threadIdx.y + j;
        if (r < rows && c < cols) y[(long long)c * rows + r] = x[(long long)r * cols + c];
    }
}
