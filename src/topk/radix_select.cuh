// Block-level pieces of the radix select shared by the one-CTA-per-row kernel and the split kernels:
// the order-preserving key, row / candidate views read as 4-key vectors, histogram passes, the
// threshold-bin search and the index-ordered compaction pass (block scans, no atomics on output
// slots, so reruns are bitwise identical).
#pragma once

#include <cstdint>
#include <type_traits>

#include <cub/block/block_scan.cuh>
#include <cuda_runtime.h>

#include "fp8dsa/topk.h"
#include "topk/config.h"
#include "topk/page_table.h"

namespace fp8dsa::detail::topk {

// Monotone f32 -> u32 (a < b <=> key(a) < key(b)). NaN -> 0, below -inf (0x007FFFFF), so NaN ranks
// lowest; -0 and +0 share a key because they compare equal (ties then match float comparison).
__device__ __forceinline__ uint32_t order_key(float x) {
  if (x != x) return 0u;
  const uint32_t u = x == 0.0f ? 0u : __float_as_uint(x);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

__device__ __forceinline__ uint32_t lane_of(const uint4& v, int j) {
  return j == 0 ? v.x : j == 1 ? v.y : j == 2 ? v.z : v.w;
}

__device__ __forceinline__ int64_t clamp_bound(int32_t bound, int64_t num_keys) {
  return bound < 0 ? 0 : (bound > num_keys ? num_keys : static_cast<int64_t>(bound));
}

// The valid key range [ks, ks + len) of a row after clamping to [0, N].
struct RowRange {
  int64_t ks;
  uint32_t len;
};

__device__ __forceinline__ RowRange row_range(const TopkParams& p, int64_t row) {
  const int64_t lo = clamp_bound(p.ks[row], p.num_keys);
  const int64_t hi = clamp_bound(p.ke[row], p.num_keys);
  return {lo, hi > lo ? static_cast<uint32_t>(hi - lo) : 0u};
}

// A row of logits seen as 16-byte vectors: position q = i + a holds key i of the row, where a is
// the row start's misalignment in floats, so vector v covers positions [4v, 4v + 4) and its
// 16-byte load is aligned. Lanes outside [a, a + len) are masked and never dereferenced. Vectors
// below cache_vecs come from a shared-memory copy made by the first pass.
struct RowKeys {
  const float* base;  // 16-byte aligned; base + a is the row's first key
  uint32_t a;
  uint32_t end;       // a + len
  uint32_t nvec;      // ceil(end / 4)
  const uint4* cache;
  uint32_t cache_vecs;

  __device__ __forceinline__ static RowKeys make(const float* first, uint32_t len) {
    RowKeys r;
    r.a = static_cast<uint32_t>(reinterpret_cast<uintptr_t>(first) >> 2) & 3u;
    r.base = first - r.a;
    r.end = r.a + len;
    r.nvec = (r.end + 3u) / 4u;
    r.cache = nullptr;
    r.cache_vecs = 0;
    return r;
  }
  __device__ __forceinline__ uint32_t lane_mask(uint32_t v) const {
    const uint32_t q = 4u * v;
    uint32_t m = 0xFu;
    if (q < a) m &= (0xFu << (a - q)) & 0xFu;
    if (q + 4u > end) m &= (1u << (end - q)) - 1u;
    return m;
  }
  __device__ __forceinline__ uint4 load_global(uint32_t v, uint32_t m) const {
    const float* p = base + 4ull * v;
    if (m == 0xFu) {
      const float4 f = __ldg(reinterpret_cast<const float4*>(p));
      return make_uint4(order_key(f.x), order_key(f.y), order_key(f.z), order_key(f.w));
    }
    // Only the first and last vector of a row are partial: scalar loads stay inside the row.
    return make_uint4((m & 1u) ? order_key(__ldg(p + 0)) : 0u, (m & 2u) ? order_key(__ldg(p + 1)) : 0u,
                      (m & 4u) ? order_key(__ldg(p + 2)) : 0u, (m & 8u) ? order_key(__ldg(p + 3)) : 0u);
  }
  __device__ __forceinline__ uint4 load(uint32_t v, uint32_t m) const {
    return v < cache_vecs ? cache[v] : load_global(v, m);
  }
  // Offset from the row's first key.
  __device__ __forceinline__ uint32_t elem(uint32_t v, int j) const { return 4u * v + j - a; }
};

// The threshold-bucket candidates a CTA collected in shared memory, as 4-key vectors.
struct CandidateKeys {
  const uint32_t* key;  // 16-byte aligned
  const int32_t* idx;
  uint32_t count;
  uint32_t nvec;

  __device__ __forceinline__ uint32_t lane_mask(uint32_t v) const {
    const uint32_t q = 4u * v;
    return q + 4u > count ? (1u << (count - q)) - 1u : 0xFu;
  }
  __device__ __forceinline__ uint4 load(uint32_t v, uint32_t) const {
    return reinterpret_cast<const uint4*>(key)[v];
  }
  __device__ __forceinline__ uint32_t elem(uint32_t v, int j) const { return idx[4u * v + j]; }
};

// Adds the masked lanes whose key starts with `prefix` (the digits chosen before `level`) to the
// level's histogram. Runs of one digit (constant or sorted rows) add once: same-address shared
// atomics serialise.
__device__ __forceinline__ void add_to_histogram(const uint4& keys, uint32_t m, uint32_t prefix,
                                                 int level, uint32_t* hist) {
  const uint32_t pmask = level_prefix_mask(level);
  const int shift = level_shift(level);
  const uint32_t dmask = level_digit_mask(level);
  uint32_t digit[4];
  uint32_t hit = 0;
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const uint32_t key = lane_of(keys, j);
    digit[j] = (key >> shift) & dmask;
    if (((m >> j) & 1u) && (key & pmask) == prefix) hit |= 1u << j;
  }
  if (hit == 0xFu && digit[0] == digit[1] && digit[0] == digit[2] && digit[0] == digit[3]) {
    atomicAdd(&hist[digit[0]], 4u);
    return;
  }
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    if ((hit >> j) & 1u) atomicAdd(&hist[digit[j]], 1u);
  }
}

