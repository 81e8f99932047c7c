// The fused scorer's output policy (indexer/scorer_output.h): instead of storing a logit, each
// consumer warpgroup keeps, per token of its block, only the cells that can still be among that
// token's top k, in the buffers of candidate_buffers.cuh (the order, the compaction and the
// sampled prefloor are described there). CandidateOutput<true> has the sampled prefix.
#pragma once

#include <cstdint>

#include <cuda.h>

#include "fp8dsa/indexer.h"
#include "fp8dsa/status.h"
#include "fused_topk/candidate_buffers.cuh"
#include "fused_topk/candidate_layout.h"
#include "hopper/tma_map.h"
#include "indexer/scorer_output.h"
#include "topk/radix_select.cuh"

namespace fp8dsa::detail::fused_topk {

template <bool kSampled, class Epi>
class CandidateConsumer;

// kSampled: the launch scores the sample tiles first (a kernel of its own, so the launches
// without a sample, the redo one included, keep the plain loop's code and registers).
template <bool kSampled>
struct CandidateOutput {
  using Args = CandidateArgs;
  template <class Epi>
  using Consumer = CandidateConsumer<kSampled, Epi>;
  static constexpr int kSmemBytesPerConsumer = (sizeof(CandidateShared) + 15) / 16 * 16;
  static constexpr bool kNeedsOwnTokens = true;
  // The store under the next tile's MMA where a launch compacts often (no sample: 8K keys, few
  // tokens); right after the tile's epilogue where the sampled floor keeps compactions rare, since
  // the deferred tile's cells then cost registers the sampled loop does not have (spills). H200,
  // T = 4096, H = 64 / 32 (bench/journal/2026-12-04.md, fifteenth session): 128K 10.71 -> 10.49 /
  // 6.97 -> 6.34 ms without deferring; 8K, H = 64 0.98 -> 1.07 and T = 64, 64K 0.32 -> 0.36 with it
  // off.
  static constexpr bool kDeferStore = !kSampled;
  static constexpr bool kEarlyDependents = false;  // the select kernel reads the buffers: no early start

  // The strided view of K for the sample (host, per launch). A stride past TMA's limits leaves
  // the launch without a sample: every cell enters until the first compaction, as without one.
  template <class Cfg>
  static Status prepare(const IndexerParams& p, Args* a) {
    if (a->sample_stride <= 0) return Status::ok();
    const auto stride = static_cast<uint64_t>(a->sample_stride);
    const uint64_t rows = (static_cast<uint64_t>(p.num_keys) + stride - 1) / stride;
    if (!hopper::make_tensor_map_2d_u8(&a->sample_map, p.k, rows, Cfg::kDim, static_cast<uint64_t>(p.k_row_stride) * stride,
                                       Cfg::kKeyTile, Cfg::kDim, Cfg::kSwizzle)
             .is_ok()) {
      a->sample_stride = 0;
    }
    return Status::ok();
  }

  __device__ static bool token_active(const Args& a, int64_t token, int split, int splits) {
    return !a.redo || (a.counts[buffer_slot(token, splits, split) * kBufferParts] & kRedoBit) != 0u;
  }

  // The sampled prefix (kSampled only): sample rows [row0, row0 + 64 * tiles) of the strided view
  // cover the split's keys [key_begin, key_end); none where a buffer would compact about twice or
  // less (or in the redo launch).
  __device__ static void sample_range(const Args& a, int key_begin, int key_end, int* row0, int* tiles, int* stride)
    requires kSampled
  {
    *tiles = 0;
    if (a.sample_stride <= 0 || a.redo || key_end - key_begin <= kSampleMinRange * a.capacity) return;
    const int64_t s = a.sample_stride;
    const int64_t first = (key_begin + s - 1) / s, end = (key_end + s - 1) / s;
    *row0 = static_cast<int>(first);
    *tiles = static_cast<int>((end - first + kTileKeys - 1) / kTileKeys);
    *stride = a.sample_stride;
  }

  __device__ static void empty_cta(const Args& a, const detail::indexer::ScorerArgs& args, int64_t first_token,
                                   int split, int block_tokens, int tid) {
    if (a.redo) return;  // its tokens keep the first launch's candidates
    for (int i = tid; i < block_tokens * kBufferParts; i += blockDim.x) {
      const int64_t t = first_token + i / kBufferParts;
      if (t < args.num_tokens) a.counts[buffer_slot(t, args.key_splits, split) * kBufferParts + i % kBufferParts] = 0u;
    }
  }
};

// The per-warpgroup side. Epi (indexer/scorer_epilogue.cuh) says which (token, key) cells a lane
// holds: kTokensPerLane tokens, each in kSlotsPerToken consecutive slots (its two row halves).
//
// A warp appends to its own part of each buffer (candidate_layout.h), so a tile's store is per
// token two ballots, a popcount and the global stores, with no shared atomic and no barrier: the
// lanes holding one token in a warp (its `peers`) keep the same count in a register. The warps meet
// only at sync points, when a part may not have room for another tile: the counts are published to
// shared memory, every buffer with a full part is compacted (the whole warpgroup), and the
// warpgroup takes as its next budget the tiles every part still has room for, so the next sync
// point comes when the fullest part could fill, not after every tile.
template <bool kSampled, class Epi>
class CandidateConsumer : WarpgroupBuffers {
 public:
  static constexpr int kFinal = Epi::kFinal;
  static constexpr int kPairs = Epi::kTokensPerLane;  // tokens a lane holds, kSlots slots each
  static constexpr int kSlots = Epi::kSlotsPerToken;
  static_assert(Epi::slots_pair_by_token(), "a lane's slots pair up by token (scorer_epilogue.cuh)");

