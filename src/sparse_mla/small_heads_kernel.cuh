// Native FP8 sparse MLA for h in {8, 16} heads (tensor-parallel shards of the 128), in the
// transposed orientation, so that no MMA row is padding: the 64 keys of a tile are the wgmma M and
// the heads its N.
//   S^T[64 keys][h]  = K[64][576] . Q[h][576]^T   (m64nhk32, A = K tile, B = Q; 18 k-steps in
//                                                    kQkGroups chains added in f32)
//   O^T[512][h]     += V^T[512][64] . P^T[h][64]^T (8 x m64nhk32 per 32-key step; A = V^T, B = P^T)
// One CTA per token. The producer warpgroup gathers Q and the K tiles exactly as for h >= 64
// (fp8_kernel.cuh). Two consumer warpgroups take alternate tiles and run independent online
// softmaxes (each its own maxima, sums and O^T over its tiles), merged once at the end, so neither
// waits for the other inside the key loop. A consumer transposes its own tiles into its V^T buffer
// (transpose_v.cuh, while the first score chain runs) and writes P^T (heads x keys, keys in V^T's
// permuted order) for the B operand.
#pragma once

#include <cmath>
#include <cstdint>

#include <cuda_bf16.h>

#include "sparse_mla/fp8_kernel.cuh"

