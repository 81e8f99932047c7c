// The one-CTA-per-row select shared by the row kernel and the filter kernel: the shared-memory plan,
// the exact three-level radix select over a whole row (pass 1 from global, optionally caching the
// row in shared memory; the threshold bucket refined from a candidate list or by re-scanning), and
// the write of the k selected pairs (optionally sorted) through the page table.
#pragma once

#include <cstddef>
#include <cstdint>

#include <cub/block/block_radix_sort.cuh>
#include <cub/block/block_scan.cuh>
#include <cuda_runtime.h>

#include "topk/config.h"
#include "topk/radix_select.cuh"

namespace fp8dsa::detail::topk {

template <int kThreads, int kCandCap = kCandidateCap>
struct RowSmem {
  using Scan = cub::BlockScan<uint32_t, kThreads>;
  static constexpr int kSortItems = kMaxK / kThreads;
  using Sort = cub::BlockRadixSort<uint32_t, kThreads, kSortItems, int32_t>;
  static_assert(kMaxK % kThreads == 0, "the sort holds kMaxK items in a blocked arrangement");

  // The radix-select state is dead once the k pairs are in out_*: the sort reuses it.
  union {
    struct {
      uint32_t hist[kNumBins];
      alignas(16) uint32_t cand_key[kCandCap];
      int32_t cand_idx[kCandCap];
    } select;
    typename Sort::TempStorage sort;
  } u;
  typename Scan::TempStorage scan;
  alignas(16) uint32_t out_key[kMaxK];
  alignas(16) int32_t out_idx[kMaxK];  // offset from the row's (clamped) ks
  Threshold slots[3];
};

template <int kThreads, int kCandCap = kCandidateCap>
constexpr size_t row_smem_head_bytes() {
  return (sizeof(RowSmem<kThreads, kCandCap>) + 15) / 16 * 16;
}

// A row of at most k keys: every key is selected, in row order (keys are only needed to sort).
template <int kThreads, int kCandCap>
__device__ __forceinline__ void stage_whole_row(const TopkParams& p, const float* first, uint32_t len,
                                                RowSmem<kThreads, kCandCap>& s) {
  for (uint32_t i = threadIdx.x; i < len; i += kThreads) {
    s.out_idx[i] = static_cast<int32_t>(i);
    if (p.sorted) s.out_key[i] = order_key(first[i]);
  }
}

// Leaves the row's k best (key, offset) pairs in s.out_key / s.out_idx (slots [0, k)).
template <int kThreads, int kCandCap>
__device__ __forceinline__ void select_row(const TopkParams& p, const float* first, uint32_t len,
                                           RowSmem<kThreads, kCandCap>& s, uint4* cache,
                                           uint32_t cache_cap_vecs) {
  const uint32_t k = static_cast<uint32_t>(p.k);
  uint32_t* hist = s.u.select.hist;
  uint32_t* cand_key = s.u.select.cand_key;
  int32_t* cand_idx = s.u.select.cand_idx;
  for (int b = threadIdx.x; b < kNumBins; b += kThreads) hist[b] = 0u;
  __syncthreads();

  RowKeys src = RowKeys::make(first, len);
  const uint32_t cached = min(src.nvec, cache_cap_vecs);
  histogram_pass<kThreads, true>(src, 0, src.nvec, 0u, 0, hist, cache, cached);
  __syncthreads();
  src.cache = cache;
  src.cache_vecs = cached;

  const Threshold t0 = find_threshold_bin<kThreads, true>(hist, k, s.scan, &s.slots[0]);
  const uint32_t b0 = t0.bin;
  const bool collect = t0.count <= static_cast<uint32_t>(kCandCap);
  ordered_pass<kThreads>(
      src, 0, src.nvec, 0, 0, s.scan,
      [b0](uint32_t key) {
        const uint32_t d = key >> level_shift(0);
        return d > b0 ? 1 : (d == b0 ? 2 : 0);
      },
      [&](int cls, uint32_t key, uint32_t elem, uint32_t rank) {
        if (cls == 1) {
          s.out_key[rank] = key;
          s.out_idx[rank] = static_cast<int32_t>(elem);
        } else {
          if (collect) {
            cand_key[rank] = key;
            cand_idx[rank] = static_cast<int32_t>(elem);
          }
          atomicAdd(&hist[(key >> level_shift(1)) & level_digit_mask(1)], 1u);
        }
      });

  const uint32_t k0 = k - t0.above;
  const Threshold t1 = find_threshold_bin<kThreads, true>(hist, k0, s.scan, &s.slots[1]);
  const uint32_t prefix2 = (b0 << level_shift(0)) | (t1.bin << level_shift(1));
  const uint32_t k1 = k0 - t1.above;
  const CandidateKeys cands{cand_key, cand_idx, t0.count, (t0.count + 3u) / 4u};
  if (collect) {
    histogram_pass<kThreads, false>(cands, 0, cands.nvec, prefix2, 2, hist);
  } else {
    histogram_pass<kThreads, false>(src, 0, src.nvec, prefix2, 2, hist);
  }
  __syncthreads();
  const Threshold t2 = find_threshold_bin<kThreads, false>(hist, k1, s.scan, &s.slots[2]);

  // threshold = the k-th largest key; `ties` keys equal to it complete the k after the keys above
  // it (slots [t0.above, k - ties) for those of bucket b0, [k - ties, k) for the ties).
  const uint32_t threshold = prefix2 | t2.bin;
  const uint32_t ties = k1 - t2.above;
  const uint32_t tie_base = k - ties;
  auto classify = [b0, threshold](uint32_t key) {
    return key == threshold ? 2 : ((key >> level_shift(0)) == b0 && key > threshold ? 1 : 0);
  };
  auto emit = [&](int cls, uint32_t key, uint32_t elem, uint32_t rank) {
    if (cls == 2) {
      if (rank >= ties) return;
      rank += tie_base;
    }
    s.out_key[rank] = key;
    s.out_idx[rank] = static_cast<int32_t>(elem);
  };
  if (collect) {
    ordered_pass<kThreads>(cands, 0, cands.nvec, t0.above, 0, s.scan, classify, emit);
  } else {
    ordered_pass<kThreads>(src, 0, src.nvec, t0.above, 0, s.scan, classify, emit);
  }
}

// Writes slots [0, k) of the row: the `count` selected pairs by descending key, then -1, every
// index mapped through the page table when there is one.
template <int kThreads, int kCandCap>
__device__ __forceinline__ void write_sorted_row(const TopkParams& p, int64_t row, int64_t ks, uint32_t count,
                                                 RowSmem<kThreads, kCandCap>& s) {
  using Smem = RowSmem<kThreads, kCandCap>;
  constexpr int kItems = Smem::kSortItems;
  int32_t* out = p.indices + row * p.indices_stride;
  const int k = p.k;
  const RowPageMap map(p, row);
  uint32_t key[kItems];
  int32_t idx[kItems];
#pragma unroll
  for (int j = 0; j < kItems; ++j) {
    const uint32_t slot = threadIdx.x * kItems + j;
    const bool valid = slot < count;
    // +1 keeps every real key (NaN's 0 included; +inf's 0xFF800000 cannot overflow) above the
    // padding's 0.
    key[j] = valid ? s.out_key[slot] + 1u : 0u;
    idx[j] = valid ? s.out_idx[slot] : -1;
  }
  typename Smem::Sort(s.u.sort).SortDescending(key, idx);
#pragma unroll
  for (int j = 0; j < kItems; ++j) {
    const int slot = threadIdx.x * kItems + j;
    if (slot < k) out[slot] = idx[j] < 0 ? -1 : map.map(static_cast<int32_t>(ks + idx[j]));
  }
}

// The same in slot order.
template <int kThreads, int kCandCap>
__device__ __forceinline__ void write_unsorted_row(const TopkParams& p, int64_t row, int64_t ks, uint32_t count,
                                                   RowSmem<kThreads, kCandCap>& s) {
  int32_t* out = p.indices + row * p.indices_stride;
  const int k = p.k;
  if (k % 4 == 0 && reinterpret_cast<uintptr_t>(out) % 16 == 0) {
    // Four slots a thread, 16-byte loads and stores (k = 2048: 512 vectors); through the page table
    // the four entries' loads are in flight together.
    const auto write = [&](auto&& to_row) {
      for (int v = threadIdx.x; v < k / 4; v += kThreads) {
        const int4 idx = reinterpret_cast<const int4*>(s.out_idx)[v];
        const uint32_t slot = 4u * v;
        const int4 rows = make_int4(slot < count ? to_row(static_cast<int32_t>(ks + idx.x)) : -1,
                                    slot + 1 < count ? to_row(static_cast<int32_t>(ks + idx.y)) : -1,
                                    slot + 2 < count ? to_row(static_cast<int32_t>(ks + idx.z)) : -1,
                                    slot + 3 < count ? to_row(static_cast<int32_t>(ks + idx.w)) : -1);
        reinterpret_cast<int4*>(out)[v] = rows;
      }
    };
    if (p.page_table == nullptr) {
      write([](int32_t index) { return index; });
    } else {
      const RowPageMap map(p, row);
      write([&](int32_t index) { return map.map(index); });
    }
    return;
  }
  const RowPageMap map(p, row);
  for (int slot = threadIdx.x; slot < k; slot += kThreads) {
    out[slot] = static_cast<uint32_t>(slot) < count ? map.map(static_cast<int32_t>(ks + s.out_idx[slot])) : -1;
  }
}

// write_sorted_row with p.sorted, else write_unsorted_row.
template <int kThreads, int kCandCap>
__device__ __forceinline__ void write_row(const TopkParams& p, int64_t row, int64_t ks,
                                          uint32_t count, RowSmem<kThreads, kCandCap>& s) {
  if (p.sorted) {
    write_sorted_row<kThreads>(p, row, ks, count, s);
  } else {
    write_unsorted_row<kThreads>(p, row, ks, count, s);
  }
}

}  // namespace fp8dsa::detail::topk
