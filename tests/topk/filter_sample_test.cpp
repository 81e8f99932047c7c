// The filter path's sample plan (topk/config.h) on the host: sample counts, ranks and strata, and a
// simulation of the threshold it picks on normal rows, counting the rows whose candidates would be
// fewer than k or more than the list holds (both fall back to the whole-row select, exact but slower).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "common/topk_order_key.h"
#include "tools/random_inputs.h"
#include "topk/config.h"

namespace fp8dsa {
namespace {

using namespace detail::topk;

TEST(TopkFilterSample, CountsRanksAndStrata) {
  for (uint32_t len : {4097u, 8192u, 30000u, 32768u, 32769u, 65536u, 131072u, 262140u}) {
    for (uint32_t k : {1u, 16u, 512u, 2048u}) {
      const uint32_t n = filter_samples(len, k);
      EXPECT_EQ(n & (n - 1), 0u) << len << " " << k;
      EXPECT_GE(n, static_cast<uint32_t>(kFilterMinSamples));
      EXPECT_LE(n, static_cast<uint32_t>(kFilterMaxSamples));
      EXPECT_LE(n, len);
      const uint32_t rank = filter_sample_rank(n, len, k);
      EXPECT_GE(rank, 1u);
      EXPECT_LE(rank, n);
      const int l = filter_samples_log2(len, k);
      EXPECT_EQ(1u << l, n);
      uint32_t prev = 0;
      for (uint32_t i = 0; i < n; ++i) {
        const uint32_t off = filter_sample_offset(i, l, len);
        const uint64_t lo = static_cast<uint64_t>(i) * len / n, hi = static_cast<uint64_t>(i + 1) * len / n;
        ASSERT_GE(off, lo) << len << " " << k << " " << i;
        ASSERT_LT(off, hi) << len << " " << k << " " << i;
        if (i > 0) ASSERT_GT(off, prev);
        prev = off;
      }
    }
  }
}

// The threshold the kernel derives from the sample (the top 22 bits of the rank-th largest sample
// key), and how many keys of the row lie at or above it.
uint32_t candidates_of(const float* row, uint32_t len, uint32_t k) {
  const uint32_t n = filter_samples(len, k);
  const int l = filter_samples_log2(len, k);
  std::vector<uint32_t> keys(n);
  for (uint32_t i = 0; i < n; ++i) keys[i] = testing::topk_order_key(row[filter_sample_offset(i, l, len)]);
  const uint32_t rank = filter_sample_rank(n, len, k);
  std::nth_element(keys.begin(), keys.begin() + (rank - 1), keys.end(), std::greater<uint32_t>());
  const uint32_t tau = keys[rank - 1] & 0xFFFFFC00u;
  uint32_t count = 0;
  for (uint32_t i = 0; i < len; ++i) count += testing::topk_order_key(row[i]) >= tau;
  return count;
}

std::vector<float> normal_row(uint32_t len, uint64_t seed) {
  tools::Random rng(seed);
  std::vector<float> row(len);
  for (uint32_t i = 0; i < len; ++i) {
    const double u1 = 1.0 - rng.uniform(0.0, 1.0), u2 = rng.uniform(0.0, 1.0);
    row[i] = static_cast<float>(std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2));
  }
  return row;
}

TEST(TopkFilterSample, NormalRowsRarelyFallBack) {
  struct Shape {
    uint32_t len, k;
  };
  for (const Shape sh : {Shape{8192, 2048}, Shape{32768, 2048}, Shape{65536, 2048}, Shape{131072, 2048},
                         Shape{32768, 512}, Shape{32768, 16}}) {
    const int rows = 64;
    int outside = 0;
    uint32_t lo = ~0u, hi = 0;
    for (int r = 0; r < rows; ++r) {
      const std::vector<float> row = normal_row(sh.len, 1000 + r * 7 + sh.len);
      const uint32_t c = candidates_of(row.data(), sh.len, sh.k);
      lo = std::min(lo, c);
      hi = std::max(hi, c);
      outside += c < sh.k || c > static_cast<uint32_t>(kFilterCandidateCap);
    }
    EXPECT_EQ(outside, 0) << "len " << sh.len << " k " << sh.k << ": candidates " << lo << ".." << hi;
  }
}

}  // namespace
}  // namespace fp8dsa
