// One CTA per row with the whole row in registers (rows of up to 4 x kVecs x kThreads keys), read
// once from global memory.
//
//   load     16-byte loads of the row's body (from its first 16-byte boundary), kept as order keys:
//            warp w holds body vectors [w, w + 1) x 32 kVecs, register vector j of lane l being
//            vector 32 j + l of that block, so every load instruction reads 512 contiguous bytes;
//            the 0-3 keys before the boundary (the head) sit in warp 0's lanes
//   select   the three radix levels of config.h, each a histogram over the registers (only keys of
//            the bucket chosen so far add to it) and find_threshold_bin_lean: tau, the k-th largest key,
//            and `ties`, the keys equal to tau that complete the k (a level whose threshold bucket
//            is taken whole ends the select early)
//   emit     the keys above tau and the first `ties` keys equal to it, in ascending key order, into
//            the output slots (ranks from byte-packed warp scans and one exchange of the warps'
//            counts: no atomics decide a slot, so reruns are bitwise identical)
//   write    as the row kernel (sorted or not, through the page table)
//
// No candidate list and no fallback: every level reads the registers, so a threshold bucket of any
// size (ties, constant rows) is exact.
#include <cstdint>
#include <string>

#include <cuda_runtime.h>

#include "core/cuda_check.h"
#include "core/launch.cuh"
#include "topk/config.h"
#include "topk/launch.h"
#include "topk/radix_select.cuh"
#include "topk/row_select.cuh"

namespace fp8dsa::detail::topk {
namespace {

// RowSmem's smallest candidate list (this kernel keeps none) that leaves its layout as it is.
constexpr int kNoCandidates = 4;

template <int kThreads>
struct RegisterSmem {
  RowSmem<kThreads, kNoCandidates> row;  // histogram, scan, the k output pairs, the sort
  // Per warp: the threshold search's bin sums, then the emit's keys above tau | equal to it << 16.
  uint32_t warp_sums[kThreads / 32];
  uint32_t discard;  // the histogram increments of keys outside the bucket being refined
};

// A key of the row as held in registers: order_key's order (NaN lowest, -0 == +0) with NaN at 1,
// so that 0 marks a slot past the row (a pad), below every key. Five instructions to order_key's
// eight: adding +0 turns -0 into +0 and keeps every other value.
__device__ __forceinline__ uint32_t present_key(float x) {
  const uint32_t u = __float_as_uint(__fadd_rn(x, 0.0f));
  const uint32_t key = u ^ (static_cast<uint32_t>(static_cast<int32_t>(u) >> 31) | 0x80000000u);
  return x != x ? 1u : key;
}

// *dst = value where `hit`: one predicated store (a branch around it costs three more instructions
// a key).
__device__ __forceinline__ void store_if(bool hit, uint32_t* dst, uint32_t value) {
  asm volatile("{\n\t.reg .pred p;\n\tsetp.ne.u32 p, %0, 0;\n\t@p st.shared.u32 [%1], %2;\n\t}" ::"r"(static_cast<uint32_t>(hit)),
               "r"(static_cast<uint32_t>(__cvta_generic_to_shared(dst))), "r"(value)
               : "memory");
}

__device__ __forceinline__ float component(const float4& v, int s) {
  return s == 0 ? v.x : (s == 1 ? v.y : (s == 2 ? v.z : v.w));
}

__device__ __forceinline__ uint32_t byte_of(uint32_t word, int b) { return (word >> (8 * b)) & 0xFFu; }

// The row in registers. Body vector v (keys num_head + 4v .. num_head + 4v + 3 of the row) is
// register vector j of lane l of warp w for v = (w kVecs + j) 32 + l.
template <int kVecs>
struct RegisterRow {
  uint32_t key[kVecs][4];  // pads (0) past the row's end
  uint32_t head;           // warp 0, lanes < num_head: key `lane` of the row; 0 elsewhere
  uint32_t num_head;
  uint32_t nvec;           // body vectors holding at least one key
  uint32_t vec0;           // this lane's vector in register 0

