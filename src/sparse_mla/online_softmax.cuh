// The online softmax of the FP8 sparse MLA kernels, in one place for both of them: the lazily moved
// reference max, P quantised to e4m3, the row sums and the final lse / output scale / sink. Scores
// are in log2 units after scaling (s * score_scale_log2).
//
// P = 2^kPBiasLog2 * exp2(s - m_ref) is stored as e4m3. m_ref moves (and O and the sums are
// rescaled by alpha = exp2(m_ref_old - m_ref_new)) only when the true max has grown by more than
// kLazyRescaleLog2 since m_ref was set, so rescales are rare and P <= 2^8 < 448. Two row sums are
// kept: of the f32 P (-> lse) and of the quantised P that multiplies V (-> the normalisation of
// out, so that the weights applied to V sum to 1 exactly).
#pragma once

#include <cmath>
#include <cstdint>

#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include "hopper/fp8_convert.cuh"
#include "sparse_mla/config.h"
#include "sparse_mla/key_order.h"

namespace fp8dsa::detail::sparse_mla {

__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

// exp2 on the FMA pipe, for a share of a tile's exponentials: MUFU.EX2 runs at a quarter of the
// FMA pipe's rate, and two math warpgroups taking all of theirs through it queue there. 2^x =
// 2^f * 2^j with j = round(x) (the 1.5 * 2^23 shift leaves j in t's low mantissa bits) and f in
// [-0.5, 0.5]: 2^f a degree-3 polynomial (near-minimax, relative error 1.0e-4, far below e4m3's
// 2^-4 step and the f32 sums' needs), j added to its exponent bits (t << 23 is j << 23 mod 2^32).
// x is clamped at -127: no exponent wraps (below -126.5 the result is subnormal, 0 to P and
// nothing to the sums), and -inf (a masked key) gives exactly 0, as MUFU.EX2 does, so that a row
// without a valid key keeps a zero sum.
__device__ __forceinline__ float fma_exp2(float x) {
  x = fmaxf(x, -127.0f);
  const float t = x + 12582912.0f;
  const float f = x - (t - 12582912.0f);
  const float q = fmaf(fmaf(fmaf(0.05500893f, f, 0.24221098f), f, 0.69328293f), f, 1.0f);
  return __uint_as_float(__float_as_uint(q) + (__float_as_uint(t) << 23));
}

// Max / sum over the four lanes of a quad (the threads that share an accumulator row).
__device__ __forceinline__ float quad_max(float x) {
  x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
  return fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
}
__device__ __forceinline__ float quad_sum(float x) {
  x += __shfl_xor_sync(0xffffffffu, x, 1);
  return x + __shfl_xor_sync(0xffffffffu, x, 2);
}

// Tree reductions over the 16 registers of one m64n64 accumulator row half (r with (r / 2) % 2 ==
// h): a linear chain costs the single score warp of each scheduler 16 dependent latencies.
template <class Op>
__device__ __forceinline__ float reduce_row_half(const float (&s)[32], int h, Op op) {
  float v[16];
#pragma unroll
  for (int i = 0; i < 16; ++i) v[i] = s[4 * (i / 2) + 2 * h + i % 2];
  // Level by level with constant trip counts (nested loops over a variable width stayed rolled and
  // put v in local memory).
#pragma unroll
  for (int i = 0; i < 8; ++i) v[i] = op(v[i], v[i + 8]);
#pragma unroll
  for (int i = 0; i < 4; ++i) v[i] = op(v[i], v[i + 4]);
  v[0] = op(v[0], v[2]);
  v[1] = op(v[1], v[3]);
  return op(v[0], v[1]);
}

// Upper bounds of the maxima of two quad rows (a for one row, b for the other, each this thread's
// max), in one pair of shuffles: each value rounded up to bf16 (an upper bound within 2^-8
// relative), the two packed into one word, maximised across the quad as bf16x2. A bound serves as
// the softmax reference as well as the exact max would (P stays <= 2^8); the exact max, needed only
// for max_logits, each thread keeps itself and the quad reduces once at the end.
__device__ __forceinline__ uint32_t bf16_bits_rounded_up(float x) {
  const uint32_t b = __float_as_uint(x);
  return (b & 0x80000000u) ? (b & 0xFFFF0000u) : ((b + 0xFFFFu) & 0xFFFF0000u);  // truncation raises a negative
}
__device__ __forceinline__ float2 quad_max_bounds(float a, float b) {
  uint32_t packed = (bf16_bits_rounded_up(a) >> 16) | bf16_bits_rounded_up(b);
#pragma unroll
  for (int mask = 1; mask <= 2; mask <<= 1) {
    const uint32_t other = __shfl_xor_sync(0xffffffffu, packed, mask);
    uint32_t r;
    asm("max.bf16x2 %0, %1, %2;\n" : "=r"(r) : "r"(packed), "r"(other));
    packed = r;
  }
  return make_float2(__uint_as_float(packed << 16), __uint_as_float(packed & 0xFFFF0000u));
}

// The packed e4m3 conversions (hopper/fp8_convert.cuh).
using hopper::e4m3x2_of_half2;
using hopper::e4m3x2_to_half2;
using hopper::pack_e4m3x2;

// One step of the lazy rescale for a row whose max so far is m_true (updated here with tile_max)
// and whose reference is m_ref. Returns alpha, the factor for O and the sums (1 when m_ref stays;
// 0 the first time a valid key appears, m_ref being -inf), and sets the bias that P adds to the
// scaled score: P = exp2(s + bias).
__device__ __forceinline__ float lazy_rescale(float tile_max, float& m_true, float& m_ref, float& bias) {
  m_true = fmaxf(m_true, tile_max);
  float alpha = 1.0f;
  if (m_true > m_ref + MlaShape::kLazyRescaleLog2) {  // false while every key so far is invalid
    alpha = fast_exp2(m_ref - m_true);
    m_ref = m_true;
  }
  bias = m_ref == -INFINITY ? 0.0f : MlaShape::kPBiasLog2 - m_ref;
  return alpha;
}

// The results of one (token, head) row from its final state.
struct RowResult {
  float lse;         // natural log; +inf when no key was valid
  float max_logit;   // natural-log units; -inf when no key was valid
  float out_scale;   // what O (the sum of quantised P times V) is multiplied by
};

// sink: the head's sink logit, -inf for none (then the factor is 1; +inf makes out 0).
__device__ __forceinline__ RowResult finish_row(float m_true, float m_ref, float sum_f32, float sum_e4m3, float sink,
                                                float kv_scale) {
  constexpr float kLn2 = 0.6931471805599453f;
  RowResult r;
  // The sum is 0 exactly when no key was valid, and NaN when a NaN score reached the row: then
  // lse, max_logits (which fmaxf computed without it) and out are NaN.
  const bool any_valid = !(sum_f32 == 0.0f);
  r.lse = any_valid ? (m_ref + log2f(sum_f32) - MlaShape::kPBiasLog2) * kLn2 : INFINITY;
  r.max_logit = any_valid ? (isnan(sum_f32) ? NAN : m_true * kLn2) : -INFINITY;
  const float sink_factor = 1.0f / (1.0f + expf(sink - r.lse));
  r.out_scale = any_valid ? kv_scale * sink_factor / sum_e4m3 : 0.0f;
  return r;
}

// The wgmma A fragment (m64k32, 8-bit) of P for k-step ks (keys 32ks..32ks+31) from the
// probabilities in the thread's m64n64 accumulator registers, with no data movement between threads
// (key_order.h: p_fragment_register; the same words are P's rows in shared memory).
__device__ __forceinline__ void p_fragment(uint32_t (&frag)[4], const float* p, int ks) {
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    frag[j] = pack_e4m3x2(p[p_fragment_register(ks, j, 0)], p[p_fragment_register(ks, j, 1)]) |
              (pack_e4m3x2(p[p_fragment_register(ks, j, 2)], p[p_fragment_register(ks, j, 3)]) << 16);
  }
}

}  // namespace fp8dsa::detail::sparse_mla
