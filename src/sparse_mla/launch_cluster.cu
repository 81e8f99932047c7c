// The 2-CTA cluster instantiation of the FP8 sparse MLA kernel (h a multiple of 128, the default
// QK^T chain count); see fp8_launch.h.
#include "sparse_mla/fp8_kernel.cuh"
#include "sparse_mla/fp8_launch.h"

namespace fp8dsa::sparse_mla {

Status launch_fp8_cluster(const Fp8KernelParams& params, unsigned blocks, cudaStream_t stream) {
  return launch_fp8_kernel<kDefaultQkGroups, 2>(params, blocks, stream);
}

}  // namespace fp8dsa::sparse_mla
