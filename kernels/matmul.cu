// FP32 matrix multiplication C[M][N] = A[M][K] * B[K][N], every variant correct for any M, N, K.
// A is row-major. B is row-major, except in the *_colmajor / corner-turning kernels where it
// is stored column-major: element (k, n) at B[n * K + k].
#include "common.cuh"

__device__ __forceinline__ void naive(const float* __restrict__ A, const float* __restrict__ B,
                                      float* __restrict__ C, int M, int N, int K) {
    int row = blockIdx.y * blockDim.y + threadIdx.y, col = blockIdx.x * blockDim.x + threadIdx.x;
    if (row < M && col < N) {
        float s = 0.f;
        for (int k = 0; k < K; ++k) s += A[(size_t)row * K + k] * B[(size_t)k * N + col];
        C[(size_t)row * N + col] = s;
    }
}

extern "C" __global__ void matmul_naive(const float* __restrict__ A, const float* __restrict__ B,
                                        float* __restrict__ C, int M, int N, int K) {
    naive(A, B, C, M, N, K);
}

// Per block, the SM it ran on and its start (t0) and end on the global timer (ns), after the whole
// block is done: which blocks share an SM's L1, and when (experiments/placement.py).
__device__ __forceinline__ void record_placement(unsigned long long* __restrict__ place, unsigned long long t0) {
    __syncthreads();
    if (threadIdx.x == 0 && threadIdx.y == 0) {
        unsigned smid;
        unsigned long long t1;
        asm volatile("mov.u32 %0, %%smid;" : "=r"(smid));
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t1));
        size_t b = (size_t)blockIdx.y * gridDim.x + blockIdx.x;
        place[3 * b] = smid;
        place[3 * b + 1] = t0;
        place[3 * b + 2] = t1;
    }
}

__device__ __forceinline__ unsigned long long global_timer() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

extern "C" __global__ void matmul_naive_placed(const float* __restrict__ A, const float* __restrict__ B,
                                               float* __restrict__ C, int M, int N, int K,
                                               unsigned long long* __restrict__ place) {
    unsigned long long t0 = global_timer();
    naive(A, B, C, M, N, K);
    record_placement(place, t0);
}

// The uncoalesced pattern: adjacent threads (col) read B[col * K + k], K floats apart.
extern "C" __global__ void matmul_naive_colmajor_b(const float* __restrict__ A,
                                                   const float* __restrict__ B,
                                                   float* __restrict__ C, int M, int N, int K) {
    int row = blockIdx.y * blockDim.y + threadIdx.y, col = blockIdx.x * blockDim.x + threadIdx.x;
    if (row < M && col < N) {
        float s = 0.f;
        for (int k = 0; k < K; ++k) s += A[(size_t)row * K + k] * B[(size_t)col * K + k];
        C[(size_t)row * N + col] = s;
    }
}

// The naive kernel with its k loop unrolled U times (1: a load of A and of B a trip); nvcc unrolls
// matmul_naive's 16 times. Whether its L1 misses follow k mod U (perfmodel.naive_k).
template <int U>
__device__ __forceinline__ void naive_unrolled(const float* __restrict__ A, const float* __restrict__ B,
                                               float* __restrict__ C, int M, int N, int K) {
    int row = blockIdx.y * blockDim.y + threadIdx.y, col = blockIdx.x * blockDim.x + threadIdx.x;
    if (row < M && col < N) {
        float s = 0.f;
#pragma unroll U
        for (int k = 0; k < K; ++k) s += A[(size_t)row * K + k] * B[(size_t)k * N + col];
        C[(size_t)row * N + col] = s;
    }
}

#define NAIVE_UNROLLED(U)                                                                                    \
    extern "C" __global__ void matmul_naive_unroll##U(const float* __restrict__ A,                          \
                                                      const float* __restrict__ B, float* __restrict__ C, \
                                                      int M, int N, int K) {                                \
        naive_unrolled<U>(A, B, C, M, N, K);                                                                \
    }
NAIVE_UNROLLED(1)
NAIVE_UNROLLED(4)

// The naive kernel with A (W = 1) or B (W = 2) read through ld.global.cg, past L1 (W = 0: neither): each L2
// sector the L1s then request beyond the bypassed array's own is the other array's miss - which of A and B
// L1 drops where k mod 16 costs misses (perfmodel.naive_k).
template <int W>
__device__ __forceinline__ void naive_bypass(const float* __restrict__ A, const float* __restrict__ B,
                                             float* __restrict__ C, int M, int N, int K) {
    int row = blockIdx.y * blockDim.y + threadIdx.y, col = blockIdx.x * blockDim.x + threadIdx.x;
    if (row < M && col < N) {
        float s = 0.f;
        for (int k = 0; k < K; ++k) {
            const float* a = &A[(size_t)row * K + k];
            const float* b = &B[(size_t)k * N + col];
            s += (W == 1 ? __ldcg(a) : *a) * (W == 2 ? __ldcg(b) : *b);
        }
        C[(size_t)row * N + col] = s;
    }
}

#define NAIVE_BYPASS(W)                                                                                      \
    extern "C" __global__ void matmul_naive_bypass##W(const float* __restrict__ A,                          \
                                                      const float* __restrict__ B, float* __restrict__ C, \
                                                      int M, int N, int K) {                                \
        naive_bypass<W>(A, B, C, M, N, K);                                                                  \
    }
NAIVE_BYPASS(0)  // both through L1: matmul.naive_smem launches it with shared memory it leaves unused
NAIVE_BYPASS(1)
NAIVE_BYPASS(2)

