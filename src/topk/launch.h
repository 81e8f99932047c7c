// Internal: the top-k launch paths and the choice between them (the benchmark and the tests
// force a path through these; topk() goes through choose_launch()).
#pragma once

#include <cstdint>

#include "fp8dsa/status.h"
#include "fp8dsa/topk.h"
#include "topk/config.h"

namespace fp8dsa::detail::topk {

struct LaunchConfig {
  bool split = false;     // few long rows: several CTAs per row (needs the workspace)
  bool registers = false; // one CTA per row, the row held in registers (threads 256, 512 or 1024; N <= 4 x vecs x threads)
  bool filter = false;    // one CTA per row, sampled threshold and one read of the row (threads 256 or 512)
  int threads = 1024;     // one-CTA-per-row path: 512 or 1024
  int64_t cache_keys = -1;  // one-CTA-per-row path: keys of the row kept in shared memory; -1: as many as fit
  int chunks = 0;         // split path: CTAs per row (2..kSplitMaxChunks)
  int register_vecs = kRegisterVecsPerThread;  // register path: 4-key vectors a thread (FP8DSA_TUNING: 4, 16 too)
};

// The measured choice for these resolved params on the current device.
LaunchConfig choose_launch(const TopkParams& resolved);

// Launches on resolved, validated params (no checks beyond the launch's own). Asynchronous.
Status launch_row_kernel(const TopkParams& resolved, int threads, int64_t cache_keys);
Status launch_split(const TopkParams& resolved, int chunks);
Status launch_filter_kernel(const TopkParams& resolved, int threads);
Status launch_register_kernel(const TopkParams& resolved, int threads, int vecs = kRegisterVecsPerThread);
Status launch(const TopkParams& resolved, const LaunchConfig& config);

// Largest CTA count per row the split path may use for this shape (0: split not possible).
int max_split_chunks(const TopkParams& resolved);

}  // namespace fp8dsa::detail::topk
