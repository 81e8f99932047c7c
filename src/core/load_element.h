// The CPU references' element reader: one element of a typed tensor as an exact double.
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

}  // namespace fp8dsa
