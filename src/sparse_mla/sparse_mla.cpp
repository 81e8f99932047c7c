// The public sparse MLA entry point: validates, passes the device gate, then runs the kernel that
// params.kernel names. kAuto takes the native FP8 kernel (h in {8, 16}: the transposed orientation;
// h = 32: the 64-head kernel with zero rows past h; see launch.cu), and the CUDA-core reference
// kernel only for inputs it cannot take.
#include <string>

#include "core/cuda_check.h"
#include "core/no_throw.h"
#include "fp8dsa/sparse_mla.h"
#include "sparse_mla/launch.h"

namespace fp8dsa {

SparseMlaKernel sparse_mla_route(const SparseMlaParams& params) {
  if (params.kernel != SparseMlaKernel::kAuto) return params.kernel;
  return detail::sparse_mla::fp8_kernel_supports(params) ? SparseMlaKernel::kFp8 : SparseMlaKernel::kReference;
}

static Status sparse_mla_prefill_unguarded(const SparseMlaParams& params) {
  FP8DSA_RETURN_IF_ERROR(validate(params));
  FP8DSA_RETURN_IF_ERROR(check_device());
  switch (sparse_mla_route(params)) {
    case SparseMlaKernel::kReference:
      return reference::sparse_mla_gpu(params);
    case SparseMlaKernel::kFp8:
      return detail::sparse_mla::launch_sparse_mla_fp8(params);
    case SparseMlaKernel::kAuto:
      break;
  }
  return invalid_argument("sparse_mla: unknown kernel id " +
                          std::to_string(static_cast<int>(params.kernel)));
}

Status sparse_mla_prefill(const SparseMlaParams& params) {
  return detail::no_throw("sparse_mla", [&] { return sparse_mla_prefill_unguarded(params); });
}

}  // namespace fp8dsa
