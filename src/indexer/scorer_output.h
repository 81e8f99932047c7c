// The contract between the Q-resident scorer (q_resident_scorer.cuh) and its Output policy, the
// code that receives each finished (token, key, score) cell: LogitsOutput (logits_output.cuh)
// stores it into the logits; fused_topk's CandidateOutput (fused_topk/candidate_output.cuh) keeps
// it only if it can still be among its token's top k.
//
// The order of the calls: empty_cta() for a CTA with no key tile; otherwise, per consumer
// warpgroup, the constructor, store() for every tile (all lanes call it), end_tile() after it and
// finish() after the last. These are members of the policy's Consumer<Epi>, the object a consumer
// warpgroup holds (Epi: the ScoreEpilogue, which says which cells a lane holds). With kDeferStore a
// tile's cells are stored while the next tile's MMA runs (end_tile() of tile i then follows the
// store of tile i - 1). Host side, prepare<Cfg>() completes the Args for the launch;
// token_active() may leave a token out of a launch (its bounds become empty).
//
// ScorerOutput is the twelve members every policy has, one line each. A sampled prefix is a
// separate, optional concept (SampledPrefix): a policy with sample_range() names a strided view of
// K (every sample_stride-th key) whose tiles the scorer scores first, and its Consumer's
// end_sample() runs after their cells were stored, before the first key tile's. A policy has both
// hooks or neither.
#pragma once

#include <concepts>
#include <cstdint>

#include "fp8dsa/indexer.h"
#include "fp8dsa/status.h"
#include "indexer/scorer_epilogue.cuh"
#include "indexer/scorers.h"

namespace fp8dsa::detail::indexer {

// The finished cells of one tile as a lane holds them: slot j is (CTA-local token, key, value),
// `valid` when the lane owns the slot and the key lies in the token's [ks, ke).
template <int kFinal>
struct TileCells {
  int token[kFinal];
  int key[kFinal];
  float value[kFinal];
  bool valid[kFinal];
};

// The epilogue of a configuration, the policy's per-warpgroup object for it, and a tile's cells.
template <class Cfg>
using EpilogueOf = ScoreEpilogue<Cfg::kHeads, Cfg::kCols>;
template <class O, class Cfg>
using ConsumerOf = typename O::template Consumer<EpilogueOf<Cfg>>;
template <class Cfg>
using CellsOf = TileCells<EpilogueOf<Cfg>::kFinal>;

// The sampled prefix's two hooks.
template <class O>
concept HasSampleRange = requires(const typename O::Args& a, int n, int* out_int) {
  O::sample_range(a, n, n, out_int, out_int, out_int);  // rows, tiles, stride of keys [begin, end)
};
template <class O, class Cfg>
concept HasEndSample = requires(ConsumerOf<O, Cfg>& out, const int2* bounds, int n) {
  out.end_sample(bounds, n, n);  // after the sample tiles' stores
};
template <class O, class Cfg>
concept SampledPrefix = HasSampleRange<O> && HasEndSample<O, Cfg>;

template <class O, class Cfg>
concept ScorerOutput =
    requires { typename ConsumerOf<O, Cfg>; } &&  // the per-warpgroup object: Consumer<Epi>
    requires(const typename O::Args& a, typename O::Args* launch_args, const IndexerParams& p, const ScorerArgs& s,
             uint8_t* smem, int64_t first_token, int n, ConsumerOf<O, Cfg>& out, const CellsOf<Cfg>& cells) {
      typename O::Args;                                                   // per-launch arguments (a __grid_constant__)
      { O::kSmemBytesPerConsumer } -> std::convertible_to<int>;           // shared bytes per consumer warpgroup
      { O::kNeedsOwnTokens } -> std::convertible_to<bool>;                // needs a token block per consumer
      { O::kDeferStore } -> std::convertible_to<bool>;                    // a tile's cells stored under the next MMA
      { O::kEarlyDependents } -> std::convertible_to<bool>;               // a dependent grid may start early
      { O::template prepare<Cfg>(p, launch_args) } -> std::same_as<Status>;  // host: completes the Args
      { O::token_active(a, first_token, n, n) } -> std::same_as<bool>;   // (token, split, splits) in this launch
      O::empty_cta(a, s, first_token, n, n, n);                           // a CTA with no key tile (all threads)
      ConsumerOf<O, Cfg>(a, s, smem, n, n, first_token, n);               // per consumer warpgroup (token0, tokens)
      out.store(cells, n);                                                // every tile's cells (all lanes)
      out.end_tile();                                                     // after each tile's store
      out.finish();                                                       // after the last tile
    } &&
    HasSampleRange<O> == HasEndSample<O, Cfg>;  // a sampled prefix has both hooks

}  // namespace fp8dsa::detail::indexer
