// The transposed-orientation FP8 sparse MLA kernel for h in {8, 16, 32}: one CTA per token. (At
// h = 32 it measured slower than the padded h = 64 kernel on the H200, so h = 32 takes the padded
// kernel unless asked: fp8_launch.h.)
#include <string>

#include "sparse_mla/fp8_launch.h"
#include "sparse_mla/fp8_small_heads_kernel.cuh"

namespace fp8dsa::sparse_mla {

Status launch_fp8_small_heads(const Fp8KernelParams& params, int num_heads, unsigned blocks, cudaStream_t stream) {
  constexpr int kG = kDefaultQkGroups;
  switch (num_heads) {
    case 8:
      return launch_warp_specialised(sparse_mla_fp8_small_heads_kernel<8, kG>, SmallHeadsConfig<8>::kSmemAlloc,
                                     "sparse_mla_fp8_small_heads_kernel<8>", params, blocks, stream);
    case 16:
      return launch_warp_specialised(sparse_mla_fp8_small_heads_kernel<16, kG>, SmallHeadsConfig<16>::kSmemAlloc,
                                     "sparse_mla_fp8_small_heads_kernel<16>", params, blocks, stream);
    case 32:
      return launch_warp_specialised(sparse_mla_fp8_small_heads_kernel<32, kG>, SmallHeadsConfig<32>::kSmemAlloc,
                                     "sparse_mla_fp8_small_heads_kernel<32>", params, blocks, stream);
    default:
      break;
  }
  return invalid_argument("sparse_mla fp8: no transposed kernel for num_heads " + std::to_string(num_heads) +
                          " (8, 16, 32)");
}

}  // namespace fp8dsa::sparse_mla