// Histogram of `level` over vectors [v_begin, v_end) of src, kHistVecsInFlight loads in flight per
// thread. With kFillCache (first pass over a row) the loaded vectors below cache_cap are also
// stored to `cache`.
template <int kThreads, bool kFillCache, typename Source>
__device__ __forceinline__ void histogram_pass(const Source& src, uint32_t v_begin, uint32_t v_end,
                                               uint32_t prefix, int level, uint32_t* hist,
                                               uint4* cache = nullptr, uint32_t cache_cap = 0) {
  constexpr int kU = kHistVecsInFlight;
  for (uint32_t v0 = v_begin + threadIdx.x; v0 < v_end; v0 += kThreads * kU) {
    uint4 keys[kU];
    uint32_t m[kU];
#pragma unroll
    for (int u = 0; u < kU; ++u) {
      const uint32_t v = v0 + u * kThreads;
      m[u] = v < v_end ? src.lane_mask(v) : 0u;
      if (m[u] != 0u) keys[u] = src.load(v, m[u]);
    }
#pragma unroll
    for (int u = 0; u < kU; ++u) {
      if (m[u] == 0u) continue;
      const uint32_t v = v0 + u * kThreads;
      if (kFillCache && v < cache_cap) cache[v] = keys[u];
      add_to_histogram(keys[u], m[u], prefix, level, hist);
    }
  }
}

// The bin holding the k_rem-th largest key of a histogram: above < k_rem <= above + count, where
// above counts the keys in higher bins. Needs 1 <= k_rem <= total. Reads `hist` (shared or global)
// through a generic pointer; kZero clears the bins afterwards for the next level. Ends with a
// barrier; `slot` (shared) must not be rewritten before every thread has returned.
struct Threshold {
  uint32_t bin;
  uint32_t above;
  uint32_t count;
};

template <int kThreads, bool kZero>
__device__ __forceinline__ Threshold find_threshold_bin(
    uint32_t* hist, uint32_t k_rem, typename cub::BlockScan<uint32_t, kThreads>::TempStorage& scan,
    Threshold* slot) {
  constexpr int kBinsPerThread = kNumBins / kThreads;
  static_assert(kNumBins % kThreads == 0, "bins split evenly over the threads");
  uint32_t h[kBinsPerThread];
  uint32_t above[kBinsPerThread];
  // Descending bin order, so an exclusive prefix sum counts the keys above each bin.
#pragma unroll
  for (int j = 0; j < kBinsPerThread; ++j) h[j] = hist[kNumBins - 1 - (threadIdx.x * kBinsPerThread + j)];
  cub::BlockScan<uint32_t, kThreads>(scan).ExclusiveSum(h, above);
#pragma unroll
  for (int j = 0; j < kBinsPerThread; ++j) {
    const uint32_t bin = kNumBins - 1 - (threadIdx.x * kBinsPerThread + j);
    if (above[j] < k_rem && k_rem <= above[j] + h[j]) *slot = Threshold{bin, above[j], h[j]};
    if (kZero) hist[bin] = 0u;
  }
  __syncthreads();
  return *slot;
}

