// Known answer "swizzled": correct and conflict-free without padding — logical tile element (a, b) is stored at
// physical column b ^ a. Expected: full marks (same throughput as the padded solution, 128 fewer bytes of smem).
extern "C" __global__ void transpose(const float* __restrict__ x, float* __restrict__ y, int rows, int cols)
{
    __shared__ float tile[32][32];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int bx = blockIdx.x * 32, by = blockIdx.y * 32;
#pragma unroll
    for (int j = 0; j < 32; j += 8) {
        const int r = by + ty + j, c = bx + tx;
        if (r < rows && c < cols) tile[ty + j][tx ^ (ty + j)] = x[(long long)r * cols + c];
    }
    __syncthreads();
#pragma unroll
    for (int j = 0; j < 32; j += 8) {
        const int yr = bx + ty + j, yc = by + tx;
        if (yr < cols && yc < rows) y[(long long)yr * rows + yc] = tile[tx][(ty + j) ^ tx];
    }
}
