// Internal: CUDA error -> Status plumbing and the device gate every GPU entry point passes first.
#pragma once

#include <string>

#include <cuda_runtime_api.h>

#include "fp8dsa/status.h"

namespace fp8dsa {

inline Status cuda_status(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return Status::ok();
  return {StatusCode::kCudaError, std::string(what) + ": " + cudaGetErrorName(err) + " (" +
                                      cudaGetErrorString(err) + ")"};
}

// Whether a failed device query means "this machine has no GPU" (the GPU tests then skip) rather
// than a GPU that is there and broken (an error to report): only cudaErrorNoDevice, or an
// insufficient driver where no NVIDIA kernel driver is loaded at all (a CPU-only machine with the
// toolkit's stub library). nvidia_driver_loaded: nvidia_kernel_driver_loaded(), a parameter for
// the tests.
bool counts_as_no_device(cudaError_t err, bool nvidia_driver_loaded);
bool nvidia_kernel_driver_loaded();

// Ok when the current device is an sm_90 part (the kernels are built for sm_90a only);
// kNoDevice where counts_as_no_device says so, kCudaError for any other failed query,
// kUnsupportedDevice for another GPU. Cached per device.
Status check_device();

// Number of SMs of the current device (cached).
int device_sm_count();

}  // namespace fp8dsa

// Returns a kCudaError Status from the enclosing function when `expr` is not cudaSuccess.
#define FP8DSA_CUDA_RETURN_IF_ERROR(expr)                                     \
  do {                                                                        \
    cudaError_t fp8dsa_err_ = (expr);                                         \
    if (fp8dsa_err_ != cudaSuccess) return ::fp8dsa::cuda_status(fp8dsa_err_, #expr); \
  } while (0)

// After a kernel launch: returns the launch error, if any, as a Status.
#define FP8DSA_RETURN_IF_LAUNCH_FAILED(what)                                   \
  do {                                                                        \
    cudaError_t fp8dsa_err_ = cudaGetLastError();                             \
    if (fp8dsa_err_ != cudaSuccess) return ::fp8dsa::cuda_status(fp8dsa_err_, what); \
  } while (0)
