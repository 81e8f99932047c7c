// The Q-resident launch's plan (scorers.h: QResidentPlan), from the rules of key_splits.h.
#include <cstdint>
#include <string>

#include "core/cuda_check.h"
#include "indexer/key_splits.h"
#include "indexer/scorers.h"

namespace fp8dsa::detail::indexer {

int q_resident_block_tokens(QResidentShape shape, int heads) {
  switch (shape) {
    case QResidentShape::kWideShared: return 2 * 256 / heads;
    case QResidentShape::kNarrowShared: return 3 * 128 / heads;
    case QResidentShape::kWide: return 256 / heads;
    case QResidentShape::kNarrow: return 128 / heads;
    case QResidentShape::kAuto: break;
  }
  return q_resident_auto_block_tokens(heads);
}

Status plan_q_resident_grid(int64_t num_tokens, int64_t num_keys, int heads, bool fill_masked, int block_tokens,
                            bool cut_allowed, const QResidentTuning& tuning, int64_t sms, QResidentPlan* plan) {
  if (heads <= 0 || block_tokens <= 0) return invalid_argument("indexer q_resident: heads and block tokens must be positive");
  QResidentPlan q;
  q.block_tokens = block_tokens;
  q.token_blocks = (num_tokens + block_tokens - 1) / block_tokens;
  q.key_splits = tuning.key_splits > 0 ? tuning.key_splits : choose_key_splits(q.token_blocks, num_keys, sms);
  if (q.token_blocks * q.key_splits > INT32_MAX) return invalid_argument("indexer q_resident: too many token blocks");
  if (tuning.tail_blocks < -1 || tuning.tail_blocks > q.token_blocks || (tuning.tail_blocks > 0 && tuning.tail_splits < 1)) {
    return invalid_argument("indexer q_resident: tail_blocks must be -1 (automatic), 0 (none) or at most the token blocks "
                            "(" + std::to_string(q.token_blocks) + "), with tail_splits >= 1");
  }
  TailSplits tail{0, q.key_splits};
  if (cut_allowed) {
    if (tuning.tail_blocks < 0) {
      tail = choose_tail_splits(q.token_blocks, q.key_splits, num_keys, heads, fill_masked, sms);
    } else if (tuning.tail_blocks > 0) {
      tail = TailSplits{tuning.tail_blocks, tuning.tail_splits};
    }
  }
  q.tail_blocks = tail.blocks;
  q.tail_splits = tail.splits;
  if (q.grid() > INT32_MAX) return invalid_argument("indexer q_resident: too many token blocks");
  q.fill = q.tail_blocks > 0 ? FillLaunch::kSerial : FillLaunch::kAfterScorer;
  *plan = q;
  return Status::ok();
}

Status plan_q_resident(const IndexerParams& params, const QResidentTuning& tuning, QResidentPlan* plan) {
  return plan_q_resident_grid(params.num_tokens, params.num_keys, params.num_heads, params.fill_masked,
                              q_resident_block_tokens(tuning.shape, params.num_heads), true, tuning, device_sm_count(),
                              plan);
}

}  // namespace fp8dsa::detail::indexer
