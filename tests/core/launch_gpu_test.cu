// core/launch.cuh: launch_kernel sets the shared-memory limit a launch needs past 48 KB, runs the
// kernel, and turns a bad launch into a Status naming the kernel.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "common/gpu_test.h"
#include "core/launch.cuh"
#include "tools/device_buffer.h"

namespace fp8dsa {
namespace {

// Writes the block's index into out[block] after a round trip through all of its dynamic shared memory.
__global__ void fill_through_smem(int32_t* out, uint32_t smem_words) {
  extern __shared__ int32_t words[];
  for (uint32_t i = threadIdx.x; i < smem_words; i += blockDim.x) words[i] = static_cast<int32_t>(blockIdx.x);
  __syncthreads();
  if (threadIdx.x == 0) out[blockIdx.x] = words[smem_words - 1];
}

TEST(LaunchKernel, SetsTheSharedMemoryLimitAndRuns) {
  FP8DSA_SKIP_WITHOUT_GPU();
  tools::DeviceBuffer<int32_t> out(4);
  for (size_t smem : {size_t{1024}, size_t{100} * 1024, size_t{200} * 1024}) {
    const uint32_t words = static_cast<uint32_t>(smem / 4);
    FP8DSA_ASSERT_STATUS_OK(launch_kernel("fill_through_smem", fill_through_smem, 4, 128, smem, nullptr, out.get(), words));
    EXPECT_EQ(out.download(), (std::vector<int32_t>{0, 1, 2, 3})) << smem;
  }
}

TEST(LaunchKernel, ABadLaunchIsAStatusNamingTheKernel) {
  FP8DSA_SKIP_WITHOUT_GPU();
  tools::DeviceBuffer<int32_t> out(1);
  // More shared memory than any sm_90 block may have, then more threads than a block may have.
  const Status too_much_smem =
      launch_kernel("fill_through_smem", fill_through_smem, 1, 128, size_t{300} * 1024, nullptr, out.get(), 1u);
  const Status too_many_threads = launch_kernel("fill_through_smem", fill_through_smem, 1, 4096, 0, nullptr, out.get(), 1u);
  for (const Status& s : {too_much_smem, too_many_threads}) {
    EXPECT_EQ(s.code(), StatusCode::kCudaError) << s.to_string();
    EXPECT_NE(s.message().find("fill_through_smem"), std::string::npos) << s.message();
  }
}

}  // namespace
}  // namespace fp8dsa
