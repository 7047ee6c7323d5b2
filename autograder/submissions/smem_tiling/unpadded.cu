// Known answer "unpadded": correct, shared memory staged, but the tile is float[32][32]: the column read puts all
// 32 lanes in one bank (32-way conflict, 32 wavefronts per LDS). Expected: correctness full; path full (STS and
// LDS are there — SASS cannot see a conflict); throughput 0: the smem pipe, not DRAM, sets its time (the model
// predicts ~0.6x of the padded solution), below the bar, which sits between the two measured figures.
extern "C" __global__ void transpose(const float* __restrict__ x, float* __restrict__ y, int rows, int cols)
{
    __shared__ float tile[32][32];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int bx = blockIdx.x * 32, by = blockIdx.y * 32;
#pragma unroll
    for (int j = 0; j < 32; j += 8) {
        const int r = by + ty + j, c = bx + tx;
        if (r < rows && c < cols) tile[ty + j][tx] = x[(long long)r * cols + c];
    }
    __syncthreads();
#pragma unroll
    for (int j = 0; j < 32; j += 8) {
        const int yr = bx + ty + j, yc = by + tx;
        if (yr < cols && yc < rows) y[(long long)yr * rows + yc] = tile[tx][ty + j];
    }
}
