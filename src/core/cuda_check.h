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

// Ok when the current device is an sm_90 part (the kernels are built for sm_90a only);
// kNoDevice / kUnsupportedDevice otherwise. Cached per device.
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
