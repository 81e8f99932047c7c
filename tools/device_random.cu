#include "tools/device_random.h"

#include <algorithm>
#include <utility>

#include <cuda_fp8.h>

#include "core/cuda_check.h"
#include "fp8dsa/indexer.h"

namespace fp8dsa::tools {
namespace {

constexpr int kFillThreads = 256;
constexpr int kMaxFillBlocks = 8192;

__device__ __forceinline__ uint64_t mix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// Uniform in [0, 1) from the top 24 bits (exact in f32).
__device__ __forceinline__ float unit_float(uint64_t bits) {
  return static_cast<float>(bits >> 40) * (1.0f / 16777216.0f);
}

// Pushes |x| up to `floor` keeping its sign: no generated value is zero.
__device__ __forceinline__ float away_from_zero(float x, float floor) {
  return fabsf(x) < floor ? copysignf(floor, x) : x;
}

__global__ void fill_e4m3_kernel(uint8_t* out, size_t count, uint64_t seed, float scale) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const float x = away_from_zero((2.0f * unit_float(mix64(seed ^ (i * 0xD1B54A32D192ED03ull))) - 1.0f) * scale,
                                   scale / 64.0f);
    out[i] = static_cast<uint8_t>(__nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3));
  }
}

__global__ void fill_uniform_kernel(float* out, size_t count, uint64_t seed, float lo, float hi) {
  const float floor = 1e-3f * fmaxf(fabsf(lo), fabsf(hi));
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const float u = unit_float(mix64(seed ^ (i * 0xD1B54A32D192ED03ull)));
    out[i] = away_from_zero(lo + (hi - lo) * u, floor);
  }
}

__global__ void fill_normal_kernel(float* out, size_t count, uint64_t seed, float stddev) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const uint64_t bits = mix64(seed ^ (i * 0xD1B54A32D192ED03ull));
    // Box-Muller on two 24-bit uniforms; u1 in (0, 1] keeps the log finite.
    const float u1 = 1.0f - unit_float(bits);
    const float u2 = unit_float(bits << 24);
    const float z = sqrtf(-2.0f * logf(u1)) * cospif(2.0f * u2);
    out[i] = away_from_zero(z * stddev, 1e-6f * stddev);
  }
}

int fill_blocks(size_t count) {
  const size_t blocks = (count + kFillThreads - 1) / kFillThreads;
  return static_cast<int>(std::clamp<size_t>(blocks, 1, kMaxFillBlocks));
}

}  // namespace

Status fill_random_e4m3(void* out, size_t count, uint64_t seed, float scale, cudaStream_t stream) {
  if (count == 0) return Status::ok();
  fill_e4m3_kernel<<<fill_blocks(count), kFillThreads, 0, stream>>>(static_cast<uint8_t*>(out), count,
                                                                     seed, scale);
  FP8DSA_RETURN_IF_LAUNCH_FAILED("fill_random_e4m3");
  return Status::ok();
}

Status fill_random_uniform(float* out, size_t count, uint64_t seed, float lo, float hi,
                           cudaStream_t stream) {
  if (count == 0) return Status::ok();
  fill_uniform_kernel<<<fill_blocks(count), kFillThreads, 0, stream>>>(out, count, seed, lo, hi);
  FP8DSA_RETURN_IF_LAUNCH_FAILED("fill_random_uniform");
  return Status::ok();
}

Status fill_random_normal(float* out, size_t count, uint64_t seed, float stddev, cudaStream_t stream) {
  if (count == 0) return Status::ok();
  fill_normal_kernel<<<fill_blocks(count), kFillThreads, 0, stream>>>(out, count, seed, stddev);
  FP8DSA_RETURN_IF_LAUNCH_FAILED("fill_random_normal");
  return Status::ok();
}

Status upload_causal_bounds(int64_t new_tokens, int64_t cached_keys, CausalBounds* out) {
  const SequenceLayout sequence{new_tokens, cached_keys};
  std::vector<int32_t> ks(static_cast<size_t>(std::max<int64_t>(new_tokens, 0)));
  std::vector<int32_t> ke(ks.size());
  FP8DSA_RETURN_IF_ERROR(build_causal_bounds({&sequence, 1}, ks.data(), ke.data(), &out->num_tokens,
                                             &out->num_keys));
  out->valid_pairs = 0;
  for (size_t t = 0; t < ks.size(); ++t) out->valid_pairs += ke[t] - ks[t];
  FP8DSA_RETURN_IF_ERROR(upload(ks, &out->ks));
  return upload(ke, &out->ke);
}

}  // namespace fp8dsa::tools
