// The plain scorer's Output policy (indexer/scorer_output.h): every valid cell into
// logits[t, key], stored right after its tile's epilogue. No sampled prefix.
#pragma once

#include <cstdint>

#include "fp8dsa/indexer.h"
#include "fp8dsa/status.h"
#include "indexer/scorer_output.h"
#include "indexer/scorers.h"

namespace fp8dsa::detail::indexer {

struct LogitsOutput {
  struct Args {};
  template <class Epi>
  using Consumer = LogitsOutput;  // the per-warpgroup object, whatever cells a lane holds
  static constexpr int kSmemBytesPerConsumer = 0;
  static constexpr bool kNeedsOwnTokens = false;  // works when consumers share one token block
  static constexpr bool kDeferStore = false;      // store() right after the tile's own epilogue
  static constexpr bool kEarlyDependents = true;  // indexer_logits' masked fill (never these cells)
  template <class Cfg>
  static Status prepare(const IndexerParams&, Args*) { return Status::ok(); }
  __device__ static bool token_active(const Args&, int64_t, int, int) { return true; }
  __device__ static void empty_cta(const Args&, const ScorerArgs&, int64_t, int, int, int) {}
  __device__ LogitsOutput(const Args&, const ScorerArgs& args, uint8_t*, int, int, int64_t first_token, int)
      : logits_(args.logits), logits_stride_(args.logits_stride), first_token_(first_token) {}
  template <int kFinal>
  __device__ void store(const TileCells<kFinal>& c, int) {
#pragma unroll
    for (int j = 0; j < kFinal; ++j) {
      if (c.valid[j]) logits_[(first_token_ + c.token[j]) * logits_stride_ + c.key[j]] = c.value[j];
    }
  }
  __device__ void end_tile() {}
  __device__ void finish() {}

 private:
  float* logits_;
  int64_t logits_stride_;
  int64_t first_token_;
};

}  // namespace fp8dsa::detail::indexer
