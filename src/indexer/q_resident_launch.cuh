// Host side of the Q-resident scorer: tensor maps, grid and launch for one configuration.
// Instantiated per head dim in q_resident_scorer_d64.cu / _d128.cu (parallel compile units).
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <type_traits>

#include <cuda_runtime.h>

#include "core/cuda_check.h"
#include "core/launch.cuh"
#include "indexer/key_splits.h"
#include "indexer/logits_output.cuh"
#include "indexer/q_resident_scorer.cuh"
#include "indexer/scorer_output.h"
#include "indexer/scorer_launch.h"

namespace fp8dsa::detail::indexer {

// With `plan` (plain logits only: plan_q_resident's for these params and tuning) the launch takes its
// grid from it; without one it plans for itself (other outputs: never a cut).
template <class Cfg, class Output>
Status launch_q_resident(const IndexerParams& p, const QResidentTuning& tuning,
                         const typename Output::Args& out_args, const QResidentPlan* plan) {
  static_assert(ScorerOutput<Output, Cfg>, "Output meets the scorer's contract (indexer/scorer_output.h)");
  constexpr bool kCutAllowed = std::is_same_v<Output, LogitsOutput>;  // other outputs lay out their work per key split
  QResidentPlan own;
  if (plan == nullptr || !kCutAllowed) {
    FP8DSA_RETURN_IF_ERROR(plan_q_resident_grid(p.num_tokens, p.num_keys, Cfg::kHeads, p.fill_masked, Cfg::kTokens,
                                                kCutAllowed, tuning, device_sm_count(), &own));
    plan = &own;
  } else if (plan->block_tokens != Cfg::kTokens) {
    return invalid_argument("indexer q_resident: the plan is for " + std::to_string(plan->block_tokens) +
                          "-token blocks, the launch runs " + std::to_string(Cfg::kTokens));
  }
  CUtensorMap k_map{}, q_map{};
  FP8DSA_RETURN_IF_ERROR(make_scorer_tensor_maps<Cfg>(p, &k_map, &q_map));
  ScorerArgs args = scorer_args(p);
  args.num_token_blocks = static_cast<int>(plan->token_blocks);
  args.key_splits = plan->key_splits;
  args.tail_blocks = plan->tail_blocks;
  args.tail_splits = plan->tail_splits;
  const int64_t launch_grid = plan->grid();
  args.mma_only = tuning.mma_only;
  args.ping_pong = tuning.ping_pong;

  typename Output::Args launch_args = out_args;
  FP8DSA_RETURN_IF_ERROR(Output::template prepare<Cfg>(p, &launch_args));
  auto kernel = q_resident_scorer_kernel<Cfg, Output>;
  constexpr int kSmemBytes = Cfg::kSmemBytes + Cfg::kConsumers * Output::kSmemBytesPerConsumer;
  static_assert(kSmemBytes <= 227 * 1024, "the scorer and its output policy fit one SM's shared memory");
  return launch_kernel("q_resident_scorer_kernel", kernel, static_cast<unsigned>(launch_grid), Cfg::kThreads, kSmemBytes,
                       p.stream, k_map, q_map, args, launch_args);
}

// The configurations: B columns (256 "wide" / 128 "narrow"), consumer warpgroups, ring depth,
// shared tiles. Wide needs 128 accumulators + 64 weights per thread, so it runs two consumers;
// for H <= 16 its per-token partials would not fit beside them, so small H is narrow only.
template <int kHeads, int kDim, bool kShare, bool kSplit = false>
using QResidentWide = QResidentConfig<kHeads, kDim, 256, 2, (kDim == 128 ? 8 : 12), kShare, kSplit>;
template <int kHeads, int kDim, bool kShare>
using QResidentNarrow = QResidentConfig<kHeads, kDim, 128, 3, (kDim == 128 ? 8 : 12), kShare>;

template <int kHeads, int kDim, class Output>
Status run_q_resident_heads(const IndexerParams& p, const QResidentTuning& tuning,
                            const typename Output::Args& out_args, const QResidentPlan* plan) {
  static_assert(kHeads < 32 || QResidentWide<kHeads, kDim, true>::kTokens == 2 * 256 / kHeads,
                "q_resident_auto_block_tokens matches the wide shape");
  static_assert(kHeads >= 32 || QResidentNarrow<kHeads, kDim, true>::kTokens == 3 * 128 / kHeads,
                "q_resident_auto_block_tokens matches the narrow shape");
  QResidentShape shape = tuning.shape;
  if (shape == QResidentShape::kAuto) shape = kHeads >= 32 ? QResidentShape::kWideShared : QResidentShape::kNarrowShared;
  if constexpr (kHeads >= 32) {
    if (shape == QResidentShape::kWideShared) {
      if constexpr (kHeads == 64) {
        if (p.split_epilogue) {
          return launch_q_resident<QResidentWide<kHeads, kDim, true, true>, Output>(p, tuning, out_args, plan);
        }
      }
      return launch_q_resident<QResidentWide<kHeads, kDim, true>, Output>(p, tuning, out_args, plan);
    }
  }
#if defined(FP8DSA_TUNING)
  if constexpr (kHeads >= 32 && kDim == 128 && !Output::kNeedsOwnTokens) {
    // Alternatives kept for the timing driver's comparison (measured slower:
    // bench/journal/2026-11-29.md, the indexer's scorer variants).
    if (shape == QResidentShape::kWide) return launch_q_resident<QResidentWide<kHeads, kDim, false>, Output>(p, tuning, out_args, plan);
    if (shape == QResidentShape::kNarrow) return launch_q_resident<QResidentNarrow<kHeads, kDim, false>, Output>(p, tuning, out_args, plan);
  }
  // Narrow-shared at H >= 32 too (the default build runs it only below 32 heads).
  constexpr bool kNarrowShared = true;
#else
  constexpr bool kNarrowShared = kHeads < 32;
#endif
  if constexpr (kNarrowShared) {
    if (shape == QResidentShape::kNarrowShared) return launch_q_resident<QResidentNarrow<kHeads, kDim, true>, Output>(p, tuning, out_args, plan);
  }
  return invalid_argument("indexer q_resident: variant " + std::to_string(static_cast<int>(shape)) +
                          " is not built for H = " + std::to_string(kHeads) + ", D = " + std::to_string(kDim));
}

template <int kDim, class Output = LogitsOutput>
Status run_q_resident_dim(const IndexerParams& p, const QResidentTuning& tuning,
                          const typename Output::Args& out_args = {}, const QResidentPlan* plan = nullptr) {
  switch (p.num_heads) {
    case 64: return run_q_resident_heads<64, kDim, Output>(p, tuning, out_args, plan);
    case 32: return run_q_resident_heads<32, kDim, Output>(p, tuning, out_args, plan);
    case 16: return run_q_resident_heads<16, kDim, Output>(p, tuning, out_args, plan);
    case 8: return run_q_resident_heads<8, kDim, Output>(p, tuning, out_args, plan);
    case 4: return run_q_resident_heads<4, kDim, Output>(p, tuning, out_args, plan);
    default: break;
  }
  return invalid_argument("indexer q_resident: num_heads " + std::to_string(p.num_heads) +
                          " is not one of {4, 8, 16, 32, 64}");
}

}  // namespace fp8dsa::detail::indexer
