// Latency and ceiling probes: pointer chase per cache operator, shared-memory chase, DRAM copy
// and read, L2-resident read, shared-memory bandwidth, FP32 FMA peak, vector add for streams.
#include "common.cuh"

// One thread follows next[] for warm steps, then times `steps` dependent loads with clock64.
#define CHASE(OP)                                                                                   \
    extern "C" __global__ void chase_##OP(const unsigned* __restrict__ next, int warm, int steps,  \
                                          unsigned long long* cycles, unsigned* sink) {            \
        unsigned j = 0;                                                                             \
        for (int s = 0; s < warm; ++s)                                                              \
            asm volatile("ld.global." #OP ".u32 %0, [%1];" : "=r"(j) : "l"(next + j) : "memory");  \
        long long t0 = clock64();                                                                   \
        for (int s = 0; s < steps; ++s)                                                             \
            asm volatile("ld.global." #OP ".u32 %0, [%1];" : "=r"(j) : "l"(next + j) : "memory");  \
        long long t1 = clock64();                                                                   \
        cycles[0] = (unsigned long long)(t1 - t0);                                                  \
        sink[0] = j;                                                                                \
    }
CHASE(ca)
CHASE(cg)
CHASE(cv)

extern "C" __global__ void chase_shared(const unsigned* __restrict__ init, int n, int steps,
                                        unsigned long long* cycles, unsigned* sink) {
    __shared__ unsigned s[4096];
    for (int i = 0; i < n; ++i) s[i] = init[i];
    __syncthreads();
    volatile unsigned* vs = s;
    unsigned j = 0;
    long long t0 = clock64();
    for (int k = 0; k < steps; ++k) j = vs[j];
    long long t1 = clock64();
    cycles[0] = (unsigned long long)(t1 - t0);
    sink[0] = j;
}

// One thread, per trial t: load line t of x `touches` times (ld.ca), then walk `fills` lines of fill[] that
// no trial has touched, `fill_passes` times, each line `fill_touches` times a step (ld.ca, each word the
// index of the next; a trial's last holds 0, as x's words do), then time the reload of x's line t: served
// by L1 where the fills left it there. cycles[t] per trial.
// 32: the words of a 128-byte line (special.WORDS_PER_LINE, which lays out x and fill).
extern "C" __global__ void l1_survival(const unsigned* __restrict__ x, const unsigned* __restrict__ fill,
                                       int fills, int trials, unsigned long long* cycles, unsigned* sink,
                                       int touches, int fill_passes, int fill_touches) {
    __shared__ unsigned seen[64];  // words 0 and 32: ptxas drops a store the next overwrites, merges neighbours
    unsigned s = (unsigned)__cvta_generic_to_shared(seen), k = 0, v = 0;
    for (int t = 0; t < trials; ++t) {
        for (int r = 0; r < touches; ++r, k = v)  // the line loaded `touches` times, each after the last
            asm volatile("ld.global.ca.u32 %0, [%1];" : "=r"(v) : "l"(x + 32 * (size_t)t + k) : "memory");
        k = (unsigned)(t * fills) * 32u + v;  // v == 0: the walk waits on the line's arrival
        for (int p = 0; p < fill_passes; ++p) {  // each pass ends on 0: back to the run's first line
            if (p) k += (unsigned)(t * fills) * 32u;
            for (int i = 0; i < fills; ++i) {
                unsigned at = k;
                asm volatile("ld.global.ca.u32 %0, [%1];" : "=r"(k) : "l"(fill + at) : "memory");
                for (int r = 1; r < fill_touches; ++r)  // the same word again once it is in (k % 32 == 0)
                    asm volatile("ld.global.ca.u32 %0, [%1];" : "=r"(k) : "l"(fill + at + (k & 31u)) : "memory");
            }
        }
        asm volatile("st.shared.u32 [%0], %1;" ::"r"(s), "r"(k) : "memory");  // issues once the last fill is in
        long long t0 = clock64();
        asm volatile("ld.global.ca.u32 %0, [%1];" : "=r"(v) : "l"(x + 32 * (size_t)t + k) : "memory");  // k == 0
        asm volatile("st.shared.u32 [%0], %1;" ::"r"(s + 128), "r"(v) : "memory");  // ... once the reload is in
        cycles[t] = (unsigned long long)(clock64() - t0);
        k = v;
    }
    sink[0] = k + seen[0] + seen[32];
}

extern "C" __global__ void copy_f1(const float* __restrict__ in, float* __restrict__ out, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        out[i] = in[i];
}

extern "C" __global__ void copy_f4(const float4* __restrict__ in, float4* __restrict__ out, size_t n4) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n4; i += (size_t)gridDim.x * blockDim.x)
        out[i] = in[i];
}