  __device__ __forceinline__ uint32_t vec(int j) const { return vec0 + 32u * j; }
  // Whether this warp holds a key of the row (the same in every lane). The passes skip the warps
  // past the row's end and run over every register of the others (a branch a vector costs more than
  // the pads it skips, which lie in one warp of the row).
  __device__ __forceinline__ bool live() const { return (vec0 & ~31u) < nvec; }
  // Key s of register vector j, as an offset from the row's first key.
  __device__ __forceinline__ uint32_t offset(int j, int s) const { return num_head + 4u * vec(j) + s; }
};

// Issues every load of the row (a 16-byte load per whole vector, scalar loads for the last partial
// one and the head), zeroes the histogram while they are in flight, then turns them into keys.
template <int kThreads, int kVecs>
__device__ __forceinline__ void load_row(const float* first, uint32_t len, uint32_t* hist, RegisterRow<kVecs>& r) {
  const uint32_t misalign = static_cast<uint32_t>(reinterpret_cast<uintptr_t>(first) >> 2) & 3u;
  r.num_head = min((4u - misalign) & 3u, len);
  r.vec0 = (threadIdx.x >> 5) * (32u * kVecs) + (threadIdx.x & 31u);
  const float* body = first + r.num_head;  // 16-byte aligned
  const uint32_t body_len = len - r.num_head;
  const uint32_t full = body_len / 4u;
  r.nvec = (body_len + 3u) / 4u;
  float4 x[kVecs];
#pragma unroll
  for (int j = 0; j < kVecs; ++j) {
    const uint32_t v = r.vec(j);
    if (v < full) {
      x[j] = __ldg(reinterpret_cast<const float4*>(body) + v);
    } else {
      const uint32_t n = v < r.nvec ? body_len - 4u * v : 0u;  // 1..3 in the last vector
      const float* p = body + 4ull * v;
      x[j] = make_float4(n > 0u ? __ldg(p) : 0.0f, n > 1u ? __ldg(p + 1) : 0.0f, n > 2u ? __ldg(p + 2) : 0.0f, 0.0f);
    }
  }
  const float head = threadIdx.x < r.num_head ? __ldg(first + threadIdx.x) : 0.0f;
  static_assert(kNumBins % 4 == 0, "the histogram is zeroed as 16-byte vectors");
  for (int b = threadIdx.x; b < kNumBins / 4; b += kThreads) reinterpret_cast<uint4*>(hist)[b] = make_uint4(0u, 0u, 0u, 0u);
  __syncthreads();

  r.head = threadIdx.x < r.num_head ? present_key(head) : 0u;
#pragma unroll
  for (int j = 0; j < kVecs; ++j) {
    if ((r.vec0 & ~31u) + 32u * j + 31u < full) {  // every lane's vector is whole
#pragma unroll
      for (int s = 0; s < 4; ++s) r.key[j][s] = present_key(component(x[j], s));
    } else {
      const uint32_t v = r.vec(j);
      const uint32_t n = v < full ? 4u : (v < r.nvec ? body_len - 4u * v : 0u);
#pragma unroll
      for (int s = 0; s < 4; ++s) r.key[j][s] = static_cast<uint32_t>(s) < n ? present_key(component(x[j], s)) : 0u;
    }
  }
}

// Adds the keys whose digits above level kLevel's are `prefix` to the level's histogram; the others
// add to `discard` (an increment of 1 at one address a lane is one ATOMS.POPC.INC a warp, the lanes
// of one address counted together; ptxas turns a predicated one into a branch, three more
// instructions a key). The pads of the row's last live warp may add to bin 0 of a level: they rank
// below every key of the row, which holds more than k keys, so no threshold lands on them.
template <int kLevel, int kVecs>
__device__ __forceinline__ void histogram_level(const RegisterRow<kVecs>& r, uint32_t prefix, uint32_t* hist,
                                                uint32_t* discard) {
  const uint32_t discard_bin = static_cast<uint32_t>(discard - hist);
  auto add = [&](uint32_t key) {
    // Below 2^(bits below the chosen digits) exactly when key's chosen digits are the prefix's.
    const uint32_t rest = key ^ prefix;
    const bool hit = kLevel == 0 || rest < (1u << level_shift(kLevel > 0 ? kLevel - 1 : 0));
    atomicAdd(&hist[hit ? rest >> level_shift(kLevel) : discard_bin], 1u);
  };
  if (r.head != 0u) add(r.head);
  if (!r.live()) return;
#pragma unroll
  for (int j = 0; j < kVecs; ++j) {
#pragma unroll
    for (int s = 0; s < 4; ++s) add(r.key[j][s]);
  }
}

// The selection: every key above tau and the first `ties` keys equal to it (in key order). With
// split_ties false every key equal to tau is selected: the selection is the keys >= tau. tau >= 1:
// the row holds more than k keys, all >= 1, so the k-th largest is never a pad.
struct Selection {
  uint32_t tau;
  uint32_t ties;
  bool split_ties;
};

template <int kThreads, int kVecs>
__device__ __forceinline__ Selection select_threshold(const RegisterRow<kVecs>& r, uint32_t k, RegisterSmem<kThreads>& s) {
  uint32_t* hist = s.row.u.select.hist;
  histogram_level<0>(r, 0u, hist, &s.discard);
  __syncthreads();
  const Threshold t0 = find_threshold_bin_lean<kThreads, true>(hist, k, s.warp_sums, &s.row.slots[0]);
  const uint32_t prefix1 = t0.bin << level_shift(0);
  const uint32_t k0 = k - t0.above;
  // A bucket taken whole: the selection is the keys >= its lowest. (Never bucket 0, of the NaNs and
  // pads: with the keys above it, that bucket holds every key of the row, more than k.)
  if (t0.count == k0) return {prefix1, 0u, false};

  histogram_level<1>(r, prefix1, hist, &s.discard);
  __syncthreads();
  const Threshold t1 = find_threshold_bin_lean<kThreads, true>(hist, k0, s.warp_sums, &s.row.slots[1]);
  const uint32_t prefix2 = prefix1 | (t1.bin << level_shift(1));
  const uint32_t k1 = k0 - t1.above;
  if (t1.count == k1) return {prefix2, 0u, false};

  histogram_level<2>(r, prefix2, hist, &s.discard);
  __syncthreads();
  const Threshold t2 = find_threshold_bin_lean<kThreads, false>(hist, k1, s.warp_sums, &s.row.slots[2]);
  const uint32_t ties = k1 - t2.above;
  return {prefix2 | t2.bin, ties, ties < t2.count};
}

// Writes the selection in ascending key order: the offsets into s.row.out_idx[0, k), with kKeys
// their keys into s.row.out_key. A selected key's slot is the number of selected keys before it:
// the keys above tau before it plus min(ties, keys equal to tau before it). Those counts come from
// the earlier warps' totals, then the warp's earlier register vectors, then the earlier lanes (a
// warp scan of per-vector counts packed one byte a vector), then the lane's earlier keys.
template <int kThreads, int kVecs, bool kSplitTies, bool kKeys>
__device__ __forceinline__ void emit_selection(const RegisterRow<kVecs>& r, Selection sel, RegisterSmem<kThreads>& s) {
  constexpr int kWords = (kVecs + 3) / 4;
  const uint32_t lane = threadIdx.x & 31u;
  const uint32_t warp = threadIdx.x >> 5;
  const uint32_t tau = sel.tau;
  // Without split ties one class suffices: the keys >= tau. (Pads, 0, are below tau.)
  auto above = [tau](uint32_t key) { return kSplitTies ? key > tau : key >= tau; };
  auto equal = [tau](uint32_t key) { return kSplitTies && key == tau; };

  uint32_t gt[kWords], eq[kWords];  // this lane's counts, byte j % 4 of word j / 4 for vector j
#pragma unroll
  for (int w = 0; w < kWords; ++w) gt[w] = eq[w] = 0u;
  if (r.live()) {
#pragma unroll
    for (int j = 0; j < kVecs; ++j) {
      uint32_t g = 0u, e = 0u;
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        g += above(r.key[j][c]) ? 1u : 0u;
        e += equal(r.key[j][c]) ? 1u : 0u;
      }
      gt[j / 4] += g << (8 * (j % 4));
      eq[j / 4] += e << (8 * (j % 4));
    }
  }
  uint32_t gt_incl[kWords], eq_incl[kWords];
#pragma unroll
  for (int w = 0; w < kWords; ++w) {
    gt_incl[w] = gt[w];
    eq_incl[w] = eq[w];
  }
#pragma unroll
  for (uint32_t d = 1; d < 32u; d <<= 1) {
#pragma unroll
    for (int w = 0; w < kWords; ++w) {
      const uint32_t yg = __shfl_up_sync(0xFFFFFFFFu, gt_incl[w], d);
      if (lane >= d) gt_incl[w] += yg;
      if (kSplitTies) {
        const uint32_t ye = __shfl_up_sync(0xFFFFFFFFu, eq_incl[w], d);
        if (lane >= d) eq_incl[w] += ye;
      }
    }
  }
  const uint32_t head_gt = __ballot_sync(0xFFFFFFFFu, above(r.head));
  const uint32_t head_eq = kSplitTies ? __ballot_sync(0xFFFFFFFFu, equal(r.head)) : 0u;
  uint32_t gt_total[kWords], eq_total[kWords];  // the warp's counts per vector, bytes as above
  uint32_t warp_gt = __popc(head_gt), warp_eq = __popc(head_eq);
#pragma unroll
  for (int w = 0; w < kWords; ++w) {
    gt_total[w] = __shfl_sync(0xFFFFFFFFu, gt_incl[w], 31);
    eq_total[w] = kSplitTies ? __shfl_sync(0xFFFFFFFFu, eq_incl[w], 31) : 0u;
    warp_gt += __dp4a(gt_total[w], 0x01010101u, 0u);
    warp_eq += __dp4a(eq_total[w], 0x01010101u, 0u);
    gt[w] = gt_incl[w] - gt[w];  // exclusive now (no byte borrows: each byte of incl holds its own)
    eq[w] = eq_incl[w] - eq[w];
  }
  if (lane == 0) s.warp_sums[warp] = warp_gt | (warp_eq << 16);
  __syncthreads();
  const uint32_t before = __reduce_add_sync(0xFFFFFFFFu, lane < warp ? s.warp_sums[lane] : 0u);
  uint32_t n_gt = before & 0xFFFFu;  // above-tau and equal keys before this warp's next keys
  uint32_t n_eq = before >> 16;

