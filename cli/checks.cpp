#include "checks.h"

#include <cstdio>

#include "tools/metrics.h"
#include "indexer/reference_cpu.h"
#include "sparse_mla/reference_cpu.h"

namespace fp8dsa::cli {
namespace {

// Rows [t * row, (t + 1) * row) of `all` for every sampled t, packed.
template <typename T>
std::vector<T> gather_rows(const std::vector<T>& all, const std::vector<int64_t>& tokens, size_t row) {
  std::vector<T> out;
  out.reserve(tokens.size() * row);
  for (int64_t t : tokens) {
    const auto first = all.begin() + static_cast<std::ptrdiff_t>(static_cast<size_t>(t) * row);
    out.insert(out.end(), first, first + static_cast<std::ptrdiff_t>(row));
  }
  return out;
}

std::string format_g(const char* label, double value) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%s %.2g", label, value);
  return buf;
}

std::string format_fixed(const char* label, double value) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%s %.6f", label, value);
  return buf;
}

CheckOutcome outcome(bool passed, size_t samples, std::string numbers, std::string detail) {
  CheckOutcome c;
  c.ran = true;
  c.passed = passed;
  c.summary = std::string(passed ? "pass" : "FAIL") + " (" + std::to_string(samples) + " tok, " + numbers + ")";
  c.detail = std::move(detail);
  return c;
}

}  // namespace

Status reference_logits(const HostProblem& problem, const std::vector<int64_t>& tokens,
                        std::vector<double>* logits) {
  const size_t heads = static_cast<size_t>(problem.options.index_heads);
  const std::vector<uint8_t> q = gather_rows(problem.index_q, tokens, heads * kIndexDim);
  const std::vector<float> w = gather_rows(problem.index_w, tokens, heads);
  const std::vector<int32_t> ks = gather_rows(problem.ks, tokens, 1);
  const std::vector<int32_t> ke = gather_rows(problem.ke, tokens, 1);
  IndexerParams params = problem.indexer_params();
  params.num_tokens = static_cast<int64_t>(tokens.size());
  params.q = q.data();
  params.w = w.data();
  params.ks = ks.data();
  params.ke = ke.data();
  return reference::indexer_logits_cpu_f64(params, logits);
}

CheckOutcome check_indexer(const HostProblem& problem, const SampledOutputs& got,
                           const std::vector<double>& ref_logits) {
  const std::vector<int32_t> ks = gather_rows(problem.ks, got.tokens, 1);
  const std::vector<int32_t> ke = gather_rows(problem.ke, got.tokens, 1);
  const tools::IndexerCheck c =
      tools::check_indexer_logits(got.logits.data(), problem.num_keys, ref_logits.data(),
                                    static_cast<int64_t>(got.tokens.size()), problem.num_keys, ks.data(), ke.data());
  const double rel = c.max_abs_ref > 0 ? c.max_abs_error / c.max_abs_ref : 0.0;
  return outcome(c.passed, got.tokens.size(), format_g("diff", c.diff) + ", " + format_g("max err/max", rel),
                 c.description);
}

CheckOutcome check_topk(const HostProblem& problem, const SampledOutputs& got) {
  // Top-k is exact over its input, the GPU's f32 logits; the f64 reference logits differ from them
  // in the last bits, which can legitimately swap keys at the selection boundary.
  const std::vector<double> scores(got.logits.begin(), got.logits.end());
  const std::vector<int32_t> ks = gather_rows(problem.ks, got.tokens, 1);
  const std::vector<int32_t> ke = gather_rows(problem.ke, got.tokens, 1);
  tools::TopkCheckOptions options;
  options.padding_at_end = false;  // SPEC 2 leaves the slot order free
  const int k = problem.options.topk;
  const tools::TopkCheck c =
      tools::check_topk(got.indices.data(), k, k, scores.data(), problem.num_keys,
                          static_cast<int64_t>(got.tokens.size()), problem.num_keys, ks.data(), ke.data(), options);
  return outcome(c.passed, got.tokens.size(), std::to_string(c.bad_rows) + " bad rows", c.description);
}

CheckOutcome check_attention(const HostProblem& problem, const SampledOutputs& got) {
  const size_t heads = static_cast<size_t>(problem.options.heads);
  const std::vector<uint8_t> q = gather_rows(problem.q, got.tokens, heads * kDimQk);
  SparseMlaParams params = problem.attention_params();
  params.num_tokens = static_cast<int64_t>(got.tokens.size());
  params.q = q.data();
  params.indices = got.indices.data();
  params.indices_stride = problem.options.topk;
  std::vector<double> out, lse, max_logits;
  const Status status = reference::sparse_mla_cpu_f64(params, &out, &lse, &max_logits);
  if (!status.is_ok()) return outcome(false, got.tokens.size(), "reference failed", status.to_string());
  tools::SparseMlaOutputs view;
  view.out = got.out.data();
  view.lse = got.lse.data();
  view.max_logits = got.max_logits.empty() ? nullptr : got.max_logits.data();
  const tools::SparseMlaCheck c = tools::check_sparse_mla(
      view, out, lse, max_logits, static_cast<int64_t>(got.tokens.size()), problem.options.heads, kDimV);
  return outcome(c.passed, got.tokens.size(),
                 format_g("rel L2", c.rel_l2) + ", " + format_fixed("cos", c.cosine) + ", " +
                     format_g("lse err", c.max_lse_error),
                 c.description);
}

}  // namespace fp8dsa::cli
