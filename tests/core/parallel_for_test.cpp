// parallel_for (core/parallel_for.h): every index once, exceptions rethrown, the thread count
// the CPU references take from FP8DSA_CPU_THREADS, and a stop by the calling thread's cancel check.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "core/parallel_for.h"
#include "fp8dsa/cancel.h"

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

// A cancel check that says stop from its `stop_after`-th call on, counting its calls and the
// threads it was called on.
struct CountingCheck {
  int stop_after = 1;
  int calls = 0;
  std::thread::id caller = std::this_thread::get_id();
  bool other_thread = false;

  static bool check(void* context) {
    auto* self = static_cast<CountingCheck*>(context);
    self->other_thread |= std::this_thread::get_id() != self->caller;
    return ++self->calls >= self->stop_after;
  }
};

// Items of 1 ms: 2000 of them take 2 s on one thread, 0.5 s on four.
void slow_items(std::atomic<int>* done) {
  parallel_for(0, 2000, [&](int64_t) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    done->fetch_add(1);
  });
}

TEST(ParallelFor, StopsWhenTheCancelCheckSaysSo) {
  for (const char* threads : {"1", "4"}) {
    ThreadsVariable v(threads);
    CountingCheck counter;
    counter.stop_after = 2;
    std::atomic<int> done{0};
    reference::ScopedCancelCheck cancel(&CountingCheck::check, &counter);
    EXPECT_THROW(slow_items(&done), detail::Cancelled) << threads;
    EXPECT_EQ(counter.calls, 2) << threads;  // latched: not asked again once it said stop
    EXPECT_FALSE(counter.other_thread) << threads;
    // Two checks kCancelCheckIntervalMs apart: about 100 ms of work done, far from all of it.
    EXPECT_GT(done.load(), 0) << threads;
    EXPECT_LT(done.load(), 1000) << threads;
  }
}

TEST(ParallelFor, RunsToTheEndWhileTheCheckSaysGoOn) {
  ThreadsVariable v("4");
  CountingCheck counter;
  counter.stop_after = 1 << 30;
  std::atomic<int> done{0};
  {
    reference::ScopedCancelCheck cancel(&CountingCheck::check, &counter);
    slow_items(&done);
  }
  EXPECT_EQ(done.load(), 2000);
  EXPECT_GT(counter.calls, 0);  // asked while the other threads worked, too
  EXPECT_FALSE(counter.other_thread);
  // The scope ended: the check is no longer asked.
  const int calls = counter.calls;
  slow_items(&done);
  EXPECT_EQ(counter.calls, calls);
}

TEST(ParallelFor, CancelScopesNest) {
  ThreadsVariable v("1");
  CountingCheck outer, inner;
  outer.stop_after = inner.stop_after = 1;
  std::atomic<int> done{0};
  reference::ScopedCancelCheck outer_scope(&CountingCheck::check, &outer);
  {
    reference::ScopedCancelCheck inner_scope(&CountingCheck::check, &inner);
    EXPECT_THROW(slow_items(&done), detail::Cancelled);
  }
  EXPECT_EQ(outer.calls, 0);
  EXPECT_THROW(slow_items(&done), detail::Cancelled);
  EXPECT_EQ(outer.calls, 1);
}

}  // namespace
}  // namespace fp8dsa
