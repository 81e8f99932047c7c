// What the f64 CPU references share: reading one element of a typed tensor as an exact double, and
// the dot product of two rows of such values.
#pragma once

#include <cstdint>
#include <limits>

#include "fp8dsa/fp8.h"
#include "fp8dsa/types.h"

namespace fp8dsa {

// The floating-point dtypes a reference can read (every e4m3, bf16 and f32 value is a double).
inline bool is_float_dtype(DType dtype) {
  return dtype == DType::kE4M3 || dtype == DType::kBF16 || dtype == DType::kF32;
}

// Element `offset` of the tensor at `base`; NaN for a dtype that is not floating point.
inline double load_element(const void* base, DType dtype, int64_t offset) {
  switch (dtype) {
    case DType::kE4M3: return e4m3_to_float(static_cast<const uint8_t*>(base)[offset]);
    case DType::kBF16: return bf16_to_float(static_cast<const uint16_t*>(base)[offset]);
    case DType::kF32: return static_cast<const float*>(base)[offset];
    default: return std::numeric_limits<double>::quiet_NaN();
  }
}

// Four independent partial sums: with e4m3 inputs every product and partial sum is exact in f64, so
// the order does not change the result, and the independent chains let the compiler vectorise.
inline double dot_product(const double* a, const double* b, int64_t n) {
  double acc[4] = {0.0, 0.0, 0.0, 0.0};
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    for (int j = 0; j < 4; ++j) acc[j] += a[i + j] * b[i + j];
  }
  for (; i < n; ++i) acc[0] += a[i] * b[i];
  return (acc[0] + acc[1]) + (acc[2] + acc[3]);
}

}  // namespace fp8dsa
