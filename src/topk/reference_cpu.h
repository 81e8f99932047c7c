// Internal: pieces of the top-k reference that tests of the GPU path reuse.
#pragma once

#include <cstdint>

#include "fp8dsa/topk.h"

namespace fp8dsa::reference {

// The page-table transform of topk.h for one selected key row `index` of row `row`, on resolved
// params with a page table: pos = index - base (base = row_pos_base[row], or ks[row] as given, not
// clamped), out = page_table[seq][pos / page_size] * page_size + pos % page_size, seq = row_seq[row]
// or row. Returns -1 for index -1 (padding), pos < 0, seq < 0, pos / page_size >= pages_per_seq, a
// negative page entry, or a physical row beyond INT32_MAX.
int32_t topk_page_transform(const TopkParams& resolved, int64_t row, int32_t index);

}  // namespace fp8dsa::reference
