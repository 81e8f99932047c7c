#include <chrono>

#include "core/cancel_poll.h"

namespace fp8dsa {
namespace {

thread_local reference::CancelCheck installed_check = nullptr;
thread_local void* installed_context = nullptr;

}  // namespace

namespace reference {

ScopedCancelCheck::ScopedCancelCheck(CancelCheck check, void* context)
    : previous_check_(installed_check), previous_context_(installed_context) {
  installed_check = check;
  installed_context = context;
}

ScopedCancelCheck::~ScopedCancelCheck() {
  installed_check = previous_check_;
  installed_context = previous_context_;
}

}  // namespace reference

namespace detail {

CancelPoll::CancelPoll()
    : check_(installed_check), context_(installed_context), last_(std::chrono::steady_clock::now()) {}

bool CancelPoll::stop_requested() {
  if (check_ == nullptr || stopped_) return stopped_;
  const auto now = std::chrono::steady_clock::now();
  if (now - last_ < std::chrono::milliseconds(reference::kCancelCheckIntervalMs)) return false;
  last_ = now;
  stopped_ = check_(context_);
  return stopped_;
}

}  // namespace detail
}  // namespace fp8dsa
