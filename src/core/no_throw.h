// Internal: the boundary every public call returns through. The library throws nothing itself, but
// the standard library does: a std::vector or std::string that cannot get memory throws
// std::bad_alloc (std::length_error when the size exceeds max_size()). Both become an OutOfMemory
// Status here, and a CPU reference stopped by its cancel check (detail::Cancelled, thrown by
// parallel_for) a Cancelled one, so that no exception escapes a public call.
#pragma once

#include <new>
#include <stdexcept>
#include <string>

#include "core/cancel_poll.h"
#include "fp8dsa/status.h"

namespace fp8dsa::detail {

// Runs `body` (returning Status) and turns an allocation failure into OutOfMemory and a cancel
// into Cancelled, the message naming `op`. Building that message may itself fail under memory
// pressure: the Status then has an empty message (an empty std::string allocates nothing).
template <typename Body>
Status no_throw(const char* op, Body&& body) noexcept {
  StatusCode code = StatusCode::kOutOfMemory;
  const char* what = nullptr;
  try {
    return body();
  } catch (const std::bad_alloc&) {
    what = "out of host memory";
  } catch (const std::length_error&) {
    what = "a host buffer larger than the address space was needed";
  } catch (const Cancelled&) {
    code = StatusCode::kCancelled;
    what = "stopped by the cancel check";
  }
  try {
    return Status(code, std::string(op) + ": " + what);
  } catch (...) {
    return Status(code, std::string());
  }
}

}  // namespace fp8dsa::detail
