// The contract between the Q-resident scorer (q_resident_scorer.cuh) and its Output policy, the
// code that receives each finished (token, key, score) cell: LogitsOutput stores it into the logits;
// fused_topk's CandidateOutput keeps it only if it can still be among its token's top k. One line
// a member; the sampling hooks are required only of a policy with kSamples.
#pragma once

#include <concepts>
#include <cstdint>

#include "fp8dsa/indexer.h"
#include "fp8dsa/status.h"
#include "indexer/scorer_epilogue.cuh"
#include "indexer/scorers.h"

namespace fp8dsa::detail::indexer {

template <int kFinal>
struct TileCells;

// The epilogue of a configuration, the policy's per-warpgroup object for it, and a tile's cells.
template <class Cfg>
using EpilogueOf = ScoreEpilogue<Cfg::kHeads, Cfg::kCols>;
template <class O, class Cfg>
using ConsumerOf = typename O::template Consumer<EpilogueOf<Cfg>>;
template <class Cfg>
using CellsOf = TileCells<EpilogueOf<Cfg>::kFinal>;

template <class O, class Cfg>
concept ScorerOutput =
    requires { typename ConsumerOf<O, Cfg>; } &&  // the per-warpgroup object: Consumer<Epi>
    requires(const typename O::Args& a, typename O::Args* launch_args, const IndexerParams& p, const ScorerArgs& s,
             uint8_t* smem, int64_t first_token, int n, int* out_int, const int2* bounds, ConsumerOf<O, Cfg>& out,
             const CellsOf<Cfg>& cells) {
      typename O::Args;                                                   // per-launch arguments (a __grid_constant__)
      { O::kSmemBytesPerConsumer } -> std::convertible_to<int>;           // shared bytes per consumer warpgroup
      { O::kNeedsOwnTokens } -> std::convertible_to<bool>;                // needs a token block per consumer
      { O::kDeferStore } -> std::convertible_to<bool>;                    // a tile's cells stored under the next MMA
      { O::kSamples } -> std::convertible_to<bool>;                       // strided sample tiles scored first
      { O::kEarlyDependents } -> std::convertible_to<bool>;               // a dependent grid may start early
      { O::template prepare<Cfg>(p, launch_args) } -> std::same_as<Status>;  // host: completes the Args
      { O::token_active(a, first_token, n, n) } -> std::same_as<bool>;   // (token, split, splits) in this launch
      O::empty_cta(a, s, first_token, n, n, n);                           // a CTA with no key tile (all threads)
      ConsumerOf<O, Cfg>(a, s, smem, n, n, first_token, n);               // per consumer warpgroup (token0, tokens)
      out.store(cells, n);                                                // every tile's cells (all lanes)
      out.end_tile();                                                     // after each tile's store
      out.finish();                                                       // after the last tile
    } &&
    (!O::kSamples || requires(const typename O::Args& a, int n, int* out_int, const int2* bounds,
                              ConsumerOf<O, Cfg>& out) {
      O::sample_range(a, n, n, out_int, out_int, out_int);  // the sample rows of keys [begin, end)
      out.end_sample(bounds, n, n);                          // after the sample tiles' stores
    });

}  // namespace fp8dsa::detail::indexer
