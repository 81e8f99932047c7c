// The top-k CPU reference against hand-worked rows, an independent full sort, and the shared
// SPEC 6 check.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <set>
#include <vector>

#include "common/memory_limit.h"
#include "tools/metrics.h"
#include "tools/random_inputs.h"
#include "fp8dsa/topk.h"
#include "topk/reference_cpu.h"

namespace fp8dsa {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr int32_t kUntouched = -777;

// One row problem (or several rows sharing a shape).
struct Rows {
  std::vector<float> logits;
  std::vector<int32_t> ks, ke, indices;
  TopkParams params;

  Rows(int64_t num_rows, int64_t num_keys, int k, std::vector<float> values, std::vector<int32_t> ks_,
       std::vector<int32_t> ke_, int64_t indices_stride = 0)
      : logits(std::move(values)), ks(std::move(ks_)), ke(std::move(ke_)) {
    const int64_t ld = indices_stride ? indices_stride : k;
    indices.assign(static_cast<size_t>(num_rows * ld), kUntouched);
    params.num_rows = num_rows;
    params.num_keys = num_keys;
    params.logits = logits.data();
    params.ks = ks.data();
    params.ke = ke.data();
    params.k = k;
    params.indices = indices.data();
    params.indices_stride = indices_stride;
  }
  std::vector<int32_t> row(int64_t t) const {
    const int64_t ld = params.indices_stride ? params.indices_stride : params.k;
    return {indices.begin() + t * ld, indices.begin() + t * ld + params.k};
  }
};

// key:   0   1   2    3    4   5     6  7  8  9
// score: 3  -1   7  NaN    7  -inf   2  5  0  5
const std::vector<float> kTenScores = {3, -1, 7, kNaN, 7, -kInf, 2, 5, 0, 5};

std::vector<int32_t> topk_of_ten(int k, int32_t ks = 0, int32_t ke = 10) {
  Rows r(1, 10, k, kTenScores, {ks}, {ke});
  EXPECT_TRUE(reference::topk_cpu(r.params).is_ok());
  return r.row(0);
}

TEST(TopkReference, TenElementRow) {
  // The reference returns descending score, equal scores by ascending key.
  EXPECT_EQ(topk_of_ten(1), (std::vector<int32_t>{2}));
  EXPECT_EQ(topk_of_ten(4), (std::vector<int32_t>{2, 4, 7, 9}));
  EXPECT_EQ(topk_of_ten(6), (std::vector<int32_t>{2, 4, 7, 9, 0, 6}));
  // -inf is a valid candidate and ranks above NaN, which ranks lowest.
  EXPECT_EQ(topk_of_ten(9), (std::vector<int32_t>{2, 4, 7, 9, 0, 6, 8, 1, 5}));
  EXPECT_EQ(topk_of_ten(10), (std::vector<int32_t>{2, 4, 7, 9, 0, 6, 8, 1, 5, 3}));
  // Fewer keys than k: all of them, then -1.
  EXPECT_EQ(topk_of_ten(12), (std::vector<int32_t>{2, 4, 7, 9, 0, 6, 8, 1, 5, 3, -1, -1}));
  // A sub-range: keys 3..7 = {NaN, 7, -inf, 2, 5}.
  EXPECT_EQ(topk_of_ten(2, 3, 8), (std::vector<int32_t>{4, 7}));
  EXPECT_EQ(topk_of_ten(5, 3, 8), (std::vector<int32_t>{4, 7, 6, 5, 3}));
  EXPECT_EQ(topk_of_ten(7, 3, 8), (std::vector<int32_t>{4, 7, 6, 5, 3, -1, -1}));
  // Empty and clamped ranges.
  EXPECT_EQ(topk_of_ten(3, 6, 6), (std::vector<int32_t>{-1, -1, -1}));
  EXPECT_EQ(topk_of_ten(3, 8, 2), (std::vector<int32_t>{-1, -1, -1}));
  EXPECT_EQ(topk_of_ten(3, -20, 2), (std::vector<int32_t>{0, 1, -1}));
  EXPECT_EQ(topk_of_ten(2, 8, 1000), (std::vector<int32_t>{9, 8}));
}

TEST(TopkReference, LeavesColumnsPastKAlone) {
  Rows r(2, 10, 3, {}, {0, 0}, {10, 1}, /*indices_stride=*/5);
  r.logits = kTenScores;
  r.logits.insert(r.logits.end(), kTenScores.begin(), kTenScores.end());
  r.params.logits = r.logits.data();
  ASSERT_TRUE(reference::topk_cpu(r.params).is_ok());
  EXPECT_EQ(r.indices, (std::vector<int32_t>{2, 4, 7, kUntouched, kUntouched, 0, -1, -1, kUntouched, kUntouched}));
}

TEST(TopkReference, RowStrideLdl) {
  // logits_stride 12 > N 10: columns 10 and 11 hold huge scores that are not keys.
  std::vector<float> values = kTenScores;
  values.push_back(1e30f);
  values.push_back(1e30f);
  Rows r(1, 10, 3, values, {0}, {12});
  r.params.logits_stride = 12;
  ASSERT_TRUE(reference::topk_cpu(r.params).is_ok());
  EXPECT_EQ(r.row(0), (std::vector<int32_t>{2, 4, 7}));
}

TEST(TopkReference, RejectsInvalidParams) {
  Rows r(1, 10, 0, kTenScores, {0}, {10}, 4);
  Status s = reference::topk_cpu(r.params);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("k"), std::string::npos) << s.to_string();
  EXPECT_EQ(r.indices[0], kUntouched);
  r.params.k = 2049;
  EXPECT_FALSE(reference::topk_cpu(r.params).is_ok());
}

