// Does the scorer's epilogue change what the top-k selects? (Issue 56 item 2; not the benchmark.)
// At H = 64 the split epilogue (IndexerParams::split_epilogue) takes sum_h w relu(x) as
// (sum_h w x + sum_h w |x|) / 2, the first half on the tensor cores (indexer/config.h, kLinearSplit);
// its logits land a few 1e-4 of max|logit| from DeepGEMM's. For sampled rows of T = 4096 causal
// tokens this prints how many of the exact top-k (f64 logits, SPEC 1's reference) each f32 source
// selects as well:
//   ours       indexer_logits with its default (exact) epilogue;
//   ours split indexer_logits with split_epilogue (H = 64);
//   deepgemm   DeepGEMM's own logits of the same inputs (--deepgemm: its dump);
//   f32(exact) the f64 logits rounded to f32: what the best f32 output can reach (ties).
// Inputs: random (q, k e4m3 in +-1, w in [-1, 1), k_scale in [0.5, 1.5), as the benchmark's) and,
// with --deepgemm, DeepGEMM's dumped case.
//
//   fp8dsa_indexer_selection [--deepgemm=PATH] [--keys=32768,131072] [--heads=64] [--rows=64] [--k=2048]
//                            [--dir=DIR]
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <string>
#include <vector>

#include <cuda_runtime.h>

#include "deepgemm_anchor.h"
#include "fp8dsa/indexer.h"
#include "indexer/reference_cpu.h"
#include "tool_support.h"
#include "tools/device_buffer.h"
#include "tools/random_inputs.h"

