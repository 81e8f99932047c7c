#include "library_call.h"

#include <Python.h>

#include <string>

namespace fp8dsa::python {

void raise_if_error(const Status& status) {
  // A signal handler's exception (the cancel check's) wins over the Status it led to, Cancelled or
  // not (a reference may fail otherwise in the same item).
  if (!status.is_ok() && PyErr_Occurred() != nullptr) throw nb::python_error();
  switch (status.code()) {
    case StatusCode::kOk:
      return;
    case StatusCode::kInvalidArgument:
      throw nb::value_error(status.message().c_str());
    case StatusCode::kNotImplemented:
      PyErr_SetString(PyExc_NotImplementedError, status.message().c_str());
      throw nb::python_error();
    case StatusCode::kOutOfMemory:
      PyErr_SetString(PyExc_MemoryError, status.message().c_str());
      throw nb::python_error();
    default:
      // The code name says which kind of failure (e.g. "NoDevice: no CUDA device is available").
      PyErr_SetString(PyExc_RuntimeError, status.to_string().c_str());
      throw nb::python_error();
  }
}

bool python_signal_raised(void*) {
  nb::gil_scoped_acquire gil;
  return PyErr_CheckSignals() != 0;
}

DeviceScope::DeviceScope(int device_id) {
  if (cudaGetDevice(&previous_) != cudaSuccess) {
    cudaGetLastError();
    previous_ = -1;
  }
  if (previous_ == device_id) return;
  const cudaError_t err = cudaSetDevice(device_id);
  if (err != cudaSuccess) {
    cudaGetLastError();
    const std::string detail = "cudaSetDevice(" + std::to_string(device_id) + "): " + cudaGetErrorString(err);
    // No usable GPU (none, or no driver that runs this runtime): the library's NoDevice, as C++ and
    // the CLI report it.
    const bool no_device = err == cudaErrorNoDevice || err == cudaErrorInsufficientDriver ||
                           err == cudaErrorInitializationError;
    status_ = no_device ? Status{StatusCode::kNoDevice, "no CUDA device is available (" + detail + ")"}
                        : Status{StatusCode::kCudaError, detail};
    return;
  }
  switched_ = true;
}

DeviceScope::~DeviceScope() {
  if (switched_ && previous_ >= 0) cudaSetDevice(previous_);
}

void synchronize(int device_id, uintptr_t stream) {
  run_library_call(device_id, [stream] {
    const cudaError_t err = cudaStreamSynchronize(as_stream(stream));
    if (err == cudaSuccess) return Status::ok();
    return Status(StatusCode::kCudaError,
                  std::string("cudaStreamSynchronize: ") + cudaGetErrorString(err));
  });
}

}  // namespace fp8dsa::python
