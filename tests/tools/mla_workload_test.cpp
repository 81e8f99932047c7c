// tools/mla_workload.h's kinds of values and their unrounded form, and the check of a run against
// the rounding of its inputs (tools/metrics.h: check_against_rounding, through SampledMlaReference).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <vector>

#include "fp8dsa/fp8.h"
#include "fp8dsa/sparse_mla.h"
#include "tools/metrics.h"
#include "tools/mla_workload.h"
#include "tools/sampled_mla_reference.h"
#include "reference_run.h"

namespace fp8dsa {
namespace {

constexpr int kDqk = 576;

tools::MlaWorkloadSpec small_spec(tools::MlaValues values, int64_t unrounded_every) {
  tools::MlaWorkloadSpec s;
  s.num_tokens = 16;
  s.num_kv = 512;
  s.num_heads = 8;
  s.topk = 128;
  s.score_std = 3.5;
  s.values = values;
  s.unrounded_every = unrounded_every;
  s.seed = 11;
  return s;
}

// The kept values are the ones the inputs round: e4m3 of each is the stored byte.
TEST(MlaWorkload, UnroundedValuesRoundToTheInputs) {
  for (tools::MlaValues values : {tools::MlaValues::kRealistic, tools::MlaValues::kRandom, tools::MlaValues::kZeros}) {
    for (int64_t every : {1, 5}) {
      SCOPED_TRACE(std::string(tools::mla_values_name(values)) + " every " + std::to_string(every));
      const tools::MlaWorkloadSpec spec = small_spec(values, every);
      const tools::MlaWorkload w = tools::make_mla_workload(spec);
      const int64_t sampled = (spec.num_tokens + every - 1) / every;
      const int64_t row = int64_t{spec.num_heads} * kDqk;
      ASSERT_EQ(w.q_unrounded.size(), static_cast<size_t>(sampled * row));
      ASSERT_EQ(w.kv_unrounded.size(), w.kv.size());
      for (int64_t i = 0; i < sampled; ++i)
        for (int64_t e = 0; e < row; ++e)
          ASSERT_EQ(float_to_e4m3(w.q_unrounded[i * row + e]), w.q[(i * every) * row + e]) << i << " " << e;
      for (size_t i = 0; i < w.kv.size(); ++i) ASSERT_EQ(float_to_e4m3(w.kv_unrounded[i]), w.kv[i]) << i;
      if (values == tools::MlaValues::kZeros) {
        for (uint8_t b : w.q) ASSERT_EQ(b & 0x7f, 0);
        for (uint8_t b : w.kv) ASSERT_EQ(b & 0x7f, 0);
      }
    }
  }
  EXPECT_TRUE(tools::make_mla_workload(small_spec(tools::MlaValues::kRandom, 0)).q_unrounded.empty());
  EXPECT_THROW(tools::make_mla_workload(small_spec(tools::MlaValues::kRandom, -1)), std::invalid_argument);
}

// The fraction of rows whose largest score lies in the first quarter of their selection: about a
// quarter where the scores do not follow the selection order.
double max_in_first_quarter(const tools::MlaWorkload& w) {
  const tools::MlaWorkloadSpec& s = w.spec;
  int rows = 0, early = 0;
  for (int64_t t = 0; t < s.num_tokens; ++t) {
    for (int h = 0; h < s.num_heads; ++h) {
      double best = -INFINITY;
      int best_pos = 0, length = 0;
      for (int j = 0; j < s.topk; ++j) {
        const int32_t key = w.indices[static_cast<size_t>(t * s.topk + j)];
        if (key < 0) break;
        double dot = 0.0;
        for (int d = 0; d < kDqk; ++d) {
          dot += double{e4m3_to_float(w.q[static_cast<size_t>((t * s.num_heads + h) * kDqk + d)])} *
                 e4m3_to_float(w.kv[static_cast<size_t>(key) * kDqk + d]);
        }
        if (dot > best) best = dot, best_pos = j;
        length = j + 1;
      }
      ++rows;
      early += 4 * best_pos < length;
    }
  }
  return static_cast<double>(early) / rows;
}

TEST(MlaWorkload, RandomScoresDoNotFollowTheSelectionOrder) {
  tools::MlaWorkloadSpec spec = small_spec(tools::MlaValues::kRandom, 0);
  spec.num_kv = 4096;
  const tools::MlaWorkload random = tools::make_mla_workload(spec);
  EXPECT_NEAR(random.score_std, 3.5, 0.7) << random.describe();
  EXPECT_NEAR(max_in_first_quarter(random), 0.25, 0.12) << random.describe();
  // The same selections for every kind of values.
  spec.values = tools::MlaValues::kRealistic;
  spec.score_std = 3.0;
  EXPECT_EQ(random.indices, tools::make_mla_workload(spec).indices);
}

// Uniform selections: every token's keys distinct and visible (causal), the whole pool drawn from,
// little overlap between neighbours, the same keys whatever the values.
TEST(MlaWorkload, UniformSelectionsAreDistinctVisibleAndSpread) {
  tools::MlaWorkloadSpec spec = small_spec(tools::MlaValues::kRandom, 0);
  spec.num_kv = 4096;
  spec.topk = 512;
  spec.selection = tools::MlaSelection::kUniform;
  const tools::MlaWorkload w = tools::make_mla_workload(spec);
  EXPECT_STREQ(tools::mla_selection_name(spec.selection), "uniform");
  std::vector<int> hits(static_cast<size_t>(spec.num_kv), 0);
  for (int64_t t = 0; t < spec.num_tokens; ++t) {
    const int64_t visible = spec.num_kv - spec.num_tokens + t + 1;
    std::vector<int32_t> keys(w.indices.begin() + t * spec.topk, w.indices.begin() + (t + 1) * spec.topk);
    for (int32_t k : keys) {
      ASSERT_GE(k, 0);
      ASSERT_LT(k, visible);
      ++hits[static_cast<size_t>(k)];
    }
    std::sort(keys.begin(), keys.end());
    EXPECT_EQ(std::adjacent_find(keys.begin(), keys.end()), keys.end()) << "token " << t << " repeats a key";
    EXPECT_FALSE(std::is_sorted(w.indices.begin() + t * spec.topk, w.indices.begin() + (t + 1) * spec.topk));
  }
  // 16 tokens x 512 of ~4096 keys: each quarter of the pool gets about a quarter of the draws.
  for (int q = 0; q < 4; ++q) {
    int64_t in_quarter = 0;
    for (int64_t k = q * spec.num_kv / 4; k < (q + 1) * spec.num_kv / 4; ++k) in_quarter += hits[static_cast<size_t>(k)];
    EXPECT_NEAR(static_cast<double>(in_quarter) / (spec.num_tokens * spec.topk), 0.25, 0.03) << "quarter " << q;
  }
  EXPECT_LT(w.neighbour_overlap, 0.3) << w.describe();
  spec.values = tools::MlaValues::kRealistic;
  EXPECT_EQ(w.indices, tools::make_mla_workload(spec).indices);
  // Fewer visible keys than topk: all of them, then -1.
  spec.num_kv = 300;
  spec.num_tokens = 300;
  const tools::MlaWorkload short_rows = tools::make_mla_workload(spec);
  std::vector<int32_t> first(short_rows.indices.begin(), short_rows.indices.begin() + spec.topk);
  EXPECT_EQ(first[0], 0);
  EXPECT_EQ(first[1], -1);
}

// The CPU reference's own bf16 output passes the check against the rounding of the inputs, with
// the rounding's error (Rq against R0) reported; a wrong lse fails it.
TEST(RoundingCheck, ReferenceOutputPassesAndAWrongLseFails) {
  const tools::MlaWorkload w = tools::make_mla_workload(small_spec(tools::MlaValues::kRandom, 1));
  tools_test::ReferenceRun run;
  tools_test::run_reference(tools::mla_params(w, w.spec.num_heads), w.q_unrounded.data(), w.kv_unrounded.data(), &run);
  if (::testing::Test::HasFatalFailure()) return;
  const tools::RoundingCheck c = run.check();
  EXPECT_TRUE(c.passed) << c.description;
  EXPECT_GT(c.rounding_rel_l2, 1e-3) << c.description;        // e4m3 rounding of q and kv
  EXPECT_LT(c.out_error_ratio, 0.2) << c.description;         // bf16 output rounding only
  EXPECT_GT(c.rounding_max_lse_error, 1e-3) << c.description;
  EXPECT_LT(c.kernel.max_lse_error, 1e-5) << c.description;
  run.lse[3] += static_cast<float>(c.lse_limit * 1.5);
  EXPECT_FALSE(run.check().passed);
  EXPECT_FALSE(
      tools::SampledMlaReference().check_against_rounding(run.out.data(), run.lse.data(), run.max_logits.data()).passed);
}

}  // namespace
}  // namespace fp8dsa
