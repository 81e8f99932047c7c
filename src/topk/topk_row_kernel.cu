// One CTA per row: exact radix select with the row read once from DRAM.
//
//   pass 1  row (global) -> level-0 histogram (top 11 bits); the row's keys are kept in shared
//           memory as far as they fit (the rest is re-read later, mostly from L2)
//   pass 2  row -> keys of higher buckets selected outright (index order), keys of the threshold
//           bucket into a candidate list and the level-1 histogram
//   then    levels 1 and 2 and the final pick over the candidates only; a threshold bucket larger
//           than kCandidateCap is refined by re-scanning the row instead (never truncated)
//   write   the k (key, index) pairs, optionally radix-sorted by key, through the page table
#include <algorithm>
#include <cstdint>
#include <string>

#include <cub/block/block_radix_sort.cuh>
#include <cub/block/block_scan.cuh>
#include <cuda_runtime.h>

#include "core/cuda_check.h"
#include "core/launch.cuh"
#include "topk/config.h"
#include "topk/launch.h"
#include "topk/radix_select.cuh"

namespace fp8dsa::detail::topk {
namespace {

template <int kThreads>
struct RowSmem {
  using Scan = cub::BlockScan<uint32_t, kThreads>;
  static constexpr int kSortItems = kMaxK / kThreads;
  using Sort = cub::BlockRadixSort<uint32_t, kThreads, kSortItems, int32_t>;
  static_assert(kMaxK % kThreads == 0, "the sort holds kMaxK items in a blocked arrangement");

  // The radix-select state is dead once the k pairs are in out_*: the sort reuses it.
  union {
    struct {
      uint32_t hist[kNumBins];
      alignas(16) uint32_t cand_key[kCandidateCap];
      int32_t cand_idx[kCandidateCap];
    } select;
    typename Sort::TempStorage sort;
  } u;
  typename Scan::TempStorage scan;
  alignas(16) uint32_t out_key[kMaxK];
  int32_t out_idx[kMaxK];  // offset from the row's (clamped) ks
  Threshold slots[3];
};

template <int kThreads>
constexpr size_t row_smem_head_bytes() {
  return (sizeof(RowSmem<kThreads>) + 15) / 16 * 16;
}

// Leaves the row's k best (key, offset) pairs in s.out_key / s.out_idx (slots [0, k)).
template <int kThreads>
__device__ __forceinline__ void select_row(const TopkParams& p, const float* first, uint32_t len,
                                           RowSmem<kThreads>& s, uint4* cache,
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
  const bool collect = t0.count <= static_cast<uint32_t>(kCandidateCap);
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

// Writes slots [0, k) of the row: the `count` selected pairs (optionally by descending key), then
// -1, every index mapped through the page table when there is one.
template <int kThreads>
__device__ __forceinline__ void write_row(const TopkParams& p, int64_t row, int64_t ks,
                                          uint32_t count, RowSmem<kThreads>& s) {
  int32_t* out = p.indices + row * p.ld_indices;
  const int k = p.k;
  if (p.sorted) {
    constexpr int kItems = RowSmem<kThreads>::kSortItems;
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
    typename RowSmem<kThreads>::Sort(s.u.sort).SortDescending(key, idx);
#pragma unroll
    for (int j = 0; j < kItems; ++j) {
      const int slot = threadIdx.x * kItems + j;
      if (slot < k) out[slot] = idx[j] < 0 ? -1 : page_transform(p, row, static_cast<int32_t>(ks + idx[j]));
    }
    return;
  }
  for (int slot = threadIdx.x; slot < k; slot += kThreads) {
    out[slot] = static_cast<uint32_t>(slot) < count
                    ? page_transform(p, row, static_cast<int32_t>(ks + s.out_idx[slot]))
                    : -1;
  }
}

template <int kThreads>
__global__ void __launch_bounds__(kThreads, 1024 / kThreads)
    topk_row_kernel(const TopkParams p, uint32_t cache_cap_vecs) {
  extern __shared__ uint4 smem_dyn[];
  static_assert(row_smem_head_bytes<kThreads>() % 16 == 0, "the row cache is 16-byte aligned");
  auto& s = *reinterpret_cast<RowSmem<kThreads>*>(smem_dyn);
  uint4* cache = smem_dyn + row_smem_head_bytes<kThreads>() / 16;

  const int64_t row = blockIdx.x;
  const RowRange range = row_range(p, row);
  const float* first = p.logits + row * p.ldl + range.ks;
  uint32_t count;
  if (range.len <= static_cast<uint32_t>(p.k)) {
    // Every valid key is selected; keys are only needed to sort.
    for (uint32_t i = threadIdx.x; i < range.len; i += kThreads) {
      s.out_idx[i] = static_cast<int32_t>(i);
      if (p.sorted) s.out_key[i] = order_key(first[i]);
    }
    count = range.len;
  } else {
    select_row<kThreads>(p, first, range.len, s, cache, cache_cap_vecs);
    count = static_cast<uint32_t>(p.k);
  }
  __syncthreads();
  write_row<kThreads>(p, row, range.ks, count, s);
}

// The current device's opt-in shared memory per block (0 when it cannot be queried).
int max_dynamic_smem() {
  int dev = 0, value = 0;
  if (cudaGetDevice(&dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&value, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return value;
}

template <int kThreads>
Status launch_row(const TopkParams& p, int64_t cache_keys) {
  const size_t head = row_smem_head_bytes<kThreads>();
  const int64_t limit_vecs = (static_cast<int64_t>(max_dynamic_smem()) - static_cast<int64_t>(head)) / 16;
  if (limit_vecs < 0) {
    return {StatusCode::kUnsupportedDevice, "topk: the device's shared memory per block is below the kernel's " +
                                                std::to_string(head) + " bytes"};
  }
  // A row spans at most (N + 3) / 4 + 1 vectors (its start may be misaligned).
  const int64_t row_vecs = (p.num_keys + 3) / 4 + 1;
  const int64_t want_vecs = cache_keys < 0 ? row_vecs : (cache_keys + 3) / 4;
  const int64_t cache_vecs = std::min({want_vecs, row_vecs, limit_vecs});
  const size_t smem = head + static_cast<size_t>(cache_vecs) * 16;
  return launch_kernel("topk_row_kernel", topk_row_kernel<kThreads>, static_cast<unsigned>(p.num_rows), kThreads, smem,
                       p.stream, p, static_cast<uint32_t>(cache_vecs));
}

}  // namespace

Status launch_row_kernel(const TopkParams& p, int threads, int64_t cache_keys) {
  if (p.num_rows == 0) return Status::ok();
  switch (threads) {
    case 512:
      return launch_row<512>(p, cache_keys);
    case 1024:
      return launch_row<1024>(p, cache_keys);
    default:
      return invalid_argument("topk: row kernel threads must be 512 or 1024, got " + std::to_string(threads));
  }
}

}  // namespace fp8dsa::detail::topk
