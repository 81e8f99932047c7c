// Internal: how the CPU references' loops (parallel_for) ask the calling thread's cancel check
// (fp8dsa/cancel.h) whether to stop, and how a stop travels out: as detail::Cancelled, which
// no_throw() turns into StatusCode::kCancelled.
#pragma once

#include <chrono>

#include "fp8dsa/cancel.h"

namespace fp8dsa::detail {

struct Cancelled {};

// The check installed on the constructing thread (none: inactive). stop_requested() calls it at
// most every kCancelCheckIntervalMs, so that a loop may ask after every item, and stays true once
// it said stop. Use on the constructing thread only.
class CancelPoll {
 public:
  CancelPoll();
  bool active() const { return check_ != nullptr; }
  bool stop_requested();

 private:
  reference::CancelCheck check_ = nullptr;
  void* context_ = nullptr;
  std::chrono::steady_clock::time_point last_;
  bool stopped_ = false;
};

}  // namespace fp8dsa::detail
