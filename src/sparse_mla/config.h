// Tile sizes, register splits and shared-memory plans of the native FP8 sparse MLA kernels over
// 576-byte rows: the seesaw 64-head kernel (seesaw_kernel.cuh; h = 64, 128 as two CTAs per token,
// h = 32 with zero rows past h) and the small-head kernel (small_heads_kernel.cuh; h in {8, 16}). The
// row-format constants are apart from the tile's (KeyTileShape, E4m3RowFormat; v32_config.h has
// the V3.2 rows'). Every offset and size is here, checked by static_asserts.
#pragma once

#include <cstdint>

namespace fp8dsa::detail::sparse_mla {

// The tile shape every kernel shares, whatever the row format: 64 keys per gathered tile (QK^T's
// N or M, P.V's K), in 64-byte-swizzled (SW64) K-major tiles; rows of 64 keys (P, V^T) are exactly
// one swizzle atom.
struct KeyTileShape {
  static constexpr int kKeysPerTile = 64;
  static constexpr uint32_t kSwizzleBytes = 64;
  static_assert(kKeysPerTile == kSwizzleBytes, "P / V^T rows of a tile's keys are one 64-byte atom");
};

// The MLA head: d_qk = 512 "nope" + 64 "rope" columns, d_v = 512 (the nope part).
struct MlaDims {
  static constexpr int kDqk = 576;
  static constexpr int kDv = 512;
};

// The online softmax's fixed-point choices. P is stored as e4m3 after scaling by 2^kPBiasLog2
// relative to a reference max that is moved (and O rescaled) only when the true max exceeds it by
// kLazyRescaleLog2: P <= 2^8 < 448.
struct SoftmaxFixedPoint {
  static constexpr float kPBiasLog2 = 6.0f;
  static constexpr float kLazyRescaleLog2 = 2.0f;
  static_assert(kPBiasLog2 + kLazyRescaleLog2 <= 8.0f, "P must stay below e4m3's 448");
};

// The 576-byte row format (unit scales): every column one e4m3 byte, so a row is d_qk bytes and a
// score d_qk / 32 e4m3 wgmma k-steps. (DeepSeek-V3.2's 656-byte rows: v32_config.h.)
struct E4m3RowFormat : MlaDims {
  static constexpr int kRowBytes = kDqk;
  static constexpr int kQkSteps = kRowBytes / 32;
};

// The 576-byte-row kernels' shape: the tile over that row format, and the softmax.
struct MlaShape : KeyTileShape, E4m3RowFormat, SoftmaxFixedPoint {
  static constexpr uint32_t kKTileBytes = kKeysPerTile * kRowBytes;
  static_assert(kRowBytes % kSwizzleBytes == 0, "rows must be whole swizzle atoms (576 bytes: 9)");
  static_assert(kKTileBytes % 1024 == 0, "K tiles start on a swizzle-pattern boundary");
};

// The 64-head seesaw kernel (seesaw_kernel.cuh): one CTA per (token, 64-head block), a producer
// and two math warpgroups that share every tile's work.
//   warpgroup 0, the producer: Q and every K tile into the ring of kNumKStages stages (cp.async);
//   math groups m = 0, 1 (warpgroups 1, 2): a token's tiles go in pairs; math group m scores tile
//     2j + m of pair j (S = Q K^T, m64n64 SS, QK^T chains promoted to f32). The two exchange their
//     rows' max bounds, so that both tiles of a pair take P against one reference, and write their
//     P into their own P slot. Each then adds both tiles into its half of O^T (d_v [256m, 256m + 256),
//     4 m64n64 accumulators): O^T += V^T . P^T, V^T the register A operand built from the gathered
//     rows (value_layout.h), P^T the shared B operand; the QK^T chains of its next tile go in
//     between on the tensor cores.
struct SeesawConfig : MlaShape {
  static constexpr int kHeads = 64;
  static constexpr int kNumMathGroups = 2;
  static constexpr int kDvPerMathGroup = kDv / kNumMathGroups;
  static constexpr int kNumKStages = 5;  // two pairs and one tile of the gather's lead
  static constexpr int kThreads = 128 * (1 + kNumMathGroups);
  static constexpr int kMathThreads = 128 * kNumMathGroups;
  static constexpr int kEntryRegs = 65536 / kThreads / 8 * 8;
  // A math group holds O^T (128), S and one QK^T chain accumulator (64) and a k-step of V^T
  // fragments (16); the producer only addresses.
  static constexpr int kProducerRegs = 40;
  static constexpr int kMathRegs = 232;
  // One exponential in 3 on the FMA pipe (online_softmax.cuh: fma_exp2), the rest on MUFU.EX2.
  // H200, both in one binary (two builds): 0.6-2.3% faster than one in 4 at h = 128, 1.2-2.6% at
  // h = 64; more of them, or 10 others (r % 3 == 0 or 1), slower (bench/journal/2026-12-02.md,
  // fifth session); one in 4 was 1.4% faster than all on MUFU, one in 8 0.6%; one in 2 6% slower
  // (issue-bound).
  static constexpr int kFmaExpEvery = 3;

