// The fused path's last step: per token, the exact top k of the candidates its key splits kept
// (candidate_output.cuh), in the (score key descending, key row ascending) order, written as
// topk() writes them: absolute key rows (or their page-table rows), -1 past the selected count,
// ascending rows or (sorted) descending scores. One CTA per token; the radix select reads the
// candidates from global memory (L2), the survivors are sorted in shared memory.
#include <cstdint>

#include <cub/block/block_radix_sort.cuh>
#include <cub/block/block_scan.cuh>

#include "core/cuda_check.h"
#include "fused_topk/candidate_layout.h"
#include "fused_topk/launch.h"
#include "topk/radix_select.cuh"

namespace fp8dsa::fused_topk_impl {
namespace {

constexpr int kThreads = 512;
constexpr int kItems = topk_impl::kMaxK / kThreads;  // 4 sorted slots per thread

struct SelectArgs {
  TopkParams out;  // resolved: num_rows, num_keys, ks, ke, k, indices, ld_indices, sorted, page table
  const uint32_t* counts;
  const uint32_t* keys;
  const int32_t* rows;
  int splits;
  int capacity;
};

// Visits every candidate of `row`: f(key, key row).
template <class F>
__device__ __forceinline__ void for_each_candidate(const SelectArgs& a, int64_t row, const uint32_t* count,
                                                   F f) {
  for (int s = 0; s < a.splits; ++s) {
    const int64_t base = (row * a.splits + s) * static_cast<int64_t>(a.capacity);
#pragma unroll 4
    for (uint32_t i = threadIdx.x; i < count[s]; i += kThreads) f(a.keys[base + i], a.rows[base + i]);
  }
}

__global__ void __launch_bounds__(kThreads) select_candidates_kernel(const SelectArgs a) {
  using Scan = cub::BlockScan<uint32_t, kThreads>;
  using Sort = cub::BlockRadixSort<uint64_t, kThreads, kItems>;
  __shared__ uint32_t hist[topk_impl::kNumBins];
  __shared__ union {
    typename Scan::TempStorage scan;
    typename Sort::TempStorage sort;
  } temp;
  __shared__ uint64_t picked[topk_impl::kMaxK];
  __shared__ uint32_t count[kMaxKeySplits];
  __shared__ uint32_t num_picked;
  __shared__ topk_impl::Threshold slot;

  const int64_t row = blockIdx.x;
  if (threadIdx.x < a.splits) count[threadIdx.x] = a.counts[row * a.splits + threadIdx.x];
  for (int i = threadIdx.x; i < topk_impl::kNumBins; i += kThreads) hist[i] = 0u;
  if (threadIdx.x == 0) num_picked = 0u;
  __syncthreads();
  uint32_t total = 0;
  for (int s = 0; s < a.splits; ++s) total += count[s];
  const uint32_t k = static_cast<uint32_t>(a.out.k);

  // The k-th candidate (when there are more than k): its key, then among equal keys its row.
  uint32_t kth_key = 0u, last_row = 0x7FFFFFFFu;
  if (total > k) {
    uint32_t prefix = 0, r = k, equal = 0;
    for (int level = 0; level < 3; ++level) {
      const uint32_t pmask = topk_impl::level_prefix_mask(level);
      const int shift = topk_impl::level_shift(level);
      const uint32_t dmask = topk_impl::level_digit_mask(level);
      for_each_candidate(a, row, count, [&](uint32_t key, int32_t) {
        if ((key & pmask) == prefix) atomicAdd(&hist[(key >> shift) & dmask], 1u);
      });
      __syncthreads();
      const topk_impl::Threshold t = topk_impl::find_threshold_bin<kThreads, true>(hist, r, temp.scan, &slot);
      prefix |= t.bin << shift;
      r -= t.above;
      equal = t.count;
    }
    kth_key = prefix;
    if (equal > r) {  // keep the r lowest rows among the keys equal to the k-th
      uint32_t rprefix = 0;
      for (int level = 0; level < 3; ++level) {
        const uint32_t pmask = topk_impl::level_prefix_mask(level);
        const int shift = topk_impl::level_shift(level);
        const uint32_t dmask = topk_impl::level_digit_mask(level);
        for_each_candidate(a, row, count, [&](uint32_t key, int32_t rw) {
          const uint32_t v = ~static_cast<uint32_t>(rw);
          if (key == kth_key && (v & pmask) == rprefix) atomicAdd(&hist[(v >> shift) & dmask], 1u);
        });
        __syncthreads();
        const topk_impl::Threshold t = topk_impl::find_threshold_bin<kThreads, true>(hist, r, temp.scan, &slot);
        rprefix |= t.bin << shift;
        r -= t.above;
      }
      last_row = ~rprefix;
    }
  }

  // The survivors, as one 64-bit sort key each: (score key, ~row) for by-score order, ~row for
  // ascending rows; sorted descending, 0 (never a survivor's value) pads the empty slots.
  const bool by_score = a.out.sorted;
  for_each_candidate(a, row, count, [&](uint32_t key, int32_t rw) {
    const bool keep = total <= k || key > kth_key || (key == kth_key && static_cast<uint32_t>(rw) <= last_row);
    if (!keep) return;
    const uint32_t at = atomicAdd(&num_picked, 1u);
    const uint32_t not_row = ~static_cast<uint32_t>(rw);
    picked[at] = by_score ? (uint64_t{key} << 32 | not_row) : (uint64_t{0xFFFFFFFFu} << 32 | not_row);
  });
  __syncthreads();
  const uint32_t selected = num_picked;
  uint64_t item[kItems];
#pragma unroll
  for (int j = 0; j < kItems; ++j) {
    const uint32_t i = threadIdx.x * kItems + j;
    item[j] = i < selected ? picked[i] : 0u;
  }
  Sort(temp.sort).SortDescending(item);
  int32_t* out = a.out.indices + row * a.out.ld_indices;
#pragma unroll
  for (int j = 0; j < kItems; ++j) {
    const uint32_t rank = threadIdx.x * kItems + j;
    if (rank >= k) continue;
    const int32_t key_row = static_cast<int32_t>(~static_cast<uint32_t>(item[j]));
    out[rank] = rank < selected ? topk_impl::page_transform(a.out, row, key_row) : -1;
  }
}

}  // namespace

Status launch_select_candidates(const TopkParams& out, const CandidateBuffers& buffers) {
  if (out.num_rows == 0) return Status::ok();
  if (out.num_rows > INT32_MAX) return invalid_argument("fused_topk: too many tokens for one grid");
  SelectArgs a{out, buffers.counts, buffers.keys, buffers.rows, buffers.splits, buffers.capacity};
  select_candidates_kernel<<<static_cast<unsigned>(out.num_rows), kThreads, 0, out.stream>>>(a);
  FP8DSA_RETURN_IF_LAUNCH_FAILED("select_candidates_kernel");
  return Status::ok();
}

}  // namespace fp8dsa::fused_topk_impl
