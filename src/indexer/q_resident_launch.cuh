// Host side of the Q-resident scorer: tensor maps, grid and launch for one configuration.
// Instantiated per head dim in q_resident_scorer_d64.cu / _d128.cu (parallel compile units).
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>

#include <cuda_runtime.h>

#include "core/cuda_check.h"
#include "indexer/q_resident_scorer.cuh"
#include "indexer/scorer_launch.h"

namespace fp8dsa::indexer_detail {

// Key splits when the token blocks alone cannot fill the machine: aim for about four CTAs per SM
// in total, but keep at least 8 key tiles per CTA so a split still amortises its Q load.
inline int choose_key_splits(int64_t token_blocks, int64_t num_keys) {
  const int64_t target = 4 * static_cast<int64_t>(device_sm_count());
  if (token_blocks >= target) return 1;
  const int64_t max_splits = std::max<int64_t>(1, (num_keys + 64 * 8 - 1) / (64 * 8));
  return static_cast<int>(std::clamp<int64_t>((target + token_blocks - 1) / token_blocks, 1, max_splits));
}

template <class Cfg>
Status launch_q_resident(const IndexerParams& p, const QResidentTuning& tuning) {
  int key_splits = tuning.key_splits;
  CUtensorMap k_map{}, q_map{};
  FP8DSA_RETURN_IF_ERROR(make_scorer_tensor_maps<Cfg>(p, &k_map, &q_map));
  ScorerArgs args = scorer_args(p);
  const int64_t token_blocks = (p.num_tokens + Cfg::kTokens - 1) / Cfg::kTokens;
  if (key_splits <= 0) key_splits = choose_key_splits(token_blocks, p.num_keys);
  const int64_t grid = token_blocks * key_splits;
  if (grid > INT32_MAX) return invalid_argument("indexer q_resident: too many token blocks");
  args.num_token_blocks = static_cast<int>(token_blocks);
  args.key_splits = key_splits;
  args.mma_only = tuning.mma_only;
  args.ping_pong = tuning.ping_pong;

  auto kernel = q_resident_scorer_kernel<Cfg>;
  FP8DSA_CUDA_RETURN_IF_ERROR(
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, Cfg::kSmemBytes));
  kernel<<<static_cast<unsigned>(grid), Cfg::kThreads, Cfg::kSmemBytes, p.stream>>>(k_map, q_map, args);
  FP8DSA_RETURN_IF_LAUNCH_FAILED("q_resident_scorer_kernel");
  return Status::ok();
}

// The configurations: B columns (256 "wide" / 128 "narrow"), consumer warpgroups, ring depth,
// shared tiles. Wide needs 128 accumulators + 64 weights per thread, so it runs two consumers;
// for H <= 16 its per-token partials would not fit beside them, so small H is narrow only.
template <int kHeads, int kDim, bool kShare>
using QResidentWide = QResidentConfig<kHeads, kDim, 256, 2, (kDim == 128 ? 8 : 12), kShare>;
template <int kHeads, int kDim, bool kShare>
using QResidentNarrow = QResidentConfig<kHeads, kDim, 128, 3, (kDim == 128 ? 8 : 12), kShare>;

template <int kHeads, int kDim>
Status run_q_resident_heads(const IndexerParams& p, const QResidentTuning& tuning) {
  QResidentShape shape = tuning.shape;
  if (shape == QResidentShape::kAuto) shape = kHeads >= 32 ? QResidentShape::kWideShared : QResidentShape::kNarrowShared;
  if constexpr (kHeads >= 32) {
    if (shape == QResidentShape::kWideShared) return launch_q_resident<QResidentWide<kHeads, kDim, true>>(p, tuning);
  }
  if constexpr (kHeads >= 32 && kDim == 128) {
    // Alternatives kept for the timing driver's comparison.
    if (shape == QResidentShape::kWide) return launch_q_resident<QResidentWide<kHeads, kDim, false>>(p, tuning);
    if (shape == QResidentShape::kNarrow) return launch_q_resident<QResidentNarrow<kHeads, kDim, false>>(p, tuning);
  }
  if (shape == QResidentShape::kNarrowShared) return launch_q_resident<QResidentNarrow<kHeads, kDim, true>>(p, tuning);
  return invalid_argument("indexer q_resident: variant " + std::to_string(static_cast<int>(shape)) +
                          " is not built for H = " + std::to_string(kHeads) + ", D = " + std::to_string(kDim));
}

template <int kDim>
Status run_q_resident_dim(const IndexerParams& p, const QResidentTuning& tuning) {
  switch (p.num_heads) {
    case 64: return run_q_resident_heads<64, kDim>(p, tuning);
    case 32: return run_q_resident_heads<32, kDim>(p, tuning);
    case 16: return run_q_resident_heads<16, kDim>(p, tuning);
    case 8: return run_q_resident_heads<8, kDim>(p, tuning);
    case 4: return run_q_resident_heads<4, kDim>(p, tuning);
    default: break;
  }
  return invalid_argument("indexer q_resident: num_heads " + std::to_string(p.num_heads) +
                          " is not one of {4, 8, 16, 32, 64}");
}

}  // namespace fp8dsa::indexer_detail
