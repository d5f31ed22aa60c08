// 2-D wave equation, 5-point stencil with damping, walls and a point source.
//   next = damp * (2 u - prev + c2 * (uW + uE + uN + uS - 4 u)),  + amp * sin(omega t) at the source
// Walls and cells outside the grid have c2 = damp = 0 and stay 0. Arrays are ny x nx, row-major.
#include "common.cuh"

__device__ __forceinline__ float wave_update(float u, float prev, float lap, float c2, float damp) {
    return damp * (2.f * u - prev + c2 * lap);
}

extern "C" __global__ void wave_naive(const float* __restrict__ u, const float* __restrict__ prev,
                                      const float* __restrict__ c2, const float* __restrict__ damp,
                                      float* __restrict__ next, int nx, int ny, int src, float src_value) {
    int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= nx || y >= ny) return;
    size_t i = (size_t)y * nx + x;
    float c = u[i];
    float w = x > 0 ? u[i - 1] : 0.f, e = x < nx - 1 ? u[i + 1] : 0.f;
    float n = y > 0 ? u[i - nx] : 0.f, s = y < ny - 1 ? u[i + nx] : 0.f;
    float v = wave_update(c, prev[i], w + e + n + s - 4.f * c, c2[i], damp[i]);
    if ((int)i == src) v += src_value;
    next[i] = v;
}

// Temporal blocking: a block loads a (TILE + 2 STEPS)^2 region of u, prev, c2 and damp into
// shared memory, advances it STEPS time steps (the valid region shrinks by one cell per step)
// and writes the TILE x TILE interior of the last two time levels. src_values[s] is the
// source term of step s of this launch. PPT = output pixels per thread (1 or 2).
template <int TILE, int STEPS, int PPT>
__device__ void wave_temporal(const float* __restrict__ u, const float* __restrict__ prev,
                              const float* __restrict__ c2, const float* __restrict__ damp,
                              float* __restrict__ u_out, float* __restrict__ prev_out, int nx, int ny,
                              int src, const float* __restrict__ src_values) {
    constexpr int R = TILE + 2 * STEPS;
    constexpr int THREADS = TILE * TILE / PPT;
    __shared__ float su[R][R], sp[R][R], sc[R][R], sd[R][R];
    int tid = threadIdx.y * blockDim.x + threadIdx.x;
    int x0 = blockIdx.x * TILE - STEPS, y0 = blockIdx.y * TILE - STEPS;
    int src_x = src % nx, src_y = src / nx;
    for (int j = tid; j < R * R; j += THREADS) {
        int ly = j / R, lx = j % R, gx = x0 + lx, gy = y0 + ly;
        bool in = gx >= 0 && gx < nx && gy >= 0 && gy < ny;
        size_t i = (size_t)gy * nx + gx;
        su[ly][lx] = in ? u[i] : 0.f;
        sp[ly][lx] = in ? prev[i] : 0.f;
        sc[ly][lx] = in ? c2[i] : 0.f;
        sd[ly][lx] = in ? damp[i] : 0.f;
    }
    __syncthreads();
    float (*cur)[R] = su;
    float (*old)[R] = sp;
    for (int s = 1; s <= STEPS; ++s) {
        int n = R - 2 * s;  // cells at distance >= s from the region's edge
        for (int j = tid; j < n * n; j += THREADS) {
            int ly = s + j / n, lx = s + j % n;
            float c = cur[ly][lx];
            float lap = cur[ly][lx - 1] + cur[ly][lx + 1] + cur[ly - 1][lx] + cur[ly + 1][lx] - 4.f * c;
            float v = wave_update(c, old[ly][lx], lap, sc[ly][lx], sd[ly][lx]);
            if (x0 + lx == src_x && y0 + ly == src_y) v += src_values[s - 1];
            old[ly][lx] = v;  // the new level replaces the oldest, cell by cell
        }
        __syncthreads();
        float (*t)[R] = cur;
        cur = old;
        old = t;
    }
    for (int j = tid; j < TILE * TILE; j += THREADS) {
        int ly = STEPS + j / TILE, lx = STEPS + j % TILE, gx = x0 + lx, gy = y0 + ly;
        if (gx < nx && gy < ny) {
            size_t i = (size_t)gy * nx + gx;
            u_out[i] = cur[ly][lx];
            prev_out[i] = old[ly][lx];
        }
    }
}

#define WAVE_T(S, P)                                                                                \
    extern "C" __global__ void wave_temporal_##S##_##P(                                            \
        const float* u, const float* p, const float* c, const float* d, float* uo, float* po,      \
        int nx, int ny, int src, const float* sv) {                                                \
        wave_temporal<32, S, P>(u, p, c, d, uo, po, nx, ny, src, sv);                              \
    }
WAVE_T(1, 1)
WAVE_T(2, 1)
WAVE_T(4, 1)
WAVE_T(6, 1)
WAVE_T(8, 1)
WAVE_T(1, 2)
WAVE_T(2, 2)
WAVE_T(4, 2)
WAVE_T(6, 2)
WAVE_T(8, 2)
