// The Q-resident launch's plan (indexer/scorers.h: plan_q_resident_grid), on the CPU with the SM
// count given: the grid, the last wave's cut and where the fill runs, for the shapes the journal
// measured the rules on (key_splits.h), the tuning's overrides and the tails it refuses.
#include <gtest/gtest.h>

#include <cstdint>

#include "indexer/key_splits.h"
#include "indexer/scorers.h"

namespace fp8dsa::detail::indexer {
namespace {

constexpr int64_t kH100Sms = 132;

QResidentPlan plan_for(int64_t tokens, int64_t keys, int heads, bool fill, const QResidentTuning& tuning = {},
                       bool cut_allowed = true) {
  QResidentPlan plan;
  const Status s = plan_q_resident_grid(tokens, keys, heads, fill, q_resident_block_tokens(tuning.shape, heads),
                                        cut_allowed, tuning, kH100Sms, &plan);
  EXPECT_TRUE(s.is_ok()) << s.to_string();
  return plan;
}

TEST(QResidentPlan, BlockTokensPerShape) {
  EXPECT_EQ(q_resident_block_tokens(QResidentShape::kAuto, 64), 8);
  EXPECT_EQ(q_resident_block_tokens(QResidentShape::kAuto, 32), 16);
  EXPECT_EQ(q_resident_block_tokens(QResidentShape::kAuto, 16), 24);
  EXPECT_EQ(q_resident_block_tokens(QResidentShape::kAuto, 4), 96);
  EXPECT_EQ(q_resident_block_tokens(QResidentShape::kWideShared, 64), 8);
  EXPECT_EQ(q_resident_block_tokens(QResidentShape::kNarrowShared, 64), 6);
  EXPECT_EQ(q_resident_block_tokens(QResidentShape::kWide, 64), 4);
  EXPECT_EQ(q_resident_block_tokens(QResidentShape::kNarrow, 32), 4);
  for (int heads : {64, 32, 16, 8, 4}) {
    EXPECT_EQ(q_resident_block_tokens(QResidentShape::kAuto, heads), q_resident_auto_block_tokens(heads));
  }
}

// T = 4096 causal on 132 SMs (key_splits.h): H = 32 cuts the last 36 of 256 blocks in 11 parts from
// N = 16K (with the fill from 32K); H = 64 the last 116 of 512 in 9 from N = 64K, none below.
TEST(QResidentPlan, TheMeasuredCuts) {
  const QResidentPlan h32 = plan_for(4096, 32768, 32, true);
  EXPECT_EQ(h32.token_blocks, 256);
  EXPECT_EQ(h32.key_splits, choose_key_splits(256, 32768, kH100Sms));
  EXPECT_EQ(h32.tail_blocks, 36);
  EXPECT_EQ(h32.tail_splits, 11);
  EXPECT_EQ(h32.fill, FillLaunch::kSerial);
  EXPECT_EQ(plan_for(4096, 16384, 32, false).tail_blocks, 36);
  const QResidentPlan h64 = plan_for(4096, 65536, 64, false);
  EXPECT_EQ(h64.token_blocks, 512);
  EXPECT_EQ(h64.tail_blocks, 116);
  EXPECT_EQ(h64.tail_splits, 9);
  for (int64_t keys : {8192, 16384, 32768}) {
    const QResidentPlan none = plan_for(4096, keys, 64, true);
    EXPECT_EQ(none.tail_blocks, 0) << keys;
    EXPECT_EQ(none.tail_splits, none.key_splits) << keys;
    EXPECT_EQ(none.fill, FillLaunch::kAfterScorer) << keys;
  }
}

TEST(QResidentPlan, GridCountsEveryPart) {
  for (int64_t tokens : {1, 67, 512, 4096}) {
    for (int64_t keys : {1500, 32768, 131072}) {
      const QResidentPlan p = plan_for(tokens, keys, 64, false);
      EXPECT_EQ(p.grid(), (p.token_blocks - p.tail_blocks) * p.key_splits + int64_t{p.tail_blocks} * p.tail_splits);
      EXPECT_GE(p.key_splits, 1);
      EXPECT_LE(p.tail_blocks, p.token_blocks);
    }
  }
}

TEST(QResidentPlan, TuningOverridesAndRefusals) {
  QResidentTuning t;
  t.key_splits = 3;
  t.tail_blocks = 2;
  t.tail_splits = 4;
  const QResidentPlan p = plan_for(67, 1500, 64, true, t);
  EXPECT_EQ(p.key_splits, 3);
  EXPECT_EQ(p.tail_blocks, 2);
  EXPECT_EQ(p.tail_splits, 4);
  EXPECT_EQ(p.fill, FillLaunch::kSerial);
  // Outputs laid out per key split run uncut whatever the tuning says.
  const QResidentPlan uncut = plan_for(67, 1500, 64, true, t, false);
  EXPECT_EQ(uncut.tail_blocks, 0);
  EXPECT_EQ(uncut.tail_splits, 3);
  EXPECT_EQ(uncut.fill, FillLaunch::kAfterScorer);
  t.tail_blocks = 0;
  EXPECT_EQ(plan_for(4096, 32768, 32, true, t).tail_blocks, 0);
  for (const auto& [blocks, splits] : {std::pair{1000, 2}, std::pair{1, 0}, std::pair{-2, 2}}) {
    QResidentTuning bad;
    bad.tail_blocks = blocks;
    bad.tail_splits = splits;
    QResidentPlan plan;
    EXPECT_EQ(plan_q_resident_grid(67, 1500, 64, false, 8, true, bad, kH100Sms, &plan).code(),
              StatusCode::kInvalidArgument)
        << blocks << " x " << splits;
  }
  QResidentPlan plan;
  QResidentTuning huge;
  huge.key_splits = 1 << 20;
  EXPECT_EQ(plan_q_resident_grid(int64_t{1} << 30, 1500, 64, false, 8, true, huge, kH100Sms, &plan).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(plan_q_resident_grid(67, 1500, 0, false, 8, true, {}, kH100Sms, &plan).code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace fp8dsa::detail::indexer
