// tools/metrics.h's sparse MLA check: the whole-tensor bounds and the worst row's.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "fp8dsa/fp8.h"
#include "tools/metrics.h"

namespace fp8dsa {
namespace {

constexpr int64_t kTokens = 100;
constexpr int kHeads = 80;  // 8000 rows
constexpr int kDv = 64;

struct Rows {
  std::vector<double> ref_out, ref_lse, ref_max;
  std::vector<uint16_t> out;
  std::vector<float> lse, max_logits;
};

// A reference of smooth rows and its bf16 rounding as the "kernel" output.
Rows make_rows() {
  Rows r;
  const size_t rows = static_cast<size_t>(kTokens) * kHeads;
  r.ref_out.resize(rows * kDv);
  for (size_t i = 0; i < r.ref_out.size(); ++i) r.ref_out[i] = std::sin(0.37 * static_cast<double>(i)) + 0.2;
  r.ref_lse.assign(rows, 3.0);
  r.ref_max.assign(rows, 1.5);
  r.out.resize(r.ref_out.size());
  for (size_t i = 0; i < r.out.size(); ++i) r.out[i] = float_to_bf16(static_cast<float>(r.ref_out[i]));
  r.lse.assign(rows, 3.0f);
  r.max_logits.assign(rows, 1.5f);
  return r;
}

tools::SparseMlaCheck check(const Rows& r) {
  tools::SparseMlaOutputs got;
  got.out = r.out.data();
  got.lse = r.lse.data();
  got.max_logits = r.max_logits.data();
  return tools::check_sparse_mla(got, r.ref_out, r.ref_lse, r.ref_max, kTokens, kHeads, kDv);
}

TEST(SparseMlaCheck, OneWrongRowAmongThousandsFails) {
  Rows r = make_rows();
  const tools::SparseMlaCheck good = check(r);
  EXPECT_TRUE(good.passed) << good.description;
  EXPECT_LT(good.worst_row_rel_l2, 1e-2) << good.description;
  // Row 4321 holds row 4322's values: the whole tensor's error stays far inside its bound.
  const int64_t row = 4321;
  for (int c = 0; c < kDv; ++c) r.out[row * kDv + c] = r.out[(row + 1) * kDv + c];
  const tools::SparseMlaCheck bad = check(r);
  EXPECT_LT(bad.rel_l2, 2.5e-2) << bad.description;
  EXPECT_GT(bad.worst_row_rel_l2, 0.25) << bad.description;
  EXPECT_EQ(bad.worst_row, row) << bad.description;
  EXPECT_FALSE(bad.passed) << bad.description;
}

TEST(SparseMlaCheck, RowsNearZeroAreNotJudgedAlone) {
  Rows r = make_rows();
  // A row whose reference is ~0 next to the others: a tiny absolute error is no row failure.
  const int64_t row = 77;
  for (int c = 0; c < kDv; ++c) {
    r.ref_out[row * kDv + c] = 1e-9;
    r.out[row * kDv + c] = float_to_bf16(2e-9f);
  }
  const tools::SparseMlaCheck c = check(r);
  EXPECT_TRUE(c.passed) << c.description;
  EXPECT_NE(c.worst_row, row) << c.description;
}

}  // namespace
}  // namespace fp8dsa