extern "C" __global__ void read_f1(const float* __restrict__ in, float* __restrict__ out, size_t n) {
    float acc = 0.f;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        acc += in[i];
    out[blockIdx.x * blockDim.x + threadIdx.x] = acc;
}

// Read-only stream with UNROLL independent 16-byte loads in flight per thread.
extern "C" __global__ void read_f4(const float4* __restrict__ in, float* __restrict__ out, size_t n4) {
    constexpr int UNROLL = 4;
    float acc = 0.f;
    size_t stride = (size_t)gridDim.x * blockDim.x;
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    for (; i + (UNROLL - 1) * stride < n4; i += UNROLL * stride) {
        float4 v[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) v[u] = in[i + u * stride];
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) acc += sum_of(v[u]);
    }
    for (; i < n4; i += stride) acc += sum_of(in[i]);
    out[blockIdx.x * blockDim.x + threadIdx.x] = acc;
}

// The reading L2 flush: read_f4's stream (4 float4 loads in flight per thread) over a zeroed
// buffer, writing nothing (acc never equals `never`), so it leaves no dirty line in L2.
extern "C" __global__ void flush_read(const float4* __restrict__ in, float* __restrict__ out, size_t n4,
                                      float never) {
    float acc = 0.f;
    size_t stride = (size_t)gridDim.x * blockDim.x;
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    for (; i + 3 * stride < n4; i += 4 * stride) {
        float4 a = in[i], b = in[i + stride], c = in[i + 2 * stride], d = in[i + 3 * stride];
        acc += sum_of(a) + sum_of(b) + sum_of(c) + sum_of(d);
    }
    for (; i < n4; i += stride) acc += sum_of(in[i]);
    if (acc == never) out[blockIdx.x * blockDim.x + threadIdx.x] = acc;
}

// Keeps one SM busy for `cycles` SM cycles and touches no memory: queued after the L2 flush, it holds
// the GPU busy while the host enqueues the timed launch, so no launch latency lands between the events.
extern "C" __global__ void spin(long long cycles) {
    long long t0 = clock64();
    while (clock64() - t0 < cycles) {}
}

// One grid-stride sweep from element i, bypassing L1 (ld.global.cg), four loads in flight.
__device__ __forceinline__ float sweep_cg(const float4* __restrict__ in, size_t n4, size_t i, size_t stride) {
    float acc = 0.f;
    for (; i + 3 * stride < n4; i += 4 * stride) {
        float4 a = __ldcg(in + i), b = __ldcg(in + i + stride), c = __ldcg(in + i + 2 * stride),
               d = __ldcg(in + i + 3 * stride);
        acc += sum_of(a) + sum_of(b) + sum_of(c) + sum_of(d);
    }
    for (; i < n4; i += stride) acc += sum_of(__ldcg(in + i));
    return acc;
}

