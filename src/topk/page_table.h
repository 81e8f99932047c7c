// The page-table transform of topk.h, the one definition: the CPU reference and the GPU reference
// kernel call page_table_transform, the fast kernels its per-row form RowPageMap (below), which the
// CPU tests check against it index by index. With pos = index - base (base = row_pos_base[row], else
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

// page_table_transform with its per-row work done once, for the kernels that map many indices of a
// row (the 64-bit divisions and the row's three global reads, once an index, cost the output pass
// more than the select; issue 57): RowPageMap(p, row).map(index) == page_table_transform(p, row,
// index) for every index (tests/topk/page_map_test.cpp). A power-of-two page size divides by a
// shift; any other by one 32-bit division (pos < 2^32: index is an int32, base at least -2^31).
struct RowPageMap {
  const int32_t* table = nullptr;  // the row's page-table row; nullptr: no index maps (a bad sequence)
  int64_t base = 0;
  uint32_t page_size = 1, pages = 0, shift = 0;
  bool pass = true;   // no page table: indices pass through
  bool pow2 = true;   // page_size == 1 << shift

  FP8DSA_HOST_DEVICE RowPageMap(const TopkParams& p, int64_t row) {
    if (p.page_table == nullptr) return;
    pass = false;
    const int64_t seq = p.row_seq != nullptr ? p.row_seq[row] : row;
    base = p.row_pos_base != nullptr ? p.row_pos_base[row] : p.ks[row];
    if (seq < 0 || (p.num_seqs > 0 && seq >= p.num_seqs)) return;
    table = p.page_table + seq * p.page_table_stride;
    page_size = static_cast<uint32_t>(p.page_size);
    pages = static_cast<uint32_t>(p.pages_per_seq);
    while ((1u << shift) < page_size) ++shift;
    pow2 = (1u << shift) == page_size;
  }

  FP8DSA_HOST_DEVICE int32_t map(int32_t index) const {
    if (index < 0) return -1;
    if (pass) return index;
    const int64_t pos = static_cast<int64_t>(index) - base;
    if (table == nullptr || pos < 0) return -1;
    const uint32_t pos32 = static_cast<uint32_t>(pos);  // < 2^32
    const uint32_t page = pow2 ? pos32 >> shift : pos32 / page_size;
    if (page >= pages) return -1;
    const int64_t entry = table[page];
    if (entry < 0) return -1;
    const int64_t physical = entry * page_size + (pow2 ? pos32 & (page_size - 1u) : pos32 - page * page_size);
    return physical > INT32_MAX ? -1 : static_cast<int32_t>(physical);
  }
};

}  // namespace fp8dsa::detail::topk