  auto put = [&](uint32_t key, uint32_t offset, uint32_t g, uint32_t e) {
    // g / e: keys above tau / equal to it before this one.
    const bool take_above = above(key);
    const bool take = take_above || (equal(key) && e < sel.ties);
    const uint32_t slot = take_above ? (kSplitTies ? g + min(e, sel.ties) : g) : g + e;
    store_if(take, reinterpret_cast<uint32_t*>(&s.row.out_idx[slot]), offset);
    if (kKeys) store_if(take, &s.row.out_key[slot], key);
  };
  const uint32_t lanes_below = (1u << lane) - 1u;
  put(r.head, lane, n_gt + __popc(head_gt & lanes_below), n_eq + __popc(head_eq & lanes_below));
  n_gt += __popc(head_gt);
  n_eq += __popc(head_eq);
  if (!r.live()) return;
#pragma unroll
  for (int j = 0; j < kVecs; ++j) {
    uint32_t g = n_gt + byte_of(gt[j / 4], j % 4);
    uint32_t e = n_eq + byte_of(eq[j / 4], j % 4);
#pragma unroll
    for (int c = 0; c < 4; ++c) {
      const uint32_t key = r.key[j][c];
      put(key, r.offset(j, c), g, e);
      g += above(key) ? 1u : 0u;
      e += equal(key) ? 1u : 0u;
    }
    n_gt += byte_of(gt_total[j / 4], j % 4);
    n_eq += byte_of(eq_total[j / 4], j % 4);
  }
}

// kSorted (p.sorted) is a template argument: the block sort of write_sorted_row needs registers
// the unsorted kernel then does not reserve.
template <int kThreads, int kVecs, bool kSorted>
__global__ void __launch_bounds__(kThreads, register_min_ctas(kThreads, kVecs))
    topk_register_kernel(const TopkParams p) {
  extern __shared__ uint4 smem_dyn[];
  auto& s = *reinterpret_cast<RegisterSmem<kThreads>*>(smem_dyn);
  // The last rows first: in causal prefill they are the longest, and the short ones then fill the
  // last wave.
  const int64_t row = p.num_rows - 1 - blockIdx.x;
  const RowRange range = row_range(p, row);
  const float* first = p.logits + row * p.ldl + range.ks;
  const uint32_t k = static_cast<uint32_t>(p.k);
  uint32_t count = k;
  if (range.len <= k) {
    stage_whole_row<kThreads>(p, first, range.len, s.row);
    count = range.len;
  } else {
    RegisterRow<kVecs> r;
    load_row<kThreads>(first, range.len, s.row.u.select.hist, r);
    const Selection sel = select_threshold<kThreads>(r, k, s);
    if (sel.split_ties) {
      emit_selection<kThreads, kVecs, true, kSorted>(r, sel, s);
    } else {
      emit_selection<kThreads, kVecs, false, kSorted>(r, sel, s);
    }
  }
  __syncthreads();
  if constexpr (kSorted) {
    write_sorted_row<kThreads>(p, row, range.ks, count, s.row);
  } else {
    write_unsorted_row<kThreads>(p, row, range.ks, count, s.row);
  }
}

template <int kThreads, int kVecs>
Status launch_register(const TopkParams& p) {
  constexpr int64_t kCap = register_cap_keys(kThreads, kVecs);
  if (p.num_keys > kCap) {
    return invalid_argument("topk: the register kernel of " + std::to_string(kThreads) + " threads holds rows of at most " +
                            std::to_string(kCap) + " keys, num_keys is " + std::to_string(p.num_keys));
  }
  auto* kernel = p.sorted ? topk_register_kernel<kThreads, kVecs, true> : topk_register_kernel<kThreads, kVecs, false>;
  return launch_kernel("topk_register_kernel", kernel, static_cast<unsigned>(p.num_rows), kThreads,
                       sizeof(RegisterSmem<kThreads>), p.stream, p);
}

}  // namespace

