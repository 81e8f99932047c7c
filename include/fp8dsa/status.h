// Status: the error type every public fp8dsa call returns.
#pragma once

#include <string>
#include <utility>

namespace fp8dsa {

enum class StatusCode : int {
  kOk = 0,
  kInvalidArgument,    // a caller-side mistake: shape, dtype, stride, alignment, missing pointer
  kNotImplemented,     // a valid request that this build does not support yet
  kWorkspaceTooSmall,  // caller-provided workspace below the size the query function returned
  kNoDevice,           // a GPU entry point was called where no CUDA device is present
  kUnsupportedDevice,  // a CUDA device that is not sm_90 (the kernels are built for sm_90a)
  kCudaError,          // a CUDA runtime/driver call failed
  kOutOfMemory,        // host memory ran out inside a call (the CPU references allocate; nothing
                       // else does); the call wrote nothing or part of its outputs
  kCancelled,          // a CPU reference stopped by the caller's cancel check (fp8dsa/cancel.h); the
                       // call wrote nothing or part of its outputs
};

const char* status_code_name(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status ok() { return {}; }

  bool is_ok() const { return code_ == StatusCode::kOk; }
  explicit operator bool() const { return is_ok(); }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "InvalidArgument: sparse_mla: topk (100) must be a multiple of 64"
  std::string to_string() const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status invalid_argument(std::string message) {
  return {StatusCode::kInvalidArgument, std::move(message)};
}
inline Status not_implemented(std::string message) {
  return {StatusCode::kNotImplemented, std::move(message)};
}
inline Status out_of_memory(std::string message) {
  return {StatusCode::kOutOfMemory, std::move(message)};
}

}  // namespace fp8dsa

// Returns early from the enclosing function when `expr` yields a non-ok Status.
#define FP8DSA_RETURN_IF_ERROR(expr)            \
  do {                                          \
    ::fp8dsa::Status fp8dsa_status_ = (expr);   \
    if (!fp8dsa_status_.is_ok()) return fp8dsa_status_; \
  } while (0)
