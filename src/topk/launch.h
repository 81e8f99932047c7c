// Internal: the top-k launch paths and the choice between them (the benchmark and the tests
// force a path through these; topk() goes through choose_launch()).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "fp8dsa/status.h"
#include "fp8dsa/topk.h"
#include "topk/config.h"

namespace fp8dsa::detail::topk {

struct LaunchConfig {
  bool split = false;     // few long rows: several CTAs per row (needs the workspace)
  bool registers = false; // one CTA per row, the row held on chip (N <= 4 x (vecs + smem vecs) x threads)
  bool filter = false;    // one CTA per row, sampled threshold and one read of the row (threads 256 or 512)
  int threads = 1024;     // one-CTA-per-row path: 512 or 1024
  int64_t cache_keys = -1;  // one-CTA-per-row path: keys of the row kept in shared memory; -1: as many as fit
  int chunks = 0;         // split path: CTAs per row (2..kSplitMaxChunks)
  int register_vecs = kRegisterVecsPerThread;  // register path: 4-key vectors a thread in registers
  int register_smem_vecs = 0;                  // and in shared memory (launch_register_kernel lists the shapes)
};

// The measured choice for these resolved params on the current device.
LaunchConfig choose_launch(const TopkParams& resolved);

// Launches on resolved, validated params (no checks beyond the launch's own). Asynchronous.
Status launch_row_kernel(const TopkParams& resolved, int threads, int64_t cache_keys);
Status launch_split(const TopkParams& resolved, int chunks);
Status launch_filter_kernel(const TopkParams& resolved, int threads);
// The register kernel's shapes (threads x vectors in registers + in shared memory): 256, 512 or 1024
// x 8 + 0, and 512 x 7 + 9; FP8DSA_TUNING builds add 512 / 1024 x 4 + 0, 256 / 512 x 16 + 0 and
// 256 x 8 + 8.
Status launch_register_kernel(const TopkParams& resolved, int threads, int vecs = kRegisterVecsPerThread,
                              int smem_vecs = 0);
Status launch(const TopkParams& resolved, const LaunchConfig& config);
// launch_register_kernel's shapes that hold rows of num_keys, as configs (the tests and the timing
// driver try each), and a register config's name ("registers t512 x7+9").
std::vector<LaunchConfig> register_launch_configs(int64_t num_keys);
std::string register_config_name(const LaunchConfig& config);

// Largest CTA count per row the split path may use for this shape (0: split not possible).
int max_split_chunks(const TopkParams& resolved);

}  // namespace fp8dsa::detail::topk
