// The native FP8 sparse MLA kernel for DeepSeek-V3.2's 656-byte cache rows and bf16 queries: one
// CTA per (token, 64-head block), a score and two value warpgroups (v32_config.h), QK^T and P.V on the e4m3 tensor
// cores with the per-128-column scales folded in, the rope on the bf16 tensor cores. Plan and
// layouts: v32_config.h, v32_value_layout.h.
//
// Per 64-key tile t:
//   score group: wait for tile t -> S = q_scale[h] * sum_b scale_b[key] * (Q_b K_b^T) + Q_rope
//     K_rope^T (4 e4m3 chains, one a scale block, each promoted with its key scales; one bf16
//     chain) -> mask -> online softmax -> P(t) (e4m3, as in the 576-byte kernel) into P slot t % kNumPSlots;
//   value groups (w = 0, 1, blocks b = 2w, 2w + 1): the tile's factors f = scale_b[key] / R_b ->
//     wait for P(t) -> rescale O^T and the weight sums if the tile moved a reference max ->
//     P_b = e4m3(P f) into the group's P_b buffers, and the weights they apply, e4m3(P f) / f, into
//     the sums -> release the P slot -> O^T[block b] += V^T P_b^T -> refill their share of the stage.
//
// Accuracy: P_b rounds P a second time (P is e4m3 already), but out_b is normalised by the sum of
// exactly the weights P_b applies, so a dominant key's weight cancels as it does in the 576-byte
// kernel. Keys whose block scale is below 2^-8 R_b (their V contributes < 2^-8 of the largest)
// count with their P in the sum instead: their e4m3(P f) may underflow, and their probability must
// not leave the normaliser.
#pragma once

#include <cmath>
#include <cstdint>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include "hopper/cp_async.cuh"
#include "hopper/mbarrier.cuh"
#include "hopper/smem_access.cuh"
#include "hopper/smem_descriptor.h"
#include "hopper/swizzle.h"
#include "hopper/warpgroup.cuh"
#include "hopper/wgmma.cuh"
#include "hopper/wgmma_bf16.cuh"
#include "sparse_mla/gather.cuh"
#include "sparse_mla/kernel_args.h"
#include "sparse_mla/kernel_entry.cuh"
#include "sparse_mla/key_order.h"
#include "sparse_mla/online_softmax.cuh"
#include "sparse_mla/phase_probe.cuh"
#include "sparse_mla/pipeline.cuh"
#include "sparse_mla/score_gemm.cuh"
#include "sparse_mla/score_rows.cuh"
#include "sparse_mla/v32_config.h"
#include "sparse_mla/v32_value_layout.h"
#include "sparse_mla/value_gemm.cuh"

