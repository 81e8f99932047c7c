// The Q-resident prefill scorer's plan (q_resident_scorer.cuh): tile shapes, the TMA ring, the
// shared-memory layout and the register split of one configuration, every offset checked by
// static_asserts; and the named barriers of the scorer and of the Output policies it runs.
#pragma once

#include <cstdint>

#include "hopper/swizzle.h"

namespace fp8dsa::detail::indexer {

// Named barriers of the Q-resident scorer and its Output policies (0 is __syncthreads).
enum ScorerBarrier : uint32_t {
  kScorerTurn = 1,       // + consumer c: "your turn, consumer c" of the MMA ping-pong (two warpgroups)
  kOutputWarpgroup = 4,  // + consumer c: an Output policy's own barrier over c's 128 threads
};
constexpr int kMaxScorerConsumers = 3;
static_assert(kScorerTurn + kMaxScorerConsumers <= kOutputWarpgroup, "the two ranges do not overlap");
static_assert(kOutputWarpgroup + kMaxScorerConsumers <= 16, "sm_90 has 16 named barriers");

// One configuration: H heads of D e4m3 columns, kCols = (tokens of one B block) * H wgmma columns,
// kConsumers consumer warpgroups (each its own B block with kShareTiles), a kStages-deep ring of
// 64-key tiles (q_resident_launch.cuh instantiates the shipped ones).
template <int kHeads_, int kDim_, int kCols_, int kConsumers_, int kStages_, bool kShareTiles_>
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
  static constexpr int kQBytes = kBlocks * kCols * kDim;
  static constexpr int kTileBytes = kKeyTile * kDim;
  // Every operand tile starts on a 1024-byte boundary (descriptor base_offset = 0).
  static_assert(kQBytes % 1024 == 0 && kTileBytes % 1024 == 0, "tiles keep 1024-byte alignment");
  static constexpr int kBoundsOffset = kQBytes + kStages * kTileBytes;
  static constexpr int kMaxTokens = 128;
  static constexpr int kBarrierOffset = kBoundsOffset + kMaxTokens * 8;  // int2 bounds per token
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

}  // namespace fp8dsa::detail::indexer
