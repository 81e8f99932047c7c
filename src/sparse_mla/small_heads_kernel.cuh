// Native FP8 sparse MLA for h in {8, 16} heads (tensor-parallel shards of the 128), in the
// transposed orientation, so that no MMA row is padding: the 64 keys of a tile are the wgmma M and
// the heads its N.
//   S^T[64 keys][h]  = K[64][576] . Q[h][576]^T   (m64nhk32, A = K tile, B = Q; 18 k-steps in
//                                                    kQkChains chains added in f32)
//   O^T[512][h]     += V^T[512][64] . P^T[h][64]^T (8 x m64nhk32 per 32-key step; A = V^T from
//                                                    registers, B = P^T)
// One CTA per two tokens. The producer warpgroup gathers both tokens' Q and their K tiles into one
// ring, the two tokens' tiles in turn (ring tile 2i + c is token c's tile i). Consumer warpgroup c
// takes token c: the ring's every other tile, the token's online softmax, and its output, so that
// neither consumer waits for the other. A consumer builds V^T's A fragments of its tile in registers
// from the gathered rows, as the 64-head kernel's two math groups do for their d_v halves together
// (value_layout.h: no transposed copy is written), while the first score chains run, and writes P^T
// (heads x keys, keys in the fragments' order, key_order.h) for the B operand.
#pragma once

#include <cmath>
#include <cstdint>

#include <cuda_bf16.h>

#include "hopper/mbarrier.cuh"
#include "hopper/smem_access.cuh"
#include "hopper/smem_descriptor.h"
#include "hopper/swizzle.h"
#include "hopper/warpgroup.cuh"
#include "hopper/wgmma.cuh"
#include "sparse_mla/config.h"
#include "sparse_mla/gather.cuh"
#include "sparse_mla/kernel_args.h"
#include "sparse_mla/kernel_entry.cuh"
#include "sparse_mla/key_order.h"
#include "sparse_mla/online_softmax.cuh"
#include "sparse_mla/pipeline.cuh"
#include "sparse_mla/score_gemm.cuh"
#include "sparse_mla/value_gemm.cuh"

namespace fp8dsa::detail::sparse_mla {

namespace small_heads {

using hopper::Swizzle;

// Max / sum over the 8 lanes of a warp that hold the same columns (lane % 4 equal).
__device__ __forceinline__ float column_max8(float x) {
  x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 4));
  x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 8));
  return fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 16));
}
__device__ __forceinline__ float column_sum8(float x) {
  x += __shfl_xor_sync(0xffffffffu, x, 4);
  x += __shfl_xor_sync(0xffffffffu, x, 8);
  return x + __shfl_xor_sync(0xffffffffu, x, 16);
}

// Register r of an m64nh accumulator holds column acc_col(lane, r); its index among the thread's
// kH / 4 columns:
__host__ __device__ constexpr int column_slot(int r) { return (r / 4) * 2 + r % 2; }
// ... and the column of the thread's slot j (the inverse: hopper::acc_col of slot j's registers).
__host__ __device__ constexpr int slot_column(int lane, int j) { return 8 * (j / 2) + 2 * (lane % 4) + j % 2; }

