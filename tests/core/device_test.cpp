// The device gate's rule for "no GPU here" against "a GPU that is broken" (core/cuda_check.h): the
// GPU tests skip only in the first case.
#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

#include "core/cuda_check.h"

namespace fp8dsa {
namespace {

TEST(DeviceGate, OnlyAMissingGpuCountsAsNoDevice) {
  EXPECT_TRUE(counts_as_no_device(cudaErrorNoDevice, false));
  EXPECT_TRUE(counts_as_no_device(cudaErrorNoDevice, true));
  // The toolkit's stub on a machine without the NVIDIA kernel driver: CPU-only.
  EXPECT_TRUE(counts_as_no_device(cudaErrorInsufficientDriver, false));
  // The kernel driver is loaded: a driver too old for this runtime, or a GPU that fails, is reported.
  EXPECT_FALSE(counts_as_no_device(cudaErrorInsufficientDriver, true));
  for (cudaError_t err : {cudaErrorInitializationError, cudaErrorDevicesUnavailable, cudaErrorSystemNotReady,
                          cudaErrorCompatNotSupportedOnDevice, cudaErrorUnknown}) {
    EXPECT_FALSE(counts_as_no_device(err, false)) << cudaGetErrorName(err);
    EXPECT_FALSE(counts_as_no_device(err, true)) << cudaGetErrorName(err);
  }
}

// On this machine: whatever check_device() says, a kNoDevice answer agrees with the rule.
TEST(DeviceGate, CheckDeviceAgreesWithTheRule) {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  cudaGetLastError();
  const Status s = check_device();
  if (err != cudaSuccess) {
    EXPECT_EQ(s.code() == StatusCode::kNoDevice, counts_as_no_device(err, nvidia_kernel_driver_loaded())) << s.to_string();
    if (s.code() != StatusCode::kNoDevice) {
      EXPECT_EQ(s.code(), StatusCode::kCudaError) << s.to_string();
    }
  } else if (count == 0) {
    EXPECT_EQ(s.code(), StatusCode::kNoDevice) << s.to_string();
  }
}

}  // namespace
}  // namespace fp8dsa
