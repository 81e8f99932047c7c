// Internal: the one way this library launches a kernel, and its programmatic-dependent form. The
// dynamic shared-memory limit is set on every launch that needs more than the default 48 KB (as
// FlashMLA, FA3 and DeepGEMM do: one attribute call, right on every device and inside a stream
// capture), then the launch, whose error comes back as a Status naming the kernel.
#pragma once

#include <cstddef>
#include <utility>

#include <cuda_runtime.h>

#include "core/cuda_check.h"
#include "fp8dsa/status.h"

namespace fp8dsa {

constexpr size_t kDefaultDynamicSmemBytes = 48 * 1024;

#if defined(__CUDACC__)
template <typename... KernelParams>
Status allow_dynamic_smem(const char* name, void (*kernel)(KernelParams...), size_t smem_bytes) {
  if (smem_bytes <= kDefaultDynamicSmemBytes) return Status::ok();
  const cudaError_t err =
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem_bytes));
  return err == cudaSuccess ? Status::ok() : cuda_status(err, name);
}

template <typename... KernelParams, typename... Args>
Status launch_kernel(const char* name, void (*kernel)(KernelParams...), dim3 grid, dim3 block, size_t smem_bytes,
                     cudaStream_t stream, Args&&... args) {
  FP8DSA_RETURN_IF_ERROR(allow_dynamic_smem(name, kernel, smem_bytes));
  kernel<<<grid, block, smem_bytes, stream>>>(std::forward<Args>(args)...);
  FP8DSA_RETURN_IF_LAUNCH_FAILED(name);
  return Status::ok();
}

// The same, as a programmatic dependent launch: the kernel may start while the previous kernel on
// the stream still runs, once that one's CTAs have all executed hopper::launch_dependents()
// (hopper/grid_dependency.cuh), or as they exit. The kernel must not read what the previous one
// writes before hopper::wait_prerequisite_grids(), and should call it before it ends so that the
// work after it on the stream follows both. Graph capture keeps the programmatic edge.
template <typename... KernelParams, typename... Args>
Status launch_programmatic_dependent(const char* name, void (*kernel)(KernelParams...), dim3 grid, dim3 block,
                                     size_t smem_bytes, cudaStream_t stream, Args&&... args) {
  FP8DSA_RETURN_IF_ERROR(allow_dynamic_smem(name, kernel, smem_bytes));
  cudaLaunchAttribute attribute{};
  attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute.val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = smem_bytes;
  config.stream = stream;
  config.attrs = &attribute;
  config.numAttrs = 1;
  const cudaError_t err = cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();  // the launch's error is the one returned
    return cuda_status(err, name);
  }
  FP8DSA_RETURN_IF_LAUNCH_FAILED(name);
  return Status::ok();
}
#endif

}  // namespace fp8dsa
