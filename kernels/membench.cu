// Memory-access microbenchmarks: strided global loads/stores, strided shared loads/stores and
// 2-D shared tiles read by row or by column. Their counters validate perfmodel.memory.
#include "common.cuh"

// out[i] = sum(in_T[i * stride]) with the T array starting offset_bytes into `in`.
template <typename T>
__device__ void gload(const char* __restrict__ in, float* __restrict__ out, int stride,
                      int offset_bytes, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        const T* p = reinterpret_cast<const T*>(in + offset_bytes);
        out[i] = sum_of(p[(size_t)i * stride]);
    }
}

// out_T[i * stride] = splat(in[i]) with the T array starting offset_bytes into `out`.
template <typename T>
__device__ void gstore(const float* __restrict__ in, char* __restrict__ out, int stride,
                       int offset_bytes, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        T* p = reinterpret_cast<T*>(out + offset_bytes);
        p[(size_t)i * stride] = splat<T>(in[i]);
    }
}

#define GLOBAL_BENCH(W, T)                                                                    \
    extern "C" __global__ void gload_##W(const char* in, float* out, int s, int o, int n) {  \
        gload<T>(in, out, s, o, n);                                                           \
    }                                                                                         \
    extern "C" __global__ void gstore_##W(const float* in, char* out, int s, int o, int n) { \
        gstore<T>(in, out, s, o, n);                                                          \
    }
GLOBAL_BENCH(4, float)
GLOBAL_BENCH(8, float2)
GLOBAL_BENCH(16, float4)

// Each warp owns 32*stride elements of T in dynamic shared memory; lane l touches element
// l*stride of its warp's slice `reps` times. (r & zero) is 0 at run time but unknown to the
// compiler, so every repetition is a real shared-memory instruction.
template <typename T>
__device__ void sload(float* __restrict__ out, int stride, int reps, int zero) {
    extern __shared__ __align__(16) unsigned char smem_raw[];
    T* s = reinterpret_cast<T*>(smem_raw);
    int size = (blockDim.x / 32) * 32 * stride;
    for (int j = threadIdx.x; j < size; j += blockDim.x) s[j] = splat<T>((float)j);
    __syncthreads();
    int base = (threadIdx.x / 32) * 32 * stride, lane = threadIdx.x & 31;
    float acc = 0.f;
    for (int r = 0; r < reps; ++r) acc += sum_of(s[base + ((lane * stride) ^ (r & zero))]);
    out[blockIdx.x * blockDim.x + threadIdx.x] = acc;
}

template <typename T>
__device__ void sstore(float* __restrict__ out, int stride, int reps, int zero) {
    extern __shared__ __align__(16) unsigned char smem_raw[];
    T* s = reinterpret_cast<T*>(smem_raw);
    int base = (threadIdx.x / 32) * 32 * stride, lane = threadIdx.x & 31;
    for (int r = 0; r < reps; ++r) s[base + ((lane * stride) ^ (r & zero))] = splat<T>((float)(r + lane));
    __syncwarp();
    out[blockIdx.x * blockDim.x + threadIdx.x] = sum_of(s[base + lane * stride]);
}

#define SHARED_BENCH(W, T)                                                                    \
    extern "C" __global__ void sload_##W(float* out, int s, int reps, int zero) {             \
        sload<T>(out, s, reps, zero);                                                         \
    }                                                                                         \
    extern "C" __global__ void sstore_##W(float* out, int s, int reps, int zero) {            \
        sstore<T>(out, s, reps, zero);                                                        \
    }
SHARED_BENCH(4, float)
SHARED_BENCH(8, float2)
SHARED_BENCH(16, float4)

