// Radix select by a group of threads (a named barrier) over values held in registers: the r-th
// largest 32-bit value among the entries that pass a mask. One warpgroup runs it inside the fused
// scorer, where the other warpgroups keep running, so it synchronises its own 128 threads only;
// the select kernel runs it over a whole CTA.
//
// The bits that every passing value shares (the common prefix of the minimum and the maximum)
// are skipped; the rest are resolved from the top in digits of up to 11 bits over one 2048-bin
// shared histogram. Candidates of one token lie in a narrow band of scores, so this takes two
// passes where a fixed 11 + 11 + 10 split takes three, with far fewer same-bin atomics.
#pragma once

#include <cstdint>

#include "hopper/warpgroup.cuh"

namespace fp8dsa::detail::fused_topk {

inline constexpr int kSelectBins = 2048;

// Shared memory of one group's select.
template <int kThreads>
struct GroupSelectShared {
  static constexpr int kWarps = kThreads / 32;
  uint32_t hist[kSelectBins];
  uint32_t warp_min[kWarps], warp_max[kWarps], warp_count[kWarps], warp_sums[kWarps];
  uint32_t found[3];  // bin, values above the bin, values in the bin
};

struct SelectResult {
  uint32_t value;  // the r-th largest value; with an early stop, the lowest value of its bin
  uint32_t above;  // passing entries above the bin (above the value when exact)
  uint32_t equal;  // passing entries in the bin (equal to the value when exact)
  bool exact;      // every bit resolved: value is the r-th largest itself
};

template <int kThreads>
class GroupSelect {
 public:
  static constexpr int kWarps = kThreads / 32;
  static constexpr int kBinsPerThread = kSelectBins / kThreads;
  static_assert(kThreads % 32 == 0 && kSelectBins % kThreads == 0, "whole warps, bins split evenly");
  using Shared = GroupSelectShared<kThreads>;

  // thread: 0 .. kThreads within the group.
  __device__ GroupSelect(Shared* shared, uint32_t barrier_id, int thread)
      : s_(shared), barrier_(barrier_id), thread_(thread) {}

  __device__ void sync() const { hopper::named_barrier_sync(barrier_, kThreads); }

  // v[j] passes when bit j of `pass` is set. Needs 1 <= r <= the number of passing entries. With
  // `enough` > 0 it stops as soon as the bin holding the r-th has at most `enough` entries: every
  // entry >= the bin's lowest value is then among the top (r - 1) + enough.
  template <int kPer>
  __device__ SelectResult select(const uint32_t (&v)[kPer], uint32_t pass, uint32_t r, uint32_t enough = 0) const {
    static_assert(kPer <= 32, "one pass bit per register");
    const int lane = thread_ % 32, warp = thread_ / 32;
    uint32_t lo = 0xFFFFFFFFu, hi = 0u;
#pragma unroll
    for (int j = 0; j < kPer; ++j) {
      if ((pass >> j) & 1u) {
        lo = min(lo, v[j]);
        hi = max(hi, v[j]);
      }
    }
    lo = __reduce_min_sync(0xFFFFFFFFu, lo);
    hi = __reduce_max_sync(0xFFFFFFFFu, hi);
    const uint32_t count = __reduce_add_sync(0xFFFFFFFFu, static_cast<uint32_t>(__popc(pass)));
    if (lane == 0) {
      s_->warp_min[warp] = lo;
      s_->warp_max[warp] = hi;
      s_->warp_count[warp] = count;
    }
    sync();
    uint32_t total = 0;
    for (int w = 0; w < kWarps; ++w) {
      lo = min(lo, s_->warp_min[w]);
      hi = max(hi, s_->warp_max[w]);
      total += s_->warp_count[w];
    }
    // Bits below `remaining` are still open; those above equal lo's.
    int remaining = lo == hi ? 0 : 32 - __clz(lo ^ hi);
    // Every thread must have read warp_min / warp_max / warp_count before a next select writes
    // them: the digit loop's first barrier sees to it, and without a digit to resolve (every
    // passing value equal) this one does (compute-sanitizer racecheck found the race on all-equal
    // rows, where the select kernel's tie select follows at once).
    if (remaining == 0) sync();
    uint32_t prefix = remaining == 32 ? 0u : (lo & ~((1u << remaining) - 1u));
    uint32_t above = 0, equal = total;
#pragma unroll 1
    while (remaining > 0) {
      const int bits = remaining < 11 ? remaining : 11;
      const int shift = remaining - bits;
      const uint32_t pmask = remaining == 32 ? 0u : ~((1u << remaining) - 1u);
      const uint32_t dmask = (1u << bits) - 1u;
#pragma unroll
      for (int j = 0; j < kBinsPerThread; ++j) s_->hist[thread_ * kBinsPerThread + j] = 0u;
      sync();
#pragma unroll
      for (int j = 0; j < kPer; ++j) {
        if (((pass >> j) & 1u) && (v[j] & pmask) == prefix) atomicAdd(&s_->hist[(v[j] >> shift) & dmask], 1u);
      }
      sync();
      find_bin(r);
      const uint32_t bin = s_->found[0], bin_above = s_->found[1];
      equal = s_->found[2];
      prefix |= bin << shift;
      above += bin_above;
      r -= bin_above;
      remaining = shift;
      if (equal <= enough) break;
    }
    return {prefix, above, equal, remaining == 0};
  }

  // Exclusive prefix sum of x over the group's threads (in thread order). Ends synchronised.
  __device__ uint32_t exclusive_sum(uint32_t x) const {
    const uint32_t run = exclusive_sum_unsynced(x);
    sync();  // warp_sums is free again
    return run;
  }

  // The bin (descending) of the shared histogram holding the r-th largest: found = {bin, above,
  // count} with above < r <= above + count. Ends synchronised.
  __device__ void find_bin(uint32_t r) const {
    uint32_t h[kBinsPerThread];
    uint32_t sum = 0;
#pragma unroll
    for (int j = 0; j < kBinsPerThread; ++j) {
      h[j] = s_->hist[kSelectBins - 1 - (thread_ * kBinsPerThread + j)];
      sum += h[j];
    }
    uint32_t run = exclusive_sum_unsynced(sum);
#pragma unroll
    for (int j = 0; j < kBinsPerThread; ++j) {
      if (run < r && r <= run + h[j]) {
        s_->found[0] = kSelectBins - 1 - (thread_ * kBinsPerThread + j);
        s_->found[1] = run;
        s_->found[2] = h[j];
      }
      run += h[j];
    }
    sync();
  }

 private:
  // exclusive_sum without the closing barrier: warp_sums stays in use until the caller's next one.
  __device__ uint32_t exclusive_sum_unsynced(uint32_t x) const {
    const int lane = thread_ % 32, warp = thread_ / 32;
    uint32_t inclusive = x;
#pragma unroll
    for (int d = 1; d < 32; d *= 2) {
      const uint32_t up = __shfl_up_sync(0xFFFFFFFFu, inclusive, d);
      if (lane >= d) inclusive += up;
    }
    if (lane == 31) s_->warp_sums[warp] = inclusive;
    sync();
    uint32_t run = inclusive - x;
    for (int w = 0; w < warp; ++w) run += s_->warp_sums[w];
    return run;
  }

  Shared* s_;
  uint32_t barrier_;
  int thread_;
};

using WarpgroupSelect = GroupSelect<128>;

}  // namespace fp8dsa::detail::fused_topk
