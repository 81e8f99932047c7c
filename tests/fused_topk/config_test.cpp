// The fused path's key splits (fused_topk/config.h), on the CPU with the SM count given: the shapes
// its rule was measured on, the key-count and split-count caps, and no device.
#include <gtest/gtest.h>

#include "fused_topk/config.h"

namespace fp8dsa::detail::fused_topk {
namespace {

constexpr int64_t kH100Sms = 132;

TEST(FusedTopkConfig, KeySplitsFillOneWave) {
  // T = 4096 at H = 64: 512 token blocks of 8 tokens, more than the SMs: no split.
  EXPECT_EQ(choose_key_splits(4096, 65536, 64, kH100Sms), 1);
  // T = 64: 8 blocks; 132 / 8 = 16 splits (128 CTAs), the measured best (17 would start a second wave).
  EXPECT_EQ(choose_key_splits(64, 65536, 64, kH100Sms), 16);
  // H = 32 blocks hold 16 tokens: T = 64 is 4 blocks, 33 splits capped at kMaxKeySplits.
  EXPECT_EQ(choose_key_splits(64, 65536, 32, kH100Sms), kMaxKeySplits);
  // T = 160 at H = 64: 20 blocks, 6 splits.
  EXPECT_EQ(choose_key_splits(160, 65536, 64, kH100Sms), 6);
}

TEST(FusedTopkConfig, KeySplitsKeepEightTilesEach) {
  // N = 1024 is 16 tiles: 2 splits of 8; N = 100 one.
  EXPECT_EQ(choose_key_splits(8, 1024, 64, kH100Sms), 2);
  EXPECT_EQ(choose_key_splits(8, 100, 64, kH100Sms), 1);
}

TEST(FusedTopkConfig, NoDeviceNoSplit) {
  EXPECT_EQ(choose_key_splits(64, 65536, 64, 0), 1);
  EXPECT_EQ(choose_key_splits(64, 65536, 64, -1), 1);
}

}  // namespace
}  // namespace fp8dsa::detail::fused_topk
