// Internal, host side: the Q-resident scorer's grid shape: the plain launch's key splits
// (q_resident_launch.cuh) and the tokens of one CTA, which the fused path also needs for its own
// split choice and per-(token, split) buffers (fused_topk.cpp).
#pragma once

#include <algorithm>
#include <cstdint>

#include "core/cuda_check.h"

namespace fp8dsa::detail::indexer {

// Key splits when the token blocks alone cannot fill the machine: none once there are three token
// blocks an SM (each CTA's setup, its Q load and the split epilogue's q~, is paid once a block);
// otherwise aim for about four CTAs per SM in total, keeping at least 8 key tiles per CTA so that a
// split still amortises its Q load. H200, T = 4096 causal (bench/journal/2026-12-02.md, eighth
// session): H = 64 (512 blocks, 3.9 an SM) one split against two 8.3% / 4% / 1.8% / 0.8% faster at
// N = 8K / 16K / 32K / 64K, within 1% at 128K; H = 32 (256 blocks) keeps 3.
//
// The wide scorer runs one CTA an SM, so the grid runs in waves of `sms` CTAs: within two splits of
// that aim, the count whose waves are fuller by more than 1% (the aim on a tie). T = 512 at H = 64
// (64 blocks): 8 splits, 3.9 waves' worth in 4, where 9 ran 4.4 in 5 (the fifth 36% full).
inline int choose_key_splits(int64_t token_blocks, int64_t num_keys, int64_t sms) {
  if (token_blocks >= 3 * sms) return 1;
  const int64_t target = 4 * sms;
  const int64_t max_splits = std::max<int64_t>(1, (num_keys + 64 * 8 - 1) / (64 * 8));
  const int64_t aim = std::clamp<int64_t>((target + token_blocks - 1) / token_blocks, 1, max_splits);
  // Filled fraction of the grid's waves, in units of 1 / (waves * sms).
  const auto fill = [&](int64_t splits) {
    const int64_t ctas = token_blocks * splits;
    return static_cast<double>(ctas) / static_cast<double>((ctas + sms - 1) / sms * sms);
  };
  int64_t best = aim;
  for (int64_t splits = std::max<int64_t>(1, aim - 2); splits <= std::min(max_splits, aim + 2); ++splits) {
    if (fill(splits) > fill(best) + 0.01) best = splits;
  }
  return static_cast<int>(best);
}
inline int choose_key_splits(int64_t token_blocks, int64_t num_keys) {
  return choose_key_splits(token_blocks, num_keys, device_sm_count());
}

// The last wave, cut finer (plain logits only: the fused path's buffers are per key split). A grid
// of token_blocks x key_splits CTAs, one an SM, whose item count is not a multiple of the SMs ends
// with a partial wave: some SMs run one more whole part while the others idle. Instead the blocks
// of that wave (the last ones, the shortest under a causal guard) are cut into tail_splits parts,
// chosen so that their parts fill whole waves best, a part costing its tiles plus a CTA's fixed
// cost (taken as 7 tiles at H = 64 and 3 at H <= 32, a little under the 8 and 4 that
// `fp8dsa_indexer_timing overhead` measures: bench/journal/2026-12-04.md, twenty-first session).
// The block length is taken as N's tiles (an upper bound; under a causal guard the tail blocks are
// the shortest). A cut must save 2% of the tail's time by this estimate; with fill_masked also
// kFillTiles: the uncut grid's idle SMs run the fill beside the scorer, while after a cut it runs
// on its own afterwards (QResidentPlan::fill, scorers.h), about 12 us at T = 4096.
// T = 4096 causal on the H200 (`fp8dsa_indexer_timing tail`): at H = 32 the last 36 of 256 blocks
// in 7 parts (N = 8K, none with the fill) or 11 (N >= 16K; with the fill from 32K); at H = 64 the
// last 116 of 512 in 9 from N = 64K, none below.
// The token blocks of a grid's partial last wave (token_blocks x key_splits CTAs, one an SM): the
// blocks whose parts the last (items % sms) CTAs hold, at most all of them; 0 when the waves are whole.
inline int64_t partial_wave_blocks(int64_t token_blocks, int key_splits, int64_t sms) {
  const int64_t partial = token_blocks * key_splits % sms;
  return std::min<int64_t>(token_blocks, (partial + key_splits - 1) / key_splits);
}
struct TailSplits {
  int blocks = 0;  // 0: no cut
  int splits = 1;
};
inline constexpr double kFillTiles = 16.0;
inline TailSplits choose_tail_splits(int64_t token_blocks, int key_splits, int64_t num_keys, int heads,
                                     bool fill_masked, int64_t sms) {
  const TailSplits none{0, key_splits};
  const int64_t items = token_blocks * key_splits;
  const int64_t blocks = partial_wave_blocks(token_blocks, key_splits, sms);
  if (items < sms || blocks == 0) return none;
  const double tiles = static_cast<double>((num_keys + 63) / 64);
  const double fixed = heads >= 64 ? 7.0 : 3.0;
  // The tail's time in tiles with s parts a block: its waves times a part's cost.
  const auto cost = [&](int64_t s) { return static_cast<double>((blocks * s + sms - 1) / sms) * (tiles / s + fixed); };
  const double uncut = cost(key_splits);
  double best_cost = uncut;
  TailSplits best = none;
  for (int64_t s = key_splits + 1; s <= key_splits + 16 && tiles / s >= 8.0; ++s) {
    if (cost(s) < 0.98 * best_cost) {
      best_cost = cost(s);
      best = TailSplits{static_cast<int>(blocks), static_cast<int>(s)};
    }
  }
  if (fill_masked && uncut - best_cost < kFillTiles) return none;
  return best;
}
inline TailSplits choose_tail_splits(int64_t token_blocks, int key_splits, int64_t num_keys, int heads,
                                     bool fill_masked) {
  return choose_tail_splits(token_blocks, key_splits, num_keys, heads, fill_masked, device_sm_count());
}

// Tokens of one CTA for the shape kAuto picks (the fused path sizes its per-(token, split)
// buffers with it): wide for H >= 32 (two consumers of 256 columns), narrow below (three of 128).
inline int q_resident_auto_block_tokens(int heads) { return heads >= 32 ? 2 * 256 / heads : 3 * 128 / heads; }

}  // namespace fp8dsa::detail::indexer
