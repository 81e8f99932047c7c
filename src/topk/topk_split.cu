// Few long rows (decode-like): each row is cut into `chunks` pieces, one CTA per (chunk, row), so a
// million-key row uses the whole GPU. The CTAs of a row meet in the workspace through a chain of
// short kernels (no grid-wide barrier, no host synchronisation, graph-capturable):
//
//   memset      the row histograms
//   level 0..2  each CTA histograms its chunk (keys matching the digits chosen so far) into
//               shared memory, then adds it to the row's histogram in the workspace; each CTA
//               re-derives the chosen digits from the finished histograms of the previous levels
//   count       each CTA counts its keys above / equal to the threshold
//   write       each CTA writes its selected keys at slots numbered by the counts of the chunks
//               before it (index order, bitwise reproducible), through the page table
//   sort        (sorted only) one CTA per row sorts the k selected keys by score
#include <algorithm>
#include <cstdint>

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

constexpr int kThreads = kSplitThreads;
using Scan = cub::BlockScan<uint32_t, kThreads>;

struct SplitArgs {
  TopkParams p;
  SplitRowWorkspace* ws;
};

// This CTA's vectors of the row.
struct Chunk {
  RowKeys src;
  uint32_t v_begin;
  uint32_t v_end;
};

__device__ __forceinline__ Chunk chunk_of(const TopkParams& p, int64_t row, const RowRange& range) {
  Chunk c;
  c.src = RowKeys::make(p.logits + row * p.logits_stride + range.ks, range.len);
  const uint32_t per_chunk = (c.src.nvec + gridDim.x - 1) / gridDim.x;
  c.v_begin = min(c.src.nvec, blockIdx.x * per_chunk);
  c.v_end = min(c.src.nvec, c.v_begin + per_chunk);
  return c;
}

// The digits chosen by levels [0, levels) of the row, from its finished workspace histograms.
struct Prefix {
  uint32_t bits = 0;
  uint32_t k_rem = 0;  // keys still to take at the next level
  uint32_t above = 0;  // keys above the current bucket of the next level
};

__device__ __forceinline__ Prefix chosen_prefix(SplitRowWorkspace& ws, uint32_t k, int levels,
                                                Scan::TempStorage& scan, Threshold* slots) {
  Prefix pre;
  pre.k_rem = k;
  for (int level = 0; level < levels; ++level) {
    const Threshold t = find_threshold_bin<kThreads, false>(ws.hist[level], pre.k_rem, scan, &slots[level]);
    pre.bits |= t.bin << level_shift(level);
    pre.k_rem -= t.above;
    pre.above += t.above;
  }
  return pre;
}

template <int kLevel>
__global__ void __launch_bounds__(kThreads) split_histogram_kernel(const SplitArgs a) {
  __shared__ uint32_t hist[kNumBins];
  __shared__ Scan::TempStorage scan;
  __shared__ Threshold slots[3];
  const int64_t row = blockIdx.y;
  const RowRange range = row_range(a.p, row);
  if (range.len <= static_cast<uint32_t>(a.p.k)) return;
  SplitRowWorkspace& ws = a.ws[row];
  for (int b = threadIdx.x; b < kNumBins; b += kThreads) hist[b] = 0u;
  const Prefix pre = chosen_prefix(ws, a.p.k, kLevel, scan, slots);
  __syncthreads();
  const Chunk c = chunk_of(a.p, row, range);
  histogram_pass<kThreads, false>(c.src, c.v_begin, c.v_end, pre.bits, kLevel, hist);
  __syncthreads();
  for (int b = threadIdx.x; b < kNumBins; b += kThreads) {
    if (hist[b] != 0u) atomicAdd(&ws.hist[kLevel][b], hist[b]);
  }
}

