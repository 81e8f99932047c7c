// The online softmax of one m64n64 score tile over a thread's two rows, P into its slot, and the
// rows' results at the end, for the warpgroups that score in the 64-head kernels: the seesaw
// kernel's math groups (seesaw_kernel.cuh: the two halves and store_p, its bound exchange between
// them) and the V3.2-row kernel's score group (v32_kernel.cuh: softmax_tile, publish_p,
// write_row_results). (The pipelined tile loops stay in the kernels: passed through a shared
// template as lambdas, they spilled.) A thread holds rows (heads)
// row_lo and row_lo + 8 of the accumulator and 16 of the tile's 64 keys (hopper/wgmma_layout.h:
// acc_row, acc_col); the quad of 4 lanes sharing a row holds all of its keys.
#pragma once

#include <cmath>
#include <cstdint>

#include <cuda_fp16.h>

#include "hopper/mbarrier.cuh"
#include "hopper/smem_access.cuh"
#include "hopper/warpgroup.cuh"
#include "sparse_mla/kernel_args.h"
#include "sparse_mla/online_softmax.cuh"
#include "sparse_mla/value_layout.h"

namespace fp8dsa::detail::sparse_mla {

// A thread's two rows' softmax state lives in the kernel as five float[2] arrays: thread_max (the
// exact max of its raw scores, -> max_logits), m_bound (running upper bound of the row max,
// scaled), m_ref (the max P is taken against), sum_f32 (its part of sum(P), -> lse) and sum_e4m3
// (of the quantised P; used with kSumQuantised only: the 576-byte kernel normalises out by it, the
// V3.2 kernel's value groups by the weights their P_b apply). Gathered into one struct, they made
// ptxas schedule the 576-byte kernel's score group differently, 1% slower on the H200.

// softmax_tile's default on_alpha: nothing.
struct NoAlphaHook {
  __device__ __forceinline__ void operator()(const float (&)[2]) const {}
};

// The first half of a tile's softmax: the keys the ballots mark invalid (bit l of valid_even /
// valid_odd: key 2l / 2l + 1) masked to -inf, thread_max updated, and upper bounds of the two rows'
// maxima over the tile (quad_max_bounds; unscaled scores).
__device__ __forceinline__ float2 mask_and_bound_rows(float (&s)[32], uint32_t valid_even, uint32_t valid_odd,
                                                      int lane, float (&thread_max)[2]) {
  if ((valid_even & valid_odd) != 0xffffffffu) {  // warp-uniform; most tiles are all valid
    const uint32_t even = valid_even >> (lane % 4), odd = valid_odd >> (lane % 4);
#pragma unroll
    for (int r = 0; r < 32; ++r) {
      // register r is key 2 * ((r / 4) * 4 + lane % 4) + r % 2
      if ((((r % 2) ? odd : even) >> ((r / 4) * 4) & 1u) == 0) s[r] = -INFINITY;
    }
  }
  const auto max_op = [](float x, float y) { return fmaxf(x, y); };
  const float tile_max[2] = {reduce_row_half(s, 0, max_op), reduce_row_half(s, 1, max_op)};
#pragma unroll
  for (int h = 0; h < 2; ++h) thread_max[h] = fmaxf(thread_max[h], tile_max[h]);
  return quad_max_bounds(tile_max[0], tile_max[1]);
}

// The second half: P = exp2(s * scale_log2 + bias) as e4m3 A-fragment words in pf (key_order.h) and
// the row sums, rescaled by alpha first. With kFmaExpEvery = k > 0, the exponentials of registers
// r = k - 1, 2k - 1, ... go through fma_exp2 instead of MUFU.EX2.
template <bool kSumQuantised, int kFmaExpEvery = 0>
__device__ __forceinline__ void tile_probabilities(float (&s)[32], float scale_log2, const float (&bias)[2],
                                                   const float (&alpha)[2], uint32_t (&pf)[2][4],
                                                   float (&sum_f32)[2], float (&sum_e4m3)[2]) {
  constexpr int kEvery = kFmaExpEvery > 0 ? kFmaExpEvery : 64;  // 64: every register on MUFU
#pragma unroll
  for (int r = 0; r < 32; ++r) {
    const float x = fmaf(s[r], scale_log2, bias[(r / 2) % 2]);
    s[r] = r % kEvery == kEvery - 1 ? fma_exp2(x) : fast_exp2(x);
  }
  p_fragment(pf[0], s, 0);
  p_fragment(pf[1], s, 1);
  const auto add_op = [](float x, float y) { return x + y; };
  if constexpr (kSumQuantised) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      // Row half h's quantised P: words pf[ks][h] and pf[ks][h + 2], two e4m3 pairs each.
      __half2 q[8];
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const uint32_t word = pf[i / 2][h + 2 * (i % 2)];
        q[2 * i] = e4m3x2_to_half2(word & 0xffffu);
        q[2 * i + 1] = e4m3x2_to_half2(word >> 16);
      }
#pragma unroll
      for (int i = 0; i < 4; ++i) q[i] = __hadd2(q[i], q[i + 4]);
      const float2 q2 = __half22float2(__hadd2(__hadd2(q[0], q[2]), __hadd2(q[1], q[3])));
      sum_f32[h] = fmaf(sum_f32[h], alpha[h], reduce_row_half(s, h, add_op));
      sum_e4m3[h] = fmaf(sum_e4m3[h], alpha[h], q2.x + q2.y);
    }
  } else {
#pragma unroll
    for (int h = 0; h < 2; ++h) sum_f32[h] = fmaf(sum_f32[h], alpha[h], reduce_row_half(s, h, add_op));
  }
}

