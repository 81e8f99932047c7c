// Tile sizes, register split and shared-memory plan of the 64-head FP8 sparse MLA kernel that reads
// DeepSeek-V3.2's 656-byte cache rows (v32_kernel.cuh). One CTA per (token, 64-head block), three
// warpgroups with separate roles: the score group (S = Q K^T per 64-key tile, the whole online
// softmax of the tile, P as e4m3 into a ring of P slots with the tile's rescale factors) and two
// value groups (each owns 256 of the 512 d_v columns, gathers its half of every row and adds
// O^T[256][64] += V^T . P^T, V^T the register A operand: value_layout.h). What the row format
// changes:
//   - Q arrives as bf16: the value groups quantise its nope part to e4m3 with one scale per head
//     (amax / 448) into the Q tile and copy its rope, still bf16, into a tile of its own. One e4m3
//     term keeps 4 significant bits of q, and a score then errs by ~2% of its spread (SPEC 6's lse
//     bound is 2e-3 for a spread of 3); so by default a second term carries the residual,
//     q / scale = hi + lo (both e4m3, the same scale), and QK^T multiplies K by both into the same
//     chains (kQTerms, v32_kernel.cuh);
//   - a gathered stage holds the 512 nope bytes (e4m3, 8 SW64 atoms), the 128 rope bytes (bf16, 2
//     atoms) and the 4 block scales of every key, transposed to [block][key] f32;
//   - QK^T: 4 e4m3 chains over the nope (each one 128-column scale block) promoted into f32
//     with the key's block scale, and one bf16 chain over the rope added after the head's Q scale;
//   - P.V: V's scale differs per key and per 128 columns, so each value group turns the score
//     group's P into one P_b per scale block b it owns, P_b = e4m3(P * scale_b[key] / R_b) with R_b
//     the largest |scale| of block b among the token's keys, and accumulates the weights that P_b
//     really applies (P_b * R_b / scale_b[key]) to normalise its output blocks with.
#pragma once

#include <cstdint>

#include "fp8dsa/sparse_mla.h"
#include "sparse_mla/config.h"

namespace fp8dsa::detail::sparse_mla {

struct V32Config : KeyTileShape, MlaDims, SoftmaxFixedPoint {
  static constexpr int kHeads = 64;
  static constexpr int kNumValueGroups = 2;
  static constexpr int kDvPerValueGroup = kDv / kNumValueGroups;
  static constexpr int kScaleBlocks = kDv / kV32ScaleBlock;                    // 4
  static constexpr int kScaleBlocksPerGroup = kScaleBlocks / kNumValueGroups;  // 2
  // 3 stages: a stage is 41 KB here (36 KB for 576-byte rows), and Q's second term and the P_b
  // buffers take the room more would need (2 stages measured as fast as 3 on the H200).
  static constexpr int kNumKStages = 3;
  static constexpr int kNumPSlots = 2;
  static constexpr int kThreads = 128 * (1 + kNumValueGroups);
  static constexpr int kEntryRegs = 65536 / kThreads / 8 * 8;
  static constexpr int kScoreRegs = 152;
  static constexpr int kValueRegs = 176;

  // One chain a 128-column scale block: 4 e4m3 k-steps for each of Q's terms into one accumulator,
  // promoted once with the block's key scales (DeepSeek-V3's promotion interval). The second term
  // goes first (v32_kernel.cuh, issue_chain): issued after the first term, it doubled the chains'
  // truncation error and failed SparseMlaFp8V32.AccuracyAgainstRounding (H100, forty-third session).
  static constexpr int kNopeStepsPerChain = 4;
  static constexpr int kNopeChains = kScaleBlocks;
  static constexpr int kQkChains = kNopeChains + 1;  // + the rope's bf16 chain

  static constexpr uint32_t kNopeTileBytes = kKeysPerTile * kDv;  // [64 rows][512] e4m3, 8 atoms
  static constexpr uint32_t kRopeTileBytes = kKeysPerTile * 128;  // [64 rows][64] bf16, 2 atoms
  static constexpr uint32_t kScaleTileBytes = kScaleBlocks * kKeysPerTile * 4;  // [block][key] f32

