// The sparse MLA reference (SPEC 4): f64 on the dequantised inputs, exact two-pass softmax.
#include "sparse_mla/reference_cpu.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <utility>

#include "core/reference_math.h"
#include "core/parallel_for.h"
#include "fp8dsa/fp8.h"

namespace fp8dsa::reference {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// Per (token, head) results, packed [T, h] and [T, h, d_v].
struct Results {
  std::vector<double> out;
  std::vector<double> lse;
  std::vector<double> max_logits;
  SparseMlaScoreSpread spread;
};

Status compute(const SparseMlaParams& p, Results* r) {
  if (!is_float_dtype(p.q_dtype) || !is_float_dtype(p.kv_dtype)) {
    return invalid_argument(std::string("sparse_mla reference: unsupported dtypes q=") +
                            dtype_name(p.q_dtype) + " kv=" + dtype_name(p.kv_dtype));
  }
  const int64_t T = p.num_tokens;
  const int64_t N = p.num_kv;
  const int h = p.num_heads;
  const int64_t d_qk = p.d_qk;
  const int64_t d_v = p.d_v;

  // Dequantise once, packed (strides applied here).
  std::vector<double> q(static_cast<size_t>(T * h * d_qk));
  std::vector<double> kv(static_cast<size_t>(N * d_qk));
  parallel_for(0, T * h, [&](int64_t th) {
    const int64_t t = th / h, head = th % h;
    for (int64_t c = 0; c < d_qk; ++c) {
      q[th * d_qk + c] = load_element(p.q, p.q_dtype, t * p.q_token_stride + head * p.q_head_stride + c);
    }
  });
  parallel_for(0, N, [&](int64_t n) {
    for (int64_t c = 0; c < d_qk; ++c) kv[n * d_qk + c] = load_element(p.kv, p.kv_dtype, n * p.kv_row_stride + c);
  });

  // The valid keys of each token (duplicates kept).
  std::vector<std::vector<int32_t>> valid(static_cast<size_t>(T));
  parallel_for(0, T, [&](int64_t t) {
    int64_t length = p.topk;
    if (p.topk_length != nullptr) length = std::clamp<int64_t>(p.topk_length[t], 0, p.topk);
    const int32_t* row = p.indices + t * p.indices_stride;
    for (int64_t j = 0; j < length; ++j) {
      if (row[j] >= 0 && row[j] < N) valid[t].push_back(row[j]);
    }
  });

  const double scale = double{p.q_scale} * double{p.kv_scale} * double{p.sm_scale};
  r->out.assign(static_cast<size_t>(T * h * d_v), 0.0);
  r->lse.assign(static_cast<size_t>(T * h), kInf);
  r->max_logits.assign(static_cast<size_t>(T * h), -kInf);
  r->spread.std.assign(static_cast<size_t>(T * h), 0.0);
  r->spread.max_abs.assign(static_cast<size_t>(T * h), 0.0);
  parallel_for(0, T * h, [&](int64_t th) {
    const std::vector<int32_t>& keys = valid[th / h];
    if (keys.empty()) return;  // out 0, lse +inf, max_logits -inf
    const double* q_th = q.data() + th * d_qk;
    std::vector<double> s(keys.size());
    double max_s = -kInf, sum_s = 0.0, max_abs = 0.0;
    for (size_t j = 0; j < keys.size(); ++j) {
      s[j] = scale * dot_product(q_th, kv.data() + keys[j] * d_qk, d_qk);
      max_s = std::max(max_s, s[j]);
      sum_s += s[j];
      max_abs = std::max(max_abs, std::abs(s[j]));
    }
    const double mean_s = sum_s / static_cast<double>(keys.size());
    double var = 0.0;
    for (double x : s) var += (x - mean_s) * (x - mean_s);
    r->spread.std[th] = std::sqrt(var / static_cast<double>(keys.size()));
    r->spread.max_abs[th] = max_abs;
    double sum = 0.0;
    for (double& x : s) {
      x = std::exp(x - max_s);
      sum += x;
    }
    const double lse = max_s + std::log(sum);
    double* out = r->out.data() + th * d_v;
    for (size_t j = 0; j < keys.size(); ++j) {
      const double* v = kv.data() + keys[j] * d_qk;
      for (int64_t c = 0; c < d_v; ++c) out[c] += s[j] * v[c];
    }
    // kv_scale / sum, times the sink factor exp(lse) / (exp(lse) + exp(sink)) = 1 / (1 + exp(sink - lse)):
    // a -inf sink gives 1, a +inf sink gives 0.
    double factor = double{p.kv_scale} / sum;
    if (p.attn_sink != nullptr) factor /= 1.0 + std::exp(double{p.attn_sink[th % h]} - lse);
    for (int64_t c = 0; c < d_v; ++c) out[c] *= factor;
    r->lse[th] = lse;
    r->max_logits[th] = max_s;
  });
  return Status::ok();
}

}  // namespace

Status sparse_mla_cpu(const SparseMlaParams& params) {
  FP8DSA_RETURN_IF_ERROR(validate(params));
  const SparseMlaParams p = params.resolved();
  Results r;
  FP8DSA_RETURN_IF_ERROR(compute(p, &r));
  const int h = p.num_heads;
  parallel_for(0, p.num_tokens * h, [&](int64_t th) {
    const int64_t t = th / h, head = th % h;
    const int64_t base = t * p.out_token_stride + head * p.out_head_stride;
    const double* src = r.out.data() + th * p.d_v;
    uint16_t* out = static_cast<uint16_t*>(p.out) + base;  // validate() admits bf16 only
    for (int64_t c = 0; c < p.d_v; ++c) out[c] = float_to_bf16(static_cast<float>(src[c]));
    if (p.lse != nullptr) p.lse[th] = static_cast<float>(r.lse[th]);
    if (p.max_logits != nullptr) p.max_logits[th] = static_cast<float>(r.max_logits[th]);
  });
  return Status::ok();
}

Status sparse_mla_cpu_f64(const SparseMlaParams& params, std::vector<double>* out,
                          std::vector<double>* lse, std::vector<double>* max_logits,
                          SparseMlaScoreSpread* spread) {
  // The f32/bf16 outputs are not used here; stand in dummies so that validate() checks the rest.
  alignas(256) static float unused_output[1];
  SparseMlaParams checked = params;
  if (checked.out == nullptr) checked.out = unused_output;
  if (checked.lse == nullptr) checked.lse = unused_output;
  FP8DSA_RETURN_IF_ERROR(validate(checked));
  Results r;
  FP8DSA_RETURN_IF_ERROR(compute(checked.resolved(), &r));
  if (out != nullptr) *out = std::move(r.out);
  if (lse != nullptr) *lse = std::move(r.lse);
  if (max_logits != nullptr) *max_logits = std::move(r.max_logits);
  if (spread != nullptr) *spread = std::move(r.spread);
  return Status::ok();
}

}  // namespace fp8dsa::reference