TEST(TopkReference, OutOfMemoryIsAStatus) {
  // One row over 2^30 keys: its candidate list (8 GB) does not fit the child's 64 MB of headroom.
  // The bad_alloc comes back as OutOfMemory (before the fix it escaped: the child aborted); the
  // allocation comes before any logit is read.
  if (!testing::address_space_limit_supported()) GTEST_SKIP() << "no address-space cap under a sanitizer";
  Rows r(1, int64_t{1} << 30, 8, kTenScores, {0}, {1 << 30});
  const testing::ChildResult child = testing::run_with_address_space_limit(size_t{64} << 20, [&] {
    const Status s = reference::topk_cpu(r.params);
    if (s.code() != StatusCode::kOutOfMemory) return 1;
    return s.message() == "topk reference: out of host memory" ? 0 : 2;
  });
  EXPECT_TRUE(child.exited && child.code == 0) << child.describe();
}

// Page table for 2 sequences, page_size 4, 3 pages each; seq 1's page 1 is unmapped.
//   seq 0: pages {5, 2, 9}    seq 1: pages {7, -1, 0}
TEST(TopkReference, PageTableTransform) {
  const std::vector<int32_t> table = {5, 2, 9, /*pad*/ 99, 7, -1, 0, /*pad*/ 99};
  // Row 0: keys [0, 10), the default base ks = 0, seq 0.
  // Row 1: keys [10, 20), base ks = 10, seq 1.
  std::vector<float> values(2 * 20, 0.0f);
  for (int s = 0; s < 20; ++s) values[s] = values[20 + s] = static_cast<float>(s);  // larger key wins
  Rows r(2, 20, 4, values, {0, 10}, {10, 20});
  r.params.page_table = table.data();
  r.params.page_table_stride = 4;
  r.params.pages_per_seq = 3;
  r.params.page_size = 4;
  ASSERT_TRUE(reference::topk_cpu(r.params).is_ok());
  // Row 0 picks keys 9, 8, 7, 6 -> pos 9, 8, 7, 6: pages 2, 2, 1, 1 -> 9*4+1, 9*4+0, 2*4+3, 2*4+2.
  EXPECT_EQ(r.row(0), (std::vector<int32_t>{37, 36, 11, 10}));
  // Row 1 picks keys 19..16 -> pos 9..6 in seq 1: pages 2, 2, 1 (unmapped), 1 -> 0*4+1, 0*4+0, -1, -1.
  EXPECT_EQ(r.row(1), (std::vector<int32_t>{1, 0, -1, -1}));

  // Explicit row_seq / row_pos_base: row 0 reads seq 1 from base 8 (pos 1, 0, -1, -2 -> page 0).
  const std::vector<int32_t> row_seq = {1, 0};
  const std::vector<int32_t> row_pos_base = {8, 0};
  r.params.row_seq = row_seq.data();
  r.params.row_pos_base = row_pos_base.data();
  ASSERT_TRUE(reference::topk_cpu(r.params).is_ok());
  EXPECT_EQ(r.row(0), (std::vector<int32_t>{29, 28, -1, -1}));
  // Row 1 from base 0: pos 19..16 -> page 4 >= pages_per_seq: all -1.
  EXPECT_EQ(r.row(1), (std::vector<int32_t>{-1, -1, -1, -1}));
}

