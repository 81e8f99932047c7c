// The transposed-orientation FP8 sparse MLA kernel for h = 8 (one CTA per two tokens).
#include "sparse_mla/config.h"
#include "sparse_mla/launch.h"
#include "sparse_mla/launch_kernel.h"
#include "sparse_mla/small_heads_kernel.cuh"

namespace fp8dsa::detail::sparse_mla {

template <>
Status launch_small_heads<8>(const KernelArgs& args, unsigned blocks, cudaStream_t stream) {
  using SC = SmallHeadsConfig<8>;
  return launch_warp_specialised(sparse_mla_small_heads_kernel<8, kSmallHeadsQkChains>, SC::kSmemAlloc, SC::kThreads,
                                 SC::kEntryRegs, "sparse_mla_small_heads_kernel<8>", args, blocks, stream);
}

}  // namespace fp8dsa::detail::sparse_mla
