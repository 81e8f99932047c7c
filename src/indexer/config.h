// The Q-resident prefill scorer's plan (q_resident_scorer.cuh): tile shapes, the TMA ring, the
// shared-memory layout and the register split of one configuration, every offset checked by
// static_asserts; the named barriers of the scorer and of the Output policies it runs; and the
// K-resident scorer's grid (k_resident_scorer.cu).
#pragma once

#include <algorithm>
#include <cstdint>

#include "hopper/swizzle.h"

namespace fp8dsa::detail::indexer {

// Named barriers of the Q-resident scorer and its Output policies (0 is __syncthreads).
enum ScorerBarrier : uint32_t {
  kScorerTurn = 1,       // + consumer c: "your turn, consumer c" of the MMA ping-pong (two warpgroups)
  kOutputWarpgroup = 4,  // + consumer c: an Output policy's own barrier over c's 128 threads
  kLinearTerms = 7,      // + consumer c: c's linear-term rows and scales written (linear_split.cuh)
};
constexpr int kMaxScorerConsumers = 3;
static_assert(kScorerTurn + kMaxScorerConsumers <= kOutputWarpgroup, "the ranges do not overlap");
static_assert(kOutputWarpgroup + kMaxScorerConsumers <= kLinearTerms, "the ranges do not overlap");
static_assert(kLinearTerms + kMaxScorerConsumers <= 16, "sm_90 has 16 named barriers");

// One configuration: H heads of D e4m3 columns, kCols = (tokens of one B block) * H wgmma columns,
// kConsumers consumer warpgroups (each its own B block with kShareTiles), a kStages-deep ring of
// 64-key tiles (q_resident_launch.cuh instantiates the shipped ones).
//
// kLinearSplit (kSplitEpilogue, H = 64, own B blocks; IndexerParams::split_epilogue): the epilogue
// takes sum_h w relu(x) as
// (sum_h w x + sum_h w |x|) / 2, the first half on the tensor cores (linear_split.cuh): each B block
// gets kLinRows more rows, kLinTermsPerToken e4m3 terms of the token's q~ = sum_h w[h] q[h],
// scored by one more m64 x kLinRows wgmma per k-step; the second half is one FFMA per
// accumulator (|x| is an operand modifier) where relu then w took two instructions. H200, same
// run: T = 4096, N = 32K / 64K / 128K 14% / 16% / 9% faster, 8K within 1%
// (bench/journal/2026-12-02.md, eighth session).
template <int kHeads_, int kDim_, int kCols_, int kConsumers_, int kStages_, bool kShareTiles_,
          bool kSplitEpilogue_ = false>
struct QResidentConfig {
  static constexpr int kHeads = kHeads_;
  static constexpr int kDim = kDim_;
  static constexpr int kCols = kCols_;
  static constexpr int kConsumers = kConsumers_;
  static constexpr int kStages = kStages_;
  static constexpr bool kShareTiles = kShareTiles_;
  static constexpr int kWgTokens = kCols / kHeads;  // tokens of one B block
  static constexpr int kBlocks = kShareTiles ? kConsumers : 1;
  static constexpr int kTokens = kBlocks * kWgTokens;  // tokens of the CTA
  static constexpr int kKeyTile = 64;  // wgmma M
  static constexpr int kThreads = (kConsumers + 1) * 128;
  static constexpr hopper::Swizzle kSwizzle = kDim == 128 ? hopper::Swizzle::k128B : hopper::Swizzle::k64B;
  static_assert(kDim == 64 || kDim == 128, "D in {64, 128}: one swizzle atom per row");
  static_assert(hopper::swizzle_width_bytes(kSwizzle) == kDim, "a row is exactly one swizzle atom");
  // H = 64 only: at H = 32 the same split ran 17% slower at N = 8K and within 3% at 32K-128K
  // (bench/journal/2026-12-02.md, eighth session): its 8 tokens per B block pay 3 extra columns a
  // token for half the heads.
  static constexpr bool kLinearSplit = kSplitEpilogue_;
  static_assert(!kLinearSplit || (kHeads == 64 && kShareTiles), "the split epilogue is built for H = 64, own B blocks");
  // H = 32: a schedule fence in the consumers' key-tile loop, right after the stage is released (a
  // branch on a condition no valid launch meets; q_resident_scorer.cuh). It bounds ptxas's
  // scheduling region, so the cells' bound compares stay after the release instead of under the
  // MMA wait. H200, same run (bench/journal/2026-12-02.md, ninth session): 4-9% faster at H = 32;
  // at H = 64 the same branch costs 4-5%.
  static constexpr bool kScheduleFence = kHeads == 32;
  static constexpr int kLinTermsPerToken = 4;
  static constexpr int kLinRowsPerToken = 4;  // the terms (and zero rows up to 4)
  static constexpr int kLinRows = kLinearSplit ? kLinRowsPerToken * kWgTokens : 0;  // per B block
  static_assert(!kLinearSplit || (kLinRows % 8 == 0 && kLinRows <= 256), "a valid wgmma N");
  static constexpr int kQBytes = kBlocks * kCols * kDim;
  static constexpr int kLinOffset = kQBytes;  // [block] of kLinRows x kDim, swizzled as Q
  static constexpr int kLinBlockBytes = (kLinRows * kDim + 1023) / 1024 * 1024;
  static constexpr int kLinBytes = kBlocks * kLinBlockBytes;
  static constexpr int kKOffset = kLinOffset + kLinBytes;
  static constexpr int kTileBytes = kKeyTile * kDim;
  // Every operand tile starts on a 1024-byte boundary (descriptor base_offset = 0).
  static_assert(kQBytes % 1024 == 0 && kLinBlockBytes % 1024 == 0 && kTileBytes % 1024 == 0,
                "tiles keep 1024-byte alignment");
  static constexpr int kBoundsOffset = kKOffset + kStages * kTileBytes;
  static constexpr int kMaxTokens = 128;
  static constexpr int kSigmaOffset = kBoundsOffset + kMaxTokens * 8;  // int2 bounds per token
  static constexpr int kBarrierOffset = kSigmaOffset + kMaxTokens * 4;  // f32 linear-term scale per token
  static_assert(kTokens <= kMaxTokens && kTokens <= 256, "bounds table / TMA box hold the block");
  static constexpr uint32_t kEmptyArrivals = 4 * (kShareTiles ? kConsumers : 1);
  // The Output policy's shared memory follows the barriers.
  static constexpr int kOutputOffset = (kBarrierOffset + (2 * kStages + 1) * 8 + 15) / 16 * 16;
  static constexpr int kSmemBytes = kOutputOffset + 1024;  // + align slack, without the Output's
  static_assert(kSmemBytes <= 227 * 1024, "fits the opt-in shared memory of one SM");

