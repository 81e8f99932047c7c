// Tile sizes and the shared-memory plan of the native FP8 sparse MLA kernel (h = 64 per CTA).
//
// One CTA = one (token, 64-head block); h = 128 runs two CTAs per token, independent ones that
// share rows only through L2, or a 2-CTA cluster in which each CTA gathers half of every tile and
// copies it into its peer (HeadPairs in fp8_launch.h). Three warpgroups: a producer that gathers KV
// rows with cp.async into a ring of K-major tiles, and two consumers that take alternate 64-key
// tiles (tile 2p and 2p + 1 of pair p): each computes S = Q K^T for its tile, transposes its tile's
// first 512 columns into V^T, and then both multiply the two tiles' P by V^T on their half of d_v
// (P.V needs V^T because 8-bit wgmma has no transpose: both operands must be K-major). Shared
// memory: Q 36 KB + 3 K stages 108 KB + 2 V^T 64 KB + 2 P 8 KB = 216 KB of the 227 KB, which is
// what caps the gather ring at 3 stages.
#pragma once

#include <cstdint>

namespace fp8dsa::sparse_mla {

struct Fp8Config {
  static constexpr int kHeads = 64;        // wgmma M: the heads of one CTA
  static constexpr int kKeysPerTile = 64;  // keys a consumer warpgroup scores at once (QK^T N)
  static constexpr int kDqk = 576;         // 512 "nope" + 64 "rope" bytes per e4m3 row
  static constexpr int kDv = 512;
  static constexpr int kNumConsumers = 2;  // warpgroups; each owns kDv / 2 output columns
  static constexpr int kDvPerConsumer = kDv / kNumConsumers;
  static constexpr int kNumKStages = 3;    // gathered K tiles in flight
  static constexpr int kThreads = 128 * (1 + kNumConsumers);
  // setmaxnreg moves registers only within the CTA's pool: what it was launched with, kEntryRegs per
  // thread (the __launch_bounds__(kThreads, 1) cap; ptxas -v: "Used 168 registers"), not the SM's
  // 65536. A split above that leaves a consumer's setmaxnreg.inc waiting forever (48 / 232 did).
  // 40 * 128 + 232 * 256 = 168 * 384: a consumer holds O (128 registers), S (32) and a QK^T partial
  // (32) or the V transpose temporaries; ptxas -v shows no spills at this split.
  static constexpr int kEntryRegs = 65536 / kThreads / 8 * 8;
  static constexpr int kProducerRegs = 40;
  static constexpr int kConsumerRegs = 232;
  // P is stored as e4m3 after scaling by 2^kPBiasLog2 relative to a reference max that is moved
  // (and O rescaled) only when the true max exceeds it by kLazyRescaleLog2: P <= 2^8 < 448 (e4m3 max).
  static constexpr float kPBiasLog2 = 6.0f;
  static constexpr float kLazyRescaleLog2 = 2.0f;

  // 64B swizzle throughout: a 576-byte row is 9 whole 64-byte atoms, and V^T / P rows (64 keys)
  // are exactly one atom.
  static constexpr uint32_t kSwizzleBytes = 64;
  static constexpr uint32_t kQBytes = kHeads * kDqk;
  static constexpr uint32_t kKTileBytes = kKeysPerTile * kDqk;
  static constexpr uint32_t kVtTileBytes = kDv * kKeysPerTile;
  static constexpr uint32_t kPTileBytes = kHeads * kKeysPerTile;

  // Byte offsets from the 1024-aligned dynamic shared memory base.
  static constexpr uint32_t kQOffset = 0;
  static constexpr uint32_t kKOffset = kQOffset + kQBytes;
  static constexpr uint32_t kVtOffset = kKOffset + kNumKStages * kKTileBytes;  // one per consumer
  static constexpr uint32_t kPOffset = kVtOffset + kNumConsumers * kVtTileBytes;
  static constexpr uint32_t kRowMaxOffset = kPOffset + kNumConsumers * kPTileBytes;
  static constexpr uint32_t kRowSumOffset = kRowMaxOffset + kNumConsumers * kHeads * 4;
  static constexpr uint32_t kBarrierOffset = kRowSumOffset + kNumConsumers * kHeads * 8;  // f32 + e4m3 sums
  static constexpr uint32_t kNumBarriers = 3 * kNumKStages + 1;  // full[], empty[], q_full, released[]
  static constexpr uint32_t kSmemBytes = kBarrierOffset + kNumBarriers * 8;
  static constexpr uint32_t kSmemAlloc = kSmemBytes + 1024;  // room to align the base to 1024

  static_assert(kDqk % kSwizzleBytes == 0, "rows must be whole swizzle atoms");
  static_assert(kKeysPerTile == kSwizzleBytes, "V^T and P rows are one 64-byte atom of keys");
  static_assert(kDqk % 32 == 0 && kKeysPerTile % 32 == 0, "wgmma e4m3 K steps are 32 bytes");
  static_assert(kHeads == 64, "one wgmma M block of heads per CTA");
  static_assert(kDvPerConsumer == 256, "P.V is one m64n256 wgmma per K step");
  static_assert(kKOffset % 1024 == 0 && kKTileBytes % 1024 == 0 && kVtOffset % 1024 == 0 &&
                    kVtTileBytes % 1024 == 0 && kPOffset % 1024 == 0 && kPTileBytes % 1024 == 0,
                "wgmma tiles start on a swizzle-pattern boundary (descriptor base_offset 0)");
  static_assert(kBarrierOffset % 8 == 0, "mbarriers are 8-byte aligned");
  static_assert(kSmemAlloc <= 227 * 1024, "exceeds the 227 KB of shared memory per CTA on sm_90");
  static_assert(kProducerRegs * 128 + kConsumerRegs * 128 * kNumConsumers <= kEntryRegs * kThreads,
                "setmaxnreg split must fit the registers the CTA is launched with");
  static_assert(kPBiasLog2 + kLazyRescaleLog2 <= 8.0f, "P must stay below e4m3's 448");
  static_assert(kNumKStages >= 3, "a pair holds two stages; the third lets the gather run ahead");
};

// Named barrier ids among the 256 consumer threads (0 is __syncthreads).
enum ConsumerBarrier : uint32_t {
  kBarrierBuffersFree = 1,  // both consumers finished the previous pair's P.V (V^T / P reusable)
  kBarrierRowMax = 2,       // row maxima of both tiles published
  kBarrierPReady = 3,       // both tiles' P in shared memory
  kBarrierRowSum = 4,       // final row sums published
};

}  // namespace fp8dsa::sparse_mla
