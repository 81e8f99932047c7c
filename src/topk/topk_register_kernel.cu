// One CTA per row with the whole row on chip (rows of up to 4 x (kVecs + kSmemVecs) x kThreads keys),
// read once from global memory.
//
//   load     the row's body (from its first 16-byte boundary) as 4-key vectors: warp w holds body
//            vectors [w, w + 1) x 32 (kVecs + kSmemVecs), its vector j of lane l being vector 32 j + l
//            of that block, so every load instruction reads 512 contiguous bytes; vectors j < kVecs
//            are loaded into registers, the others copied into shared memory (cp.async); both are
//            kept as order keys. The 0-3 keys before the boundary (the head) sit in warp 0's lanes.
//   select   the three radix levels of config.h, each a histogram over the keys (only keys of the
//            bucket chosen so far add to it) and find_threshold_bin_lean: tau, the k-th largest key,
//            and `ties`, the keys equal to tau that complete the k (a level whose threshold bucket is
//            taken whole ends the select early)
//   emit     the keys above tau and the first `ties` keys equal to it, in ascending key order, into
//            the output slots (ranks from byte-packed warp scans and one exchange of the warps'
//            counts: no atomics decide a slot, so reruns are bitwise identical)
//   write    as the row kernel (sorted or not, through the page table)
//
// No candidate list and no fallback: every level reads all the keys, so a threshold bucket of any
// size (ties, constant rows) is exact.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <cuda_runtime.h>

#include "core/cuda_check.h"
#include "core/launch.cuh"
#include "hopper/cp_async.cuh"
#include "topk/config.h"
#include "topk/launch.h"
#include "topk/radix_select.cuh"
#include "topk/row_select.cuh"

