// Runs a piece of a test in a forked child whose address space is capped (setrlimit RLIMIT_AS), so
// that a test can make host allocations fail on purpose, or prove that a call stays within a
// budget, without touching the test process. POSIX only.
#pragma once

#include <cstddef>
#include <functional>
#include <string>

namespace fp8dsa::testing {

// The sanitizers reserve terabytes of shadow address space: an address-space cap cannot work there.
bool address_space_limit_supported();

struct ChildResult {
  bool exited = false;  // false: killed by a signal (an uncaught exception aborts: SIGABRT)
  int code = -1;        // the exit code, or the signal number
  std::string describe() const;  // "exit 0" / "signal 6 (Aborted)"
};

// Forks; the child caps its address space at (its size now + extra_bytes), runs body() and exits
// with its return value. The parent waits and reports how the child ended.
ChildResult run_with_address_space_limit(size_t extra_bytes, const std::function<int()>& body);

}  // namespace fp8dsa::testing
