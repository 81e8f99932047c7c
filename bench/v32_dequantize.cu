// The conversion pass an engine runs today before FlashMLA's BF16 kernel on a V3.2 FP8 cache: the
// 656-byte rows -> bf16 [rows, 576] (nope e4m3 * its block's scale, rope copied). Memory-bound; one
// thread per 8 output columns.
#include "v32_dequantize.h"

#include <cuda_bf16.h>
#include <cuda_fp8.h>

#include "core/cuda_check.h"
#include "fp8dsa/sparse_mla.h"

namespace fp8dsa::bench {
namespace {

constexpr int kGroupsPerRow = 576 / 8;  // 64 nope groups of 8 e4m3, 8 rope groups of 8 bf16

__global__ void dequantize_v32_kernel(const uint8_t* kv, int64_t num_rows, int64_t row_stride, uint16_t* out) {
  const int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (i >= num_rows * kGroupsPerRow) return;
  const int64_t row = i / kGroupsPerRow;
  const int g = static_cast<int>(i % kGroupsPerRow);
  const uint8_t* src = kv + row * row_stride;
  uint4* dst = reinterpret_cast<uint4*>(out + row * 576 + 8 * g);
  if (g >= 64) {
    *dst = *reinterpret_cast<const uint4*>(src + kV32RopeOffset + 16 * (g - 64));
    return;
  }
  const float scale = reinterpret_cast<const float*>(src + kV32ScaleOffset)[g / 16];
  const uint2 bytes = *reinterpret_cast<const uint2*>(src + 8 * g);
  uint32_t words[4];
  for (int j = 0; j < 4; ++j) {
    const uint32_t pair = ((j < 2 ? bytes.x : bytes.y) >> (16 * (j % 2))) & 0xffffu;
    const __half2_raw h = __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(pair), __NV_E4M3);
    const float2 f = __half22float2(__half2(h));
    const __nv_bfloat162 b = __floats2bfloat162_rn(f.x * scale, f.y * scale);
    words[j] = *reinterpret_cast<const uint32_t*>(&b);
  }
  *dst = make_uint4(words[0], words[1], words[2], words[3]);
}

}  // namespace

Status dequantize_v32_rows(const uint8_t* kv, int64_t num_rows, int64_t row_stride, uint16_t* out,
                           cudaStream_t stream) {
  const int64_t threads = num_rows * kGroupsPerRow;
  if (threads == 0) return Status::ok();
  dequantize_v32_kernel<<<static_cast<unsigned>((threads + 255) / 256), 256, 0, stream>>>(kv, num_rows, row_stride,
                                                                                          out);
  FP8DSA_RETURN_IF_LAUNCH_FAILED("dequantize_v32_kernel");
  return Status::ok();
}

}  // namespace fp8dsa::bench
