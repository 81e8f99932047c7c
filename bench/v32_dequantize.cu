// The conversion passes an engine runs today on a V3.2 FP8 cache: before FlashMLA's BF16 kernel the
// 656-byte rows -> bf16 [rows, 576] (nope e4m3 * its block's scale, rope copied); before SGLang's
// FP8 kernel (Q8KV8) -> unit-scale e4m3 [rows, 576]. Memory-bound; one thread per 8 output columns.
#include "v32_dequantize.h"

#include <cuda_bf16.h>
#include <cuda_fp8.h>

#include "core/cuda_check.h"
#include "fp8dsa/sparse_mla.h"

namespace fp8dsa::bench {
namespace {

constexpr int kGroupsPerRow = 576 / 8;  // 64 nope groups of 8 e4m3, 8 rope groups of 8 bf16

// The 8 values of output group g of a row as floats: nope e4m3 * scale (g < 64) or the rope's bf16.
__device__ __forceinline__ void row_group_values(const uint8_t* src, int g, float (&v)[8]) {
  if (g >= 64) {
    const uint4 w = *reinterpret_cast<const uint4*>(src + kV32RopeOffset + 16 * (g - 64));
    const uint32_t words[4] = {w.x, w.y, w.z, w.w};
    for (int j = 0; j < 4; ++j) {
      v[2 * j] = __uint_as_float(words[j] << 16);
      v[2 * j + 1] = __uint_as_float(words[j] & 0xffff0000u);
    }
    return;
  }
  const float scale = reinterpret_cast<const float*>(src + kV32ScaleOffset)[g / 16];
  const uint2 bytes = *reinterpret_cast<const uint2*>(src + 8 * g);
  for (int j = 0; j < 4; ++j) {
    const uint32_t pair = ((j < 2 ? bytes.x : bytes.y) >> (16 * (j % 2))) & 0xffffu;
    const __half2_raw h = __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(pair), __NV_E4M3);
    const float2 f = __half22float2(__half2(h));
    v[2 * j] = f.x * scale;
    v[2 * j + 1] = f.y * scale;
  }
}

__global__ void dequantize_v32_kernel(const uint8_t* kv, int64_t num_rows, int64_t row_stride, uint16_t* out) {
  const int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (i >= num_rows * kGroupsPerRow) return;
  const int64_t row = i / kGroupsPerRow;
  const int g = static_cast<int>(i % kGroupsPerRow);
  const uint8_t* src = kv + row * row_stride;
  uint4* dst = reinterpret_cast<uint4*>(out + row * 576 + 8 * g);
  if (g >= 64) {  // the rope's bf16 bits as they are
    *dst = *reinterpret_cast<const uint4*>(src + kV32RopeOffset + 16 * (g - 64));
    return;
  }
  float v[8];
  row_group_values(src, g, v);
  uint32_t words[4];
  for (int j = 0; j < 4; ++j) {
    const __nv_bfloat162 b = __floats2bfloat162_rn(v[2 * j], v[2 * j + 1]);
    words[j] = *reinterpret_cast<const uint32_t*>(&b);
  }
  *dst = make_uint4(words[0], words[1], words[2], words[3]);
}

__global__ void requantize_v32_kernel(const uint8_t* kv, int64_t num_rows, int64_t row_stride, uint8_t* out) {
  const int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (i >= num_rows * kGroupsPerRow) return;
  const int64_t row = i / kGroupsPerRow;
  const int g = static_cast<int>(i % kGroupsPerRow);
  float v[8];
  row_group_values(kv + row * row_stride, g, v);
  uint32_t words[2];
  for (int j = 0; j < 2; ++j) {
    const uint32_t lo = __nv_cvt_float2_to_fp8x2(make_float2(v[4 * j], v[4 * j + 1]), __NV_SATFINITE, __NV_E4M3);
    const uint32_t hi = __nv_cvt_float2_to_fp8x2(make_float2(v[4 * j + 2], v[4 * j + 3]), __NV_SATFINITE, __NV_E4M3);
    words[j] = lo | (hi << 16);
  }
  *reinterpret_cast<uint2*>(out + row * 576 + 8 * g) = make_uint2(words[0], words[1]);
}

// One thread per 8-column group of every row.
template <class Out>
Status launch_conversion(void (*kernel)(const uint8_t*, int64_t, int64_t, Out*), const char* name, const uint8_t* kv,
                         int64_t num_rows, int64_t row_stride, Out* out, cudaStream_t stream) {
  const int64_t threads = num_rows * kGroupsPerRow;
  if (threads == 0) return Status::ok();
  kernel<<<static_cast<unsigned>((threads + 255) / 256), 256, 0, stream>>>(kv, num_rows, row_stride, out);
  FP8DSA_RETURN_IF_LAUNCH_FAILED(name);
  return Status::ok();
}

}  // namespace

Status requantize_v32_rows(const uint8_t* kv, int64_t num_rows, int64_t row_stride, uint8_t* out,
                           cudaStream_t stream) {
  return launch_conversion(requantize_v32_kernel, "requantize_v32_kernel", kv, num_rows, row_stride, out, stream);
}

Status dequantize_v32_rows(const uint8_t* kv, int64_t num_rows, int64_t row_stride, uint16_t* out,
                           cudaStream_t stream) {
  return launch_conversion(dequantize_v32_kernel, "dequantize_v32_kernel", kv, num_rows, row_stride, out, stream);
}

}  // namespace fp8dsa::bench
