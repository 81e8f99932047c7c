// _fp8dsa.floats_to_e4m3 / e4m3_to_floats / bf16_to_floats: the library's own host conversions
// (include/fp8dsa/fp8.h) over flat contiguous host arrays; the Python layer keeps the shapes.
#include <cstdint>
#include <string>

#include <nanobind/ndarray.h>

#include "bindings.h"
#include "fp8dsa/fp8.h"

namespace fp8dsa::python {
namespace {

namespace nb = nanobind;

template <typename T>
using HostInput = nb::ndarray<const T, nb::ndim<1>, nb::c_contig, nb::device::cpu>;
template <typename T>
using HostOutput = nb::ndarray<T, nb::ndim<1>, nb::c_contig, nb::device::cpu>;

void expect_same_size(const char* op, size_t in, size_t out) {
  if (in == out) return;
  throw nb::value_error((std::string(op) + ": out has " + std::to_string(out) + " elements, x has " +
                         std::to_string(in))
                            .c_str());
}

void floats_to_e4m3(const HostInput<float>& x, const HostOutput<uint8_t>& out) {
  expect_same_size("e4m3_from_float", x.shape(0), out.shape(0));
  nb::gil_scoped_release released;
  fp8dsa::floats_to_e4m3(x.data(), out.data(), x.shape(0));
}

void e4m3_to_floats(const HostInput<uint8_t>& x, const HostOutput<float>& out) {
  expect_same_size("float_from_e4m3", x.shape(0), out.shape(0));
  nb::gil_scoped_release released;
  fp8dsa::e4m3_to_floats(x.data(), out.data(), x.shape(0));
}

void bf16_to_floats(const HostInput<uint16_t>& x, const HostOutput<float>& out) {
  expect_same_size("bf16_to_float", x.shape(0), out.shape(0));
  nb::gil_scoped_release released;
  for (size_t i = 0; i < x.shape(0); ++i) out.data()[i] = fp8dsa::bf16_to_float(x.data()[i]);
}

}  // namespace

void bind_conversions(nb::module_& m) {
  m.def("floats_to_e4m3", &floats_to_e4m3, nb::arg("x"), nb::arg("out"));
  m.def("e4m3_to_floats", &e4m3_to_floats, nb::arg("x"), nb::arg("out"));
  m.def("bf16_to_floats", &bf16_to_floats, nb::arg("x"), nb::arg("out"));
}

}  // namespace fp8dsa::python
