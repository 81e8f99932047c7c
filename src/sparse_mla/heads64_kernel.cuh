// The native FP8 sparse MLA kernel for one (token, 64-head block) per CTA: QK^T and P.V both on the
// e4m3 tensor cores (SASS QGMMA). Roles and shared-memory plan: config.h (Heads64Config).
//
// Per 64-key tile t:
//   value groups (w = 0, 1): V^T fragments of t from the gathered rows -> wait for the rescale
//     factors of t -> O^T *= them (every tile) -> wait for P(t) -> O^T += V^T P^T -> release the P
//     slot -> refill their share of t's K stage with tile t + kNumKStages;
//   score group: wait for tile t -> S = Q K^T (QK^T chains) -> mask invalid keys -> the row maxima
//     and the rescale factors of all 64 heads, published at once (alpha slot t % kNumAlphaSlots) ->
//     the rest of the online softmax -> P(t) into P slot t % kNumPSlots.
// The score group runs up to kNumPSlots tiles ahead of the value groups, so its softmax overlaps
// their P.V and its QK^T of the next tile their refill.
#pragma once

#include <cmath>
#include <cstdint>

#include <cuda_bf16.h>

#include "hopper/mbarrier.cuh"
#include "hopper/smem_access.cuh"
#include "hopper/smem_descriptor.h"
#include "hopper/warpgroup.cuh"
#include "hopper/wgmma.cuh"
#include "sparse_mla/config.h"
#include "sparse_mla/gather.cuh"
#include "sparse_mla/kernel_args.h"
#include "sparse_mla/online_softmax.cuh"
#include "sparse_mla/pipeline.cuh"
#include "sparse_mla/score_gemm.cuh"
#include "sparse_mla/score_rows.cuh"
#include "sparse_mla/value_gemm.cuh"

