// The fused scorer's candidate buffers: what a consumer warpgroup keeps per token of its block,
// the cells that can still be among that token's top k, and the operations on them (the sample's
// floors, compaction, the final counts). The output policy that fills them from the scorer's
// tiles is candidate_output.cuh.
//
// Order: a candidate ranks by (score key descending, key row ascending), a total order, so "the
// top k" is one exact set and reruns are bitwise identical. A warpgroup scores its key tiles in
// ascending key order, so a later key never beats an earlier one of equal score.
//
// Per (token, split) the workspace holds `capacity` slots in four parts, one per warp of the
// warpgroup (candidate_layout.h). Until the first compaction every valid cell enters. When a part
// may not have room for another tile, the warpgroup compacts the buffer: a radix select finds the
// bin of the k-th candidate, every candidate at or above the bin's lowest value survives, and from then on a cell enters only if its key reaches
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
// compacts once or not at all. The floor is only an estimate: if fewer than k cells reached it, keys below it may belong to the
// top k, so the (token, split) is marked (kRedoBit in its count) and a second launch with
// `redo` scores exactly the marked ones again with no floor (fused_topk.cpp launches it whenever
// the first one sampled; it leaves every other token as it is). Reruns stay bitwise identical:
// the floor is a function of the sample's values.
#pragma once

#include <cstdint>

#include <cuda.h>

#include "fused_topk/candidate_layout.h"
#include "fused_topk/group_select.cuh"
#include "hopper/warpgroup.cuh"
#include "indexer/config.h"
#include "indexer/scorers.h"
#include "topk/radix_select.cuh"

namespace fp8dsa::detail::fused_topk {

// A (token, split) whose prefloor let fewer than k cells in: rescored by the redo launch. Set on
// the count of its first part.
inline constexpr uint32_t kRedoBit = 0x80000000u;
// Fewer sample cells than this give no floor (the estimate would be noise).
inline constexpr uint32_t kMinSampleCells = 32;

struct CandidateArgs {
  uint32_t* counts = nullptr;  // [T * splits * kBufferParts]
  uint2* entries = nullptr;    // [T * splits * capacity]: (score key, key row)
  int capacity = 0;
  int k = 0;
  int sample_stride = 0;       // 0: no sample pass (sample_stride() in candidate_layout.h)
  int sample_target = 0;       // cells a sampled floor aims to let in (per token and split)
  bool redo = false;           // score only the (token, split)s marked with kRedoBit, with no floor
  CUtensorMap sample_map{};    // every sample_stride-th row of K (prepare() builds it)
};
static_assert(sizeof(uint2) == kCandidateBytes, "a device entry is the layout's candidate (candidate_layout.h)");

// One consumer warpgroup's shared state.
struct CandidateShared {
  static constexpr int kMaxTokens = 32;  // tokens of one warpgroup's block (H = 4: 128 / 4)
  WarpgroupSelect::Shared select;
  alignas(16) uint32_t part_count[kMaxTokens][kBufferParts];  // the warps' counts at a sync point (one uint4 a token)
  uint32_t floor[kMaxTokens];  // a cell enters when its key >= floor
  uint32_t prefloor_mask;      // tokens whose floor came from the sample
  uint32_t redo_mask;          // redo launch: the tokens it scores again
  // What only the sync points, the sample's end and finish() use, kept here rather than in the
  // registers of the tile loop.
  int64_t first_token;  // of this warpgroup's block
  int64_t num_tokens;
  int splits;
  int split;
  int wg_token0;  // this warpgroup's first token in the CTA's block
  int wg_tokens;
};

// One consumer warpgroup's view of its tokens' buffers and of its CandidateShared: what a sync
// point, the sample's end, a compaction and the final counts need. Kept in shared memory or
// recomputed from threadIdx, so that the tile loop's registers hold none of it.
class WarpgroupBuffers {
 public:
  __device__ WarpgroupBuffers(const CandidateArgs& a, uint8_t* smem) : a_(a), s_(shared_space(smem)) {}

  // The warpgroup's shared state at the start (every consumer thread calls it; the caller syncs).
  __device__ void init_shared(const detail::indexer::ScorerArgs& args, int wg_token0, int wg_tokens,
                              int64_t first_token, int split) const {
    const int lane = threadIdx.x % 32;
    const int64_t wg_first = first_token + wg_token0;
    const int thread = this->thread();
    if (thread < wg_tokens) s_->floor[thread] = 0u;  // everything enters until the first compaction
    if (thread < wg_tokens * kBufferParts) s_->part_count[thread / kBufferParts][thread % kBufferParts] = 0u;
    if (thread == 0) {
      s_->first_token = wg_first;
      s_->num_tokens = args.num_tokens;
      s_->splits = args.key_splits;
      s_->split = split;
      s_->wg_token0 = wg_token0;
      s_->wg_tokens = wg_tokens;
      s_->prefloor_mask = 0u;
    }
    if (thread < 32) {  // wg_tokens <= 32
      const int64_t t = wg_first + thread;
      const bool redo = a_.redo && thread < wg_tokens && t < args.num_tokens &&
                        (a_.counts[buffer_slot(t, args.key_splits, split) * kBufferParts] & kRedoBit) != 0u;
      const uint32_t mask = __ballot_sync(0xFFFFFFFFu, redo);
      if (lane == 0) s_->redo_mask = mask;
    }
  }