namespace fp8dsa::detail::sparse_mla {
namespace v32 {

using C = V32Config;
using hopper::Swizzle;

// A key's factor below this (its block scale over R_b) counts with its P in the weight sums.
constexpr float kSmallFactor = 1.0f / 256.0f;

using Barriers = ScoreValueBarriers<C>;

__device__ __forceinline__ uint32_t stage_address(uint32_t smem, int tile) {
  return smem + C::kKOffset + static_cast<uint32_t>(tile % C::kNumKStages) * C::kStageBytes;
}

// ---- Score group -------------------------------------------------------------------------------

struct QDescriptors {
  uint64_t nope, rope;  // nope: term 0; term j is kQNopeTermBytes further
};

// Chain c of the score: c < 4 the e4m3 k-steps 4c .. 4c + 3 of the nope part (scale block c), for
// each of the kQTerms terms of Q into the same accumulator; c = 4 the 4 bf16 k-steps of the rope. One
// committed group.
template <int kQTerms, int c>
__device__ __forceinline__ void issue_chain(float (&acc)[32], const QDescriptors& q, uint64_t k_nope) {
  hopper::wgmma_fence_operands(acc);
  hopper::wgmma_fence();
  if constexpr (c < C::kNopeChains) {
#pragma unroll
    for (int j = 0; j < kQTerms; ++j)
#pragma unroll
      for (int i = 0; i < C::kNopeStepsPerChain; ++i) {
        // The residual terms first: their products are about 2^-4 of the first term's, so they add
        // into a small accumulator, and only the first term's 4 k-steps add into a large one (the
        // tensor cores keep the accumulator's sum to about 14 bits a wgmma).
        const int term = kQTerms - 1 - j;
        const uint32_t step = kstep_offset(C::kKeysPerTile, C::kNopeStepsPerChain * c + i);
        hopper::WgmmaE4m3<64>::ss(acc, hopper::advance_descriptor(q.nope, term * C::kQNopeTermBytes + step),
                                  hopper::advance_descriptor(k_nope, step), j > 0 || i > 0);
      }
  } else {
    const uint64_t k_rope = hopper::advance_descriptor(k_nope, C::kStageRopeOffset);
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const uint32_t step = kstep_offset(C::kKeysPerTile, j);
      hopper::WgmmaBf16N64::ss(acc, hopper::advance_descriptor(q.rope, step), hopper::advance_descriptor(k_rope, step),
                               j > 0);
    }
  }
  hopper::wgmma_commit_group();
}

// s += chain k (in part), once complete (finish_chains' promotion policy): nope chain k times block
// k's key scales (chain 0, block 0, is in s itself and takes its scales with chain 1), the rope after
// the nope sum took the head's Q scale.
// A thread's register r is key 8 (r / 4) + 2t + r % 2 (hopper/wgmma_layout.h).
template <int k>
__device__ __forceinline__ void promote(float (&s)[32], float (&part)[32], uint32_t stage, int t,
                                        const float (&q_scale)[2]) {
  hopper::wgmma_fence_operands(s);
  hopper::wgmma_fence_operands(part);
  if constexpr (k == C::kNopeChains) {
#pragma unroll
    for (int r = 0; r < 32; ++r) s[r] = fmaf(s[r], q_scale[(r / 2) % 2], part[r]);
  } else {
    const uint32_t scales0 = stage + C::kStageScaleOffset;
    const uint32_t scales = scales0 + k * C::kKeysPerTile * 4;
#pragma unroll
    for (int c = 0; c < 8; ++c) {
      const uint32_t key = static_cast<uint32_t>(8 * c + 2 * t) * 4;
      uint32_t v[2], v0[2];
      hopper::lds64(v, scales + key);
      if constexpr (k == 1) hopper::lds64(v0, scales0 + key);
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int r = 4 * c + i;
        const float scale = __uint_as_float(v[i % 2]);
        if constexpr (k == 1) {
          s[r] = fmaf(part[r], scale, s[r] * __uint_as_float(v0[i % 2]));
        } else {
          s[r] = fmaf(part[r], scale, s[r]);
        }
      }
    }
  }
}

