// CUDA-event timing for the benchmark: warm-up launches, then `reps` launches each bracketed by its
// own event pair, reporting the median. Launches rotate over several input sets so that a kernel
// never finds its inputs still in L2 from the previous repetition.
#pragma once

#include <cstddef>
#include <functional>

#include <cuda_runtime_api.h>

#include "fp8dsa/status.h"

namespace fp8dsa::tools {

struct TimingConfig {
  int warmup = 3;
  int reps = 10;
};

struct Timing {
  double median_ms = 0.0;
  double min_ms = 0.0;
  double max_ms = 0.0;
  int reps = 0;
};

// How many input sets of `bytes_per_set` make the rotation's working set at least twice the L2
// (so that each set has been evicted before it comes round again); at least 1, at most max_sets.
int rotation_sets(size_t bytes_per_set, size_t l2_bytes, int max_sets = 16);

// Calls launch(set) for set = 0, 1, ..., num_sets - 1, 0, 1, ... on `stream`: config.warmup
// untimed calls, then config.reps timed ones. A launch that fails stops the run and its Status is
// returned; the stream is synchronised (and checked for asynchronous errors) before returning.
Status time_launches(cudaStream_t stream, int num_sets, const TimingConfig& config,
                     const std::function<Status(int set)>& launch, Timing* out);

}  // namespace fp8dsa::tools
