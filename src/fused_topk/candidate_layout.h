// The fused path's candidate buffers, host and device: how many entries one (token, key split)
// keeps, how many key splits a launch may use, and where everything lives in the workspace.
//
// A candidate is a (score key, key row) pair, stored as one 8-byte entry: the score as the
// order-preserving 32-bit key of topk/radix_select.cuh (NaN lowest), then the absolute key row.
// Each (token, split) owns `capacity` entries in kBufferParts parts with a count each.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/host_device.h"
#include "fp8dsa/types.h"

namespace fp8dsa::detail::fused_topk {

// A tile of the scorer adds at most this many candidates per token (its key rows).
inline constexpr int kTileKeys = 64;

// Each (token, split) buffer is cut into kBufferParts equal parts, one per warp of the consumer
// warpgroup that fills it (candidate_output.cuh): a warp appends its cells to its own part with a
// count it keeps in registers, so no two warps share a counter. A warp holds 16 of a tile's 64 key
// rows, so a tile adds at most kPartTileKeys cells to a part. Each part has its own count; the
// select kernel reads the parts as kBufferParts consecutive "splits".
inline constexpr int kBufferParts = 4;
inline constexpr int kPartTileKeys = kTileKeys / kBufferParts;

// Slots per (token, split): room for k survivors plus at least max(k, 512) new candidates
// between two compactions, in 256-slot steps. k = 2048 gives 4096 (32 KB per (token, split)).
constexpr int candidate_capacity(int k) {
  const int room = k > 512 ? k : 512;
  return (k + room + 255) / 256 * 256;
}
static_assert(candidate_capacity(2048) == 4096 && candidate_capacity(1) == 768, "capacity rule");
inline constexpr int kMaxCapacity = candidate_capacity(2048);  // the largest k gives the largest buffer
static_assert(candidate_capacity(1) - kTileKeys >= 1 && candidate_capacity(2048) - kTileKeys >= 2048,
              "a compaction always leaves room for one more tile");
// A compaction keeps at most k - 1 + (capacity - k) / 2 cells, spread evenly over the parts: each
// part then has room for at least one more tile (checked for the smallest and the largest k).
constexpr bool parts_keep_room(int k) {
  const int capacity = candidate_capacity(k), part = capacity / kBufferParts;
  const int kept = k - 1 + (capacity - k) / 2;
  return capacity % (kBufferParts * 64) == 0 && (kept + kBufferParts - 1) / kBufferParts + kPartTileKeys <= part;
}
static_assert(parts_keep_room(1) && parts_keep_room(512) && parts_keep_room(2048), "every part keeps room for a tile");

// A (token, key split)'s index among the buffers: its entries start at slot * capacity, its
// kBufferParts counts at slot * kBufferParts.
FP8DSA_HOST_DEVICE int64_t buffer_slot(int64_t token, int splits, int split) {
  return token * splits + split;
}

// Key splits of one token block (config.h: enough to give every SM a CTA), at most this
// many, so the buffers of a few-token launch stay small.
inline constexpr int kMaxKeySplits = 16;
inline constexpr int kMaxBufferParts = kMaxKeySplits * kBufferParts;  // counts a token, at most

// The prefloor's sample (candidate_output.cuh): every sample_stride()-th key of a split's range,
// at least every 24th (about 4% more MMA work), and sparse enough that a split's sample always
// fits its buffers without a compaction (at most capacity - 128 cells per token, so at most a
// quarter of that per part: a warp holds 16 rows of every 64-row sample tile). 0 when no
// split's range exceeds two capacities (its buffers compact about twice or less: a sample does
// not pay). The three constants were chosen on the H200 (bench/journal/2026-12-01.md, the
// prefloor): minimum strides 16 / 24 / 32 within 2% of each other, a target of 87% of capacity 3%
// faster than 100% (fewer compactions) and than 74% (fewer redos at N = 128K).
inline constexpr int kMinSampleStride = 24;
inline constexpr int kSampleMinRange = 2;         // in capacities: a shorter split's range takes no sample
inline constexpr int kSampleTargetPercent = 87;   // cells a sampled floor aims at, in % of capacity
inline int sample_stride(int64_t num_keys, int splits, int capacity) {
  const int64_t tiles = (num_keys + kTileKeys - 1) / kTileKeys;
  const int64_t range = (tiles + splits - 1) / splits * kTileKeys;  // a split's keys, at most
  if (range <= int64_t{kSampleMinRange} * capacity) return 0;
  const int64_t room = capacity - 2 * kTileKeys;
  const int64_t stride = (range + room - 1) / room;
  return static_cast<int>(stride > kMinSampleStride ? stride : kMinSampleStride);
}

// Byte offsets of the two arrays inside the workspace, each kWorkspaceAlignment-aligned.
struct CandidateLayout {
  int64_t slots = 0;          // tokens * splits
  int capacity = 0;           // per slot
  size_t counts_offset = 0;   // uint32_t [slots * kBufferParts]
  size_t entries_offset = 0;  // 8-byte (score key, key row) [slots * capacity]
  size_t total = 0;           // bytes in all
};
inline constexpr size_t kCandidateBytes = 8;

inline size_t align_workspace(size_t bytes) {
  return (bytes + kWorkspaceAlignment - 1) / kWorkspaceAlignment * kWorkspaceAlignment;
}

inline CandidateLayout candidate_layout(int64_t num_tokens, int splits, int k) {
  CandidateLayout l;
  l.slots = num_tokens * splits;
  l.capacity = candidate_capacity(k);
  // T < 2^31 and splits <= 16 (validated before), so slots * capacity * 8 < 2^31 * 16 * 4096 * 8 = 2^50.
  const size_t counts = align_workspace(static_cast<size_t>(l.slots) * kBufferParts * sizeof(uint32_t));
  const size_t entries = align_workspace(static_cast<size_t>(l.slots) * l.capacity * kCandidateBytes);
  l.counts_offset = 0;
  l.entries_offset = counts;
  l.total = counts + entries;
  return l;
}

}  // namespace fp8dsa::detail::fused_topk