namespace fp8dsa::detail::sparse_mla {
namespace heads64 {

using C = Heads64Config;
using hopper::Swizzle;

using Barriers = ScoreValueBarriers<C>;

// The score group (warpgroup 0). A thread holds rows (heads) row_lo and row_lo + 8 of the
// accumulator and 16 of the tile's 64 keys (hopper/wgmma_layout.h: acc_row, acc_col); the quad of
// 4 lanes sharing a row holds all of its keys. The loop is software-pipelined: the first two QK^T
// chains of tile t + 1 run on the tensor cores while the softmax of tile t runs on the ALUs, and
// every chain is complete at the loop edge (a wgmma in flight across it serialises all of them).
template <int kQkChains>
__device__ __forceinline__ void score_group(const KernelArgs& p, uint32_t smem, uint8_t* smem_ptr, const Barriers& bars,
                                            uint64_t* alpha_full, int64_t token, int head_block, int length,
                                            int num_tiles, int thread) {
  using Shape = ScoreShape<C::kKeysPerTile, C::kHeads>;
  // Chains of the next tile issued before the softmax of this one: 2 (measured against 0, bench/RESULTS.md);
  // more would not fit the score group's registers beside the current scores.
  constexpr int kStart = kQkChains < 2 ? kQkChains : 2;
  const int warp = thread / 32, lane = thread % 32;
  const int row_lo = warp * 16 + lane / 4;
  const int32_t* indices = p.indices + token * p.indices_stride;
  const float scale_log2 = p.score_scale_log2;
  const uint64_t desc_q = hopper::kmajor_descriptor(smem + C::kQOffset, Swizzle::k64B, C::kHeads, 0);
  // The rows' softmax state (score_rows.cuh).
  float thread_max[2] = {-INFINITY, -INFINITY}, m_bound[2] = {-INFINITY, -INFINITY};
  float m_ref[2] = {-INFINITY, -INFINITY}, sum_f32[2] = {0.0f, 0.0f}, sum_e4m3[2] = {0.0f, 0.0f};

  // Lane l checks keys 2l and 2l + 1 of the tile (each warp the whole tile).
  int32_t idx_even = index_at(indices, 2 * lane, length);
  int32_t idx_odd = index_at(indices, 2 * lane + 1, length);
  const auto k_descriptor = [&](int tile) {
    return hopper::kmajor_descriptor(smem + C::kKOffset + (tile % C::kNumKStages) * C::kKTileBytes, Swizzle::k64B,
                                     C::kKeysPerTile, 0);
  };
  const auto start_scores = [&](int tile, float (&s)[32], float (&part)[2][32]) {
    wait_barrier(&bars.full[tile % C::kNumKStages], (tile / C::kNumKStages) & 1);
    hopper::fence_proxy_async_smem();  // cp.async wrote the tile; wgmma reads it
    start_qk_chains<Shape, kQkChains, kStart>(s, part, desc_q, k_descriptor(tile));
  };
  const auto finish_scores = [&](int tile, float (&s)[32], float (&part)[2][32]) {
    finish_qk_chains<Shape, kQkChains, kStart>(s, part, desc_q, k_descriptor(tile));
  };
  // Softmax of tile `tile` (its complete scores in s), P and the tile's rescale factors into its
  // P slot (released by the caller); then the indices of the next tile.
  const auto softmax_and_publish = [&](int tile, float (&s)[32]) {
    uint32_t pf[2][4];
    float alpha[2];
    // The tile's rescale factors, published before its exponentials (every lane of a quad stores the
    // same value: no lane test).
    const auto publish_alpha = [&](const float (&a)[2]) {
      float* early = reinterpret_cast<float*>(smem_ptr + C::kEarlyAlphaOffset) + (tile % C::kNumAlphaSlots) * C::kHeads;
      early[row_lo] = a[0];
      early[row_lo + 8] = a[1];
      hopper::mbarrier_arrive(&alpha_full[tile % C::kNumAlphaSlots]);
    };
    softmax_tile<true>(s, __ballot_sync(0xffffffffu, index_valid(idx_even, p.num_kv)),
                       __ballot_sync(0xffffffffu, index_valid(idx_odd, p.num_kv)), lane, scale_log2, pf, alpha,
                       thread_max, m_bound, m_ref, sum_f32, sum_e4m3, publish_alpha);
    const int slot = tile % C::kNumPSlots;
    if (tile >= C::kNumPSlots) wait_barrier(&bars.p_empty[slot], ((tile / C::kNumPSlots) - 1) & 1);
    publish_p<C>(smem, smem_ptr, slot, warp, lane, row_lo, pf, alpha);
    // Loaded after the fence (whose membar would wait for them), used a whole tile later.
    idx_even = index_at(indices, (tile + 1) * C::kKeysPerTile + 2 * lane, length);
    idx_odd = index_at(indices, (tile + 1) * C::kKeysPerTile + 2 * lane + 1, length);
  };

  // P(t) is released to the value groups only once the QK^T chains of tile t + 1 are complete: their
  // P.V then runs on the tensor cores under the softmax of tile t + 1 instead of sharing them with
  // (and slowing) the chains, which are the score group's critical path.
  float s[32], s_next[32], part[2][32];
  if (num_tiles > 0) {
    wait_barrier(bars.q_full, 0);
    hopper::fence_proxy_async_smem();  // cp.async wrote Q; wgmma reads it
    start_scores(0, s, part);
    finish_scores(0, s, part);
  }
  // The last tile is peeled: the next tile's chains go ahead only where there is one.
  for (int tile = 0; tile + 1 < num_tiles; ++tile) {
    start_scores(tile + 1, s_next, part);
    softmax_and_publish(tile, s);
    finish_scores(tile + 1, s_next, part);
    hopper::mbarrier_arrive(&bars.p_full[tile % C::kNumPSlots]);
#pragma unroll
    for (int r = 0; r < 32; ++r) s[r] = s_next[r];
  }
  if (num_tiles > 0) {
    softmax_and_publish(num_tiles - 1, s);
    hopper::mbarrier_arrive(&bars.p_full[(num_tiles - 1) % C::kNumPSlots]);
  }

  write_row_results<C, true>(p, smem_ptr, token, head_block, row_lo, lane, scale_log2, thread_max, m_ref, sum_f32,
                            sum_e4m3);
  hopper::named_barrier_sync(kBarrierEpilogue, C::kThreads);
}

// Value group w (warpgroups 1 and 2).
template <int w>
__device__ __forceinline__ void value_group(const KernelArgs& p, uint32_t smem, uint8_t* smem_ptr, const Barriers& bars,
                                            uint64_t* alpha_full, int64_t token, int head_block, int length,
                                            int num_tiles, int thread) {
  const int warp = thread / 32, lane = thread % 32;
  const int row_in_pass = thread / kGatherThreadsPerRow;
  const int column = 16 * (thread % kGatherThreadsPerRow);
  const uint32_t share = smem + value_share_offset(thread);
  const int32_t* indices = p.indices + token * p.indices_stride;

  {  // Q: this group's share of the CTA's 64 heads (rows past num_heads zero-filled).
    const uint8_t* q = p.q + token * p.q_token_stride + int64_t{head_block} * C::kHeads * p.q_head_stride;
    const uint8_t* src[2];
    bool valid[2];
#pragma unroll
    for (int pass = 0; pass < 2; ++pass) {
      const int row = pass * kGatherRowsPerPass + row_in_pass;
      valid[pass] = int64_t{head_block} * C::kHeads + row < p.num_heads;
      src[pass] = (valid[pass] ? q + row * p.q_head_stride : p.q) + column;
    }
    gather_value_group_share<w>(share + C::kQOffset, src, valid);
    hopper::cp_async_mbarrier_arrive_noinc(bars.q_full);
  }
  // The thread's rows of tile `tile`: positions 64 tile + 32 pass + thread / 4.
  const auto load_indices = [&](int32_t (&idx)[2], int tile) {
#pragma unroll
    for (int pass = 0; pass < 2; ++pass)
      idx[pass] = index_at(indices, tile * C::kKeysPerTile + pass * kGatherRowsPerPass + row_in_pass, length);
  };
  const auto gather_tile = [&](int tile, const int32_t (&idx)[2]) {
    const uint8_t* src[2];
    bool valid[2];
#pragma unroll
    for (int pass = 0; pass < 2; ++pass) {
      valid[pass] = index_valid(idx[pass], p.num_kv);
      src[pass] = p.kv + (valid[pass] ? int64_t{idx[pass]} * p.kv_row_stride : 0) + column;
    }
    const int stage = tile % C::kNumKStages;
    gather_value_group_share<w>(share + C::kKOffset + stage * C::kKTileBytes, src, valid);
    hopper::cp_async_mbarrier_arrive_noinc(&bars.full[stage]);
  };
  // The first stages' indices all in flight before their gathers (one after the other, each
  // gather waited for its own index loads: the start of every CTA).
  int32_t first[C::kNumKStages][2];
#pragma unroll
  for (int tile = 0; tile < C::kNumKStages; ++tile) load_indices(first[tile], tile);
#pragma unroll
  for (int tile = 0; tile < C::kNumKStages; ++tile)
    if (tile < num_tiles) gather_tile(tile, first[tile]);
  int32_t next[2];
  load_indices(next, C::kNumKStages);  // the first refill's rows

  const ValueLoads loads = value_loads(w, thread);
  const float* alpha_buf = reinterpret_cast<const float*>(smem_ptr + C::kEarlyAlphaOffset);
  float o[4][32];
#pragma unroll
  for (int mb = 0; mb < 4; ++mb)
#pragma unroll
    for (int r = 0; r < 32; ++r) o[mb][r] = 0.0f;

  for (int tile = 0; tile < num_tiles; ++tile) {
    const int stage = tile % C::kNumKStages, slot = tile % C::kNumPSlots;
    const uint32_t k_tile = smem + C::kKOffset + stage * C::kKTileBytes;
    wait_barrier(&bars.full[stage], (tile / C::kNumKStages) & 1);
    uint32_t frag[4][4];
    load_value_fragments(frag, k_tile, loads, 0);
    // Every tile, while P is still being computed: a rescale only on the tiles that move a
    // reference max made the kernel's time depend on the data (9% slower on scores that do not
    // follow the selection order), and interleaving the multiplies with the wgmmas makes ptxas
    // serialise every wgmma of the kernel (C7518).
    const int alpha_slot = tile % C::kNumAlphaSlots;
    wait_barrier(&alpha_full[alpha_slot], (tile / C::kNumAlphaSlots) & 1);
    rescale_value_accumulators(o, alpha_buf + alpha_slot * C::kHeads, lane);
    wait_barrier(&bars.p_full[slot], (tile / C::kNumPSlots) & 1);
    const uint64_t desc_p =
        hopper::kmajor_descriptor(smem + C::kPOffset + slot * C::kPSlotBytes, Swizzle::k64B, C::kHeads, 0);
    value_mma_step(o, frag, desc_p, desc_p);
    load_value_fragments(frag, k_tile, loads, 1);
    const uint64_t desc_p1 = hopper::advance_descriptor(desc_p, 32);
    value_mma_step(o, frag, desc_p1, desc_p1);
    hopper::mbarrier_arrive(&bars.p_empty[slot]);
    if (tile + C::kNumKStages < num_tiles) {
      // Every thread of the group has read its V of this stage, and P(tile) showed the score
      // group done with it: refill the group's share.
      hopper::named_barrier_sync(kBarrierValueGroup + w, 128);
      gather_tile(tile + C::kNumKStages, next);
      load_indices(next, tile + C::kNumKStages + 1);
    }
  }
  // No copy may outlive the thread that issued it (with no tiles, Q's was never waited for).
  hopper::cp_async_commit_group();
  hopper::cp_async_wait_group<0>();

  // Epilogue: the score group's output scales, then each (head, 8 d_v columns) the thread holds as
  // one 16-byte store; a warp's store covers 4 heads x 128 contiguous bytes.
  hopper::named_barrier_sync(kBarrierEpilogue, C::kThreads);
  const float* out_scale = reinterpret_cast<const float*>(smem_ptr + C::kOutScaleOffset);
  const int64_t head0 = int64_t{head_block} * C::kHeads;
  __nv_bfloat16* out = p.out + token * p.out_token_stride + head0 * p.out_head_stride + value_dv(w, warp, lane);
#pragma unroll
  for (int c = 0; c < 8; ++c)
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const int head = value_head(lane, c, e);
      if (head0 + head >= p.num_heads) continue;  // h = 32 runs as one block with rows past h zero
      const float f = out_scale[head];
      uint32_t words[4];
#pragma unroll
      for (int mb = 0; mb < 4; ++mb) {
        // block mb's row halves 0 / 1 are d_v columns 2 mb and 2 mb + 1 of the thread's eight
        const __nv_bfloat162 v = __floats2bfloat162_rn(o[mb][4 * c + e] * f, o[mb][4 * c + 2 + e] * f);
        words[mb] = *reinterpret_cast<const uint32_t*>(&v);
      }
      *reinterpret_cast<uint4*>(out + head * p.out_head_stride) = make_uint4(words[0], words[1], words[2], words[3]);
    }
}

}  // namespace heads64