__global__ void __launch_bounds__(kThreads) split_count_kernel(const SplitArgs a) {
  __shared__ Scan::TempStorage scan;
  __shared__ Threshold slots[3];
  __shared__ uint32_t counts[2];
  const int64_t row = blockIdx.y;
  const RowRange range = row_range(a.p, row);
  if (range.len <= static_cast<uint32_t>(a.p.k)) return;
  SplitRowWorkspace& ws = a.ws[row];
  if (threadIdx.x < 2) counts[threadIdx.x] = 0u;
  const Prefix pre = chosen_prefix(ws, a.p.k, 3, scan, slots);
  const Chunk c = chunk_of(a.p, row, range);
  uint32_t above = 0, equal = 0;
  for (uint32_t v = c.v_begin + threadIdx.x; v < c.v_end; v += kThreads) {
    const uint32_t m = c.src.lane_mask(v);
    const uint4 keys = c.src.load(v, m);
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      if (!((m >> j) & 1u)) continue;
      const uint32_t key = lane_of(keys, j);
      above += key > pre.bits;
      equal += key == pre.bits;
    }
  }
  if (above) atomicAdd(&counts[0], above);
  if (equal) atomicAdd(&counts[1], equal);
  __syncthreads();
  if (threadIdx.x < 2) ws.chunk_counts[blockIdx.x][threadIdx.x] = counts[threadIdx.x];
}

__global__ void __launch_bounds__(kThreads) split_write_kernel(const SplitArgs a) {
  __shared__ Scan::TempStorage scan;
  __shared__ Threshold slots[3];
  __shared__ uint32_t before[2];
  const TopkParams& p = a.p;
  const int64_t row = blockIdx.y;
  const RowRange range = row_range(p, row);
  int32_t* out = p.indices + row * p.indices_stride;
  const uint32_t k = static_cast<uint32_t>(p.k);
  // Sorted output is mapped through the page table by the sort kernel, which needs raw indices.
  const RowPageMap map(p, row);
  auto value = [&](uint32_t elem) {
    const int32_t index = static_cast<int32_t>(range.ks + elem);
    return p.sorted ? index : map.map(index);
  };

  if (range.len <= k) {
    // Every valid key is selected, at the slot of its offset; chunk 0 also writes the padding.
    const uint32_t per_chunk = (range.len + gridDim.x - 1) / gridDim.x;
    const uint32_t begin = min(range.len, blockIdx.x * per_chunk);
    const uint32_t end = min(range.len, begin + per_chunk);
    for (uint32_t i = begin + threadIdx.x; i < end; i += kThreads) out[i] = value(i);
    if (blockIdx.x == 0) {
      for (uint32_t i = range.len + threadIdx.x; i < k; i += kThreads) out[i] = -1;
    }
    return;
  }

  SplitRowWorkspace& ws = a.ws[row];
  if (threadIdx.x < 2) before[threadIdx.x] = 0u;
  const Prefix pre = chosen_prefix(ws, k, 3, scan, slots);
  uint32_t above = 0, equal = 0;
  for (uint32_t c = threadIdx.x; c < blockIdx.x; c += kThreads) {
    above += ws.chunk_counts[c][0];
    equal += ws.chunk_counts[c][1];
  }
  if (above) atomicAdd(&before[0], above);
  if (equal) atomicAdd(&before[1], equal);
  __syncthreads();

  const uint32_t threshold = pre.bits;
  const uint32_t ties = pre.k_rem;  // keys equal to the threshold that are selected
  const uint32_t tie_base = k - ties;
  const Chunk c = chunk_of(p, row, range);
  ordered_pass<kThreads>(
      c.src, c.v_begin, c.v_end, before[0], before[1], scan,
      [threshold](uint32_t key) { return key > threshold ? 1 : (key == threshold ? 2 : 0); },
      [&](int cls, uint32_t, uint32_t elem, uint32_t rank) {
        if (cls == 2) {
          if (rank >= ties) return;
          rank += tie_base;
        }
        out[rank] = value(elem);
      });
}

