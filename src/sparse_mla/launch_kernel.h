// Internal, host code of the instantiation files: checks the registers a warp-specialised kernel's
// setmaxnreg split assumes, and launches it (core/launch.cuh).
#pragma once

#include <string>

#include <cuda_runtime_api.h>

#include "core/cuda_check.h"
#include "core/launch.cuh"
#include "fp8dsa/status.h"
#include "sparse_mla/kernel_args.h"

namespace fp8dsa::detail::sparse_mla {

// pool_regs: the registers per thread the kernel's setmaxnreg split needs at entry (config.h).
inline Status launch_warp_specialised(void (*kernel)(KernelArgs), uint32_t smem_bytes, int threads, int pool_regs,
                                      const std::string& name, const KernelArgs& args, dim3 grid,
                                      cudaStream_t stream) {
  // If ptxas ever gives the kernel fewer registers than the split assumes, a warpgroup's
  // setmaxnreg.inc would wait forever: refuse to launch.
  cudaFuncAttributes attributes{};
  FP8DSA_CUDA_RETURN_IF_ERROR(cudaFuncGetAttributes(&attributes, kernel));
  if (attributes.numRegs < pool_regs) {
    return not_implemented(name + ": built with " + std::to_string(attributes.numRegs) +
                           " registers per thread, too few for its setmaxnreg split (needs " +
                           std::to_string(pool_regs) + ")");
  }
  return launch_kernel(name.c_str(), kernel, grid, threads, smem_bytes, stream, args);
}

}  // namespace fp8dsa::detail::sparse_mla
