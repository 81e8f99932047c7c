// The key order of V^T and P rows in the FP8 kernels (key_order.h): v_key_at is a permutation
// of each 16-key group, v_pos_of_key its inverse, and it matches the accumulator-to-A-fragment
// mapping it was derived from (a thread's accumulator keys {2t, 2t+1, 2t+8, 2t+9} land on K
// positions 4t..4t+3).
#include <gtest/gtest.h>

#include <array>

#include "hopper/wgmma_layout.h"
#include "sparse_mla/key_order.h"

namespace fp8dsa::detail::sparse_mla {
namespace {

TEST(SparseMlaKeyOrder, PermutesEachGroupOf16AndInvertsExactly) {
  std::array<int, 64> seen{};
  for (int p = 0; p < 64; ++p) {
    const int k = v_key_at(p);
    ASSERT_GE(k, 0);
    ASSERT_LT(k, 64);
    EXPECT_EQ(k / 16, p / 16) << "p=" << p;
    ++seen[k];
    EXPECT_EQ(v_pos_of_key(k), p) << "p=" << p;
  }
  for (int k = 0; k < 64; ++k) EXPECT_EQ(seen[k], 1) << "k=" << k;
}

TEST(SparseMlaKeyOrder, MatchesTheAccumulatorFragment) {
  for (int group = 0; group < 4; ++group) {
    for (int t = 0; t < 4; ++t) {
      const int keys[4] = {2 * t, 2 * t + 1, 2 * t + 8, 2 * t + 9};
      for (int i = 0; i < 4; ++i) EXPECT_EQ(v_key_at(16 * group + 4 * t + i), 16 * group + keys[i]) << t << " " << i;
    }
  }
}

// The register each fragment byte takes holds the key v_key_at assigns to that byte's K position.
TEST(SparseMlaKeyOrder, FragmentRegistersHoldTheKeysOfTheirPositions) {
  for (int lane = 0; lane < 32; ++lane)
    for (int ks = 0; ks < 2; ++ks)
      for (int j = 0; j < 4; ++j)
        for (int b = 0; b < 4; ++b) {
          const int r = p_fragment_register(ks, j, b);
          EXPECT_EQ(hopper::acc_row(0, lane, r), hopper::a_frag_row(0, lane, j));
          EXPECT_EQ(hopper::acc_col(lane, r), v_key_at(32 * ks + hopper::a_frag_k(lane, j) + b));
        }
}

}  // namespace
}  // namespace fp8dsa::detail::sparse_mla
