// The 64-head FP8 sparse MLA kernel with two math warpgroups in seesaw (seesaw_kernel.cuh), in every
// QK^T chain count of kSeesawQkChainChoices (launch.h).
#include <array>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

#include "core/cuda_check.h"
#include "sparse_mla/config.h"
#include "sparse_mla/launch.h"
#include "sparse_mla/launch_kernel.h"
#include "sparse_mla/seesaw_kernel.cuh"

namespace fp8dsa::detail::sparse_mla {

namespace {
template <int kQkChains>
Status launch_seesaw_chains(const KernelArgs& args, dim3 grid, cudaStream_t stream) {
  using Plan = SeesawQkPlan<kQkChains>;
  static_assert(QkLeadPlan<Plan::kLead, Plan::kStep>::kChains == kQkChains, "the plan has kQkChains chains");
  return launch_sparse_mla_kernel<SeesawKernel<Plan::kLead, Plan::kStep>>(
      "sparse_mla seesaw kernel, " + std::to_string(kQkChains) + " QK^T chains", args, grid, stream);
}
using SeesawLaunch = Status (*)(const KernelArgs&, dim3, cudaStream_t);
template <size_t... kChoice>
constexpr std::array<SeesawLaunch, sizeof...(kChoice)> seesaw_launches(std::index_sequence<kChoice...>) {
  return {&launch_seesaw_chains<kSeesawQkChainChoices[kChoice]>...};
}
}  // namespace

#if defined(FP8DSA_MLA_PHASE_PROBE)
Status read_phase_probe(std::vector<uint64_t>* marks) {
  FP8DSA_CUDA_RETURN_IF_ERROR(copy_phase_probe(marks));
  return Status::ok();
}
Status read_pair_steps(std::vector<uint32_t>* sums) {
  FP8DSA_CUDA_RETURN_IF_ERROR(copy_pair_steps(sums));
  return Status::ok();
}
#endif

Status launch_seesaw(int qk_chains, const KernelArgs& args, dim3 grid, cudaStream_t stream) {
  static constexpr auto kLaunches = seesaw_launches(std::make_index_sequence<std::size(kSeesawQkChainChoices)>{});
  for (size_t i = 0; i < kLaunches.size(); ++i) {
    if (kSeesawQkChainChoices[i] == qk_chains) return kLaunches[i](args, grid, stream);
  }
  return invalid_argument("sparse_mla fp8: the seesaw kernel has no " + std::to_string(qk_chains) +
                          "-chain QK^T instantiated");
}

}  // namespace fp8dsa::detail::sparse_mla
