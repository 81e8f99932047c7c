// parallel_for (core/parallel_for.h): every index once, exceptions rethrown, and the thread count
// the CPU references take from FP8DSA_CPU_THREADS.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "core/parallel_for.h"

namespace fp8dsa {
namespace {

// Sets FP8DSA_CPU_THREADS for one scope and restores what was there.
class ThreadsVariable {
 public:
  explicit ThreadsVariable(const char* value) {
    if (const char* old = std::getenv(kName)) saved_ = old, had_ = true;
    if (value != nullptr) {
      setenv(kName, value, 1);
    } else {
      unsetenv(kName);
    }
  }
  ~ThreadsVariable() {
    if (had_) {
      setenv(kName, saved_.c_str(), 1);
    } else {
      unsetenv(kName);
    }
  }

 private:
  static constexpr const char* kName = "FP8DSA_CPU_THREADS";
  std::string saved_;
  bool had_ = false;
};

int64_t hardware_threads() { return std::max<int64_t>(1, static_cast<int64_t>(std::thread::hardware_concurrency())); }

TEST(ParallelFor, ThreadCountParsing) {
  EXPECT_EQ(cpu_threads_from(nullptr), 0);
  EXPECT_EQ(cpu_threads_from("1"), 1);
  EXPECT_EQ(cpu_threads_from("64"), 64);
  EXPECT_EQ(cpu_threads_from("5000"), 1024);
  for (const char* bad : {"", "0", "-2", "abc", "4x", "1.5"}) EXPECT_EQ(cpu_threads_from(bad), 0) << "'" << bad << "'";
}

TEST(ParallelFor, ThreadsFromTheEnvironment) {
  {
    ThreadsVariable v(nullptr);
    EXPECT_EQ(cpu_reference_threads(), hardware_threads());
  }
  {
    ThreadsVariable v("3");
    EXPECT_EQ(cpu_reference_threads(), 3);
  }
  {
    ThreadsVariable v("5000");
    EXPECT_EQ(cpu_reference_threads(), 1024);
  }
  for (const char* bad : {"0", "-2", "abc", "4x", ""}) {
    ThreadsVariable v(bad);
    EXPECT_EQ(cpu_reference_threads(), hardware_threads()) << "'" << bad << "'";
  }
}

TEST(ParallelFor, EveryIndexOnceOnAnyThreadCount) {
  for (const char* threads : {"1", "2", "7"}) {
    ThreadsVariable v(threads);
    std::vector<std::atomic<int>> seen(1000);
    parallel_for(5, 1000, [&](int64_t i) { seen[static_cast<size_t>(i)].fetch_add(1); });
    for (size_t i = 0; i < seen.size(); ++i) EXPECT_EQ(seen[i].load(), i < 5 ? 0 : 1) << threads << " " << i;
  }
}

TEST(ParallelFor, RethrowsTheWorkersException) {
  ThreadsVariable v("4");
  EXPECT_THROW(parallel_for(0, 100, [](int64_t i) {
                 if (i == 57) throw std::runtime_error("item 57");
               }),
               std::runtime_error);
}

}  // namespace
}  // namespace fp8dsa
