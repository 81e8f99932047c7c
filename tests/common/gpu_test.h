// Shared pieces of the GPU tests: the device gate, RAII device buffers and CUDA-call assertions.
#pragma once

#include <algorithm>
#include <cstddef>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include "core/cuda_check.h"
#include "fp8dsa/status.h"

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

namespace fp8dsa::testing {

// Throws std::runtime_error on a CUDA failure (usable in constructors; gtest reports the message).
inline void cuda_or_throw(cudaError_t err, const char* what) {
  if (err != cudaSuccess) {
    throw std::runtime_error(std::string(what) + ": " + cudaGetErrorName(err) + " (" +
                             cudaGetErrorString(err) + ")");
  }
}

// A device array of `size()` elements of T (trivially copyable). Never holds a null pointer, even
// for size 0, so kernels given an empty tensor still see a valid address.
template <typename T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t count) : size_(count) {
    void* ptr = nullptr;
    cuda_or_throw(cudaMalloc(&ptr, std::max<size_t>(bytes(), 256)), "cudaMalloc");
    data_ = static_cast<T*>(ptr);
  }
  explicit DeviceBuffer(const std::vector<T>& host) : DeviceBuffer(host.size()) { upload(host); }
  ~DeviceBuffer() {
    if (data_ != nullptr) cudaFree(data_);
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept {
    if (this != &other) {
      if (data_ != nullptr) cudaFree(data_);
      data_ = std::exchange(other.data_, nullptr);
      size_ = std::exchange(other.size_, 0);
    }
    return *this;
  }

  T* get() const { return data_; }
  size_t size() const { return size_; }
  size_t bytes() const { return size_ * sizeof(T); }

  // Synchronous copies of the whole buffer; sizes must match.
  void upload(const std::vector<T>& host) {
    if (host.size() != size_) throw std::invalid_argument("DeviceBuffer::upload: size mismatch");
    cuda_or_throw(cudaMemcpy(data_, host.data(), bytes(), cudaMemcpyHostToDevice), "cudaMemcpy H2D");
  }
  std::vector<T> download() const {
    std::vector<T> host(size_);
    cuda_or_throw(cudaDeviceSynchronize(), "cudaDeviceSynchronize before download");
    cuda_or_throw(cudaMemcpy(host.data(), data_, bytes(), cudaMemcpyDeviceToHost), "cudaMemcpy D2H");
    return host;
  }

 private:
  T* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace fp8dsa::testing
