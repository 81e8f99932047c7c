// The scorer's Output contract (indexer/scorer_output.h) holds for both policies, finds the
// sampled prefix where there is one, and catches a policy that lacks a member or half the
// sampling hooks: compile-time checks.
#include <gtest/gtest.h>

#include "fused_topk/candidate_output.cuh"
#include "indexer/config.h"
#include "indexer/logits_output.cuh"
#include "indexer/scorer_output.h"

// Named (not anonymous) so that the members the checks never call raise no unused warnings.
namespace fp8dsa::detail::indexer::scorer_output_test {

using Cfg = QResidentConfig<64, 128, 256, 2, 8, true>;

// A policy's static members, without its per-warpgroup object.
struct NoConsumer {
  using Args = LogitsOutput::Args;
  static constexpr int kSmemBytesPerConsumer = 0;
  static constexpr bool kNeedsOwnTokens = false, kDeferStore = false, kEarlyDependents = false;
  template <class C>
  static Status prepare(const IndexerParams&, Args*) { return Status::ok(); }
  __device__ static bool token_active(const Args&, int64_t, int, int) { return true; }
  __device__ static void empty_cta(const Args&, const ScorerArgs&, int64_t, int, int, int) {}
};

// LogitsOutput without finish().
struct NoFinish : NoConsumer {
  template <class Epi>
  using Consumer = NoFinish;
  __device__ NoFinish(const Args&, const ScorerArgs&, uint8_t*, int, int, int64_t, int) {}
  template <int kFinal>
  __device__ void store(const TileCells<kFinal>&, int) {}
  __device__ void end_tile() {}
};

// Half a sampled prefix: sample_range() without its Consumer's end_sample().
struct SampleRangeOnly : LogitsOutput {
  template <class Epi>
  using Consumer = SampleRangeOnly;
  using LogitsOutput::LogitsOutput;
  __device__ static void sample_range(const Args&, int, int, int*, int*, int*) {}
};

static_assert(ScorerOutput<LogitsOutput, Cfg>);
static_assert(ScorerOutput<detail::fused_topk::CandidateOutput<false>, Cfg>);
static_assert(ScorerOutput<detail::fused_topk::CandidateOutput<true>, Cfg>);
static_assert(!ScorerOutput<NoFinish, Cfg>);
static_assert(!ScorerOutput<SampleRangeOnly, Cfg>);

static_assert(!SampledPrefix<LogitsOutput, Cfg>);
static_assert(!SampledPrefix<detail::fused_topk::CandidateOutput<false>, Cfg>);
static_assert(SampledPrefix<detail::fused_topk::CandidateOutput<true>, Cfg>);

static_assert(!ScorerOutput<NoConsumer, Cfg>);

// Every shipped configuration pairs a lane's slots by token, as the candidate store needs.
static_assert(ScoreEpilogue<64, 256>::slots_pair_by_token() && ScoreEpilogue<32, 256>::slots_pair_by_token() &&
              ScoreEpilogue<64, 128>::slots_pair_by_token() && ScoreEpilogue<16, 128>::slots_pair_by_token() &&
              ScoreEpilogue<8, 128>::slots_pair_by_token() && ScoreEpilogue<4, 128>::slots_pair_by_token());

TEST(ScorerOutput, ContractHoldsForBothPolicies) { SUCCEED() << "checked at compile time"; }

}  // namespace fp8dsa::detail::indexer::scorer_output_test
