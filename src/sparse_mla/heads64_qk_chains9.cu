// The 64-head FP8 sparse MLA kernel with QK^T in 9 chains (launch.h: kScoreValueQkChainChoices).
#include "sparse_mla/config.h"
#include "sparse_mla/heads64_kernel.cuh"
#include "sparse_mla/launch.h"
#include "sparse_mla/launch_kernel.h"

namespace fp8dsa::detail::sparse_mla {

template <>
Status launch_heads64<9>(const KernelArgs& args, unsigned blocks, cudaStream_t stream) {
  return launch_warp_specialised(sparse_mla_heads64_kernel<9>, Heads64Config::kSmemAlloc, Heads64Config::kThreads,
                                 Heads64Config::kEntryRegs, "sparse_mla_heads64_kernel<9>", args, blocks, stream);
}

}  // namespace fp8dsa::detail::sparse_mla