  // Within a stage.
  static constexpr uint32_t kStageRopeOffset = kNopeTileBytes;
  static constexpr uint32_t kStageScaleOffset = kStageRopeOffset + kRopeTileBytes;
  static constexpr uint32_t kStageBytes = kStageScaleOffset + kScaleTileBytes;

  static constexpr uint32_t kPSlotBytes = kHeads * kKeysPerTile;  // e4m3 [64 heads][64 keys], SW64
  // A value group's factor table for one tile: [local block][f, g][64 K positions] f16.
  static constexpr uint32_t kFactorTableBytes = kScaleBlocksPerGroup * 2 * kKeysPerTile * 2;

  // Byte offsets from the 1024-aligned dynamic shared memory base.
  static constexpr int kMaxQTerms = 2;
  static constexpr uint32_t kQNopeTermBytes = kHeads * kDv;  // one e4m3 term of Q's nope part
  static constexpr uint32_t kQNopeOffset = 0;                 // [term][64 heads][512], SW64
  static constexpr uint32_t kQRopeOffset = kQNopeOffset + kMaxQTerms * kQNopeTermBytes;
  static constexpr uint32_t kKOffset = kQRopeOffset + kHeads * 128;
  static constexpr uint32_t kPOffset = kKOffset + kNumKStages * kStageBytes;
  static constexpr uint32_t kPbOffset = kPOffset + kNumPSlots * kPSlotBytes;  // [group][local block] P_b
  static constexpr uint32_t kFactorOffset = kPbOffset + kScaleBlocks * kPSlotBytes;  // [group][tile % 2]
  static constexpr uint32_t kAlphaOffset = kFactorOffset + kNumValueGroups * 2 * kFactorTableBytes;
  static constexpr uint32_t kFlagOffset = kAlphaOffset + kNumPSlots * kHeads * 4;
  static constexpr uint32_t kOutScaleOffset = kFlagOffset + kNumPSlots * 16;   // [64] f32
  static constexpr uint32_t kQScaleOffset = kOutScaleOffset + kHeads * 4;      // [64] f32
  static constexpr uint32_t kRefScratchOffset = kQScaleOffset + kHeads * 4;    // [8 value warps][4] f32
  static constexpr uint32_t kNormOffset = kRefScratchOffset + 8 * kScaleBlocks * 4;  // [block][64] f32
  static constexpr uint32_t kBarrierOffset = kNormOffset + kScaleBlocks * kHeads * 4;
  // full[kNumKStages], p_full[kNumPSlots], p_empty[kNumPSlots], q_full
  static constexpr uint32_t kNumBarriers = kNumKStages + 2 * kNumPSlots + 1;
  static constexpr uint32_t kSmemBytes = kBarrierOffset + kNumBarriers * 8;
  static constexpr uint32_t kSmemAlloc = kSmemBytes + 1024;

  static_assert(kScaleBlocks == 4 && kScaleBlocksPerGroup == 2, "a value group owns two 128-column scale blocks");
  static_assert(kNopeStepsPerChain * kNopeChains * 32 == kDv && kNopeStepsPerChain * 32 == kV32ScaleBlock,
                "a chain's k-steps are one scale block, the chains the nope part");
  static_assert(kQRopeOffset % 1024 == 0 && kKOffset % 1024 == 0 && kStageBytes % 1024 == 0 &&
                    kStageRopeOffset % 1024 == 0 && kPOffset % 1024 == 0 && kPbOffset % 1024 == 0,
                "wgmma tiles start on a swizzle-pattern boundary");
  static_assert(kFlagOffset % 16 == 0 && kFactorOffset % 16 == 0 && kBarrierOffset % 8 == 0,
                "flags and factor tables are read as 16-byte words");
  static_assert(kSmemAlloc <= 227 * 1024, "exceeds the 227 KB of shared memory per CTA on sm_90");
  static_assert(kScoreRegs * 128 + kValueRegs * 128 * kNumValueGroups <= kEntryRegs * kThreads,
                "setmaxnreg split must fit the registers the CTA is launched with");
};

// Named barrier ids (0 is __syncthreads).
enum V32Barrier : uint32_t {
  kV32BarrierValueGroup = 1,  // + value group w (128 threads)
  kV32BarrierEpilogue = 3,    // all 384 threads
  kV32BarrierValueGroups = 4,  // both value groups (256): the block maxima of the scales
};

}  // namespace fp8dsa::detail::sparse_mla
