// The fused scorer's output policy (indexer/q_resident_scorer.cuh): instead of storing a logit,
// each consumer warpgroup keeps, per token of its block, only the cells that can still be among
// that token's top k.
//
// Order: a candidate ranks by (score key descending, key row ascending), a total order, so "the
// top k" is one exact set and reruns are bitwise identical. A warpgroup scores its key tiles in
// ascending key order, so a later key never beats an earlier one of equal score.
//
// Per (token, split) the workspace holds `capacity` slots (candidate_layout.h). Until the first
// compaction every valid cell enters. When a tile leaves fewer than 64 free slots, the warpgroup
// compacts the buffer: a radix select finds the k-th candidate, exactly k survive, and from then
// on a cell enters only if its key is strictly above the k-th's (a later equal key ranks below
// it). The threshold only rises, so a row with rising scores compacts often (slower, still exact);
// all-equal rows, NaN and -inf rows are exact by the same order. select_candidates.cu merges the
// splits of a token and writes its indices.
#pragma once

#include <cstdint>

#include "fused_topk/candidate_layout.h"
#include "fused_topk/warpgroup_select.cuh"
#include "indexer/q_resident_scorer.cuh"
#include "topk/radix_select.cuh"

namespace fp8dsa::fused_topk_impl {

struct CandidateArgs {
  uint32_t* counts = nullptr;  // [T * splits]
  uint32_t* keys = nullptr;    // [T * splits * capacity]
  int32_t* rows = nullptr;     // [T * splits * capacity]
  int capacity = 0;
  int k = 0;
};

class CandidateOutput {
 public:
  using Args = CandidateArgs;
  static constexpr int kMaxTokens = 32;  // tokens of one warpgroup's block (H = 4: 128 / 4)
  struct Shared {
    WarpgroupSelectShared select;
    uint32_t count[kMaxTokens];
    uint32_t floor[kMaxTokens];  // a cell enters when its key >= floor
    uint32_t full_mask;          // tokens whose buffer has fewer than kTileKeys free slots
    uint32_t new_count;
  };
  static constexpr int kSmemBytesPerConsumer = (sizeof(Shared) + 15) / 16 * 16;
  static constexpr bool kNeedsOwnTokens = true;
  static constexpr uint32_t kBarrierBase = 4;  // named barriers 4.. (the scorer's ping-pong uses 1..3)

  __device__ static void empty_cta(const Args& a, const indexer_detail::ScorerArgs& args, int64_t first_token,
                                   int split, int block_tokens, int tid) {
    if (tid < block_tokens && first_token + tid < args.num_tokens) {
      a.counts[(first_token + tid) * args.key_splits + split] = 0u;
    }
  }

  __device__ CandidateOutput(const Args& a, const indexer_detail::ScorerArgs& args, uint8_t* smem, int wg_token0,
                             int wg_tokens, int64_t first_token, int split)
      : a_(a),
        s_(reinterpret_cast<Shared*>(smem)),
        thread_(threadIdx.x % 128),
        barrier_(kBarrierBase + threadIdx.x / 128),
        wg_token0_(wg_token0),
        wg_tokens_(wg_tokens),
        first_token_(first_token + wg_token0),
        num_tokens_(args.num_tokens),
        splits_(args.key_splits),
        split_(split) {
    if (thread_ < wg_tokens_) {
      s_->count[thread_] = 0u;
      s_->floor[thread_] = 0u;  // everything enters until the first compaction
    }
    if (thread_ == 0) s_->full_mask = 0u;
    hopper::named_barrier_sync(barrier_, 128);
  }

  template <int kFinal>
  __device__ void store(const indexer_detail::TileCells<kFinal>& c, int lane) {
    const int capacity = a_.capacity;
#pragma unroll
    for (int j = 0; j < kFinal; ++j) {
      const int u = c.token[j] - wg_token0_;
      const uint32_t key = topk_impl::order_key(c.value[j]);
      const bool enter = c.valid[j] && key >= s_->floor[u];
      // Lanes entering the same token's buffer take consecutive slots with one atomic.
      const uint32_t group = __match_any_sync(0xFFFFFFFFu, enter ? u : -1);
      const int leader = __ffs(group) - 1;
      const uint32_t n = __popc(group);
      uint32_t base = 0;
      if (enter && lane == leader) {
        base = atomicAdd(&s_->count[u], n);
        if (base + n > static_cast<uint32_t>(capacity - kTileKeys)) atomicOr(&s_->full_mask, 1u << u);
      }
      base = __shfl_sync(0xFFFFFFFFu, base, leader);
      if (enter) {
        const int64_t at = slot_offset(u) + base + __popc(group & ((1u << lane) - 1u));
        a_.keys[at] = key;
        a_.rows[at] = c.key[j];
      }
    }
  }

