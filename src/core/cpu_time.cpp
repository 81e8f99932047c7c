#include "fp8dsa/cpu_time.h"

#include <algorithm>
#include <string>
#include <thread>

namespace fp8dsa::reference {
namespace {

// "1 thread", "2 threads".
std::string counted(int n, const char* noun) { return std::to_string(n) + " " + noun + (n == 1 ? "" : "s"); }

}  // namespace

CpuTimeEstimate cpu_time_estimate(double indexer_flops, double sparse_mla_flops) {
  CpuTimeEstimate e;
  e.threads = static_cast<int>(cpu_reference_threads());
  e.cores = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  const double cores_used = std::min(e.threads, e.cores);
  e.seconds = (indexer_flops / kIndexerCpuFlopsPerCoreSecond + sparse_mla_flops / kSparseMlaCpuFlopsPerCoreSecond) /
              cores_used;
  return e;
}

std::string CpuTimeEstimate::to_string() const {
  const std::string time = seconds < 90.0 ? counted(std::max(1, static_cast<int>(seconds + 0.5)), "second")
                                          : counted(static_cast<int>(seconds / 60.0 + 0.5), "minute");
  const int used = std::min(threads, cores);
  std::string text = "about " + time + " on " + counted(used, "thread");
  if (threads > cores) {
    text += " (" + std::string(kCpuThreadsVariable) + "=" + std::to_string(threads) + ", " + counted(cores, "core") +
            " here)";
  }
  return text;
}

}  // namespace fp8dsa::reference