// A TILE x TILE block writes tile[ty][tx] (by row), then reads it back `reps` times by row
// (COL = 0: tile[ty][tx]) or by column (COL = 1: tile[tx][ty]).
template <int TILE, int PAD, int COL>
__device__ void stile(float* __restrict__ out, int reps, int zero) {
    __shared__ float tile[TILE][TILE + PAD];
    int tx = threadIdx.x, ty = threadIdx.y;
    tile[ty][tx] = (float)(tx + 3 * ty);
    __syncthreads();
    float acc = 0.f;
    for (int r = 0; r < reps; ++r) {
        int x = tx ^ (r & zero);
        acc += COL ? tile[x][ty] : tile[ty][x];
    }
    out[(blockIdx.x * TILE + ty) * TILE + tx] = acc;
}

#define TILE_BENCH(T, P)                                                                           \
    extern "C" __global__ void stile_row_##T##_##P(float* o, int r, int z) { stile<T, P, 0>(o, r, z); } \
    extern "C" __global__ void stile_col_##T##_##P(float* o, int r, int z) { stile<T, P, 1>(o, r, z); }
TILE_BENCH(32, 0)
TILE_BENCH(32, 1)
TILE_BENCH(32, 2)
TILE_BENCH(16, 0)
TILE_BENCH(16, 1)

// Broadcast and permutation patterns: lane l of each warp reads s[warp*32 + idx(l)], with
// idx(l) chosen by `mode` (see perfmodel/suite/cases/membench.py, PATTERNS).
__device__ __forceinline__ int pattern_index(int mode, int lane) {
    switch (mode) {
        case 0: return 0;
        case 1: return lane % 16;
        case 2: return lane % 8;
        case 3: return lane / 2;
        case 4: return lane / 8;
        case 5: return lane ^ 1;
        case 6: return (lane % 4) * 8;
        default: return (lane % 16) * 2;
    }
}

template <typename T>
__device__ void spattern(float* __restrict__ out, int mode, int reps, int zero) {
    extern __shared__ __align__(16) unsigned char smem_raw[];
    T* s = reinterpret_cast<T*>(smem_raw);
    for (int j = threadIdx.x; j < 64; j += blockDim.x) s[j] = splat<T>((float)j);
    __syncthreads();
    int lane = threadIdx.x & 31, base = (threadIdx.x / 32) * 32;
    int idx = pattern_index(mode, lane);
    float acc = 0.f;
    for (int r = 0; r < reps; ++r) acc += sum_of(s[base + (idx ^ (r & zero))]);
    out[blockIdx.x * blockDim.x + threadIdx.x] = acc;
}

extern "C" __global__ void spattern_4(float* o, int m, int r, int z) { spattern<float>(o, m, r, z); }
extern "C" __global__ void spattern_8(float* o, int m, int r, int z) { spattern<float2>(o, m, r, z); }
extern "C" __global__ void spattern_16(float* o, int m, int r, int z) { spattern<float4>(o, m, r, z); }

// Carveout probes: which shared-memory carveout does the driver configure for a kernel with
// BYTES of static (or the same amount of dynamic) shared memory per block? ncu reports it through
// launch__occupancy_limit_shared_mem.
template <int WORDS>
__device__ void smem_static_probe(float* __restrict__ out) {
    __shared__ float s[WORDS];
    for (int j = threadIdx.x; j < WORDS; j += blockDim.x) s[j] = (float)j;
    __syncthreads();
    out[blockIdx.x * blockDim.x + threadIdx.x] = s[(threadIdx.x + 1) % WORDS];
}

#define STATIC_PROBE(B) \
    extern "C" __global__ void smem_static_##B(float* o) { smem_static_probe<B / 4>(o); }
STATIC_PROBE(1024)
STATIC_PROBE(2048)
STATIC_PROBE(3072)
STATIC_PROBE(5120)
STATIC_PROBE(9216)

extern "C" __global__ void smem_dynamic(float* __restrict__ out, int words) {
    extern __shared__ float s[];
    for (int j = threadIdx.x; j < words; j += blockDim.x) s[j] = (float)j;
    __syncthreads();
    out[blockIdx.x * blockDim.x + threadIdx.x] = s[(threadIdx.x + 1) % words];
}