  // After every tile: if a buffer of this warpgroup is nearly full, compact it. The barrier's OR
  // makes the decision uniform; full_mask is only written by the crossing tile and by compact().
  __device__ void end_tile() {
    int any = 0;
    const int mine = s_->full_mask != 0u;
    asm volatile(
        "{\n.reg .pred p, q;\nsetp.ne.s32 p, %1, 0;\nbar.red.or.pred q, %2, 128, p;\nselp.s32 %0, 1, 0, q;\n}\n"
        : "=r"(any)
        : "r"(mine), "r"(barrier_)
        : "memory");
    if (!any) return;
    uint32_t mask = s_->full_mask;
    while (mask != 0u) {
      const int u = __ffs(mask) - 1;
      mask &= mask - 1u;
      compact(u);
    }
    if (thread_ == 0) s_->full_mask = 0u;
    hopper::named_barrier_sync(barrier_, 128);
  }

  __device__ void finish() {
    hopper::named_barrier_sync(barrier_, 128);
    if (thread_ < wg_tokens_ && first_token_ + thread_ < num_tokens_) {
      a_.counts[(first_token_ + thread_) * splits_ + split_] = s_->count[thread_];
    }
  }

 private:
  __device__ int64_t slot_offset(int u) const {
    return ((first_token_ + u) * splits_ + split_) * static_cast<int64_t>(a_.capacity);
  }

  // Keeps exactly the top k of token u's buffer (in place) and raises its floor above the k-th.
  // The keys (at most kMaxCapacity) are read into registers once for the select; the survivors
  // are then moved below k in chunks read whole before any is written.
  __device__ void compact(int u) {
    constexpr int kPer = kMaxCapacity / 128;  // 32 key registers per thread
    static_assert(kMaxCapacity % 128 == 0 && kPer <= 32, "one pass bit per register");
    const WarpgroupSelect sel(&s_->select, barrier_, thread_);
    uint32_t* keys = a_.keys + slot_offset(u);
    int32_t* rows = a_.rows + slot_offset(u);
    const uint32_t n = s_->count[u];
    const uint32_t k = static_cast<uint32_t>(a_.k);
    uint32_t v[kPer];
    uint32_t present = 0;
#pragma unroll
    for (int j = 0; j < kPer; ++j) {
      const uint32_t i = j * 128 + thread_;
      v[j] = i < n ? keys[i] : 0u;
      if (i < n) present |= 1u << j;
    }
    const SelectResult kth = sel.select(v, present, k);
    // Of the keys equal to the k-th, keep the lowest rows: the (k - above)-th largest of ~row.
    const uint32_t ties = k - kth.above;
    uint32_t last_row = 0x7FFFFFFFu;
    if (kth.equal > ties) {  // rare
      uint32_t tied = 0;
#pragma unroll
      for (int j = 0; j < kPer; ++j) {
        if (((present >> j) & 1u) && v[j] == kth.value) tied |= 1u << j;
        v[j] = (tied >> j) & 1u ? ~static_cast<uint32_t>(rows[j * 128 + thread_]) : 0u;
      }
      last_row = ~sel.select(v, tied, ties).value;
    }
    if (thread_ == 0) s_->new_count = 0u;
    sel.sync();
    constexpr int kChunk = 8;
    const int lane = thread_ % 32;
#pragma unroll 1
    for (uint32_t c = 0; c < n; c += 128 * kChunk) {
      uint32_t key[kChunk];
      int32_t row[kChunk];
      bool keep[kChunk];
#pragma unroll
      for (int j = 0; j < kChunk; ++j) {
        const uint32_t i = c + j * 128 + thread_;
        key[j] = i < n ? keys[i] : 0u;
        row[j] = i < n ? rows[i] : 0;
        keep[j] = i < n && (key[j] > kth.value ||
                            (key[j] == kth.value && static_cast<uint32_t>(row[j]) <= last_row));
      }
      sel.sync();  // the chunk is read whole; survivors land below its end
#pragma unroll
      for (int j = 0; j < kChunk; ++j) {
        const uint32_t ballot = __ballot_sync(0xFFFFFFFFu, keep[j]);
        if (ballot == 0u) continue;
        uint32_t base = 0;
        if (lane == 0) base = atomicAdd(&s_->new_count, __popc(ballot));
        base = __shfl_sync(0xFFFFFFFFu, base, 0);
        if (keep[j]) {
          const uint32_t at = base + __popc(ballot & ((1u << lane) - 1u));
          keys[at] = key[j];
          rows[at] = row[j];
        }
      }
    }
    sel.sync();
    if (thread_ == 0) {
      s_->count[u] = s_->new_count;  // == k
      s_->floor[u] = kth.value + 1u;  // the k-th's key is below +inf's + 1, never wraps
    }
    sel.sync();
  }

  Args a_;
  Shared* s_;
  int thread_;
  uint32_t barrier_;
  int wg_token0_;
  int wg_tokens_;
  int64_t first_token_;  // of this warpgroup's block
  int64_t num_tokens_;
  int splits_;
  int split_;
};

}  // namespace fp8dsa::fused_topk_impl
