// Internal: the two launches of the fused path (the scorer with the candidate output, then the
// per-token select) and the key-split choice they share.
#pragma once

#include <cstdint>

#include <vector_types.h>

#include "fp8dsa/indexer.h"
#include "fp8dsa/status.h"
#include "fp8dsa/topk.h"

namespace fp8dsa::detail::fused_topk {

// The candidate buffers inside the workspace (candidate_layout.h).
struct CandidateBuffers {
  uint32_t* counts = nullptr;
  uint2* entries = nullptr;  // (score key, key row)
  int splits = 0;
  int capacity = 0;
};

// Key splits per token block for this shape on the current device (config.h's rule; 1 without a
// device).
int choose_key_splits(const IndexerParams& scores);

// Scores every valid (token, key) cell and keeps each token's candidates (resolved, validated
// params; T > 0, N > 0). Asynchronous on scores.stream.
Status launch_candidate_scorer(const IndexerParams& scores, const CandidateBuffers& buffers, int k);
Status launch_candidate_scorer_d64(const IndexerParams& scores, const CandidateBuffers& buffers, int k);
Status launch_candidate_scorer_d128(const IndexerParams& scores, const CandidateBuffers& buffers, int k);

// Writes out.indices from the candidates (buffers.splits == 0: every row gets -1 only).
Status launch_select_candidates(const TopkParams& out, const CandidateBuffers& buffers);

}  // namespace fp8dsa::detail::fused_topk
