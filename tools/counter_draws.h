// Counter-based draws for the realistic workloads: every value depends only on (seed, stream,
// index), so tensors can be filled in parallel and are the same for a seed on any machine (no
// std::*_distribution, whose output differs between standard libraries).
#pragma once

#include <cstdint>

namespace fp8dsa::tools {

inline uint64_t mix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

inline uint64_t draw(uint64_t seed, uint64_t stream, uint64_t index) {
  return mix(mix(seed ^ (stream << 56)) ^ index);
}

// About normal (mean 0, std 1): the sum of four uniforms from one 64-bit draw, rescaled.
inline float normal(uint64_t seed, uint64_t stream, uint64_t index) {
  const uint64_t x = draw(seed, stream, index);
  const float sum = static_cast<float>((x & 0xFFFF) + ((x >> 16) & 0xFFFF) + ((x >> 32) & 0xFFFF) + (x >> 48));
  constexpr float kMean = 4.0f * 32767.5f;
  constexpr float kStd = 37837.2f;  // sqrt(4 * (65536^2 - 1) / 12)
  return (sum - kMean) / kStd;
}

}  // namespace fp8dsa::tools
