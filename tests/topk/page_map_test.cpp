// RowPageMap (topk/page_table.h), the page-table transform with its per-row work done once, against
// page_table_transform, the one definition of the transform: every index of a range around each row's
// pages, on tables with negative entries, entries whose rows pass int32, power-of-two and other page
// sizes, rows of bad sequences and bases on either side of the index range.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <vector>

#include "topk/page_table.h"

namespace fp8dsa {
namespace {

using detail::topk::page_table_transform;
using detail::topk::RowPageMap;

TEST(TopkRowPageMap, EqualsTheTransformOnEveryIndex) {
  constexpr int kRows = 6;
  const std::vector<int32_t> ks = {0, 5, 100, -7, 1 << 20, 3};
  for (int page_size : {1, 2, 3, 7, 16, 64, 100, 128, 1 << 16}) {
    for (bool with_base : {false, true}) {
      for (int64_t num_seqs : {int64_t{0}, int64_t{3}}) {
        constexpr int kPages = 9, kStride = 11;
        std::vector<int32_t> table(4 * kStride);
        for (size_t i = 0; i < table.size(); ++i) {
          const int v = static_cast<int>((i * 2654435761u) % 23);
          // Some negative entries, and some whose physical row passes int32 at large page sizes.
          table[i] = v == 0 ? -1 : (v == 1 ? std::numeric_limits<int32_t>::max() / 2 : v * 3);
        }
        const std::vector<int32_t> row_seq = {0, 1, 2, 3, -1, 1};  // 3: past num_seqs when it is given
        const std::vector<int32_t> bases = {0, -5, 17, std::numeric_limits<int32_t>::min(), 1 << 20, 2};
        TopkParams p;
        p.num_rows = kRows;
        p.ks = ks.data();
        p.page_table = table.data();
        p.page_table_stride = kStride;
        p.num_seqs = num_seqs;
        p.pages_per_seq = kPages;
        p.page_size = page_size;
        p.row_seq = row_seq.data();
        p.row_pos_base = with_base ? bases.data() : nullptr;
        for (int64_t row = 0; row < kRows; ++row) {
          const RowPageMap map(p, row);
          const int64_t base = with_base ? bases[static_cast<size_t>(row)] : ks[static_cast<size_t>(row)];
          std::vector<int64_t> probes = {-1, std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max(),
                                         base - 1, base};
          const int64_t span = int64_t{page_size} * (kPages + 1);
          const int64_t step = span > 4096 ? span / 4096 : 1;
          for (int64_t d = 0; d <= span; d += step) probes.push_back(base + d);
          for (int64_t d = 1; d < 3 && page_size > 2; ++d) probes.push_back(base + int64_t{page_size} * 4 - d);
          for (int64_t probe : probes) {
            if (probe < std::numeric_limits<int32_t>::min() || probe > std::numeric_limits<int32_t>::max()) continue;
            const int32_t index = static_cast<int32_t>(probe);
            ASSERT_EQ(map.map(index), page_table_transform(p, row, index))
                << "page_size " << page_size << " row " << row << " index " << index << " base " << with_base
                << " num_seqs " << num_seqs;
          }
        }
      }
    }
  }
}

TEST(TopkRowPageMap, PassesIndicesWithoutATable) {
  const std::vector<int32_t> ks = {4};
  TopkParams p;
  p.num_rows = 1;
  p.ks = ks.data();
  const RowPageMap map(p, 0);
  for (int32_t index : {-5, -1, 0, 3, 4, 1 << 30, std::numeric_limits<int32_t>::max()}) {
    EXPECT_EQ(map.map(index), page_table_transform(p, 0, index)) << index;
  }
}

}  // namespace
}  // namespace fp8dsa
