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
// compacts the buffer: a radix select finds the bin of the k-th candidate, every candidate at or
// above the bin's lowest value survives, and from then on a cell enters only if its key reaches
// that value. Everything dropped or refused lies below at least k candidates, so it cannot be in
// the top k. Where ties fill the bin (all-equal rows), the exact k-th is taken instead, exactly k
// survive (its ties cut by row) and the floor becomes strictly above it: a later equal key has a
// higher row and ranks below. The floor only rises, so a row with rising scores compacts often
// (slower, still exact); NaN and -inf rows are exact by the same order. select_candidates.cu
// merges the splits of a token and writes its indices.
//
// The prefloor: left alone, a buffer takes every cell until its first compaction and keeps
// compacting while the floor climbs (about 11,000 cells and 3-4 compactions per token over 64K
// random keys). Where a split's range exceeds two capacities, the CTA first scores a sample,
// every sample_stride-th key of its range (a strided view of K, one TMA box per 64 sample rows),
// into the buffers. Per token, the sample's r-th largest with r = sample_target x (sample cells
// / range cells) becomes a non-strict floor, the buffer is emptied and the key tiles run as
// before from that floor: about sample_target (87% of capacity) cells enter, so a buffer
// compacts once or not at all. The
// floor is only an estimate: if fewer than k cells reached it, keys below it may belong to the
// top k, so the (token, split) is marked (kRedoBit in its count) and a second launch with
// `redo` scores exactly the marked ones again with no floor (fused_topk.cpp launches it whenever
// the first one sampled; it leaves every other token as it is). Reruns stay bitwise identical:
// the floor is a function of the sample's values.
#pragma once

#include <cstdint>

#include <cuda.h>

#include "fp8dsa/indexer.h"
#include "fp8dsa/status.h"
#include "fused_topk/candidate_layout.h"
#include "fused_topk/group_select.cuh"
#include "hopper/tma_map.h"
#include "indexer/q_resident_scorer.cuh"
#include "topk/radix_select.cuh"

namespace fp8dsa::detail::fused_topk {

// A (token, split) whose prefloor let fewer than k cells in: rescored by the redo launch.
inline constexpr uint32_t kRedoBit = 0x80000000u;
// Fewer sample cells than this give no floor (the estimate would be noise).
inline constexpr uint32_t kMinSampleCells = 32;

struct CandidateArgs {
  uint32_t* counts = nullptr;  // [T * splits]
  uint32_t* keys = nullptr;    // [T * splits * capacity]
  int32_t* rows = nullptr;     // [T * splits * capacity]
  int capacity = 0;
  int k = 0;
  int sample_stride = 0;       // 0: no sample pass (sample_stride() in candidate_layout.h)
  int sample_target = 0;       // cells a sampled floor aims to let in (per token and split)
  bool redo = false;           // score only the (token, split)s marked with kRedoBit, with no floor
  CUtensorMap sample_map{};    // every sample_stride-th row of K (prepare() builds it)
};

// kSampled: the launch scores the sample tiles first (a kernel of its own, so the launches
// without a sample, the redo one included, keep the plain loop's code and registers).
template <bool kSampled>
class CandidateOutput {
 public:
  using Args = CandidateArgs;
  static constexpr int kMaxTokens = 32;  // tokens of one warpgroup's block (H = 4: 128 / 4)
  struct Shared {
    WarpgroupSelect::Shared select;
    uint32_t count[kMaxTokens];
    uint32_t floor[kMaxTokens];  // a cell enters when its key >= floor
    uint32_t full_mask;          // tokens whose buffer has fewer than kTileKeys free slots
    uint32_t prefloor_mask;      // tokens whose floor came from the sample
    uint32_t redo_mask;          // redo launch: the tokens it scores again
  };
  static constexpr int kSmemBytesPerConsumer = (sizeof(Shared) + 15) / 16 * 16;
  static constexpr bool kNeedsOwnTokens = true;
  static constexpr bool kDeferStore = true;  // the store's atomics and stores overlap the next MMA
  static constexpr bool kSamples = kSampled;
  static constexpr bool kEarlyDependents = false;  // the select kernel reads the buffers: no early start
  static constexpr uint32_t kBarrierBase = detail::indexer::kOutputWarpgroup;  // indexer/config.h
  static constexpr int kMaxFinal = 16;  // cells per lane and tile (H = 4: 16)

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
    return !a.redo || (a.counts[token * splits + split] & kRedoBit) != 0u;
  }

