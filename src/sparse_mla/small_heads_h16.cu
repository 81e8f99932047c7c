// The transposed-orientation FP8 sparse MLA kernel for h = 16 (one CTA per two tokens).
#include "sparse_mla/config.h"
#include "sparse_mla/launch.h"
#include "sparse_mla/launch_kernel.h"
#include "sparse_mla/small_heads_kernel.cuh"

namespace fp8dsa::detail::sparse_mla {

template <>
Status launch_small_heads<16>(const KernelArgs& args, unsigned blocks, cudaStream_t stream) {
  return launch_sparse_mla_kernel<SmallHeadsKernel<16, kSmallHeadsQkChains>>("sparse_mla small-head kernel, h = 16",
                                                                             args, blocks, stream);
}

}  // namespace fp8dsa::detail::sparse_mla