TEST(TopkReference, PageTransformKeepsPaddingAndRejectsHugeRows) {
  const std::vector<int32_t> table = {1 << 30};
  const std::vector<int32_t> ks = {0};
  TopkParams p;
  p.ks = ks.data();
  p.page_table = table.data();
  p.page_table_stride = 1;
  p.pages_per_seq = 1;
  p.page_size = 4;
  EXPECT_EQ(reference::topk_page_transform(p, 0, -1), -1);
  EXPECT_EQ(reference::topk_page_transform(p, 0, 2), -1);  // (1 << 30) * 4 overflows int32
  const std::vector<int32_t> small = {3};
  p.page_table = small.data();
  EXPECT_EQ(reference::topk_page_transform(p, 0, 2), 14);
  EXPECT_EQ(reference::topk_page_transform(p, 0, 4), -1);  // page 1 >= pages_per_seq
}

// A row whose sequence is past the table's num_seqs rows maps to -1 instead of reading past it (the
// Python binding passes the table's rows).
TEST(TopkReference, PageTransformBoundsTheSequence) {
  const std::vector<int32_t> table = {3, 5};  // one sequence of two pages
  const std::vector<int32_t> ks = {0, 0, 0};
  const std::vector<int32_t> row_seq = {0, 5, 1000000000};
  TopkParams p;
  p.ks = ks.data();
  p.page_table = table.data();
  p.page_table_stride = 2;
  p.pages_per_seq = 2;
  p.page_size = 4;
  p.num_seqs = 1;
  p.row_seq = row_seq.data();
  EXPECT_EQ(reference::topk_page_transform(p, 0, 5), 21);
  EXPECT_EQ(reference::topk_page_transform(p, 1, 5), -1);
  EXPECT_EQ(reference::topk_page_transform(p, 2, 5), -1);
  p.row_seq = nullptr;  // row t is sequence t: rows 1 and 2 are past the table
  EXPECT_EQ(reference::topk_page_transform(p, 0, 1), 13);
  EXPECT_EQ(reference::topk_page_transform(p, 1, 1), -1);
  EXPECT_EQ(reference::topk_page_transform(p, 2, 1), -1);
}

// A row of distinct scores: the top-k set is unique, so compare with a plain full sort.
std::vector<int32_t> sorted_topk(const float* row, int64_t lo, int64_t hi, int k) {
  std::vector<int32_t> keys(static_cast<size_t>(hi - lo));
  std::iota(keys.begin(), keys.end(), static_cast<int32_t>(lo));
  std::stable_sort(keys.begin(), keys.end(), [&](int32_t a, int32_t b) { return row[a] > row[b]; });
  keys.resize(static_cast<size_t>(std::min<int64_t>(k, hi - lo)));
  return keys;
}

class TopkReferenceLengths : public ::testing::TestWithParam<int> {};