// One tile's whole softmax for a score group that holds every key of its rows: the two halves above
// with the lazy rescale between them. on_alpha(alpha) runs as soon as the factors are known, before
// the exponentials (to publish them ahead of P).
template <bool kSumQuantised, class OnAlpha = NoAlphaHook>
__device__ __forceinline__ void softmax_tile(float (&s)[32], uint32_t valid_even, uint32_t valid_odd, int lane,
                                             float scale_log2, uint32_t (&pf)[2][4], float (&alpha)[2],
                                             float (&thread_max)[2], float (&m_bound)[2], float (&m_ref)[2],
                                             float (&sum_f32)[2], float (&sum_e4m3)[2],
                                             const OnAlpha& on_alpha = OnAlpha{}) {
  const float2 bound = mask_and_bound_rows(s, valid_even, valid_odd, lane, thread_max);
  float bias[2];
#pragma unroll
  for (int h = 0; h < 2; ++h)
    alpha[h] = lazy_rescale((h == 0 ? bound.x : bound.y) * scale_log2, m_bound[h], m_ref[h], bias[h]);
  on_alpha(alpha);
  tile_probabilities<kSumQuantised>(s, scale_log2, bias, alpha, pf, sum_f32, sum_e4m3);
}

// P's words pf (p_fragment's) into the P slot at p_slot ([64 heads][64 keys] K-major SW64, in the
// key order of key_order.h).
__device__ __forceinline__ void store_p(uint32_t p_slot, int warp, int lane, const uint32_t (&pf)[2][4]) {
#pragma unroll
  for (int ks = 0; ks < 2; ++ks)
#pragma unroll
    for (int j = 0; j < 4; ++j) hopper::sts32(p_slot + p_slot_offset(warp, lane, ks, j), pf[ks][j]);
}

// P into P slot `slot` of a kernel whose config C has it ([64 heads][64 keys] K-major SW64, in the
// key order of key_order.h), with the tile's rescale factors and the warp's "any row rescaled" flag;
// then the fence that makes the stores visible to the value groups' wgmma.
template <class C>
__device__ __forceinline__ void publish_p(uint32_t smem, uint8_t* smem_ptr, int slot, int warp, int lane, int row_lo,
                                          const uint32_t (&pf)[2][4], const float (&alpha)[2]) {
  store_p(smem + C::kPOffset + slot * C::kPSlotBytes, warp, lane, pf);
  // Every lane of a quad (warp) stores the same value: no lane test, whose lane id ptxas reloads
  // with a slow S2R under register pressure.
  float* alpha_buf = reinterpret_cast<float*>(smem_ptr + C::kAlphaOffset);
  uint32_t* flag_buf = reinterpret_cast<uint32_t*>(smem_ptr + C::kFlagOffset);
  alpha_buf[slot * C::kHeads + row_lo] = alpha[0];
  alpha_buf[slot * C::kHeads + row_lo + 8] = alpha[1];
  flag_buf[slot * 4 + warp] = __any_sync(0xffffffffu, alpha[0] != 1.0f || alpha[1] != 1.0f) ? 1u : 0u;
  hopper::fence_proxy_async_smem();
}

// The rows' lse and max_logits to global memory and their output scales to the config's
// kOutScaleOffset, for the value groups' epilogue (the quad reductions: every lane calls it).
template <class C, bool kSumQuantised>
__device__ __forceinline__ void write_row_results(const KernelArgs& p, uint8_t* smem_ptr, int64_t token, int head_block,
                                                  int row_lo, int lane, float scale_log2, const float (&thread_max)[2],
                                                  const float (&m_ref)[2], const float (&sum_f32)[2],
                                                  const float (&sum_e4m3)[2]) {
  float* out_scale = reinterpret_cast<float*>(smem_ptr + C::kOutScaleOffset);
  const int64_t head0 = int64_t{head_block} * C::kHeads;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int row = row_lo + 8 * h;
    const bool head_exists = head0 + row < p.num_heads;
    const float sink = p.attn_sink != nullptr && head_exists ? p.attn_sink[head0 + row] : -INFINITY;
    const RowResult rr = finish_row(quad_max(thread_max[h]) * scale_log2, m_ref[h], quad_sum(sum_f32[h]),
                                    kSumQuantised ? quad_sum(sum_e4m3[h]) : 1.0f, sink, p.kv_scale);
    if (lane % 4 == 0) {
      out_scale[row] = rr.out_scale;
      if (head_exists) {
        const int64_t cell = token * p.num_heads + head0 + row;
        p.lse[cell] = rr.lse;
        if (p.max_logits != nullptr) p.max_logits[cell] = rr.max_logit;
      }
    }
  }
}

}  // namespace fp8dsa::detail::sparse_mla
