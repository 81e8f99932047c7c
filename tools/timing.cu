#include "tools/timing.h"

#include <algorithm>
#include <vector>

#include "core/cuda_check.h"

namespace fp8dsa::tools {
namespace {

// Owns the events of one timed run; destroys them on every exit path.
class EventPairs {
 public:
  ~EventPairs() {
    for (cudaEvent_t e : events_) cudaEventDestroy(e);
  }
  Status create(int count) {
    events_.reserve(static_cast<size_t>(count));
    for (int i = 0; i < count; ++i) {
      cudaEvent_t e = nullptr;
      FP8DSA_CUDA_RETURN_IF_ERROR(cudaEventCreate(&e));
      events_.push_back(e);
    }
    return Status::ok();
  }
  cudaEvent_t operator[](size_t i) const { return events_[i]; }

 private:
  std::vector<cudaEvent_t> events_;
};

}  // namespace

int rotation_sets(size_t bytes_per_set, size_t l2_bytes, int max_sets) {
  if (bytes_per_set == 0) return 1;
  const size_t wanted = (2 * l2_bytes + bytes_per_set - 1) / bytes_per_set;
  return static_cast<int>(std::clamp<size_t>(wanted, 1, static_cast<size_t>(std::max(1, max_sets))));
}

Status time_launches(cudaStream_t stream, int num_sets, const TimingConfig& config,
                     const std::function<Status(int set)>& launch, Timing* out) {
  if (num_sets < 1 || config.reps < 1 || config.warmup < 0) {
    return invalid_argument("time_launches: need num_sets >= 1, reps >= 1, warmup >= 0");
  }
  int set = 0;
  auto next_set = [&] {
    const int s = set;
    set = (set + 1) % num_sets;
    return s;
  };
  for (int i = 0; i < config.warmup; ++i) FP8DSA_RETURN_IF_ERROR(launch(next_set()));

  EventPairs events;
  FP8DSA_RETURN_IF_ERROR(events.create(2 * config.reps));
  for (int i = 0; i < config.reps; ++i) {
    FP8DSA_CUDA_RETURN_IF_ERROR(cudaEventRecord(events[2 * i], stream));
    FP8DSA_RETURN_IF_ERROR(launch(next_set()));
    FP8DSA_CUDA_RETURN_IF_ERROR(cudaEventRecord(events[2 * i + 1], stream));
  }
  FP8DSA_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
  FP8DSA_CUDA_RETURN_IF_ERROR(cudaGetLastError());

  std::vector<double> ms(static_cast<size_t>(config.reps));
  for (int i = 0; i < config.reps; ++i) {
    float elapsed = 0.0f;
    FP8DSA_CUDA_RETURN_IF_ERROR(cudaEventElapsedTime(&elapsed, events[2 * i], events[2 * i + 1]));
    ms[static_cast<size_t>(i)] = elapsed;
  }
  std::sort(ms.begin(), ms.end());
  const size_t n = ms.size();
  out->median_ms = n % 2 == 1 ? ms[n / 2] : 0.5 * (ms[n / 2 - 1] + ms[n / 2]);
  out->min_ms = ms.front();
  out->max_ms = ms.back();
  out->reps = config.reps;
  return Status::ok();
}

}  // namespace fp8dsa::tools
