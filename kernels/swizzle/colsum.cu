// colsum.cu — week 2, day 1: the same column sum of a bf16 matrix read through TMA tiles stored four ways in shared
// memory (no swizzle, 32B, 64B, 128B swizzle), to see what a bank conflict costs and how a swizzle mode removes it.
// Plus swizzle_probe: one TMA box copied byte for byte out of shared memory, to read the hardware's layout.
//
// What it computes: out[c] = passes x sum over r of x[r][c], x row-major (rows, cols) bf16, out fp32 (cols).
// The demo's inputs are small integers (-4..4, kernels/swizzle/workload.py), so every partial sum below is an integer
// that bf16 (|n| <= 256) and fp32 (|n| < 2^24) hold exactly: the order of the additions cannot change a bit and the
// check is bit-exact. `passes` re-reads each tile that many times: passes = 1 is a memory-bound kernel, passes = 32
// one whose time is its shared-memory reads — where bank conflicts show.
//
// What changed from day 5: the box's rows are not read along a row. Each warp reads a COLUMN of 16-byte chunks: lane l
// reads chunk C of tile rows l and l + 32 (one LDS.128 each), as a GEMM's operand fetch or a transpose does. In a
// 16-byte access the warp is served a quarter (8 lanes = 8 consecutive rows) at a time:
//   no swizzle, 128-byte rows: the 8 rows' chunk C all sit in banks 4C..4C+3 -> 8 wavefronts per quarter (8-way);
//   128B swizzle: row r's chunk C sits at chunk C ^ (r % 8) -> 8 different bank groups, 1 wavefront per quarter.
// kernels/swizzle/model.py counts this from the real addresses (swizzle_probe shows where the TMA put the bytes).
//
// One tile = 64 rows x 64 columns (128 bytes per row) = 8 KiB, whatever the mode: the 32B / 64B modes allow boxes of
// at most 32 / 64 bytes per row (16 / 32 bf16), so a tile is 128 / SPAN boxes side by side, each box its own dense
// (64, SPAN-byte) block in shared memory, swizzled inside:
//   SPAN = 128: [box 0: cols 0-63]                         1 box  of 64 x 128 B
//   SPAN =  64: [box 0: cols 0-31][box 1: cols 32-63]      2 boxes of 64 x 64 B
//   SPAN =  32: [box 0: 0-15][box 1: 16-31][2: 32-47][3: 48-63]   4 boxes of 64 x 32 B
// Logical chunk C (columns 8C..8C+7 of the tile) is chunk C % (SPAN / 16) of box C / (SPAN / 16).
//
// Launch contract (kernels/swizzle/launch.py): block = 256 threads (warp w owns chunk column w); grid = ceil(cols / 64)
// blocks, block b owns columns 64 b .. 64 b + 63 and walks all ceil(rows / 64) tiles of its strip through a ring of
// STAGES buffers; dynamic shared memory = STAGES x 8 KiB + 1024 (the kernel aligns its base to 1024 bytes: the
// 128B pattern repeats every 1024 bytes of the ADDRESS, see kernels/include/swizzle.cuh). The map's box is
// (64 rows, SPAN / 2 columns) with the kernel's swizzle mode (colsum_none* take SWIZZLE_NONE).
//
// SASS you should see: UTMALDG.2D (the tile's boxes), SYNCS.ARRIVE.TRANS64 / SYNCS.PHASECHK.TRANS64.TRYWAIT (one
// mbarrier per stage), LDS.128 (the column reads), HADD2.BF16_V2 (the per-tile sums), SHFL.BFLY (the final warp sum),
// STG.E (out); no LDG. The swizzled rungs differ from colsum_none128 only in a LOP3.LUT / SHF of the address math.

#include <cuda_bf16.h>
#include "course.cuh"
#include "mbarrier.cuh"   // mbar_init, fence_barrier_init, mbar_arrive_expect_tx, mbar_wait
#include "tma.cuh"        // tma_load_2d
#include "swizzle.cuh"    // swizzle_bytes<SPAN>, lds128_volatile

#define STAGES 4          // (TILE_ROWS, TILE_BYTES, STAGES) = (64, 8192, 4)
#define TILE_ROWS 64
#define TILE_BYTES 8192
#define THREADS 256
#define MAX_PASSES 32     // bf16 partial sums: 2 rows x 32 passes x |4| = 256, the largest integer bf16 holds exactly

