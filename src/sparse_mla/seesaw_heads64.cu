// The 64-head FP8 sparse MLA kernel with two math warpgroups in seesaw (seesaw_kernel.cuh), QK^T in
// 5 chains.
#include "sparse_mla/config.h"
#include "sparse_mla/launch.h"
#include "sparse_mla/launch_kernel.h"
#include "sparse_mla/seesaw_kernel.cuh"

namespace fp8dsa::sparse_mla {

Status launch_seesaw(const KernelArgs& args, unsigned blocks, cudaStream_t stream) {
  return launch_warp_specialised(sparse_mla_seesaw_kernel, SeesawConfig::kSmemAlloc, SeesawConfig::kThreads,
                                 SeesawConfig::kEntryRegs, "sparse_mla_seesaw_kernel", args, blocks, stream);
}

}  // namespace fp8dsa::sparse_mla