// SPEC 8: row lengths 0, 1, k-1, k, k+1, 4096, 32768 for each k, rows at different offsets.
TEST_P(TopkReferenceLengths, DistinctScoresMatchFullSort) {
  const int k = GetParam();
  constexpr int64_t kKeys = 32768 + 5;
  const std::vector<int64_t> lengths = {0, 1, k - 1, k, k + 1, 4096, 32768};
  const int64_t T = static_cast<int64_t>(lengths.size());
  tools::Random rng(static_cast<uint64_t>(k));
  std::vector<float> values(static_cast<size_t>(T * kKeys));
  std::vector<int32_t> ks, ke;
  for (int64_t t = 0; t < T; ++t) {
    // Distinct scores: a shuffled ramp (with negatives).
    std::vector<float> ramp(kKeys);
    for (int64_t s = 0; s < kKeys; ++s) ramp[s] = static_cast<float>(s - kKeys / 3) * 0.25f;
    std::shuffle(ramp.begin(), ramp.end(), rng.engine());
    std::copy(ramp.begin(), ramp.end(), values.begin() + t * kKeys);
    const int64_t start = rng.uniform_int(0, kKeys - lengths[t]);
    ks.push_back(static_cast<int32_t>(start));
    ke.push_back(static_cast<int32_t>(start + lengths[t]));
  }
  for (bool sorted : {false, true}) {
    Rows r(T, kKeys, k, values, ks, ke);
    r.params.sorted = sorted;
    ASSERT_TRUE(reference::topk_cpu(r.params).is_ok());
    for (int64_t t = 0; t < T; ++t) {
      const std::vector<int32_t> got = r.row(t);
      std::vector<int32_t> want = sorted_topk(values.data() + t * kKeys, ks[t], ke[t], k);
      want.resize(static_cast<size_t>(k), -1);
      if (sorted) {
        EXPECT_EQ(got, want) << "row " << t << " length " << lengths[t];
      } else {
        EXPECT_EQ(std::multiset<int32_t>(got.begin(), got.end()),
                  std::multiset<int32_t>(want.begin(), want.end()))
            << "row " << t << " length " << lengths[t];
      }
    }
    tools::TopkCheckOptions options;
    options.sorted = sorted;
    const tools::TopkCheck check = tools::check_topk(r.indices.data(), k, k, values.data(), kKeys, T,
                                                         kKeys, ks.data(), ke.data(), options);
    EXPECT_TRUE(check.passed) << check.description;
  }
}

INSTANTIATE_TEST_SUITE_P(Spec8, TopkReferenceLengths, ::testing::Values(1, 16, 512, 2048));

TEST(TopkReference, AllEqualAndNonFiniteRows) {
  constexpr int64_t kKeys = 3000;
  constexpr int kK = 512;
  // Row 0: all equal. Row 1: all NaN. Row 2: all -inf. Row 3: mostly NaN with a few finite and -inf.
  // Row 4: +inf, finite and NaN mixed, random ties (scores from 8 values).
  std::vector<float> values(5 * kKeys);
  tools::Random rng(99);
  for (int64_t s = 0; s < kKeys; ++s) {
    values[0 * kKeys + s] = 1.5f;
    values[1 * kKeys + s] = kNaN;
    values[2 * kKeys + s] = -kInf;
    values[3 * kKeys + s] = s % 10 == 0 ? static_cast<float>(s) : (s % 10 == 1 ? -kInf : kNaN);
    const int pick = static_cast<int>(rng.uniform_int(0, 9));
    values[4 * kKeys + s] = pick == 0 ? kInf : (pick == 1 ? kNaN : static_cast<float>(pick % 8));
  }
  const std::vector<int32_t> ks = {0, 10, 0, 0, 0};
  const std::vector<int32_t> ke = {kKeys, 2000, kKeys, kKeys, kKeys};
  for (bool sorted : {false, true}) {
    Rows r(5, kKeys, kK, values, ks, ke);
    r.params.sorted = sorted;
    ASSERT_TRUE(reference::topk_cpu(r.params).is_ok());
    tools::TopkCheckOptions options;
    options.sorted = sorted;
    const tools::TopkCheck check = tools::check_topk(r.indices.data(), kK, kK, values.data(), kKeys, 5,
                                                         kKeys, ks.data(), ke.data(), options);
    EXPECT_TRUE(check.passed) << check.description;
    // Row 3: the 300 finite keys, then the 300 -inf ones, then NaN keys fill the rest.
    const std::vector<int32_t> row3 = r.row(3);
    for (int i = 0; i < 300; ++i) EXPECT_EQ(row3[i], (299 - i) * 10) << i;
    for (int i = 300; i < 512; ++i) EXPECT_EQ(row3[i] % 10, 1) << i;
    // Row 4: every +inf key is taken.
    const std::vector<int32_t> row4 = r.row(4);
    const std::set<int32_t> chosen(row4.begin(), row4.end());
    for (int64_t s = 0; s < kKeys; ++s) {
      if (std::isinf(values[4 * kKeys + s])) {
        EXPECT_TRUE(chosen.count(static_cast<int32_t>(s))) << s;
      }
    }
  }
}