// Consumer c (a template argument, so that its named-barrier ids are immediates): token `token`
// (none past p.num_tokens: then its length is 0 and it writes nothing), whose tiles are the ring's
// tiles c, c + 2, ... below ring_tiles (2 x the larger of the two tokens' tile counts; the ring tiles
// past this token's own are all invalid keys).
template <int kH, int kQkChains, int c>
__device__ __forceinline__ void consumer(const KernelArgs& p, uint32_t smem, uint8_t* smem_ptr, uint64_t* full,
                                         uint64_t* empty, uint64_t* q_full, int64_t token, int length, int ring_tiles,
                                         int thread) {
  using SC = SmallHeadsConfig<kH>;
  using Shape = ScoreShape<kH, SC::kKeysPerTile>;
  constexpr int kR = SC::kAccRegs, kCols = SC::kColumns;
  const int warp = thread / 32, lane = thread % 32;
  const int row_lo = warp * 16 + lane / 4;  // the thread's two rows (keys): row_lo, row_lo + 8
  // V^T's fragments: d_v half w is value group w's layout (value_layout.h), O^T block 4w + mb.
  const ValueLoads value_load[2] = {value_loads(0, thread), value_loads(1, thread)};
  const uint32_t pt = smem + SC::kPtOffset + c * SC::kPtBytes;
  float* col_max_buf = reinterpret_cast<float*>(smem_ptr + SC::kColMaxOffset) + c * 4 * kH;
  const int32_t* indices = token_indices(p, token);
  const float scale_log2 = p.score_scale_log2;
  const uint64_t desc_q = hopper::kmajor_descriptor(smem + SC::kQOffset + c * SC::kQSlotBytes, Swizzle::k64B, kH, 0);
  const uint64_t desc_pt = hopper::kmajor_descriptor(pt, Swizzle::k64B, kH, 0);

  float o[SC::kDvBlocks][kR];
#pragma unroll
  for (int b = 0; b < SC::kDvBlocks; ++b)
#pragma unroll
    for (int r = 0; r < kR; ++r) o[b][r] = 0.0f;
  float sum_f32[kCols], sum_e4m3[kCols];
#pragma unroll
  for (int j = 0; j < kCols; ++j) {
    sum_f32[j] = 0.0f;
    sum_e4m3[j] = 0.0f;
  }
  // The running maxima of the heads (log2 units): iteration i reads buffer i % 2 and one warp
  // writes the next values to the other (all threads compute the same ones); the barriers of the
  // iteration order the accesses. Buffer 0 starts at -inf.
  float2* max_state = reinterpret_cast<float2*>(smem_ptr + SC::kStateOffset) + c * 2 * kH;
  if (thread < kH) max_state[thread] = make_float2(-INFINITY, -INFINITY);
  hopper::named_barrier_sync(kBarrierColumnMax + c, 128);  // (a consumer without tiles reads it at once)

  // The key indices of the thread's two rows, loaded one tile ahead (ring tile `tile` is the token's
  // tile tile / 2).
  int32_t next_lo = -1, next_hi = -1;
  const auto load_indices = [&](int tile) {
    const int pos = (tile / 2) * SC::kKeysPerTile + row_lo;
    next_lo = index_at(indices, pos, length);
    next_hi = index_at(indices, pos + 8, length);
  };
  load_indices(c);

  uint32_t vfrag[2][2][4][4];  // [k-step][d_v half][block][register]: the tile's V^T, 64 registers
  float s[kR], part[2][kR];
  bool valid_lo = false, valid_hi = false;
  uint32_t k_tile = 0;
  uint64_t desc_k = 0;
  int stage = 0;
  const auto start_scores = [&](int tile) {
    valid_lo = index_valid(next_lo, p.num_kv);
    valid_hi = index_valid(next_hi, p.num_kv);
    stage = tile % SC::kNumKStages;
    k_tile = smem + SC::kKOffset + stage * SC::kKTileBytes;
    wait_barrier(&full[stage], (tile / SC::kNumKStages) & 1);
    hopper::fence_proxy_async_smem();  // cp.async (generic proxy) wrote the tile; wgmma reads it
    desc_k = hopper::kmajor_descriptor(k_tile, Swizzle::k64B, SC::kKeysPerTile, 0);
    start_qk_chains<Shape, kQkChains>(s, part, desc_k, desc_q);
  };
  // Once this consumer's previous P.V is done: V^T's fragments of the tile while the first chains
  // run, the other chains, and the K stage goes back to the producer.
  const auto finish_scores = [&]() {
#pragma unroll
    for (int ks = 0; ks < 2; ++ks)
#pragma unroll
      for (int w = 0; w < 2; ++w) load_value_fragments(vfrag[ks][w], k_tile, value_load[w], ks);
    finish_qk_chains<Shape, kQkChains>(s, part, desc_k, desc_q);
    hopper::mbarrier_arrive(&empty[stage]);  // QK^T and the fragments' loads are done with the K tile
  };

  // O^T and the fragments as operands of the P.V in flight: fenced before the issue and after the
  // wait that covers it, so that no other value takes their registers in between.
  const auto pv_operands_fence = [&]() {
#pragma unroll
    for (int b = 0; b < SC::kDvBlocks; ++b) hopper::wgmma_fence_operands(o[b]);
#pragma unroll
    for (int ks = 0; ks < 2; ++ks)
#pragma unroll
      for (int w = 0; w < 2; ++w)
#pragma unroll
        for (int mb = 0; mb < 4; ++mb)
#pragma unroll
          for (int j = 0; j < 4; ++j) hopper::wgmma_fence_operand(vfrag[ks][w][mb][j]);
  };

  // Softmax over the tile's keys (the rows) for each head (column), then P^T and P.V.
  const auto softmax_and_pv = [&](int tile) {
#pragma unroll
    for (int r = 0; r < kR; ++r) {
      if (!((r / 2) % 2 ? valid_hi : valid_lo)) s[r] = -INFINITY;
    }
    load_indices(tile + 2);
    float tile_max[kCols];
#pragma unroll
    for (int j = 0; j < kCols; ++j) tile_max[j] = -INFINITY;
#pragma unroll
    for (int r = 0; r < kR; ++r) tile_max[column_slot(r)] = fmaxf(tile_max[column_slot(r)], s[r]);
#pragma unroll
    for (int j = 0; j < kCols; ++j) {
      tile_max[j] = column_max8(tile_max[j]);
      // Lanes 0..3 hold every column of the warp.
      if (lane < 4) col_max_buf[warp * kH + slot_column(lane, j)] = tile_max[j];
    }
    hopper::named_barrier_sync(kBarrierColumnMax + c, 128);
    const int parity = (tile / 2) % 2;  // this consumer's iteration number, mod 2
    float alpha[kCols], bias[kCols];
#pragma unroll
    for (int j = 0; j < kCols; ++j) {
      const int col = slot_column(lane, j);
      float mx = col_max_buf[col];
#pragma unroll
      for (int wp = 1; wp < 4; ++wp) mx = fmaxf(mx, col_max_buf[wp * kH + col]);
      const float2 state = max_state[parity * kH + col];
      float m_true = state.x, m_ref = state.y;
      alpha[j] = lazy_rescale(mx * scale_log2, m_true, m_ref, bias[j]);
      if (warp == 0 && lane < 4) max_state[(1 - parity) * kH + col] = make_float2(m_true, m_ref);
    }
    // P = 2^kPBiasLog2 * exp2(s - m_ref), quantised to e4m3 into P^T [head][key position].
    float part_f32[kCols], part_e4m3[kCols];
#pragma unroll
    for (int j = 0; j < kCols; ++j) part_f32[j] = part_e4m3[j] = 0.0f;
    const int pos_lo = v_pos_of_key(row_lo), pos_hi = v_pos_of_key(row_lo + 8);
#pragma unroll
    for (int r = 0; r < kR; r += 2) {
      // Registers r, r + 1: columns col, col + 1 of one row.
      const int j = column_slot(r);
      const float p0 = fast_exp2(fmaf(s[r], scale_log2, bias[j]));
      const float p1 = fast_exp2(fmaf(s[r + 1], scale_log2, bias[j + 1]));
      const uint32_t q2 = pack_e4m3x2(p0, p1);
      const float2 back = __half22float2(e4m3x2_to_half2(q2));
      part_f32[j] += p0;
      part_f32[j + 1] += p1;
      part_e4m3[j] += back.x;
      part_e4m3[j + 1] += back.y;
      const int col = hopper::acc_col(lane, r);
      const int pos = (r / 2) % 2 ? pos_hi : pos_lo;
      hopper::sts8(pt + hopper::kmajor_offset(Swizzle::k64B, kH, col, pos), q2 & 0xffu);
      hopper::sts8(pt + hopper::kmajor_offset(Swizzle::k64B, kH, col + 1, pos), (q2 >> 8) & 0xffu);
    }
#pragma unroll
    for (int j = 0; j < kCols; ++j) {
      sum_f32[j] = sum_f32[j] * alpha[j] + part_f32[j];
      sum_e4m3[j] = sum_e4m3[j] * alpha[j] + part_e4m3[j];
    }
    bool any_rescale = false;
#pragma unroll
    for (int j = 0; j < kCols; ++j) any_rescale |= alpha[j] != 1.0f;
    if (__any_sync(0xffffffffu, any_rescale)) {
#pragma unroll
      for (int b = 0; b < SC::kDvBlocks; ++b)
#pragma unroll
        for (int r = 0; r < kR; ++r) o[b][r] *= alpha[column_slot(r)];
    }
    hopper::fence_proxy_async_smem();  // the P^T bytes, for the wgmma below
    hopper::named_barrier_sync(kBarrierPtReady + c, 128);
    pv_operands_fence();
    hopper::wgmma_fence();
#pragma unroll
    for (int ks = 0; ks < 2; ++ks) {
#pragma unroll
      for (int w = 0; w < 2; ++w)
#pragma unroll
        for (int mb = 0; mb < 4; ++mb) {
          hopper::WgmmaE4m3<kH>::rs(o[4 * w + mb], vfrag[ks][w][mb], hopper::advance_descriptor(desc_pt, 32 * ks),
                                    true);
        }
    }
    hopper::wgmma_commit_group();
  };

  wait_barrier(q_full, 0);
  // This consumer's tiles: c, c + 2, ... below ring_tiles. The last one is peeled: with a branch
  // choosing between wait_group 1 and 0, ptxas loses track of the groups in flight and serialises
  // every wgmma.
  const int my_tiles = ring_tiles / 2;
  const int last_tile = c + 2 * (my_tiles - 1);
  if (my_tiles > 0) {
    start_scores(c);
    finish_scores();
  }
  int tile = c;
  for (; tile < last_tile; tile += 2) {
    softmax_and_pv(tile);
    start_scores(tile + 2);
    hopper::wgmma_wait_group<kStartedQkChains<kQkChains>>();  // this tile's P.V (V^T is rebuilt next)
    pv_operands_fence();
    finish_scores();
  }
  if (my_tiles > 0) {
    softmax_and_pv(tile);
    hopper::wgmma_wait_group<0>();
    pv_operands_fence();
  }

  // The end. Per column: the sums over the thread's rows, then over the warp, then the 4 warps'. The
  // last maxima are in buffer my_tiles % 2 (written before the last P^T barrier).
  float2* sums = reinterpret_cast<float2*>(smem_ptr + SC::kMergeOffset) + c * 4 * kH;  // [warp][h]
#pragma unroll
  for (int j = 0; j < kCols; ++j) {
    const float f = column_sum8(sum_f32[j]), q = column_sum8(sum_e4m3[j]);
    if (lane < 4) sums[warp * kH + slot_column(lane, j)] = make_float2(f, q);
  }
  hopper::named_barrier_sync(kBarrierPtReady + c, 128);
  const bool token_exists = token < p.num_tokens;
  const int64_t cell0 = token * p.num_heads;
  float out_scale[kCols];
#pragma unroll
  for (int j = 0; j < kCols; ++j) {
    const int col = slot_column(lane, j);
    float tf = 0.0f, tq = 0.0f;
#pragma unroll
    for (int wp = 0; wp < 4; ++wp) {
      const float2 v = sums[wp * kH + col];
      tf += v.x;
      tq += v.y;
    }
    const float2 state = max_state[(my_tiles % 2) * kH + col];  // (true, reference)
    const float sink = p.attn_sink != nullptr ? p.attn_sink[col] : -INFINITY;
    const RowResult rr = finish_row(state.x, state.y, tf, tq, sink, p.kv_scale);
    out_scale[j] = rr.out_scale;
    if (token_exists && warp == 0 && lane < 4) {
      p.lse[cell0 + col] = rr.lse;
      if (p.max_logits != nullptr) p.max_logits[cell0 + col] = rr.max_logit;
    }
  }
  if (!token_exists) return;
  // Each (head, d_v half w) the thread holds is 8 consecutive d_v columns (value_layout.h: block
  // 4w + mb's row half hh is column value_dv(w, warp, lane) + 2 mb + hh): one 16-byte store.
  __nv_bfloat16* out = p.out + token * p.out_token_stride;
#pragma unroll
  for (int j = 0; j < kCols; ++j) {
    const int r0 = 4 * (j / 2) + j % 2;  // the slot's register of row half 0; r0 + 2 of row half 1
    const float f = out_scale[j];
#pragma unroll
    for (int w = 0; w < 2; ++w) {
      store_output_head<4>(
          [&](int mb, int hh) { return o[4 * w + mb][r0 + 2 * hh] * f; },
          [&](int) { return out + slot_column(lane, j) * p.out_head_stride + value_dv(w, warp, lane); });
    }
  }
}

