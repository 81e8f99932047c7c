// Candidate scorer instantiations for D = 64.
#include "fused_topk/candidate_scorer.cuh"

namespace fp8dsa::detail::fused_topk {
Status launch_candidate_scorer_d64(const IndexerParams& scores, const CandidateBuffers& buffers, int k) {
  return launch_candidate_scorer_dim<64>(scores, buffers, k);
}
}  // namespace fp8dsa::detail::fused_topk
