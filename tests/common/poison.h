// Poisoned outputs: fill a device buffer with a bit pattern no kernel writes legitimately, run, then
// check on the host that every element the kernel owns was written and every other element is
// still poison.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <sstream>
#include <vector>

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include "common/gpu_test.h"

namespace fp8dsa::testing {

// The pattern per element type. f32 / bf16: a negative NaN whose payload differs from the canonical
// NaN the device produces (0x7FFFFFFF / 0x7FFF). i32: a negative value other than -1 (-1 is the
// legal padding of index outputs; no index output is ever below -1).
template <typename T>
struct Poison;
template <>
struct Poison<float> {
  using Bits = uint32_t;
  static constexpr Bits kBits = 0xFFFFFFFFu;
};
template <>
struct Poison<int32_t> {
  using Bits = uint32_t;
  static constexpr Bits kBits = 0xDEADBEEFu;
};
template <>
struct Poison<uint16_t> {  // bf16 bit patterns
  using Bits = uint16_t;
  static constexpr Bits kBits = 0xFFFFu;
};
template <>
struct Poison<uint8_t> {  // e4m3 bit patterns
  using Bits = uint8_t;
  static constexpr Bits kBits = 0xFFu;
};

template <typename T>
bool is_poison(const T& value) {
  typename Poison<T>::Bits bits;
  static_assert(sizeof(bits) == sizeof(T));
  std::memcpy(&bits, &value, sizeof(T));
  return bits == Poison<T>::kBits;
}

// Fills `count` elements of `elem_bytes` (1, 2 or 4) bytes at device address `ptr` with the low
// bytes of `pattern`; synchronous.
cudaError_t fill_device_pattern(void* ptr, size_t count, int elem_bytes, uint32_t pattern);

template <typename T>
void poison(tools::DeviceBuffer<T>& buffer) {
  tools::throw_if_error(cuda_status(fill_device_pattern(buffer.get(), buffer.size(), sizeof(T), Poison<T>::kBits),
                                    "fill_device_pattern"));
}

// The set {i : i / ld < rows && i % ld < cols}: the cells of a [rows, cols] matrix with row stride ld.
inline std::function<bool(size_t)> matrix_cells(int64_t rows, int64_t ld, int64_t cols) {
  return [=](size_t i) {
    return static_cast<int64_t>(i / ld) < rows && static_cast<int64_t>(i % ld) < cols;
  };
}

namespace detail {
template <typename T>
::testing::AssertionResult check_poison(const std::vector<T>& host,
                                        const std::function<bool(size_t)>& in_set, bool inside,
                                        const char* what) {
  size_t bad = 0;
  std::ostringstream first;
  for (size_t i = 0; i < host.size(); ++i) {
    if (in_set(i) != inside) continue;
    // Inside the set an element must have been written; outside it must still be poison.
    if (is_poison(host[i]) == inside) {
      if (bad < 8) first << " " << i;
      ++bad;
    }
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << what << ": " << bad << " element(s) "
         << (inside ? "not written (still poison)" : "written outside the output set")
         << "; first at element(s)" << first.str();
}
}  // namespace detail

// Every element i with in_set(i) differs from the poison pattern.
template <typename T>
::testing::AssertionResult all_written(const std::vector<T>& host,
                                       const std::function<bool(size_t)>& in_set,
                                       const char* what = "output") {
  return detail::check_poison(host, in_set, true, what);
}

// Every element i with !in_set(i) still holds the poison pattern.
template <typename T>
::testing::AssertionResult untouched_outside(const std::vector<T>& host,
                                             const std::function<bool(size_t)>& in_set,
                                             const char* what = "output") {
  return detail::check_poison(host, in_set, false, what);
}

}  // namespace fp8dsa::testing