template <int kQTerms>
__device__ __forceinline__ void score_group(const KernelArgs& p, uint32_t smem, uint8_t* smem_ptr, const Barriers& bars,
                                            int64_t token, int head_block, int length, int num_tiles, int thread) {
  const int warp = thread / 32, lane = thread % 32, t = lane % 4;
  const int row_lo = warp * 16 + lane / 4;
  const int32_t* indices = token_indices(p, token);
  const float scale_log2 = p.score_scale_log2;
  const QDescriptors q{hopper::kmajor_descriptor(smem + C::kQNopeOffset, Swizzle::k64B, C::kHeads, 0),
                       hopper::kmajor_descriptor(smem + C::kQRopeOffset, Swizzle::k64B, C::kHeads, 0)};
  // The rows' softmax state (score_rows.cuh); no sum of the quantised P: the value groups normalise.
  float thread_max[2] = {-INFINITY, -INFINITY}, m_bound[2] = {-INFINITY, -INFINITY};
  float m_ref[2] = {-INFINITY, -INFINITY}, sum_f32[2] = {0.0f, 0.0f}, unused_sum[2] = {0.0f, 0.0f};
  float q_scale[2] = {0.0f, 0.0f};

  int32_t idx_even = index_at(indices, 2 * lane, length);
  int32_t idx_odd = index_at(indices, 2 * lane + 1, length);
  const auto k_descriptor = [&](int tile) {
    return hopper::kmajor_descriptor(stage_address(smem, tile), Swizzle::k64B, C::kKeysPerTile, 0);
  };
  // The chains issued ahead of the previous tile's softmax: 8 wgmmas, what the SM queues (one chain of
  // two terms, two of one), so that the softmax starts at once.
  constexpr int kAhead = kQTerms == 1 ? 2 : 1;
  const auto start_scores = [&](int tile, float (&s)[32], float (&part)[2][32]) {
    wait_barrier(&bars.full[tile % C::kNumKStages], (tile / C::kNumKStages) & 1);
    hopper::fence_proxy_async_smem();
    const uint64_t k = k_descriptor(tile);
    issue_chain<kQTerms, 0>(s, q, k);
    if constexpr (kAhead > 1) issue_chain<kQTerms, 1>(part[0], q, k);
  };
  // The other chains with two in flight behind the one being promoted (score_gemm.cuh: finish_chains).
  const auto finish_scores = [&](int tile, float (&s)[32], float (&part)[2][32]) {
    const uint64_t k = k_descriptor(tile);
    const uint32_t stage = stage_address(smem, tile);
    finish_chains<C::kQkChains, kAhead>(
        s, part, [&](float (&acc)[32], auto chain) { issue_chain<kQTerms, decltype(chain)::value>(acc, q, k); },
        [&](float (&sum)[32], float (&done)[32], auto chain) {
          promote<decltype(chain)::value>(sum, done, stage, t, q_scale);
        });
  };
  FP8DSA_PAIR_STEP_CLOCK(steps);  // the probe build's step clock (phase_probe.cuh), restarted at the loop
  const auto softmax_and_publish = [&](int tile, float (&s)[32]) {
    uint32_t pf[2][4];
    float alpha[2];
    softmax_tile<false>(s, __ballot_sync(0xffffffffu, index_valid(idx_even, p.num_kv)),
                        __ballot_sync(0xffffffffu, index_valid(idx_odd, p.num_kv)), lane, scale_log2, pf, alpha,
                        thread_max, m_bound, m_ref, sum_f32, unused_sum);
    FP8DSA_PAIR_STEP(steps, kV32ScoreSoftmax);
    const int slot = tile % C::kNumPSlots;
    if (tile >= C::kNumPSlots) wait_barrier(&bars.p_empty[slot], ((tile / C::kNumPSlots) - 1) & 1);
    FP8DSA_PAIR_STEP(steps, kV32ScoreSlotWait);
    publish_p<C>(smem, smem_ptr, slot, warp, lane, row_lo, pf, alpha);
    idx_even = index_at(indices, (tile + 1) * C::kKeysPerTile + 2 * lane, length);
    idx_odd = index_at(indices, (tile + 1) * C::kKeysPerTile + 2 * lane + 1, length);
  };

  float s[32], s_next[32], part[2][32];
  if (num_tiles > 0) {
    wait_barrier(bars.q_full, 0);
    hopper::fence_proxy_async_smem();
    const float* q_scale_buf = reinterpret_cast<const float*>(smem_ptr + C::kQScaleOffset);
    q_scale[0] = q_scale_buf[row_lo];
    q_scale[1] = q_scale_buf[row_lo + 8];
    start_scores(0, s, part);
    finish_scores(0, s, part);
  }
  FP8DSA_PHASE_MARK(thread == 0, kMarkFirstScore);
  FP8DSA_PAIR_STEP_RESTART(steps);
  // Pipelined: tile t + 1's QK^T chains start before tile t's softmax; the last tile is peeled.
  for (int tile = 0; tile + 1 < num_tiles; ++tile) {
    start_scores(tile + 1, s_next, part);
    FP8DSA_PAIR_STEP(steps, kV32ScoreStart);
    softmax_and_publish(tile, s);
    finish_scores(tile + 1, s_next, part);
    FP8DSA_PAIR_STEP(steps, kV32ScoreChains);
    hopper::mbarrier_arrive(&bars.p_full[tile % C::kNumPSlots]);
#pragma unroll
    for (int r = 0; r < 32; ++r) s[r] = s_next[r];
  }
  FP8DSA_PAIR_STEP_STORE(steps, thread == 0, 0);  // the tiles after the first, the peeled one not
  if (num_tiles > 0) {
    softmax_and_publish(num_tiles - 1, s);
    hopper::mbarrier_arrive(&bars.p_full[(num_tiles - 1) % C::kNumPSlots]);
  }
  FP8DSA_PHASE_MARK(thread == 0, kMarkLoopEnd);
  // The output scale is kv_scale times the sink factor; the value groups divide by their sums.
  write_row_results<C, false>(p, smem_ptr, token, head_block, row_lo, lane, scale_log2, thread_max, m_ref, sum_f32,
                              unused_sum);
  hopper::named_barrier_sync(kV32BarrierEpilogue, C::kThreads);
}

