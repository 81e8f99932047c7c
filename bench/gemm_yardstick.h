// The speed yardstick every op is compared with: a cuBLASLt FP8 GEMM (e4m3 in, bf16 out, f32
// accumulation) of 8192^3, timed in the same run as the ops so that clocks, power state and the
// chip itself are the same on both sides of the ratio.
#pragma once

#include <string>

#include <cuda_runtime_api.h>

#include "fp8dsa/status.h"
#include "tools/timing.h"

namespace fp8dsa::bench {

struct GemmYardstick {
  int m = 0, n = 0, k = 0;
  tools::Timing timing;
  double tflops = 0.0;
  std::string algo;  // what cuBLASLt picked, for the table
};

// D[m, n] (bf16) = A[m, k] (e4m3) x B[k, n] (e4m3) in the TN layout cuBLASLt requires for FP8,
// with random non-zero inputs.
Status run_fp8_gemm_yardstick(int m, int n, int k, const tools::TimingConfig& config, size_t l2_bytes,
                              cudaStream_t stream, GemmYardstick* out);

}  // namespace fp8dsa::bench
