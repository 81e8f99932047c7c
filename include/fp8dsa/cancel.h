// Stopping a CPU reference midway. A caller installs a check for its own thread; every
// reference::*_cpu call made on that thread calls it there between pieces of its work, at most
// every kCancelCheckIntervalMs, and returns StatusCode::kCancelled, its outputs partly written,
// once the check returns true. The Python package stops a reference on Ctrl-C this way. GPU entry
// points never call it.
#pragma once

namespace fp8dsa::reference {

// True: stop. Called on the thread that installed it, never concurrently with itself.
using CancelCheck = bool (*)(void* context);

inline constexpr int kCancelCheckIntervalMs = 50;

// Installs `check` for the calling thread until the end of the scope, then restores the one it
// replaced (scopes nest). A null check installs none.
class ScopedCancelCheck {
 public:
  ScopedCancelCheck(CancelCheck check, void* context);
  ~ScopedCancelCheck();
  ScopedCancelCheck(const ScopedCancelCheck&) = delete;
  ScopedCancelCheck& operator=(const ScopedCancelCheck&) = delete;

 private:
  CancelCheck previous_check_;
  void* previous_context_;
};

}  // namespace fp8dsa::reference
