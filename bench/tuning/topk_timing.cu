// Top-k launch-path timings for tuning (not the benchmark: fp8dsa_bench reports the official
// numbers). For each shape it times every candidate path of detail::topk with CUDA events (median of
// kIters launches over rotating input sets; an FP8DSA_TUNING build adds the register kernel's other
// shapes), checks that the paths agree with the chosen one, and
// times the CUB sort baseline (full rows). Then prefill's causal rows (row t of T sees [0, N - T + t
// + 1), as fp8dsa_bench's) at the register kernel's sizes and at 128K (the filter kernel's). Build:
// ninja fp8dsa_topk_timing; run with no arguments, or with `causal` for the causal shapes only.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include <cuda_runtime.h>

#include "tools/device_random.h"
#include "fp8dsa/topk.h"
#include "tools/timing.h"
#include "tool_support.h"
#include "topk/config.h"
#include "topk/launch.h"
#include "topk_baseline.h"

namespace {

constexpr int kTopk = 2048;
constexpr int kIters = 15;
constexpr int kWarmup = 3;

struct Shape {
  int64_t rows;
  int64_t keys;
  bool causal = false;  // row t sees [0, keys - rows + t + 1) (keys >= rows); else every key
};

struct Candidate {
  std::string name;
  fp8dsa::detail::topk::LaunchConfig config;
  bool sorted = false;
};

// Median milliseconds of launch(set) over rotating input sets (the benchmark's timing loop).
template <typename Launch>
float time_ms(int sets, Launch launch) {
  fp8dsa::tools::TimingConfig config;
  config.warmup = kWarmup;
  config.reps = kIters;
  fp8dsa::tools::Timing timing;
  FP8DSA_TOOL_CHECK_OK(fp8dsa::tools::time_launches(
      nullptr, sets, config,
      [&](int set) {
        launch(set);
        return fp8dsa::Status::ok();
      },
      &timing));
  return static_cast<float>(timing.median_ms);
}

// Rows whose index sets differ (order ignored).
int64_t differing_rows(const std::vector<int32_t>& a, const std::vector<int32_t>& b, int64_t rows) {
  int64_t bad = 0;
  for (int64_t r = 0; r < rows; ++r) {
    std::vector<int32_t> x(a.begin() + r * kTopk, a.begin() + (r + 1) * kTopk);
    std::vector<int32_t> y(b.begin() + r * kTopk, b.begin() + (r + 1) * kTopk);
    std::sort(x.begin(), x.end());
    std::sort(y.begin(), y.end());
    bad += x != y;
  }
  return bad;
}

std::vector<std::string> g_summary;

void run_shape(const Shape& shape, bool with_baseline) {
  using namespace fp8dsa;
  const size_t n = static_cast<size_t>(shape.rows) * shape.keys;
  const int sets = static_cast<int>(std::clamp<size_t>((size_t{400} << 20) / (n * 4) + 1, 2, 64));
  std::vector<float*> logits(sets);
  for (int s = 0; s < sets; ++s) {
    FP8DSA_TOOL_CHECK_CUDA(cudaMalloc(&logits[s], n * 4));
    FP8DSA_TOOL_CHECK_OK(fp8dsa::tools::fill_random_normal(logits[s], n, 1234 + s, 1.0f, nullptr));
  }
  int32_t *ks, *ke, *indices;
  FP8DSA_TOOL_CHECK_CUDA(cudaMalloc(&ks, shape.rows * 4));
  FP8DSA_TOOL_CHECK_CUDA(cudaMalloc(&ke, shape.rows * 4));
  FP8DSA_TOOL_CHECK_CUDA(cudaMalloc(&indices, shape.rows * kTopk * 4));
  std::vector<int32_t> zeros(shape.rows, 0), ends(shape.rows, static_cast<int32_t>(shape.keys));
  if (shape.causal) {
    for (int64_t t = 0; t < shape.rows; ++t) ends[t] = static_cast<int32_t>(shape.keys - shape.rows + t + 1);
  }
  double keys_read = 0.0;  // the rows' keys, for the GB/s
  for (const int32_t e : ends) keys_read += e;
  FP8DSA_TOOL_CHECK_CUDA(cudaMemcpy(ks, zeros.data(), shape.rows * 4, cudaMemcpyHostToDevice));
  FP8DSA_TOOL_CHECK_CUDA(cudaMemcpy(ke, ends.data(), shape.rows * 4, cudaMemcpyHostToDevice));

  TopkParams base;
  base.num_rows = shape.rows;
  base.num_keys = shape.keys;
  base.ks = ks;
  base.ke = ke;
  base.k = kTopk;
  base.indices = indices;
  base = base.resolved();
  const size_t ws_bytes = std::max<size_t>(topk_workspace_bytes(base), 256);
  FP8DSA_TOOL_CHECK_CUDA(cudaMalloc(&base.workspace, ws_bytes));
  base.workspace_bytes = ws_bytes;

  const detail::topk::LaunchConfig chosen = detail::topk::choose_launch(base);
  std::vector<Candidate> cands;
  cands.push_back({"chosen", chosen});
  cands.push_back({"chosen-sorted", chosen, true});
  // t512 with <= 12288 cached keys fits two CTAs per SM; the others run one.
  const std::pair<int, int64_t> rows_configs[] = {{1024, -1}, {1024, 0}, {512, -1}, {512, 0}, {512, 12288}, {512, 8192}};
  for (const auto& [threads, cache] : rows_configs) {
    detail::topk::LaunchConfig c;
    c.threads = threads;
    c.cache_keys = cache;
    cands.push_back({"row t" + std::to_string(threads) + " cache" + std::to_string(cache), c});
  }
  for (int threads : {256, 512}) {
    detail::topk::LaunchConfig c;
    c.filter = true;
    c.threads = threads;
    cands.push_back({"filter t" + std::to_string(threads), c});
  }
  for (const detail::topk::LaunchConfig& c : detail::topk::register_launch_configs(shape.keys)) {
    cands.push_back({detail::topk::register_config_name(c), c});
  }
  const int max_chunks = detail::topk::max_split_chunks(base);
  for (int chunks : {2, 4, 8, 16, 32, 64, 128, 264, 512}) {
    if (chunks > max_chunks) continue;
    detail::topk::LaunchConfig c;
    c.split = true;
    c.chunks = chunks;
    cands.push_back({"split x" + std::to_string(chunks), c});
  }

  std::vector<int32_t> reference;
  for (const Candidate& cand : cands) {
    TopkParams p = base;
    p.sorted = cand.sorted;
    auto launch = [&](int s) {
      p.logits = logits[s];
      const Status st = detail::topk::launch(p, cand.config);
      if (!st.is_ok()) {
        std::fprintf(stderr, "launch failed: %s\n", st.to_string().c_str());
        std::exit(1);
      }
    };
    FP8DSA_TOOL_CHECK_CUDA(cudaMemset(indices, 0xFF, shape.rows * kTopk * 4));
    launch(0);
    FP8DSA_TOOL_CHECK_CUDA(cudaDeviceSynchronize());
    std::vector<int32_t> got(shape.rows * kTopk);
    FP8DSA_TOOL_CHECK_CUDA(cudaMemcpy(got.data(), indices, got.size() * 4, cudaMemcpyDeviceToHost));
    int64_t bad = 0;
    if (reference.empty()) {
      reference = got;
    } else {
      bad = differing_rows(reference, got, shape.rows);
    }
    const float ms = time_ms(sets, launch);
    char line[256];
    std::snprintf(line, sizeof(line), "T=%-5lld N=%-8lld%s %-22s %8.4f ms  %7.1f GB/s  rows_differing=%lld",
                  static_cast<long long>(shape.rows), static_cast<long long>(shape.keys),
                  shape.causal ? " causal" : "", cand.name.c_str(),
                  ms, keys_read * 4.0 / (ms * 1e-3) / 1e9, static_cast<long long>(bad));
    std::printf("%s\n", line);
    std::fflush(stdout);
    const bool summary = cand.name.rfind("chosen", 0) == 0 || cand.name.rfind("filter", 0) == 0 ||
                         cand.name.rfind("registers", 0) == 0;
    if (summary) {
      g_summary.push_back(line);
    }
  }

  if (with_baseline) {
    const int rows = static_cast<int>(shape.rows), cols = static_cast<int>(shape.keys);
    const size_t cub_bytes = bench::cub_sort_topk_workspace_bytes(rows, cols, kTopk);
    void* cub_ws = nullptr;
    FP8DSA_TOOL_CHECK_CUDA(cudaMalloc(&cub_ws, cub_bytes));
    auto launch = [&](int s) {
      FP8DSA_TOOL_CHECK_CUDA(bench::cub_sort_topk(logits[s], cols, rows, cols, kTopk, indices, cub_ws, cub_bytes, nullptr));
    };
    launch(0);
    FP8DSA_TOOL_CHECK_CUDA(cudaDeviceSynchronize());
    std::vector<int32_t> got(shape.rows * kTopk);
    FP8DSA_TOOL_CHECK_CUDA(cudaMemcpy(got.data(), indices, got.size() * 4, cudaMemcpyDeviceToHost));
    const int64_t bad = differing_rows(reference, got, shape.rows);
    const float ms = time_ms(sets, launch);
    char line[256];
    std::snprintf(line, sizeof(line), "T=%-5lld N=%-8lld %-22s %8.4f ms  rows_differing=%lld",
                  static_cast<long long>(shape.rows), static_cast<long long>(shape.keys), "cub-sort baseline", ms,
                  static_cast<long long>(bad));
    std::printf("%s\n", line);
    g_summary.push_back(line);
    FP8DSA_TOOL_CHECK_CUDA(cudaFree(cub_ws));
  }
  for (float* l : logits) FP8DSA_TOOL_CHECK_CUDA(cudaFree(l));
  FP8DSA_TOOL_CHECK_CUDA(cudaFree(ks));
  FP8DSA_TOOL_CHECK_CUDA(cudaFree(ke));
  FP8DSA_TOOL_CHECK_CUDA(cudaFree(indices));
  FP8DSA_TOOL_CHECK_CUDA(cudaFree(base.workspace));
}

}  // namespace

int main(int argc, char** argv) {
  const bool causal_only = argc > 1 && std::string(argv[1]) == "causal";
  if (argc > 1 && !causal_only) {
    std::fprintf(stderr, "usage: %s [causal]\n", argv[0]);
    return 2;
  }
  if (!causal_only) {
    const Shape official[] = {{4096, 8192}, {4096, 16384}, {4096, 32768}, {8192, 65536}, {64, 131072}, {1, 1048576}};
    for (const Shape& s : official) run_shape(s, true);
    // The split / one-CTA switch point.
    const Shape sweep[] = {{1, 8192},   {64, 8192},   {1, 32768},   {8, 32768}, {64, 32768},
                           {1, 131072}, {16, 131072}, {8, 1048576}, {64, 1048576}};
    for (const Shape& s : sweep) run_shape(s, false);
  }
  const Shape causal[] = {{4096, 8192, true}, {4096, 16384, true}, {4096, 32768, true}, {4096, 131072, true}};
  for (const Shape& s : causal) run_shape(s, false);
  std::printf("\n==== summary (chosen path, median of %d) ====\n", kIters);
  for (const std::string& line : g_summary) std::printf("%s\n", line.c_str());
  return 0;
}
