// The fused path's CPU reference: the two stage references on a block of rows at a time, so the
// host holds rows * N logits, never T * N.
#include <algorithm>
#include <vector>

#include "core/no_throw.h"
#include "fp8dsa/fused_topk.h"

namespace fp8dsa::reference {

namespace {

Status fused_topk_cpu_unguarded(const FusedTopkParams& params) {
  FP8DSA_RETURN_IF_ERROR(validate(params));
  const IndexerParams s = params.scores.resolved();
  const TopkParams t = params.select.resolved();
  if (s.num_tokens == 0) return Status::ok();
  constexpr int64_t kBlockRows = 64;
  const int64_t logits_stride = std::max(kLogitsRowMultiple, min_logits_stride(s.num_keys));
  std::vector<float> logits(static_cast<size_t>(std::min(kBlockRows, s.num_tokens) * logits_stride));
  for (int64_t r0 = 0; r0 < s.num_tokens; r0 += kBlockRows) {
    const int64_t rows = std::min(kBlockRows, s.num_tokens - r0);
    IndexerParams score = s;
    score.num_tokens = rows;
    score.q = static_cast<const uint8_t*>(s.q) + r0 * s.q_token_stride;
    score.w = s.w + r0 * s.w_token_stride;
    score.ks = s.ks + r0;
    score.ke = s.ke + r0;
    score.logits = logits.data();
    score.logits_stride = logits_stride;
    score.fill_masked = false;
    if (s.num_keys > 0) FP8DSA_RETURN_IF_ERROR(indexer_logits_cpu(score));
    TopkParams select = t;
    select.num_rows = rows;
    select.num_keys = s.num_keys;
    select.logits = logits.data();
    select.logits_stride = logits_stride;
    select.ks = score.ks;
    select.ke = score.ke;
    select.indices = t.indices + r0 * t.indices_stride;
    if (t.page_table != nullptr) {
      // Row r of the block is row r0 + r of the batch: its sequence and position base shift too.
      if (t.row_seq != nullptr) {
        select.row_seq = t.row_seq + r0;
      } else {
        if (t.num_seqs > 0 && r0 >= t.num_seqs) {  // every row's sequence is past the table
          for (int64_t r = 0; r < rows; ++r) std::fill_n(select.indices + r * t.indices_stride, t.k, -1);
          continue;
        }
        select.page_table = t.page_table + r0 * t.page_table_stride;  // row r is sequence r0 + r
        if (t.num_seqs > 0) select.num_seqs = t.num_seqs - r0;
      }
      if (t.row_pos_base != nullptr) select.row_pos_base = t.row_pos_base + r0;
    }
    FP8DSA_RETURN_IF_ERROR(topk_cpu(select));
  }
  return Status::ok();
}

}  // namespace

Status fused_topk_cpu(const FusedTopkParams& params) {
  return detail::no_throw("fused_topk_cpu", [&] { return fused_topk_cpu_unguarded(params); });
}

}  // namespace fp8dsa::reference
