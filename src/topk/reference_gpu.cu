// GPU reference for top-k (SPEC section 2), correctness first: one block per row.
//
// Exact for any row length: a 4-pass 8-bit radix select over the order-preserving uint32 image of
// the scores finds the k-th largest key, then one pass in index order (block scans, no atomics, so
// reruns are bitwise identical) keeps every key above it and the first needed keys equal to it.
// The k <= 2048 selected (key, index) pairs live in shared memory; `sorted` bitonic-sorts them.
#include <algorithm>
#include <cstdint>
#include <string>

#include <cub/block/block_scan.cuh>
#include <cuda_runtime.h>

#include "core/cuda_check.h"
#include "core/launch.cuh"
#include "core/no_throw.h"
#include "fp8dsa/topk.h"
#include "topk/page_table.h"

namespace fp8dsa::reference {
namespace {

constexpr int kThreads = 1024;
constexpr int kMaxK = 2048;  // topk.h: k in 1..2048
constexpr int kRadixBits = 8;
constexpr int kNumBins = 1 << kRadixBits;
constexpr int kMaxRowBlocks = 1 << 20;  // more rows loop inside the block
static_assert(32 % kRadixBits == 0, "radix passes must tile the 32-bit key");
static_assert((kMaxK & (kMaxK - 1)) == 0, "bitonic sort needs a power-of-two capacity");

// Monotone map f32 -> u32 (a < b  <=>  key(a) < key(b)); NaN -> 0, below -inf (0x007FFFFF), so NaN
// ranks lowest; -0 and +0 map to the same key since they compare equal.
__device__ __forceinline__ uint32_t order_key(float x) {
  if (x != x) return 0u;
  if (x == 0.0f) return 0x80000000u;
  const uint32_t u = __float_as_uint(x);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

// Descending order of this composite is descending score, then ascending index; the all-zero
// padding value sorts after every real entry (a real one has ~index != 0).
__device__ __forceinline__ uint64_t make_entry(uint32_t key, int64_t index) {
  return (static_cast<uint64_t>(key) << 32) | static_cast<uint32_t>(~static_cast<uint32_t>(index));
}
__device__ __forceinline__ int32_t entry_index(uint64_t entry) {
  return static_cast<int32_t>(~static_cast<uint32_t>(entry));
}

__device__ __forceinline__ int64_t clamp_bound(int32_t bound, int64_t num_keys) {
  return bound < 0 ? 0 : (bound > num_keys ? num_keys : static_cast<int64_t>(bound));
}


__global__ void __launch_bounds__(kThreads) topk_reference_kernel(TopkParams p) {
  using BlockScan = cub::BlockScan<int, kThreads>;
  __shared__ typename BlockScan::TempStorage scan_storage;
  __shared__ uint32_t hist[kNumBins];
  __shared__ uint64_t selected[kMaxK];
  __shared__ uint32_t threshold_smem;
  __shared__ int64_t remaining_smem;

  for (int64_t row = blockIdx.x; row < p.num_rows; row += gridDim.x) {
    const int64_t lo = clamp_bound(p.ks[row], p.num_keys);
    const int64_t hi = std::max(lo, clamp_bound(p.ke[row], p.num_keys));
    const float* scores = p.logits + row * p.logits_stride;
    const int64_t take = std::min<int64_t>(p.k, hi - lo);
    const bool take_all = hi - lo <= p.k;

    // Radix select: after the passes, `threshold` is the k-th largest key and `eq_take` is how
    // many keys equal to it belong in the result (the rest of the k are strictly above it).
    uint32_t threshold = 0;
    int64_t eq_take = 0;
    if (!take_all) {
      uint32_t prefix = 0, prefix_mask = 0;
      int64_t remaining = p.k;
      for (int shift = 32 - kRadixBits; shift >= 0; shift -= kRadixBits) {
        __syncthreads();  // previous readers of hist / threshold_smem are done
        for (int b = threadIdx.x; b < kNumBins; b += kThreads) hist[b] = 0;
        __syncthreads();
        for (int64_t i = lo + threadIdx.x; i < hi; i += kThreads) {
          const uint32_t key = order_key(scores[i]);
          if ((key & prefix_mask) == prefix) atomicAdd(&hist[(key >> shift) & (kNumBins - 1)], 1u);
        }
        __syncthreads();
        if (threadIdx.x == 0) {
          int64_t above = 0;
          int digit = kNumBins - 1;
          for (; digit > 0; --digit) {
            if (above + hist[digit] >= remaining) break;
            above += hist[digit];
          }
          threshold_smem = prefix | (static_cast<uint32_t>(digit) << shift);
          remaining_smem = remaining - above;
        }
        __syncthreads();
        prefix = threshold_smem;
        remaining = remaining_smem;
        prefix_mask |= static_cast<uint32_t>(kNumBins - 1) << shift;
      }
      threshold = prefix;
      eq_take = remaining;
    }

    // Compaction in index order; `written` and `eq_seen` are block-uniform (scan aggregates).
    int64_t written = 0, eq_seen = 0;
    for (int64_t chunk = lo; chunk < hi && written < take; chunk += kThreads) {
      const int64_t i = chunk + threadIdx.x;
      const bool in_row = i < hi;
      const uint32_t key = in_row ? order_key(scores[i]) : 0u;
      const int is_eq = (in_row && !take_all && key == threshold) ? 1 : 0;
      int eq_rank = 0, eq_total = 0;
      __syncthreads();
      BlockScan(scan_storage).ExclusiveSum(is_eq, eq_rank, eq_total);
      const int chosen =
          (in_row && (take_all || key > threshold || (is_eq && eq_seen + eq_rank < eq_take))) ? 1 : 0;
      int slot = 0, chosen_total = 0;
      __syncthreads();
      BlockScan(scan_storage).ExclusiveSum(chosen, slot, chosen_total);
      if (chosen && written + slot < kMaxK) selected[written + slot] = make_entry(key, i);
      written += chosen_total;
      eq_seen += eq_total;
    }
    __syncthreads();

    if (p.sorted && take > 1) {
      int span = 1;
      while (span < take) span <<= 1;
      for (int i = static_cast<int>(take) + threadIdx.x; i < span; i += kThreads) selected[i] = 0;
      __syncthreads();
      for (int size = 2; size <= span; size <<= 1) {
        for (int stride = size >> 1; stride > 0; stride >>= 1) {
          for (int i = threadIdx.x; i < span; i += kThreads) {
            const int j = i ^ stride;
            if (j > i) {
              const uint64_t a = selected[i], b = selected[j];
              const bool descending = (i & size) == 0;
              if (descending ? a < b : a > b) {
                selected[i] = b;
                selected[j] = a;
              }
            }
          }
          __syncthreads();
        }
      }
    }

    int32_t* out = p.indices + row * p.indices_stride;
    for (int slot = threadIdx.x; slot < p.k; slot += kThreads) {
      int32_t index = -1;
      if (slot < take) {
        index = entry_index(selected[slot]);
        if (p.page_table) index = detail::topk::page_table_transform(p, row, index);
      }
      out[slot] = index;
    }
  }
}

}  // namespace

static Status topk_gpu_unguarded(const TopkParams& params) {
  FP8DSA_RETURN_IF_ERROR(validate(params));
  FP8DSA_RETURN_IF_ERROR(check_device());
  const TopkParams p = params.resolved();
  if (p.k < 1 || p.k > kMaxK) {
    return invalid_argument("topk reference: k (" + std::to_string(p.k) + ") must be in [1, " +
                            std::to_string(kMaxK) + "]");
  }
  if (p.num_keys > INT32_MAX) return invalid_argument("topk reference: num_keys exceeds int32 key rows");
  if (p.num_rows == 0) return Status::ok();
  const unsigned grid = static_cast<unsigned>(std::min<int64_t>(p.num_rows, kMaxRowBlocks));
  return launch_kernel("topk_reference_kernel", topk_reference_kernel, grid, kThreads, 0, p.stream, p);
}

Status topk_gpu(const TopkParams& params) {
  return detail::no_throw("topk GPU reference", [&] { return topk_gpu_unguarded(params); });
}

}  // namespace fp8dsa::reference