namespace fp8dsa::sparse_mla {

template <int kH>
struct SmallHeadsConfig {
  static_assert(kH == 8 || kH == 16 || kH == 32, "the transposed kernel takes h in {8, 16, 32}");
  static constexpr int kHeads = kH;
  static constexpr int kAccRegs = kH / 2;    // m64nh accumulator registers per thread
  static constexpr int kColumns = kH / 4;    // distinct heads (columns) a thread holds
  static constexpr int kDvBlocks = Fp8Config::kDv / 64;  // O^T is 8 m64 blocks
  static constexpr int kThreads = 384;
  static constexpr uint32_t kQBytes = kH * Fp8Config::kDqk;
  static constexpr uint32_t kQOffset = 0;
  static constexpr uint32_t kKOffset = (kQBytes + 1023) / 1024 * 1024;
  static constexpr uint32_t kVtOffset = kKOffset + Fp8Config::kNumKStages * Fp8Config::kKTileBytes;
  static constexpr uint32_t kPtBytes = kH * Fp8Config::kKeysPerTile < 1024 ? 1024 : kH * Fp8Config::kKeysPerTile;
  static constexpr uint32_t kPtOffset = kVtOffset + 2 * Fp8Config::kVtTileBytes;  // one P^T per consumer
  static constexpr uint32_t kColMaxOffset = kPtOffset + 2 * kPtBytes;               // [consumer][warp][h] f32
  static constexpr uint32_t kMergeOffset = kColMaxOffset + 2 * 4 * kH * 4;          // [consumer][warp][h] x 4 f32
  // Running maxima (true, reference) per head: [consumer][2 buffers][h] float2, so that they need
  // no registers (h = 32 spilled 252 bytes with them in registers).
  static constexpr uint32_t kStateOffset = kMergeOffset + 2 * 4 * kH * 16;
  static constexpr uint32_t kBarrierOffset = kStateOffset + 2 * 2 * kH * 8;
  static constexpr uint32_t kSmemBytes = kBarrierOffset + Fp8Config::kNumBarriers * 8;
  static constexpr uint32_t kSmemAlloc = kSmemBytes + 1024;
  // The end: consumer 1's O^T (f32) goes through the K ring to consumer 0, which stages the bf16
  // output [h][512] in the V^T buffers.
  static constexpr uint32_t kO1Bytes = 128 * kDvBlocks * kAccRegs * 4;
  static_assert(kO1Bytes <= Fp8Config::kNumKStages * Fp8Config::kKTileBytes, "consumer 1's O^T fits the K ring");
  static_assert(kH * Fp8Config::kDv * 2 <= 2 * Fp8Config::kVtTileBytes, "the bf16 output fits the V^T buffers");
  static_assert(kSmemAlloc <= 227 * 1024, "exceeds the 227 KB of shared memory per CTA on sm_90");
  static_assert(kKOffset % 1024 == 0 && kVtOffset % 1024 == 0 && kPtOffset % 1024 == 0 && kPtBytes % 1024 == 0,
                "wgmma tiles start on a swizzle-pattern boundary");
  static_assert(kBarrierOffset % 8 == 0, "mbarriers are 8-byte aligned");
};

// Named barriers of the small-head kernel (0 is __syncthreads).
enum SmallHeadsBarrier : uint32_t {
  kBarrierColumnMax = 1,  // + consumer: a consumer's four warps published their column maxima
  kBarrierPtReady = 3,    // + consumer: P^T (and V^T) of the tile written
  kBarrierMerge = 5,      // both consumers: partial results published
  kBarrierMerged = 6,     // both consumers: consumer 1's O^T in shared memory
};

namespace detail {

__device__ __forceinline__ void sts8(uint32_t address, uint32_t v) {
  asm volatile("st.shared.u8 [%0], %1;\n" ::"r"(address), "r"(v) : "memory");
}

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

// Consumer c (a template argument, so that its named-barrier ids are immediates).
template <int kH, int kQkGroups, int c>
__device__ __forceinline__ void small_heads_consumer(const Fp8KernelParams& p, uint32_t smem, uint8_t* smem_ptr,
                                                     uint64_t* full, uint64_t* empty, uint64_t* q_full,
                                                     int64_t token, int length, int num_tiles, int thread) {
  using SC = SmallHeadsConfig<kH>;
  using Shape = ScoreShape<kH, C::kKeysPerTile>;
  constexpr int kR = SC::kAccRegs, kCols = SC::kColumns;
  const int warp = thread / 32, lane = thread % 32;
  const int row_lo = warp * 16 + lane / 4;  // the thread's two rows (keys): row_lo, row_lo + 8
  const uint32_t vt = smem + SC::kVtOffset + c * C::kVtTileBytes;
  const uint32_t pt = smem + SC::kPtOffset + c * SC::kPtBytes;
  float* col_max_buf = reinterpret_cast<float*>(smem_ptr + SC::kColMaxOffset) + c * 4 * kH;
  const int32_t* indices = p.indices + token * p.indices_stride;
  const float scale_log2 = p.score_scale_log2;
  const uint64_t desc_q = hopper::kmajor_descriptor(smem + SC::kQOffset, Swizzle::k64B, kH, 0);
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

  // The key indices of the thread's two rows, loaded one tile ahead.
  int32_t next_lo = -1, next_hi = -1;
  const auto load_indices = [&](int tile) {
    const int pos = tile * C::kKeysPerTile + row_lo;
    next_lo = pos < length ? __ldg(indices + pos) : -1;
    next_hi = pos + 8 < length ? __ldg(indices + pos + 8) : -1;
  };
  load_indices(c);

  constexpr int kKSteps = C::kDqk / 32;
  constexpr int kStepsPerGroup = kKSteps / kQkGroups;
  static_assert(kKSteps % kQkGroups == 0, "score groups split the 18 k-steps evenly");
  float s[kR];
  bool valid_lo = false, valid_hi = false;
  uint32_t k_tile = 0;
  uint64_t desc_k = 0;
  int stage = 0;
  const auto start_scores = [&](int tile) {
    valid_lo = index_valid(next_lo, p.num_kv);
    valid_hi = index_valid(next_hi, p.num_kv);
    stage = tile % C::kNumKStages;
    k_tile = smem + SC::kKOffset + stage * C::kKTileBytes;
    hopper::mbarrier_wait(&full[stage], (tile / C::kNumKStages) & 1);
    hopper::fence_proxy_async_smem();  // cp.async (generic proxy) wrote the tile; wgmma reads it
    desc_k = hopper::kmajor_descriptor(k_tile, Swizzle::k64B, C::kKeysPerTile, 0);
    hopper::wgmma_fence_operands(s);
    hopper::wgmma_fence();
    issue_qk<Shape, 0, kStepsPerGroup>(s, desc_k, desc_q);
    hopper::wgmma_commit_group();
  };
  // Once this consumer's previous P.V is done: V^T of the tile while the first chain runs, the
  // other chains, and the K stage goes back to the producer.
  const auto finish_scores = [&]() {
    transpose_v(k_tile, vt, thread);
    hopper::wgmma_wait_group<0>();
    hopper::wgmma_fence_operands(s);
    if constexpr (kQkGroups > 1) {
      float part[kR];
      add_qk_groups<Shape, 1, kQkGroups, kStepsPerGroup>(s, part, desc_k, desc_q);
    }
    hopper::fence_proxy_async_smem();        // the V^T stores, for this consumer's P.V
    hopper::mbarrier_arrive(&empty[stage]);  // QK^T and the transpose are done with the K tile
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
      // Lanes 0..3 hold every column of the warp: slot j is column 8 (j / 2) + 2 lane + j % 2.
      if (lane < 4) col_max_buf[warp * kH + 8 * (j / 2) + 2 * lane + j % 2] = tile_max[j];
    }
    hopper::named_barrier_sync(kBarrierColumnMax + c, 128);
    const int parity = (tile / 2) % 2;  // this consumer's iteration number, mod 2
    float alpha[kCols], bias[kCols];
#pragma unroll
    for (int j = 0; j < kCols; ++j) {
      const int col = 8 * (j / 2) + 2 * (lane % 4) + j % 2;
      float mx = col_max_buf[col];
#pragma unroll
      for (int wp = 1; wp < 4; ++wp) mx = fmaxf(mx, col_max_buf[wp * kH + col]);
      const float2 state = max_state[parity * kH + col];
      const float m_true = fmaxf(state.x, mx * scale_log2);
      float m_ref = state.y;
      alpha[j] = 1.0f;
      if (m_true > m_ref + C::kLazyRescaleLog2) {  // false while every key so far is invalid
        alpha[j] = fast_exp2(m_ref - m_true);       // 0 the first time (m_ref = -inf)
        m_ref = m_true;
      }
      bias[j] = m_ref == -INFINITY ? 0.0f : C::kPBiasLog2 - m_ref;
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
      sts8(pt + hopper::kmajor_offset(Swizzle::k64B, kH, col, pos), q2 & 0xffu);
      sts8(pt + hopper::kmajor_offset(Swizzle::k64B, kH, col + 1, pos), (q2 >> 8) & 0xffu);
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
#pragma unroll
    for (int b = 0; b < SC::kDvBlocks; ++b) hopper::wgmma_fence_operands(o[b]);
    hopper::wgmma_fence();
#pragma unroll
    for (int ks = 0; ks < 2; ++ks) {
#pragma unroll
      for (int b = 0; b < SC::kDvBlocks; ++b) {
        const uint64_t desc_vt = hopper::kmajor_descriptor(vt + b * 64 * 64, Swizzle::k64B, 64, 32 * ks);
        hopper::WgmmaE4m3<kH>::ss(o[b], desc_vt, hopper::advance_descriptor(desc_pt, 32 * ks), true);
      }
    }
    hopper::wgmma_commit_group();
  };

  hopper::mbarrier_wait(q_full, 0);
  // This consumer's tiles: c, c + 2, ... below num_tiles; the last one is peeled (see fp8_kernel.cuh).
  const int my_tiles = num_tiles > c ? (num_tiles - c + 1) / 2 : 0;
  const int last_tile = c + 2 * (my_tiles - 1);
  if (my_tiles > 0) {
    start_scores(c);
    finish_scores();
  }
  int tile = c;
  for (; tile < last_tile; tile += 2) {
    softmax_and_pv(tile);
    start_scores(tile + 2);
    hopper::wgmma_wait_group<1>();
#pragma unroll
    for (int b = 0; b < SC::kDvBlocks; ++b) hopper::wgmma_fence_operands(o[b]);
    finish_scores();
  }
  if (my_tiles > 0) {
    softmax_and_pv(tile);
    hopper::wgmma_wait_group<0>();
#pragma unroll
    for (int b = 0; b < SC::kDvBlocks; ++b) hopper::wgmma_fence_operands(o[b]);
  }

  // Merge. Per column: this consumer's sums over its rows, then over the warp, then its 4 warps.
  // The last maxima are in buffer my_tiles % 2 (written before the last P^T barrier).
  float4* merge = reinterpret_cast<float4*>(smem_ptr + SC::kMergeOffset);  // [consumer][warp][h]
#pragma unroll
  for (int j = 0; j < kCols; ++j) {
    const float f = column_sum8(sum_f32[j]), q = column_sum8(sum_e4m3[j]);
    if (lane < 4) {
      const int col = 8 * (j / 2) + 2 * lane + j % 2;
      const float2 state = max_state[(my_tiles % 2) * kH + col];
      merge[(c * 4 + warp) * kH + col] = make_float4(state.y, state.x, f, q);
    }
  }
  hopper::named_barrier_sync(kBarrierMerge, 256);
  // Every thread now knows, per column, both consumers' reference maxima and totals.
  float scale_own[kCols], out_scale[kCols];
  const int64_t cell0 = token * p.num_heads;
#pragma unroll
  for (int j = 0; j < kCols; ++j) {
    const int col = 8 * (j / 2) + 2 * (lane % 4) + j % 2;
    float ref[2], mt[2], tf[2], tq[2];
#pragma unroll
    for (int cc = 0; cc < 2; ++cc) {
      const float4 w0 = merge[(cc * 4) * kH + col];
      ref[cc] = w0.x;
      mt[cc] = w0.y;
      tf[cc] = w0.z;
      tq[cc] = w0.w;
#pragma unroll
      for (int wp = 1; wp < 4; ++wp) {
        const float4 v = merge[(cc * 4 + wp) * kH + col];
        tf[cc] += v.z;
        tq[cc] += v.w;
      }
    }
    const float m = fmaxf(ref[0], ref[1]);
    const float s0 = ref[0] == -INFINITY ? 0.0f : fast_exp2(ref[0] - m);
    const float s1 = ref[1] == -INFINITY ? 0.0f : fast_exp2(ref[1] - m);
    const float total_f32 = tf[0] * s0 + tf[1] * s1;
    const float total_e4m3 = tq[0] * s0 + tq[1] * s1;
    const bool any_valid = total_f32 > 0.0f;
    constexpr float kLn2 = 0.6931471805599453f;
    const float lse = any_valid ? (m + log2f(total_f32) - C::kPBiasLog2) * kLn2 : INFINITY;
    float sink_factor = 1.0f;
    if (p.attn_sink != nullptr && any_valid) sink_factor = 1.0f / (1.0f + expf(p.attn_sink[col] - lse));
    out_scale[j] = any_valid ? p.kv_scale * sink_factor / total_e4m3 : 0.0f;
    scale_own[j] = c == 0 ? s0 : s1;
    if (c == 0 && warp == 0 && lane < 4) {
      p.lse[cell0 + col] = lse;
      if (p.max_logits != nullptr) p.max_logits[cell0 + col] = any_valid ? fmaxf(mt[0], mt[1]) * kLn2 : -INFINITY;
    }
  }
  // Consumer 1 hands its scaled O^T to consumer 0 through the K ring (free: both consumers are past
  // their last tile), register-major so that every access is one 4-byte word per lane in order.
  float* o1 = reinterpret_cast<float*>(smem_ptr + SC::kKOffset);
  if constexpr (c == 1) {
#pragma unroll
    for (int b = 0; b < SC::kDvBlocks; ++b)
#pragma unroll
      for (int r = 0; r < kR; ++r) o1[(b * kR + r) * 128 + thread] = o[b][r] * scale_own[column_slot(r)];
  }
  hopper::named_barrier_sync(kBarrierMerged, 256);
  if constexpr (c == 1) return;
  // Consumer 0: O = (own O^T * s0 + consumer 1's) * out_scale, staged as bf16 [head][512 + 8] in
  // the V^T buffers, then written out as 16-byte row pieces.
  constexpr uint32_t kStageRow = C::kDv * 2 + 16;
  const uint32_t stage_base = smem + SC::kVtOffset;
#pragma unroll
  for (int b = 0; b < SC::kDvBlocks; ++b)
#pragma unroll
    for (int r = 0; r < kR; ++r) {
      const int j = column_slot(r);
      const float v = (o[b][r] * scale_own[j] + o1[(b * kR + r) * 128 + thread]) * out_scale[j];
      const int dv = b * 64 + hopper::acc_row(warp, lane, r);
      const __nv_bfloat16 h16 = __float2bfloat16_rn(v);
      asm volatile("st.shared.u16 [%0], %1;\n" ::"r"(stage_base + hopper::acc_col(lane, r) * kStageRow + dv * 2),
                   "h"(*reinterpret_cast<const unsigned short*>(&h16))
                   : "memory");
    }
  hopper::named_barrier_sync(kBarrierPtReady + c, 128);  // consumer 0's four warps staged it all
  __nv_bfloat16* out = p.out + token * p.out_token_stride;
  constexpr int kChunksPerRow = C::kDv * 2 / 16;
  for (int i = thread; i < kH * kChunksPerRow; i += 128) {
    const int head = i / kChunksPerRow, chunk = i % kChunksPerRow;
    uint32_t v[4];
    lds128(v, stage_base + head * kStageRow + chunk * 16);
    *reinterpret_cast<uint4*>(out + head * p.out_head_stride + chunk * 8) = make_uint4(v[0], v[1], v[2], v[3]);
  }
}

}  // namespace detail

template <int kH, int kQkGroups>
__global__ void __launch_bounds__(SmallHeadsConfig<kH>::kThreads, 1)
    sparse_mla_fp8_small_heads_kernel(const Fp8KernelParams p) {
  using SC = SmallHeadsConfig<kH>;
  using C = Fp8Config;
  extern __shared__ uint8_t smem_raw[];
  const detail::CtaPipeline cta = detail::setup_cta_pipeline(smem_raw, SC::kBarrierOffset);
  const uint32_t smem = cta.smem;
  uint8_t* smem_ptr = cta.smem_ptr;
  uint64_t *full = cta.bars.full, *empty = cta.bars.empty, *q_full = cta.bars.q_full;
  const int64_t token = blockIdx.x;
  const int wg = threadIdx.x / 128;
  const int thread = threadIdx.x % 128;
  if (wg == 0) {
    hopper::warpgroup_reg_dealloc<C::kProducerRegs>();
    const int length = detail::token_length(p, token);
    using Layout = detail::GatherLayout<kH, SC::kQOffset, SC::kKOffset>;
    detail::producer<Layout>(p, smem, cta.bars, token, 0, length,
                             (length + C::kKeysPerTile - 1) / C::kKeysPerTile, thread);
  } else {
    hopper::warpgroup_reg_alloc<C::kConsumerRegs>();
    const int length = detail::token_length(p, token);
    const int num_tiles = (length + C::kKeysPerTile - 1) / C::kKeysPerTile;
    if (wg == 1) {
      detail::small_heads_consumer<kH, kQkGroups, 0>(p, smem, smem_ptr, full, empty, q_full, token, length, num_tiles,
                                                     thread);
    } else {
      detail::small_heads_consumer<kH, kQkGroups, 1>(p, smem, smem_ptr, full, empty, q_full, token, length, num_tiles,
                                                     thread);
    }
  }
}

}  // namespace fp8dsa::sparse_mla
