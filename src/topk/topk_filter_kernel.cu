// One CTA per row, the row read once: a sampled threshold, one filtering pass, the exact select on
// the candidates.
//
//   sample   filter_samples() keys of the row, one per stratum; a two-level radix select on them
//            gives tau, the top 22 bits of the filter_sample_rank()-th largest sample
//   filter   the row (global, 16-byte loads) -> every key >= tau into the candidate list; each warp
//            filters 512-key chunks in row order and records where its run of candidates went
//   select   the three-level radix select of the row kernel, over the candidates only (every key
//            at or above the k-th largest is one when there are at least k)
//   emit     the chunks' runs in chunk order: above the threshold into slots [0, k - ties), the
//            first `ties` keys equal to it after them, so the output comes in ascending key order
//            and reruns are bitwise identical
//   write    as the row kernel (sorted or not, through the page table)
//
// Rows with fewer than k or more than kFilterCandidateCap candidates (a sample that misled, heavy
// ties) and rows too long for the chunk records take the row kernel's whole-row select instead.
#include <cstdint>
#include <string>

#include <cub/block/block_scan.cuh>
#include <cuda_runtime.h>

#include "core/cuda_check.h"
#include "core/launch.cuh"
#include "topk/config.h"
#include "topk/launch.h"
#include "topk/radix_select.cuh"
#include "topk/row_select.cuh"