Status launch_register_kernel(const TopkParams& p, int threads, int vecs) {
  if (p.num_rows == 0) return Status::ok();
  if (vecs == kRegisterVecsPerThread) {
    switch (threads) {
      case 256:
        return launch_register<256, kRegisterVecsPerThread>(p);
      case 512:
        return launch_register<512, kRegisterVecsPerThread>(p);
      case 1024:
        return launch_register<1024, kRegisterVecsPerThread>(p);
      default:
        break;
    }
  }
#if defined(FP8DSA_TUNING)
  // Other shapes of the same cap, for the timing driver: 16 keys a thread (twice the threads) and
  // 64 (half the threads, 128 registers).
  if (vecs == 4 && threads == 512) return launch_register<512, 4>(p);
  if (vecs == 4 && threads == 1024) return launch_register<1024, 4>(p);
  if (vecs == 16 && threads == 256) return launch_register<256, 16>(p);
  if (vecs == 16 && threads == 512) return launch_register<512, 16>(p);
#endif
  return invalid_argument("topk: the register kernel has no instance of " + std::to_string(threads) + " threads x " +
                          std::to_string(vecs) + " vectors (256, 512 or 1024 threads x " +
                          std::to_string(kRegisterVecsPerThread) + ")");
}

}  // namespace fp8dsa::detail::topk
