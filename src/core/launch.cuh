// Internal: the one way this library launches a kernel. The dynamic shared-memory limit is set on
// every launch that needs more than the default 48 KB (as FlashMLA, FA3 and DeepGEMM do: one
// attribute call, right on every device and inside a stream capture), then the launch, whose error
// comes back as a Status naming the kernel.
#pragma once

#include <cstddef>
#include <utility>

#include <cuda_runtime_api.h>

#include "core/cuda_check.h"
#include "fp8dsa/status.h"

namespace fp8dsa {

constexpr size_t kDefaultDynamicSmemBytes = 48 * 1024;

#if defined(__CUDACC__)
template <typename... KernelParams, typename... Args>
Status launch_kernel(const char* name, void (*kernel)(KernelParams...), dim3 grid, dim3 block, size_t smem_bytes,
                     cudaStream_t stream, Args&&... args) {
  if (smem_bytes > kDefaultDynamicSmemBytes) {
    const cudaError_t err =
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem_bytes));
    if (err != cudaSuccess) return cuda_status(err, name);
  }
  kernel<<<grid, block, smem_bytes, stream>>>(std::forward<Args>(args)...);
  FP8DSA_RETURN_IF_LAUNCH_FAILED(name);
  return Status::ok();
}
#endif

}  // namespace fp8dsa
