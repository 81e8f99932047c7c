// `fp8dsa run`: the whole prefill on synthetic data, stage by stage and as one call, with sampled
// accuracy checks. Each returns the process exit status (0 = every check passed).
#pragma once

#include "problem.h"

namespace fp8dsa::cli {

// On the GPU: fp8dsa::prefill and the three fast entry points one by one (a stage whose fast
// kernel is not implemented yet falls back to its GPU reference kernel, and says so).
int run_on_gpu(const RunOptions& options);

// Without a GPU (or with --cpu): reference::prefill_cpu and the three CPU references one by one.
int run_on_cpu(const RunOptions& options);

}  // namespace fp8dsa::cli
