// Shared pieces of the GPU tests: the device gate and CUDA-call assertions. Device buffers are
// tools::DeviceBuffer (tools/device_buffer.h).
#pragma once

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include "core/cuda_check.h"
#include "fp8dsa/status.h"
#include "tools/device_buffer.h"

// Skips the test where there is no CUDA device; fails it on any other device problem (a GPU that is
// present but unusable must not turn the suite green).
#define FP8DSA_SKIP_WITHOUT_GPU()                                                  \
  do {                                                                             \
    const ::fp8dsa::Status fp8dsa_gate_ = ::fp8dsa::check_device();                \
    if (fp8dsa_gate_.code() == ::fp8dsa::StatusCode::kNoDevice)                     \
      GTEST_SKIP() << fp8dsa_gate_.to_string();                                    \
    ASSERT_TRUE(fp8dsa_gate_.is_ok()) << fp8dsa_gate_.to_string();                 \
  } while (0)

// Asserts that a CUDA runtime call returned cudaSuccess.
#define FP8DSA_ASSERT_CUDA(expr)                                                        \
  do {                                                                                  \
    const cudaError_t fp8dsa_cuda_err_ = (expr);                                        \
    ASSERT_EQ(fp8dsa_cuda_err_, cudaSuccess)                                            \
        << #expr << ": " << cudaGetErrorName(fp8dsa_cuda_err_) << " ("                  \
        << cudaGetErrorString(fp8dsa_cuda_err_) << ")";                                 \
  } while (0)

// Asserts that an fp8dsa call returned an ok Status.
#define FP8DSA_ASSERT_STATUS_OK(expr)                                     \
  do {                                                                    \
    const ::fp8dsa::Status fp8dsa_st_ = (expr);                           \
    ASSERT_TRUE(fp8dsa_st_.is_ok()) << #expr << ": " << fp8dsa_st_.to_string(); \
  } while (0)
