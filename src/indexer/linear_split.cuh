// The linear half of the Q-resident scorer's split epilogue (QResidentConfig::kLinearSplit).
//
//   sum_h w[h] relu(x[h]) = (sum_h w[h] x[h] + sum_h w[h] |x[h]|) / 2,   x[h] = q[h] . k
//
// The first sum is linear in k: it is q~ . k with q~ = sum_h w[h] q[h], one D-vector per token.
// A consumer computes q~ in f32 from its Q block once per CTA and writes it as four e4m3 terms
// (q~ ~ sigma (t1 + t2 + t3 + t4), sigma a power of two that puts max |q~| / sigma below 448; each
// term holds the rounding residual of the ones before) into kLinRows extra B rows, scored by one
// more wgmma per k-step. The second sum is one FFMA per accumulator with |x| as an operand
// modifier, where relu and then w took an FMNMX and an FFMA: the epilogue, which bounds the
// scorer, loses a third of its instructions.
//
// Numerics: where relu cuts a head, the exact halves cancel, but the tensor cores' error in that
// head's x (its e4m3 accumulation keeps about 13 bits) no longer does: the error is relative to
// sum_h |w x| over every head, not over the heads relu keeps. On random inputs that stays below
// 5e-4 of max |logit| (DeepGEMM's inputs, bench/journal/2026-12-02.md, eighth session; SPEC 6
// allows 1e-3); where relu cuts 7 heads in 8 and w spans six decades it reaches 2.3e-3
// (tests/indexer: SplitEpilogueWhereRelu...).
// The fourth term changed neither figure: the terms' truncation is not what errs. A NaN in q or w
// gives NaN for the token's cells (relu(NaN) is no longer read as 0).
#pragma once

#include <cmath>
#include <cstdint>

#include <cuda_fp16.h>

#include "hopper/fp8_convert.cuh"
#include "hopper/swizzle.h"

namespace fp8dsa::detail::indexer {

// Writes the linear-term rows of one consumer's B block (kLinRowsPerToken a token: the terms, then
// zero rows if there are more rows than terms) and the tokens' scales: warp w takes the block's
// tokens w, w + 4, ...; lane l their columns [l * D / 32, (l + 1) * D / 32). q_block: the block's
// Q rows in shared memory ((token, head) rows of D bytes, Cfg::kSwizzle); lin_block: its kLinRows
// rows, the same swizzle; sigma[local token] = sigma / 2 (the epilogue's halving folded in;
// ScoreEpilogue::linear_weights). w rows of tokens past num_tokens read as zero, so their q~ is
// zero.
template <class Cfg>
__device__ __forceinline__ void build_linear_terms(const uint8_t* q_block, uint8_t* lin_block, float* sigma,
                                                   const float* w, int64_t w_stride, int64_t first_token,
                                                   int64_t num_tokens, int warp, int lane) {
  static_assert(Cfg::kLinearSplit, "only the split epilogue has linear-term rows");
  constexpr int kH = Cfg::kHeads;
  constexpr int kBytes = Cfg::kDim / 32;  // columns of one lane: 4 (D = 128) or 2 (D = 64)
  static_assert(kH == 32 || kH == 64, "a lane holds w of heads lane and lane + 32");
  for (int lt = warp; lt < Cfg::kWgTokens; lt += 4) {
    const int64_t t = first_token + lt;
    const bool exists = t < num_tokens;
    const float w_lo = exists ? w[t * w_stride + lane] : 0.0f;
    const float w_hi = exists && kH == 64 ? w[t * w_stride + (lane + 32) % kH] : 0.0f;
    float acc[kBytes];
#pragma unroll
    for (int i = 0; i < kBytes; ++i) acc[i] = 0.0f;
#pragma unroll 8
    for (int h = 0; h < kH; ++h) {
      const float wh = __shfl_sync(0xFFFFFFFFu, h < 32 ? w_lo : w_hi, h % 32);
      const uint32_t at = hopper::kmajor_offset(Cfg::kSwizzle, Cfg::kCols, lt * kH + h, lane * kBytes);
      uint32_t bits;
      if constexpr (kBytes == 4) {
        bits = *reinterpret_cast<const uint32_t*>(q_block + at);
      } else {
        bits = *reinterpret_cast<const uint16_t*>(q_block + at);
      }
#pragma unroll
      for (int i = 0; i < kBytes; i += 2) {
        const float2 q = __half22float2(hopper::e4m3x2_to_half2(bits >> (8 * i)));
        acc[i] = fmaf(wh, q.x, acc[i]);
        acc[i + 1] = fmaf(wh, q.y, acc[i + 1]);
      }
    }
    float m = 0.0f;
    bool finite = true;
#pragma unroll
    for (int i = 0; i < kBytes; ++i) {
      m = fmaxf(m, fabsf(acc[i]));
      finite = finite && isfinite(acc[i]);
    }
#pragma unroll
    for (int offset = 16; offset >= 1; offset /= 2) m = fmaxf(m, __shfl_xor_sync(0xFFFFFFFFu, m, offset));
    finite = __all_sync(0xFFFFFFFFu, finite);
    // sigma = 2^e with m / sigma < 448: frexp gives m / 448 = f 2^e, f in [0.5, 1).
    int e = 0;
    if (m > 0.0f && finite) frexpf(m / 448.0f, &e);
    const float inv_sigma = ldexpf(1.0f, -e);
    uint32_t term[Cfg::kLinTermsPerToken] = {};
    float r[kBytes];
#pragma unroll
    for (int i = 0; i < kBytes; ++i) r[i] = acc[i] * inv_sigma;  // exact: a power of two
#pragma unroll
    for (int j = 0; j < Cfg::kLinTermsPerToken; ++j) {
#pragma unroll
      for (int i = 0; i < kBytes; i += 2) {
        const uint32_t pair = hopper::pack_e4m3x2(r[i], r[i + 1]);
        const float2 back = __half22float2(hopper::e4m3x2_to_half2(pair));
        r[i] -= back.x;  // exact: the rounding residual
        r[i + 1] -= back.y;
        term[j] |= pair << (8 * i);
      }
    }
#pragma unroll
    for (int j = 0; j < Cfg::kLinRowsPerToken; ++j) {
      const uint32_t at =
          hopper::kmajor_offset(Cfg::kSwizzle, Cfg::kLinRows, lt * Cfg::kLinRowsPerToken + j, lane * kBytes);
      const uint32_t bits = j < Cfg::kLinTermsPerToken && finite ? term[j] : 0u;
      if constexpr (kBytes == 4) {
        *reinterpret_cast<uint32_t*>(lin_block + at) = bits;
      } else {
        *reinterpret_cast<uint16_t*>(lin_block + at) = static_cast<uint16_t>(bits);
      }
    }
    // A non-finite q~ (a NaN in q or w, or w large enough to overflow) makes the token's cells NaN
    // through its scale alone: its rows are zero, so no NaN reaches another token's columns.
    if (lane == 0) sigma[lt] = finite ? 0.5f * ldexpf(1.0f, e) : NAN;
  }
}

}  // namespace fp8dsa::detail::indexer