  // Each token's floor from its sample (the buffers hold the sample's cells, counted in
  // part_count): bounds are the CTA's tokens' [ks, ke), the split's keys [key_begin, key_end).
  // Ends synchronised; the caller empties the buffers.
  __device__ void sample_floors(const int2* bounds, int key_begin, int key_end) const {
    const WarpgroupSelect sel(&s_->select, barrier(), thread());
    const int wg_tokens = s_->wg_tokens, wg_token0 = s_->wg_token0;
    for (int u = 0; u < wg_tokens; ++u) {
      const int2 b = bounds[wg_token0 + u];
      const int n = max(0, min(b.y, key_end) - max(b.x, key_begin));  // the token's keys in the split
      uint32_t c[kBufferParts];
      const uint32_t m = read_counts(u, c);
      uint32_t floor = 0u;
      if (n > a_.capacity - kTileKeys && m >= kMinSampleCells) {
        const uint64_t want = (static_cast<uint64_t>(a_.sample_target) * m + n - 1) / n;
        const uint32_t r = want < m ? static_cast<uint32_t>(want) : m;
        uint32_t v[kPer];
        const uint32_t present = load_keys(a_.entries + token_offset(u), c, v);
        floor = sel.select(v, present, r).value;
      }
      if (thread() == 0) {
        s_->floor[u] = floor;
        if (floor != 0u) s_->prefloor_mask |= 1u << u;
      }
    }
    sync();
  }

  // The final counts into the workspace (part_count complete and synchronised), each token's
  // marked for the redo launch where its sampled floor let fewer than k cells in.
  __device__ void write_counts() const {
    const int thread = this->thread();
    const int64_t t = s_->first_token + thread;
    if (thread < s_->wg_tokens && t < s_->num_tokens) {
      const uint32_t bit = 1u << thread;
      if (!a_.redo || (s_->redo_mask & bit) != 0u) {
        uint32_t c[kBufferParts];
        const uint32_t total = read_counts(thread, c);
        // A sampled floor that let fewer than k in (the token has more keys: the floor was only
        // set with more than capacity - 64 of them) may have turned away some of its top k.
        if ((s_->prefloor_mask & bit) != 0u && total < static_cast<uint32_t>(a_.k)) c[0] |= kRedoBit;
        uint32_t* out = a_.counts + buffer_slot(t, s_->splits, s_->split) * kBufferParts;
#pragma unroll
        for (int p = 0; p < kBufferParts; ++p) out[p] = c[p];
      }
    }
  }

  // Keeps exactly the top k of token u's buffer (in place, spread evenly over its parts) and
  // raises its floor above the k-th. c: its part counts, rewritten. The keys (at most
  // kMaxCapacity) are read into registers once for the select.
  __device__ void compact(int u, const uint32_t (&c)[kBufferParts]) const {
    const int thread = this->thread();
    const WarpgroupSelect sel(&s_->select, barrier(), thread);
    uint2* entries = a_.entries + token_offset(u);
    const uint32_t k = static_cast<uint32_t>(a_.k);
    uint32_t v[kPer];
    const uint32_t present = load_keys(entries, c, v);
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
          v[j] = ~entries[j * 128 + thread].y;
        }
      }
      last_row = ~sel.select(v, tied, ties).value;
#pragma unroll
      for (int j = 0; j < kPer; ++j) {
        if ((tied >> j) & 1u) v[j] = kth.value;
      }
    }
    const uint32_t kept = by_bin ? kth.above + kth.equal : k;
    // The survivors end as the first kept / 4 (or one more) entries of each part, the targets. A
    // survivor already on a target stays; each other survivor moves into a hole (a target
    // position without a survivor: there are as many of each). Holes and movers are numbered by
    // one scan.
    uint32_t target_count[kBufferParts];
#pragma unroll
    for (int p = 0; p < kBufferParts; ++p) target_count[p] = kept / kBufferParts + (static_cast<uint32_t>(p) < kept % kBufferParts);
    uint32_t hole_bits = 0, mover_bits = 0;