namespace fp8dsa::detail::topk {
namespace {

// The kernel's dynamic shared memory: RegisterSmem, then the shared-memory key vectors.
extern __shared__ uint4 register_smem[];

// RowSmem's smallest candidate list (this kernel keeps none) that leaves its layout as it is.
constexpr int kNoCandidates = 4;

template <int kThreads>
struct RegisterSmem {
  RowSmem<kThreads, kNoCandidates> row;  // histogram, the k output pairs, the sort
  // Per warp: the threshold search's bin sums, then the emit's keys above tau | equal to it << 16.
  uint32_t warp_sums[kThreads / 32];
  uint32_t head_keys[4];  // the keys before the row's first 16-byte boundary (0-3), then 0
};

// A register kernel's shape: kThreads threads, each holding kVecs 4-key vectors in registers and
// kSmemVecs more in shared memory (after RegisterSmem, [kSmemVecs][kThreads] vectors).
template <int kThreads_, int kVecs_, int kSmemVecs_>
struct RegisterShape {
  static constexpr int kThreads = kThreads_;
  static constexpr int kVecs = kVecs_;
  static constexpr int kSmemVecs = kSmemVecs_;
  static constexpr int kAllVecs = kVecs + kSmemVecs;
  static constexpr size_t kHeadBytes = (sizeof(RegisterSmem<kThreads>) + 15) / 16 * 16;
  static constexpr size_t kSmemBytes = kHeadBytes + size_t{16} * kSmemVecs * kThreads;
  // CTAs an SM holds: as the register plan allows, within an SM's 228 KB (1 KB of it reserved a CTA).
  static constexpr int kSmemCtas = static_cast<int>(228 * 1024 / (kSmemBytes + 1024));
  static constexpr int kRegisterCtas = register_min_ctas(kThreads, kVecs);
  static constexpr int kMinCtas = kRegisterCtas < kSmemCtas ? kRegisterCtas : kSmemCtas;
  static_assert(kThreads % 32 == 0 && kThreads <= 1024 && kVecs >= 1 && kSmemVecs >= 0, "whole warps, a key vector");
  static_assert(kSmemCtas >= 1 && kSmemBytes <= 227 * 1024, "a CTA fits the shared memory of a block");
};

// A key of the row as held on chip: order_key's order (NaN lowest, -0 == +0) with NaN at 1, so that
// 0 marks a slot past the row (a pad), below every key. Five instructions to order_key's eight:
// adding +0 turns -0 into +0 and keeps every other value.
__device__ __forceinline__ uint32_t present_key(float x) {
  const uint32_t u = __float_as_uint(__fadd_rn(x, 0.0f));
  const uint32_t key = u ^ (static_cast<uint32_t>(static_cast<int32_t>(u) >> 31) | 0x80000000u);
  return x != x ? 1u : key;
}

// The keys of 4 floats, the lanes past the first n (0..4) pads.
__device__ __forceinline__ uint4 present_keys(const float4& x, uint32_t n) {
  return make_uint4(n > 0u ? present_key(x.x) : 0u, n > 1u ? present_key(x.y) : 0u, n > 2u ? present_key(x.z) : 0u,
                    n > 3u ? present_key(x.w) : 0u);
}

// *dst = value where `hit`: one predicated store (a branch around it costs three more instructions
// a key).
__device__ __forceinline__ void store_if(bool hit, uint32_t* dst, uint32_t value) {
  asm volatile("{\n\t.reg .pred p;\n\tsetp.ne.u32 p, %0, 0;\n\t@p st.shared.u32 [%1], %2;\n\t}" ::"r"(
                   static_cast<uint32_t>(hit)),
               "r"(static_cast<uint32_t>(__cvta_generic_to_shared(dst))), "r"(value)
               : "memory");
}

__device__ __forceinline__ uint32_t byte_of(uint32_t word, int b) { return (word >> (8 * b)) & 0xFFu; }

// count += step where key >= tau: a compare and a predicated add (the generic form, a 0/1 select
// and an add, took about twice the instructions a key).
__device__ __forceinline__ void add_if_at_least(uint32_t key, uint32_t tau, uint32_t& count, uint32_t step) {
  asm("{\n\t.reg .pred p;\n\tsetp.ge.u32 p, %1, %2;\n\t@p add.u32 %0, %0, %3;\n\t}"
      : "+r"(count)
      : "r"(key), "r"(tau), "r"(step));
}

// The selection's emit of one key, walking a lane's keys backwards when every key >= tau is taken:
// where key >= tau, the slot's shared-memory address steps back one word, the offset is stored at
// `kIdxDelta` bytes past it (out_idx) and, with kKeys, the key at it (out_key). Four instructions a
// key where the generic put took about nine.
template <bool kKeys, int kIdxDelta>
__device__ __forceinline__ void put_if_at_least(uint32_t key, uint32_t tau, uint32_t& slot_addr, uint32_t offset) {
  if constexpr (kKeys) {
    asm volatile(
        "{\n\t.reg .pred p;\n\tsetp.ge.u32 p, %1, %2;\n\t@p sub.u32 %0, %0, 4;\n\t"
        "@p st.shared.u32 [%0+%4], %3;\n\t@p st.shared.u32 [%0], %1;\n\t}"
        : "+r"(slot_addr)
        : "r"(key), "r"(tau), "r"(offset), "n"(kIdxDelta)
        : "memory");
  } else {
    asm volatile(
        "{\n\t.reg .pred p;\n\tsetp.ge.u32 p, %1, %2;\n\t@p sub.u32 %0, %0, 4;\n\t"
        "@p st.shared.u32 [%0+%4], %3;\n\t}"
        : "+r"(slot_addr)
        : "r"(key), "r"(tau), "r"(offset), "n"(kIdxDelta)
        : "memory");
  }
}

// The row on chip. Body vector v (keys num_head + 4v .. num_head + 4v + 3 of the row) is vector j of
// lane l of warp w for v = (w kAllVecs + j) 32 + l: in key[j] for j < kVecs, else in shared memory.
// The head keys (before the body) are in RegisterSmem::head_keys, and little else is held in
// registers (the shape with keys in shared memory spilled while the head key and the row's vector
// count were).
template <class Shape>
struct RegisterRow {
  uint4 key[Shape::kVecs];  // pads (0) past the row's end
  uint32_t num_head;
  // Whether this warp holds a key of the row (the same in every lane). The passes skip the warps
  // past the row's end and run over every vector of the others (a branch a vector costs more than
  // the pads it skips, which lie in one warp of the row).
  bool live;