// The producer warpgroup: both tokens' Q (slot c for token token0 + c; a token past p.num_tokens
// gets zero rows), then the ring's tiles [0, ring_tiles): ring tile r is tile r / 2 of token
// token0 + r % 2, its positions past the token's length invalid (zero rows).
template <int kH>
__device__ __forceinline__ void produce_token_pair(const KernelArgs& p, uint32_t smem, uint64_t* full, uint64_t* empty,
                                                   uint64_t* q_full, int64_t token0, int length0, int length1,
                                                   int ring_tiles, int thread) {
  using SC = SmallHeadsConfig<kH>;
  const int quarter = thread % kGatherThreadsPerRow;
  const int row_in_pass = thread / kGatherThreadsPerRow;
  static_assert(kH <= kGatherRowsPerPass, "a token's Q rows in one pass");
#pragma unroll
  for (int t = 0; t < SC::kTokensPerCta; ++t) {
    const bool exists = token0 + t < p.num_tokens;
    const uint8_t* q = p.q + (exists ? token0 + t : token0) * p.q_token_stride;
    if (row_in_pass < kH) {
      gather_row<kH, RowCopy::kPerAtom>(smem + SC::kQOffset + t * SC::kQSlotBytes, row_in_pass,
                                        exists ? q + row_in_pass * p.q_head_stride : q, exists, quarter);
    }
  }
  hopper::cp_async_mbarrier_arrive_noinc(q_full);
  // Token t's tile i: its indices (-1 past the token's length: no load).
  const auto load_indices = [&](int t, int i, int32_t (&idx)[kTilePasses]) {
    // token_indices is read only below the token's length
    load_tile_indices(token_indices(p, token0 + t), i, t ? length1 : length0, row_in_pass, idx);
  };
  const auto fill_stage = [&](int r, const int32_t (&idx)[kTilePasses]) {
    fill_ring_stage<SC::kNumKStages, RowCopy::kPerAtom>(p, smem + SC::kKOffset, full, empty, r, idx, row_in_pass,
                                                        quarter);
  };
  // Each ring tile's indices are loaded while the one before is copied; the loop takes the two
  // tokens' tiles together, so that the two index sets swap roles without a copy. (Against loading
  // them just before the stage's wait, with 4 stages: h = 16 3%, h = 8 4-5% faster; H200, fourteenth
  // session.)
  int32_t idx_a[kTilePasses], idx_b[kTilePasses];
  load_indices(0, 0, idx_a);
  for (int r = 0; r < ring_tiles; r += 2) {  // ring_tiles is even
    load_indices(1, r / 2, idx_b);
    fill_stage(r, idx_a);
    load_indices(0, r / 2 + 1, idx_a);
    fill_stage(r + 1, idx_b);
  }
  // No copy may outlive the thread that issued it.
  hopper::cp_async_commit_group();
  hopper::cp_async_wait_group<0>();
}

}  // namespace small_heads

