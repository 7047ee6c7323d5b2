// Known answer "full_tiles_only": padded tile like the solution, but written for shapes that are multiples of 32:
// a block whose tile sticks out of the matrix returns at once. Right on 128 x 128, wrong on every awkward shape.
// Expected: correctness 0 (the edge tiles of 127 x 129 stay NaN); path full; throughput 0 (not correct: not timed).
extern "C" __global__ void transpose(const float* __restrict__ x, float* __restrict__ y, int rows, int cols)
{
    __shared__ float tile[32][33];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int bx = blockIdx.x * 32, by = blockIdx.y * 32;
    if (bx + 32 > cols || by + 32 > rows) return;  // BUG: partial tiles at the right and bottom edges are skipped
#pragma unroll
    for (int j = 0; j < 32; j += 8)
        tile[ty + j][tx] = x[(long long)(by + ty + j) * cols + bx + tx];
    __syncthreads();
#pragma unroll
    for (int j = 0; j < 32; j += 8)
        y[(long long)(bx + ty + j) * rows + by + tx] = tile[tx][ty + j];
}
