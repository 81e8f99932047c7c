// The fused path's last step: per token, the exact top k of the candidates its key splits kept
// (candidate_output.cuh), in the (score key descending, key row ascending) order, written as
// topk() writes them: absolute key rows (or their page-table rows), -1 past the selected count,
// ascending rows or (sorted) descending scores. One CTA per token.
//
// Up to kHeld candidates (two splits at k = 2048) are held in registers and selected there
// (group_select.cuh); more are selected with global passes. The survivors are then sorted in
// shared memory: as bits of a bitmap over the row range read back in order (ascending rows, the
// range within kBitmapBits), by row offset over only the bits the range needs (a longer range), or
// (sorted) by (score key, ~row) over 64 bits.
#include <cstdint>

#include <cub/block/block_radix_sort.cuh>

#include "core/cuda_check.h"
#include "core/launch.cuh"
#include "fused_topk/candidate_layout.h"
#include "fused_topk/config.h"
#include "fused_topk/group_select.cuh"
#include "fused_topk/launch.h"
#include "topk/radix_select.cuh"

namespace fp8dsa::detail::fused_topk {
namespace {

constexpr int kThreads = kSelectThreads;  // config.h: the select's shape
constexpr int kItems = kSelectItems;      // 4 sorted slots per thread
constexpr int kPer = kSelectPer;          // candidates held per thread
constexpr uint32_t kHeld = kSelectHeld;   // 8192
constexpr uint32_t kBarrier = 1;
constexpr uint32_t kBitmapWords = detail::topk::kMaxK * 2;  // the picked[] array seen as 32-bit words
constexpr uint32_t kBitmapBits = kBitmapWords * 32;      // 131072 rows
using Select = GroupSelect<kThreads>;

struct SelectArgs {
  TopkParams out;  // resolved: num_rows, num_keys, ks, ke, k, indices, indices_stride, sorted, page table
  const uint32_t* counts;
  const uint2* entries;  // (score key, key row)
  int parts;     // buffer parts per token: key splits x kBufferParts (candidate_layout.h)
  int capacity;  // of a part
};

struct Smem {
  typename Select::Shared select;
  union {
    typename cub::BlockRadixSort<uint32_t, kThreads, kItems>::TempStorage sort32;
    typename cub::BlockRadixSort<uint64_t, kThreads, kItems>::TempStorage sort64;
  } sort;
  uint64_t picked[detail::topk::kMaxK];
  uint32_t offset[kMaxBufferParts + 1];  // candidate f of the row lies in part s: offset[s] <= f < offset[s + 1]
};

// Where the row's f-th candidate lives (parts concatenated), searching the parts from `part`
// on. The loops over more than kHeld candidates (up to 64 parts' worth) keep part as a cursor,
// only moved forward, as each thread visits its f in ascending order from part 0: a step per
// part, not a search per candidate (T = 64, N = 64K: 0.44 -> 0.30 ms).
__device__ __forceinline__ int64_t candidate_at(const SelectArgs& a, int64_t row, const Smem& s, uint32_t f,
                                                int& part) {
  while (part + 1 < a.parts && f >= s.offset[part + 1]) ++part;
  return (row * a.parts + part) * static_cast<int64_t>(a.capacity) + (f - s.offset[part]);
}

// A binary search over the parts, for the register-held paths (a cursor carried through their
// unrolled loops cost them 4% at T = 4096): the last part starting at or before f (an empty part
// starts where the next one does, so that is the part holding f).
__device__ __forceinline__ int64_t candidate_at(const SelectArgs& a, int64_t row, const Smem& s, uint32_t f) {
  int lo = 0, hi = a.parts - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (s.offset[mid] <= f) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  return (row * a.parts + lo) * static_cast<int64_t>(a.capacity) + (f - s.offset[lo]);
}

// The k-th candidate over global memory when the row has more than kHeld: three fixed levels
// (topk/config.h), each a pass over the candidates and a parallel search of the group's
// histogram. Returns (key, last row kept among its ties).
static_assert(kSelectBins == detail::topk::kNumBins, "the fixed levels' digits index the group's histogram");
__device__ void select_from_global(const SelectArgs& a, int64_t row, Smem& s, uint32_t total, uint32_t k,
                                   uint32_t* kth_key, uint32_t* last_row) {
  uint32_t* hist = s.select.hist;
  const Select sel(&s.select, kBarrier, threadIdx.x);
  for (int i = threadIdx.x; i < detail::topk::kNumBins; i += kThreads) hist[i] = 0u;
  sel.sync();
  uint32_t r = k, prefix = 0, equal = 0;
  for (int pass = 0; pass < 2; ++pass) {  // 0: the key; 1: among its ties, the row (as ~row)
    uint32_t vprefix = 0;
    for (int level = 0; level < 3; ++level) {
      const uint32_t pmask = detail::topk::level_prefix_mask(level);
      const int shift = detail::topk::level_shift(level);
      const uint32_t dmask = detail::topk::level_digit_mask(level);
      int part = 0;
#pragma unroll 4
      for (uint32_t f = threadIdx.x; f < total; f += kThreads) {
        const int64_t at = candidate_at(a, row, s, f, part);
        const uint2 e = a.entries[at];
        if (pass == 1 && e.x != prefix) continue;
        const uint32_t v = pass == 0 ? e.x : ~e.y;
        if ((v & pmask) == vprefix) atomicAdd(&hist[(v >> shift) & dmask], 1u);
      }
      sel.sync();
      sel.find_bin(r);  // the bin holding the r-th largest
      const uint32_t bin = s.select.found[0], bin_above = s.select.found[1], bin_count = s.select.found[2];
      for (int i = threadIdx.x; i < detail::topk::kNumBins; i += kThreads) hist[i] = 0u;
      vprefix |= bin << shift;
      r -= bin_above;
      equal = bin_count;
      sel.sync();
    }
    if (pass == 0) {
      prefix = vprefix;
      *kth_key = prefix;
      *last_row = 0x7FFFFFFFu;
      if (equal <= r) return;  // every tie is kept
    } else {
      *last_row = ~vprefix;
    }
  }
}

__global__ void __launch_bounds__(kThreads) select_candidates_kernel(const SelectArgs a) {
  __shared__ Smem s;
  __shared__ uint32_t num_picked;
  const Select sel(&s.select, kBarrier, threadIdx.x);
  const int64_t row = blockIdx.x;
  if (threadIdx.x < 32) {  // the parts' offsets: lane l sums parts 2l and 2l + 1, one scan of the warp
    static_assert(kMaxBufferParts <= 64, "two parts a lane");
    const int lane = threadIdx.x;
    const uint32_t* counts = a.counts + row * a.parts;
    const uint32_t c0 = 2 * lane < a.parts ? counts[2 * lane] : 0u;
    const uint32_t c1 = 2 * lane + 1 < a.parts ? counts[2 * lane + 1] : 0u;
    uint32_t run = c0 + c1;
#pragma unroll
    for (int d = 1; d < 32; d *= 2) {
      const uint32_t up = __shfl_up_sync(0xFFFFFFFFu, run, d);
      if (lane >= d) run += up;
    }
    const uint32_t before = run - c0 - c1;
    if (2 * lane < a.parts) s.offset[2 * lane] = before;
    if (2 * lane + 1 < a.parts) s.offset[2 * lane + 1] = before + c0;
    if (lane == 31) s.offset[a.parts] = run;
    if (lane == 0) num_picked = 0u;
  }
  sel.sync();
  const uint32_t total = s.offset[a.parts];
  const uint32_t k = static_cast<uint32_t>(a.out.k);

  // The k-th candidate (when there are more than k): its key, then the last row kept among its ties.
  uint32_t kth_key = 0u, last_row = 0x7FFFFFFFu;
  uint32_t v[kPer];
  uint32_t present = 0;
  const bool held = total <= kHeld;
  if (held) {
#pragma unroll
    for (int j = 0; j < kPer; ++j) {
      const uint32_t f = j * kThreads + threadIdx.x;
      v[j] = f < total ? a.entries[candidate_at(a, row, s, f)].x : 0u;
      if (f < total) present |= 1u << j;
    }
  }
  if (total > k) {
    if (held) {
      const SelectResult kth = sel.select(v, present, k);
      kth_key = kth.value;
      const uint32_t ties = k - kth.above;
      if (kth.equal > ties) {  // keep the lowest rows among the keys equal to the k-th
        uint32_t tied = 0, w[kPer];
#pragma unroll
        for (int j = 0; j < kPer; ++j) {
          w[j] = 0u;
          if (((present >> j) & 1u) && v[j] == kth_key) {
            tied |= 1u << j;
            w[j] = ~a.entries[candidate_at(a, row, s, j * kThreads + threadIdx.x)].y;
          }
        }
        last_row = ~sel.select(w, tied, ties).value;
      }
    } else {
      select_from_global(a, row, s, total, k, &kth_key, &last_row);
    }
  }

  // The survivors: bits of a bitmap over the row range (ascending rows, the range within
  // kBitmapBits), else sort keys: the row offset (ascending rows) or (score key, ~row) descending.
  const bool by_score = a.out.sorted;
  const int64_t row_lo = detail::topk::clamp_bound(a.out.ks[row], a.out.num_keys);
  const int64_t row_hi = detail::topk::clamp_bound(a.out.ke[row], a.out.num_keys);
  const uint32_t range = row_hi > row_lo ? static_cast<uint32_t>(row_hi - row_lo) : 1u;
  const bool bitmap = !by_score && range <= kBitmapBits;
  uint32_t* words = reinterpret_cast<uint32_t*>(s.picked);
  const uint32_t num_words = (range + 31) / 32;
  if (bitmap) {
    for (uint32_t i = threadIdx.x; i < num_words; i += kThreads) words[i] = 0u;
    sel.sync();
  }
  // row_of(): the candidate's key row (read from its entry only where needed).
  auto pick = [&](uint32_t key, auto row_of) {
    const bool all = total <= k;
    if (!all && key < kth_key) return;
    const uint32_t key_row = row_of();
    if (!all && key == kth_key && last_row != 0x7FFFFFFFu && key_row > last_row) return;  // a tie past the cut
    if (bitmap) {  // every candidate row is distinct: one bit each
      const uint32_t offset = key_row - static_cast<uint32_t>(row_lo);
      atomicOr(&words[offset / 32], 1u << (offset % 32));
      return;
    }
    const uint32_t slot = atomicAdd(&num_picked, 1u);
    s.picked[slot] = by_score ? (uint64_t{key} << 32 | ~key_row) : key_row - static_cast<uint32_t>(row_lo);
  };
  if (held) {
#pragma unroll
    for (int j = 0; j < kPer; ++j) {
      if ((present >> j) & 1u) {
        const int64_t at = candidate_at(a, row, s, j * kThreads + threadIdx.x);
        pick(v[j], [&] { return a.entries[at].y; });
      }
    }
  } else {
    int part = 0;
    for (uint32_t f = threadIdx.x; f < total; f += kThreads) {
      const uint2 entry = a.entries[candidate_at(a, row, s, f, part)];  // one 8-byte load
      pick(entry.x, [&] { return entry.y; });
    }
  }
  sel.sync();
  int32_t* out = a.out.indices + row * a.out.indices_stride;
  const detail::topk::RowPageMap map(a.out, row);
  if (bitmap) {
    // Thread t reads the range's words [t W, t W + W), W = ceil(words / kThreads) (every thread a
    // share however short the range): its rows are ranks [before, before + its count), ascending.
    const uint32_t per = (num_words + kThreads - 1) / kThreads;
    const uint32_t first = min(threadIdx.x * per, num_words), last = min(first + per, num_words);
    uint32_t mine = 0;
    for (uint32_t i = first; i < last; ++i) mine += __popc(words[i]);
    uint32_t rank = sel.exclusive_sum(mine);
    for (uint32_t i = first; i < last; ++i) {
      uint32_t w = words[i];
      while (w != 0u) {
        const int bit = __ffs(w) - 1;
        w &= w - 1u;
        out[rank++] = map.map(static_cast<int32_t>(row_lo + int64_t{i} * 32 + bit));
      }
    }
    // Ranks past the survivors (a row with fewer than k valid keys) are padding.
    const uint32_t selected = total < k ? total : k;
    for (uint32_t r = selected + threadIdx.x; r < k; r += kThreads) out[r] = -1;
    return;
  }
  const uint32_t selected = num_picked;
  if (by_score) {
    uint64_t item[kItems];
#pragma unroll
    for (int j = 0; j < kItems; ++j) {
      const uint32_t i = threadIdx.x * kItems + j;
      item[j] = i < selected ? s.picked[i] : 0u;  // 0 is below every survivor's (key, ~row)
    }
    cub::BlockRadixSort<uint64_t, kThreads, kItems>(s.sort.sort64).SortDescending(item);
#pragma unroll
    for (int j = 0; j < kItems; ++j) {
      const uint32_t rank = threadIdx.x * kItems + j;
      if (rank < k) {
        const int32_t key_row = static_cast<int32_t>(~static_cast<uint32_t>(item[j]));
        out[rank] = rank < selected ? map.map(key_row) : -1;
      }
    }
    return;
  }
  // Ascending rows over a long range: sort the offsets from the row start over the bits the range
  // needs; the padding 2^bits - 1 lies above every offset.
  const int bits = 32 - __clz(range);
  uint32_t item[kItems];
#pragma unroll
  for (int j = 0; j < kItems; ++j) {
    const uint32_t i = threadIdx.x * kItems + j;
    item[j] = i < selected ? static_cast<uint32_t>(s.picked[i]) : (1u << bits) - 1u;
  }
  cub::BlockRadixSort<uint32_t, kThreads, kItems>(s.sort.sort32).Sort(item, 0, bits);
#pragma unroll
  for (int j = 0; j < kItems; ++j) {
    const uint32_t rank = threadIdx.x * kItems + j;
    if (rank < k) {
      out[rank] = rank < selected ? map.map(static_cast<int32_t>(row_lo + item[j])) : -1;
    }
  }
}

}  // namespace

Status launch_select_candidates(const TopkParams& out, const CandidateBuffers& buffers) {
  if (out.num_rows == 0) return Status::ok();
  if (out.num_rows > INT32_MAX) return invalid_argument("fused_topk: too many tokens for one grid");
  SelectArgs a{out, buffers.counts, buffers.entries, buffers.splits * kBufferParts, buffers.capacity / kBufferParts};
  return launch_kernel("select_candidates_kernel", select_candidates_kernel, static_cast<unsigned>(out.num_rows),
                       kThreads, 0, out.stream, a);
}

}  // namespace fp8dsa::detail::fused_topk