template <int kQkChains>
__global__ void __launch_bounds__(Heads64Config::kThreads, 1) sparse_mla_heads64_kernel(const KernelArgs p) {
  using C = Heads64Config;
  extern __shared__ uint8_t smem_raw[];
  const SmemBase base = aligned_smem_base(smem_raw);
  const heads64::Barriers bars = heads64::Barriers::at(base.ptr);
  uint64_t* alpha_full = reinterpret_cast<uint64_t*>(base.ptr + C::kBarrierOffset) + C::kNumSharedBarriers;
  if (threadIdx.x == 0) {
    for (int s = 0; s < C::kNumAlphaSlots; ++s) hopper::mbarrier_init(&alpha_full[s], 128);
    bars.init();  // its init fence covers alpha_full too
  }
  __syncthreads();
  const int wg = threadIdx.x / 128;
  const int thread = threadIdx.x % 128;
  // Each role reads its token and length after its setmaxnreg: values live across it got spilled.
  if (wg == 0) {
    hopper::warpgroup_reg_dealloc<C::kScoreRegs>();
    const int64_t token = blockIdx.x / p.head_blocks;
    const int length = token_length(p, token);
    heads64::score_group<kQkChains>(p, base.address, base.ptr, bars, alpha_full, token,
                                    static_cast<int>(blockIdx.x % p.head_blocks), length, tile_count(length),
                                    thread);
  } else {
    hopper::warpgroup_reg_alloc<C::kValueRegs>();
    const int64_t token = blockIdx.x / p.head_blocks;
    const int head_block = static_cast<int>(blockIdx.x % p.head_blocks);
    const int length = token_length(p, token);
    if (wg == 1) {
      heads64::value_group<0>(p, base.address, base.ptr, bars, alpha_full, token, head_block, length,
                              tile_count(length), thread);
    } else {
      heads64::value_group<1>(p, base.address, base.ptr, bars, alpha_full, token, head_block, length,
                              tile_count(length), thread);
    }
  }
}

}  // namespace fp8dsa::detail::sparse_mla
