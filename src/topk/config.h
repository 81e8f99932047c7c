// Top-k tile sizes, radix layout and the shared-memory plan, in one place (host and device).
#pragma once

#include <cstddef>
#include <cstdint>

#include <cuda_runtime_api.h>  // __host__ __device__
#include <math.h>

namespace fp8dsa::detail::topk {

inline constexpr int kMaxK = 2048;  // topk.h: k in 1..2048

// Radix select over the 32-bit order-preserving key in three levels of 11 + 11 + 10 bits: one
// 2048-bin histogram serves every level (the last level uses the low 1024 bins).
inline constexpr int kNumBins = 2048;
constexpr __host__ __device__ int level_shift(int level) { return level == 0 ? 21 : (level == 1 ? 10 : 0); }
constexpr __host__ __device__ uint32_t level_digit_mask(int level) { return level == 2 ? 0x3FFu : 0x7FFu; }
// Bits a key must share with the threshold before level l counts it.
constexpr __host__ __device__ uint32_t level_prefix_mask(int level) {
  return level == 0 ? 0u : ~((1u << level_shift(level - 1)) - 1u);
}
static_assert(level_shift(0) + 11 == 32 && level_shift(1) + 11 == level_shift(0) &&
                  level_shift(2) + 10 == level_shift(1),
              "the three digits must tile the 32-bit key");
static_assert(level_prefix_mask(1) == 0xFFE00000u && level_prefix_mask(2) == 0xFFFFFC00u,
              "prefix masks keep exactly the digits chosen before the level");

// Keys of the threshold bucket after level 0 that one CTA keeps in shared memory; a bucket with
// more keys is refined by re-scanning the row instead (exact for any row length, never truncated).
inline constexpr int kCandidateCap = 4096;

// Ordered (index-order compaction) passes give each thread this many 4-key vectors per block scan:
// counts per tile stay below 2^16 so two counts pack into one 32-bit scan value.
inline constexpr int kOrderedVecsPerThread = 4;
// Unordered histogram passes keep this many 16-byte loads in flight per thread.
inline constexpr int kHistVecsInFlight = 4;

// The split path (few long rows): rows are cut into chunks, one CTA per (chunk, row), and the
// histograms of a row meet in the workspace.
inline constexpr int kSplitMaxRows = 64;     // workspace is sized for at most this many rows
inline constexpr int kSplitMaxChunks = 512;  // per row
inline constexpr int kSplitThreads = 512;
inline constexpr int kSplitMinChunkKeys = 8192;  // a chunk shorter than this is not worth a CTA

// Workspace of one split row: the three level histograms and the per-chunk (above, equal) counts.
struct SplitRowWorkspace {
  uint32_t hist[3][kNumBins];
  uint32_t chunk_counts[kSplitMaxChunks][2];
};
inline constexpr size_t kSplitHistBytes = sizeof(uint32_t) * 3 * kNumBins;
static_assert(sizeof(SplitRowWorkspace) % 256 == 0, "rows stay 256-byte aligned");

// The register path (rows of up to kRegisterMaxKeys keys, topk.cu): one CTA a row keeps the whole
// row on chip, read once: `vecs` 4-key vectors a thread in registers, `smem_vecs` more in shared
// memory (for rows too long for the registers of two CTAs an SM), the 0-3 keys before the row's
// first 16-byte boundary apart; every radix level and the ordered emit run over them. A thread is
// planned at its register keys plus 32 registers, which sets the CTAs an SM holds.
inline constexpr int kRegisterVecsPerThread = 8;
constexpr __host__ __device__ int64_t register_cap_keys(int threads, int vecs = kRegisterVecsPerThread,
                                                        int smem_vecs = 0) {
  return int64_t{4} * (vecs + smem_vecs) * threads;
}
constexpr __host__ __device__ int register_plan_regs(int vecs) { return 4 * vecs + 32; }
constexpr __host__ __device__ int register_min_ctas(int threads, int vecs) {
  return 65536 / (threads * register_plan_regs(vecs)) > 0 ? 65536 / (threads * register_plan_regs(vecs)) : 1;
}
// The shapes topk.cu chooses: 256 threads of 8 register vectors to 8K keys (4 CTAs an SM), 512 to
// 16K (2), and for rows to 32K 512 threads of 7 vectors in registers and 9 in shared memory (72 KB;
// 8 + 8 spilled a few registers) (2).
inline constexpr int kRegisterLongThreads = 512;
inline constexpr int kRegisterLongVecs = 7;
inline constexpr int kRegisterLongSmemVecs = 9;
inline constexpr int64_t kRegisterMaxKeys =
    register_cap_keys(kRegisterLongThreads, kRegisterLongVecs, kRegisterLongSmemVecs);
static_assert(register_min_ctas(256, 8) == 4 && register_min_ctas(512, 8) == 2 && register_min_ctas(1024, 8) == 1,
              "64 registers a thread at 8 vectors: 1024 threads an SM");
// The emit packs a warp's per-vector key counts into bytes (32 lanes x 4 keys < 256) and the CTA's
// counts of keys above / equal to the threshold into the halves of one word.
static_assert(kRegisterMaxKeys < (1 << 16) && 32 * 4 < 256,
              "the register path's counts pack as 16-bit and 8-bit fields");

// The filter path (rows past the register path's, to 256K keys, topk.cu): a jittered, strided
// sample of the row gives a float threshold that lies below the row's k-th largest key with high
// probability; one read of the row keeps the keys at or above it as candidates, and the exact
// select runs on the candidates only. A row whose candidates are fewer than k or more than the cap
// falls back to the whole-row select (exact either way; only the time differs).
inline constexpr int kFilterCandidateCap = 4096;
// A warp filters chunks of 32 lanes x kFilterVecsPerLane 4-key vectors, in row order within a
// chunk; the chunks' candidate runs are recorded so that the output comes in ascending key order.
inline constexpr int kFilterVecsPerLane = 4;
inline constexpr int kFilterChunkKeys = 32 * 4 * kFilterVecsPerLane;
inline constexpr int kFilterMaxChunks = 512;  // rows of up to 256K keys; longer rows take the whole-row select
inline constexpr int kFilterMinSamples = 1024;
inline constexpr int kFilterMaxSamples = 4096;
static_assert(static_cast<int64_t>(kFilterMaxChunks) * kFilterChunkKeys < (1 << 22) && kFilterChunkKeys < 1024,
              "a chunk record packs its run start in 22 bits and its length in 10");

// Samples for a row of len > kFilterCandidateCap keys: a power of two near 128 len / k (about 128
// of them then lie above the k-th largest key), within [kFilterMinSamples, kFilterMaxSamples];
// filter_samples_log2 gives its log2.
constexpr __host__ __device__ int filter_samples_log2(uint32_t len, uint32_t k) {
  const uint64_t want = 128ull * len / k;
  int log2 = 0;
  while ((1u << log2) < static_cast<uint32_t>(kFilterMinSamples)) ++log2;
  while ((1u << log2) < static_cast<uint32_t>(kFilterMaxSamples) && (2ull << log2) <= want) ++log2;
  return log2;
}
constexpr __host__ __device__ uint32_t filter_samples(uint32_t len, uint32_t k) {
  return 1u << filter_samples_log2(len, k);
}
static_assert(kFilterMaxSamples <= kFilterCandidateCap, "a row that takes a sample has at least as many keys");
// Rank (1-based, from the top) of the sample key used as the threshold: the expected count e of
// samples above the k-th largest key, plus 4 sqrt(e) + 4, so the row holds fewer than k keys at or
// above it only rarely, and about k + (4 sqrt(e) + 4) len / samples keys in all.
__host__ __device__ inline uint32_t filter_sample_rank(uint32_t samples, uint32_t len, uint32_t k) {
  const float e = static_cast<float>(samples) * static_cast<float>(k) / static_cast<float>(len);
  const uint32_t r = static_cast<uint32_t>(ceilf(e + 4.0f * sqrtf(e) + 4.0f));
  return r < samples ? r : samples;
}
// Offset of sample i of 2^log2_samples (at most len): one key from each of the equal strata of the
// row, at a position inside the stratum that a hash of i picks (rows with a period cannot fool the
// sample).
constexpr __host__ __device__ uint32_t filter_sample_offset(uint32_t i, int log2, uint32_t len) {
  const uint32_t lo = static_cast<uint32_t>((static_cast<uint64_t>(i) * len) >> log2);
  const uint32_t hi = static_cast<uint32_t>((static_cast<uint64_t>(i + 1) * len) >> log2);
  const uint32_t h = i * 2654435761u;
  return lo + static_cast<uint32_t>((static_cast<uint64_t>(h) * (hi - lo)) >> 32);
}
}  // namespace fp8dsa::detail::topk