// Sorts each row's k written indices by descending score and maps them through the page table.
__global__ void __launch_bounds__(kThreads) split_sort_kernel(const TopkParams p) {
  constexpr int kItems = kMaxK / kThreads;
  using Sort = cub::BlockRadixSort<uint32_t, kThreads, kItems, int32_t>;
  __shared__ typename Sort::TempStorage sort;
  const int64_t row = blockIdx.x;
  int32_t* out = p.indices + row * p.indices_stride;
  const float* logits = p.logits + row * p.logits_stride;
  uint32_t key[kItems];
  int32_t idx[kItems];
#pragma unroll
  for (int j = 0; j < kItems; ++j) {
    const int slot = threadIdx.x * kItems + j;
    idx[j] = slot < p.k ? out[slot] : -1;
    key[j] = idx[j] >= 0 ? order_key(logits[idx[j]]) + 1u : 0u;  // padding sorts last
  }
  Sort(sort).SortDescending(key, idx);  // its barriers order every read of `out` before the writes
  const RowPageMap map(p, row);
#pragma unroll
  for (int j = 0; j < kItems; ++j) {
    const int slot = threadIdx.x * kItems + j;
    if (slot < p.k) out[slot] = idx[j] < 0 ? -1 : map.map(idx[j]);
  }
}

}  // namespace

int max_split_chunks(const TopkParams& p) {
  if (p.num_rows < 1 || p.num_rows > kSplitMaxRows) return 0;
  const int64_t by_length = (p.num_keys + kSplitMinChunkKeys - 1) / kSplitMinChunkKeys;
  return static_cast<int>(std::min<int64_t>(kSplitMaxChunks, by_length));
}

Status launch_split(const TopkParams& p, int chunks) {
  if (p.num_rows == 0) return Status::ok();
  if (p.num_rows > kSplitMaxRows) {
    return invalid_argument("topk: the split path takes at most " + std::to_string(kSplitMaxRows) +
                            " rows, got " + std::to_string(p.num_rows));
  }
  if (chunks < 1 || chunks > kSplitMaxChunks) {
    return invalid_argument("topk: split chunks must be in [1, " + std::to_string(kSplitMaxChunks) +
                            "], got " + std::to_string(chunks));
  }
  const size_t ws_bytes = static_cast<size_t>(p.num_rows) * sizeof(SplitRowWorkspace);
  if (p.workspace == nullptr || p.workspace_bytes < ws_bytes) {
    return {StatusCode::kWorkspaceTooSmall, "topk: the split path needs " + std::to_string(ws_bytes) +
                                                " workspace bytes, got " + std::to_string(p.workspace_bytes)};
  }
  const SplitArgs args{p, static_cast<SplitRowWorkspace*>(p.workspace)};
  const dim3 grid(static_cast<unsigned>(chunks), static_cast<unsigned>(p.num_rows));
  FP8DSA_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(p.workspace, 0, ws_bytes, p.stream));
  FP8DSA_RETURN_IF_ERROR(launch_kernel("topk split_histogram_kernel<0>", split_histogram_kernel<0>, grid, kThreads,
                                       0, p.stream, args));
  FP8DSA_RETURN_IF_ERROR(launch_kernel("topk split_histogram_kernel<1>", split_histogram_kernel<1>, grid, kThreads,
                                       0, p.stream, args));
  FP8DSA_RETURN_IF_ERROR(launch_kernel("topk split_histogram_kernel<2>", split_histogram_kernel<2>, grid, kThreads,
                                       0, p.stream, args));
  FP8DSA_RETURN_IF_ERROR(launch_kernel("topk split_count_kernel", split_count_kernel, grid, kThreads, 0, p.stream, args));
  FP8DSA_RETURN_IF_ERROR(launch_kernel("topk split_write_kernel", split_write_kernel, grid, kThreads, 0, p.stream, args));
  if (!p.sorted) return Status::ok();
  return launch_kernel("topk split_sort_kernel", split_sort_kernel, static_cast<unsigned>(p.num_rows), kThreads, 0,
                       p.stream, p);
}

}  // namespace fp8dsa::detail::topk