// ---- Value groups ------------------------------------------------------------------------------

// Q of the CTA's 64 heads, bf16 in global memory: each of the 8 value warps takes 8 heads; a lane
// holds 16 nope values (16-byte chunks lane and lane + 32) and, lanes 0-7, one rope chunk. The nope
// goes to kQTerms e4m3 terms with the head's scale amax / 448 (term j: what the terms before it left
// of q / scale), the rope stays bf16; rows past num_heads are zero.
template <int kQTerms>
__device__ __forceinline__ void quantise_q(const KernelArgs& p, uint32_t smem, uint8_t* smem_ptr, int64_t token,
                                           int head_block, int value_warp, int lane) {
  const __nv_bfloat16* q = reinterpret_cast<const __nv_bfloat16*>(p.q) + token * p.q_token_stride +
                           int64_t{head_block} * C::kHeads * p.q_head_stride;
  float* q_scale = reinterpret_cast<float*>(smem_ptr + C::kQScaleOffset);
#pragma unroll 2
  for (int i = 0; i < 8; ++i) {
    const int head = value_warp * 8 + i;
    uint4 nope[2] = {make_uint4(0, 0, 0, 0), make_uint4(0, 0, 0, 0)};
    uint4 rope = make_uint4(0, 0, 0, 0);
    if (int64_t{head_block} * C::kHeads + head < p.num_heads) {
      const uint4* row = reinterpret_cast<const uint4*>(q + head * p.q_head_stride);
      nope[0] = __ldg(row + lane);
      nope[1] = __ldg(row + 32 + lane);
      if (lane < 8) rope = __ldg(row + 64 + lane);
    }
    float v[2][8];
    float amax = 0.0f;
#pragma unroll
    for (int c = 0; c < 2; ++c) {
      const __nv_bfloat162* pairs = reinterpret_cast<const __nv_bfloat162*>(&nope[c]);
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const float2 f = __bfloat1622float2(pairs[j]);
        v[c][2 * j] = f.x;
        v[c][2 * j + 1] = f.y;
        amax = fmaxf(amax, fmaxf(fabsf(f.x), fabsf(f.y)));
      }
    }
#pragma unroll
    for (int mask = 16; mask > 0; mask >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, mask));
    const float inv = amax > 0.0f ? 448.0f / amax : 0.0f;  // values past 448 by rounding saturate
#pragma unroll
    for (int c = 0; c < 2; ++c) {
#pragma unroll
      for (int k = 0; k < 8; ++k) v[c][k] *= inv;
      const uint32_t col = static_cast<uint32_t>((lane + 32 * c) * 8);
#pragma unroll
      for (int term = 0; term < kQTerms; ++term) {
        uint32_t words[2];
#pragma unroll
        for (int j = 0; j < 2; ++j) {
          const uint32_t lo = pack_e4m3x2(v[c][4 * j], v[c][4 * j + 1]);
          const uint32_t hi = pack_e4m3x2(v[c][4 * j + 2], v[c][4 * j + 3]);
          words[j] = lo | (hi << 16);
          if (term + 1 < kQTerms) {  // the residual for the next term
            const float2 a = __half22float2(e4m3x2_to_half2(lo)), b = __half22float2(e4m3x2_to_half2(hi));
            v[c][4 * j] -= a.x;
            v[c][4 * j + 1] -= a.y;
            v[c][4 * j + 2] -= b.x;
            v[c][4 * j + 3] -= b.y;
          }
        }
        hopper::sts64(smem + C::kQNopeOffset + term * C::kQNopeTermBytes +
                          hopper::kmajor_offset(Swizzle::k64B, C::kHeads, head, col),
                      words[0], words[1]);
      }
    }
    if (lane < 8) {
      const uint32_t words[4] = {rope.x, rope.y, rope.z, rope.w};
      hopper::sts128(smem + C::kQRopeOffset + hopper::kmajor_offset(Swizzle::k64B, C::kHeads, head, lane * 16), words);
    }
    if (lane == 0) q_scale[head] = amax / 448.0f;
  }
}

