#include "sparse_mla/tail_split.h"

#include <algorithm>

namespace fp8dsa::detail::sparse_mla {

namespace {

constexpr int kPartGranule = 128;  // the seesaw kernel's pair of 64-key tiles

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Positions per part for about `parts` parts of topk.
int part_keys_for(int topk, int parts) {
  return static_cast<int>(ceil_div(ceil_div(topk, parts), kPartGranule) * kPartGranule);
}

}  // namespace

TailSplit plan_tail_split(int64_t num_tokens, int head_blocks, int topk, int num_sms, int forced_parts) {
  TailSplit whole;
  whole.main_tokens = num_tokens;
  whole.part_keys = topk;
  if (num_tokens <= 0 || head_blocks <= 0 || num_sms <= 0 || topk <= kPartGranule || forced_parts == 1) return whole;
  const int64_t ctas = num_tokens * head_blocks;
  const int64_t last_wave = ctas % num_sms;
  if (forced_parts == 0 && (last_wave == 0 || ctas / num_sms > kMaxWholeWavesBeforeTail)) return whole;
  // The last wave's CTAs, rounded up to whole tokens (a forced split with no last wave splits the
  // last token).
  const int64_t tail_tokens = std::min(num_tokens, std::max<int64_t>(1, ceil_div(last_wave, head_blocks)));
  const int64_t tail_ctas = tail_tokens * head_blocks;
  const auto plan_for = [&](int parts) {
    TailSplit s;
    s.main_tokens = num_tokens - tail_tokens;
    s.part_keys = part_keys_for(topk, parts);
    s.parts = static_cast<int>(ceil_div(topk, s.part_keys));
    return s;
  };
  const auto cost = [&](const TailSplit& s) {
    return ceil_div(tail_ctas * s.parts, num_sms) * (s.part_keys + kCtaFixedPositions) + kMergePositions;
  };
  if (forced_parts > 1) return plan_for(std::min(forced_parts, kMaxTailParts));
  // Unsplit, the tail costs one wave of whole CTAs (tail_ctas <= num_sms).
  TailSplit best = whole;
  int64_t best_cost = topk + kCtaFixedPositions;
  for (int parts = 2; parts <= kMaxTailParts; parts *= 2) {
    const TailSplit s = plan_for(parts);
    if (s.parts < 2) continue;
    const int64_t c = cost(s);
    if (c < best_cost) {
      best = s;
      best_cost = c;
    }
  }
  return best;
}

}  // namespace fp8dsa::detail::sparse_mla
