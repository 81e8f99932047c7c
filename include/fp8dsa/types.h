// Element types that cross the public API. Tensors are passed as untyped pointers plus a DType so
// that a caller (or a binding) handing the wrong element type gets a clear error, not a silent
// reinterpretation.
#pragma once

#include <cstddef>
#include <cstdint>

namespace fp8dsa {

// The alignment, in bytes, of every workspace the API takes (topk, prefill).
inline constexpr size_t kWorkspaceAlignment = 256;

enum class DType : int {
  kE4M3 = 0,  // float8 e4m3fn: 1 sign, 4 exponent (bias 7), 3 mantissa, no inf, NaN = S.1111.111, max 448
  kBF16,
  kF32,
  kI32,
};

const char* dtype_name(DType dtype);
int dtype_bytes(DType dtype);

}  // namespace fp8dsa