// find_threshold_bin in a few registers, for kernels that keep a row in registers (cub's raking
// scan caches kThreads / 32 values a raking thread and spills there): each thread sums its
// kNumBins / kThreads bins, a warp scan and one exchange of the warps' sums (`warp_sums`, shared,
// kThreads / 32 words) rank the threads, and the thread holding the bin walks its bins. `hist` is
// shared and 16-byte aligned. Ends with a barrier, as find_threshold_bin.
template <int kThreads, bool kZero>
__device__ __forceinline__ Threshold find_threshold_bin_lean(uint32_t* hist, uint32_t k_rem, uint32_t* warp_sums,
                                                             Threshold* slot) {
  constexpr int kBins = kNumBins / kThreads;
  static_assert(kNumBins % kThreads == 0 && kBins % 2 == 0 && kThreads <= 1024,
                "bins split evenly, in pairs, over at most 32 warps");
  using Vec = std::conditional_t<kBins % 4 == 0, uint4, uint2>;
  constexpr int kPerVec = sizeof(Vec) / 4;
  const uint32_t lane = threadIdx.x & 31u;
  const uint32_t warp = threadIdx.x >> 5;
  // Thread t holds bins [kNumBins - (t + 1) kBins, kNumBins - t kBins): threads count from the top.
  uint32_t* mine = hist + kNumBins - (threadIdx.x + 1) * kBins;
  uint32_t sum = 0;
#pragma unroll
  for (int i = 0; i < kBins / kPerVec; ++i) {
    const Vec v = reinterpret_cast<const Vec*>(mine)[i];
    if constexpr (kPerVec == 4) {
      sum += v.x + v.y + v.z + v.w;
    } else {
      sum += v.x + v.y;
    }
  }
  uint32_t inclusive = sum;
#pragma unroll
  for (uint32_t d = 1; d < 32u; d <<= 1) {
    const uint32_t y = __shfl_up_sync(0xFFFFFFFFu, inclusive, d);
    if (lane >= d) inclusive += y;
  }
  if (lane == 31u) warp_sums[warp] = inclusive;
  __syncthreads();
  uint32_t above = __reduce_add_sync(0xFFFFFFFFu, lane < warp ? warp_sums[lane] : 0u) + inclusive - sum;
  if (above < k_rem && k_rem <= above + sum) {
    for (int i = kBins - 1; i >= 0; --i) {
      const uint32_t h = mine[i];
      if (k_rem <= above + h) {
        *slot = Threshold{static_cast<uint32_t>(mine - hist) + i, above, h};
        break;
      }
      above += h;
    }
  }
  if (kZero) {
#pragma unroll
    for (int i = 0; i < kBins / kPerVec; ++i) reinterpret_cast<Vec*>(mine)[i] = Vec{};
  }
  __syncthreads();
  return *slot;
}

// One pass in vector order over [v_begin, v_end) of src that numbers two classes of keys in a
// fixed order: classify(key) returns 1 (class A), 2 (class B) or 0; emit(cls, key, elem, rank) gets
// each member with its rank within its class, counted from base_a / base_b. Deterministic: ranks
// come from block scans, never from atomics. Ends with a barrier.
template <int kThreads, typename Source, typename Classify, typename Emit>
__device__ __forceinline__ void ordered_pass(
    const Source& src, uint32_t v_begin, uint32_t v_end, uint32_t base_a, uint32_t base_b,
    typename cub::BlockScan<uint32_t, kThreads>::TempStorage& scan, Classify classify, Emit emit) {
  constexpr int kU = kOrderedVecsPerThread;
  static_assert(kThreads * kU * 4 < (1 << 16), "per-tile class counts must fit 16 bits");
  for (uint32_t tile = v_begin; tile < v_end; tile += kThreads * kU) {
    uint4 keys[kU];
    uint32_t m[kU];
    uint32_t packed = 0;  // class A count | class B count << 16
#pragma unroll
    for (int u = 0; u < kU; ++u) {
      const uint32_t v = tile + u * kThreads + threadIdx.x;
      m[u] = v < v_end ? src.lane_mask(v) : 0u;
      if (m[u] != 0u) keys[u] = src.load(v, m[u]);
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        if (!((m[u] >> j) & 1u)) continue;
        const int cls = classify(lane_of(keys[u], j));
        packed += cls == 1 ? 1u : (cls == 2 ? (1u << 16) : 0u);
      }
    }
    uint32_t before, total;
    cub::BlockScan<uint32_t, kThreads>(scan).ExclusiveSum(packed, before, total);
    uint32_t rank_a = base_a + (before & 0xFFFFu);
    uint32_t rank_b = base_b + (before >> 16);
#pragma unroll
    for (int u = 0; u < kU; ++u) {
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        if (!((m[u] >> j) & 1u)) continue;
        const uint32_t key = lane_of(keys[u], j);
        const int cls = classify(key);
        const uint32_t v = tile + u * kThreads + threadIdx.x;
        if (cls == 1) emit(1, key, src.elem(v, j), rank_a++);
        if (cls == 2) emit(2, key, src.elem(v, j), rank_b++);
      }
    }
    base_a += total & 0xFFFFu;
    base_b += total >> 16;
    __syncthreads();  // the scan storage is reused by the next tile
  }
}

}  // namespace fp8dsa::detail::topk