  static constexpr uint32_t kQBytes = kHeads * kDqk;
  static constexpr uint32_t kPSlotBytes = kHeads * kKeysPerTile;  // [64 heads][64 keys] e4m3

  static constexpr uint32_t kQOffset = 0;
  static constexpr uint32_t kKOffset = kQOffset + kQBytes;
  static constexpr uint32_t kPOffset = kKOffset + kNumKStages * kKTileBytes;       // [math group] P slots
  static constexpr uint32_t kBoundOffset = kPOffset + kNumMathGroups * kPSlotBytes;  // [math group][64] f32
  static constexpr uint32_t kAlphaOffset = kBoundOffset + kNumMathGroups * kHeads * 4;  // [math group][64] f32
  static constexpr uint32_t kBarrierOffset = kAlphaOffset + kNumMathGroups * kHeads * 4;
  // After the last pair the P slots hold the rows' partial results ([math group][64] float4) and
  // then the output scales ([math group][64] f32).
  static constexpr uint32_t kRowStateOffset = kPOffset;
  static constexpr uint32_t kOutScaleOffset = kRowStateOffset + kNumMathGroups * kHeads * 16;
  static constexpr uint32_t kNumBarriers = 2 * kNumKStages + 1;  // full[], empty[], q_full
  static constexpr uint32_t kSmemBytes = kBarrierOffset + kNumBarriers * 8;
  static constexpr uint32_t kSmemAlloc = kSmemBytes + 1024;

