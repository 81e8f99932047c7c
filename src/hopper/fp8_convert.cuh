// Packed e4m3 conversions on the device (cuda_fp8.h's x2 intrinsics, one CVT each): f32 / f16 pairs
// to two e4m3 bytes and back. Every e4m3 value is an f16 value, so the way back is exact.
#pragma once

#include <cstdint>

#include <cuda_fp16.h>
#include <cuda_fp8.h>

namespace fp8dsa::hopper {

// Two f32 -> two e4m3 in the low 16 bits (lo in byte 0), round to nearest, saturating.
__device__ __forceinline__ uint32_t pack_e4m3x2(float lo, float hi) {
  return static_cast<uint32_t>(__nv_cvt_float2_to_fp8x2(make_float2(lo, hi), __NV_SATFINITE, __NV_E4M3));
}

// The f16x2 value of two packed e4m3 bytes (byte 0 in the low half).
__device__ __forceinline__ __half2 e4m3x2_to_half2(uint32_t bits) {
  const __half2_raw raw = __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(bits), __NV_E4M3);
  return __half2(raw);
}

// Two f16 -> two e4m3 in the low 16 bits (the low half in byte 0), round to nearest, saturating.
__device__ __forceinline__ uint32_t e4m3x2_of_half2(__half2 v) {
  return static_cast<uint32_t>(
      __nv_cvt_halfraw2_to_fp8x2(static_cast<__half2_raw>(v), __NV_SATFINITE, __NV_E4M3));
}

}  // namespace fp8dsa::hopper
