// Public top-k entry points: argument checks, workspace query and the choice of launch path.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>

#include "core/cuda_check.h"
#include "core/no_throw.h"
#include "fp8dsa/topk.h"
#include "topk/config.h"
#include "topk/launch.h"
#include "topk/params.h"

namespace fp8dsa {
namespace detail::topk {

// Path choice.
// - The register kernel (the row read once and kept on chip) takes every shape of N <= 32768: 256
//   threads of 32 keys in registers up to 8192 keys (4 CTAs an SM), 512 up to 16384 (2), and 512
//   with 28 keys a thread in registers and 36 in shared memory up to 32768 (2 CTAs an SM, where
//   1024 threads of registers alone would run one, its loads then never beside another row's
//   select; with no more rows than SMs the 1024-thread shape, kRegisterFewRows). Measured on an H100 (fp8dsa_bench --ops=topk, bench/journal/2026-12-06.md, thirtieth
//   session), beside the kernels it replaces and SGLang's top-k v2 in the same call: 4096 causal
//   rows of N = 8192 in 0.069-0.070 ms (the row kernel 0.194, SGLang 0.083), N = 32768 in
//   0.273-0.274 ms (the filter kernel 0.351-0.365, SGLang 0.266-0.268); full rows 4096 x 8192 0.075
//   ms (0.204), 4096 x 32768 0.283 (0.348). With the predicated emit and level 1 binned by a
//   minimum (thirty-sixth session, bench/journal/2026-12-07.md, H100): 0.063 ms at 8K and 0.248 at
//   32K causal (SGLang's top-k v2 0.083-0.084 and 0.267-0.271 in the same calls). Its other thread
//   counts (bench/tuning/topk_timing.cu) are not compared on a GPU yet.
// Longer rows, measured on an H200 (bench/tuning/topk_timing.cu, median of 15, full rows, k = 2048):
// - Split a row over several CTAs only for long rows that leave most SMs idle: each split costs
//   ~0.04 ms of chained launches. T=16 / T=1 x 131072: split 0.053 / 0.042 ms vs one CTA a row
//   0.072 / 0.067; T=64 x 131072: one CTA a row 0.073 vs best split 0.111; T<=64 x 32768: one CTA
//   a row 0.025-0.028 vs split >= 0.040; T=1 / 8 / 64 x 1M: split 0.045 / 0.109 / 0.62 vs 0.93 /
//   0.97 / 1.05. About 2 split CTAs per SM was best.
// - One CTA a row: with more rows than SMs, 512 threads caching 12288 keys (two CTAs per SM, the
//   rest of the row re-read from L2) beat 1024 threads caching the whole row (one CTA per SM):
//   4096 x 32768: 0.542 vs 0.642 ms; 4096 x 8192: 0.204 vs 0.366; 8192 x 65536: 2.10 vs 2.16.
//   With few rows the 1024-thread CTA wins (64 x 131072: 0.073 vs 0.099).
// - The filter kernel (a sampled threshold, the row read once, the select on about 1.4 k
//   candidates) beats both for rows of 16K to 256K keys (its chunk records end there), 512
//   threads, same run: 4096 x 32768 0.336 vs 0.536 ms, 8192 x 65536 1.001 vs 2.096, 64 x 131072
//   0.043 vs 0.071 (1024-thread row kernel), 1 / 16 x 131072 0.036 / 0.040 vs split 0.037 /
//   0.048, 1 / 8 / 64 x 32768 0.0185 / 0.0188 / 0.0212 vs 0.019 / 0.019 / 0.021. At 4096 x 8192
//   the row kernel stays ahead (0.202 vs 0.210 for the filter's best, 256 threads).
inline constexpr int kSplitMinCtasPerSm = 2;
inline constexpr int64_t kSplitMinRowKeys = 65536;
inline constexpr int64_t kSplitMinKeysPerRow = 8192;  // split only while N >= this * T
inline constexpr int kManyRowsThreads = 512;
inline constexpr int64_t kManyRowsCacheKeys = 12288;  // keeps a 512-thread CTA within half an SM's shared memory
inline constexpr int kFewRowsThreads = 1024;
inline constexpr int64_t kFilterMinKeys = 16384;
inline constexpr int kFilterThreads = 512;
// The register kernel's shapes, by the longest row each holds (threads, vectors a thread in
// registers and in shared memory).
struct RegisterChoice {
  int threads, vecs, smem_vecs;
};
inline constexpr RegisterChoice kRegisterChoices[] = {{256, kRegisterVecsPerThread, 0},
                                                      {512, kRegisterVecsPerThread, 0},
                                                      {kRegisterLongThreads, kRegisterLongVecs, kRegisterLongSmemVecs}};

// With no more rows than SMs, each row has an SM to itself: past 16K keys the 1024-thread shape of
// registers alone beats the long shape's two CTAs an SM (H100, fp8dsa_topk_timing, 32K keys: 1 / 8 /
// 64 rows 0.0124 / 0.0138 / 0.0160 ms against 0.0137 / 0.0154 / 0.0170; bench/journal/2026-12-06.md).
inline constexpr RegisterChoice kRegisterFewRows{1024, kRegisterVecsPerThread, 0};

LaunchConfig choose_launch(const TopkParams& p) {
  LaunchConfig config;
  for (const RegisterChoice& choice : kRegisterChoices) {
    if (p.num_keys <= register_cap_keys(choice.threads, choice.vecs, choice.smem_vecs)) {
      const bool few_rows = choice.smem_vecs > 0 && p.num_rows <= std::max(1, device_sm_count());
      const RegisterChoice& c = few_rows ? kRegisterFewRows : choice;
      config.registers = true;
      config.threads = c.threads;
      config.register_vecs = c.vecs;
      config.register_smem_vecs = c.smem_vecs;
      return config;
    }
  }
  if (p.num_keys >= kFilterMinKeys && p.num_keys <= int64_t{kFilterMaxChunks} * kFilterChunkKeys) {
    config.filter = true;
    config.threads = kFilterThreads;
    return config;
  }
  const int64_t sms = std::max(1, device_sm_count());
  const int max_chunks = max_split_chunks(p);
  if (max_chunks >= 2 && p.num_keys >= kSplitMinRowKeys && p.num_keys >= kSplitMinKeysPerRow * p.num_rows) {
    const int64_t want = (kSplitMinCtasPerSm * sms + p.num_rows - 1) / p.num_rows;
    const int chunks = static_cast<int>(std::min<int64_t>(want, max_chunks));
    if (chunks >= 2) {
      config.split = true;
      config.chunks = chunks;
      return config;
    }
  }
  if (p.num_rows > sms) {
    config.threads = kManyRowsThreads;
    config.cache_keys = kManyRowsCacheKeys;
  } else {
    config.threads = kFewRowsThreads;
    config.cache_keys = -1;
  }
  return config;
}

Status launch(const TopkParams& p, const LaunchConfig& config) {
  if (config.split) return launch_split(p, config.chunks);
  if (config.registers) {
    return launch_register_kernel(p, config.threads, config.register_vecs, config.register_smem_vecs);
  }
  if (config.filter) return launch_filter_kernel(p, config.threads);
  return launch_row_kernel(p, config.threads, config.cache_keys);
}

}  // namespace detail::topk

Status topk_workspace_bytes(const TopkParams& params, size_t* bytes) {
  return detail::no_throw("topk_workspace_bytes", [&] {
    if (bytes == nullptr) return invalid_argument("topk_workspace_bytes: bytes must not be null");
    const TopkParams p = params.resolved();
    FP8DSA_RETURN_IF_ERROR(detail::topk::validate_shape(p));
    // Only the split path (at most kSplitMaxRows rows) uses workspace; its size depends on the shape.
    *bytes = p.num_rows < 1 || p.num_rows > detail::topk::kSplitMaxRows
                 ? 0
                 : static_cast<size_t>(p.num_rows) * sizeof(detail::topk::SplitRowWorkspace);
    return Status::ok();
  });
}

size_t topk_workspace_bytes(const TopkParams& params) {
  size_t bytes = 0;
  return topk_workspace_bytes(params, &bytes).is_ok() ? bytes : std::numeric_limits<size_t>::max();
}

namespace {

Status topk_unguarded(const TopkParams& params) {
  FP8DSA_RETURN_IF_ERROR(validate(params));
  FP8DSA_RETURN_IF_ERROR(check_device());
  const TopkParams p = params.resolved();
  const size_t need = topk_workspace_bytes(p);
  if (p.workspace_bytes < need || (need > 0 && p.workspace == nullptr)) {
    return {StatusCode::kWorkspaceTooSmall,
            "topk: workspace_bytes (" + std::to_string(p.workspace_bytes) +
                (p.workspace == nullptr ? ", workspace null" : "") +
                ") is below topk_workspace_bytes() (" + std::to_string(need) + ")"};
  }
  if (need > 0 && reinterpret_cast<uintptr_t>(p.workspace) % kWorkspaceAlignment != 0) {
    return invalid_argument("topk: workspace must be " + std::to_string(kWorkspaceAlignment) + "-byte aligned");
  }
  if (p.num_rows == 0) return Status::ok();
  return detail::topk::launch(p, detail::topk::choose_launch(p));
}

}  // namespace

Status topk(const TopkParams& params) {
  return detail::no_throw("topk", [&] { return topk_unguarded(params); });
}

}  // namespace fp8dsa
