// build_causal_bounds: hand-checked layouts, the SPEC's cached-prefix shapes, empty sequences and
// the rejection of negative or int32-overflowing sizes.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "fp8dsa/indexer.h"

namespace fp8dsa {
namespace {

constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();

struct Bounds {
  std::vector<int32_t> ks, ke;
  int64_t num_tokens = -1;
  int64_t num_keys = -1;
};

Bounds build(const std::vector<SequenceLayout>& seqs, int64_t capacity) {
  Bounds b;
  b.ks.assign(capacity, -7);
  b.ke.assign(capacity, -7);
  const Status s = build_causal_bounds(seqs, b.ks.data(), b.ke.data(), &b.num_tokens, &b.num_keys);
  EXPECT_TRUE(s.is_ok()) << s.to_string();
  return b;
}

TEST(CausalBounds, HandCheckedMixedBatch) {
  // (new, cached): (2, 3), (1, 0), (0, 4), (3, 1). Key row bases 0, 5, 6, 10; N = 14.
  const Bounds b = build({{2, 3}, {1, 0}, {0, 4}, {3, 1}}, 6);
  EXPECT_EQ(b.num_tokens, 6);
  EXPECT_EQ(b.num_keys, 14);
  EXPECT_EQ(b.ks, (std::vector<int32_t>{0, 0, 5, 10, 10, 10}));
  EXPECT_EQ(b.ke, (std::vector<int32_t>{4, 5, 6, 12, 13, 14}));
}

TEST(CausalBounds, SingleSequenceWithoutCache) {
  const Bounds b = build({{4, 0}}, 4);
  EXPECT_EQ(b.num_tokens, 4);
  EXPECT_EQ(b.num_keys, 4);
  EXPECT_EQ(b.ks, (std::vector<int32_t>{0, 0, 0, 0}));
  EXPECT_EQ(b.ke, (std::vector<int32_t>{1, 2, 3, 4}));
}

TEST(CausalBounds, SpecExample179NewOver896Cached) {
  const Bounds b = build({{179, 896}}, 179);
  EXPECT_EQ(b.num_tokens, 179);
  EXPECT_EQ(b.num_keys, 1075);
  for (int i = 0; i < 179; ++i) {
    EXPECT_EQ(b.ks[i], 0) << i;
    EXPECT_EQ(b.ke[i], 897 + i) << i;  // the 896 cached keys plus new tokens 0..i
  }
  EXPECT_EQ(b.ke.back(), 1075);
}

TEST(CausalBounds, SpecExampleFourSequencesOverLongCaches) {
  const Bounds b = build({{512, 76000}, {512, 60000}, {512, 45000}, {512, 30000}}, 2048);
  EXPECT_EQ(b.num_tokens, 2048);
  EXPECT_EQ(b.num_keys, 213048);  // 76512 + 60512 + 45512 + 30512
  const int32_t base[4] = {0, 76512, 137024, 182536};
  const int32_t cached[4] = {76000, 60000, 45000, 30000};
  for (int s = 0; s < 4; ++s) {
    for (int i = 0; i < 512; ++i) {
      ASSERT_EQ(b.ks[s * 512 + i], base[s]) << s << " " << i;
      ASSERT_EQ(b.ke[s * 512 + i], base[s] + cached[s] + i + 1) << s << " " << i;
    }
  }
  EXPECT_EQ(b.ke[512], 136513);   // sequence 1, token 0: 76512 + 60000 + 1
  EXPECT_EQ(b.ke[2047], 213048);  // the last token sees every key of its sequence
}

TEST(CausalBounds, ZeroLengthSequences) {
  int64_t t = -1, n = -1;
  ASSERT_TRUE(build_causal_bounds({}, nullptr, nullptr, &t, &n).is_ok());
  EXPECT_EQ(t, 0);
  EXPECT_EQ(n, 0);
  // Only cached keys, no new tokens: nothing to write, so ks/ke may be null; N still counts.
  const std::vector<SequenceLayout> cache_only = {{0, 100}, {0, 0}, {0, 28}};
  ASSERT_TRUE(build_causal_bounds(cache_only, nullptr, nullptr, &t, &n).is_ok());
  EXPECT_EQ(t, 0);
  EXPECT_EQ(n, 128);
  // Empty sequences between real ones shift nothing but their own cache.
  const Bounds b = build({{0, 0}, {1, 2}, {0, 0}, {0, 5}, {2, 0}}, 3);
  EXPECT_EQ(b.num_tokens, 3);
  EXPECT_EQ(b.num_keys, 10);
  EXPECT_EQ(b.ks, (std::vector<int32_t>{0, 8, 8}));
  EXPECT_EQ(b.ke, (std::vector<int32_t>{3, 9, 10}));
}

TEST(CausalBounds, RandomLayoutsChainCorrectly) {
  std::mt19937 rng(5);
  std::uniform_int_distribution<int> num_seqs(1, 12);
  std::uniform_int_distribution<int> len(0, 300);
  for (int trial = 0; trial < 50; ++trial) {
    std::vector<SequenceLayout> seqs(num_seqs(rng));
    int64_t tokens = 0, keys = 0;
    for (SequenceLayout& s : seqs) {
      s.new_tokens = len(rng);
      s.cached_keys = len(rng) * 7;
      tokens += s.new_tokens;
      keys += s.new_tokens + s.cached_keys;
    }
    const Bounds b = build(seqs, tokens);
    ASSERT_EQ(b.num_tokens, tokens);
    ASSERT_EQ(b.num_keys, keys);
    int64_t t = 0, base = 0;
    for (const SequenceLayout& s : seqs) {
      for (int64_t i = 0; i < s.new_tokens; ++i, ++t) {
        ASSERT_EQ(b.ks[t], base);
        // A token sees exactly the cache plus itself and its predecessors.
        ASSERT_EQ(b.ke[t] - b.ks[t], s.cached_keys + i + 1);
      }
      base += s.cached_keys + s.new_tokens;
      if (s.new_tokens > 0) {
        ASSERT_EQ(b.ke[t - 1], base);  // the last token's own row ends the sequence
      }
    }
  }
}

void expect_rejected(const std::vector<SequenceLayout>& seqs, const std::string& needle) {
  std::vector<int32_t> ks(8, -7), ke(8, -7);
  int64_t t = -1, n = -1;
  const Status s = build_causal_bounds(seqs, ks.data(), ke.data(), &t, &n);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.to_string();
  EXPECT_NE(s.message().find(needle), std::string::npos) << s.message();
  // A rejected call writes nothing.
  EXPECT_EQ(t, -1);
  EXPECT_EQ(n, -1);
  for (int i = 0; i < 8; ++i) EXPECT_EQ(ks[i], -7);
}

TEST(CausalBounds, RejectsNegativeSizes) {
  expect_rejected({{2, 3}, {-1, 0}}, "sequences[1].new_tokens (-1)");
  expect_rejected({{-3, 5}}, "sequences[0].new_tokens (-3)");
  expect_rejected({{1, -4}}, "sequences[0].cached_keys (-4)");
}

TEST(CausalBounds, RejectsTotalsOverInt32) {
  expect_rejected({{1, kInt32Max}}, "total keys");
  expect_rejected({{0, kInt32Max / 2 + 1}, {0, kInt32Max / 2 + 1}}, "total keys");
  expect_rejected({{kInt32Max + 1, 0}}, "new_tokens (2147483648)");
  expect_rejected({{1, int64_t{1} << 40}}, "cached_keys (1099511627776)");
  expect_rejected({{2, std::numeric_limits<int64_t>::max()}}, "cached_keys");
  // The largest layout that fits is fine (no tokens, so nothing is written).
  int64_t t = -1, n = -1;
  const std::vector<SequenceLayout> full = {{0, kInt32Max - 1}, {0, 1}};
  ASSERT_TRUE(build_causal_bounds(full, nullptr, nullptr, &t, &n).is_ok());
  EXPECT_EQ(n, kInt32Max);
}

TEST(CausalBounds, RejectsNullOutputs) {
  int64_t t = 0, n = 0;
  int32_t ks[2], ke[2];
  const std::vector<SequenceLayout> seqs = {{2, 1}};
  EXPECT_EQ(build_causal_bounds(seqs, nullptr, ke, &t, &n).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(build_causal_bounds(seqs, ks, nullptr, &t, &n).code(), StatusCode::kInvalidArgument);
  const Status s = build_causal_bounds(seqs, ks, ke, nullptr, &n);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("num_tokens"), std::string::npos) << s.message();
  EXPECT_EQ(build_causal_bounds(seqs, ks, ke, &t, nullptr).code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace fp8dsa
