#include "common/poison.h"

#include <algorithm>

namespace fp8dsa::testing {
namespace {

template <typename Bits>
__global__ void fill_pattern_kernel(Bits* data, size_t count, Bits pattern) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    data[i] = pattern;
  }
}

template <typename Bits>
cudaError_t fill(void* ptr, size_t count, uint32_t pattern) {
  if (count == 0) return cudaSuccess;
  constexpr int kThreads = 256;
  const size_t blocks = std::min<size_t>((count + kThreads - 1) / kThreads, 4096);
  fill_pattern_kernel<<<static_cast<unsigned>(blocks), kThreads>>>(static_cast<Bits*>(ptr), count,
                                                                    static_cast<Bits>(pattern));
  const cudaError_t err = cudaGetLastError();
  return err != cudaSuccess ? err : cudaDeviceSynchronize();
}

}  // namespace

cudaError_t fill_device_pattern(void* ptr, size_t count, int elem_bytes, uint32_t pattern) {
  switch (elem_bytes) {
    case 1: return fill<uint8_t>(ptr, count, pattern);
    case 2: return fill<uint16_t>(ptr, count, pattern);
    case 4: return fill<uint32_t>(ptr, count, pattern);
  }
  return cudaErrorInvalidValue;
}

}  // namespace fp8dsa::testing
