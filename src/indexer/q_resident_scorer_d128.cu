// Q-resident scorer instantiations for D = 128.
#include "indexer/q_resident_launch.cuh"

namespace fp8dsa::detail::indexer {
Status run_q_resident_d128(const IndexerParams& p, const QResidentTuning& tuning, const QResidentPlan* plan) {
  return run_q_resident_dim<128>(p, tuning, {}, plan);
}
}  // namespace fp8dsa::detail::indexer
