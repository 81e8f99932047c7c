// The native FP8 sparse MLA kernel for one (token, 64-head block) per CTA, with two math warpgroups
// in seesaw: each scores every other tile and both add every tile into their half of O^T. QK^T and
// P.V both on the e4m3 tensor cores (SASS QGMMA). Roles and shared-memory plan: config.h
// (SeesawConfig).
//
// Per pair j of tiles (a = 2j, b = 2j + 1), math group m (own tile t = 2j + m, S(t) complete):
//   the lead QK^T chain of tile t + 2 onto the tensor cores -> mask S(t), bound its rows' maxima ->
//   exchange the bounds with the other group -> one lazily moved reference for both tiles, the same
//   in both groups (the same inputs, the same code) -> P(t) as e4m3 into P slot m, the pair's
//   rescale factors -> barrier: both P slots written -> O^T *= the factors (every pair, whatever the
//   data) -> the four P.V k-steps of tiles a and b (V^T fragments loaded while the previous k-step
//   runs) -> the other QK^T chains of tile t + 2 -> every wgmma complete at the loop edge.
// Measured on the H200 (bench/journal/2026-12-01.md, sparse MLA v3 step 2) against variants of this
// order: issuing the lead chain after P.V instead runs within +-1% (and spilled 20 bytes); fewer,
// longer chains gain ~1.5% a chain at some lse accuracy; rescaling O^T before the exponentials
// rather than after the barrier did not gain, and each group adding its own tile first behind a
// barrier of its own lost 2-3%.
#pragma once

#include <cmath>
#include <cstdint>
#include <type_traits>

#include <cuda_bf16.h>

#include "hopper/mbarrier.cuh"
#include "hopper/smem_access.cuh"
#include "hopper/smem_descriptor.h"
#include "hopper/warpgroup.cuh"
#include "hopper/wgmma.cuh"
#include "sparse_mla/config.h"
#include "sparse_mla/gather.cuh"
#include "sparse_mla/kernel_args.h"
#include "sparse_mla/kernel_entry.cuh"
#include "sparse_mla/online_softmax.cuh"
#include "sparse_mla/phase_probe.cuh"
#include "sparse_mla/pipeline.cuh"
#include "sparse_mla/score_gemm.cuh"
#include "sparse_mla/score_rows.cuh"
#include "sparse_mla/value_gemm.cuh"

