// Online-softmax pieces of the FP8 sparse MLA consumers, on the m64n64 f32 accumulator fragment
// (hopper/wgmma.cuh: a thread holds rows lane/4 and lane/4 + 8 of its warp's 16, register r in
// row half (r / 2) % 2, column (r / 4) * 8 + (lane % 4) * 2 + r % 2).
#pragma once

#include <cstdint>

#include <cuda_fp16.h>
#include <cuda_fp8.h>

namespace fp8dsa::sparse_mla {

__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

// Max over the four lanes of a quad (the threads that share a row).
__device__ __forceinline__ float quad_max(float x) {
  x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
  return fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
}
__device__ __forceinline__ float quad_sum(float x) {
  x += __shfl_xor_sync(0xffffffffu, x, 1);
  return x + __shfl_xor_sync(0xffffffffu, x, 2);
}

// Two f32 -> two e4m3 in the low 16 bits (lo in byte 0), round to nearest, saturating.
__device__ __forceinline__ uint32_t pack_e4m3x2(float lo, float hi) {
  return static_cast<uint32_t>(__nv_cvt_float2_to_fp8x2(make_float2(lo, hi), __NV_SATFINITE, __NV_E4M3));
}

// The f16x2 value of two packed e4m3 bytes (exact: every e4m3 value is an f16 value).
__device__ __forceinline__ __half2 e4m3x2_to_half2(uint32_t bits) {
  const __half2_raw raw = __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(bits), __NV_E4M3);
  return __half2(raw);
}

// Builds the wgmma A fragment (m64k32, 8-bit) of P for K step ks (keys 32ks..32ks+31) from the
// probabilities in acc registers 16ks..16ks+15, with no data movement between threads: fragment
// register j takes accumulator registers {b, b+1, b+4, b+5}, b = 16ks + 8(j/2) + 2(j%2). The K
// positions this assigns to keys are the permutation v_key_at() (transpose_v.cuh), which V^T and
// the shared-memory copy of P follow too.
__device__ __forceinline__ void p_fragment(uint32_t (&frag)[4], const float* p, int ks) {
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const int b = 16 * ks + 8 * (j / 2) + 2 * (j % 2);
    frag[j] = pack_e4m3x2(p[b], p[b + 1]) | (pack_e4m3x2(p[b + 4], p[b + 5]) << 16);
  }
}

}  // namespace fp8dsa::sparse_mla
