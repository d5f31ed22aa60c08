// FP32 transpose: out[cols][rows] = in[rows][cols]^T, correct for any rows, cols.
#include "common.cuh"

// One element per thread; reads coalesced, writes `rows` floats apart.
extern "C" __global__ void transpose_naive(const float* __restrict__ in, float* __restrict__ out,
                                           int rows, int cols) {
    int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x < cols && y < rows) out[(size_t)x * rows + y] = in[(size_t)y * cols + x];
}

// TILE x TILE threads, one element each, through tile[TILE][TILE + PAD].
template <int TILE, int PAD>
__device__ void transpose_smem(const float* __restrict__ in, float* __restrict__ out, int rows, int cols) {
    __shared__ float tile[TILE][TILE + PAD];
    int tx = threadIdx.x, ty = threadIdx.y;
    int x = blockIdx.x * TILE + tx, y = blockIdx.y * TILE + ty;
    if (x < cols && y < rows) tile[ty][tx] = in[(size_t)y * cols + x];
    __syncthreads();
    int ox = blockIdx.y * TILE + tx, oy = blockIdx.x * TILE + ty;  // out[oy][ox]
    if (ox < rows && oy < cols) out[(size_t)oy * rows + ox] = tile[tx][ty];
}

// TILE x 8 threads, TILE/8 elements per thread. SWAP: blockIdx.x walks the input's tile rows, so
// consecutive blocks write neighbouring tiles of the same output rows (and complete each other's
// partial sectors at once where output rows start off a sector). STAMP: the block takes a ticket
// (and reads %globaltimer) as its stores begin and records both at its end, at its linear index:
// the order in which blocks write (experiments/store_order.py).
template <int TILE, int PAD, bool SWAP = false, bool STAMP = false>
__device__ void transpose_smem_rows(const float* __restrict__ in, float* __restrict__ out, int rows, int cols,
                                    unsigned* ticket = nullptr, unsigned* order = nullptr,
                                    unsigned long long* when = nullptr) {
    __shared__ float tile[TILE][TILE + PAD];
    int tx = threadIdx.x, ty = threadIdx.y;
    int bx = SWAP ? blockIdx.y : blockIdx.x, by = SWAP ? blockIdx.x : blockIdx.y;
    int x = bx * TILE + tx;
#pragma unroll
    for (int j = 0; j < TILE; j += 8) {
        int y = by * TILE + ty + j;
        if (x < cols && y < rows) tile[ty + j][tx] = in[(size_t)y * cols + x];
    }
    __syncthreads();
    unsigned my_ticket = 0;
    unsigned long long now = 0;
    bool first = STAMP && tx == 0 && ty == 0;
    if (first) {
        my_ticket = atomicAdd(ticket, 1u);
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    }
    int ox = by * TILE + tx;
#pragma unroll
    for (int j = 0; j < TILE; j += 8) {
        int oy = bx * TILE + ty + j;
        if (ox < rows && oy < cols) out[(size_t)oy * rows + ox] = tile[tx][ty + j];
    }
    if (first) {
        unsigned b = blockIdx.y * gridDim.x + blockIdx.x;
        order[b] = my_ticket;
        when[b] = now;
    }
}

#define TR_ARGS const float *in, float *out, int rows, int cols
extern "C" __global__ void transpose_smem_16_0(TR_ARGS) { transpose_smem<16, 0>(in, out, rows, cols); }
extern "C" __global__ void transpose_smem_16_1(TR_ARGS) { transpose_smem<16, 1>(in, out, rows, cols); }
extern "C" __global__ void transpose_smem_32_0(TR_ARGS) { transpose_smem<32, 0>(in, out, rows, cols); }
extern "C" __global__ void transpose_smem_32_1(TR_ARGS) { transpose_smem<32, 1>(in, out, rows, cols); }
extern "C" __global__ void transpose_rows_32_0(TR_ARGS) { transpose_smem_rows<32, 0>(in, out, rows, cols); }
extern "C" __global__ void transpose_rows_32_1(TR_ARGS) { transpose_smem_rows<32, 1>(in, out, rows, cols); }
extern "C" __global__ void transpose_rows_swapped_32_1(TR_ARGS) { transpose_smem_rows<32, 1, true>(in, out, rows, cols); }
#define STAMP_ARGS TR_ARGS, unsigned *ticket, unsigned *order, unsigned long long *when
extern "C" __global__ void transpose_rows_stamped_32_1(STAMP_ARGS) {
    transpose_smem_rows<32, 1, false, true>(in, out, rows, cols, ticket, order, when);
}
extern "C" __global__ void transpose_rows_swapped_stamped_32_1(STAMP_ARGS) {
    transpose_smem_rows<32, 1, true, true>(in, out, rows, cols, ticket, order, when);
}
