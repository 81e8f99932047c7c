// Top-k tile sizes, radix layout and the shared-memory plan, in one place (host and device).
#pragma once

#include <cstddef>
#include <cstdint>

#include <cuda_runtime_api.h>  // __host__ __device__

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

}  // namespace fp8dsa::detail::topk
