#include "fp8dsa/types.h"

namespace fp8dsa {

const char* dtype_name(DType dtype) {
  switch (dtype) {
    case DType::kE4M3: return "e4m3";
    case DType::kBF16: return "bf16";
    case DType::kF32: return "f32";
    case DType::kI32: return "i32";
  }
  return "unknown";
}

int dtype_bytes(DType dtype) {
  switch (dtype) {
    case DType::kE4M3: return 1;
    case DType::kBF16: return 2;
    case DType::kF32: return 4;
    case DType::kI32: return 4;
  }
  return 0;
}

}  // namespace fp8dsa
