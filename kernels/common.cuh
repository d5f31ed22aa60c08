// Shared helpers for the perfmodel kernel suite. Every kernel is extern "C" so PyCUDA and ncu
// see plain names; templates are instantiated through small wrappers.
#pragma once
#include <cstdint>

__device__ __forceinline__ float sum_of(float v) { return v; }
__device__ __forceinline__ float sum_of(float2 v) { return v.x + v.y; }
__device__ __forceinline__ float sum_of(float4 v) { return v.x + v.y + v.z + v.w; }

template <typename T> __device__ __forceinline__ T splat(float f);
template <> __device__ __forceinline__ float splat<float>(float f) { return f; }
template <> __device__ __forceinline__ float2 splat<float2>(float f) { return make_float2(f, f + 1.f); }
template <> __device__ __forceinline__ float4 splat<float4>(float f) {
    return make_float4(f, f + 1.f, f + 2.f, f + 3.f);
}