// L2-resident read: `passes` sweeps over a buffer smaller than L2, bypassing L1 (ld.global.cg).
extern "C" __global__ void read_l2(const float4* __restrict__ in, float* __restrict__ out, size_t n4, int passes) {
    float acc = 0.f;
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (int p = 0; p < passes; ++p) acc += sweep_cg(in, n4, blockIdx.x * (size_t)blockDim.x + threadIdx.x, stride);
    out[blockIdx.x * blockDim.x + threadIdx.x] = acc;
}

// The same passes, each line read by a different block on every pass (as matmul's B, read by every
// block row): pass p reads what block (b * mult^p mod gridDim.x) reads in read_l2; mult coprime to it.
// Eight blocks an SM, as read_l2 (sharing sweep_cg had taken it to 38 registers: six blocks an SM, the
// grid in 1.33 waves - runs 20261201T212117Z-212357Z, which lost less of the buffer).
extern "C" __global__ void __launch_bounds__(256, 8)
read_l2_shared(const float4* __restrict__ in, float* __restrict__ out, size_t n4, int passes, int mult) {
    float acc = 0.f;
    size_t stride = (size_t)gridDim.x * blockDim.x;
    unsigned v = blockIdx.x;
    for (int p = 0; p < passes; ++p, v = (unsigned)(((unsigned long long)v * mult) % gridDim.x))
        acc += sweep_cg(in, n4, v * (size_t)blockDim.x + threadIdx.x, stride);
    out[blockIdx.x * blockDim.x + threadIdx.x] = acc;
}

// The shared passes with every line split between two blocks: block pair (2u, 2u+1) covers read_l2's
// two windows, 2u reading the low 64 bytes of each of their lines and 2u+1 the high 64 (as TILE 16's
// blocks share B's lines, or TILE 32's where B's pitch is off the line); roles permuted as in read_l2_shared.
extern "C" __global__ void __launch_bounds__(256, 8)
read_l2_split(const float4* __restrict__ in, float* __restrict__ out, size_t n4, int passes, int mult) {
    float acc = 0.f;
    size_t stride = (size_t)gridDim.x * blockDim.x;
    unsigned v = blockIdx.x, t = threadIdx.x;
    for (int p = 0; p < passes; ++p, v = (unsigned)(((unsigned long long)v * mult) % gridDim.x))
        acc += sweep_cg(in, n4, (size_t)(v & ~1u) * blockDim.x + (t >> 2) * 8 + (v & 1u) * 4 + (t & 3), stride);
    out[blockIdx.x * blockDim.x + threadIdx.x] = acc;
}

// Shared-memory bandwidth: conflict-free 16-byte reads, `iters` per thread.
extern "C" __global__ void smem_bw(float* __restrict__ out, int iters, int zero) {
    __shared__ float4 s[1024];
    for (int i = threadIdx.x; i < 1024; i += blockDim.x) s[i] = splat<float4>((float)i);
    __syncthreads();
    float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
    int j = threadIdx.x;
    for (int it = 0; it < iters; ++it) {
        float4 v = s[(j + (it & zero)) & 1023];
        acc.x += v.x; acc.y += v.y; acc.z += v.z; acc.w += v.w;
        j += 32 * (1 + (it & zero));
    }
    out[blockIdx.x * blockDim.x + threadIdx.x] = sum_of(acc);
}

// FMA peak: 8 independent chains per thread, 2 FLOPs per FMA, then their sum (FP32 and FP64).
__device__ __forceinline__ float fused(float x, float a, float b) { return fmaf(x, a, b); }
__device__ __forceinline__ double fused(double x, double a, double b) { return fma(x, a, b); }

template <typename T>
__device__ void fma_chains(T* __restrict__ out, int iters, T a, T b) {
    T x[8];
#pragma unroll
    for (int c = 0; c < 8; ++c) x[c] = threadIdx.x + c;
    for (int it = 0; it < iters; ++it) {
#pragma unroll
        for (int c = 0; c < 8; ++c) x[c] = fused(x[c], a, b);
    }
    T s = 0;
#pragma unroll
    for (int c = 0; c < 8; ++c) s += x[c];
    out[blockIdx.x * blockDim.x + threadIdx.x] = s;
}