// R_b: the largest |scale_b| among the token's valid keys, over both value groups (256 threads):
// the value warps' maxima into kRefScratchOffset, read back by reference_scale.
__device__ __forceinline__ void reference_scales(const KernelArgs& p, uint8_t* smem_ptr, const int32_t* indices,
                                                 int length, int value_thread) {
  float mx[C::kScaleBlocks] = {0.0f, 0.0f, 0.0f, 0.0f};
  for (int pos = value_thread; pos < length; pos += 256) {
    const int32_t idx = __ldg(indices + pos);
    if (!index_valid(idx, p.num_kv)) continue;
    const float4 sc = __ldg(reinterpret_cast<const float4*>(p.kv + int64_t{idx} * p.kv_row_stride + kV32ScaleOffset));
    mx[0] = fmaxf(mx[0], fabsf(sc.x));
    mx[1] = fmaxf(mx[1], fabsf(sc.y));
    mx[2] = fmaxf(mx[2], fabsf(sc.z));
    mx[3] = fmaxf(mx[3], fabsf(sc.w));
  }
#pragma unroll
  for (int b = 0; b < C::kScaleBlocks; ++b)
#pragma unroll
    for (int mask = 16; mask > 0; mask >>= 1) mx[b] = fmaxf(mx[b], __shfl_xor_sync(0xffffffffu, mx[b], mask));
  float* scratch = reinterpret_cast<float*>(smem_ptr + C::kRefScratchOffset);
  if (value_thread % 32 == 0) {
#pragma unroll
    for (int b = 0; b < C::kScaleBlocks; ++b) scratch[(value_thread / 32) * C::kScaleBlocks + b] = mx[b];
  }
  hopper::named_barrier_sync(kV32BarrierValueGroups, 256);
}

__device__ __forceinline__ float reference_scale(const uint8_t* smem_ptr, int block) {
  const float* scratch = reinterpret_cast<const float*>(smem_ptr + C::kRefScratchOffset);
  float ref = 0.0f;
#pragma unroll
  for (int wi = 0; wi < 8; ++wi) ref = fmaxf(ref, scratch[wi * C::kScaleBlocks + block]);
  return ref;
}

__device__ __forceinline__ void load_value_fragments_v32(uint32_t (&frag)[4][4], uint32_t k_tile, const ValueLoads& v,
                                                         int ks) {
  build_value_fragments(frag, v, ks, [&](uint32_t offset, uint32_t (&words)[2]) {
    words[0] = hopper::lds32(k_tile + offset);
    words[1] = hopper::lds32(k_tile + offset + kV32HighHalfBytes);
  });
}

