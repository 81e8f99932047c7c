// The CPU references' time estimate (fp8dsa/cpu_time.h): the arithmetic, the threads it counts and
// the words the fp8dsa command and the Python references print.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <thread>

#include "fp8dsa/cpu_time.h"

namespace fp8dsa::reference {
namespace {

TEST(CpuTime, FlopCounts) {
  EXPECT_DOUBLE_EQ(indexer_cpu_flops(1000.0, 64, 128), 2.0 * 64 * 128 * 1000);
  EXPECT_DOUBLE_EQ(sparse_mla_cpu_flops(4096.0 * 128, 2048.0, 576, 512), 2.0 * 4096 * 128 * 2048 * 1088);
}

TEST(CpuTime, DividesByTheThreadsTheCoresCanRun) {
  const char* saved = std::getenv(kCpuThreadsVariable);
  const std::string saved_value = saved ? saved : "";
  setenv(kCpuThreadsVariable, "1", 1);
  const CpuTimeEstimate one = cpu_time_estimate(kIndexerCpuFlopsPerCoreSecond * 10, kSparseMlaCpuFlopsPerCoreSecond * 5);
  EXPECT_DOUBLE_EQ(one.seconds, 15.0);
  EXPECT_EQ(one.threads, 1);
  setenv(kCpuThreadsVariable, "1024", 1);
  const CpuTimeEstimate many = cpu_time_estimate(kIndexerCpuFlopsPerCoreSecond * 10, 0.0);
  const int cores = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  EXPECT_EQ(many.cores, cores);
  EXPECT_DOUBLE_EQ(many.seconds, 10.0 / std::min(1024, cores));
  if (saved) {
    setenv(kCpuThreadsVariable, saved_value.c_str(), 1);
  } else {
    unsetenv(kCpuThreadsVariable);
  }
}

TEST(CpuTime, Words) {
  EXPECT_EQ((CpuTimeEstimate{40.2, 2, 2}).to_string(), "about 40 seconds on 2 threads");
  EXPECT_EQ((CpuTimeEstimate{0.1, 1, 2}).to_string(), "about 1 second on 1 thread");
  EXPECT_EQ((CpuTimeEstimate{5400.0, 2, 4}).to_string(), "about 90 minutes on 2 threads");
  EXPECT_EQ((CpuTimeEstimate{5400.0, 8, 2}).to_string(), "about 90 minutes on 2 threads (FP8DSA_CPU_THREADS=8, 2 cores here)");
}

}  // namespace
}  // namespace fp8dsa::reference
