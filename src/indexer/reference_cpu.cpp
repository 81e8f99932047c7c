// The indexer reference (SPEC 1): the spec in code. Inputs are dequantised exactly (every e4m3 and
// bf16 value is a double), the per-head dot products are exact in f64 (e4m3 products have at most
// 8 significant bits and D <= 128 of them fit in 53), and the head sum is an f64 sum.
#include "indexer/reference_cpu.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "core/reference_math.h"
#include "core/parallel_for.h"
#include "fp8dsa/fp8.h"

namespace fp8dsa::reference {
namespace {

// The clamped half-open key range of token t.
void key_range(const IndexerParams& p, int64_t t, int64_t* lo, int64_t* hi) {
  *lo = std::clamp<int64_t>(p.ks[t], 0, p.num_keys);
  *hi = std::clamp<int64_t>(p.ke[t], 0, p.num_keys);
  if (*hi < *lo) *hi = *lo;
}

// Dequantised, packed copies of q [T, H, D] and k [N, D] (strides applied once here).
struct DequantisedInputs {
  std::vector<double> q;
  std::vector<double> k;
};

DequantisedInputs dequantise(const IndexerParams& p) {
  DequantisedInputs in;
  const int64_t hd = int64_t{p.num_heads} * p.head_dim;
  in.q.resize(static_cast<size_t>(p.num_tokens * hd));
  in.k.resize(static_cast<size_t>(p.num_keys * p.head_dim));
  parallel_for(0, p.num_tokens, [&](int64_t t) {
    for (int64_t i = 0; i < hd; ++i) in.q[t * hd + i] = load_element(p.q, p.q_dtype, t * p.q_token_stride + i);
  });
  parallel_for(0, p.num_keys, [&](int64_t s) {
    for (int64_t i = 0; i < p.head_dim; ++i) {
      in.k[s * p.head_dim + i] = load_element(p.k, p.k_dtype, s * p.k_row_stride + i);
    }
  });
  return in;
}

// Scores token t against every key of its range; calls emit(s, logit) for each.
template <typename Emit>
void score_token(const IndexerParams& p, const DequantisedInputs& in, int64_t t, Emit&& emit) {
  int64_t lo, hi;
  key_range(p, t, &lo, &hi);
  const int64_t d = p.head_dim;
  const double* q_t = in.q.data() + t * p.num_heads * d;
  const float* w_t = p.w + t * p.w_token_stride;
  for (int64_t s = lo; s < hi; ++s) {
    const double* k_s = in.k.data() + s * d;
    double acc = 0.0;
    for (int h = 0; h < p.num_heads; ++h) {
      const double dot = dot_product(q_t + h * d, k_s, d);
      acc += static_cast<double>(w_t[h]) * std::max(dot, 0.0);
    }
    emit(s, static_cast<double>(p.k_scale[s]) * acc);
  }
}

Status check_dtypes(const IndexerParams& p) {
  if (!is_float_dtype(p.q_dtype) || !is_float_dtype(p.k_dtype)) {
    return invalid_argument(std::string("indexer reference: unsupported dtypes q=") +
                            dtype_name(p.q_dtype) + " k=" + dtype_name(p.k_dtype));
  }
  return Status::ok();
}

}  // namespace

Status indexer_logits_cpu(const IndexerParams& params) {
  FP8DSA_RETURN_IF_ERROR(validate(params));
  const IndexerParams p = params.resolved();
  FP8DSA_RETURN_IF_ERROR(check_dtypes(p));
  const DequantisedInputs in = dequantise(p);
  constexpr float kMasked = -std::numeric_limits<float>::infinity();
  parallel_for(0, p.num_tokens, [&](int64_t t) {
    float* row = p.logits + t * p.ldl;
    score_token(p, in, t, [&](int64_t s, double logit) { row[s] = static_cast<float>(logit); });
    if (p.fill_masked) {
      int64_t lo, hi;
      key_range(p, t, &lo, &hi);
      std::fill(row, row + lo, kMasked);
      std::fill(row + hi, row + p.num_keys, kMasked);
    }
  });
  return Status::ok();
}

Status indexer_logits_cpu_f64(const IndexerParams& params, std::vector<double>* logits) {
  if (logits == nullptr) return invalid_argument("indexer_logits_cpu_f64: logits vector is null");
  // The f32 output (logits, ldl) is not used here; stand in an aligned dummy so that validate()
  // checks everything else.
  alignas(256) static float unused_output;
  IndexerParams checked = params;
  checked.logits = &unused_output;
  checked.ldl = checked.num_keys >= 0 ? (checked.num_keys + 3) / 4 * 4 : 0;
  FP8DSA_RETURN_IF_ERROR(validate(checked));
  const IndexerParams p = checked.resolved();
  FP8DSA_RETURN_IF_ERROR(check_dtypes(p));
  const DequantisedInputs in = dequantise(p);
  logits->assign(static_cast<size_t>(p.num_tokens * p.num_keys),
                 -std::numeric_limits<double>::infinity());
  parallel_for(0, p.num_tokens, [&](int64_t t) {
    double* row = logits->data() + t * p.num_keys;
    score_token(p, in, t, [&](int64_t s, double logit) { row[s] = logit; });
  });
  return Status::ok();
}

}  // namespace fp8dsa::reference
