// Tuning driver for the FP8 sparse MLA kernel (not a test, not the official benchmark): times
// sparse_mla_prefill at T = 4096, topk = 2048 over N and h with CUDA events (median of reps), beside
// a cuBLASLt FP8 GEMM of 8192^3 from the same run, and prints one compact table.
//   fp8dsa_sparse_mla_timing [reps=20] [kernel=fp8|reference|profile] [profile h=64] [path]
// profile: a single launch of the FP8 kernel at h, N=32768 (for ncu), nothing else; path picks
// h = 128's HeadPairs (cluster|separate) or h < 64's SmallHeads (transposed|padded); default: the
// default path.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include <cuda_runtime_api.h>

#include "common/random_inputs.h"
#include "fp8dsa/sparse_mla.h"
#include "gemm_yardstick.h"
#include "sparse_mla/fp8_launch.h"
#include "timing.h"
#include "tool_support.h"

namespace {

// qk_groups 0: the public entry point; otherwise the FP8 kernel instantiation with that many QK^T
// chains (and, for h < 64 and h = 128, the given path).
double median_ms(const fp8dsa::SparseMlaParams& p, int reps, int qk_groups = 0,
                 fp8dsa::sparse_mla::SmallHeads small = fp8dsa::sparse_mla::SmallHeads::kDefault,
                 fp8dsa::sparse_mla::HeadPairs pairs = fp8dsa::sparse_mla::kDefaultHeadPairs) {
  const auto launch = [&](int) {
    return qk_groups == 0 ? fp8dsa::sparse_mla_prefill(p)
                          : fp8dsa::sparse_mla::launch_sparse_mla_fp8(p, qk_groups, small, pairs);
  };
  fp8dsa::bench::TimingConfig config;
  config.reps = reps;
  fp8dsa::bench::Timing timing;
  FP8DSA_TOOL_CHECK_OK(fp8dsa::bench::time_launches(nullptr, 1, config, launch, &timing));
  return timing.median_ms;
}

}  // namespace

