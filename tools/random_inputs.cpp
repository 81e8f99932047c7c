#include "tools/random_inputs.h"

#include <algorithm>
#include <climits>
#include <numeric>
#include <stdexcept>
#include <string>
#include <unordered_set>

#include "fp8dsa/fp8.h"

namespace fp8dsa::tools {

double Random::uniform(double lo, double hi) {
  return std::uniform_real_distribution<double>(lo, hi)(engine_);
}

int64_t Random::uniform_int(int64_t lo, int64_t hi) {
  return std::uniform_int_distribution<int64_t>(lo, hi)(engine_);
}

bool Random::bernoulli(double p) {
  if (p <= 0.0) return false;
  if (p >= 1.0) return true;
  return std::bernoulli_distribution(p)(engine_);
}

namespace {

// Fills n values, each drawn uniform in [lo, hi) and encoded by `encode`; `is_zero` on an encoded
// value decides whether the tensor would be all zero.
template <typename T, typename Encode, typename IsZero>
std::vector<T> random_encoded(size_t n, uint64_t seed, float lo, float hi, Encode encode, IsZero is_zero,
                              const char* what) {
  if (!(lo <= hi)) throw std::invalid_argument(std::string(what) + ": lo > hi");
  Random rng(seed);
  std::vector<T> out(n);
  bool any_nonzero = false;
  for (size_t i = 0; i < n; ++i) {
    out[i] = encode(lo == hi ? lo : static_cast<float>(rng.uniform(lo, hi)));
    any_nonzero = any_nonzero || !is_zero(out[i]);
  }
  if (n > 0 && !any_nonzero) {
    if (!is_zero(encode(hi))) {
      out[0] = encode(hi);
    } else if (!is_zero(encode(lo))) {
      out[0] = encode(lo);
    } else {
      throw std::invalid_argument(std::string(what) + ": range has no non-zero value");
    }
  }
  return out;
}

}  // namespace

std::vector<uint8_t> random_e4m3(size_t n, uint64_t seed, float lo, float hi) {
  // 0x00 and 0x80 are the two e4m3 zeros.
  return random_encoded<uint8_t>(n, seed, lo, hi, float_to_e4m3,
                                 [](uint8_t b) { return (b & 0x7f) == 0; }, "random_e4m3");
}

std::vector<float> random_f32(size_t n, uint64_t seed, float lo, float hi) {
  return random_encoded<float>(n, seed, lo, hi, [](float x) { return x; },
                               [](float x) { return x == 0.0f; }, "random_f32");
}

std::vector<uint16_t> random_bf16(size_t n, uint64_t seed, float lo, float hi) {
  return random_encoded<uint16_t>(n, seed, lo, hi, float_to_bf16,
                                  [](uint16_t b) { return (b & 0x7fff) == 0; }, "random_bf16");
}

std::vector<int32_t> invalid_index_values(int64_t num_kv) {
  return {-1, INT_MIN, static_cast<int32_t>(std::min<int64_t>(num_kv, INT_MAX)), INT_MAX};
}

std::vector<int32_t> random_indices(int64_t rows, int64_t cols, int64_t num_kv, uint64_t seed,
                                    double invalid_fraction, bool distinct) {
  Random rng(seed);
  const std::vector<int32_t> invalid = invalid_index_values(num_kv);
  std::vector<int32_t> out(static_cast<size_t>(rows * cols));
  std::vector<int32_t> pool;
  for (int64_t r = 0; r < rows; ++r) {
    int32_t* row = out.data() + r * cols;
    if (num_kv == 0) {
      for (int64_t j = 0; j < cols; ++j) row[j] = invalid[static_cast<size_t>(rng.uniform_int(0, 3))];
      continue;
    }
    if (distinct && cols * 4 >= num_kv) {
      // Dense: a partial Fisher-Yates shuffle of [0, N); past N, invalid entries fill the row.
      pool.resize(static_cast<size_t>(num_kv));
      std::iota(pool.begin(), pool.end(), 0);
      for (int64_t j = 0; j < cols; ++j) {
        if (j < num_kv) {
          std::swap(pool[static_cast<size_t>(j)], pool[static_cast<size_t>(rng.uniform_int(j, num_kv - 1))]);
          row[j] = pool[static_cast<size_t>(j)];
        } else {
          row[j] = invalid[static_cast<size_t>(rng.uniform_int(0, 3))];
        }
      }
    } else if (distinct) {
      std::unordered_set<int32_t> seen;
      for (int64_t j = 0; j < cols; ++j) {
        int32_t v;
        do {
          v = static_cast<int32_t>(rng.uniform_int(0, num_kv - 1));
        } while (!seen.insert(v).second);
        row[j] = v;
      }
    } else {
      for (int64_t j = 0; j < cols; ++j) row[j] = static_cast<int32_t>(rng.uniform_int(0, num_kv - 1));
    }
    for (int64_t j = 0; j < cols; ++j) {
      if (rng.bernoulli(invalid_fraction)) row[j] = invalid[static_cast<size_t>(rng.uniform_int(0, 3))];
    }
  }
  return out;
}

KeyRanges random_key_ranges(int64_t num_tokens, int64_t num_keys, uint64_t seed, double empty_fraction,
                            double out_of_range_fraction) {
  Random rng(seed);
  KeyRanges r;
  r.ks.resize(static_cast<size_t>(num_tokens));
  r.ke.resize(static_cast<size_t>(num_tokens));
  for (int64_t t = 0; t < num_tokens; ++t) {
    int64_t a = rng.uniform_int(0, num_keys);
    int64_t b = rng.uniform_int(0, num_keys);
    if (a > b) std::swap(a, b);
    if (rng.bernoulli(empty_fraction)) b = a;
    if (rng.bernoulli(out_of_range_fraction)) {
      if (rng.bernoulli(0.5)) a -= rng.uniform_int(1, 1000);
      if (rng.bernoulli(0.5)) b += rng.uniform_int(1, 1000);
    }
    r.ks[static_cast<size_t>(t)] = static_cast<int32_t>(a);
    r.ke[static_cast<size_t>(t)] = static_cast<int32_t>(b);
  }
  return r;
}

KeyRanges causal_key_ranges(int64_t num_tokens, int64_t num_keys) {
  if (num_keys < num_tokens) throw std::invalid_argument("causal_key_ranges: num_keys < num_tokens");
  KeyRanges r;
  for (int64_t t = 0; t < num_tokens; ++t) {
    r.ks.push_back(0);
    r.ke.push_back(static_cast<int32_t>(num_keys - num_tokens + t + 1));
  }
  return r;
}

KeyRanges full_key_ranges(int64_t num_tokens, int64_t num_keys) {
  KeyRanges r;
  r.ks.assign(static_cast<size_t>(num_tokens), 0);
  r.ke.assign(static_cast<size_t>(num_tokens), static_cast<int32_t>(num_keys));
  return r;
}

}  // namespace fp8dsa::tools
