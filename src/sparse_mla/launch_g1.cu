// One instantiation of the FP8 sparse MLA kernel (QK^T in 1 wgmma chain(s)); see fp8_launch.h.
#include "sparse_mla/fp8_kernel.cuh"
#include "sparse_mla/fp8_launch.h"

namespace fp8dsa::sparse_mla {

template <>
Status launch_fp8_instance<1>(const Fp8KernelParams& params, unsigned blocks, cudaStream_t stream) {
  return launch_fp8_kernel<1>(params, blocks, stream);
}

}  // namespace fp8dsa::sparse_mla
