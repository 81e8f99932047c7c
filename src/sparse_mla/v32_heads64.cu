// The FP8 sparse MLA kernel for DeepSeek-V3.2's 656-byte rows (v32_kernel.cuh): every head count,
// as ceil(h / 64) CTAs per token with the rows past h zero; q's nope part as 1 or 2 e4m3 terms.
#include <string>
#include <vector>

#include "core/cuda_check.h"
#include "sparse_mla/launch.h"
#include "sparse_mla/launch_kernel.h"
#include "sparse_mla/v32_config.h"
#include "sparse_mla/v32_kernel.cuh"

namespace fp8dsa::detail::sparse_mla {

#if defined(FP8DSA_MLA_PHASE_PROBE)
// This file's copies of the probe arrays (phase_probe.cuh: one per translation unit).
Status read_v32_phase_probe(std::vector<uint64_t>* marks) {
  FP8DSA_CUDA_RETURN_IF_ERROR(copy_phase_probe(marks));
  return Status::ok();
}
Status read_v32_pair_steps(std::vector<uint32_t>* sums) {
  FP8DSA_CUDA_RETURN_IF_ERROR(copy_pair_steps(sums));
  return Status::ok();
}
#endif

Status launch_v32(int q_terms, const KernelArgs& args, unsigned blocks, cudaStream_t stream) {
  if (q_terms == 1) {
    return launch_sparse_mla_kernel<V32Kernel<1>>("sparse_mla V3.2-row kernel, q_terms 1", args, blocks, stream);
  }
  if (q_terms == 2) {
    return launch_sparse_mla_kernel<V32Kernel<2>>("sparse_mla V3.2-row kernel, q_terms 2", args, blocks, stream);
  }
  // validate(SparseMlaParams) refused every other count before any CUDA call.
  return invalid_argument("sparse_mla fp8: q_terms " + std::to_string(q_terms) + " is not instantiated");
}

}  // namespace fp8dsa::detail::sparse_mla
