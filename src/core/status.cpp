#include "fp8dsa/status.h"

namespace fp8dsa {

const char* status_code_name(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return "Ok";
    case StatusCode::kInvalidArgument: return "InvalidArgument";
    case StatusCode::kNotImplemented: return "NotImplemented";
    case StatusCode::kWorkspaceTooSmall: return "WorkspaceTooSmall";
    case StatusCode::kNoDevice: return "NoDevice";
    case StatusCode::kUnsupportedDevice: return "UnsupportedDevice";
    case StatusCode::kCudaError: return "CudaError";
    case StatusCode::kOutOfMemory: return "OutOfMemory";
    case StatusCode::kCancelled: return "Cancelled";
  }
  return "Unknown";
}

std::string Status::to_string() const {
  if (is_ok()) return "Ok";
  return std::string(status_code_name(code_)) + ": " + message_;
}

}  // namespace fp8dsa
