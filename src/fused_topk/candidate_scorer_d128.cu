// Candidate scorer instantiations for D = 128.
#include "fused_topk/candidate_scorer.cuh"

namespace fp8dsa::detail::fused_topk {
Status launch_candidate_scorer_d128(const IndexerParams& scores, const CandidateBuffers& buffers, int k) {
  return launch_candidate_scorer_dim<128>(scores, buffers, k);
}
}  // namespace fp8dsa::detail::fused_topk
