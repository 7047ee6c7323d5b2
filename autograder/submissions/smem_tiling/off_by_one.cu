// Known answer "off_by_one": padded tile like the solution, but the store guard compares with the LAST valid row
// of y using `<` instead of `<=`, so y's last row (x's last column) is never written. Expected: correctness 0 on
// every shape (the poisoned NaNs of that row remain; with cols = 1 nothing is written at all); path full;
// throughput 0 (a kernel that is not correct is not timed).
extern "C" __global__ void transpose(const float* __restrict__ x, float* __restrict__ y, int rows, int cols)
{
    __shared__ float tile[32][33];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int bx = blockIdx.x * 32, by = blockIdx.y * 32;
    const int last_yr = cols - 1, last_yc = rows - 1;  // last valid row and column of y (cols x rows)
#pragma unroll
    for (int j = 0; j < 32; j += 8) {
        const int r = by + ty + j, c = bx + tx;
        if (r < rows && c < cols) tile[ty + j][tx] = x[(long long)r * cols + c];
    }
    __syncthreads();
#pragma unroll
    for (int j = 0; j < 32; j += 8) {
        const int yr = bx + ty + j, yc = by + tx;
        if (yr < last_yr && yc <= last_yc) y[(long long)yr * rows + yc] = tile[tx][ty + j];  // BUG: yr <= last_yr
    }
}
