// Internal, host code of the instantiation files: checks the registers a warp-specialised kernel's
// setmaxnreg split assumes, and launches it (core/launch.cuh); included by .cu files only (it
// names the kernel entry).
#pragma once

#include <string>

#include <cuda_runtime_api.h>

#include "core/cuda_check.h"
#include "core/launch.cuh"
#include "fp8dsa/status.h"
#include "sparse_mla/kernel_args.h"
#include "sparse_mla/kernel_entry.cuh"

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

// sparse_mla_kernel<Kernel> (kernel_entry.cuh) with the policy's shared memory, threads and entry
// registers; name: the kernel as the errors call it.
template <class Kernel>
Status launch_sparse_mla_kernel(const std::string& name, const KernelArgs& args, dim3 grid, cudaStream_t stream) {
  return launch_warp_specialised(sparse_mla_kernel<Kernel>, Kernel::kSmemAlloc, Kernel::kThreads, Kernel::kEntryRegs,
                                 name, args, grid, stream);
}

}  // namespace fp8dsa::detail::sparse_mla
