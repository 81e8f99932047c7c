// The public sparse MLA entry point: validates, passes the device gate, then runs the kernel that
// params.kernel names. kAuto takes the native FP8 kernel where it exists (h = 64, 128), and
// otherwise the CUDA-core reference kernel (h in {8, 16, 32} until the transposed-orientation FP8
// kernel lands; no padding to 64 heads either way).
#include <string>

#include "core/cuda_check.h"
#include "fp8dsa/sparse_mla.h"
#include "sparse_mla/fp8_launch.h"

namespace fp8dsa {

SparseMlaKernel sparse_mla_route(const SparseMlaParams& params) {
  if (params.kernel != SparseMlaKernel::kAuto) return params.kernel;
  return sparse_mla::fp8_kernel_supports(params) ? SparseMlaKernel::kFp8 : SparseMlaKernel::kReference;
}

Status sparse_mla_prefill(const SparseMlaParams& params) {
  FP8DSA_RETURN_IF_ERROR(validate(params));
  FP8DSA_RETURN_IF_ERROR(check_device());
  switch (sparse_mla_route(params)) {
    case SparseMlaKernel::kReference:
      return reference::sparse_mla_gpu(params);
    case SparseMlaKernel::kFp8:
      return sparse_mla::launch_sparse_mla_fp8(params);
    case SparseMlaKernel::kAuto:
      break;
  }
  return invalid_argument("sparse_mla: unknown kernel id " +
                          std::to_string(static_cast<int>(params.kernel)));
}

}  // namespace fp8dsa
