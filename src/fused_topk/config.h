// The fused path's launch plan, host and device: how many key splits a token block is cut into
// (the scorer with the candidate output) and the shape of the per-token select. The candidate
// buffers these fill are laid out by candidate_layout.h.
#pragma once

#include <algorithm>
#include <cstdint>

#include "fused_topk/candidate_layout.h"
#include "indexer/key_splits.h"
#include "topk/config.h"

namespace fp8dsa::detail::fused_topk {

// Key splits: at most as many as keep every token block's CTAs within one wave of one CTA per SM
// (the scorer runs one per SM). Unlike the plain scorer (about four CTAs per SM), every split here
// costs its own candidate buffers and compactions: H200, T = 4096, N = 65536, H = 64 (512 token
// blocks): 1 split 7.03 ms, 2 splits 7.65 ms, 4 splits 10.06 ms; and a split past one wave costs a
// second one: T = 64, N = 65536 (8 blocks): 16 splits (128 CTAs) 0.300 ms, 17 (136) 0.395 ms.
// At least kMinKeyTilesPerSplit 64-key tiles a split, at most kMaxKeySplits (candidate_layout.h).
// 1 without a device (sms <= 0).
inline constexpr int kMinKeyTilesPerSplit = 8;
inline int choose_key_splits(int64_t num_tokens, int64_t num_keys, int num_heads, int64_t sms) {
  const int block_tokens = indexer::q_resident_auto_block_tokens(num_heads);
  const int64_t blocks = (num_tokens + block_tokens - 1) / block_tokens;
  if (sms <= 0 || blocks >= sms) return 1;
  const int64_t tile_keys = int64_t{kTileKeys} * kMinKeyTilesPerSplit;
  const int64_t by_keys = std::max<int64_t>(1, (num_keys + tile_keys - 1) / tile_keys);
  return static_cast<int>(std::clamp<int64_t>(sms / blocks, 1, std::min<int64_t>(kMaxKeySplits, by_keys)));
}

// The per-token select (select_candidates.cu): kSelectThreads threads hold kSelectHeld candidates
// of a token in registers, kSelectPer a thread, and sort the k winners kSelectItems a thread.
inline constexpr int kSelectThreads = 512;
inline constexpr int kSelectPer = 16;
inline constexpr uint32_t kSelectHeld = kSelectThreads * kSelectPer;  // 8192
inline constexpr int kSelectItems = topk::kMaxK / kSelectThreads;
static_assert(topk::kMaxK % kSelectThreads == 0, "the k winners sort in a blocked arrangement");

}  // namespace fp8dsa::detail::fused_topk
