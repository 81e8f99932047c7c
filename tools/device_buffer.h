// The one device-buffer class of the tests, the benchmark and the CLI: a cudaMalloc allocation of
// size() elements of T (trivially copyable), move-only. Once allocated it never holds a null
// pointer, even for 0 elements (at least 256 bytes), so a kernel given an empty tensor still sees a
// valid address.
//
// Two ways to use it: the Status calls (allocate, upload, download into a vector) for code that
// reports errors, and the throwing constructors and download() for tests, where gtest reports the
// exception (std::runtime_error with the CUDA error).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <cuda_runtime_api.h>

#include "core/cuda_check.h"
#include "fp8dsa/status.h"

namespace fp8dsa::tools {

// Throws std::runtime_error with the Status's text when it is not ok (for constructors and tests).
inline void throw_if_error(const Status& status) {
  if (!status.is_ok()) throw std::runtime_error(status.to_string());
}

template <typename T>
class DeviceBuffer {
  static_assert(std::is_trivially_copyable_v<T>, "DeviceBuffer holds trivially copyable elements");

 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t count) { throw_if_error(allocate(count)); }
  explicit DeviceBuffer(const std::vector<T>& host) { throw_if_error(upload(host)); }
  ~DeviceBuffer() { reset(); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept {
    if (this != &other) {
      reset();
      data_ = std::exchange(other.data_, nullptr);
      size_ = std::exchange(other.size_, 0);
    }
    return *this;
  }

  // Frees any previous allocation, then allocates `count` elements (contents undefined).
  Status allocate(size_t count) {
    reset();
    if (count > SIZE_MAX / sizeof(T)) {
      return {StatusCode::kCudaError, "cudaMalloc of " + std::to_string(count) + " elements: size overflows"};
    }
    void* ptr = nullptr;
    const Status s = cuda_status(cudaMalloc(&ptr, std::max<size_t>(count * sizeof(T), 256)),
                                      ("cudaMalloc of " + std::to_string(count * sizeof(T)) + " bytes").c_str());
    if (!s.is_ok()) return s;
    data_ = static_cast<T*>(ptr);
    size_ = count;
    return Status::ok();
  }
  // Synchronous copy of the whole vector, (re)allocating to its size when that differs.
  Status upload(const std::vector<T>& host) {
    if (data_ == nullptr || host.size() != size_) FP8DSA_RETURN_IF_ERROR(allocate(host.size()));
    if (host.empty()) return Status::ok();
    return cuda_status(cudaMemcpy(data_, host.data(), bytes(), cudaMemcpyHostToDevice), "cudaMemcpy H2D");
  }
  // Waits for the device, then copies the whole buffer into *host.
  Status download(std::vector<T>* host) const {
    host->resize(size_);
    FP8DSA_RETURN_IF_ERROR(cuda_status(cudaDeviceSynchronize(), "cudaDeviceSynchronize before download"));
    if (size_ == 0) return Status::ok();
    return cuda_status(cudaMemcpy(host->data(), data_, bytes(), cudaMemcpyDeviceToHost), "cudaMemcpy D2H");
  }
  std::vector<T> download() const {
    std::vector<T> host;
    throw_if_error(download(&host));
    return host;
  }
  void reset() {
    if (data_ != nullptr) cudaFree(data_);  // a failing free at teardown has nobody to report to
    data_ = nullptr;
    size_ = 0;
  }

  T* get() const { return data_; }
  template <typename U>
  U* as() const {
    return reinterpret_cast<U*>(data_);
  }
  size_t size() const { return size_; }
  size_t bytes() const { return size_ * sizeof(T); }

 private:
  T* data_ = nullptr;
  size_t size_ = 0;
};

// Untyped device memory (workspaces, tensors handed to the library as void*): sizes in bytes.
using DeviceBytes = DeviceBuffer<uint8_t>;

// Copies a host vector of any element type into `out` as bytes (allocating host.size() * sizeof(U)).
template <typename U>
Status upload(const std::vector<U>& host, DeviceBytes* out) {
  FP8DSA_RETURN_IF_ERROR(out->allocate(host.size() * sizeof(U)));
  if (host.empty()) return Status::ok();
  return cuda_status(cudaMemcpy(out->get(), host.data(), out->bytes(), cudaMemcpyHostToDevice), "cudaMemcpy H2D");
}

// Rows `rows` of a device array of num_rows rows `ld` elements apart: the first row_elems elements
// of each, one after the other into *host (synchronous copies). A row outside [0, num_rows) is an
// InvalidArgument.
template <typename T>
Status download_rows(const T* device, int64_t ld, size_t row_elems, int64_t num_rows, const std::vector<int64_t>& rows,
                     std::vector<T>* host) {
  host->resize(rows.size() * row_elems);
  for (size_t i = 0; i < rows.size(); ++i) {
    if (rows[i] < 0 || rows[i] >= num_rows) {
      return invalid_argument("download_rows: row " + std::to_string(rows[i]) + " outside [0, " +
                              std::to_string(num_rows) + ")");
    }
    FP8DSA_RETURN_IF_ERROR(cuda_status(cudaMemcpy(host->data() + i * row_elems, device + rows[i] * ld,
                                                  row_elems * sizeof(T), cudaMemcpyDeviceToHost),
                                       "cudaMemcpy D2H of a row"));
  }
  return Status::ok();
}

}  // namespace fp8dsa::tools
