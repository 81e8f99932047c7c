#include "array_checks.h"

#include <cstdint>


namespace fp8dsa::python {
namespace {

using nb::dlpack::dtype_code;

constexpr int kDLCPU = 1;
constexpr int kDLCUDA = 2;
constexpr int kDLCUDAHost = 3;  // pinned host memory
constexpr int kDLCUDAManaged = 13;

std::string device_type_name(int device_type) {
  switch (device_type) {
    case kDLCPU: return "host memory";
    case kDLCUDA: return "a CUDA device";
    case kDLCUDAHost: return "pinned host memory";
    case kDLCUDAManaged: return "CUDA managed memory";
  }
  return "DLPack device type " + std::to_string(device_type);
}

std::string dtype_name(nb::dlpack::dtype dtype) {
  std::string base;
  switch (static_cast<dtype_code>(dtype.code)) {
    case dtype_code::Int: base = "int"; break;
    case dtype_code::UInt: base = "uint"; break;
    case dtype_code::Float: base = "float"; break;
    case dtype_code::Bfloat: base = "bfloat"; break;
    case dtype_code::Complex: base = "complex"; break;
    case dtype_code::Bool: return "bool";
    case dtype_code::Float8_E4M3FN: return "float8_e4m3fn";
    case dtype_code::Float8_E5M2: return "float8_e5m2";
    default: return "DLPack dtype code " + std::to_string(dtype.code);
  }
  std::string name = base + std::to_string(dtype.bits);
  if (dtype.lanes != 1) name += "x" + std::to_string(dtype.lanes);
  return name;
}

bool is(nb::dlpack::dtype dtype, dtype_code code, int bits) {
  return dtype.code == static_cast<uint8_t>(code) && dtype.bits == bits && dtype.lanes == 1;
}

bool is_e4m3(nb::dlpack::dtype d) {
  return is(d, dtype_code::Float8_E4M3FN, 8) || is(d, dtype_code::UInt, 8);
}
bool is_bf16(nb::dlpack::dtype d) { return is(d, dtype_code::Bfloat, 16) || is(d, dtype_code::UInt, 16); }

const char* element_name(Element element) {
  switch (element) {
    case Element::kE4M3: return "float8_e4m3fn (or uint8 raw bits)";
    case Element::kE4M3OrBF16: return "float8_e4m3fn (or uint8 raw bits) or bfloat16";
    case Element::kBF16: return "bfloat16 (or uint16 raw bits)";
    case Element::kF32: return "float32";
    case Element::kI32: return "int32";
    case Element::kBytes: return "uint8";
  }
  return "?";
}

// The library's DType for `dtype`, or false when `element` does not allow it.
bool library_dtype(nb::dlpack::dtype dtype, Element element, DType* out) {
  switch (element) {
    case Element::kE4M3:
      *out = DType::kE4M3;
      return is_e4m3(dtype);
    case Element::kE4M3OrBF16:
      *out = is_bf16(dtype) ? DType::kBF16 : DType::kE4M3;
      return is_e4m3(dtype) || is_bf16(dtype);
    case Element::kBF16:
      *out = DType::kBF16;
      return is_bf16(dtype);
    case Element::kF32:
      *out = DType::kF32;
      return is(dtype, dtype_code::Float, 32);
    case Element::kI32:
      *out = DType::kI32;
      return is(dtype, dtype_code::Int, 32);
    case Element::kBytes:
      *out = DType::kE4M3;  // one-byte elements; the library never sees this dtype
      return is(dtype, dtype_code::UInt, 8);
  }
  return false;
}

}  // namespace

void ArrayChecker::fail(const std::string& message) const {
  throw nb::value_error((op_ + ": " + message).c_str());
}

template <typename Array>
ArrayView ArrayChecker::view(const char* name, const Array& array, std::initializer_list<int> ndims,
                             const char* layout, Element element) {
  ArrayView v;
  v.name = name;
  v.ndim = static_cast<int>(array.ndim());
  bool ndim_ok = false;
  for (int n : ndims) ndim_ok |= v.ndim == n;
  if (!ndim_ok) {
    fail(std::string(name) + " must be " + layout + " (" + std::to_string(v.ndim) + " dimensions given)");
  }

  if (!library_dtype(array.dtype(), element, &v.dtype)) {
    throw nb::type_error((op_ + ": " + name + " dtype must be " + element_name(element) + " (given " +
                          dtype_name(array.dtype()) + ")")
                             .c_str());
  }

  const int device_type = array.device_type();
  if (placement_ == Placement::kCuda) {
    if (device_type != kDLCUDA) {
      fail(std::string(name) + " must be on a CUDA device (given " + device_type_name(device_type) +
           "; the CPU path is fp8dsa.reference)");
    }
    if (device_id_ < 0) {
      device_id_ = array.device_id();
      first_cuda_array_ = name;
    } else if (array.device_id() != device_id_) {
      fail(std::string(name) + " is on CUDA device " + std::to_string(array.device_id()) + ", " +
           first_cuda_array_ + " on CUDA device " + std::to_string(device_id_));
    }
  } else if (device_type != kDLCPU && device_type != kDLCUDAHost) {
    fail(std::string(name) + " must be in host memory, e.g. a NumPy array (given " +
         device_type_name(device_type) + ")");
  }

  v.data = const_cast<void*>(static_cast<const void*>(array.data()));  // inputs reach const fields only
  for (int d = 0; d < v.ndim; ++d) {
    v.shape[d] = static_cast<int64_t>(array.shape(d));
    v.strides[d] = array.stride(d);
    v.empty |= v.shape[d] == 0;
  }
  if (v.empty) return v;
  for (int d = 0; d < v.ndim; ++d) {
    // The library reads a stride of 0 as "packed": a broadcast dimension must not reach it.
    if (v.shape[d] > 1 && v.strides[d] == 0) {
      fail(std::string(name) + " has stride 0 in dimension " + std::to_string(d) +
           " (a broadcast view); pass a materialised array");
    }
  }
  const int inner = v.ndim - 1;
  if (inner >= 0 && v.shape[inner] > 1 && v.strides[inner] != 1) {
    fail(std::string(name) + " must be contiguous in its innermost dimension (stride " +
         std::to_string(v.strides[inner]) + " given, 1 needed)");
  }
  return v;
}

ArrayView ArrayChecker::input(const char* name, const InputArray& array, std::initializer_list<int> ndims,
                              const char* layout, Element element) {
  return view(name, array, ndims, layout, element);
}

ArrayView ArrayChecker::output(const char* name, const OutputArray& array, std::initializer_list<int> ndims,
                               const char* layout, Element element) {
  return view(name, array, ndims, layout, element);
}

ArrayView ArrayChecker::planned_output(const char* name, std::initializer_list<int64_t> shape,
                                       Element element) const {
  alignas(256) static unsigned char stand_in[256];
  ArrayView v;
  v.name = name;
  v.data = stand_in;
  v.dtype = element == Element::kBF16 ? DType::kBF16 : element == Element::kF32 ? DType::kF32
          : element == Element::kI32  ? DType::kI32  : DType::kE4M3;
  v.ndim = static_cast<int>(shape.size());
  int d = 0;
  for (int64_t extent : shape) {
    v.shape[d++] = extent;
    v.empty |= extent == 0;
  }
  int64_t packed = 1;
  for (d = v.ndim - 1; d >= 0; --d) {
    v.strides[d] = packed;
    // Saturating: validate() refuses a tensor whose extent overflows int64.
    if (__builtin_mul_overflow(packed, v.shape[d], &packed)) packed = INT64_MAX;
  }
  return v;
}

void ArrayChecker::expect_extent(const ArrayView& view, int dim, int64_t expected,
                                 const std::string& meaning) const {
  if (view.shape[dim] == expected) return;
  // Plain string concatenation: an ostringstream here crashed the interpreter on the H200 machine's
  // Python 3.12 build (segfault inside the stream insertion).
  fail(std::string(view.name) + " has " + std::to_string(view.shape[dim]) + " elements in dimension " +
       std::to_string(dim) + ", " + meaning + " needs " + std::to_string(expected));
}

ArrayView ArrayChecker::vector(const char* name, const InputArray& array, const char* layout,
                               Element element, int64_t extent, const std::string& meaning) {
  const ArrayView view = input(name, array, {1}, layout, element);
  expect_extent(view, 0, extent, meaning);
  expect_packed(view);
  return view;
}

void ArrayChecker::expect_packed(const ArrayView& view) const {
  if (view.empty) return;
  int64_t packed = 1;
  for (int d = view.ndim - 1; d >= 0; --d) {
    if (view.shape[d] > 1 && view.strides[d] != packed) {
      fail(std::string(view.name) + " must be contiguous (stride " + std::to_string(view.strides[d]) +
           " in dimension " + std::to_string(d) + ", " + std::to_string(packed) + " needed)");
    }
    packed *= view.shape[d];
  }
}

}  // namespace fp8dsa::python
