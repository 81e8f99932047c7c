// Random fills on the device for the benchmark and the tuning drivers. Inputs are generated on the
// GPU (a counter-based hash, so a given seed gives the same data on every run) because the
// benchmark's tensors reach hundreds of MB; every generated value is non-zero.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include <cuda_runtime_api.h>

#include "fp8dsa/status.h"
#include "tools/device_buffer.h"

namespace fp8dsa::tools {

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
  DeviceBytes ks, ke;
};
Status upload_causal_bounds(int64_t new_tokens, int64_t cached_keys, CausalBounds* out);

}  // namespace fp8dsa::tools