  static_assert(kKOffset % 1024 == 0 && kPOffset % 1024 == 0 && kPSlotBytes % 1024 == 0,
                "wgmma tiles start on a swizzle-pattern boundary (descriptor base_offset 0)");
  static_assert(kOutScaleOffset + kNumMathGroups * kHeads * 4 <= kBoundOffset, "the row results fit the P slots");
  static_assert(kBarrierOffset % 8 == 0, "mbarriers are 8-byte aligned");
  static_assert(kSmemAlloc <= 227 * 1024, "exceeds the 227 KB of shared memory per CTA on sm_90");
  static_assert(kProducerRegs + kMathRegs * kNumMathGroups <= kEntryRegs * kThreads / 128,
                "setmaxnreg split must fit the registers the CTA is launched with");
  static_assert(kNumKStages >= 4, "a pair is scored while the previous one is read");
};

// The seesaw kernel's QK^T plan for each instantiated chain count (launch.h): a lead chain of kLead
// k-steps, issued before the previous tile's softmax, then chains of kStep (score_gemm.cuh:
// QkLeadPlan).
template <int kQkChains>
struct SeesawQkPlan;
template <>
struct SeesawQkPlan<3> {  // 6, 6, 6
  static constexpr int kLead = 6, kStep = 6;
};
template <>
struct SeesawQkPlan<4> {  // 6, 4, 4, 4
  static constexpr int kLead = 6, kStep = 4;
};
template <>
struct SeesawQkPlan<5> {  // 4, 4, 4, 4, 2: DeepSeek-V3's promotion every 128 elements
  static constexpr int kLead = 4, kStep = 4;
};

// Named barriers of the seesaw kernel (0 is __syncthreads), all over the two math groups.
enum SeesawBarrier : uint32_t {
  kSeesawBounds = 1,  // both groups' row bounds of the pair published
  kSeesawP = 2,       // both P slots and the pair's rescale factors written
  kSeesawEnd = 3,     // the end: the loop done, the rows' partial results, the output scales
};

// The small-head kernel (h in {8, 16}): the transposed orientation, keys as the MMA rows. One CTA
// per two tokens: a producer warpgroup gathers both tokens' Q and their K tiles into one ring, the
// tokens' tiles in turn; consumer warpgroup c takes token c's tiles (the ring's every other tile),
// scores S^T = K Q^T (m64nhk32), builds V^T's A fragments from its tile in registers
// (value_layout.h), runs the token's online softmax and O^T[512][h] += V^T P^T, and writes the
// token's output itself. (One token a CTA, its tiles shared by the two consumers and merged at the
// end, paid a CTA's fixed cost, about 6 us, per token: bench/journal/2026-12-04.md, fourteenth
// session.)
template <int kH>
struct SmallHeadsConfig : MlaShape {
  static_assert(kH == 8 || kH == 16, "the transposed kernel takes h in {8, 16}");
  static constexpr int kHeads = kH;
  static constexpr int kAccRegs = kH / 2;  // m64nh accumulator registers per thread
  static constexpr int kColumns = kH / 4;  // distinct heads (columns) a thread holds
  static constexpr int kDvBlocks = kDv / 64;  // O^T is 8 m64 blocks
  // With one token a CTA, 5 stages timed as 3 did (h = 16, H200: 1.069 / 1.077 ms against 1.045 /
  // 1.093, bench/journal/2026-12-02.md, tenth session). Two tokens a CTA with the producer's
  // indices a tile ahead: 4 stages 0.989 ms at h = 16 against 1.03 with 3 and 1.003-1.010 with 5;
  // h = 8 0.844 / 0.840 / 0.835 (bench/journal/2026-12-04.md, fourteenth session).
  static constexpr int kNumKStages = 4;
  static constexpr int kThreads = 384;
  static constexpr int kEntryRegs = 65536 / kThreads / 8 * 8;
  static constexpr int kProducerRegs = 40;
  static constexpr int kConsumerRegs = 232;
  // Two tokens a CTA: consumer c takes token 2 blockIdx.x + c, its Q in slot c.
  static constexpr int kTokensPerCta = 2;
  static constexpr uint32_t kQBytes = kH * kDqk;
  static constexpr uint32_t kQSlotBytes = (kQBytes + 1023) / 1024 * 1024;
  static constexpr uint32_t kQOffset = 0;
  static constexpr uint32_t kKOffset = kTokensPerCta * kQSlotBytes;
  static constexpr uint32_t kPtBytes = kH * kKeysPerTile < 1024 ? 1024 : kH * kKeysPerTile;
  static constexpr uint32_t kPtOffset = kKOffset + kNumKStages * kKTileBytes;  // one P^T per consumer
  static constexpr uint32_t kColMaxOffset = kPtOffset + 2 * kPtBytes;           // [consumer][warp][h] f32
  static constexpr uint32_t kMergeOffset = kColMaxOffset + 2 * 4 * kH * 4;      // [consumer][warp][h] x 2 f32
  // Running maxima (true, reference) per head: [consumer][2 buffers][h] float2, so that they need
  // no registers.
  static constexpr uint32_t kStateOffset = kMergeOffset + 2 * 4 * kH * 8;
  static constexpr uint32_t kBarrierOffset = kStateOffset + 2 * 2 * kH * 8;
  static constexpr uint32_t kNumBarriers = 2 * kNumKStages + 1;  // full[], empty[], q_full
  static constexpr uint32_t kSmemBytes = kBarrierOffset + kNumBarriers * 8;
  static constexpr uint32_t kSmemAlloc = kSmemBytes + 1024;
  static_assert(kSmemAlloc <= 227 * 1024, "exceeds the 227 KB of shared memory per CTA on sm_90");
  static_assert(kKOffset % 1024 == 0 && kPtOffset % 1024 == 0 && kPtBytes % 1024 == 0,
                "wgmma tiles start on a swizzle-pattern boundary");
  static_assert(kBarrierOffset % 8 == 0, "mbarriers are 8-byte aligned");
  static_assert(kProducerRegs * 128 + kConsumerRegs * 256 <= kEntryRegs * kThreads,
                "setmaxnreg split must fit the registers the CTA is launched with");
};

// Named barriers of the small-head kernel (0 is __syncthreads).
enum SmallHeadsBarrier : uint32_t {
  kBarrierColumnMax = 1,  // + consumer: a consumer's four warps published their column maxima
  kBarrierPtReady = 3,    // + consumer: P^T (and V^T) of the tile written; at the end, its sums
};

}  // namespace fp8dsa::detail::sparse_mla
