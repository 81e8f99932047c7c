// Q-resident scorer instantiations for D = 64.
#include "indexer/q_resident_launch.cuh"

namespace fp8dsa::detail::indexer {
Status run_q_resident_d64(const IndexerParams& p, const QResidentTuning& tuning, const QResidentPlan* plan) {
  return run_q_resident_dim<64>(p, tuning, {}, plan);
}
}  // namespace fp8dsa::detail::indexer