__device__ __forceinline__ __nv_bfloat162 as_bf162(unsigned w) { return *reinterpret_cast<__nv_bfloat162*>(&w); }

template <int SPAN, bool SWIZZLED>
__device__ __forceinline__ void colsum_tiles(const CUtensorMap* x_map, float* out, int rows, int cols, int passes) {
    constexpr int BOXES = 128 / SPAN;          // boxes per tile
    constexpr int BOX_BYTES = TILE_ROWS * SPAN;  // one box: 64 rows x SPAN bytes, dense
    constexpr int BOX_COLS = SPAN / 2;         // bf16 columns per box
    constexpr int CHUNKS = SPAN / 16;          // 16-byte chunks per box row
    extern __shared__ unsigned char smem_raw[];
    __shared__ __align__(8) unsigned long long full[STAGES];  // full[s]: "the boxes of stage s have landed"

    // 1024-byte aligned base: every stage (8 KiB) and every box (BOX_BYTES >= 2 KiB) then starts on a boundary of
    // its mode's pattern (1024 / 512 / 256 bytes), so the swizzle of an offset inside a box is that box's layout.
    const unsigned base = (smem_addr(smem_raw) + 1023u) & ~1023u;
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    const int c0 = blockIdx.x * 64;            // first column of this block's strip
    const int tiles = (rows + TILE_ROWS - 1) / TILE_ROWS;
    // Boxes wholly right of the tensor's edge are not loaded (their columns are never written); a partial box is
    // loaded whole: TMA zero-fills the columns past the edge and counts them in the transaction bytes.
    const int live = min(BOXES, (cols - c0 + BOX_COLS - 1) / BOX_COLS);

    if (tid == 0) {  // a barrier per stage; each phase = 1 arrival (thread 0's expect_tx) + the boxes' bytes
        for (int st = 0; st < STAGES; ++st) mbar_init(smem_addr(&full[st]), 1);
        fence_barrier_init();
    }
    __syncthreads();

    // Thread 0 loads tile k (rows 64k .. 64k + 63 of the strip) into stage k % STAGES: `live` boxes on one barrier,
    // armed with their bytes (live x BOX_BYTES: whole boxes, rows past the bottom edge are zero-filled and counted).
    auto issue = [&](int k) {
        const int s = k % STAGES;
        const unsigned bar = smem_addr(&full[s]);
        mbar_arrive_expect_tx(bar, live * BOX_BYTES);
        for (int b = 0; b < live; ++b)
            tma_load_2d(base + s * TILE_BYTES + b * BOX_BYTES, x_map, c0 + b * BOX_COLS, k * TILE_ROWS, bar);
    };
    if (tid == 0)
        for (int k = 0; k < STAGES && k < tiles; ++k) issue(k);

    // Warp w reads logical chunk column C = w: columns c0 + 8w .. c0 + 8w + 7. Lane l reads tile rows l and l + 32.
    const int box = warp / CHUNKS, chunk = warp % CHUNKS;
    const unsigned off0 = lane * SPAN + chunk * 16, off1 = (lane + 32) * SPAN + chunk * 16;  // offsets in the box
    // New: where the TMA put those 16 bytes — the offset swizzled by the map's mode (the identity without swizzle).
    const unsigned at0 = box * BOX_BYTES + (SWIZZLED ? swizzle_bytes<SPAN>(off0) : off0);
    const unsigned at1 = box * BOX_BYTES + (SWIZZLED ? swizzle_bytes<SPAN>(off1) : off1);

    float acc[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
    for (int k = 0; k < tiles; ++k) {
        const int s = k % STAGES;
        mbar_wait(smem_addr(&full[s]), (k / STAGES) & 1);  // the n-th use of stage s waits on parity n & 1
        const unsigned tile = base + s * TILE_BYTES;
        __nv_bfloat162 part[4];
        for (int q = 0; q < 4; ++q) part[q] = __floats2bfloat162_rn(0.f, 0.f);
        for (int p = 0; p < passes; ++p) {  // each pass: 2 LDS.128 per lane (rows l, l + 32 of chunk column w)
            const uint4 v0 = lds128_volatile(tile + at0), v1 = lds128_volatile(tile + at1);
            part[0] = __hadd2(part[0], __hadd2(as_bf162(v0.x), as_bf162(v1.x)));
            part[1] = __hadd2(part[1], __hadd2(as_bf162(v0.y), as_bf162(v1.y)));
            part[2] = __hadd2(part[2], __hadd2(as_bf162(v0.z), as_bf162(v1.z)));
            part[3] = __hadd2(part[3], __hadd2(as_bf162(v0.w), as_bf162(v1.w)));
        }
        for (int q = 0; q < 4; ++q) {
            const float2 f = __bfloat1622float2(part[q]);
            acc[2 * q] += f.x;
            acc[2 * q + 1] += f.y;
        }
        __syncthreads();  // every warp has read stage s: it may be refilled
        if (tid == 0 && k + STAGES < tiles) issue(k + STAGES);
    }
    // The 32 lanes of warp w hold partial sums of the same 8 columns (different rows): add them up.
#pragma unroll
    for (int i = 0; i < 8; ++i)
        for (int o = 16; o > 0; o >>= 1) acc[i] += __shfl_xor_sync(0xffffffffu, acc[i], o);
    if (lane == 0)
        for (int i = 0; i < 8; ++i) {
            const int c = c0 + 8 * warp + i;
            if (c < cols) out[c] = acc[i];
        }
}

// The rungs: one signature, (x_map, out, rows, cols, passes). The number is the box's row width in bytes.
#define COLSUM(NAME, SPAN, SWIZZLED)                                                                              \
    extern "C" __global__ void __launch_bounds__(THREADS)                                                         \
    NAME(const __grid_constant__ CUtensorMap x_map, float* out, int rows, int cols, int passes) {                  \
        colsum_tiles<SPAN, SWIZZLED>(&x_map, out, rows, cols, passes);                                            \
    }
COLSUM(colsum_none128, 128, false)  // SWIZZLE_NONE, boxes of 64 x 128 B: a chunk column is 8-way conflicted
COLSUM(colsum_none64, 64, false)    // SWIZZLE_NONE, boxes of 64 x 64 B: 4-way
COLSUM(colsum_none32, 32, false)    // SWIZZLE_NONE, boxes of 64 x 32 B: 2-way
COLSUM(colsum_swz32, 32, true)      // New: SWIZZLE_32B, boxes of 64 x 32 B
COLSUM(colsum_swz64, 64, true)      // New: SWIZZLE_64B, boxes of 64 x 64 B
COLSUM(colsum_swz128, 128, true)    // New: SWIZZLE_128B, boxes of 64 x 128 B

// ---------------------------------------------------------------------------------------------------------------
// swizzle_probe: where did the TMA put each byte? One block of 32 threads loads the box at (0, 0) of `map` into shared
// memory at (a 1024-byte aligned base) + `offset` and copies box_bytes bytes from that address, as they lie, to out.
// The host fills the tensor with each element's own (row, col) code and reads the layout back
// (kernels/swizzle/launch.py: probe). offset = 0 shows the rule; a multiple of 128 that is not a multiple of 1024
// shows that the pattern follows the address, not the buffer. Dynamic shared memory: 1024 + offset + box_bytes.
// ---------------------------------------------------------------------------------------------------------------
extern "C" __global__ void __launch_bounds__(32)
swizzle_probe(const __grid_constant__ CUtensorMap map, unsigned char* out, int offset, int box_bytes) {
    extern __shared__ unsigned char smem_raw[];
    __shared__ __align__(8) unsigned long long bar;
    const unsigned raw = smem_addr(smem_raw);
    const unsigned dst = ((raw + 1023u) & ~1023u) + offset;
    if (threadIdx.x == 0) {
        mbar_init(smem_addr(&bar), 1);
        fence_barrier_init();
        mbar_arrive_expect_tx(smem_addr(&bar), box_bytes);
        tma_load_2d(dst, &map, 0, 0, smem_addr(&bar));
    }
    __syncwarp();
    mbar_wait(smem_addr(&bar), 0);
    const unsigned char* src = smem_raw + (dst - raw);
    for (int i = threadIdx.x; i < box_bytes; i += 32) out[i] = src[i];
}