namespace fp8dsa::detail::sparse_mla {
namespace seesaw {

using C = SeesawConfig;
using hopper::Swizzle;
using Shape = ScoreShape<C::kKeysPerTile, C::kHeads>;
static_assert(C::kDvPerMathGroup == kValueGroupDv, "a math group's O^T is a value group's (value_layout.h)");


// The mbarriers (pipeline.cuh): full, empty (every math thread) and q_full.
using Barriers = ProducerBarriers<C::kNumKStages, C::kMathThreads, C::kBarrierOffset>;
static_assert(Barriers::kCount == C::kNumBarriers, "the config counts these barriers");

__device__ __forceinline__ uint32_t stage_address(uint32_t smem, int tile) {
  return smem + C::kKOffset + (tile % C::kNumKStages) * C::kKTileBytes;
}
// As shared addresses from the base (a 32-bit register), for the math groups.
__device__ __forceinline__ uint32_t full_at(uint32_t smem, int tile) {
  return smem + Barriers::kFullOffset + 8 * (tile % C::kNumKStages);
}
__device__ __forceinline__ uint32_t empty_at(uint32_t smem, int tile) {
  return smem + Barriers::kEmptyOffset + 8 * (tile % C::kNumKStages);
}
__device__ __forceinline__ uint32_t q_full_at(uint32_t smem) { return smem + Barriers::kQFullOffset; }
__device__ __forceinline__ void wait_full(uint32_t smem, int tile) {
  wait_barrier_at(full_at(smem, tile), (tile / C::kNumKStages) & 1);
}

// P.V of a pair after its P slots are written: the four k-steps of tiles a and b into the group's
// d_v half of O^T. Tile a's two k-steps of fragments (load_tile_a_values) are loaded before the P
// slots are written (they do not depend on P), so its stage is released before its wgmmas; tile b's
// go into each buffer as its tile-a wgmmas complete. Every wgmma is complete on return.
// (Measured: 0.7-0.9% less time at h = 128 than tile a's first k-step alone ahead, H100; a third
// k-step ahead makes ptxas serialise the wgmmas. The later QK^T chains of the next tile follow
// rather than interleave: S, the lead accumulator, O^T and the fragments do not fit 232 registers.)
__device__ __forceinline__ void load_tile_a_values(uint32_t (&a_frag)[2][4][4], uint32_t loads, uint32_t stage_a) {
#pragma unroll
  for (int ks = 0; ks < 2; ++ks) load_value_fragments_ldsm(a_frag[ks], stage_a, loads, ks);
}

__device__ __forceinline__ void pair_values(float (&o)[4][32], uint32_t (&a_frag)[2][4][4], uint32_t loads,
                                            uint32_t stage_b, uint32_t empty_a, uint32_t empty_b, uint64_t desc_pa) {
  const uint64_t desc_pb = hopper::advance_descriptor(desc_pa, C::kPSlotBytes);
  const uint64_t desc[4] = {desc_pa, hopper::advance_descriptor(desc_pa, 32), desc_pb,
                            hopper::advance_descriptor(desc_pb, 32)};
  hopper::mbarrier_arrive_at(empty_a);
  issue_value_mma_step(o, a_frag[0], desc[0], desc[0]);
  issue_value_mma_step(o, a_frag[1], desc[1], desc[1]);
  hopper::wgmma_wait_group<1>();
  value_mma_operands_free(o, a_frag[0]);
  load_value_fragments_ldsm(a_frag[0], stage_b, loads, 0);
  issue_value_mma_step(o, a_frag[0], desc[2], desc[2]);
  hopper::wgmma_wait_group<1>();
  value_mma_operands_free(o, a_frag[1]);
  load_value_fragments_ldsm(a_frag[1], stage_b, loads, 1);
  hopper::mbarrier_arrive_at(empty_b);
  issue_value_mma_step(o, a_frag[1], desc[3], desc[3]);
  hopper::wgmma_wait_group<0>();
  value_mma_operands_free(o, a_frag[0]);
  value_mma_operands_free(o, a_frag[1]);
}

// Math group m (warpgroups 1 and 2). A thread holds rows (heads) row_lo and row_lo + 8 of S and 16
// of the tile's 64 keys (hopper/wgmma_layout.h), and 8 d_v columns x 16 heads of O^T (value_layout.h).
template <int kLead, int kStep, int m>
__device__ __forceinline__ void math_group(const KernelArgs& p, uint32_t smem, uint8_t* smem_ptr, int64_t token,
                                           int head_block, int length, int num_pairs, int thread) {
  using Plan = QkLeadPlan<kLead, kStep>;
  const int warp = thread / 32, lane = thread % 32;
  const int row_lo = warp * 16 + lane / 4;
  const int32_t* indices = token_indices(p, token);
  const float scale_log2 = p.score_scale_log2;
  const uint64_t desc_q = hopper::kmajor_descriptor(smem + C::kQOffset, Swizzle::k64B, C::kHeads, 0);
  const auto k_descriptor = [&](int tile) {
    return hopper::kmajor_descriptor(stage_address(smem, tile), Swizzle::k64B, C::kKeysPerTile, 0);
  };
  // Shared addresses of the thread's rows in the bound exchange ([group][64] f32) and its group's
  // rescale factors ([64] f32).
  float* bound_own = reinterpret_cast<float*>(smem_ptr + C::kBoundOffset) + m * C::kHeads + row_lo;
  const float* bound_peer = reinterpret_cast<const float*>(smem_ptr + C::kBoundOffset) + (1 - m) * C::kHeads + row_lo;
  float* alpha_buf = reinterpret_cast<float*>(smem_ptr + C::kAlphaOffset) + m * C::kHeads;
  const uint32_t loads = value_ldsm_offset(m, thread);

  // The rows' softmax state (score_rows.cuh); m_bound and m_ref are the same in both groups.
  float thread_max[2] = {-INFINITY, -INFINITY}, m_bound[2] = {-INFINITY, -INFINITY};
  float m_ref[2] = {-INFINITY, -INFINITY}, sum_f32[2] = {0.0f, 0.0f}, sum_e4m3[2] = {0.0f, 0.0f};
  float o[4][32];
#pragma unroll
  for (int mb = 0; mb < 4; ++mb)
#pragma unroll
    for (int r = 0; r < 32; ++r) o[mb][r] = 0.0f;
  float s[32], lead[32];

  // Lane l checks keys 2l and 2l + 1 of the group's tile (each warp the whole tile).
  int32_t idx_even = index_at(indices, m * C::kKeysPerTile + 2 * lane, length);
  int32_t idx_odd = index_at(indices, m * C::kKeysPerTile + 2 * lane + 1, length);
  if (num_pairs > 0) {
    wait_barrier_at(q_full_at(smem), 0);
    wait_full(smem, m);
    hopper::fence_proxy_async_smem();  // cp.async wrote Q and the tile; wgmma reads them
    issue_plan_chain<Shape, Plan, 0>(lead, desc_q, k_descriptor(m));
    finish_after_lead<Shape, Plan>(s, lead, desc_q, k_descriptor(m));
  }
  FP8DSA_PHASE_MARK(m == 0 && thread == 0, kMarkFirstScore);
  FP8DSA_PAIR_STEP_CLOCK(steps);
  // One pair; with kNext, the lead chain of the group's next tile runs on the tensor cores under the
  // softmax, and its other chains follow the pair's P.V.
  const auto run_pair = [&](int pair, auto next) {
    constexpr bool kNext = decltype(next)::value;
    const int tile = 2 * pair + m;
    if constexpr (kNext) {
      wait_full(smem, tile + 2);
      hopper::fence_proxy_async_smem();  // cp.async wrote the tile; wgmma reads it
      issue_plan_chain<Shape, Plan, 0>(lead, desc_q, k_descriptor(tile + 2));
    }
    FP8DSA_PAIR_STEP(steps, kStepLead);
    const float2 bound = mask_and_bound_rows(s, __ballot_sync(0xffffffffu, index_valid(idx_even, p.num_kv)),
                                             __ballot_sync(0xffffffffu, index_valid(idx_odd, p.num_kv)), lane,
                                             thread_max);
    // Every lane of a quad stores the same value: no lane test.
    bound_own[0] = bound.x;
    bound_own[8] = bound.y;
    hopper::named_barrier_sync(kSeesawBounds, C::kMathThreads);
    FP8DSA_PAIR_STEP(steps, kStepBounds);
    const float peer[2] = {bound_peer[0], bound_peer[8]};
    float alpha[2], bias[2];
    alpha[0] = lazy_rescale(fmaxf(bound.x, peer[0]) * scale_log2, m_bound[0], m_ref[0], bias[0]);
    alpha[1] = lazy_rescale(fmaxf(bound.y, peer[1]) * scale_log2, m_bound[1], m_ref[1], bias[1]);
    alpha_buf[row_lo] = alpha[0];
    alpha_buf[row_lo + 8] = alpha[1];
    {
      uint32_t pf[2][4];
      tile_probabilities<true, C::kFmaExpEvery>(s, scale_log2, bias, alpha, pf, sum_f32, sum_e4m3);
      store_p(smem + C::kPOffset + m * C::kPSlotBytes, warp, lane, pf);
    }
    hopper::fence_proxy_async_smem();  // P is read by the wgmmas of both groups
    FP8DSA_PAIR_STEP(steps, kStepProbabilities);
    // The other group's tile was gathered long ago (its QK^T is done); its barrier phase is waited
    // for all the same, for the visibility of the copies to this thread.
    const int tile_a = 2 * pair, tile_b = tile_a + 1;
    wait_full(smem, tile_a + 1 - m);
    const uint32_t stage_a = stage_address(smem, tile_a), stage_b = stage_address(smem, tile_b);
    uint32_t a_frag[2][4][4];  // tile a's V^T does not depend on P: loaded before the barrier
    load_tile_a_values(a_frag, loads, stage_a);
    // Both groups' P: each group adds both tiles (measured: adding its own tile first, behind a
    // barrier of its own, and the other group's on an mbarrier signal, was 2-3% slower).
    hopper::named_barrier_sync(kSeesawP, C::kMathThreads);
    FP8DSA_PAIR_STEP(steps, kStepPWait);
    // The next tile's indices, loaded now and used a whole pair later.
    idx_even = index_at(indices, (tile + 2) * C::kKeysPerTile + 2 * lane, length);
    idx_odd = index_at(indices, (tile + 2) * C::kKeysPerTile + 2 * lane + 1, length);
    rescale_value_accumulators(o, alpha_buf, lane);
    pair_values(o, a_frag, loads, stage_b, empty_at(smem, tile_a), empty_at(smem, tile_b),
                hopper::kmajor_descriptor(smem + C::kPOffset, Swizzle::k64B, C::kHeads, 0));
    FP8DSA_PAIR_STEP(steps, kStepValues);
    if constexpr (kNext) {
      hopper::wgmma_fence_operands(lead);
      finish_after_lead<Shape, Plan>(s, lead, desc_q, k_descriptor(tile + 2));
    }
    FP8DSA_PAIR_STEP(steps, kStepChains);
  };
  // The last pair is peeled: a wgmma issued under a run-time condition serialises all of them.
  for (int pair = 0; pair + 1 < num_pairs; ++pair) run_pair(pair, std::true_type{});
  if (num_pairs > 0) run_pair(num_pairs - 1, std::false_type{});

  // The end: both groups past their last P.V (the P slots free), then the rows' partial results
  // through shared memory; both groups finish the rows the same way, group 0 writes lse.
  FP8DSA_PHASE_MARK(m == 0 && thread == 0, kMarkLoopEnd);
  FP8DSA_PAIR_STEP_STORE(steps, thread == 0, m);
  hopper::named_barrier_sync(kSeesawEnd, C::kMathThreads);
  float4* row_state = reinterpret_cast<float4*>(smem_ptr + C::kRowStateOffset);
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const float4 v = make_float4(quad_max(thread_max[h]), quad_sum(sum_f32[h]), quad_sum(sum_e4m3[h]), 0.0f);
    if (lane % 4 == 0) row_state[m * C::kHeads + row_lo + 8 * h] = v;
  }
  hopper::named_barrier_sync(kSeesawEnd, C::kMathThreads);
  float* out_scale = reinterpret_cast<float*>(smem_ptr + C::kOutScaleOffset) + m * C::kHeads;
  const int64_t head0 = int64_t{head_block} * C::kHeads;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int row = row_lo + 8 * h;
    const float4 a = row_state[row], b = row_state[C::kHeads + row];
    const bool head_exists = head0 + row < p.num_heads;
    const float sink = p.attn_sink != nullptr && head_exists ? p.attn_sink[head0 + row] : -INFINITY;
    const RowResult rr = finish_row(fmaxf(a.x, b.x) * scale_log2, m_ref[h], a.y + b.y, a.z + b.z, sink, p.kv_scale);
    if (lane % 4 == 0) {
      out_scale[row] = rr.out_scale;
      if (m == 0 && head_exists) {
        const int64_t cell = blockIdx.y * p.lse_part_stride + token * p.num_heads + head0 + row;
        p.lse[cell] = rr.lse;
        if (p.max_logits != nullptr) p.max_logits[cell] = rr.max_logit;
      }
    }
  }
  hopper::named_barrier_sync(kSeesawEnd, C::kMathThreads);

