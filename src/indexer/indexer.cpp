// The public indexer entry point: validates, passes the device gate, then runs the kernel that
// params.kernel names (kAuto asks the router, router.cpp).
#include <string>

#include "core/cuda_check.h"
#include "core/no_throw.h"
#include "fp8dsa/indexer.h"
#include "indexer/scorers.h"

namespace fp8dsa {
namespace detail::indexer {

Status run_q_resident(const IndexerParams& params, const QResidentTuning& tuning, const QResidentPlan* plan) {
#if !defined(FP8DSA_TUNING)
  if (tuning.mma_only) {
    return invalid_argument("indexer q_resident: mma_only (a timing-only variant) is built only with FP8DSA_TUNING");
  }
#endif
  return params.head_dim == 64 ? run_q_resident_d64(params, tuning, plan) : run_q_resident_d128(params, tuning, plan);
}

}  // namespace detail::indexer

static Status indexer_logits_unguarded(const IndexerParams& params) {
  FP8DSA_RETURN_IF_ERROR(validate(params));
  FP8DSA_RETURN_IF_ERROR(check_device());
  const IndexerKernel kernel =
      params.kernel == IndexerKernel::kAuto ? indexer_route(params) : params.kernel;
  if (kernel == IndexerKernel::kReference) return reference::indexer_logits_gpu(params);
  if (kernel != IndexerKernel::kQResident && kernel != IndexerKernel::kKResident) {
    return invalid_argument("indexer: unknown kernel id " + std::to_string(static_cast<int>(kernel)));
  }
  const IndexerParams p = params.resolved();
  if (p.num_tokens == 0 || p.num_keys == 0) return Status::ok();
  // The Q-resident launch is planned first (its grid, its last wave's cut, where the fill runs) and
  // the launch reads the plan. The fill runs after the scorer (their cells are disjoint), beside
  // its last CTAs, or as a launch of its own where the plan cut the last wave and left no SM idle.
  detail::indexer::QResidentPlan plan;
  if (kernel == IndexerKernel::kQResident) {
    FP8DSA_RETURN_IF_ERROR(detail::indexer::plan_q_resident(p, {}, &plan));
    FP8DSA_RETURN_IF_ERROR(detail::indexer::run_q_resident(p, {}, &plan));
  } else {
    FP8DSA_RETURN_IF_ERROR(detail::indexer::run_k_resident(p));
  }
  if (!p.fill_masked) return Status::ok();
  return detail::indexer::fill_masked_cells(p, plan.fill);
}

Status indexer_logits(const IndexerParams& params) {
  return detail::no_throw("indexer", [&] { return indexer_logits_unguarded(params); });
}

}  // namespace fp8dsa
