// The page-table transform of topk.h, the one definition that the CPU reference, the GPU reference
// kernel and the fast kernels all call: with pos = index - base (base = row_pos_base[row], else
// ks[row]) and seq = row_seq[row] (else row),
//   out = page_table[seq][pos / page_size] * page_size + pos % page_size,
// and -1 for a padding index (< 0), a negative seq or pos, a seq past num_seqs (when given), a page past pages_per_seq, a negative
// page entry, or a physical row past int32. Without a page table the index passes through.
#pragma once

#include <cstdint>

#include "core/host_device.h"
#include "fp8dsa/topk.h"

namespace fp8dsa::detail::topk {

FP8DSA_HOST_DEVICE int32_t page_table_transform(const TopkParams& p, int64_t row, int32_t index) {
  if (index < 0) return -1;
  if (p.page_table == nullptr) return index;
  const int64_t seq = p.row_seq != nullptr ? p.row_seq[row] : row;
  const int64_t base = p.row_pos_base != nullptr ? p.row_pos_base[row] : p.ks[row];
  const int64_t pos = static_cast<int64_t>(index) - base;
  if (seq < 0 || (p.num_seqs > 0 && seq >= p.num_seqs) || pos < 0) return -1;
  const int64_t page = pos / p.page_size;
  if (page >= p.pages_per_seq) return -1;
  const int64_t entry = p.page_table[seq * p.page_table_stride + page];
  if (entry < 0) return -1;
  const int64_t physical = entry * p.page_size + pos % p.page_size;
  return physical > INT32_MAX ? -1 : static_cast<int32_t>(physical);
}

}  // namespace fp8dsa::detail::topk
