// Determinism check: run a kernel twice, each time on freshly poisoned outputs, and require the
// outputs to match bitwise (so a missed write or a race shows up as a difference).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include "common/gpu_test.h"
#include "common/poison.h"
#include "fp8dsa/status.h"

namespace fp8dsa::testing {

// One device output of the run: its extent and the poison pattern to refill it with.
struct RerunOutput {
  void* ptr = nullptr;
  size_t count = 0;
  int elem_bytes = 0;
  uint32_t pattern = 0;
  std::string name;
};

template <typename T>
RerunOutput rerun_output(tools::DeviceBuffer<T>& buffer, std::string name) {
  return {buffer.get(), buffer.size(), static_cast<int>(sizeof(T)), Poison<T>::kBits, std::move(name)};
}

// `run` is a callable returning Status (the asynchronous launch). Poisons every output, runs,
// synchronises, snapshots; twice. The outputs hold the second run's results afterwards.
template <typename Run>
::testing::AssertionResult reruns_bitwise_equal(Run&& run, const std::vector<RerunOutput>& outputs) {
  std::vector<std::vector<uint8_t>> snapshots[2];
  for (int pass = 0; pass < 2; ++pass) {
    for (const RerunOutput& o : outputs) {
      const cudaError_t err = fill_device_pattern(o.ptr, o.count, o.elem_bytes, o.pattern);
      if (err != cudaSuccess)
        return ::testing::AssertionFailure() << "poisoning " << o.name << ": " << cudaGetErrorString(err);
    }
    const Status status = run();
    if (!status.is_ok())
      return ::testing::AssertionFailure() << "run " << pass << " failed: " << status.to_string();
    cudaError_t err = cudaDeviceSynchronize();
    if (err != cudaSuccess)
      return ::testing::AssertionFailure() << "run " << pass << ": " << cudaGetErrorString(err);
    for (const RerunOutput& o : outputs) {
      std::vector<uint8_t> bytes(o.count * o.elem_bytes);
      err = cudaMemcpy(bytes.data(), o.ptr, bytes.size(), cudaMemcpyDeviceToHost);
      if (err != cudaSuccess)
        return ::testing::AssertionFailure() << "copying " << o.name << ": " << cudaGetErrorString(err);
      snapshots[pass].push_back(std::move(bytes));
    }
  }
  for (size_t k = 0; k < outputs.size(); ++k) {
    const std::vector<uint8_t>& a = snapshots[0][k];
    const std::vector<uint8_t>& b = snapshots[1][k];
    for (size_t i = 0; i < a.size(); ++i) {
      if (a[i] != b[i]) {
        return ::testing::AssertionFailure()
               << outputs[k].name << " differs between two runs, first at element "
               << i / outputs[k].elem_bytes;
      }
    }
  }
  return ::testing::AssertionSuccess();
}

}  // namespace fp8dsa::testing
