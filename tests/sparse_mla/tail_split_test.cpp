// The last-wave planner of the 64-head kernel (tail_split.h): which tokens run whole, how the rest
// split, and that every plan covers each token's key positions exactly once in 128-key parts.
#include <gtest/gtest.h>

#include <cstdint>

#include "sparse_mla/tail_split.h"

namespace fp8dsa::detail::sparse_mla {
namespace {

constexpr int kSms = 132;  // the H200's

// Parts of part_keys positions (a multiple of 128, the last part may be short) cover [0, topk).
void expect_covers(const TailSplit& s, int topk) {
  if (s.parts == 1) {
    EXPECT_EQ(s.part_keys, topk);
    return;
  }
  EXPECT_EQ(s.part_keys % 128, 0);
  EXPECT_GE(int64_t{s.parts} * s.part_keys, topk);
  EXPECT_LT(int64_t{s.parts - 1} * s.part_keys, topk);  // no part is empty of positions
}

// The plan is (main_tokens, parts, part_keys).
void expect_plan(const TailSplit& s, int64_t main_tokens, int parts, int part_keys) {
  EXPECT_EQ(s.main_tokens, main_tokens);
  EXPECT_EQ(s.parts, parts);
  EXPECT_EQ(s.part_keys, part_keys);
}

TEST(TailSplit, FullWavesRunWhole) {
  for (int head_blocks : {1, 2}) {
    const TailSplit s = plan_tail_split(int64_t{kSms} * 31 / head_blocks, head_blocks, 2048, kSms);
    EXPECT_EQ(s.parts, 1);
    EXPECT_EQ(s.main_tokens, int64_t{kSms} * 31 / head_blocks);
    expect_covers(s, 2048);
  }
}

TEST(TailSplit, AFewWavesSplitTheirLast) {
  // h = 128, T = 140: 280 CTAs = 2 * 132 + 16: the last 8 tokens in 8 parts (128 CTAs, one wave).
  expect_plan(plan_tail_split(140, 2, 2048, kSms), 132, 8, 256);
  // h = 64, T = 140: 140 = 132 + 8: 8 tokens in 16 parts of one pair of tiles.
  expect_plan(plan_tail_split(140, 1, 2048, kSms), 132, 16, 128);
}

TEST(TailSplit, ManyWavesRunWhole) {
  // T = 4096 (31 or 62 full waves at h = 64 / 128): measured slower split, whatever the parts.
  for (int head_blocks : {1, 2}) {
    const TailSplit s = plan_tail_split(4096, head_blocks, 2048, kSms);
    EXPECT_EQ(s.parts, 1) << head_blocks;
    EXPECT_EQ(s.main_tokens, 4096);
  }
  // Three full waves and a small last one.
  EXPECT_EQ(plan_tail_split(int64_t{kSms} * 3 + 4, 1, 2048, kSms).parts, 1);
  // Forced, it still splits.
  const TailSplit s = plan_tail_split(4096, 1, 2048, kSms, 8);
  EXPECT_EQ(s.main_tokens, 4092);
  EXPECT_EQ(s.parts, 8);
}

TEST(TailSplit, FewTokensSplitIntoMoreParts) {
  // One token of h = 128 (2 CTAs on 132 SMs): the most parts, one pair of tiles each.
  expect_plan(plan_tail_split(1, 2, 2048, kSms), 0, kMaxTailParts, 128);
  // 62 tokens at h = 64: two parts still fit one wave, four would take two.
  expect_plan(plan_tail_split(62, 1, 2048, kSms), 0, 2, 1024);
}

TEST(TailSplit, ANearlyFullLastWaveRunsWhole) {
  // 131 of 132 CTAs in the last wave: splitting would double the waves.
  const TailSplit s = plan_tail_split(int64_t{kSms} + 131, 1, 2048, kSms);
  EXPECT_EQ(s.parts, 1);
  EXPECT_EQ(s.main_tokens, int64_t{kSms} + 131);
}

TEST(TailSplit, ShortListsAndDegenerateArgumentsRunWhole) {
  for (int topk : {64, 128}) EXPECT_EQ(plan_tail_split(5, 1, topk, kSms).parts, 1) << topk;
  EXPECT_EQ(plan_tail_split(0, 1, 2048, kSms).parts, 1);
  EXPECT_EQ(plan_tail_split(5, 1, 2048, 0).parts, 1);  // no SM count (no device)
  EXPECT_EQ(plan_tail_split(5, 1, 2048, kSms, 1).parts, 1);
}

TEST(TailSplit, ForcedPartsAndUnevenLists) {
  // 192 positions: two parts of 128, the second one 64 long.
  TailSplit s = plan_tail_split(3, 1, 192, kSms, 4);
  EXPECT_EQ(s.parts, 2);
  EXPECT_EQ(s.part_keys, 128);
  expect_covers(s, 192);
  // A forced split with no last wave splits the last token.
  expect_plan(plan_tail_split(kSms, 1, 2048, kSms, 8), kSms - 1, 8, 256);
  // 640 positions in about 4 parts: 256-position parts, three of them.
  s = plan_tail_split(7, 1, 640, kSms, 4);
  EXPECT_EQ(s.part_keys, 256);
  EXPECT_EQ(s.parts, 3);
  expect_covers(s, 640);
  for (int topk = 192; topk <= 8192; topk += 64) {
    for (int forced : {0, 2, 3, 16, 64}) expect_covers(plan_tail_split(10, 2, topk, kSms, forced), topk);
  }
}

}  // namespace
}  // namespace fp8dsa::detail::sparse_mla
