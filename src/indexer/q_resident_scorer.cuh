// Q-resident / K-streaming prefill scorer (seed 002, Hopper form).
//
// One CTA owns a block of query tokens whose Q rows, [(token, head)][D] e4m3, stay in shared
// memory as the wgmma B operand(s), kCols = (tokens of one B) * H columns each. Key tiles of 64 rows
// (the A operand, M = 64) stream through a kStages-deep TMA ring. Warp roles:
//   - the last warpgroup is the producer: one thread issues the Q load and the K tile loads; the
//     group gives its registers back (setmaxnreg) to the consumers;
//   - kConsumers consumer warpgroups. With kShareTiles each owns its own B block (the CTA holds
//     kConsumers * kCols / H tokens) and every consumer scores every key tile, so a K tile read
//     from L2 feeds kConsumers times the MMA work; otherwise they share one B block and take the
//     key tiles round-robin. A consumer issues the tile's D / 32 wgmma (m64 n kCols k32, SS),
//     releases the stage as soon as the MMA has read it, and runs the relu x w head-sum epilogue
//     in registers while the other consumers' MMAs keep the tensor cores busy.
// Only key tiles inside [min ks, max ke) of the block are loaded; each finished cell is checked
// against its own token's [ks, ke) and handed to the Output policy (scorer_output.h):
// LogitsOutput stores it into the [T, logits_stride] logits, fused_topk's CandidateOutput keeps it
// only if it can still be among its token's top k. The grid is ordered last-token-block first, so
// under a causal guard the longest blocks start first; `key_splits` cuts each block's key range into equal parts
// (separate CTAs, no reduction needed: every (token, key) cell is independent) to fill the machine
// when there are few token blocks. With LogitsOutput the grid's last token blocks (the shortest)
// may be cut finer (`tail_blocks`, `tail_splits`: key_splits.h), so that the last wave is of small
// parts rather than a few whole blocks with idle SMs beside them.
#pragma once

#include <cstdint>
#include <type_traits>

#include <cuda.h>

#include "hopper/grid_dependency.cuh"
#include "hopper/mbarrier.cuh"
#include "hopper/smem_descriptor.h"
#include "hopper/tma.cuh"
#include "hopper/warpgroup.cuh"
#include "hopper/wgmma.cuh"
#include "indexer/config.h"
#include "indexer/linear_split.cuh"
#include "indexer/scorer_epilogue.cuh"
#include "indexer/scorer_output.h"
#include "indexer/scorers.h"