extern "C" __global__ void fma_peak(float* __restrict__ out, int iters, float a, float b) {
    fma_chains(out, iters, a, b);
}

extern "C" __global__ void dfma_peak(double* __restrict__ out, int iters, double a, double b) {
    fma_chains(out, iters, a, b);
}

extern "C" __global__ void vadd(const float* __restrict__ a, const float* __restrict__ b,
                                float* __restrict__ c, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        c[i] = a[i] + b[i];
}

// Launch overhead: an empty kernel timed with events around one launch.
extern "C" __global__ void empty_kernel(float* out) {
    if (threadIdx.x == 1024) out[0] = 0.f;  // never true: keeps the parameter live
}

// Scattered 4-byte stores: each warp writes one word into each of 32 sectors (32 B apart in
// lane order, like a naive transpose's column), the 8 warps of a 256-thread block complete
// them (on the H200 the SM merges these into full sectors before L2). n is a multiple of 256.
extern "C" __global__ void scatter_store(float* __restrict__ out, size_t n) {
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i >= n) return;
    size_t j = blockIdx.x * (size_t)blockDim.x + (threadIdx.x % 32) * 8 + threadIdx.x / 32;
    out[j] = (float)(i & 0xffff) * 0.5f;
}

// Partial-line stores: each warp store touches `lines` (1..32, a power of two) 128-byte lines,
// 32/lines lanes per line writing consecutive words. Store p of warp w starts at line
// ((p*W + w)*lines) mod footprint_lines (W warps in the grid), so a warp's stores never repeat a
// line back to back. Every written word gets its own index (low 16 bits) as its value.
extern "C" __global__ void store_lines(float* __restrict__ out, int lines, long long footprint_lines,
                                       int passes) {
    int lane = threadIdx.x & 31, per_line = 32 / lines;
    long long w = (blockIdx.x * (long long)blockDim.x + threadIdx.x) >> 5, W = (gridDim.x * (long long)blockDim.x) >> 5;
    for (int p = 0; p < passes; ++p) {
        long long line = ((p * W + w) * lines) % footprint_lines + lane / per_line;
        long long j = line * 32 + lane % per_line;
        out[j] = (float)(j & 0xffff);
    }
}

// probe.store_lines with the lines scattered: line L of store_lines goes to (L * stride) mod
// footprint_lines (footprint a power of two, stride odd: a permutation), so the lines one warp
// store touches, consecutive in store_lines, lie stride lines (stride x 128 bytes) apart.
extern "C" __global__ void store_lines_scattered(float* __restrict__ out, int lines, long long footprint_lines,
                                                 int passes, long long stride) {
    int lane = threadIdx.x & 31, per_line = 32 / lines;
    long long w = (blockIdx.x * (long long)blockDim.x + threadIdx.x) >> 5, W = (gridDim.x * (long long)blockDim.x) >> 5;
    for (int p = 0; p < passes; ++p) {
        long long line = ((((p * W + w) * lines) % footprint_lines + lane / per_line) * stride) % footprint_lines;
        long long j = line * 32 + lane % per_line;
        out[j] = (float)(j & 0xffff);
    }
}

// A shifted copy whose neighbouring 128-byte segments are stored by warps 2^dist_log2 apart:
// warp g (of W = n/32) copies segment s = (g mod dist) * (W / dist) + g / dist of `in` to `out`
// shifted by offset_bytes, so where the offset is not a multiple of 32 the sector two segments
// share is completed by a warp dist warps later (dist 1: a plain shifted copy). 32-bit index
// arithmetic with shifts, so the copy stays memory-bound. n % 32 == 0, W % dist == 0, W < 2^31.
extern "C" __global__ void split_store(const float* __restrict__ in, char* __restrict__ out, int offset_bytes,
                                       unsigned n, int dist_log2) {
    unsigned g = (blockIdx.x * blockDim.x + threadIdx.x) >> 5, W = n >> 5;
    if (g >= W) return;
    unsigned s = (g & ((1u << dist_log2) - 1)) * (W >> dist_log2) + (g >> dist_log2);
    size_t j = (size_t)s * 32 + (threadIdx.x & 31);
    reinterpret_cast<float*>(out + offset_bytes)[j] = in[j];
}