// The kernel (kernel_entry.cuh): warpgroup 0 the producer of both tokens' tiles, warpgroups 1 and 2
// the consumers of tokens 2 blockIdx.x and 2 blockIdx.x + 1.
template <int kH, int kQkChains>
struct SmallHeadsKernel {
  using SC = SmallHeadsConfig<kH>;
  static constexpr int kThreads = SC::kThreads;
  static constexpr uint32_t kSmemAlloc = SC::kSmemAlloc;
  static constexpr int kEntryRegs = SC::kEntryRegs;
  static constexpr int kFirstRoleRegs = SC::kProducerRegs;
  static constexpr int kSecondRoleRegs = SC::kConsumerRegs;

  // The barriers (pipeline.cuh): full, empty (the consuming warpgroup) and q_full.
  using Barriers = ProducerBarriers<SC::kNumKStages, 128, SC::kBarrierOffset>;
  static_assert(Barriers::kCount == SC::kNumBarriers, "the config counts these barriers");

  // The shared memory, the barriers' addresses and the CTA's first token, found once before the roles
  // part.
  struct Setup {
    SmemBase base;
    Barriers b;
    int64_t token0;
  };
  __device__ __forceinline__ static Setup setup(uint8_t* smem_raw) {
    const SmemBase base = aligned_smem_base(smem_raw);
    const Barriers b = Barriers::at(base.ptr);
    if (threadIdx.x == 0) b.init();
    return {base, b, int64_t{blockIdx.x} * SC::kTokensPerCta};
  }

