// Seeded random inputs shared by the CPU and GPU tests. Every generator is deterministic for a seed
// and never returns an all-zero tensor (a zero input would let a broken kernel pass).
#pragma once

#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

namespace fp8dsa::tools {

// A seeded engine with the few draws the tests need.
class Random {
 public:
  explicit Random(uint64_t seed) : engine_(seed) {}
  double uniform(double lo, double hi);                // [lo, hi)
  int64_t uniform_int(int64_t lo, int64_t hi);         // [lo, hi], inclusive
  bool bernoulli(double p);
  std::mt19937_64& engine() { return engine_; }

 private:
  std::mt19937_64 engine_;
};

// n e4m3 bytes: uniform floats in [lo, hi) rounded with float_to_e4m3. If every value rounds to
// zero, element 0 is set to e4m3(hi) (or e4m3(lo) when hi rounds to zero). Throws
// std::invalid_argument when neither bound has a non-zero e4m3 value.
std::vector<uint8_t> random_e4m3(size_t n, uint64_t seed, float lo = -1.0f, float hi = 1.0f);

// n f32 values uniform in [lo, hi); never all zero (same rule as random_e4m3).
std::vector<float> random_f32(size_t n, uint64_t seed, float lo = -1.0f, float hi = 1.0f);

// n bf16 values (bit patterns) uniform in [lo, hi), rounded with float_to_bf16.
std::vector<uint16_t> random_bf16(size_t n, uint64_t seed, float lo = -1.0f, float hi = 1.0f);

// The invalid index values every index test mixes in: -1, INT_MIN, N, INT_MAX (N = num_kv).
std::vector<int32_t> invalid_index_values(int64_t num_kv);

// [rows, cols] packed index rows into [0, num_kv). With `distinct` (needs cols <= num_kv or
// invalid entries to fill the rest) a row holds no repeated valid index. Then each entry is replaced,
// with probability invalid_fraction, by one of invalid_index_values(num_kv) chosen at random.
// num_kv == 0 gives all-invalid rows.
std::vector<int32_t> random_indices(int64_t rows, int64_t cols, int64_t num_kv, uint64_t seed,
                                    double invalid_fraction = 0.1, bool distinct = true);

// Per-token key ranges for the indexer / top-k ([ks, ke) half-open).
struct KeyRanges {
  std::vector<int32_t> ks;
  std::vector<int32_t> ke;
};

// Random 0 <= ks <= ke <= N per token; a fraction of the rows are empty (ks == ke, at a random
// position), and a fraction reach outside [0, N] (ks < 0 and/or ke > N) to exercise clamping.
KeyRanges random_key_ranges(int64_t num_tokens, int64_t num_keys, uint64_t seed,
                            double empty_fraction = 0.1, double out_of_range_fraction = 0.0);

// One causal sequence whose last num_tokens keys are the new tokens: token t sees
// [0, num_keys - num_tokens + t + 1). Needs num_keys >= num_tokens.
KeyRanges causal_key_ranges(int64_t num_tokens, int64_t num_keys);

// Every token sees the whole [0, num_keys).
KeyRanges full_key_ranges(int64_t num_tokens, int64_t num_keys);

}  // namespace fp8dsa::tools
