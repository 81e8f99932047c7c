// Running a library call from Python: on the arrays' CUDA device, without the GIL, and with its
// Status turned into a Python exception. A host call (a CPU reference) stops on Ctrl-C: it asks
// Python for pending signals between pieces of its work (fp8dsa/cancel.h), and the
// KeyboardInterrupt (or what the signal's handler raised) comes out of the call.
#pragma once

#include <cstdint>
#include <utility>

#include <cuda_runtime_api.h>
#include <nanobind/nanobind.h>

#include "fp8dsa/cancel.h"
#include "fp8dsa/status.h"

namespace fp8dsa::python {

namespace nb = nanobind;

// InvalidArgument -> ValueError, NotImplemented -> NotImplementedError, OutOfMemory -> MemoryError,
// every other code (WorkspaceTooSmall, NoDevice, UnsupportedDevice, CudaError) -> RuntimeError;
// any code with a Python exception pending (a signal handler's, Cancelled) -> that exception.
void raise_if_error(const Status& status);

// The cancel check of host calls: runs Python's signal handlers (the GIL taken for it); true when
// one raised, the exception then pending on this thread.
bool python_signal_raised(void* unused);

// Makes `device_id` current for the library's CUDA runtime for the scope of one call, and restores
// the previous device (which matters when that runtime is shared with the caller's, e.g. torch).
class DeviceScope {
 public:
  explicit DeviceScope(int device_id);
  ~DeviceScope();
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;

  // CudaError when the device could not be made current.
  const Status& status() const { return status_; }

 private:
  Status status_;
  int previous_ = -1;
  bool switched_ = false;
};

// `call()` on `device_id` (-1: a host call, no device), the GIL released.
template <typename Call>
void run_library_call(int device_id, Call&& call) {
  Status status;
  {
    nb::gil_scoped_release released;
    if (device_id >= 0) {
      DeviceScope device(device_id);
      status = device.status().is_ok() ? std::forward<Call>(call)() : device.status();
    } else {
      reference::ScopedCancelCheck cancel(&python_signal_raised, nullptr);
      status = std::forward<Call>(call)();
    }
  }
  raise_if_error(status);
}

inline cudaStream_t as_stream(uintptr_t handle) { return reinterpret_cast<cudaStream_t>(handle); }

// Waits for `stream` on `device_id`: for callers whose library has no stream to join (JAX).
void synchronize(int device_id, uintptr_t stream);

}  // namespace fp8dsa::python
