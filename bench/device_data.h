// Device buffers and random fills for the benchmark. Inputs are generated on the GPU (a counter-based
// hash, so a given seed gives the same data on every run) because the benchmark's tensors reach
// hundreds of MB; every generated value is non-zero.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include <cuda_runtime_api.h>

#include "fp8dsa/status.h"

namespace fp8dsa::bench {

// Owns one cudaMalloc allocation; move-only.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  // Frees any previous allocation, then allocates `bytes` (a zero-byte request holds nothing).
  Status allocate(size_t bytes);
  void reset();

  void* get() const { return ptr_; }
  template <typename T>
  T* as() const { return static_cast<T*>(ptr_); }
  size_t bytes() const { return bytes_; }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

// e4m3 values of x uniform in +-scale, with |x| >= scale / 64 so that no element is zero.
Status fill_random_e4m3(void* out, size_t count, uint64_t seed, float scale, cudaStream_t stream);
// f32 uniform in [lo, hi), pushed away from zero (|x| >= 1e-3 * max(|lo|, |hi|)).
Status fill_random_uniform(float* out, size_t count, uint64_t seed, float lo, float hi,
                           cudaStream_t stream);
// f32 approximately normal (mean 0, std `stddev`), non-zero: the shape of real indexer logits.
Status fill_random_normal(float* out, size_t count, uint64_t seed, float stddev, cudaStream_t stream);

// Causal bounds of one sequence of `new_tokens` tokens over `cached_keys` cached keys
// (fp8dsa::build_causal_bounds), on the device.
struct CausalBounds {
  int64_t num_tokens = 0;
  int64_t num_keys = 0;
  int64_t valid_pairs = 0;  // sum over tokens of ke - ks
  DeviceBuffer ks, ke;
};
Status upload_causal_bounds(int64_t new_tokens, int64_t cached_keys, CausalBounds* out);

// Copies a host vector into a fresh device buffer.
template <typename T>
Status upload(const std::vector<T>& host, DeviceBuffer* out) {
  FP8DSA_RETURN_IF_ERROR(out->allocate(host.size() * sizeof(T)));
  if (host.empty()) return Status::ok();
  cudaError_t err = cudaMemcpy(out->get(), host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice);
  if (err != cudaSuccess) {
    return {StatusCode::kCudaError, std::string("cudaMemcpy (upload): ") + cudaGetErrorString(err)};
  }
  return Status::ok();
}

}  // namespace fp8dsa::bench