template <int T>
__device__ void tiled(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
                      int M, int N, int K) {
    __shared__ float As[T][T];
    __shared__ float Bs[T][T];
    int tx = threadIdx.x, ty = threadIdx.y;
    int row = blockIdx.y * T + ty, col = blockIdx.x * T + tx;
    float s = 0.f;
    for (int ph = 0; ph < (K + T - 1) / T; ++ph) {
        int ka = ph * T + tx, kb = ph * T + ty;
        As[ty][tx] = (row < M && ka < K) ? A[(size_t)row * K + ka] : 0.f;
        Bs[ty][tx] = (kb < K && col < N) ? B[(size_t)kb * N + col] : 0.f;
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < T; ++kk) s += As[ty][kk] * Bs[kk][tx];
        __syncthreads();
    }
    if (row < M && col < N) C[(size_t)row * N + col] = s;
}

// Corner turning: B is column-major. Threads load it with tx along k (coalesced) into
// Bs[n_local][k_local]; the product then reads Bs[tx][kk], a stride of T + PAD words.
template <int T, int PAD>
__device__ void corner_turning(const float* __restrict__ A, const float* __restrict__ B,
                               float* __restrict__ C, int M, int N, int K) {
    __shared__ float As[T][T];
    __shared__ float Bs[T][T + PAD];
    int tx = threadIdx.x, ty = threadIdx.y;
    int row = blockIdx.y * T + ty, col = blockIdx.x * T + tx;
    int bcol = blockIdx.x * T + ty;
    float s = 0.f;
    for (int ph = 0; ph < (K + T - 1) / T; ++ph) {
        int k = ph * T + tx;
        As[ty][tx] = (row < M && k < K) ? A[(size_t)row * K + k] : 0.f;
        Bs[ty][tx] = (bcol < N && k < K) ? B[(size_t)bcol * K + k] : 0.f;
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < T; ++kk) s += As[ty][kk] * Bs[tx][kk];
        __syncthreads();
    }
    if (row < M && col < N) C[(size_t)row * N + col] = s;
}

// Thread coarsening: one block computes CF output tiles side by side, loading each A tile once.
template <int T, int CF>
__device__ void coarsened(const float* __restrict__ A, const float* __restrict__ B,
                          float* __restrict__ C, int M, int N, int K) {
    __shared__ float As[T][T];
    __shared__ float Bs[T][T];
    int tx = threadIdx.x, ty = threadIdx.y;
    int row = blockIdx.y * T + ty, col0 = blockIdx.x * T * CF + tx;
    float s[CF];
#pragma unroll
    for (int c = 0; c < CF; ++c) s[c] = 0.f;
    for (int ph = 0; ph < (K + T - 1) / T; ++ph) {
        int ka = ph * T + tx, kb = ph * T + ty;
        As[ty][tx] = (row < M && ka < K) ? A[(size_t)row * K + ka] : 0.f;
#pragma unroll
        for (int c = 0; c < CF; ++c) {
            int col = col0 + c * T;
            Bs[ty][tx] = (kb < K && col < N) ? B[(size_t)kb * N + col] : 0.f;
            __syncthreads();
#pragma unroll
            for (int kk = 0; kk < T; ++kk) s[c] += As[ty][kk] * Bs[kk][tx];
            __syncthreads();
        }
    }
#pragma unroll
    for (int c = 0; c < CF; ++c) {
        int col = col0 + c * T;
        if (row < M && col < N) C[(size_t)row * N + col] = s[c];
    }
}

#define MM_ARGS const float *A, const float *B, float *C, int M, int N, int K
extern "C" __global__ void matmul_tiled_16(MM_ARGS) { tiled<16>(A, B, C, M, N, K); }
extern "C" __global__ void matmul_tiled_32(MM_ARGS) { tiled<32>(A, B, C, M, N, K); }
extern "C" __global__ void matmul_corner_turning_16_0(MM_ARGS) { corner_turning<16, 0>(A, B, C, M, N, K); }
extern "C" __global__ void matmul_corner_turning_16_1(MM_ARGS) { corner_turning<16, 1>(A, B, C, M, N, K); }
extern "C" __global__ void matmul_corner_turning_32_0(MM_ARGS) { corner_turning<32, 0>(A, B, C, M, N, K); }
extern "C" __global__ void matmul_corner_turning_32_1(MM_ARGS) { corner_turning<32, 1>(A, B, C, M, N, K); }
extern "C" __global__ void matmul_coarsened_32_1(MM_ARGS) { coarsened<32, 1>(A, B, C, M, N, K); }
extern "C" __global__ void matmul_coarsened_32_2(MM_ARGS) { coarsened<32, 2>(A, B, C, M, N, K); }
extern "C" __global__ void matmul_coarsened_32_4(MM_ARGS) { coarsened<32, 4>(A, B, C, M, N, K); }
extern "C" __global__ void matmul_coarsened_32_8(MM_ARGS) { coarsened<32, 8>(A, B, C, M, N, K); }

// The kernels above with their blocks' placement recorded (experiments/placement.py): each block's SM,
// start and end on the global timer. TILE 32 and COARSE 1, 2, 4 run two blocks an SM, COARSE 8 one.
#define PLACED(NAME, ...)                                                                        \
    extern "C" __global__ void matmul_##NAME##_placed(MM_ARGS, unsigned long long* __restrict__ place) { \
        unsigned long long t0 = global_timer();                                                  \
        __VA_ARGS__(A, B, C, M, N, K);                                                           \
        record_placement(place, t0);                                                             \
    }
PLACED(tiled_16, tiled<16>)
PLACED(tiled_32, tiled<32>)
PLACED(coarsened_32_1, coarsened<32, 1>)
PLACED(coarsened_32_2, coarsened<32, 2>)
PLACED(coarsened_32_4, coarsened<32, 4>)
PLACED(coarsened_32_8, coarsened<32, 8>)