// A copy whose output sectors are written in 4-byte pieces, as a naive transpose's column stores:
// warp g writes word k = (g / dist) % 8 of 32 sectors (one per lane), so the 8 pieces of a sector
// come from warps dist apart (dist 1: the 8 warps of one 256-thread block). Each thread first
// loads in[i] (a kernel with loads: L1 does not combine the block's stores). n % (256 * dist) == 0.
extern "C" __global__ void piece_store(const float* __restrict__ in, float* __restrict__ out, unsigned n,
                                       int dist_log2) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    unsigned g = i >> 5, d = 1u << dist_log2;
    unsigned k = (g >> dist_log2) & 7, column = ((g >> (dist_log2 + 3)) << dist_log2) | (g & (d - 1));
    out[((size_t)column * 32 + (threadIdx.x & 31)) * 8 + k] = in[i];
}

// probe.piece_store with the 8 lines a warp writes `spread` (2^spread_log2) lines apart, as a naive
// transpose's column stores land a row apart: line j of column c is ((c / spread) * 8 + j) * spread +
// c % spread. n % (256 * max(dist, spread)) == 0.
extern "C" __global__ void piece_spread(const float* __restrict__ in, float* __restrict__ out, unsigned n,
                                        int dist_log2, int spread_log2) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    unsigned g = i >> 5, d = 1u << dist_log2, lane = threadIdx.x & 31;
    unsigned k = (g >> dist_log2) & 7, column = ((g >> (dist_log2 + 3)) << dist_log2) | (g & (d - 1));
    unsigned line = ((((column >> spread_log2) << 3) | (lane >> 2)) << spread_log2) |
                    (column & ((1u << spread_log2) - 1));
    out[((size_t)line * 4 + (lane & 3)) * 8 + k] = in[i];
}

// L1-resident loads: lane l of every warp reads word l*stride + 32*(it % 8) (stride 0: one word
// for all lanes), `iters` times; all warps read the same words, so after the first touch every
// load hits L1. `zero` is 0 at run time (unknown to the compiler: no load is hoisted).
extern "C" __global__ void load_lines(const float* __restrict__ in, float* __restrict__ out, int stride,
                                      int iters, int zero) {
    int lane = threadIdx.x & 31;
    float s = 0.f;
    for (int it = 0; it < iters; ++it) s += in[lane * stride + 32 * (it & 7) + (it >> 3) * zero];
    out[blockIdx.x * blockDim.x + threadIdx.x] = s;
}

// Block launch rate: blocks that do nothing but one store from thread 0.
extern "C" __global__ void blocks_only(float* __restrict__ out) {
    if (threadIdx.x == 0) out[blockIdx.x] = (float)(blockIdx.x & 0xffff);
}

