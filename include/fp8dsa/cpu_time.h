// The CPU references' threads, and how long a reference takes on them: an estimate from its f64
// work, made before it runs, so that a caller can refuse a call that would run for hours (the
// fp8dsa command and the Python references refuse one past kMaxCpuSeconds unless told otherwise).
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <thread>

namespace fp8dsa {

// The environment variable that sets the CPU references' threads, and its value as a thread count:
// a positive integer, capped at 1024; 0 for anything else (unset, empty, not a whole positive number).
inline constexpr const char* kCpuThreadsVariable = "FP8DSA_CPU_THREADS";
inline int64_t cpu_threads_from(const char* value) {
  if (value == nullptr) return 0;
  char* end = nullptr;
  const long long n = std::strtoll(value, &end, 10);
  return end != value && *end == '\0' && n > 0 ? std::min<long long>(n, 1024) : 0;
}

// The threads the CPU references use: FP8DSA_CPU_THREADS when it is a positive integer, else
// std::thread::hardware_concurrency() (at least 1). (The fp8dsa command refuses any other value.)
inline int64_t cpu_reference_threads() {
  if (const int64_t n = cpu_threads_from(std::getenv(kCpuThreadsVariable)); n > 0) return n;
  return std::max<int64_t>(1, static_cast<int64_t>(std::thread::hardware_concurrency()));
}

namespace reference {

// The f64 operations (a multiply-add counts two) of the indexer reference over `pairs` scored
// (token, key) pairs, and of the sparse MLA reference over `rows` (token, head) rows of `keys`
// keys each (QK^T over d_qk, P.V over d_v). Sizes are doubles: their products overflow int64.
inline double indexer_cpu_flops(double pairs, int num_heads, int head_dim) {
  return 2.0 * num_heads * head_dim * pairs;
}
inline double sparse_mla_cpu_flops(double rows, double keys, int d_qk, int d_v) {
  return 2.0 * rows * keys * (d_qk + d_v);
}

// What one core does a second, measured on a 2-core x86 machine (2026-12-05, one and two threads):
// the indexer 5.7-7.4e9 (H 16-64, D 64 and 128), the sparse MLA 5.4-6.7e9 (h 16-128, topk
// 512-2048). The low ends, so that an estimate errs long.
inline constexpr double kIndexerCpuFlopsPerCoreSecond = 6.0e9;
inline constexpr double kSparseMlaCpuFlopsPerCoreSecond = 5.0e9;

// The longest CPU reference work that the fp8dsa command and the Python references start unasked.
inline constexpr double kMaxCpuSeconds = 3600.0;

struct CpuTimeEstimate {
  double seconds = 0.0;
  int threads = 1;  // cpu_reference_threads()
  int cores = 1;    // std::thread::hardware_concurrency() (at least 1); the work runs on the fewer
  // "about 40 seconds on 2 threads", "about 12 minutes on 1 thread", with
  // " (FP8DSA_CPU_THREADS=8, 2 cores here)" where there are more threads than cores.
  std::string to_string() const;
};

// The time of the given work on the references' threads of this machine (more threads than cores
// run no faster).
CpuTimeEstimate cpu_time_estimate(double indexer_flops, double sparse_mla_flops);

}  // namespace reference
}  // namespace fp8dsa
