#include "common/memory_limit.h"

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

namespace fp8dsa::testing {
namespace {

// The process's virtual size in bytes (the first field of /proc/self/statm, in pages).
size_t virtual_size_bytes() {
  std::FILE* f = std::fopen("/proc/self/statm", "r");
  if (f == nullptr) return 0;
  unsigned long pages = 0;
  const int read = std::fscanf(f, "%lu", &pages);
  std::fclose(f);
  return read == 1 ? pages * static_cast<size_t>(sysconf(_SC_PAGESIZE)) : 0;
}

}  // namespace

bool address_space_limit_supported() {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  return false;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || __has_feature(memory_sanitizer)
  return false;
#else
  return virtual_size_bytes() > 0;
#endif
#else
  return virtual_size_bytes() > 0;
#endif
}

std::string ChildResult::describe() const {
  if (exited) return "exit " + std::to_string(code);
  return "signal " + std::to_string(code) + " (" + strsignal(code) + ")";
}

ChildResult run_with_address_space_limit(size_t extra_bytes, const std::function<int()>& body) {
  std::fflush(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    const rlim_t limit = static_cast<rlim_t>(virtual_size_bytes() + extra_bytes);
    const rlimit cap{limit, limit};
    if (setrlimit(RLIMIT_AS, &cap) != 0) _exit(125);
    const int code = body();
    std::fflush(nullptr);
    _exit(code);
  }
  ChildResult result;
  if (pid < 0) return result;
  int status = 0;
  if (waitpid(pid, &status, 0) != pid) return result;
  if (WIFEXITED(status)) {
    result.exited = true;
    result.code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    result.code = WTERMSIG(status);
  }
  return result;
}

}  // namespace fp8dsa::testing
