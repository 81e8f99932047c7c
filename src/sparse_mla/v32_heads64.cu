// The FP8 sparse MLA kernel for DeepSeek-V3.2's 656-byte rows (v32_kernel.cuh): every head count,
// as ceil(h / 64) CTAs per token with the rows past h zero; q's nope part as 1 or 2 e4m3 terms.
#include <string>

#include "sparse_mla/launch.h"
#include "sparse_mla/launch_kernel.h"
#include "sparse_mla/v32_config.h"
#include "sparse_mla/v32_kernel.cuh"

namespace fp8dsa::detail::sparse_mla {

Status launch_v32(int q_terms, const KernelArgs& args, unsigned blocks, cudaStream_t stream) {
  if (q_terms == 1) {
    return launch_warp_specialised(sparse_mla_v32_kernel<1>, V32Config::kSmemAlloc, V32Config::kThreads,
                                   V32Config::kEntryRegs, "sparse_mla_v32_kernel<1>", args, blocks, stream);
  }
  if (q_terms == 2) {
    return launch_warp_specialised(sparse_mla_v32_kernel<2>, V32Config::kSmemAlloc, V32Config::kThreads,
                                   V32Config::kEntryRegs, "sparse_mla_v32_kernel<2>", args, blocks, stream);
  }
  // validate(SparseMlaParams) refused every other count before any CUDA call.
  return invalid_argument("sparse_mla fp8: q_terms " + std::to_string(q_terms) + " is not instantiated");
}

}  // namespace fp8dsa::detail::sparse_mla