namespace fp8dsa {
namespace {

constexpr int64_t kTokens = 4096;
constexpr int kDim = 128;

struct Case {
  std::string data;
  int64_t num_keys = 0;
  int num_heads = 0;
  std::vector<uint8_t> q, k;
  std::vector<float> k_scale, w;
  std::vector<int32_t> ks, ke;
  std::vector<float> deepgemm;  // [T, stride] DeepGEMM's logits, empty for random inputs
  int64_t deepgemm_stride = 0;
};

Case random_case(int64_t num_keys, int num_heads) {
  Case c;
  c.data = "random";
  c.num_keys = num_keys;
  c.num_heads = num_heads;
  c.q = tools::random_e4m3(static_cast<size_t>(kTokens * num_heads * kDim), 11 + num_keys);
  c.k = tools::random_e4m3(static_cast<size_t>(num_keys * kDim), 12 + num_keys);
  c.w = tools::random_f32(static_cast<size_t>(kTokens * num_heads), 13 + num_keys, -1.0f, 1.0f);
  c.k_scale = tools::random_f32(static_cast<size_t>(num_keys), 14 + num_keys, 0.5f, 1.5f);
  for (int64_t t = 0; t < kTokens; ++t) {
    c.ks.push_back(0);
    c.ke.push_back(static_cast<int32_t>(num_keys - kTokens + t + 1));
  }
  return c;
}

// The exact top-k's offsets of a row (f64 scores), and how many of them `got` (f32) also ranks in
// its own top k (ties of `got` at its k-th value counted as selected up to k in all).
template <typename T>
std::vector<int64_t> top_k(const T* row, int64_t len, int k) {
  std::vector<int64_t> idx(static_cast<size_t>(len));
  for (int64_t i = 0; i < len; ++i) idx[static_cast<size_t>(i)] = i;
  std::nth_element(idx.begin(), idx.begin() + (k - 1), idx.end(),
                   [&](int64_t a, int64_t b) { return row[a] > row[b] || (row[a] == row[b] && a < b); });
  idx.resize(static_cast<size_t>(k));
  std::sort(idx.begin(), idx.end());
  return idx;
}

int64_t overlap(const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
  std::vector<int64_t> both;
  std::set_intersection(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(both));
  return static_cast<int64_t>(both.size());
}

struct Agreement {
  int64_t rows = 0, identical = 0, sum = 0, worst = -1;
  void add(int64_t hits, int k) {
    ++rows;
    identical += hits == k;
    sum += hits;
    worst = worst < 0 ? hits : std::min(worst, hits);
  }
};

void run_case(const Case& c, int sampled_rows, int k) {
  const int64_t n = c.num_keys;
  const int h = c.num_heads;
  // Our logits on the device, in each epilogue.
  IndexerParams p;
  p.num_tokens = kTokens;
  p.num_keys = n;
  p.num_heads = h;
  p.head_dim = kDim;
  p.fill_masked = true;
  const int64_t logits_stride = min_logits_stride(n);
  p.logits_stride = logits_stride;
  tools::DeviceBuffer<uint8_t> q, kk;
  tools::DeviceBuffer<float> w, scale, logits;
  tools::DeviceBuffer<int32_t> ks, ke;
  FP8DSA_TOOL_CHECK_OK(q.upload(c.q));
  FP8DSA_TOOL_CHECK_OK(kk.upload(c.k));
  FP8DSA_TOOL_CHECK_OK(w.upload(c.w));
  FP8DSA_TOOL_CHECK_OK(scale.upload(c.k_scale));
  FP8DSA_TOOL_CHECK_OK(ks.upload(c.ks));
  FP8DSA_TOOL_CHECK_OK(ke.upload(c.ke));
  FP8DSA_TOOL_CHECK_OK(logits.allocate(static_cast<size_t>(kTokens * logits_stride)));
  p.q = q.get();
  p.k = kk.get();
  p.w = w.get();
  p.k_scale = scale.get();
  p.ks = ks.get();
  p.ke = ke.get();
  p.logits = logits.get();
  // Both epilogues (the split at H = 64 only), each into its own copy of the sampled rows below.
  std::vector<float> ours, ours_split;
  const int64_t r = sampled_rows;
  std::vector<int64_t> tokens;
  for (int i = 0; i < sampled_rows; ++i) tokens.push_back((2 * i + 1) * kTokens / (2 * sampled_rows));
  for (const bool split : {false, true}) {
    if (split && h != 64) break;
    p.split_epilogue = split;
    FP8DSA_TOOL_CHECK_OK(indexer_logits(p));
    FP8DSA_TOOL_CHECK_CUDA(cudaDeviceSynchronize());
    std::vector<float>& dst = split ? ours_split : ours;
    dst.resize(static_cast<size_t>(r * logits_stride));
    for (int64_t i = 0; i < r; ++i) {
      const int64_t t = tokens[static_cast<size_t>(i)];
      FP8DSA_TOOL_CHECK_CUDA(cudaMemcpy(dst.data() + i * logits_stride, logits.get() + t * logits_stride,
                                        sizeof(float) * static_cast<size_t>(logits_stride), cudaMemcpyDeviceToHost));
    }
  }

  // The sampled tokens, spread over T (the causal rows grow with t), their logits and the f64
  // reference of just those tokens.
  std::vector<uint8_t> q_s(static_cast<size_t>(r * h * kDim));
  std::vector<float> w_s(static_cast<size_t>(r * h));
  std::vector<int32_t> ks_s, ke_s;
  for (int64_t i = 0; i < r; ++i) {
    const int64_t t = tokens[static_cast<size_t>(i)];
    std::memcpy(q_s.data() + i * h * kDim, c.q.data() + t * h * kDim, static_cast<size_t>(h * kDim));
    std::memcpy(w_s.data() + i * h, c.w.data() + t * h, sizeof(float) * static_cast<size_t>(h));
    ks_s.push_back(c.ks[static_cast<size_t>(t)]);
    ke_s.push_back(c.ke[static_cast<size_t>(t)]);
  }
  IndexerParams hp = p;
  hp.num_tokens = r;
  hp.q = q_s.data();
  hp.k = c.k.data();
  hp.w = w_s.data();
  hp.k_scale = c.k_scale.data();
  hp.ks = ks_s.data();
  hp.ke = ke_s.data();
  hp.logits = nullptr;
  hp.logits_stride = 0;
  hp.fill_masked = false;
  std::vector<double> exact;
  FP8DSA_TOOL_CHECK_OK(reference::indexer_logits_cpu_f64(hp, &exact));

  Agreement a_ours, a_split, a_deepgemm, a_f32;
  double max_diff_ours = 0.0, max_diff_split = 0.0, max_diff_deepgemm = 0.0;
  for (int64_t i = 0; i < r; ++i) {
    const int64_t t = tokens[static_cast<size_t>(i)];
    const int64_t lo = std::clamp<int64_t>(c.ks[static_cast<size_t>(t)], 0, n);
    const int64_t hi = std::clamp<int64_t>(c.ke[static_cast<size_t>(t)], lo, n);
    const int64_t len = hi - lo;
    if (len <= k) continue;  // every key is selected
    const double* e = exact.data() + i * n + lo;
    const float* o = ours.data() + i * logits_stride + lo;
    double max_ref = 0.0;
    for (int64_t j = 0; j < len; ++j) max_ref = std::max(max_ref, std::fabs(e[j]));
    const std::vector<int64_t> want = top_k(e, len, k);
    a_ours.add(overlap(want, top_k(o, len, k)), k);
    if (!ours_split.empty()) {
      const float* o2 = ours_split.data() + i * logits_stride + lo;
      for (int64_t j = 0; j < len; ++j) max_diff_split = std::max(max_diff_split, std::fabs(o2[j] - e[j]) / max_ref);
      a_split.add(overlap(want, top_k(o2, len, k)), k);
    }
    std::vector<float> rounded(static_cast<size_t>(len));
    for (int64_t j = 0; j < len; ++j) {
      rounded[static_cast<size_t>(j)] = static_cast<float>(e[j]);
      max_diff_ours = std::max(max_diff_ours, std::fabs(o[j] - e[j]) / max_ref);
    }
    a_f32.add(overlap(want, top_k(rounded.data(), len, k)), k);
    if (!c.deepgemm.empty()) {
      const float* d = c.deepgemm.data() + t * c.deepgemm_stride + lo;
      for (int64_t j = 0; j < len; ++j) max_diff_deepgemm = std::max(max_diff_deepgemm, std::fabs(d[j] - e[j]) / max_ref);
      a_deepgemm.add(overlap(want, top_k(d, len, k)), k);
    }
  }
  auto print = [&](const char* source, const Agreement& a, double max_diff) {
    if (a.rows == 0) return;
    std::printf("selection T=%lld N=%lld H=%d k=%d data=%-8s %-10s rows %lld  mean overlap %.5f  worst %lld / %d  "
                "identical %lld  max|err|/max|logit| %.2e\n",
                static_cast<long long>(kTokens), static_cast<long long>(n), h, k, c.data.c_str(), source,
                static_cast<long long>(a.rows), static_cast<double>(a.sum) / (static_cast<double>(a.rows) * k),
                static_cast<long long>(a.worst), k, static_cast<long long>(a.identical), max_diff);
  };
  print("ours", a_ours, max_diff_ours);
  print("ours split", a_split, max_diff_split);
  print("deepgemm", a_deepgemm, max_diff_deepgemm);
  print("f32(exact)", a_f32, 0.0);
  std::fflush(stdout);
}

std::vector<int64_t> parse_list(const char* text) {
  std::vector<int64_t> out;
  for (const char* s = text; *s != '\0';) {
    char* end = nullptr;
    out.push_back(std::strtoll(s, &end, 10));
    s = *end == ',' ? end + 1 : end;
    if (end == s && *end != '\0') break;
  }
  return out;
}

}  // namespace
}  // namespace fp8dsa