template <int kQTerms, int w>
__device__ __forceinline__ void value_group(const KernelArgs& p, uint32_t smem, uint8_t* smem_ptr, const Barriers& bars,
                                            int64_t token, int head_block, int length, int num_tiles, int thread) {
  const int warp = thread / 32, lane = thread % 32;
  const int row_in_pass = thread / kGatherThreadsPerRow;
  const int quarter = thread % kGatherThreadsPerRow;
  const uint32_t share = value_share_offset(thread);
  const int32_t* indices = token_indices(p, token);

  const auto load_indices = [&](int32_t (&idx)[2], int tile) {
#pragma unroll
    for (int pass = 0; pass < 2; ++pass)
      idx[pass] = index_at(indices, tile * C::kKeysPerTile + pass * kGatherRowsPerPass + row_in_pass, length);
  };
  // The group's share of a 656-byte row: its 4 nope atoms and rope atom w of both passes' rows, and
  // (quarters 0, 1) its two scales, transposed to [block][key].
  const auto gather_tile = [&](int tile, const int32_t (&idx)[2]) {
    const uint32_t stage = stage_address(smem, tile);
#pragma unroll
    for (int pass = 0; pass < 2; ++pass) {
      const bool valid = index_valid(idx[pass], p.num_kv);
      const uint8_t* row = p.kv + (valid ? int64_t{idx[pass]} * p.kv_row_stride : 0);
      const uint32_t dst = stage + share + pass * kGatherRowsPerPass * 64;
#pragma unroll
      for (int m = 0; m < 4; ++m) {
        const int atom = 4 * w + m;
        hopper::cp_async_16_zfill(dst + atom * C::kKeysPerTile * 64, row + atom * 64 + quarter * 16, valid);
      }
      hopper::cp_async_16_zfill(dst + C::kStageRopeOffset + w * C::kKeysPerTile * 64,
                                row + kV32RopeOffset + w * 64 + quarter * 16, valid);
      if (quarter < 2) {
        const int block = 2 * w + quarter;
        const int key = pass * kGatherRowsPerPass + row_in_pass;
        hopper::cp_async_4_zfill(stage + C::kStageScaleOffset + (block * C::kKeysPerTile + key) * 4,
                                 row + kV32ScaleOffset + block * 4, valid);
      }
    }
    hopper::cp_async_mbarrier_arrive_noinc(&bars.full[tile % C::kNumKStages]);
  };

  int32_t first[C::kNumKStages][2];
#pragma unroll
  for (int tile = 0; tile < C::kNumKStages; ++tile) load_indices(first[tile], tile);
#pragma unroll
  for (int tile = 0; tile < C::kNumKStages; ++tile)
    if (tile < num_tiles) gather_tile(tile, first[tile]);
  int32_t next[2];
  load_indices(next, C::kNumKStages);

  // Q while the first tiles are in flight, then the reference scales (the score group needs only Q).
  quantise_q<kQTerms>(p, smem, smem_ptr, token, head_block, 4 * w + warp, lane);
  hopper::fence_proxy_async_smem();
  hopper::mbarrier_arrive(bars.q_full);
  reference_scales(p, smem_ptr, indices, length, 128 * w + thread);

  // This thread's factor-table entry: key thread % 64 of local block thread / 64.
  const int my_block = thread / 64, my_key = thread % 64;
  const float my_ref = reference_scale(smem_ptr, 2 * w + my_block);
  const float my_inv_ref = my_ref > 0.0f ? 1.0f / my_ref : 0.0f;
  const uint32_t tables = smem + C::kFactorOffset + w * 2 * C::kFactorTableBytes;
  const uint32_t pb_buffers = smem + C::kPbOffset + w * C::kScaleBlocksPerGroup * C::kPSlotBytes;
  const int pb_head = pb_row(thread);

  const ValueLoads loads = value_loads_v32(w, thread);
  const float* alpha_buf = reinterpret_cast<const float*>(smem_ptr + C::kAlphaOffset);
  float o[4][32];
#pragma unroll
  for (int mb = 0; mb < 4; ++mb)
#pragma unroll
    for (int r = 0; r < 32; ++r) o[mb][r] = 0.0f;
  float weight_sum[2] = {0.0f, 0.0f};  // of head pb_head's weights over this thread's K positions

  FP8DSA_PAIR_STEP_CLOCK(steps);
  for (int tile = 0; tile < num_tiles; ++tile) {
    const int stage = tile % C::kNumKStages, slot = tile % C::kNumPSlots;
    const uint32_t k_tile = stage_address(smem, tile);
    const uint32_t table = tables + (tile % 2) * C::kFactorTableBytes;
    wait_barrier(&bars.full[stage], (tile / C::kNumKStages) & 1);
    {
      const float scale = __uint_as_float(
          hopper::lds32(k_tile + C::kStageScaleOffset + ((2 * w + my_block) * C::kKeysPerTile + my_key) * 4));
      const float f = scale * my_inv_ref;
      const float g = fabsf(f) >= kSmallFactor ? 1.0f / f : 0.0f;
      const uint32_t entry = table + my_block * 2 * C::kKeysPerTile * 2 + v_pos_of_key(my_key) * 2;
      hopper::sts16(entry, __half_as_ushort(__float2half_rn(f)));
      hopper::sts16(entry + C::kKeysPerTile * 2, __half_as_ushort(__float2half_rn(g)));
    }
    FP8DSA_PAIR_STEP(steps, kV32ValueStage);
    wait_barrier(&bars.p_full[slot], (tile / C::kNumPSlots) & 1);
    FP8DSA_PAIR_STEP(steps, kV32ValuePWait);
    uint32_t flags[4];
    hopper::lds128(flags, smem + C::kFlagOffset + slot * 16);
    if ((flags[0] | flags[1] | flags[2] | flags[3]) != 0u) {
      rescale_value_accumulators(o, alpha_buf + slot * C::kHeads, lane);
      const float a = alpha_buf[slot * C::kHeads + pb_head];
      weight_sum[0] *= a;
      weight_sum[1] *= a;
    }
    hopper::named_barrier_sync(kV32BarrierValueGroup + w, 128);  // the factor table is complete
    FP8DSA_PAIR_STEP(steps, kV32ValueRescale);

    // P_b of both blocks from this thread's 32 P values, and the weights they apply, 8 K positions
    // at a time (registers: O^T is live).
    {
      const uint32_t p_slot = smem + C::kPOffset + slot * C::kPSlotBytes;
      const __half2 zero = __float2half2_rn(0.0f);
#pragma unroll
      for (int c = 0; c < 2; ++c) {
#pragma unroll
        for (int h8 = 0; h8 < 2; ++h8) {
          const uint32_t chunk = pb_chunk_offset(thread, c) + 8 * h8;
          uint32_t pw[2];
          hopper::lds64(pw, p_slot + chunk);
          const uint32_t pos = static_cast<uint32_t>(pb_first_position(thread) + 16 * c + 8 * h8);
#pragma unroll
          for (int lb = 0; lb < 2; ++lb) {
            const uint32_t f_row = table + lb * 2 * C::kKeysPerTile * 2;
            uint32_t fw[4], gw[4], out[2];
            hopper::lds128(fw, f_row + pos * 2);
            hopper::lds128(gw, f_row + C::kKeysPerTile * 2 + pos * 2);
            __half2 acc = zero;
#pragma unroll
            for (int k = 0; k < 2; ++k) {
              uint32_t bytes[2];
#pragma unroll
              for (int hf = 0; hf < 2; ++hf) {
                const int pair = 2 * k + hf;  // K positions pos + 2 pair, + 1
                const __half2 qp = e4m3x2_to_half2((pw[k] >> (16 * hf)) & 0xffffu);
                const __half2 f = *reinterpret_cast<const __half2*>(&fw[pair]);
                const __half2 g = *reinterpret_cast<const __half2*>(&gw[pair]);
                bytes[hf] = e4m3x2_of_half2(__hmul2(qp, f));
                const __half2 applied = e4m3x2_to_half2(bytes[hf]);
                // Two fused adds: P itself for a key of a small factor (g = 0; 0 for every other
                // key), then the weight P_b applies (applied g; 0 where g = 0).
                acc = __hfma2(applied, g, __hfma2(qp, __heq2(g, zero), acc));
              }
              out[k] = bytes[0] | (bytes[1] << 16);
            }
            hopper::sts64(pb_buffers + lb * C::kPSlotBytes + chunk, out[0], out[1]);
            const float2 a = __half22float2(acc);
            weight_sum[lb] += a.x + a.y;
          }
        }
      }
    }
    hopper::fence_proxy_async_smem();  // P_b, for the group's wgmma
    hopper::named_barrier_sync(kV32BarrierValueGroup + w, 128);
    hopper::mbarrier_arrive(&bars.p_empty[slot]);
    FP8DSA_PAIR_STEP(steps, kV32ValuePb);

    const uint64_t desc_lo = hopper::kmajor_descriptor(pb_buffers, Swizzle::k64B, C::kHeads, 0);
    const uint64_t desc_hi = hopper::kmajor_descriptor(pb_buffers + C::kPSlotBytes, Swizzle::k64B, C::kHeads, 0);
    uint32_t frag[4][4];
    load_value_fragments_v32(frag, k_tile, loads, 0);
    value_mma_step(o, frag, desc_lo, desc_hi);
    load_value_fragments_v32(frag, k_tile, loads, 1);
    value_mma_step(o, frag, hopper::advance_descriptor(desc_lo, 32), hopper::advance_descriptor(desc_hi, 32));
    FP8DSA_PAIR_STEP(steps, kV32ValueMma);
    if (tile + C::kNumKStages < num_tiles) {
      hopper::named_barrier_sync(kV32BarrierValueGroup + w, 128);  // the group has read the stage
      gather_tile(tile + C::kNumKStages, next);
      load_indices(next, tile + C::kNumKStages + 1);
    }
    FP8DSA_PAIR_STEP(steps, kV32ValueRefill);
  }
  FP8DSA_PHASE_MARK(w == 0 && thread == 0, kMarkProducerEnd);
  FP8DSA_PAIR_STEP_STORE(steps, w == 0 && thread == 0, 1);
  hopper::cp_async_commit_group();
  hopper::cp_async_wait_group<0>();

  // The weight sums of the group's blocks per head (the two threads of a head add theirs).
  float* sums = reinterpret_cast<float*>(smem_ptr + C::kNormOffset);
#pragma unroll
  for (int lb = 0; lb < 2; ++lb) {
    const float total = weight_sum[lb] + __shfl_xor_sync(0xffffffffu, weight_sum[lb], 1);
    if (thread % 2 == 0) sums[(2 * w + lb) * C::kHeads + pb_head] = total;
  }
  hopper::named_barrier_sync(kV32BarrierEpilogue, C::kThreads);
  const float* out_scale = reinterpret_cast<const float*>(smem_ptr + C::kOutScaleOffset);
  const float ref[2] = {reference_scale(smem_ptr, 2 * w), reference_scale(smem_ptr, 2 * w + 1)};
  const int64_t head0 = int64_t{head_block} * C::kHeads;
  __nv_bfloat16* out = p.out + token * p.out_token_stride + head0 * p.out_head_stride + value_dv_v32(w, warp, lane);
#pragma unroll
  for (int c = 0; c < 8; ++c)
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const int head = value_head(lane, c, e);
      if (head0 + head >= p.num_heads) continue;
      float factor[2];
#pragma unroll
      for (int lb = 0; lb < 2; ++lb) {
        const float sum = sums[(2 * w + lb) * C::kHeads + head];
        factor[lb] = sum > 0.0f ? out_scale[head] * ref[lb] / sum : 0.0f;
      }
      // Blocks 0, 1 are 4 columns of the group's first scale block, 2, 3 the same of its second.
      __nv_bfloat16* dst = out + head * p.out_head_stride;
      store_output_head<2>([&](int mb, int hh) { return o[mb][4 * c + 2 * hh + e] * factor[mb / 2]; },
                           [&](int mb) { return dst + (mb / 2) * kV32ScaleBlock; });
    }
  FP8DSA_PHASE_MARK(w == 0 && thread == 0, kMarkEnd);
}

}  // namespace v32

