// Internal: a minimal std::thread parallel loop for the CPU references (no thread pool, no OpenMP:
// the references run a few times per test, so spawning threads per call is cheap enough).
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "core/cancel_poll.h"
#include "fp8dsa/cpu_time.h"

namespace fp8dsa {

// Calls fn(i) for every i in [begin, end), split into contiguous chunks over up to
// cpu_reference_threads() threads (fewer when a thread cannot be started). fn must be safe to run
// concurrently for distinct i. The first exception thrown by fn is rethrown on the calling thread
// after all workers have joined. With a cancel check installed on the calling thread
// (fp8dsa/cancel.h), the calling thread asks it between items and while it waits for the others;
// once it says stop, no thread starts another item and detail::Cancelled is thrown after the join.
template <typename Fn>
void parallel_for(int64_t begin, int64_t end, Fn&& fn) {
  const int64_t count = end - begin;
  if (count <= 0) return;
  detail::CancelPoll cancel;
  const int64_t num_threads = std::min(cpu_reference_threads(), count);
  if (num_threads == 1) {
    for (int64_t i = begin; i < end; ++i) {
      fn(i);
      if (cancel.stop_requested()) throw detail::Cancelled{};
    }
    return;
  }
  // A few chunks per thread, handed out in order, so that uneven items (ragged rows) still balance.
  const int64_t num_chunks = std::min(count, num_threads * 4);
  const int64_t chunk = (count + num_chunks - 1) / num_chunks;

  std::mutex mutex;
  std::condition_variable worker_done;
  int64_t next_chunk = 0;
  size_t finished = 0;  // threads whose work is done
  std::exception_ptr error;
  std::atomic<bool> stop{false};
  // The calling thread (`caller`) also asks the cancel check after each of its items.
  auto work = [&](bool caller) {
    for (;;) {
      int64_t c;
      {
        std::lock_guard<std::mutex> lock(mutex);
        if (error || next_chunk >= num_chunks) return;
        c = next_chunk++;
      }
      const int64_t lo = begin + c * chunk;
      const int64_t hi = std::min(end, lo + chunk);
      try {
        for (int64_t i = lo; i < hi; ++i) {
          if (stop.load(std::memory_order_relaxed)) return;
          fn(i);
          if (caller && cancel.stop_requested()) {
            stop.store(true, std::memory_order_relaxed);
            return;
          }
        }
      } catch (...) {
        std::lock_guard<std::mutex> lock(mutex);
        if (!error) error = std::current_exception();
        return;
      }
    }
  };
  auto worker = [&] {
    work(false);
    std::lock_guard<std::mutex> lock(mutex);
    ++finished;
    worker_done.notify_one();
  };
  std::vector<std::thread> threads;
  try {
    threads.reserve(static_cast<size_t>(num_threads - 1));
    for (int64_t i = 1; i < num_threads; ++i) threads.emplace_back(worker);
  } catch (const std::exception&) {
    // No memory or no thread left (std::system_error): the chunks are handed out on demand, so the
    // threads already started and this one still do all the work.
  }
  work(true);
  {
    // The others' last chunks can take seconds: keep asking the cancel check meanwhile.
    std::unique_lock<std::mutex> lock(mutex);
    while (finished < threads.size()) {
      if (!cancel.active() || stop.load(std::memory_order_relaxed)) {
        worker_done.wait(lock, [&] { return finished == threads.size(); });
        break;
      }
      worker_done.wait_for(lock, std::chrono::milliseconds(reference::kCancelCheckIntervalMs));
      lock.unlock();
      if (cancel.stop_requested()) stop.store(true, std::memory_order_relaxed);
      lock.lock();
    }
  }
  for (auto& thread : threads) thread.join();
  if (error) std::rethrow_exception(error);
  if (stop.load(std::memory_order_relaxed)) throw detail::Cancelled{};
}

}  // namespace fp8dsa