int main(int argc, char** argv) {
  using namespace fp8dsa;
  std::string deepgemm, dir = "/tmp/fp8dsa_selection_dump";
  std::vector<int64_t> keys{32768, 131072};
  int heads = 64, rows = 64, k = 2048;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&](const char* name) { return a.rfind(name, 0) == 0 ? a.c_str() + std::strlen(name) : nullptr; };
    if (const char* v = value("--deepgemm=")) {
      deepgemm = v;
    } else if (const char* v = value("--keys=")) {
      keys = parse_list(v);
    } else if (const char* v = value("--heads=")) {
      heads = std::atoi(v);
    } else if (const char* v = value("--rows=")) {
      rows = std::atoi(v);
    } else if (const char* v = value("--k=")) {
      k = std::atoi(v);
    } else if (const char* v = value("--dir=")) {
      dir = v;
    } else {
      std::fprintf(stderr, "unknown argument %s\n", argv[i]);
      return 2;
    }
  }
  // The rest (heads, the shapes as a whole) is indexer_logits' to refuse, with its message.
  if (rows < 1 || rows > kTokens || k < 1 || k > 2048) {
    std::fprintf(stderr, "--rows must be in [1, %lld] and --k in [1, 2048] (given %d, %d)\n",
                 static_cast<long long>(kTokens), rows, k);
    return 2;
  }
  for (const int64_t n : keys) {
    if (n < kTokens || n > INT32_MAX) {
      std::fprintf(stderr, "--keys: each N must be in [%lld, 2^31 - 1] (T = %lld causal rows; given %lld)\n",
                   static_cast<long long>(kTokens), static_cast<long long>(kTokens), static_cast<long long>(n));
      return 2;
    }
  }
  for (const int64_t n : keys) {
    run_case(random_case(n, heads), rows, k);
    if (deepgemm.empty()) continue;
    bench::DeepgemmCase d;
    FP8DSA_TOOL_CHECK_OK(bench::dump_deepgemm_case(deepgemm, dir, kTokens, n, heads, &d));
    Case c;
    c.data = "deepgemm";
    c.num_keys = n;
    c.num_heads = heads;
    c.q = std::move(d.q);
    c.k = std::move(d.k);
    c.k_scale = std::move(d.k_scale);
    c.w = std::move(d.w);
    c.ks = std::move(d.ks);
    c.ke = std::move(d.ke);
    c.deepgemm = std::move(d.logits);
    c.deepgemm_stride = d.stride;
    run_case(c, rows, k);
  }
  return 0;
}