namespace fp8dsa::detail::topk {
namespace {

// About 59 KB: three CTAs of 256 threads or two of 512 per SM.
template <int kThreads>
struct FilterSmem {
  // The candidates (those past the cap are counted, not stored), the histogram, the output slots.
  RowSmem<kThreads, kFilterCandidateCap> row;
  uint32_t chunk_run[kFilterMaxChunks];         // start << 10 | length of each chunk's candidates
  uint32_t count;                               // candidates found (may exceed the cap)
};

// Where a row's sample lies; samples = 0 when the row takes none (it has at most kFilterCandidateCap
// keys, at most k, or too many for the chunk records).
struct RowSample {
  const float* first;
  uint32_t len;
  uint32_t samples;
  int log2_samples;
};

__device__ __forceinline__ RowSample row_sample(const TopkParams& p, int64_t row) {
  const RowRange range = row_range(p, row);
  RowSample r{p.logits + row * p.logits_stride + range.ks, range.len, 0u, 0};
  const uint32_t k = static_cast<uint32_t>(p.k);
  if (range.len > k && range.len > static_cast<uint32_t>(kFilterCandidateCap) &&
      range.len <= static_cast<uint32_t>(kFilterMaxChunks * kFilterChunkKeys) - 4u) {
    r.log2_samples = filter_samples_log2(range.len, k);
    r.samples = 1u << r.log2_samples;
  }
  return r;
}

// Lowest float whose order key is `key` or above (keys at or below -inf's map to -inf). key > 0.
__device__ __forceinline__ float key_floor_value(uint32_t key) {
  if (key >= 0x80000000u) return __uint_as_float(key & 0x7FFFFFFFu);
  if (key <= 0x007FFFFFu) return __uint_as_float(0xFF800000u);
  return __uint_as_float(~key);
}

// tau from the row's sample (its keys kept in the candidate list while tau is chosen). Returns 0
// when the threshold would admit NaN's key, which the float comparison cannot: the caller takes the
// whole-row select.
template <int kThreads>
__device__ __forceinline__ uint32_t sample_threshold_key(const RowSample& r, uint32_t k, FilterSmem<kThreads>& s) {
  uint32_t* hist = s.row.u.select.hist;
  uint32_t* sample = s.row.u.select.cand_key;
  const uint32_t rank = filter_sample_rank(r.samples, r.len, k);
  constexpr int kPerThread = kFilterMaxSamples / kThreads;
  static_assert(kFilterMaxSamples % kThreads == 0, "the samples split evenly over the threads");
  float value[kPerThread];  // every load in flight before the first is used
#pragma unroll
  for (int j = 0; j < kPerThread; ++j) {
    const uint32_t i = threadIdx.x + j * kThreads;
    value[j] = i < r.samples ? __ldg(r.first + filter_sample_offset(i, r.log2_samples, r.len)) : 0.0f;
  }
#pragma unroll
  for (int j = 0; j < kPerThread; ++j) {
    const uint32_t i = threadIdx.x + j * kThreads;
    if (i < r.samples) {
      const uint32_t key = order_key(value[j]);
      sample[i] = key;
      atomicAdd(&hist[key >> level_shift(0)], 1u);
    }
  }
  __syncthreads();
  const Threshold t0 = find_threshold_bin<kThreads, true>(hist, rank, s.row.scan, &s.row.slots[0]);
  for (uint32_t i = threadIdx.x; i < r.samples; i += kThreads) {
    const uint32_t key = sample[i];
    if ((key >> level_shift(0)) == t0.bin) atomicAdd(&hist[(key >> level_shift(1)) & level_digit_mask(1)], 1u);
  }
  __syncthreads();
  const Threshold t1 = find_threshold_bin<kThreads, true>(hist, rank - t0.above, s.row.scan, &s.row.slots[1]);
  return (t0.bin << level_shift(0)) | (t1.bin << level_shift(1));
}

// The filtering pass: every key of the row that compares >= tau (NaN never does) goes to the
// candidate list, chunk by chunk; s.count ends as the number found, the list holds the first
// kFilterCandidateCap of them (as raw float bits) with their offsets from the row's first key
// (later ones are not stored: the row then takes the whole-row path).
template <int kThreads>
__device__ __forceinline__ void filter_row(const RowKeys& src, float tau, uint32_t num_chunks,
                                           FilterSmem<kThreads>& s) {
  constexpr int kU = kFilterVecsPerLane;
  constexpr uint32_t kChunkVecs = 32u * kU;
  constexpr int kWarps = kThreads / 32;
  static_assert(kU <= 4 && 32 * 4 < 256, "per-vector counts scan as bytes of one word");
  const uint32_t lane = threadIdx.x & 31u;
  uint32_t* cand_key = s.row.u.select.cand_key;
  int32_t* cand_idx = s.row.u.select.cand_idx;
  const float kNaN = __uint_as_float(0x7FC00000u);
  for (uint32_t c = threadIdx.x / 32u; c < num_chunks; c += kWarps) {
    const uint32_t v0 = c * kChunkVecs + lane;
    float4 x[kU];
    if (c * kChunkVecs >= 1u && (c + 1u) * kChunkVecs < src.nvec) {
#pragma unroll
      for (int u = 0; u < kU; ++u) x[u] = __ldg(reinterpret_cast<const float4*>(src.base) + v0 + u * 32u);
    } else {
#pragma unroll
      for (int u = 0; u < kU; ++u) {
        // Lanes outside the row (its first and last vectors, vectors past its end) read as NaN,
        // which no threshold admits.
        const uint32_t v = v0 + u * 32u;
        const uint32_t m = v < src.nvec ? src.lane_mask(v) : 0u;
        const float* p = src.base + 4ull * v;
        x[u] = make_float4((m & 1u) ? __ldg(p + 0) : kNaN, (m & 2u) ? __ldg(p + 1) : kNaN,
                           (m & 4u) ? __ldg(p + 2) : kNaN, (m & 8u) ? __ldg(p + 3) : kNaN);
      }
    }
    // Candidates of vector u in lane order, one byte per u; an inclusive warp scan of the bytes
    // (no byte carries: at most 128 per byte) gives each lane its place.
    uint32_t bits[kU];
    uint32_t counts = 0;
#pragma unroll
    for (int u = 0; u < kU; ++u) {
      bits[u] = (x[u].x >= tau ? 1u : 0u) | (x[u].y >= tau ? 2u : 0u) | (x[u].z >= tau ? 4u : 0u) |
                (x[u].w >= tau ? 8u : 0u);
      counts |= static_cast<uint32_t>(__popc(bits[u])) << (8 * u);
    }
    uint32_t inclusive = counts;
#pragma unroll
    for (uint32_t d = 1; d < 32u; d <<= 1) {
      const uint32_t y = __shfl_up_sync(0xFFFFFFFFu, inclusive, d);
      if (lane >= d) inclusive += y;
    }
    const uint32_t totals = __shfl_sync(0xFFFFFFFFu, inclusive, 31);
    const uint32_t exclusive = inclusive - counts;
    uint32_t start = 0;
    if (lane == 0) {
      uint32_t total = 0;
#pragma unroll
      for (int u = 0; u < kU; ++u) total += (totals >> (8 * u)) & 0xFFu;
      start = atomicAdd(&s.count, total);
      s.chunk_run[c] = (start << 10) | total;
    }
    uint32_t pos = __shfl_sync(0xFFFFFFFFu, start, 0);
#pragma unroll
    for (int u = 0; u < kU; ++u) {
      uint32_t slot = pos + ((exclusive >> (8 * u)) & 0xFFu);
      pos += (totals >> (8 * u)) & 0xFFu;
      const int32_t elem0 = static_cast<int32_t>(src.elem(v0 + u * 32u, 0));
      for (uint32_t b = bits[u]; b != 0u; b &= b - 1u) {
        const int j = __ffs(b) - 1;
        const float value = j == 0 ? x[u].x : j == 1 ? x[u].y : j == 2 ? x[u].z : x[u].w;
        if (slot < static_cast<uint32_t>(kFilterCandidateCap)) {
          cand_key[slot] = __float_as_uint(value);
          cand_idx[slot] = elem0 + j;
        }
        ++slot;
      }
    }
  }
  __syncthreads();
}

// The exact select over the `count` candidates (raw float bits on entry, order keys after), then
// emit(slot, key, offset) for the k selected, slot by slot in chunk order. The histogram is zero on
// entry.
template <int kThreads, typename Emit>
__device__ __forceinline__ void select_candidates(uint32_t k, uint32_t count, uint32_t num_chunks,
                                                  FilterSmem<kThreads>& s, Emit emit) {
  using Scan = typename RowSmem<kThreads, kFilterCandidateCap>::Scan;
  static_assert(kFilterCandidateCap % 4 == 0, "the 16-byte key reads of a full array stay inside it");
  constexpr int kWarps = kThreads / 32;
  uint32_t* hist = s.row.u.select.hist;
  uint32_t* cand_key = s.row.u.select.cand_key;
  const int32_t* cand_idx = s.row.u.select.cand_idx;
  for (uint32_t i = threadIdx.x; i < count; i += kThreads) {
    const uint32_t key = order_key(__uint_as_float(cand_key[i]));
    cand_key[i] = key;
    atomicAdd(&hist[key >> level_shift(0)], 1u);
  }
  __syncthreads();
  const Threshold t0 = find_threshold_bin<kThreads, true>(hist, k, s.row.scan, &s.row.slots[0]);
  const CandidateKeys cands{cand_key, cand_idx, count, (count + 3u) / 4u};
  histogram_pass<kThreads, false>(cands, 0, cands.nvec, t0.bin << level_shift(0), 1, hist);
  __syncthreads();
  const uint32_t k0 = k - t0.above;
  const Threshold t1 = find_threshold_bin<kThreads, true>(hist, k0, s.row.scan, &s.row.slots[1]);
  const uint32_t prefix2 = (t0.bin << level_shift(0)) | (t1.bin << level_shift(1));
  const uint32_t k1 = k0 - t1.above;
  histogram_pass<kThreads, false>(cands, 0, cands.nvec, prefix2, 2, hist);
  __syncthreads();
  const Threshold t2 = find_threshold_bin<kThreads, false>(hist, k1, s.row.scan, &s.row.slots[2]);
  const uint32_t threshold = prefix2 | t2.bin;
  const uint32_t ties = k1 - t2.above;
  const uint32_t tie_base = k - ties;

  // Per chunk: keys above the threshold | keys equal to it << 16 (a chunk holds < 2^10 keys, the
  // list < 2^16), then their exclusive sums in chunk order.
  const uint32_t lane = threadIdx.x & 31u;
  const uint32_t lanes_below = (1u << lane) - 1u;
  uint32_t* chunk_rank = hist;  // the histogram is dead (its slot is read by every thread above)
  for (uint32_t c = threadIdx.x / 32u; c < num_chunks; c += kWarps) {
    const uint32_t run = s.chunk_run[c];
    const uint32_t start = run >> 10, len = run & 0x3FFu;
    uint32_t packed = 0;
    for (uint32_t i = lane; i < len; i += 32u) {
      const uint32_t key = cand_key[start + i];
      packed += key > threshold ? 1u : (key == threshold ? (1u << 16) : 0u);
    }
    packed = __reduce_add_sync(0xFFFFFFFFu, packed);
    if (lane == 0) chunk_rank[c] = packed;
  }
  __syncthreads();
  constexpr int kPerThread = (kFilterMaxChunks + kThreads - 1) / kThreads;
  uint32_t counts[kPerThread], ranks[kPerThread];
#pragma unroll
  for (int j = 0; j < kPerThread; ++j) {
    const uint32_t c = threadIdx.x * kPerThread + j;
    counts[j] = c < num_chunks ? chunk_rank[c] : 0u;
  }
  Scan(s.row.scan).ExclusiveSum(counts, ranks);
#pragma unroll
  for (int j = 0; j < kPerThread; ++j) {
    const uint32_t c = threadIdx.x * kPerThread + j;
    if (c < num_chunks) chunk_rank[c] = ranks[j];
  }
  __syncthreads();

  for (uint32_t c = threadIdx.x / 32u; c < num_chunks; c += kWarps) {
    const uint32_t run = s.chunk_run[c];
    const uint32_t start = run >> 10, len = run & 0x3FFu;
    const uint32_t before = chunk_rank[c];
    uint32_t rank_above = before & 0xFFFFu;
    uint32_t rank_tie = before >> 16;
    for (uint32_t i0 = 0; i0 < len; i0 += 32u) {
      const uint32_t i = i0 + lane;
      const uint32_t key = i < len ? cand_key[start + i] : 0u;
      const bool above = i < len && key > threshold;
      const bool tie = i < len && key == threshold;
      const uint32_t ballot_above = __ballot_sync(0xFFFFFFFFu, above);
      const uint32_t ballot_tie = __ballot_sync(0xFFFFFFFFu, tie);
      if (above) {
        emit(rank_above + __popc(ballot_above & lanes_below), key, cand_idx[start + i]);
      } else if (tie) {
        const uint32_t r = rank_tie + __popc(ballot_tie & lanes_below);
        if (r < ties) emit(tie_base + r, key, cand_idx[start + i]);
      }
      rank_above += __popc(ballot_above);
      rank_tie += __popc(ballot_tie);
    }
  }
}

template <int kThreads>
__global__ void __launch_bounds__(kThreads, kThreads <= 256 ? 3 : 2) topk_filter_kernel(const TopkParams p) {
  extern __shared__ uint4 smem_dyn[];
  auto& s = *reinterpret_cast<FilterSmem<kThreads>*>(smem_dyn);
  const uint32_t k = static_cast<uint32_t>(p.k);
  const int64_t row = blockIdx.x;
  const RowSample rs = row_sample(p, row);
  const int64_t ks = clamp_bound(p.ks[row], p.num_keys);
  bool staged = true;  // the k pairs are in s.row.out_* (else already written)
  uint32_t count = k;
  if (rs.len <= k) {
    stage_whole_row<kThreads>(p, rs.first, rs.len, s.row);
    count = rs.len;
  } else {
    const RowKeys src = RowKeys::make(rs.first, rs.len);
    const uint32_t num_chunks = (src.nvec + 32u * kFilterVecsPerLane - 1u) / (32u * kFilterVecsPerLane);
    bool whole_row = num_chunks > static_cast<uint32_t>(kFilterMaxChunks);
    if (!whole_row) {
      for (int b = threadIdx.x; b < kNumBins; b += kThreads) s.row.u.select.hist[b] = 0u;
      if (threadIdx.x == 0) s.count = 0u;
      __syncthreads();
      float tau = __uint_as_float(0xFF800000u);  // -inf: every key but NaN
      if (rs.samples > 0u) {
        const uint32_t tau_key = sample_threshold_key<kThreads>(rs, k, s);
        tau = key_floor_value(tau_key);
        whole_row = tau_key == 0u;
      }
      if (!whole_row) {
        filter_row<kThreads>(src, tau, num_chunks, s);
        const uint32_t found = s.count;
        whole_row = found < k || found > static_cast<uint32_t>(kFilterCandidateCap);
        if (!whole_row) {
          if (p.sorted) {
            select_candidates<kThreads>(k, found, num_chunks, s, [&](uint32_t slot, uint32_t key, int32_t idx) {
              s.row.out_key[slot] = key;
              s.row.out_idx[slot] = idx;
            });
          } else {
            int32_t* out = p.indices + row * p.indices_stride;
            const RowPageMap map(p, row);
            select_candidates<kThreads>(k, found, num_chunks, s, [&](uint32_t slot, uint32_t, int32_t idx) {
              out[slot] = map.map(static_cast<int32_t>(ks + idx));
            });
            staged = false;
          }
        }
      }
      __syncthreads();  // every thread has read s.count and the slots before a fallback rewrites them
    }
    if (whole_row) select_row<kThreads>(p, rs.first, rs.len, s.row, nullptr, 0u);
  }
  if (!staged) return;
  __syncthreads();
  write_row<kThreads>(p, row, ks, count, s.row);
}

template <int kThreads>
Status launch_filter(const TopkParams& p) {
  constexpr size_t smem = sizeof(FilterSmem<kThreads>);
  return launch_kernel("topk_filter_kernel", topk_filter_kernel<kThreads>, static_cast<unsigned>(p.num_rows),
                       kThreads, smem, p.stream, p);
}

}  // namespace

Status launch_filter_kernel(const TopkParams& p, int threads) {
  if (p.num_rows == 0) return Status::ok();
  switch (threads) {
    case 256:
      return launch_filter<256>(p);
    case 512:
      return launch_filter<512>(p);
    default:
      return invalid_argument("topk: filter kernel threads must be 256 or 512, got " + std::to_string(threads));
  }
}

}  // namespace fp8dsa::detail::topk