  // Register split: the producer keeps a few, the consumers take the rest of the 64K file.
  static constexpr int kProducerRegs = 40;
  static constexpr int kConsumerRegsRaw = (65536 / 128 - kProducerRegs) / kConsumers;
  static constexpr int kConsumerRegs = (kConsumerRegsRaw > 240 ? 240 : kConsumerRegsRaw) / 8 * 8;
  static_assert(kConsumerRegs * kConsumers * 128 + kProducerRegs * 128 <= 65536, "register file");
  static_assert(kWgTokens * kHeads == kCols, "whole tokens per B block");
  static_assert(kConsumers <= kMaxScorerConsumers, "the named-barrier plan holds this many consumers");
};

// The K-resident scorer's grid: one CTA a (key tile, token chunk), the token blocks of
// `block_tokens` tokens dealt to `chunks` chunks; enough chunks for about kKResidentCtasPerSm CTAs an
// SM, never more chunks than token blocks nor than a grid's y dimension holds. token_blocks or
// key_tiles past INT32_MAX (what the kernel's arguments hold) leave `fits` false.
inline constexpr int64_t kKResidentCtasPerSm = 8;
struct KResidentPlan {
  int64_t token_blocks = 0;
  int64_t key_tiles = 0;
  int64_t chunks = 1;
  bool fits = true;
};
constexpr KResidentPlan plan_k_resident(int64_t num_tokens, int64_t num_keys, int block_tokens, int key_tile,
                                        int64_t sms) {
  KResidentPlan plan;
  plan.token_blocks = (num_tokens + block_tokens - 1) / block_tokens;
  plan.key_tiles = (num_keys + key_tile - 1) / key_tile;
  plan.fits = plan.token_blocks <= INT32_MAX && plan.key_tiles <= INT32_MAX;
  if (!plan.fits || plan.key_tiles < 1) return plan;
  const int64_t target = kKResidentCtasPerSm * std::max<int64_t>(sms, 1);
  plan.chunks = std::clamp<int64_t>((target + plan.key_tiles - 1) / plan.key_tiles, 1,
                                    std::max<int64_t>(std::min<int64_t>(plan.token_blocks, 65535), 1));
  return plan;
}
static_assert(plan_k_resident(4096, 512, 1, 64, 132).chunks == 132, "8 key tiles: 132 chunks for 8 CTAs an SM");
static_assert(plan_k_resident(3, int64_t{1} << 20, 1, 64, 132).chunks == 1, "more key tiles than the target: one chunk");
static_assert(plan_k_resident(2, 64, 1, 64, 132).chunks == 2, "never more chunks than token blocks");

}  // namespace fp8dsa::detail::indexer