  // Sample rows [row0, row0 + 64 * tiles) of the strided view cover the split's keys
  // [key_begin, key_end); none where a buffer would compact about twice or less (or in the redo
  // launch).
  __device__ static void sample_range(const Args& a, int key_begin, int key_end, int* row0, int* tiles, int* stride) {
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
    if (tid < block_tokens && first_token + tid < args.num_tokens) {
      a.counts[(first_token + tid) * args.key_splits + split] = 0u;
    }
  }

  __device__ CandidateOutput(const Args& a, const detail::indexer::ScorerArgs& args, uint8_t* smem, int wg_token0,
                             int wg_tokens, int64_t first_token, int split)
      : a_(a),
        s_(shared_space(smem)),
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
    if (thread_ < 32) {  // wg_tokens_ <= 32
      const int64_t t = first_token_ + thread_;
      const bool redo = a_.redo && thread_ < wg_tokens_ && t < num_tokens_ &&
                        (a_.counts[t * splits_ + split_] & kRedoBit) != 0u;
      const uint32_t mask = __ballot_sync(0xFFFFFFFFu, redo);
      if (thread_ == 0) {
        s_->full_mask = 0u;
        s_->prefloor_mask = 0u;
        s_->redo_mask = mask;
      }
    }
    hopper::named_barrier_sync(barrier_, 128);
  }

  // After the sample tiles' cells were stored: each token's floor from its sample, its buffer
  // emptied for the key tiles. bounds: the CTA's tokens' [ks, ke); the split's keys [key_begin,
  // key_end).
  __device__ void end_sample(const int2* bounds, int key_begin, int key_end) {
    const WarpgroupSelect sel(&s_->select, barrier_, thread_);
    sel.sync();  // every sample cell stored and counted
    for (int u = 0; u < wg_tokens_; ++u) {
      const int2 b = bounds[wg_token0_ + u];
      const int n = max(0, min(b.y, key_end) - max(b.x, key_begin));  // the token's keys in the split
      const uint32_t m = s_->count[u];
      uint32_t floor = 0u;
      if (n > a_.capacity - kTileKeys && m >= kMinSampleCells) {
        const uint64_t want = (static_cast<uint64_t>(a_.sample_target) * m + n - 1) / n;
        const uint32_t r = want < m ? static_cast<uint32_t>(want) : m;
        uint32_t v[kPer];
        const uint32_t present = load_keys(a_.keys + slot_offset(u), m, v);
        floor = sel.select(v, present, r).value;
      }
      sel.sync();  // every thread has read count[u]
      if (thread_ == 0) {
        s_->count[u] = 0u;
        s_->floor[u] = floor;
        if (floor != 0u) s_->prefloor_mask |= 1u << u;
      }
    }
    if (thread_ == 0) s_->full_mask = 0u;  // never set by a sample (sample_stride()), cleared all the same
    sel.sync();
  }

  // Every lane offers its kFinal cells; the ones that enter take consecutive slots of their
  // token's buffer, one shared atomic per (token, slot j) and warp, all issued before any result is
  // used. Which lanes share a token in slot j is fixed by the epilogue's layout: found once.
  template <int kFinal>
  __device__ void store(const detail::indexer::TileCells<kFinal>& c, int lane) {
    static_assert(kFinal <= kMaxFinal, "peer masks for every slot");
    if (!peers_found_) {
#pragma unroll
      for (int j = 0; j < kFinal; ++j) peers_[j] = __match_any_sync(0xFFFFFFFFu, c.token[j]);
      peers_found_ = true;
    }
    const int capacity = a_.capacity;
    const uint32_t below = (1u << lane) - 1u;
    uint32_t key[kFinal], group[kFinal], base[kFinal];
    bool enter[kFinal];
#pragma unroll
    for (int j = 0; j < kFinal; ++j) {
      const int u = c.token[j] - wg_token0_;
      key[j] = detail::topk::order_key(c.value[j]);
      enter[j] = c.valid[j] && key[j] >= s_->floor[u];
      group[j] = peers_[j] & __ballot_sync(0xFFFFFFFFu, enter[j]);
    }
#pragma unroll
    for (int j = 0; j < kFinal; ++j) {
      base[j] = 0;
      const int u = c.token[j] - wg_token0_;
      if (enter[j] && (group[j] & below) == 0u) {  // the lowest entering lane of its group
        const uint32_t n = __popc(group[j]);
        base[j] = atomicAdd(&s_->count[u], n);
        if (base[j] + n > static_cast<uint32_t>(capacity - kTileKeys)) atomicOr(&s_->full_mask, 1u << u);
      }
    }
#pragma unroll
    for (int j = 0; j < kFinal; ++j) {
      const int leader = group[j] != 0u ? __ffs(group[j]) - 1 : lane;
      base[j] = __shfl_sync(0xFFFFFFFFu, base[j], leader);
      if (enter[j]) {
        const int64_t at = slot_offset(c.token[j] - wg_token0_) + base[j] + __popc(group[j] & below);
        a_.keys[at] = key[j];
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
      const uint32_t bit = 1u << thread_;
      if (!a_.redo || (s_->redo_mask & bit) != 0u) {
        uint32_t count = s_->count[thread_];
        // A sampled floor that let fewer than k in (the token has more keys: the floor was only
        // set with more than capacity - 64 of them) may have turned away some of its top k.
        if ((s_->prefloor_mask & bit) != 0u && count < static_cast<uint32_t>(a_.k)) count |= kRedoBit;
        a_.counts[(first_token_ + thread_) * splits_ + split_] = count;
      }
    }
  }

 private:
  // The same address, re-derived from the dynamic shared array: the kernel's aligned pointer went
  // through an integer, so without this every access would compile to a generic (and the atomics
  // to GPU-scope) instruction instead of LDS / ATOMS.
  __device__ static Shared* shared_space(uint8_t* smem) {
    extern __shared__ uint8_t candidate_output_smem[];
    const uint32_t offset = hopper::smem_address(smem) - hopper::smem_address(candidate_output_smem);
    return reinterpret_cast<Shared*>(candidate_output_smem + offset);
  }

  // A buffer's first n keys into registers, key j * 128 + thread in v[j]; bit j of the result
  // says v[j] holds one (the selects' pass mask).
  static constexpr int kPer = kMaxCapacity / 128;  // 32 key registers per thread
  static_assert(kMaxCapacity % 128 == 0 && kPer <= 32, "one pass bit per register");
  __device__ uint32_t load_keys(const uint32_t* keys, uint32_t n, uint32_t (&v)[kPer]) const {
    uint32_t present = 0;
#pragma unroll
    for (int j = 0; j < kPer; ++j) {
      const uint32_t i = j * 128 + thread_;
      v[j] = i < n ? keys[i] : 0u;
      if (i < n) present |= 1u << j;
    }
    return present;
  }

  __device__ int64_t slot_offset(int u) const {
    return ((first_token_ + u) * splits_ + split_) * static_cast<int64_t>(a_.capacity);
  }

  // Keeps exactly the top k of token u's buffer (in place) and raises its floor above the k-th.
  // The keys (at most kMaxCapacity) are read into registers once for the select.
  __device__ void compact(int u) {
    const WarpgroupSelect sel(&s_->select, barrier_, thread_);
    uint32_t* keys = a_.keys + slot_offset(u);
    int32_t* rows = a_.rows + slot_offset(u);
    const uint32_t n = s_->count[u];
    const uint32_t k = static_cast<uint32_t>(a_.k);
    uint32_t v[kPer];
    const uint32_t present = load_keys(keys, n, v);
    // Usually one digit below the common prefix already isolates a bin of at most `slack` keys:
    // every key at or above that bin's lowest value survives (at most k - 1 + slack of them, so a
    // compaction frees at least half the room above k), and that value becomes a non-strict floor
    // (keys equal to it may still enter; the select kernel keeps the lowest rows). Only when ties
    // fill the bin is the exact k-th taken, with its ties cut by row and a strict floor.
    const uint32_t slack = (static_cast<uint32_t>(a_.capacity) - k) / 2;
    const SelectResult kth = sel.select(v, present, k, slack);
    const bool by_bin = kth.equal <= slack;
    uint32_t last_row = 0x7FFFFFFFu;
    if (!by_bin) {  // exact k-th with too many ties: keep the lowest rows, the (k - above)-th largest of ~row
      const uint32_t ties = k - kth.above;
      uint32_t tied = 0;
#pragma unroll
      for (int j = 0; j < kPer; ++j) {
        if (((present >> j) & 1u) && v[j] == kth.value) {
          tied |= 1u << j;
          v[j] = ~static_cast<uint32_t>(rows[j * 128 + thread_]);
        }
      }
      last_row = ~sel.select(v, tied, ties).value;
#pragma unroll
      for (int j = 0; j < kPer; ++j) {
        if ((tied >> j) & 1u) v[j] = kth.value;
      }
    }
    const uint32_t kept = by_bin ? kth.above + kth.equal : k;
    // Survivors below position `kept` stay; each survivor at or above it moves into a hole (a
    // non-survivor below it). Holes and movers are numbered by one scan; movers read their row from
    // above `kept`, which nothing overwrites.
    uint32_t hole_bits = 0, mover_bits = 0;
#pragma unroll
    for (int j = 0; j < kPer; ++j) {
      const uint32_t i = j * 128 + thread_;
      if (!((present >> j) & 1u)) continue;
      const bool keep = by_bin ? v[j] >= kth.value
                               : v[j] > kth.value || (v[j] == kth.value && static_cast<uint32_t>(rows[i]) <= last_row);
      if (i < kept && !keep) hole_bits |= 1u << j;
      if (i >= kept && keep) mover_bits |= 1u << j;
    }
    const uint32_t packed = static_cast<uint32_t>(__popc(hole_bits)) | static_cast<uint32_t>(__popc(mover_bits)) << 16;
    const uint32_t before = sel.exclusive_sum(packed);
    uint32_t* holes = s_->select.hist;  // holes <= min(kept, n - kept) <= 2048 slots, free after the selects
    uint32_t next = before & 0xFFFFu;
#pragma unroll
    for (int j = 0; j < kPer; ++j) {
      if ((hole_bits >> j) & 1u) holes[next++] = j * 128 + thread_;
    }
    sel.sync();
    next = before >> 16;
#pragma unroll
    for (int j = 0; j < kPer; ++j) {
      if ((mover_bits >> j) & 1u) {
        const uint32_t i = j * 128 + thread_;
        const uint32_t at = holes[next++];
        keys[at] = v[j];
        rows[at] = rows[i];
      }
    }
    sel.sync();
    if (thread_ == 0) {
      s_->count[u] = kept;
      // by_bin: keys >= the bin's lowest value enter; exact: keys above the k-th (below +inf's + 1).
      s_->floor[u] = by_bin ? kth.value : kth.value + 1u;
    }
    sel.sync();
  }

  const Args& a_;  // the kernel's __grid_constant__ parameter
  Shared* s_;
  int thread_;
  uint32_t barrier_;
  int wg_token0_;
  int wg_tokens_;
  int64_t first_token_;  // of this warpgroup's block
  int64_t num_tokens_;
  int splits_;
  int split_;
  bool peers_found_ = false;
  uint32_t peers_[kMaxFinal];
};

}  // namespace fp8dsa::detail::fused_topk
