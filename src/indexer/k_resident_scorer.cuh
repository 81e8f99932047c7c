// K-resident scorer (decode, MTP, few tokens): a CTA keeps one 64-key tile in shared memory as the
// wgmma A operand and streams blocks of kTokens query tokens (B = [kCols = kTokens * H][D]) past
// it through a TMA ring. The grid is (key tiles) x (token chunks), so even one token spreads over
// N / 64 CTAs. One consumer warpgroup and one producer warp per CTA; several CTAs share an SM, so
// one CTA's epilogue overlaps another's MMA. The epilogue is the Q-resident one (same S^T layout).
#pragma once

#include <cstdint>

#include <cuda.h>

#include "hopper/mbarrier.cuh"
#include "hopper/smem_descriptor.h"
#include "hopper/tma.cuh"
#include "hopper/warpgroup.cuh"
#include "hopper/wgmma.cuh"
#include "indexer/scorer_epilogue.cuh"
#include "indexer/scorers.h"

namespace fp8dsa::detail::indexer {

template <int kHeads_, int kDim_, int kStages_>
struct KResidentConfig {
  static constexpr int kHeads = kHeads_;
  static constexpr int kDim = kDim_;
  static constexpr int kStages = kStages_;
  // B columns: one token for H >= 32, else 32 columns (8 / 4 / 2 tokens for H = 4 / 8 / 16).
  static constexpr int kCols = kHeads >= 32 ? kHeads : 32;
  static constexpr int kTokens = kCols / kHeads;
  static constexpr int kKeyTile = 64;
  static constexpr int kThreads = 128 + 32;  // consumer warpgroup + producer warp
  static constexpr hopper::Swizzle kSwizzle = kDim == 128 ? hopper::Swizzle::k128B : hopper::Swizzle::k64B;
  static_assert(hopper::swizzle_width_bytes(kSwizzle) == kDim, "a row is exactly one swizzle atom");
  static constexpr int kTileBytes = kKeyTile * kDim;
  static constexpr int kQBytes = kCols * kDim;
  static constexpr int kQStride = (kQBytes + 1023) / 1024 * 1024;  // stages on swizzle boundaries
  static constexpr int kBarrierOffset = kTileBytes + kStages * kQStride;
  static constexpr int kSmemBytes = kBarrierOffset + (2 * kStages + 1) * 8 + 1024;
  static_assert(kTokens <= 32, "a warp checks a block's tokens one per lane");
};

// A bound clamped to [0, N] (SPEC: bounds are clamped).
__device__ __forceinline__ int64_t clamp_bound(int32_t bound, int64_t num_keys) {
  return bound < 0 ? 0 : (bound > num_keys ? num_keys : static_cast<int64_t>(bound));
}

// True when some token of block `first_token` has a non-empty clamped range meeting [lo, hi).
// Evaluated identically by the producer warp and every consumer warp (they must agree).
template <int kTokens>
__device__ __forceinline__ bool block_meets_tile(const ScorerArgs& a, int64_t first_token, int lo, int hi,
                                                 int lane) {
  bool meets = false;
  const int64_t t = first_token + lane;
  if (lane < kTokens && t < a.num_tokens) {
    const int64_t s = clamp_bound(a.ks[t], a.num_keys);
    const int64_t e = clamp_bound(a.ke[t], a.num_keys);
    meets = e > s && s < hi && e > lo;
  }
  return __any_sync(0xFFFFFFFFu, meets);
}

template <class Cfg>
__global__ void __launch_bounds__(Cfg::kThreads)
    k_resident_scorer_kernel(const __grid_constant__ CUtensorMap k_map,
                             const __grid_constant__ CUtensorMap q_map, const ScorerArgs args) {
  using Epi = ScoreEpilogue<Cfg::kHeads, Cfg::kCols>;
  constexpr int kKeyTile = Cfg::kKeyTile;
  extern __shared__ uint8_t smem_raw[];
  uint8_t* smem = hopper::align_to_swizzle_atom(smem_raw);
  uint8_t* k_smem = smem;
  uint8_t* q_smem = smem + Cfg::kTileBytes;
  uint64_t* full = reinterpret_cast<uint64_t*>(smem + Cfg::kBarrierOffset);
  uint64_t* empty = full + Cfg::kStages;
  uint64_t* k_full = empty + Cfg::kStages;

  const int tid = threadIdx.x;
  const int warp = tid / 32;
  const int lane = tid % 32;
  const int tile_lo = blockIdx.x * kKeyTile;
  const int tile_hi = static_cast<int>(min(int64_t{tile_lo} + kKeyTile, args.num_keys));  // no int overflow at N ~ 2^31
  // Token chunk: blocks [block_begin, block_end) of kTokens tokens.
  const int blocks_per_chunk = (args.num_token_blocks + gridDim.y - 1) / gridDim.y;
  const int block_begin = blockIdx.y * blocks_per_chunk;
  const int block_end = min(args.num_token_blocks, block_begin + blocks_per_chunk);

  if (tid == 0) {
    for (int s = 0; s < Cfg::kStages; ++s) {
      hopper::mbarrier_init(&full[s], 1);
      hopper::mbarrier_init(&empty[s], 4);
    }
    hopper::mbarrier_init(k_full, 1);
    hopper::mbarrier_init_fence();
  }
  __syncthreads();

  if (warp == 4) {
    // Producer warp: the key tile once, then every overlapping token block of the chunk.
    bool loaded_k = false;
    int j = 0;
    for (int b = block_begin; b < block_end; ++b) {
      const int64_t first_token = static_cast<int64_t>(b) * Cfg::kTokens;
      if (!block_meets_tile<Cfg::kTokens>(args, first_token, tile_lo, tile_hi, lane)) continue;
      if (lane == 0) {
        if (!loaded_k) {
          hopper::mbarrier_arrive_expect_tx(k_full, Cfg::kTileBytes);
          hopper::tma_load_2d(k_smem, &k_map, k_full, 0, tile_lo);
        }
        const int stage = j % Cfg::kStages;
        const int use = j / Cfg::kStages;
        if (use > 0) hopper::mbarrier_wait(&empty[stage], (use - 1) & 1);
        hopper::mbarrier_arrive_expect_tx(&full[stage], Cfg::kQBytes);
        hopper::tma_load_3d(q_smem + stage * Cfg::kQStride, &q_map, &full[stage], 0, 0,
                            static_cast<int32_t>(first_token));
      }
      __syncwarp();
      loaded_k = true;
      ++j;
    }
    return;
  }

  // Consumer warpgroup.
  const int key0 = tile_lo + warp * 16 + lane / 4;
  const float scale0 = key0 < args.num_keys ? args.k_scale[key0] : 0.0f;
  const float scale1 = key0 + 8 < args.num_keys ? args.k_scale[key0 + 8] : 0.0f;
  const uint32_t k_addr = hopper::smem_address(k_smem);
  const uint32_t q_addr = hopper::smem_address(q_smem);
  bool waited_k = false;
  int j = 0;
  for (int b = block_begin; b < block_end; ++b) {
    const int64_t first_token = static_cast<int64_t>(b) * Cfg::kTokens;
    if (!block_meets_tile<Cfg::kTokens>(args, first_token, tile_lo, tile_hi, lane)) continue;
    if (!waited_k) {
      hopper::mbarrier_wait(k_full, 0);
      waited_k = true;
    }
    const int stage = j % Cfg::kStages;
    hopper::mbarrier_wait(&full[stage], (j / Cfg::kStages) & 1);
    float acc[Epi::kAccRegs];
    hopper::wgmma_fence();
#pragma unroll
    for (int k = 0; k < Cfg::kDim / 32; ++k) {
      const uint64_t desc_a = hopper::kmajor_descriptor(k_addr, Cfg::kSwizzle, kKeyTile, k * 32);
      const uint64_t desc_b =
          hopper::kmajor_descriptor(q_addr + stage * Cfg::kQStride, Cfg::kSwizzle, Cfg::kCols, k * 32);
      hopper::WgmmaE4m3<Cfg::kCols>::ss(acc, desc_a, desc_b, k > 0);
    }
    hopper::wgmma_commit_group();
    // Weights and bounds of this block, loaded while the MMA runs.
    float w_reg[Epi::kWeightRegs];
    Epi::load_weights(w_reg, args.w, args.w_stride, first_token, args.num_tokens, lane);
    int2 bound[Epi::kFinal];
#pragma unroll
    for (int f = 0; f < Epi::kFinal; ++f) {
      const int64_t t = first_token + Epi::token_of(lane, Epi::final_index(lane, f));
      bound[f] = make_int2(0, 0);
      if (t < args.num_tokens) {
        bound[f].x = static_cast<int>(clamp_bound(args.ks[t], args.num_keys));
        bound[f].y = static_cast<int>(clamp_bound(args.ke[t], args.num_keys));
      }
    }
    hopper::wgmma_wait_group<0>();
    hopper::wgmma_fence_operands(acc);
    __syncwarp();
    if (lane == 0) hopper::mbarrier_arrive(&empty[stage]);
    ++j;

    float part[Epi::kParts];
    Epi::reduce(acc, w_reg, part, lane);
    if (Epi::owner(lane)) {
#pragma unroll
      for (int f = 0; f < Epi::kFinal; ++f) {
        const int index = Epi::final_index(lane, f);
        const int token = Epi::token_of(lane, index);
        const int key = key0 + 8 * (index & 1);
        if (key >= bound[f].x && key < bound[f].y) {
          args.logits[(first_token + token) * args.logits_stride + key] = part[f] * ((index & 1) ? scale1 : scale0);
        }
      }
    }
  }
}

}  // namespace fp8dsa::detail::indexer