  // Each role reads the tokens' lengths itself: a value live across setmaxnreg got spilled.
  __device__ __forceinline__ static int lengths(const KernelArgs& p, int64_t token0, int (&length)[2]) {
#pragma unroll
    for (int t = 0; t < SC::kTokensPerCta; ++t) length[t] = token0 + t < p.num_tokens ? token_length(p, token0 + t) : 0;
    return 2 * max(tile_count(length[0]), tile_count(length[1]));
  }

  __device__ __forceinline__ static void first_role(const KernelArgs& p, const Setup& setup, int thread) {
    const SmemBase& base = setup.base;
    const Barriers& b = setup.b;
    const int64_t token0 = setup.token0;
    int length[2];
    const int ring_tiles = lengths(p, token0, length);
    small_heads::produce_token_pair<kH>(p, base.address, b.full, b.empty, b.q_full, token0, length[0], length[1],
                                        ring_tiles, thread);
  }

  __device__ __forceinline__ static void second_role(const KernelArgs& p, const Setup& setup, int wg, int thread) {
    const SmemBase& base = setup.base;
    const Barriers& b = setup.b;
    const int64_t token0 = setup.token0;
    int length[2];
    const int ring_tiles = lengths(p, token0, length);
    if (wg == 1) {
      small_heads::consumer<kH, kQkChains, 0>(p, base.address, base.ptr, b.full, b.empty, b.q_full, token0, length[0],
                                              ring_tiles, thread);
    } else {
      small_heads::consumer<kH, kQkChains, 1>(p, base.address, base.ptr, b.full, b.empty, b.q_full, token0 + 1,
                                              length[1], ring_tiles, thread);
    }
  }
};

}  // namespace fp8dsa::detail::sparse_mla
