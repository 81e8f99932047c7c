// For the hand-run tuning drivers (fp8dsa_topk_timing, fp8dsa_indexer_timing,
// fp8dsa_sparse_mla_timing; not the benchmark): they stop at the first error, with where and why.
// Their inputs come from tools/device_random.h and their times from time_launches
// (tools/timing.h), like the benchmark's.
#pragma once

#include <cstdio>
#include <cstdlib>

#include <cuda_runtime_api.h>

#include "fp8dsa/status.h"

#define FP8DSA_TOOL_CHECK_CUDA(expr)                                                             \
  do {                                                                                           \
    const cudaError_t tool_err_ = (expr);                                                        \
    if (tool_err_ != cudaSuccess) {                                                              \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #expr, cudaGetErrorString(tool_err_)); \
      std::exit(1);                                                                              \
    }                                                                                            \
  } while (0)

#define FP8DSA_TOOL_CHECK_OK(expr)                                                               \
  do {                                                                                           \
    const ::fp8dsa::Status tool_status_ = (expr);                                                \
    if (!tool_status_.is_ok()) {                                                                 \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #expr,                          \
                   tool_status_.to_string().c_str());                                            \
      std::exit(1);                                                                              \
    }                                                                                            \
  } while (0)