TEST(TopkReference, RandomRangesPassSharedCheck) {
  constexpr int64_t kT = 64, kKeys = 5000;
  constexpr int kK = 2048;
  std::vector<float> values = tools::random_f32(kT * kKeys, 5, -3.0f, 3.0f);
  const tools::KeyRanges ranges = tools::random_key_ranges(kT, kKeys, 6, 0.1, 0.2);
  Rows r(kT, kKeys, kK, values, ranges.ks, ranges.ke);
  ASSERT_TRUE(reference::topk_cpu(r.params).is_ok());
  const tools::TopkCheck check = tools::check_topk(r.indices.data(), kK, kK, values.data(), kKeys, kT, kKeys,
                                                       ranges.ks.data(), ranges.ke.data());
  EXPECT_TRUE(check.passed) << check.description;
  EXPECT_EQ(check.rows, kT);
}

// The shared check must catch what it claims to catch.
TEST(TopkCheck, DetectsEachFailure) {
  const std::vector<float> scores = {3, -1, 7, kNaN, 7, -kInf, 2, 5, 0, 5.00001f};
  const std::vector<int32_t> ks = {0}, ke = {10};
  auto check = [&](std::vector<int32_t> row, bool sorted = false) {
    tools::TopkCheckOptions o;
    o.sorted = sorted;
    return tools::check_topk(row.data(), static_cast<int64_t>(row.size()), static_cast<int>(row.size()),
                               scores.data(), 10, 1, 10, ks.data(), ke.data(), o);
  };
  EXPECT_TRUE(check({2, 4, 7}).passed);
  EXPECT_TRUE(check({4, 2, 9}).passed);   // 5 vs 5.00001: a tie within 1e-5 relative
  EXPECT_TRUE(check({2, 4, 9, 7}, true).passed);
  EXPECT_EQ(check({2, 4, 0}).wrong_selection, 1);
  EXPECT_EQ(check({2, 2, 7}).duplicates, 1);
  EXPECT_EQ(check({2, 4, 10}).out_of_range, 1);
  EXPECT_EQ(check({2, 4, -1}).wrong_count, 1);
  EXPECT_EQ(check({7, 2, 4}, true).order_violations, 1);
  const tools::TopkCheck all = check({2, 4, 7, 9, 0, 6, 8, 1, 5, 3, -1, -1});
  EXPECT_TRUE(all.passed) << all.description;
  EXPECT_EQ(check({2, 4, 7, 9, 0, 6, 8, 1, 5, -1, 3, -1}).misplaced_padding, 1);
  EXPECT_EQ(check({2, 4, 7, 9, 0, 6, 8, 1, 3, 5, -1, -1}, true).order_violations, 1);  // NaN before -inf
}

}  // namespace
}  // namespace fp8dsa