// The kernel (kernel_entry.cuh): warpgroup 0 the score group, warpgroups 1 and 2 the value groups.
template <int kQTerms>
struct V32Kernel {
  static_assert(kQTerms >= 1 && kQTerms <= V32Config::kMaxQTerms, "Q's nope terms fit their tiles");
  using C = V32Config;
  static constexpr int kThreads = C::kThreads;
  static constexpr uint32_t kSmemAlloc = C::kSmemAlloc;
  static constexpr int kEntryRegs = C::kEntryRegs;
  static constexpr int kFirstRoleRegs = C::kScoreRegs;
  static constexpr int kSecondRoleRegs = C::kValueRegs;

  // The shared memory and the barriers' addresses, found once before the roles part.
  struct Setup {
    SmemBase base;
    v32::Barriers bars;
  };
  __device__ __forceinline__ static Setup setup(uint8_t* smem_raw) {
    FP8DSA_PHASE_MARK(threadIdx.x == 0, kMarkSmid);
    FP8DSA_PHASE_MARK(threadIdx.x == 0, kMarkEntry);
    const SmemBase base = aligned_smem_base(smem_raw);
    const v32::Barriers bars = v32::Barriers::at(base.ptr);
    if (threadIdx.x == 0) bars.init();
    return {base, bars};
  }

  __device__ __forceinline__ static void first_role(const KernelArgs& p, const Setup& setup, int thread) {
    const int64_t token = blockIdx.x / p.head_blocks;
    const int length = token_length(p, token);
    v32::score_group<kQTerms>(p, setup.base.address, setup.base.ptr, setup.bars, token,
                              static_cast<int>(blockIdx.x % p.head_blocks), length, tile_count(length), thread);
  }

  __device__ __forceinline__ static void second_role(const KernelArgs& p, const Setup& setup, int wg, int thread) {
    const int64_t token = blockIdx.x / p.head_blocks;
    const int head_block = static_cast<int>(blockIdx.x % p.head_blocks);
    const int length = token_length(p, token);
    if (wg == 1) {
      v32::value_group<kQTerms, 0>(p, setup.base.address, setup.base.ptr, setup.bars, token, head_block, length,
                                   tile_count(length), thread);
    } else {
      v32::value_group<kQTerms, 1>(p, setup.base.address, setup.base.ptr, setup.bars, token, head_block, length,
                                   tile_count(length), thread);
    }
  }
};

}  // namespace fp8dsa::detail::sparse_mla