  // Each (head, block) the thread holds is two adjacent d_v columns (value_dv_ldsm): one 4-byte store;
  // a warp's store covers 4 heads x 32 contiguous bytes.
  __nv_bfloat16* out = p.out + blockIdx.y * p.out_part_stride + token * p.out_token_stride + head0 * p.out_head_stride;
#pragma unroll
  for (int c = 0; c < 8; ++c)
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const int head = value_head(lane, c, e);
      if (head0 + head >= p.num_heads) continue;  // h = 32 runs as one block with rows past h zero
      const float f = out_scale[head];
      store_output_head<1>([&](int mb, int hh) { return o[mb][4 * c + 2 * hh + e] * f; },
                           [&](int mb) { return out + head * p.out_head_stride + value_dv_ldsm(m, warp, lane, mb); });
    }
  FP8DSA_PHASE_MARK(m == 0 && thread == 0, kMarkEnd);
}

}  // namespace seesaw

// The kernel (kernel_entry.cuh): QK^T as QkLeadPlan<kLead, kStep> (score_gemm.cuh); warpgroup 0 the
// producer, warpgroups 1 and 2 the math groups.
template <int kLead, int kStep>
struct SeesawKernel {
  using C = SeesawConfig;
  static constexpr int kThreads = C::kThreads;
  static constexpr uint32_t kSmemAlloc = C::kSmemAlloc;
  static constexpr int kEntryRegs = C::kEntryRegs;
  static constexpr int kFirstRoleRegs = C::kProducerRegs;
  static constexpr int kSecondRoleRegs = C::kMathRegs;