#pragma unroll
    for (int j = 0; j < kPer; ++j) {
      const uint32_t i = j * 128 + thread;
      const bool target = in_part(i, target_count);
      bool keep = false;
      if ((present >> j) & 1u) {
        keep = by_bin ? v[j] >= kth.value
                      : v[j] > kth.value || (v[j] == kth.value && entries[i].y <= last_row);
      }
      if (target && !keep) hole_bits |= 1u << j;
      if (!target && keep) mover_bits |= 1u << j;
    }
    const uint32_t packed = static_cast<uint32_t>(__popc(hole_bits)) | static_cast<uint32_t>(__popc(mover_bits)) << 16;
    const uint32_t before = sel.exclusive_sum(packed);
    uint32_t* holes = s_->select.hist;  // holes <= min(kept, capacity - kept) <= 2048, free after the selects
    uint32_t next = before & 0xFFFFu;
#pragma unroll
    for (int j = 0; j < kPer; ++j) {
      if ((hole_bits >> j) & 1u) holes[next++] = j * 128 + thread;
    }
    sel.sync();  // every hole listed
    next = before >> 16;
#pragma unroll
    for (int j = 0; j < kPer; ++j) {
      if ((mover_bits >> j) & 1u) {
        // a mover's place is never a target: nothing overwrites it
        entries[holes[next++]] = make_uint2(v[j], entries[j * 128 + thread].y);
      }
    }
    sel.sync();
    if (thread < kBufferParts) s_->part_count[u][thread] = target_count[thread];
    if (thread == 0) {
      // by_bin: keys >= the bin's lowest value enter; exact: keys above the k-th (below +inf's + 1).
      s_->floor[u] = by_bin ? kth.value : kth.value + 1u;
    }
    sel.sync();
  }

  // Token u's part counts; returns their sum.
  __device__ uint32_t read_counts(int u, uint32_t (&c)[kBufferParts]) const {
    static_assert(kBufferParts == 4, "one 16-byte load");
    const uint4 q = *reinterpret_cast<const uint4*>(s_->part_count[u]);
    c[0] = q.x;
    c[1] = q.y;
    c[2] = q.z;
    c[3] = q.w;
    return q.x + q.y + q.z + q.w;
  }

  __device__ static int thread() { return threadIdx.x % 128; }
  __device__ static int warp() { return (threadIdx.x / 32) % 4; }
  __device__ static uint32_t barrier() { return kBarrierBase + threadIdx.x / 128; }
  __device__ static void sync() { hopper::named_barrier_sync(barrier(), 128); }
  __device__ int part_capacity() const { return a_.capacity / kBufferParts; }
  // Where token u's buffer starts among the entries.
  __device__ int64_t token_offset(int u) const {
    return buffer_slot(s_->first_token + u, s_->splits, s_->split) * static_cast<int64_t>(a_.capacity);
  }

  static constexpr uint32_t kBarrierBase = detail::indexer::kOutputWarpgroup;  // indexer/config.h

 protected:
  // The same address, re-derived from the dynamic shared array: the kernel's aligned pointer went
  // through an integer, so without this every access would compile to a generic instruction
  // instead of LDS / STS.
  __device__ static CandidateShared* shared_space(uint8_t* smem) {
    extern __shared__ uint8_t candidate_buffers_smem[];
    const uint32_t offset = hopper::smem_address(smem) - hopper::smem_address(candidate_buffers_smem);
    return reinterpret_cast<CandidateShared*>(candidate_buffers_smem + offset);
  }

  // A buffer's keys into registers: v[j] is entry i = j * 128 + thread of the (token, split) slot,
  // present when it lies inside its part's count; bit j of the result says v[j] holds one (the
  // selects' pass mask).
  static constexpr int kPer = kMaxCapacity / 128;  // 32 key registers per thread
  static_assert(kMaxCapacity % 128 == 0 && kPer <= 32, "one pass bit per register");
  // Entry i lies in part p = i / part_capacity at position i - p * part_capacity (compares, not a
  // division: these run 32 times a thread per compaction).
  __device__ bool in_part(uint32_t i, const uint32_t (&c)[kBufferParts]) const {
    const uint32_t part_cap = static_cast<uint32_t>(part_capacity());
    uint32_t n = c[0], start = 0;
#pragma unroll
    for (int q = 1; q < kBufferParts; ++q) {
      const bool past = i >= q * part_cap;
      n = past ? c[q] : n;
      start = past ? q * part_cap : start;
    }
    return i < kBufferParts * part_cap && i - start < n;
  }
  __device__ uint32_t load_keys(const uint2* entries, const uint32_t (&c)[kBufferParts], uint32_t (&v)[kPer]) const {
    uint32_t present = 0;
    const int thread = this->thread();
#pragma unroll
    for (int j = 0; j < kPer; ++j) {
      const uint32_t i = j * 128 + thread;
      const bool ok = in_part(i, c);
      v[j] = ok ? entries[i].x : 0u;
      if (ok) present |= 1u << j;
    }
    return present;
  }

  const CandidateArgs& a_;  // the kernel's __grid_constant__ parameter
  CandidateShared* s_;
};

}  // namespace fp8dsa::detail::fused_topk
