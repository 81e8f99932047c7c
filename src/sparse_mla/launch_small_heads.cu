// The transposed-orientation FP8 sparse MLA kernel for h in {8, 16, 32}: one CTA per token. (At
// h = 32 it measured slower than the padded h = 64 kernel on the H200, so h = 32 takes the padded
// kernel unless asked: fp8_launch.h.)
#include <string>

#include "sparse_mla/fp8_launch.h"
#include "sparse_mla/fp8_small_heads_kernel.cuh"

namespace fp8dsa::sparse_mla {

namespace {

template <int kH>
Status launch_for(const Fp8KernelParams& params, unsigned blocks, cudaStream_t stream) {
  const std::string name = "sparse_mla_fp8_small_heads_kernel<" + std::to_string(kH) + ">";
  return launch_warp_specialised(sparse_mla_fp8_small_heads_kernel<kH, kDefaultQkGroups>,
                                 SmallHeadsConfig<kH>::kSmemAlloc, name.c_str(), params, blocks, stream);
}

}  // namespace

Status launch_fp8_small_heads(const Fp8KernelParams& params, int num_heads, unsigned blocks, cudaStream_t stream) {
  switch (num_heads) {
    case 8: return launch_for<8>(params, blocks, stream);
    case 16: return launch_for<16>(params, blocks, stream);
    case 32: return launch_for<32>(params, blocks, stream);
    default: break;
  }
  return invalid_argument("sparse_mla fp8: no transposed kernel for num_heads " + std::to_string(num_heads) +
                          " (8, 16, 32)");
}

}  // namespace fp8dsa::sparse_mla