  // Each role finds its shared memory itself, after its setmaxnreg.
  struct Setup {
    uint8_t* smem_raw;
  };
  __device__ __forceinline__ static Setup setup(uint8_t* smem_raw) {
    FP8DSA_PHASE_MARK(threadIdx.x == 0, kMarkSmid);
    FP8DSA_PHASE_MARK(threadIdx.x == 0, kMarkEntry);
    if (threadIdx.x == 0) seesaw::Barriers::at(aligned_smem_base(smem_raw).ptr).init();
    return {smem_raw};
  }

  __device__ __forceinline__ static void first_role(const KernelArgs& p, const Setup& setup, int thread) {
    const SmemBase base = aligned_smem_base(setup.smem_raw);
    const seesaw::Barriers bars = seesaw::Barriers::at(base.ptr);
    const int64_t token = blockIdx.x / p.head_blocks;
    const int head0 = static_cast<int>(blockIdx.x % p.head_blocks) * C::kHeads;
    const int length = token_length(p, token);
    produce_tiles<C::kHeads, C::kQOffset, C::kKOffset, C::kNumKStages>(
        p, base.address, bars.full, bars.empty, bars.q_full, token,
        p.q + token * p.q_token_stride + int64_t{head0} * p.q_head_stride, min(p.num_heads - head0, C::kHeads),
        length, 2 * ((tile_count(length) + 1) / 2), thread);
    FP8DSA_PHASE_MARK(thread == 0, kMarkProducerEnd);
  }

  __device__ __forceinline__ static void second_role(const KernelArgs& p, const Setup& setup, int wg, int thread) {
    const SmemBase base = aligned_smem_base(setup.smem_raw);
    const int64_t token = blockIdx.x / p.head_blocks;
    const int head_block = static_cast<int>(blockIdx.x % p.head_blocks);
    const int length = token_length(p, token);
    const int num_pairs = (tile_count(length) + 1) / 2;
    if (wg == 1) {
      seesaw::math_group<kLead, kStep, 0>(p, base.address, base.ptr, token, head_block, length, num_pairs, thread);
    } else {
      seesaw::math_group<kLead, kStep, 1>(p, base.address, base.ptr, token, head_block, length, num_pairs, thread);
    }
  }
};

}  // namespace fp8dsa::detail::sparse_mla