int main(int argc, char** argv) {
  const int reps = argc > 1 ? std::max(10, std::atoi(argv[1])) : 20;
  const bool reference = argc > 2 && std::strcmp(argv[2], "reference") == 0;
  const bool profile = argc > 2 && std::strcmp(argv[2], "profile") == 0;
  const int profile_heads = argc > 3 ? std::atoi(argv[3]) : 64;
  const char* profile_path = argc > 4 ? argv[4] : "";
  const fp8dsa::sparse_mla::HeadPairs profile_pairs = std::strcmp(profile_path, "cluster") == 0
                                                          ? fp8dsa::sparse_mla::HeadPairs::kCluster
                                                          : fp8dsa::sparse_mla::HeadPairs::kSeparate;
  const fp8dsa::sparse_mla::SmallHeads profile_small =
      std::strcmp(profile_path, "transposed") == 0 ? fp8dsa::sparse_mla::SmallHeads::kTransposed
      : std::strcmp(profile_path, "padded") == 0   ? fp8dsa::sparse_mla::SmallHeads::kPadded
                                                   : fp8dsa::sparse_mla::SmallHeads::kDefault;
  const int64_t T = 4096;
  const int topk = 2048;
  const int d_qk = 576, d_v = 512;

  fp8dsa::bench::GemmYardstick gemm;
  fp8dsa::bench::TimingConfig tc;
  tc.reps = reps;
  if (!profile) {
    const fp8dsa::Status gs = fp8dsa::bench::run_fp8_gemm_yardstick(8192, 8192, 8192, tc, 0, nullptr, &gemm);
    if (!gs.is_ok()) std::fprintf(stderr, "gemm yardstick: %s\n", gs.to_string().c_str());
  }
  std::printf("FP8 GEMM 8192^3: %.3f ms, %.0f TFLOPS\n", gemm.timing.median_ms, gemm.tflops);
  std::printf("%-10s %4s %7s %9s %8s %7s\n", "kernel", "h", "N", "ms", "TFLOPS", "xGEMM");

  const int64_t max_n = 131072;
  const int max_h = 128;
  const std::vector<uint8_t> q = fp8dsa::testing::random_e4m3(static_cast<size_t>(T * max_h * d_qk), 1);
  const std::vector<uint8_t> kv = fp8dsa::testing::random_e4m3(static_cast<size_t>(max_n * d_qk), 2);
  uint8_t *d_q, *d_kv;
  int32_t* d_idx;
  void* d_out;
  float *d_lse, *d_max;
  FP8DSA_TOOL_CHECK_CUDA(cudaMalloc(&d_q, q.size()));
  FP8DSA_TOOL_CHECK_CUDA(cudaMalloc(&d_kv, kv.size()));
  FP8DSA_TOOL_CHECK_CUDA(cudaMalloc(&d_idx, T * topk * sizeof(int32_t)));
  FP8DSA_TOOL_CHECK_CUDA(cudaMalloc(&d_out, T * max_h * d_v * 2));
  FP8DSA_TOOL_CHECK_CUDA(cudaMalloc(&d_lse, T * max_h * sizeof(float)));
  FP8DSA_TOOL_CHECK_CUDA(cudaMalloc(&d_max, T * max_h * sizeof(float)));
  FP8DSA_TOOL_CHECK_CUDA(cudaMemcpy(d_q, q.data(), q.size(), cudaMemcpyHostToDevice));
  FP8DSA_TOOL_CHECK_CUDA(cudaMemcpy(d_kv, kv.data(), kv.size(), cudaMemcpyHostToDevice));

  // The timed problem: T tokens, topk keys each over n cache rows, h heads.
  const auto params_for = [&](int64_t n, int h) {
    fp8dsa::SparseMlaParams p;
    p.num_tokens = T;
    p.num_kv = n;
    p.num_heads = h;
    p.q = d_q;
    p.kv = d_kv;
    p.indices = d_idx;
    p.topk = topk;
    p.sm_scale = 0.0721687836f;
    p.out = d_out;
    p.lse = d_lse;
    p.max_logits = d_max;
    return p;
  };
  const auto tflops_at = [&](int h, double ms) { return 2.0 * h * (d_qk + d_v) * double(T) * topk / (ms * 1e-3) / 1e12; };

  for (int64_t n : {8192, 32768, 65536, 131072}) {
    const std::vector<int32_t> idx = fp8dsa::testing::random_indices(T, topk, n, 3 + n, 0.0, true);
    FP8DSA_TOOL_CHECK_CUDA(cudaMemcpy(d_idx, idx.data(), idx.size() * sizeof(int32_t), cudaMemcpyHostToDevice));
    for (int h : {128, 64, 32, 16}) {
      if ((reference || profile) && n != 32768) continue;
      if (profile && h != profile_heads) continue;
      fp8dsa::SparseMlaParams p = params_for(n, h);
      p.kernel = reference ? fp8dsa::SparseMlaKernel::kReference : fp8dsa::SparseMlaKernel::kAuto;
      if (profile) {
        const fp8dsa::Status st = fp8dsa::sparse_mla::launch_sparse_mla_fp8(
            p, fp8dsa::sparse_mla::kDefaultQkGroups, profile_small, profile_pairs);
        FP8DSA_TOOL_CHECK_CUDA(cudaDeviceSynchronize());
        std::printf("profile launch: %s\n", st.to_string().c_str());
        continue;
      }
      const double ms = median_ms(p, reference ? 3 : reps);
      const double tflops = tflops_at(h, ms);
      const bool fp8 = !reference;
      std::printf("%-10s %4d %7lld %9.3f %8.1f %7.3f\n", fp8 ? "fp8" : "reference", h, (long long)n, ms, tflops,
                  gemm.tflops > 0 ? tflops / gemm.tflops : 0.0);
    }
  }
  // The QK^T chain count (accuracy / speed tradeoff, see fp8_launch.h) at N = 32K.
  if (!reference && !profile) {
    const std::vector<int32_t> idx = fp8dsa::testing::random_indices(T, topk, 32768, 7, 0.0, true);
    FP8DSA_TOOL_CHECK_CUDA(cudaMemcpy(d_idx, idx.data(), idx.size() * sizeof(int32_t), cudaMemcpyHostToDevice));
    std::printf("QK^T chains (default %d) at N=32768 (h < 64: the transposed kernel, then the padded one; h = 128: "
                "the 2-CTA cluster (default chains only), then separate CTAs, the default):\n"
                "%-10s %4s %7s %9s %8s %7s\n",
                fp8dsa::sparse_mla::kDefaultQkGroups, "qk_groups", "h", "N", "ms", "TFLOPS", "xGEMM");
    using fp8dsa::sparse_mla::HeadPairs;
    using fp8dsa::sparse_mla::SmallHeads;
    constexpr int kDefault = fp8dsa::sparse_mla::kDefaultQkGroups;
    struct Run {
      int groups, h;
      SmallHeads small;
      HeadPairs pairs;
    };
    std::vector<Run> runs;
    runs.push_back({kDefault, 128, SmallHeads::kDefault, HeadPairs::kCluster});
    for (int groups : {1, 2, 3, 6, 9})
      for (int h : {128, 64}) runs.push_back({groups, h, SmallHeads::kDefault, HeadPairs::kSeparate});
    for (int h : {32, 16, 8}) {
      runs.push_back({kDefault, h, SmallHeads::kTransposed, HeadPairs::kSeparate});
      runs.push_back({kDefault, h, SmallHeads::kPadded, HeadPairs::kSeparate});
    }
    for (const Run& run : runs) {
      const double ms = median_ms(params_for(32768, run.h), reps, run.groups, run.small, run.pairs);
      const double tflops = tflops_at(run.h, ms);
      std::printf("%-10d %4d %7d %9.3f %8.1f %7.3f%s\n", run.groups, run.h, 32768, ms, tflops,
                  gemm.tflops > 0 ? tflops / gemm.tflops : 0.0,
                  run.h == 128 ? (run.pairs == HeadPairs::kCluster ? " cluster" : " separate")
                  : run.h >= 64                                      ? ""
                  : run.small == SmallHeads::kPadded                ? " padded"
                                                                    : " transposed");
    }
  }
  cudaFree(d_q);
  cudaFree(d_kv);
  cudaFree(d_idx);
  cudaFree(d_out);
  cudaFree(d_lse);
  cudaFree(d_max);
  return 0;
}