// Loaded latency: the first `lanes` threads of block 0 (1, or 32: a coalesced 128-byte load per
// step, or 128: one warp loading 512 bytes, 16 per lane) time `steps` dependent ld.global.cg loads through next[] (lane 0's value is the next line)
// while the other blocks stream `passes` times over in[0..n) with one scalar load per thread per
// step, as probe.read does (sums to out[], kept live), or copy it to copy[] when that is not null;
// with `vec`, 16-byte loads (4 in flight per thread when reading), to reach the DRAM ceiling.
extern "C" __global__ void chase_loaded(const unsigned* __restrict__ next, int steps, unsigned long long* cycles,
                                        unsigned* sink, const float* __restrict__ in, size_t n, int passes,
                                        float* __restrict__ out, int lanes, float* __restrict__ copy, int vec) {
    if (blockIdx.x == 0) {
        if (threadIdx.x >= (lanes == 128 ? 32 : lanes)) return;
        unsigned j = 0, v = 0, w1 = 0, w2 = 0, w3 = 0;
        unsigned mask = lanes == 1 ? 1u : 0xffffffffu;
        long long t0 = clock64();
        for (int s = 0; s < steps; ++s) {
            if (lanes == 128)  // 16 bytes per lane: a 512-byte request, 4 lines
                asm volatile("ld.global.cg.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(v), "=r"(w1), "=r"(w2), "=r"(w3)
                             : "l"(next + j + 4 * threadIdx.x) : "memory");
            else
                asm volatile("ld.global.cg.u32 %0, [%1];" : "=r"(v) : "l"(next + j + threadIdx.x) : "memory");
            j = __shfl_sync(mask, v, 0);
        }
        if (threadIdx.x == 0) {
            cycles[0] = (unsigned long long)(clock64() - t0);
            sink[0] = j + ((w1 ^ w2 ^ w3) & 0x80000000u);  // keeps the vector words live
        }
        return;
    }
    float acc = 0.f;
    size_t stride = (size_t)(gridDim.x - 1) * blockDim.x;
    size_t first = (blockIdx.x - 1) * (size_t)blockDim.x + threadIdx.x;
    if (vec) {  // 16-byte loads: probe.copy's float4 copy, or read_f4's 4 loads in flight per thread
        const float4* in4 = reinterpret_cast<const float4*>(in);
        float4* copy4 = reinterpret_cast<float4*>(copy);
        size_t n4 = n / 4;
        for (int p = 0; p < passes; ++p) {
            size_t i = first;
            if (copy) {
                for (; i < n4; i += stride) copy4[i] = in4[i];
                continue;
            }
            for (; i + 3 * stride < n4; i += 4 * stride) {
                float4 a = in4[i], b = in4[i + stride], c = in4[i + 2 * stride], d = in4[i + 3 * stride];
                acc += sum_of(a) + sum_of(b) + sum_of(c) + sum_of(d);
            }
            for (; i < n4; i += stride) acc += sum_of(in4[i]);
        }
    } else {
        for (int p = 0; p < passes; ++p)
            for (size_t i = first; i < n; i += stride) {
                if (copy) copy[i] = in[i];  // a copy stream: every load followed by a store
                else acc += in[i];
            }
    }
    out[(blockIdx.x - 1) * blockDim.x + threadIdx.x] = acc;
}

// Tag-stage conflicts between two lines: lanes 0..15 read words 0..15 of line b, lanes 16..31
// words 16..31 at `dist` words further (line b + dist/32 when dist is a multiple of 32), b moving
// over 8 consecutive lines with `it`; every load hits L1 after the first touch.
extern "C" __global__ void pair_lines(const float* __restrict__ in, float* __restrict__ out, int dist, int iters,
                                      int zero) {
    int lane = threadIdx.x & 31;
    int off = lane < 16 ? lane : dist + lane;
    float s = 0.f;
    for (int it = 0; it < iters; ++it) s += in[off + 32 * (it & 7) + (it >> 3) * zero];
    out[blockIdx.x * blockDim.x + threadIdx.x] = s;
}