  // Only the tile loop's state is kept in registers (count, floor, peers and part of each token a
  // lane holds, and the budget); the rest is in shared memory or recomputed from threadIdx.
  __device__ CandidateConsumer(const CandidateArgs& a, const detail::indexer::ScorerArgs& args, uint8_t* smem,
                               int wg_token0, int wg_tokens, int64_t first_token, int split)
      : WarpgroupBuffers(a, smem) {
    const int64_t wg_first = first_token + wg_token0;
#pragma unroll
    for (int m = 0; m < kPairs; ++m) {
      const int u = token(m);
      peers_[m] = __match_any_sync(0xFFFFFFFFu, u);
      count_[m] = 0u;
      floor_[m] = 0u;  // everything enters until the first compaction
      part_[m] = a.entries + buffer_slot(wg_first + u, args.key_splits, split) * static_cast<int64_t>(a.capacity) +
                 warp() * part_capacity();
    }
    budget_ = part_capacity() / kPartTileKeys;
    init_shared(args, wg_token0, wg_tokens, first_token, split);
    sync();
  }

  // After the sample tiles' cells were stored: each token's floor from its sample, its buffer
  // emptied for the key tiles. bounds: the CTA's tokens' [ks, ke); the split's keys [key_begin,
  // key_end).
  __device__ void end_sample(const int2* bounds, int key_begin, int key_end)
    requires kSampled
  {
    publish_counts();
    sync();  // every sample cell stored and counted
    sample_floors(bounds, key_begin, key_end);
#pragma unroll
    for (int m = 0; m < kPairs; ++m) {
      count_[m] = 0u;  // the buffers start again, empty, from the floors
      floor_[m] = s_->floor[token(m)];
    }
    budget_ = part_capacity() / kPartTileKeys;
    sync();  // part_count is free for the next sync point
  }

  // Every lane offers its kFinal cells; per token, the ones that enter take the next slots of the
  // warp's part in lane order.
  template <int kCells>
  __device__ void store(const detail::indexer::TileCells<kCells>& c, int lane) {
    static_assert(kCells == kFinal, "the scorer's cells are Epi's");
    const uint32_t below = (1u << lane) - 1u;
#pragma unroll
    for (int m = 0; m < kPairs; ++m) {
      uint32_t at = count_[m];
#pragma unroll
      for (int s = 0; s < kSlots; ++s) {
        const int j = m * kSlots + s;
        const uint32_t key = detail::topk::order_key(c.value[j]);
        const bool enter = c.valid[j] && key >= floor_[m];
        const uint32_t group = __ballot_sync(0xFFFFFFFFu, enter) & peers_[m];
        if (enter) part_[m][at + __popc(group & below)] = make_uint2(key, static_cast<uint32_t>(c.key[j]));
        at += __popc(group);
      }
      count_[m] = at;
    }
  }

  // After every tile: a sync point once the budget is spent (see the class comment).
  __device__ void end_tile() {
    if (--budget_ > 0) return;
    sync_point();
  }

  __device__ void finish() {
    publish_counts();
    sync();
    write_counts();
  }

 private:
  __device__ static int token(int m) { return Epi::slot_token(threadIdx.x % 32, m * kSlots); }  // local

  // The warps publish their counts; every buffer with a part that may not hold another tile is
  // compacted; the next budget is the tiles every part still has room for (at least one: a
  // compaction leaves room for several, parts_keep_room()).
  __device__ void sync_point() {
    publish_counts();
    sync();
    const int wg_tokens = s_->wg_tokens;
    const int part_cap = part_capacity();
    for (int u = 0; u < wg_tokens; ++u) {
      uint32_t c[kBufferParts];
      read_counts(u, c);
      bool full = false;
#pragma unroll
      for (int p = 0; p < kBufferParts; ++p) full |= c[p] + kPartTileKeys > static_cast<uint32_t>(part_cap);
      if (full) compact(u, c);
    }
    int budget = part_cap / kPartTileKeys;
    for (int u = 0; u < wg_tokens; ++u) {
      uint32_t c[kBufferParts];
      read_counts(u, c);
#pragma unroll
      for (int p = 0; p < kBufferParts; ++p) budget = min(budget, (part_cap - static_cast<int>(c[p])) / kPartTileKeys);
    }
    budget_ = budget;
    const int w = warp();
#pragma unroll
    for (int m = 0; m < kPairs; ++m) {
      count_[m] = s_->part_count[token(m)][w];
      floor_[m] = s_->floor[token(m)];
    }
    sync();  // part_count is free for the next sync point
  }

  // The warp's counts into shared memory: the lowest lane of each token's peers writes.
  __device__ void publish_counts() const {
    const int lane = threadIdx.x % 32, w = warp();
#pragma unroll
    for (int m = 0; m < kPairs; ++m) {
      if (lane == __ffs(peers_[m]) - 1) s_->part_count[token(m)][w] = count_[m];
    }
  }

  int budget_;                // end_tile() calls before the next sync point
  uint32_t peers_[kPairs];    // the lanes holding token(m) in this warp
  uint32_t count_[kPairs];    // this warp's part count of token(m) (equal on its peers)
  uint32_t floor_[kPairs];
  uint2* part_[kPairs];       // this warp's part of token(m)'s buffer
};

}  // namespace fp8dsa::detail::fused_topk
