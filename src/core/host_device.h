// FP8DSA_HOST_DEVICE: a function compiled for both the host and the device (by nvcc), or a plain
// inline function in host-only translation units.
#pragma once

#if defined(__CUDACC__)
#define FP8DSA_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define FP8DSA_HOST_DEVICE inline
#endif
