// lse_merge's CPU reference: the keys of a sparse MLA problem split into R parts, each part run
// through the sparse MLA reference without the sink, merged with the sink, equals one reference
// call over all keys (up to the bf16 rounding of the parts); the conventions of rows with no valid
// key; one part is the identity; strided parts.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "fp8dsa/fp8.h"
#include "fp8dsa/lse_merge.h"
#include "fp8dsa/sparse_mla.h"
#include "split_problem.h"
#include "tools/random_inputs.h"

namespace fp8dsa::lse_merge_test {

namespace {

struct Merged {
  std::vector<uint16_t> out;
  std::vector<float> lse, max_logits;
};

// The problem through the sparse MLA reference, as one call (with the sink) or per part (without)
// and merged (with the sink).
Merged one_call(const SplitProblem& s) {
  Merged m;
  const size_t rows = static_cast<size_t>(s.num_tokens) * s.num_heads;
  m.out.resize(rows * kDv);
  m.lse.resize(rows);
  m.max_logits.resize(rows);
  SparseMlaParams p = s.params(s.indices.data());
  p.attn_sink = s.sink.data();
  p.out = m.out.data();
  p.lse = m.lse.data();
  p.max_logits = m.max_logits.data();
  EXPECT_TRUE(reference::sparse_mla_cpu(p).is_ok());
  return m;
}

Merged split_and_merge(const SplitProblem& s, int num_parts) {
  const size_t rows = static_cast<size_t>(s.num_tokens) * s.num_heads;
  std::vector<uint16_t> outs(num_parts * rows * kDv);
  std::vector<float> lses(num_parts * rows), maxes(num_parts * rows);
  for (int r = 0; r < num_parts; ++r) {
    const std::vector<int32_t> indices = s.part_indices(r, num_parts);
    SparseMlaParams p = s.params(indices.data());
    p.out = outs.data() + r * rows * kDv;
    p.lse = lses.data() + r * rows;
    p.max_logits = maxes.data() + r * rows;
    EXPECT_TRUE(reference::sparse_mla_cpu(p).is_ok());
  }
  Merged m;
  m.out.resize(rows * kDv);
  m.lse.resize(rows);
  m.max_logits.resize(rows);
  LseMergeParams mp;
  mp.num_tokens = s.num_tokens;
  mp.num_heads = s.num_heads;
  mp.num_parts = num_parts;
  mp.out_parts = outs.data();
  mp.lse_parts = lses.data();
  mp.max_logits_parts = maxes.data();
  mp.attn_sink = s.sink.data();
  mp.out = m.out.data();
  mp.lse = m.lse.data();
  mp.max_logits = m.max_logits.data();
  const Status status = reference::lse_merge_cpu(mp);
  EXPECT_TRUE(status.is_ok()) << status.to_string();
  return m;
}

TEST(LseMergeReference, KeySplitEqualsOneCall) {
  const SplitProblem s = make_split_problem(24, 700, 16, 256, 500);
  const Merged whole = one_call(s);
  for (int parts : {1, 2, 3, 5}) {
    SCOPED_TRACE(parts);
    const Merged merged = split_and_merge(s, parts);
    double diff = 0.0, norm = 0.0;
    for (size_t i = 0; i < whole.out.size(); ++i) {
      const double a = bf16_to_float(merged.out[i]), b = bf16_to_float(whole.out[i]);
      diff += (a - b) * (a - b);
      norm += b * b;
    }
    EXPECT_LE(std::sqrt(diff), 1e-2 * std::sqrt(norm));  // the parts' and the output's bf16 rounding
    for (size_t i = 0; i < whole.lse.size(); ++i) {
      if (std::isinf(whole.lse[i])) {
        EXPECT_EQ(merged.lse[i], whole.lse[i]) << i;
      } else {
        EXPECT_NEAR(merged.lse[i], whole.lse[i], 1e-5 * (1.0 + std::abs(whole.lse[i]))) << i;
      }
      EXPECT_EQ(merged.max_logits[i], whole.max_logits[i]) << i;  // a max of f32 maxima
    }
    // Token 0 has no valid key: out 0, lse +inf, max_logits -inf.
    for (int h = 0; h < s.num_heads; ++h) {
      EXPECT_EQ(merged.lse[h], INFINITY);
      EXPECT_EQ(merged.max_logits[h], -INFINITY);
      for (int c = 0; c < kDv; ++c) ASSERT_EQ(bf16_to_float(merged.out[h * kDv + c]), 0.0f);
    }
  }
}

TEST(LseMergeReference, OnePartIsTheIdentity) {
  const std::vector<uint16_t> out = tools::random_bf16(3 * 4 * kDv, 510);
  std::vector<float> lse = tools::random_f32(12, 511, -3.0f, 9.0f);
  lse[5] = INFINITY;
  std::vector<uint16_t> merged(out.size());
  std::vector<float> merged_lse(lse.size());
  LseMergeParams p;
  p.num_tokens = 3;
  p.num_heads = 4;
  p.num_parts = 1;
  p.out_parts = out.data();
  p.lse_parts = lse.data();
  p.out = merged.data();
  p.lse = merged_lse.data();
  ASSERT_TRUE(reference::lse_merge_cpu(p).is_ok());
  for (size_t row = 0; row < lse.size(); ++row) {
    EXPECT_EQ(merged_lse[row], lse[row]);
    for (int c = 0; c < kDv; ++c) {
      const uint16_t expected = row == 5 ? 0 : out[row * kDv + c];  // a part with no valid key adds nothing
      ASSERT_EQ(merged[row * kDv + c], expected) << row << " " << c;
    }
  }
}

// A row whose parts have no valid key in some parts takes the others alone; a +inf sink zeroes out
// and leaves lse; padded strides give the packed result.
TEST(LseMergeReference, EmptyPartsSinksAndStrides) {
  constexpr int kParts = 3, kRows = 2;
  const std::vector<uint16_t> packed = tools::random_bf16(kParts * kRows * kDv, 520);
  const std::vector<float> lse = {1.0f, INFINITY, INFINITY, 2.0f, INFINITY, INFINITY};  // [part][row]
  const std::vector<float> sink = {-INFINITY, INFINITY};  // heads 0, 1 (T = 1, h = 2)
  // The same parts with padded strides: head stride 520, token stride 1048, part stride 2104.
  std::vector<uint16_t> strided(kParts * 2104, 0x7fc0);  // bf16 NaN padding
  for (int r = 0; r < kParts; ++r)
    for (int h = 0; h < kRows; ++h)
      for (int c = 0; c < kDv; ++c) strided[r * 2104 + h * 520 + c] = packed[(r * kRows + h) * kDv + c];
  for (bool padded : {false, true}) {
    SCOPED_TRACE(padded);
    std::vector<uint16_t> out(kRows * kDv);
    std::vector<float> merged_lse(kRows);
    LseMergeParams p;
    p.num_tokens = 1;
    p.num_heads = 2;
    p.num_parts = kParts;
    p.out_parts = padded ? strided.data() : packed.data();
    if (padded) {
      p.head_stride = 520;
      p.token_stride = 1048;
      p.part_stride = 2104;
    }
    p.lse_parts = lse.data();
    p.attn_sink = sink.data();
    p.out = out.data();
    p.lse = merged_lse.data();
    ASSERT_TRUE(reference::lse_merge_cpu(p).is_ok());
    EXPECT_EQ(merged_lse[0], 1.0f);  // row 0: part 0 alone
    EXPECT_EQ(merged_lse[1], 2.0f);  // row 1: part 1 alone
    for (int c = 0; c < kDv; ++c) {
      EXPECT_EQ(out[c], packed[c]) << c;         // weight exp(0) = 1, no sink
      EXPECT_EQ(bf16_to_float(out[kDv + c]), 0.0f) << c;  // +inf sink
    }
  }
}

// A part whose lse or max_logits is NaN for a row (a NaN score) makes the row's outputs NaN; fmax and
// the finite-lse rule would otherwise drop it. Rows: part 1's lse NaN; part 0's max_logits NaN; a
// NaN part beside parts with no valid key.
TEST(LseMergeReference, NanPartMakesTheRowNan) {
  constexpr int kParts = 2, kRows = 3;
  const std::vector<uint16_t> outs = tools::random_bf16(kParts * kRows * kDv, 530);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> lse = {1.0f, 1.5f, INFINITY, nan, 2.0f, nan};      // [part][row]
  const std::vector<float> maxes = {0.5f, nan, -INFINITY, 0.7f, 1.0f, 0.2f};  // [part][row]
  std::vector<uint16_t> out(kRows * kDv);
  std::vector<float> merged_lse(kRows), merged_max(kRows);
  LseMergeParams p;
  p.num_tokens = 1;
  p.num_heads = kRows;
  p.num_parts = kParts;
  p.out_parts = outs.data();
  p.lse_parts = lse.data();
  p.max_logits_parts = maxes.data();
  p.out = out.data();
  p.lse = merged_lse.data();
  p.max_logits = merged_max.data();
  ASSERT_TRUE(reference::lse_merge_cpu(p).is_ok());
  EXPECT_TRUE(std::isnan(merged_lse[0]));
  EXPECT_EQ(merged_max[0], 0.7f);
  EXPECT_FALSE(std::isnan(merged_lse[1]));
  EXPECT_TRUE(std::isnan(merged_max[1]));
  EXPECT_TRUE(std::isnan(merged_lse[2]));
  for (int row : {0, 2})
    for (int c = 0; c < kDv; ++c) ASSERT_TRUE(std::isnan(bf16_to_float(out[row * kDv + c]))) << row << ", " << c;
}

}  // namespace
}  // namespace fp8dsa::lse_merge_test
