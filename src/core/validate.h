// Internal: argument checks shared by the validate() overloads. Each returns an InvalidArgument
// Status whose message names the operation, the argument and the offending value, e.g.
//   "sparse_mla: topk (100) must be a multiple of 64".
// Use with FP8DSA_RETURN_IF_ERROR. Nothing here dereferences a pointer.
#pragma once

#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <initializer_list>
#include <limits>
#include <string>
#include <type_traits>

#include "fp8dsa/status.h"
#include "fp8dsa/types.h"

namespace fp8dsa::detail {

inline constexpr int64_t kMaxExtent = std::numeric_limits<int32_t>::max();  // indices are int32

// Messages are built without iostreams: inside a Python extension on the H200 machine's interpreter,
// formatting a number into an ostringstream crashed the process (segfault in the insertion).
inline void append_part(std::string& s, const char* part) { s += part; }
inline void append_part(std::string& s, const std::string& part) { s += part; }
template <typename T>
void append_part(std::string& s, T part) {
  if constexpr (std::is_floating_point_v<T>) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%g", static_cast<double>(part));  // what an ostream prints by default
    s += buf;
  } else {
    static_assert(std::is_integral_v<T>, "concat takes strings, integers and floating-point values");
    char buf[24];
    s.append(buf, std::to_chars(buf, buf + sizeof(buf), part).ptr);
  }
}

template <typename... Parts>
std::string concat(const Parts&... parts) {
  std::string s;
  (append_part(s, parts), ...);
  return s;
}

// "0x7f..." for an address.
inline std::string hex_address(uintptr_t address) {
  char buf[24];
  std::snprintf(buf, sizeof(buf), "0x%llx", static_cast<unsigned long long>(address));
  return buf;
}

inline Status require(bool cond, StatusCode code, std::string message) {
  if (cond) return Status::ok();
  return {code, std::move(message)};
}

// A size (T, N, rows, keys): 0 <= value <= INT32_MAX.
inline Status check_size(const char* op, const char* name, int64_t value) {
  if (value >= 0 && value <= kMaxExtent) return Status::ok();
  return invalid_argument(concat(op, ": ", name, " (", value, ") must be in [0, ", kMaxExtent, "]"));
}

inline Status check_range(const char* op, const char* name, int64_t value, int64_t lo, int64_t hi) {
  if (value >= lo && value <= hi) return Status::ok();
  return invalid_argument(concat(op, ": ", name, " (", value, ") must be in [", lo, ", ", hi, "]"));
}

// `bound_text` says where the bound comes from, e.g. "num_heads * head_dim".
inline Status check_at_least(const char* op, const char* name, int64_t value, int64_t bound,
                             const char* bound_text) {
  if (value >= bound) return Status::ok();
  return invalid_argument(
      concat(op, ": ", name, " (", value, ") must be >= ", bound_text, " (", bound, ")"));
}

inline Status check_multiple(const char* op, const char* name, int64_t value, int64_t multiple,
                             const char* why = nullptr) {
  if (value % multiple == 0) return Status::ok();
  std::string message = concat(op, ": ", name, " (", value, ") must be a multiple of ", multiple);
  if (why != nullptr) message += concat(" (", why, ")");
  return invalid_argument(std::move(message));
}

inline Status check_one_of(const char* op, const char* name, int64_t value,
                           std::initializer_list<int64_t> allowed) {
  for (int64_t a : allowed) {
    if (value == a) return Status::ok();
  }
  std::string message = concat(op, ": ", name, " (", value, ") must be one of {");
  const char* sep = "";
  for (int64_t a : allowed) {
    message += concat(sep, a);
    sep = ", ";
  }
  return invalid_argument(message + "}");
}

// A null pointer is fine for an empty tensor; `needed` says whether the tensor has elements.
inline Status check_required(const char* op, const char* name, const void* ptr, bool needed,
                             const char* because) {
  if (ptr != nullptr || !needed) return Status::ok();
  return invalid_argument(concat(op, ": ", name, " must not be null (", because, ")"));
}

inline Status check_aligned(const char* op, const char* name, const void* ptr, int bytes) {
  const auto address = reinterpret_cast<uintptr_t>(ptr);
  if (address % static_cast<uintptr_t>(bytes) == 0) return Status::ok();
  return invalid_argument(concat(op, ": ", name, " (", hex_address(address), ") must be ", bytes, "-byte aligned"));
}

inline Status check_dtype(const char* op, const char* name, DType given, DType expected) {
  if (given == expected) return Status::ok();
  return invalid_argument(concat(op, ": ", name, " dtype must be ", dtype_name(expected),
                                 " (given ", dtype_name(given), ")"));
}

// a * b, or INT64_MAX where that overflows (for derived defaults: validate() then refuses the extent
// with a message instead of working on a wrapped value).
inline int64_t product_or_max(int64_t a, int64_t b) {
  int64_t result = 0;
  return __builtin_mul_overflow(a, b, &result) ? INT64_MAX : result;
}

// rows * stride * element_bytes (the byte extent of a strided tensor) must fit in int64, so that
// every address computation a kernel makes in int64 is exact.
inline Status check_extent(const char* op, const char* name, int64_t rows, int64_t stride,
                           int64_t element_bytes) {
  int64_t elements = 0;
  int64_t bytes = 0;
  if (!__builtin_mul_overflow(rows, stride, &elements) &&
      !__builtin_mul_overflow(elements, element_bytes, &bytes)) {
    return Status::ok();
  }
  return invalid_argument(concat(op, ": ", name, " extent (", rows, " rows x stride ", stride,
                                 " x ", element_bytes, " bytes) overflows int64"));
}

inline Status check_positive_finite(const char* op, const char* name, float value) {
  if (std::isfinite(value) && value > 0.0f) return Status::ok();
  return invalid_argument(concat(op, ": ", name, " (", value, ") must be finite and > 0"));
}

}  // namespace fp8dsa::detail