namespace fp8dsa::detail::indexer {

template <class Cfg, class Output>
__global__ void __launch_bounds__(Cfg::kThreads, 1)
    q_resident_scorer_kernel(const __grid_constant__ CUtensorMap k_map,
                             const __grid_constant__ CUtensorMap q_map, const ScorerArgs args,
                             const __grid_constant__ typename Output::Args out_args) {
  using Epi = ScoreEpilogue<Cfg::kHeads, Cfg::kCols>;
  constexpr bool kSampled = SampledPrefix<Output, Cfg>;  // sample tiles before the key tiles
  // The split epilogue (config.h), for every output: fused_topk ranks exactly the logits the plain
  // scorer writes.
  constexpr bool kSplit = Cfg::kLinearSplit;
#if defined(FP8DSA_TUNING)
  constexpr bool kMmaOnlyExit = true;  // the timing driver's MMA-only variant (bench/tuning/indexer_timing.cu)
#else
  constexpr bool kMmaOnlyExit = false;
#endif
  constexpr int kKeyTile = Cfg::kKeyTile;
  extern __shared__ uint8_t smem_raw[];
  uint8_t* smem = hopper::align_to_swizzle_atom(smem_raw);
  uint8_t* q_smem = smem;
  uint8_t* k_smem = smem + Cfg::kKOffset;
  int2* bounds = reinterpret_cast<int2*>(smem + Cfg::kBoundsOffset);
  uint64_t* full = reinterpret_cast<uint64_t*>(smem + Cfg::kBarrierOffset);
  uint64_t* empty = full + Cfg::kStages;
  uint64_t* q_full = empty + Cfg::kStages;
  __shared__ int block_range[2];

  // With kEarlyDependents a grid launched after this one as its programmatic dependent
  // (indexer_logits' masked fill, whose cells this kernel never writes) may start once every CTA
  // has started.
  if constexpr (Output::kEarlyDependents) hopper::launch_dependents();
  const int tid = threadIdx.x;
  const int warp = tid / 32;
  const int lane = tid % 32;
  // Longest first: blocks num_token_blocks - 1 down to tail_blocks in key_splits parts each, then
  // the tail blocks (the shortest) in tail_splits parts each, so that the last wave is small parts.
  const int item = blockIdx.x;
  const int head_items = (args.num_token_blocks - args.tail_blocks) * args.key_splits;
  const bool in_tail = item >= head_items;
  const int splits = in_tail ? args.tail_splits : args.key_splits;
  const int rel_item = in_tail ? item - head_items : item;
  const int token_block = (in_tail ? args.tail_blocks : args.num_token_blocks) - 1 - rel_item / splits;
  const int split = rel_item % splits;
  const int64_t first_token = static_cast<int64_t>(token_block) * Cfg::kTokens;

  if (warp == 0) {
    // Clamp each token's bounds to [0, N]; an empty or absent token gets [0, 0). The block's key
    // range (and so each split's) comes from every token; a token the Output leaves out of this
    // launch then gets empty bounds, and a block with no token left does nothing.
    int lo = INT32_MAX, hi = 0;
    bool any_active = false;
#pragma unroll
    for (int i = lane; i < Cfg::kMaxTokens; i += 32) {
      int2 b = make_int2(0, 0);
      const int64_t t = first_token + i;
      if (i < Cfg::kTokens && t < args.num_tokens) {
        const int64_t n = args.num_keys;
        const int64_t s = args.ks[t] < 0 ? 0 : (args.ks[t] > n ? n : args.ks[t]);
        const int64_t e = args.ke[t] < 0 ? 0 : (args.ke[t] > n ? n : args.ke[t]);
        if (e > s) b = make_int2(static_cast<int>(s), static_cast<int>(e));
      }
      if (b.y > b.x) {
        lo = min(lo, b.x);
        hi = max(hi, b.y);
        if (Output::token_active(out_args, t, split, args.key_splits)) {
          any_active = true;
        } else {
          b = make_int2(0, 0);
        }
      }
      if (i < Cfg::kTokens) bounds[i] = b;
    }
    lo = __reduce_min_sync(0xFFFFFFFFu, lo);
    hi = __reduce_max_sync(0xFFFFFFFFu, hi);
    any_active = __any_sync(0xFFFFFFFFu, any_active);
    if (lane == 0) {
      block_range[0] = lo;
      block_range[1] = any_active ? hi : lo;
      for (int s = 0; s < Cfg::kStages; ++s) {
        hopper::mbarrier_init(&full[s], 1);
        hopper::mbarrier_init(&empty[s], Cfg::kEmptyArrivals);  // one per warp of each consumer
      }
      hopper::mbarrier_init(q_full, 1);
      hopper::mbarrier_init_fence();
    }
  }
  __syncthreads();
  const int lo = block_range[0], hi = block_range[1];
  if (hi <= lo) {  // every token of the block is empty
    Output::empty_cta(out_args, args, first_token, split, Cfg::kTokens, tid);
    return;
  }
  const int tile_lo = lo / kKeyTile;
  const int tile_count_all = static_cast<int>((int64_t{hi} + kKeyTile - 1) / kKeyTile) - tile_lo;  // hi may be ~2^31
  const int tile_begin = tile_lo + static_cast<int>(static_cast<int64_t>(tile_count_all) * split / splits);
  const int tile_end = tile_lo + static_cast<int>(static_cast<int64_t>(tile_count_all) * (split + 1) / splits);
  const int num_tiles = tile_end - tile_begin;
  if (num_tiles <= 0) {
    Output::empty_cta(out_args, args, first_token, split, Cfg::kTokens, tid);
    return;
  }
  // The split's keys end here (the last tile may reach past N).
  const int split_key_end = static_cast<int>(min(static_cast<int64_t>(tile_end) * kKeyTile, args.num_keys));
  int sample_tiles = 0, sample_row0 = 0, sample_stride = 0;
  if constexpr (kSampled) {
    Output::sample_range(out_args, tile_begin * kKeyTile, split_key_end, &sample_row0, &sample_tiles, &sample_stride);
  }
  const int total_tiles = sample_tiles + num_tiles;  // sample tiles first, then the key tiles

  const int wg = tid / 128;
  if (wg == Cfg::kConsumers) {
    // Producer.
    hopper::warpgroup_reg_dealloc<Cfg::kProducerRegs>();
    if (warp % 4 == 0 && hopper::elect_one_sync()) {
      hopper::tma_prefetch_descriptor(&k_map);
      hopper::mbarrier_arrive_expect_tx(q_full, Cfg::kQBytes);
      hopper::tma_load_3d(q_smem, &q_map, q_full, 0, 0, static_cast<int32_t>(first_token));
      for (int i = 0; i < total_tiles; ++i) {
        const int stage = i % Cfg::kStages;
        const int use = i / Cfg::kStages;
        if (use > 0) hopper::mbarrier_wait(&empty[stage], (use - 1) & 1);
        hopper::mbarrier_arrive_expect_tx(&full[stage], Cfg::kTileBytes);
        const bool sample = kSampled && i < sample_tiles;
        const CUtensorMap* map = &k_map;
        if constexpr (kSampled) {
          if (sample) map = &out_args.sample_map;
        }
        hopper::tma_load_2d(k_smem + stage * Cfg::kTileBytes, map, &full[stage], 0,
                            sample ? sample_row0 + i * kKeyTile : (tile_begin + i - sample_tiles) * kKeyTile);
      }
    }
    return;
  }

  // Consumers.
  hopper::warpgroup_reg_alloc<Cfg::kConsumerRegs>();
  const int wg_warp = warp % 4;
  // This consumer's B block and its first token inside the CTA's block.
  const int wg_token0 = Cfg::kShareTiles ? wg * Cfg::kWgTokens : 0;
  float w_reg[Epi::kWeightRegs];
  Epi::load_weights(w_reg, args.w, args.w_stride, first_token + wg_token0, args.num_tokens, lane);
  const uint32_t q_addr = hopper::smem_address(q_smem) + (Cfg::kShareTiles ? wg * Cfg::kCols * Cfg::kDim : 0);
  const uint32_t k_addr = hopper::smem_address(k_smem);
  static_assert(Cfg::kShareTiles || !Output::kNeedsOwnTokens, "this output needs a token block per consumer");
  typename Output::template Consumer<Epi> out(out_args, args, smem + Cfg::kOutputOffset + wg * Output::kSmemBytesPerConsumer,
                                             wg_token0, Cfg::kWgTokens, first_token, split);
  // Descriptors are built once and advanced by byte offsets (advance_descriptor): a row is one
  // swizzle atom, so a K step is +32 bytes of start address and a stage +kTileBytes, and shared
  // addresses stay below 2^18, so the 14-bit start field never wraps. Equal, bit for bit, to
  // kmajor_descriptor() of the offset address, at a fraction of the per-tile instructions.
  static_assert(Cfg::kSmemBytes + 1024 < (1 << 18), "descriptor start field holds every address");
  const uint64_t desc_a0 = hopper::kmajor_descriptor(k_addr, Cfg::kSwizzle, kKeyTile, 0);
  const uint64_t desc_b0 = hopper::kmajor_descriptor(q_addr, Cfg::kSwizzle, Cfg::kCols, 0);
  hopper::mbarrier_wait(q_full, 0);
  // The split's halving (exact), after the Q wait, so that nothing waits for the w loads before Q
  // has arrived (ScoreEpilogue::load_weights).
  if constexpr (kSplit) {
#pragma unroll
    for (int i = 0; i < Epi::kWeightRegs; ++i) w_reg[i] *= 0.5f;
  }

  // The split epilogue's linear-term rows of this consumer's B block (linear_split.cuh), written
  // once per CTA; lin_weight scales the lane's columns of their accumulator.
  constexpr int kLinRegs = kSplit ? Cfg::kLinRows / 2 : 4;
  [[maybe_unused]] float lin_weight[kLinRegs / 2];  // without the split: unused
  uint64_t desc_lin0 = 0;
  if constexpr (kSplit) {
    uint8_t* lin_block = smem + Cfg::kLinOffset + wg * Cfg::kLinBlockBytes;
    float* sigma = reinterpret_cast<float*>(smem + Cfg::kSigmaOffset) + wg_token0;
    build_linear_terms<Cfg>(q_smem + wg * Cfg::kCols * Cfg::kDim, lin_block, sigma, args.w, args.w_stride,
                            first_token + wg_token0, args.num_tokens, wg_warp, lane);
    hopper::fence_proxy_async_smem();  // generic-proxy writes, read by wgmma
    hopper::named_barrier_sync(kLinearTerms + wg, 128);
    Epi::template linear_weights<kLinRegs>(sigma, lin_weight, lane);
    desc_lin0 = hopper::kmajor_descriptor(hopper::smem_address(lin_block), Cfg::kSwizzle, Cfg::kLinRows, 0);
  }

  // Ping-pong: the consumers issue their MMAs in a fixed rotation (named barrier kScorerTurn + c is
  // "your turn, consumer c"), so the tensor cores run one consumer's tile while the previous consumer
  // runs its epilogue. Without it, consumers released by the same stage issue together, their
  // wgmmas interleave, they finish together and the tensor cores idle through both epilogues.
  const bool ping_pong = args.ping_pong && Cfg::kConsumers > 1;
  const uint32_t my_turn = kScorerTurn + wg;
  const uint32_t next_turn = kScorerTurn + (wg + 1) % Cfg::kConsumers;
  constexpr uint32_t kPairThreads = 256;
  if (ping_pong && wg == Cfg::kConsumers - 1) hopper::named_barrier_arrive(next_turn, kPairThreads);

  // A lane stores the same (token, row half) slots for every tile: keep their bounds in registers
  // when there are few (the loop's asm barriers keep the compiler from hoisting the loads).
  constexpr bool kBoundsInRegs = Epi::kFinal <= 4;
  int2 my_bounds[kBoundsInRegs ? Epi::kFinal : 1];
  if constexpr (kBoundsInRegs) {
#pragma unroll
    for (int j = 0; j < Epi::kFinal; ++j) my_bounds[j] = bounds[wg_token0 + Epi::token_of(lane, Epi::final_index(lane, j))];
  }

  constexpr int kTileStep = Cfg::kShareTiles ? 1 : Cfg::kConsumers;
  const int first_tile = Cfg::kShareTiles ? 0 : wg;
  TileCells<Epi::kFinal> pending;  // kDeferStore: the previous tile's cells
  const int first_key_tile = first_tile + sample_tiles;  // one of the two is 0
  // Tile i of the stream: a sample tile (kSample, rows every sample_stride-th key from
  // sample_row0 on, ending at the split's last key) or key tile i - sample_tiles. Two
  // instantiations, so the key tiles' loop carries nothing of the sample.
  auto score_tile = [&](auto sample_tag, int i) __attribute__((always_inline)) {
    constexpr bool kSample = decltype(sample_tag)::value;
    const int stage = i % Cfg::kStages;
    int key_a, key_b;  // this lane's key rows, row halves 0 and 1
    if constexpr (kSample) {
      const int64_t row = sample_row0 + i * kKeyTile + wg_warp * 16 + lane / 4;
      key_a = static_cast<int>(min(row * sample_stride, int64_t{INT32_MAX}));
      key_b = static_cast<int>(min((row + 8) * sample_stride, int64_t{INT32_MAX}));
    } else {
      key_a = (tile_begin + i - sample_tiles) * kKeyTile + wg_warp * 16 + lane / 4;
      key_b = key_a + 8;
    }
    hopper::mbarrier_wait(&full[stage], (i / Cfg::kStages) & 1);
    float acc[Epi::kAccRegs];
    [[maybe_unused]] float lin[kLinRegs];  // without the split: unused
    if (ping_pong) hopper::named_barrier_sync(my_turn, kPairThreads);
    hopper::wgmma_fence();
#pragma unroll
    for (int k = 0; k < Cfg::kDim / 32; ++k) {
      const uint64_t desc_a = hopper::advance_descriptor(desc_a0, stage * Cfg::kTileBytes + k * 32);
      const uint64_t desc_b = hopper::advance_descriptor(desc_b0, k * 32);
      hopper::WgmmaE4m3<Cfg::kCols>::ss(acc, desc_a, desc_b, k > 0);
    }
    if constexpr (kSplit) {
#pragma unroll
      for (int k = 0; k < Cfg::kDim / 32; ++k) {
        const uint64_t desc_a = hopper::advance_descriptor(desc_a0, stage * Cfg::kTileBytes + k * 32);
        hopper::WgmmaE4m3<Cfg::kLinRows>::ss(lin, desc_a, hopper::advance_descriptor(desc_lin0, k * 32), k > 0);
      }
    }
    hopper::wgmma_commit_group();
    if (ping_pong) {
      // Pass the turn on unless nobody issues after this MMA (a dangling arrival would be left).
      const bool last = Cfg::kShareTiles ? (wg == Cfg::kConsumers - 1 && i == total_tiles - 1) : i + 1 >= total_tiles;
      if (!last) hopper::named_barrier_arrive(next_turn, kPairThreads);
    }
    // Issued while the MMA runs.
    const float scale0 = key_a < args.num_keys ? __ldg(args.k_scale + key_a) : 0.0f;
    const float scale1 = key_b < args.num_keys ? __ldg(args.k_scale + key_b) : 0.0f;
    // A deferring output hands over the previous key tile's cells while this tile's MMA runs
    // (sample tiles store their own right away: nothing is carried into the key tiles' loop).
    if constexpr (Output::kDeferStore && !kSample) {
      if (i != first_key_tile) out.store(pending, lane);
    }
    hopper::wgmma_wait_group<0>();
    hopper::wgmma_fence_operands(acc);
    if constexpr (kSplit) hopper::wgmma_fence_operands(lin);
    // The stage has been read: hand it back before the epilogue.
    __syncwarp();
    if (lane == 0) hopper::mbarrier_arrive(&empty[stage]);
    // The MMA-only timing exit (FP8DSA_TUNING builds; a default build refuses mma_only). Otherwise,
    // at H = 32, the schedule fence (config.h, kScheduleFence): a branch ptxas cannot remove, on a
    // flag no launch sets (ScorerArgs::fence_exit), so never taken.
    if constexpr (kMmaOnlyExit) {
      if (args.mma_only) return;
    } else if constexpr (Cfg::kScheduleFence) {
      if (args.fence_exit) return;
    }

    float part[Epi::kParts];
    if constexpr (kSplit) {
      Epi::reduce_split(acc, lin, w_reg, lin_weight, part, lane);
    } else {
      Epi::reduce(acc, w_reg, part, lane);
    }
    TileCells<Epi::kFinal> cells;
#pragma unroll
    for (int j = 0; j < Epi::kFinal; ++j) {
      const int index = Epi::final_index(lane, j);
      cells.token[j] = wg_token0 + Epi::token_of(lane, index);
      cells.key[j] = (index & 1) ? key_b : key_a;
      const int2 b = kBoundsInRegs ? my_bounds[kBoundsInRegs ? j : 0] : bounds[cells.token[j]];
      cells.valid[j] = Epi::owner(lane) && cells.key[j] >= b.x && cells.key[j] < b.y;
      if constexpr (kSample) cells.valid[j] = cells.valid[j] && cells.key[j] < split_key_end;
      cells.value[j] = part[j] * ((index & 1) ? scale1 : scale0);
    }
    if constexpr (kSample) {
      out.store(cells, lane);  // the sample never fills a buffer: no end_tile()
    } else if constexpr (Output::kDeferStore) {
      out.end_tile();  // after the previous tile's store, before the next one
      pending = cells;
    } else {
      out.store(cells, lane);
      out.end_tile();
    }
  };
  if constexpr (kSampled) {
    static_assert(Cfg::kShareTiles, "every consumer scores the sample tiles");
    for (int i = 0; i < sample_tiles; ++i) score_tile(std::true_type{}, i);
    if (sample_tiles > 0) out.end_sample(bounds, tile_begin * kKeyTile, split_key_end);
  }
  for (int i = first_key_tile; i < total_tiles; i += kTileStep) score_tile(std::false_type{}, i);
  if constexpr (Output::kDeferStore) {
    if (total_tiles > first_tile) out.store(pending, lane);
  }
  out.finish();
}

}  // namespace fp8dsa::detail::indexer