// Barrier rounds as tiled matmul runs them, one 32 x 32 block: each round every warp loads one
// 128-byte row of a 32 x 32 tile (tile (blockIdx.x + r) mod `tiles` of an L2-sized pool), stores
// it to shared memory, waits at a barrier, computes, and waits again. WORK 32 is matmul's inner
// loop (s += As[ty][kk] * Bs[kk][tx]); WORK 0 reads one neighbour's word. With LOADS 2 the A tile
// is loaded every round too (tile (blockIdx.x + r + tiles/2) mod `tiles`), as COARSE 1 does; with 1
// it is loaded once (COARSE 8's rounds but one in eight). The dynamic shared memory the launch asks
// for sets how many blocks share an SM.
// TIMED: thread (0, 0) keeps every STAMP_STRIDE-th round's start on its SM's clock in shared memory
// (`kept`, the timed kernel's) and writes them, then the SM's id, to stamps[block][0 .. STAMP_SLOTS]
// at the end: when the two blocks of an SM read each other's tiles (experiments/barrier_phase.py).
#define STAMP_STRIDE 16
#define STAMP_SLOTS 256  // rounds <= STAMP_STRIDE x STAMP_SLOTS
template <int WORK, int LOADS, bool TIMED = false>
__device__ void barrier_rounds(const float* __restrict__ in, float* __restrict__ out, int rounds, int tiles,
                               long long* __restrict__ stamps = nullptr, long long* kept = nullptr) {
    __shared__ float As[32][32];
    __shared__ float Bs[32][32];
    int tx = threadIdx.x, ty = threadIdx.y;
    if (LOADS == 1) As[ty][tx] = in[(size_t)(blockIdx.x % tiles) * 1024 + ty * 32 + tx];
    float s = 0.f;
    for (int r = 0; r < rounds; ++r) {
        if (TIMED && tx == 0 && ty == 0 && r % STAMP_STRIDE == 0) kept[r / STAMP_STRIDE] = clock64();
        if (LOADS == 2) As[ty][tx] = in[(size_t)((blockIdx.x + r + tiles / 2) % tiles) * 1024 + ty * 32 + tx];
        Bs[ty][tx] = in[(size_t)((blockIdx.x + r) % tiles) * 1024 + ty * 32 + tx];
        __syncthreads();
        if (WORK == 0) {
            s += Bs[ty][(tx + 1) & 31];
        } else {
#pragma unroll
            for (int kk = 0; kk < WORK; ++kk) s += As[ty][kk] * Bs[kk][tx];
        }
        __syncthreads();
    }
    out[(size_t)blockIdx.x * 1024 + ty * 32 + tx] = s;
    if (TIMED && tx == 0 && ty == 0) {
        unsigned smid;
        asm volatile("mov.u32 %0, %%smid;" : "=r"(smid));
        long long* mine = stamps + (size_t)blockIdx.x * (STAMP_SLOTS + 1);
        for (int i = 0; i * STAMP_STRIDE < rounds; ++i) mine[i] = kept[i];
        mine[STAMP_SLOTS] = smid;
    }
}

#define ROUNDS_ARGS const float *__restrict__ in, float *__restrict__ out, int rounds, int tiles
extern "C" __global__ void barrier_rounds_0(ROUNDS_ARGS) { barrier_rounds<0, 1>(in, out, rounds, tiles); }
extern "C" __global__ void barrier_rounds_32(ROUNDS_ARGS) { barrier_rounds<32, 1>(in, out, rounds, tiles); }
extern "C" __global__ void barrier_rounds_32_2(ROUNDS_ARGS) { barrier_rounds<32, 2>(in, out, rounds, tiles); }
#define TIMED_ARGS ROUNDS_ARGS, long long* __restrict__ stamps
#define TIMED_ROUNDS(WORK, LOADS)                                               \
    __shared__ long long kept[STAMP_SLOTS];                                     \
    barrier_rounds<WORK, LOADS, true>(in, out, rounds, tiles, stamps, kept)
extern "C" __global__ void barrier_rounds_0_timed(TIMED_ARGS) { TIMED_ROUNDS(0, 1); }
extern "C" __global__ void barrier_rounds_32_timed(TIMED_ARGS) { TIMED_ROUNDS(32, 1); }
extern "C" __global__ void barrier_rounds_32_2_timed(TIMED_ARGS) { TIMED_ROUNDS(32, 2); }
