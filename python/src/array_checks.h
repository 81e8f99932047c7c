// DLPack arrays -> the pointers, strides and dtypes of the library's params structs, with the checks
// the C++ API cannot make because it never sees an array: placement (host or CUDA device, one
// device for all), the number of dimensions, the element type, the innermost stride, and the
// extents that two arrays must share. Values, strides and alignment are left to validate().
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include "fp8dsa/types.h"

namespace fp8dsa::python {

namespace nb = nanobind;

// Inputs are imported read-only, so that non-writable NumPy arrays pass too.
using InputArray = nb::ndarray<nb::ro>;
using OutputArray = nb::ndarray<>;

// GPU entry points take CUDA device memory, the CPU references host memory.
enum class Placement { kCuda, kHost };

// What an argument may hold. e4m3 arrives as DLPack float8_e4m3fn or as uint8 raw bits (NumPy and
// CuPy have no float8 type; the Python layer passes torch float8 tensors as uint8 views), bf16 as
// bfloat16 or as uint16 raw bits.
enum class Element { kE4M3, kE4M3OrBF16, kBF16, kF32, kI32, kBytes };

inline constexpr int kMaxDims = 4;  // lse_merge's out_parts [R, T, h, d_v]

struct ArrayView {
  const char* name = "";
  void* data = nullptr;
  DType dtype = DType::kE4M3;
  int ndim = 0;
  int64_t shape[kMaxDims] = {};
  int64_t strides[kMaxDims] = {};  // in elements
  bool empty = false;              // some extent is 0

  // The stride of `dim` for a params field: 0 (the library's "packed") where the dimension has at
  // most one element or the array none. No address uses that stride, and DLPack producers report
  // anything there (torch reports 1).
  int64_t field_stride(int dim) const { return shape[dim] > 1 && !empty ? strides[dim] : 0; }
};

class ArrayChecker {
 public:
  ArrayChecker(std::string op, Placement placement) : op_(std::move(op)), placement_(placement) {}

  // `layout` names the dimensions for messages, e.g. "[T, h, d_qk]".
  ArrayView input(const char* name, const InputArray& array, std::initializer_list<int> ndims,
                  const char* layout, Element element);
  ArrayView output(const char* name, const OutputArray& array, std::initializer_list<int> ndims,
                   const char* layout, Element element);
  // An output the caller has not allocated yet, for the checks made before it does: `shape`,
  // packed, at an aligned stand-in address that nothing reads (validate() dereferences nothing).
  // `element`'s first dtype.
  ArrayView planned_output(const char* name, std::initializer_list<int64_t> shape, Element element) const;

  // view.shape[dim] == expected, where `meaning` says where the expected extent comes from.
  void expect_extent(const ArrayView& view, int dim, int64_t expected, const std::string& meaning) const;
  // Every stride packed: for the arrays whose params field has no stride.
  void expect_packed(const ArrayView& view) const;
  // input() of a 1-D array of `extent` elements, packed (a params field with no stride, e.g.
  // topk_length [T]).
  ArrayView vector(const char* name, const InputArray& array, const char* layout, Element element,
                   int64_t extent, const std::string& meaning);

  // The CUDA device of the arrays seen so far (-1 before the first CUDA array).
  int device_id() const { return device_id_; }
  const std::string& op() const { return op_; }

  [[noreturn]] void fail(const std::string& message) const;

 private:
  template <typename Array>
  ArrayView view(const char* name, const Array& array, std::initializer_list<int> ndims,
                 const char* layout, Element element);

  std::string op_;
  Placement placement_;
  int device_id_ = -1;
  std::string first_cuda_array_;
};

}  // namespace fp8dsa::python