  __device__ __forceinline__ static uint32_t vec(int j) {
    return (threadIdx.x >> 5) * (32u * Shape::kAllVecs) + (threadIdx.x & 31u) + 32u * j;
  }
  // Vector j >= kVecs: [kSmemVecs][kThreads] vectors after RegisterSmem (a constant offset, no pointer
  // held in registers).
  __device__ __forceinline__ static uint4& smem_vec(int j) {
    return register_smem[Shape::kHeadBytes / 16 + (j - Shape::kVecs) * Shape::kThreads + threadIdx.x];
  }
  // The 4 keys of vector j (j a constant once unrolled).
  __device__ __forceinline__ uint4 keys(int j) const {
    return j < Shape::kVecs ? key[j < Shape::kVecs ? j : 0] : smem_vec(j);
  }
  // This lane's head key (lanes 0-3 of warp 0), 0 elsewhere.
  __device__ __forceinline__ static uint32_t head() {
    const auto& s = *reinterpret_cast<const RegisterSmem<Shape::kThreads>*>(register_smem);
    return threadIdx.x < 4u ? s.head_keys[threadIdx.x] : 0u;
  }
  // Key c of vector j, as an offset from the row's first key.
  __device__ __forceinline__ uint32_t offset(int j, int c) const { return num_head + 4u * vec(j) + c; }
};

// Issues every load of the row (a 16-byte load or cp.async per whole vector, scalar loads for the
// last partial one and the head), zeroes the histogram while they are in flight, then turns them
// into keys (the shared-memory vectors in place).
template <class Shape>
__device__ __forceinline__ void load_row(const float* first, uint32_t len, RegisterSmem<Shape::kThreads>& s,
                                         RegisterRow<Shape>& r) {
  const uint32_t misalign = static_cast<uint32_t>(reinterpret_cast<uintptr_t>(first) >> 2) & 3u;
  r.num_head = min((4u - misalign) & 3u, len);
  const float* body = first + r.num_head;  // 16-byte aligned
  const uint32_t body_len = len - r.num_head;
  const uint32_t full = body_len / 4u;
  const uint32_t nvec = (body_len + 3u) / 4u;
  const uint32_t warp_vec0 = (threadIdx.x >> 5) * (32u * Shape::kAllVecs);
  r.live = warp_vec0 < nvec;
  // Keys of vector v that lie in the row (4 for a whole vector).
  auto in_row = [&](uint32_t v) { return v < full ? 4u : (v < nvec ? body_len - 4u * v : 0u); };
  auto load_partial = [&](uint32_t v) {
    const uint32_t n = in_row(v);
    const float* p = body + 4ull * v;
    return make_float4(n > 0u ? __ldg(p) : 0.0f, n > 1u ? __ldg(p + 1) : 0.0f, n > 2u ? __ldg(p + 2) : 0.0f, 0.0f);
  };
#pragma unroll
  for (int j = Shape::kVecs; j < Shape::kAllVecs; ++j) {
    const uint32_t v = r.vec(j);
    if (r.live && v < full) {
      hopper::cp_async_16_zfill(static_cast<uint32_t>(__cvta_generic_to_shared(&r.smem_vec(j))),
                                reinterpret_cast<const float4*>(body) + v, true);
    }
  }
  hopper::cp_async_commit_group();
  float4 x[Shape::kVecs];
#pragma unroll
  for (int j = 0; j < Shape::kVecs; ++j) {
    const uint32_t v = r.vec(j);
    x[j] = v < full ? __ldg(reinterpret_cast<const float4*>(body) + v) : load_partial(v);
  }
  if (threadIdx.x < 4u) {
    s.head_keys[threadIdx.x] = threadIdx.x < r.num_head ? present_key(__ldg(first + threadIdx.x)) : 0u;
  }
  static_assert(kNumBins % 4 == 0, "the histogram is zeroed as 16-byte vectors");
  for (int b = threadIdx.x; b < kNumBins / 4; b += Shape::kThreads) {
    reinterpret_cast<uint4*>(s.row.u.select.hist)[b] = make_uint4(0u, 0u, 0u, 0u);
  }
  __syncthreads();

  if (!r.live) return;  // the passes never read this warp's vectors
#pragma unroll
  for (int j = 0; j < Shape::kVecs; ++j) {
    const bool whole = warp_vec0 + 32u * j + 31u < full;  // every lane's vector (the same in every lane)
    r.key[j] = present_keys(x[j], whole ? 4u : in_row(r.vec(j)));
  }
  hopper::cp_async_wait_group<0>();  // this thread's copies: it alone reads its shared vectors
#pragma unroll
  for (int j = Shape::kVecs; j < Shape::kAllVecs; ++j) {
    const uint32_t v = r.vec(j);
    if (v < full) {
      const uint4 raw = r.smem_vec(j);
      r.smem_vec(j) = present_keys(make_float4(__uint_as_float(raw.x), __uint_as_float(raw.y), __uint_as_float(raw.z),
                                               __uint_as_float(raw.w)),
                                   4u);
    } else {
      r.smem_vec(j) = present_keys(load_partial(v), in_row(v));
    }
  }
}

// The bin past the histogram's last, where a level counts the keys outside the bucket it refines:
// the row's candidate list, which this kernel does not use otherwise.
inline constexpr uint32_t kDiscardBin = kNumBins;
// Level 2's first bin: its 1024 digits take the histogram's top half (see histogram_level).
inline constexpr uint32_t kLastDigitBin0 = kNumBins - (1u << level_shift(1));
template <int kThreads>
constexpr bool discard_bin_follows_histogram() {
  using Select = decltype(RowSmem<kThreads, kNoCandidates>::u.select);
  return offsetof(Select, cand_key) == sizeof(uint32_t) * kDiscardBin;
}

// Adds the keys whose digits above level kLevel's are `prefix` to the level's histogram; the others
// add to kDiscardBin (an increment of 1 at one address a lane is one ATOMS.POPC.INC a warp, the
// lanes of one address counted together; ptxas turns a predicated one into a branch, three more
// instructions a key). The pads of the row's last live warp may add to bin 0 of a level: they rank
// below every key of the row, which holds more than k keys, so no threshold lands on them.
template <int kLevel, class Shape>
__device__ __forceinline__ void histogram_level(const RegisterRow<Shape>& r, uint32_t prefix, uint32_t* hist) {
  static_assert(discard_bin_follows_histogram<Shape::kThreads>(), "kDiscardBin is the word after the histogram");
  auto add = [&](uint32_t key) {
    // Below 2^(bits below the chosen digits) exactly when key's chosen digits are the prefix's.
    const uint32_t rest = key ^ prefix;
    uint32_t bin;
    if constexpr (kLevel == 0) {
      bin = rest >> level_shift(0);
    } else if constexpr (level_shift(kLevel) + 11 == level_shift(kLevel - 1)) {
      // An 11-bit digit: rest >> shift is below 2^11 = kDiscardBin exactly when the key is in the
      // bucket, so a minimum replaces the compare and select (one instruction a key fewer).
      static_assert(kDiscardBin == 1u << 11, "the 11-bit digit's first value past the bucket");
      bin = min(rest >> level_shift(kLevel), kDiscardBin);
    } else {
      // The last, 10-bit digit, binned at kLastDigitBin0 + digit: (key - prefix) + kLastDigitBin0
      // is below kDiscardBin for the bucket's keys and at or above it for every key above the
      // bucket; keys at most 1024 below the bucket wrap into bins [0, kLastDigitBin0), under the
      // bucket's bins, where the threshold search (from the top, the bucket holding enough keys)
      // never looks. A subtraction and a minimum replace the compare and select.
      static_assert(kLevel == 2 && level_shift(2) == 0 && level_shift(1) == 10, "the last digit is bits 0-9");
      bin = min(key - prefix + kLastDigitBin0, kDiscardBin);
    }
    atomicAdd(&hist[bin], 1u);
  };
  const uint32_t head = r.head();
  if (head != 0u) add(head);
  if (!r.live) return;
#pragma unroll
  for (int j = 0; j < Shape::kAllVecs; ++j) {
    const uint4 k4 = r.keys(j);
    add(k4.x);
    add(k4.y);
    add(k4.z);
    add(k4.w);
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

template <class Shape>
__device__ __forceinline__ Selection select_threshold(const RegisterRow<Shape>& r, uint32_t k,
                                                      RegisterSmem<Shape::kThreads>& s) {
  constexpr int kThreads = Shape::kThreads;
  uint32_t* hist = s.row.u.select.hist;
  histogram_level<0>(r, 0u, hist);
  __syncthreads();
  const Threshold t0 = find_threshold_bin_lean<kThreads, true>(hist, k, s.warp_sums, &s.row.slots[0]);
  const uint32_t prefix1 = t0.bin << level_shift(0);
  const uint32_t k0 = k - t0.above;
  // A bucket taken whole: the selection is the keys >= its lowest. (Never bucket 0, of the NaNs and
  // pads: with the keys above it, that bucket holds every key of the row, more than k.)
  if (t0.count == k0) return {prefix1, 0u, false};

  histogram_level<1>(r, prefix1, hist);
  __syncthreads();
  const Threshold t1 = find_threshold_bin_lean<kThreads, true>(hist, k0, s.warp_sums, &s.row.slots[1]);
  const uint32_t prefix2 = prefix1 | (t1.bin << level_shift(1));
  const uint32_t k1 = k0 - t1.above;
  if (t1.count == k1) return {prefix2, 0u, false};

  histogram_level<2>(r, prefix2, hist);
  __syncthreads();
  const Threshold t2 = find_threshold_bin_lean<kThreads, false>(hist, k1, s.warp_sums, &s.row.slots[2]);
  const uint32_t ties = k1 - t2.above;
  return {prefix2 | (t2.bin - kLastDigitBin0), ties, ties < t2.count};
}

// Writes the selection in ascending key order: the offsets into s.row.out_idx[0, k), with kKeys
// their keys into s.row.out_key. A selected key's slot is the number of selected keys before it:
// the keys above tau before it plus min(ties, keys equal to tau before it). A lane gets the counts
// up to the end of its vector j from the earlier warps' totals, the warp's earlier vectors and an
// inclusive warp scan of per-vector counts (one byte a vector), then walks its 4 keys backwards.
template <class Shape, bool kSplitTies, bool kKeys>
__device__ __forceinline__ void emit_selection(const RegisterRow<Shape>& r, Selection sel,
                                               RegisterSmem<Shape::kThreads>& s) {
  constexpr int kWords = (Shape::kAllVecs + 3) / 4;
  const uint32_t lane = threadIdx.x & 31u;
  const uint32_t warp = threadIdx.x >> 5;
  const uint32_t tau = sel.tau;
  // Without split ties one class suffices: the keys >= tau. (Pads, 0, are below tau.)
  auto above = [tau](uint32_t key) { return kSplitTies ? key > tau : key >= tau; };
  auto equal = [tau](uint32_t key) { return kSplitTies && key == tau; };
  auto count = [&](const uint4& k4, auto pred) {
    return static_cast<uint32_t>(pred(k4.x)) + static_cast<uint32_t>(pred(k4.y)) + static_cast<uint32_t>(pred(k4.z)) +
           static_cast<uint32_t>(pred(k4.w));
  };

  uint32_t gt[kWords], eq[kWords];  // byte j % 4 of word j / 4: keys of vector j, then inclusive over lanes
#pragma unroll
  for (int w = 0; w < kWords; ++w) gt[w] = eq[w] = 0u;
  if (r.live) {
#pragma unroll
    for (int j = 0; j < Shape::kAllVecs; ++j) {
      const uint4 k4 = r.keys(j);
      if constexpr (kSplitTies) {
        gt[j / 4] += count(k4, above) << (8 * (j % 4));
        eq[j / 4] += count(k4, equal) << (8 * (j % 4));
      } else {
        const uint32_t step = 1u << (8 * (j % 4));
        add_if_at_least(k4.x, tau, gt[j / 4], step);
        add_if_at_least(k4.y, tau, gt[j / 4], step);
        add_if_at_least(k4.z, tau, gt[j / 4], step);
        add_if_at_least(k4.w, tau, gt[j / 4], step);
      }
    }
  }
#pragma unroll
  for (uint32_t d = 1; d < 32u; d <<= 1) {
#pragma unroll
    for (int w = 0; w < kWords; ++w) {
      const uint32_t yg = __shfl_up_sync(0xFFFFFFFFu, gt[w], d);
      if (lane >= d) gt[w] += yg;
      if (kSplitTies) {
        const uint32_t ye = __shfl_up_sync(0xFFFFFFFFu, eq[w], d);
        if (lane >= d) eq[w] += ye;
      }
    }
  }
  const uint32_t head = r.head();
  const uint32_t head_gt = __ballot_sync(0xFFFFFFFFu, above(head));
  const uint32_t head_eq = kSplitTies ? __ballot_sync(0xFFFFFFFFu, equal(head)) : 0u;
  uint32_t warp_gt = __popc(head_gt), warp_eq = __popc(head_eq);
#pragma unroll
  for (int w = 0; w < kWords; ++w) {
    warp_gt += __dp4a(__shfl_sync(0xFFFFFFFFu, gt[w], 31), 0x01010101u, 0u);
    if (kSplitTies) warp_eq += __dp4a(__shfl_sync(0xFFFFFFFFu, eq[w], 31), 0x01010101u, 0u);
  }
  if (lane == 0) s.warp_sums[warp] = warp_gt | (warp_eq << 16);
  __syncthreads();
  const uint32_t before = __reduce_add_sync(0xFFFFFFFFu, lane < warp ? s.warp_sums[lane] : 0u);
  uint32_t n_gt = before & 0xFFFFu;  // keys above tau / equal to it before this warp's next keys
  uint32_t n_eq = before >> 16;

  // g / e: the keys above tau / equal to it before `key`.
  auto put = [&](uint32_t key, uint32_t offset, uint32_t g, uint32_t e) {
    const bool is_above = above(key);
    const bool take = is_above || (equal(key) && e < sel.ties);
    const uint32_t slot = is_above ? (kSplitTies ? g + min(e, sel.ties) : g) : g + e;
    store_if(take, reinterpret_cast<uint32_t*>(&s.row.out_idx[slot]), offset);
    if (kKeys) store_if(take, &s.row.out_key[slot], key);
  };
  const uint32_t lanes_below = (1u << lane) - 1u;
  using Row = RowSmem<Shape::kThreads, kNoCandidates>;
  constexpr int kOutIdxDelta = static_cast<int>(offsetof(Row, out_idx) - offsetof(Row, out_key));
  static_assert(kOutIdxDelta == static_cast<int>(sizeof(uint32_t)) * kMaxK, "out_idx follows out_key");
  const uint32_t out_key_addr = static_cast<uint32_t>(__cvta_generic_to_shared(s.row.out_key));
  put(head, lane, n_gt + __popc(head_gt & lanes_below), n_eq + __popc(head_eq & lanes_below));
  n_gt += __popc(head_gt);
  n_eq += __popc(head_eq);
  if (!r.live) return;
  uint32_t total_gt = 0u, total_eq = 0u;  // the warp's counts of the current word's vectors
#pragma unroll
  for (int j = 0; j < Shape::kAllVecs; ++j) {
    if (j % 4 == 0) {
      total_gt = __shfl_sync(0xFFFFFFFFu, gt[j / 4], 31);
      if (kSplitTies) total_eq = __shfl_sync(0xFFFFFFFFu, eq[j / 4], 31);
    }
    // Counts up to and including this lane's vector j; each key taken off going backwards leaves
    // the counts before it.
    uint32_t g = n_gt + byte_of(gt[j / 4], j % 4);
    const uint4 k4 = r.keys(j);
    const uint32_t key[4] = {k4.x, k4.y, k4.z, k4.w};
    if constexpr (kSplitTies) {
      uint32_t e = n_eq + byte_of(eq[j / 4], j % 4);
#pragma unroll
      for (int c = 3; c >= 0; --c) {
        g -= above(key[c]) ? 1u : 0u;
        e -= equal(key[c]) ? 1u : 0u;
        put(key[c], r.offset(j, c), g, e);
      }
    } else {
      // The slot past this lane's last key of vector j, as out_key's shared-memory address.
      uint32_t slot_addr = out_key_addr + 4u * g;
#pragma unroll
      for (int c = 3; c >= 0; --c) put_if_at_least<kKeys, kOutIdxDelta>(key[c], tau, slot_addr, r.offset(j, c));
    }
    n_gt += byte_of(total_gt, j % 4);
    n_eq += byte_of(total_eq, j % 4);
  }
}

// kSorted (p.sorted) is a template argument: the block sort of write_sorted_row needs registers
// the unsorted kernel then does not reserve.
template <class Shape, bool kSorted>
__global__ void __launch_bounds__(Shape::kThreads, Shape::kMinCtas) topk_register_kernel(const TopkParams p) {
  constexpr int kThreads = Shape::kThreads;
  auto& s = *reinterpret_cast<RegisterSmem<kThreads>*>(register_smem);
  // The last rows first: in causal prefill they are the longest, and the short ones then fill the
  // last wave.
  auto this_row = [&] { return p.num_rows - 1 - static_cast<int64_t>(blockIdx.x); };
  uint32_t count = static_cast<uint32_t>(p.k);
  {
    const int64_t row = this_row();
    const RowRange range = row_range(p, row);
    const float* first = p.logits + row * p.logits_stride + range.ks;
    if (range.len <= count) {
      stage_whole_row<kThreads>(p, first, range.len, s.row);
      count = range.len;
    } else {
      RegisterRow<Shape> r;
      load_row(first, range.len, s, r);
      const Selection sel = select_threshold(r, count, s);
      if (sel.split_ties) {
        emit_selection<Shape, true, kSorted>(r, sel, s);
      } else {
        emit_selection<Shape, false, kSorted>(r, sel, s);
      }
    }
  }
  __syncthreads();
  // The row and its bounds read again rather than held in registers across the select.
  const int64_t row = this_row();
  const int64_t ks = row_range(p, row).ks;
  if constexpr (kSorted) {
    write_sorted_row<kThreads>(p, row, ks, count, s.row);
  } else {
    write_unsorted_row<kThreads>(p, row, ks, count, s.row);
  }
}

template <int kThreads, int kVecs, int kSmemVecs>
Status launch_register(const TopkParams& p) {
  using Shape = RegisterShape<kThreads, kVecs, kSmemVecs>;
  constexpr int64_t kCap = register_cap_keys(kThreads, kVecs, kSmemVecs);
  if (p.num_keys > kCap) {
    return invalid_argument("topk: the register kernel of " + std::to_string(kThreads) + " threads x " +
                            std::to_string(kVecs + kSmemVecs) + " vectors holds rows of at most " +
                            std::to_string(kCap) + " keys, num_keys is " + std::to_string(p.num_keys));
  }
  auto* kernel = p.sorted ? topk_register_kernel<Shape, true> : topk_register_kernel<Shape, false>;
  return launch_kernel("topk_register_kernel", kernel, static_cast<unsigned>(p.num_rows), kThreads, Shape::kSmemBytes,
                       p.stream, p);
}

}  // namespace

Status launch_register_kernel(const TopkParams& p, int threads, int vecs, int smem_vecs) {
  if (p.num_rows == 0) return Status::ok();
  constexpr int kVecs = kRegisterVecsPerThread;
  if (vecs == kVecs && smem_vecs == 0) {
    switch (threads) {
      case 256:
        return launch_register<256, kVecs, 0>(p);
      case 512:
        return launch_register<512, kVecs, 0>(p);
      case 1024:
        return launch_register<1024, kVecs, 0>(p);
      default:
        break;
    }
  }
  if (threads == kRegisterLongThreads && vecs == kRegisterLongVecs && smem_vecs == kRegisterLongSmemVecs) {
    return launch_register<kRegisterLongThreads, kRegisterLongVecs, kRegisterLongSmemVecs>(p);
  }
#if defined(FP8DSA_TUNING)
  // Other shapes of the same caps, for the timing driver: 16 keys a thread in registers (twice the
  // threads), 64 (half the threads, 128 registers), and 8K keys a CTA of 256 threads in shared memory.
  if (smem_vecs == 0) {
    if (vecs == 4 && threads == 512) return launch_register<512, 4, 0>(p);
    if (vecs == 4 && threads == 1024) return launch_register<1024, 4, 0>(p);
    if (vecs == 16 && threads == 256) return launch_register<256, 16, 0>(p);
    if (vecs == 16 && threads == 512) return launch_register<512, 16, 0>(p);
  }
  if (vecs == kVecs && smem_vecs == 8 && threads == 256) return launch_register<256, kVecs, 8>(p);
#endif
  return invalid_argument("topk: the register kernel has no instance of " + std::to_string(threads) + " threads x " +
                          std::to_string(vecs) + " + " + std::to_string(smem_vecs) + " vectors");
}

std::vector<LaunchConfig> register_launch_configs(int64_t num_keys) {
  struct Shape {
    int threads, vecs, smem_vecs;
  };
  std::vector<Shape> shapes{{256, kRegisterVecsPerThread, 0},
                            {512, kRegisterVecsPerThread, 0},
                            {1024, kRegisterVecsPerThread, 0},
                            {kRegisterLongThreads, kRegisterLongVecs, kRegisterLongSmemVecs}};
#if defined(FP8DSA_TUNING)
  shapes.insert(shapes.end(), {{512, 4, 0}, {1024, 4, 0}, {256, 16, 0}, {512, 16, 0}, {256, kRegisterVecsPerThread, 8}});
#endif
  std::vector<LaunchConfig> configs;
  for (const Shape& shape : shapes) {
    if (num_keys > register_cap_keys(shape.threads, shape.vecs, shape.smem_vecs)) continue;
    LaunchConfig c;
    c.registers = true;
    c.threads = shape.threads;
    c.register_vecs = shape.vecs;
    c.register_smem_vecs = shape.smem_vecs;
    configs.push_back(c);
  }
  return configs;
}

std::string register_config_name(const LaunchConfig& c) {
  return "registers t" + std::to_string(c.threads) + " x" + std::to_string(c.register_vecs) + "+" +
         std::to_string(c.register_smem_vecs);
}

}  // namespace fp8dsa::detail::topk
