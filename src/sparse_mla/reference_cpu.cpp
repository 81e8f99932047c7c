// The sparse MLA reference (SPEC 4): f64 on the dequantised inputs, exact two-pass softmax. It
// dequantises only what it reads: q row by row, and the kv rows that some token selects. Both kv
// formats dequantise exactly in f64: e4m3 as is, a V3.2 row as e4m3 * its block's f32 scale (a
// 4-bit by 24-bit product) and bf16 rope values.
#include "sparse_mla/reference_cpu.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <utility>

#include "core/no_throw.h"
#include "core/parallel_for.h"
#include "core/reference_math.h"
#include "fp8dsa/fp8.h"

namespace fp8dsa::reference {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr const char* kOp = "sparse_mla reference";

// One (token, head) row's results. out points at d_v values (zeros for a row with no valid key).
struct RowResult {
  const double* out;
  double lse;         // +inf for a row with no valid key
  double max_logits;  // -inf for a row with no valid key
  double score_std;   // 0 for a row with no valid key
  double max_abs_score;
};

// The kv rows the selection reads, dequantised once: only those (a token attends over at most
// topk rows, so a large cache is never copied whole), packed in ascending row order.
struct SelectedRows {
  std::vector<int32_t> rows;  // the distinct valid kv rows, ascending
  std::vector<double> values;  // [rows.size(), d_qk]
  const double* row(int32_t position, int64_t d_qk) const { return values.data() + position * d_qk; }
};

// Row n of the cache as its d_qk values.
void dequantize_kv_row(const SparseMlaParams& p, int64_t n, double* values) {
  const uint8_t* row = static_cast<const uint8_t*>(p.kv) + n * p.kv_row_stride;
  if (p.kv_format == KvFormat::kE4m3) {
    for (int64_t c = 0; c < p.d_qk; ++c) values[c] = load_element(row, p.kv_dtype, c);
    return;
  }
  constexpr int kNope = kV32ScaleOffset;  // one e4m3 byte per nope column, then the scales
  float scales[kNope / kV32ScaleBlock];
  std::memcpy(scales, row + kV32ScaleOffset, sizeof(scales));
  for (int c = 0; c < kNope; ++c) values[c] = double{e4m3_to_float(row[c])} * double{scales[c / kV32ScaleBlock]};
  for (int c = kNope; c < p.d_qk; ++c) {
    uint16_t bits;
    std::memcpy(&bits, row + kV32RopeOffset + 2 * (c - kNope), sizeof(bits));
    values[c] = bf16_to_float(bits);
  }
}

// Computes every (token, head) row and hands it to sink(th, RowResult) (th = t * h + head), from
// several threads at once for distinct th.
template <typename Sink>
Status compute(const SparseMlaParams& p, Sink&& sink) {
  if (!is_float_dtype(p.q_dtype) || !is_float_dtype(p.kv_dtype)) {
    return invalid_argument(std::string(kOp) + ": unsupported dtypes q=" + dtype_name(p.q_dtype) +
                            " kv=" + dtype_name(p.kv_dtype));
  }
  const int64_t T = p.num_tokens;
  const int64_t N = p.num_kv;
  const int h = p.num_heads;
  const int64_t d_qk = p.d_qk;
  const int64_t d_v = p.d_v;

  // The valid keys of each token (duplicates kept), as kv rows first and positions in `selected`
  // after; topk_length clamped to [0, topk] (see sparse_mla.h).
  std::vector<std::vector<int32_t>> valid(static_cast<size_t>(T));
  parallel_for(0, T, [&](int64_t t) {
    int64_t length = p.topk;
    if (p.topk_length != nullptr) length = std::clamp<int64_t>(p.topk_length[t], 0, p.topk);
    const int32_t* row = p.indices + t * p.indices_stride;
    for (int64_t j = 0; j < length; ++j) {
      if (row[j] >= 0 && row[j] < N) valid[t].push_back(row[j]);
    }
  });
  SelectedRows selected;
  for (const std::vector<int32_t>& keys : valid) selected.rows.insert(selected.rows.end(), keys.begin(), keys.end());
  std::sort(selected.rows.begin(), selected.rows.end());
  selected.rows.erase(std::unique(selected.rows.begin(), selected.rows.end()), selected.rows.end());
  selected.rows.shrink_to_fit();
  selected.values.resize(selected.rows.size() * static_cast<size_t>(d_qk));
  parallel_for(0, static_cast<int64_t>(selected.rows.size()), [&](int64_t i) {
    dequantize_kv_row(p, selected.rows[static_cast<size_t>(i)], selected.values.data() + i * d_qk);
  });
  parallel_for(0, T, [&](int64_t t) {
    for (int32_t& key : valid[t]) {
      key = static_cast<int32_t>(std::lower_bound(selected.rows.begin(), selected.rows.end(), key) -
                                 selected.rows.begin());
    }
  });

  const double scale = double{p.q_scale} * double{p.kv_scale} * double{p.sm_scale};
  parallel_for(0, T * h, [&](int64_t th) {
    const int64_t t = th / h, head = th % h;
    const std::vector<int32_t>& keys = valid[t];
    std::vector<double> out(static_cast<size_t>(d_v), 0.0);
    if (keys.empty()) {
      sink(th, RowResult{out.data(), kInf, -kInf, 0.0, 0.0});
      return;
    }
    // q is read once per (token, head): dequantised here, never copied whole.
    std::vector<double> q(static_cast<size_t>(d_qk));
    for (int64_t c = 0; c < d_qk; ++c) {
      q[c] = load_element(p.q, p.q_dtype, t * p.q_token_stride + head * p.q_head_stride + c);
    }
    std::vector<double> s(keys.size());
    double max_s = -kInf, sum_s = 0.0, max_abs = 0.0;
    bool nan_score = false;
    for (size_t j = 0; j < keys.size(); ++j) {
      s[j] = scale * dot_product(q.data(), selected.row(keys[j], d_qk), d_qk);
      nan_score = nan_score || std::isnan(s[j]);
      max_s = std::max(max_s, s[j]);
      sum_s += s[j];
      max_abs = std::max(max_abs, std::abs(s[j]));
    }
    // A NaN score (NaN in q or a selected kv row) makes the row's out, lse and max_logits NaN
    // (header): std::max would skip it.
    if (nan_score) max_s = std::numeric_limits<double>::quiet_NaN();
    const double mean_s = sum_s / static_cast<double>(keys.size());
    double var = 0.0;
    for (double x : s) var += (x - mean_s) * (x - mean_s);
    const double score_std = std::sqrt(var / static_cast<double>(keys.size()));
    double sum = 0.0;
    for (double& x : s) {
      x = std::exp(x - max_s);
      sum += x;
    }
    const double lse = max_s + std::log(sum);
    for (size_t j = 0; j < keys.size(); ++j) {
      const double* v = selected.row(keys[j], d_qk);
      for (int64_t c = 0; c < d_v; ++c) out[c] += s[j] * v[c];
    }
    // kv_scale / sum, times the sink factor exp(lse) / (exp(lse) + exp(sink)) = 1 / (1 + exp(sink - lse)):
    // a -inf sink gives 1, a +inf sink gives 0.
    double factor = double{p.kv_scale} / sum;
    if (p.attn_sink != nullptr) factor /= 1.0 + std::exp(double{p.attn_sink[head]} - lse);
    for (int64_t c = 0; c < d_v; ++c) out[c] *= factor;
    sink(th, RowResult{out.data(), lse, max_s, score_std, max_abs});
  });
  return Status::ok();
}

Status sparse_mla_cpu_unguarded(const SparseMlaParams& params) {
  FP8DSA_RETURN_IF_ERROR(validate(params));
  const SparseMlaParams p = params.resolved();
  const int h = p.num_heads;
  return compute(p, [&](int64_t th, const RowResult& r) {
    const int64_t t = th / h, head = th % h;
    uint16_t* out = static_cast<uint16_t*>(p.out) + t * p.out_token_stride + head * p.out_head_stride;
    for (int64_t c = 0; c < p.d_v; ++c) out[c] = float_to_bf16(static_cast<float>(r.out[c]));  // bf16 only (validate)
    p.lse[th] = static_cast<float>(r.lse);
    if (p.max_logits != nullptr) p.max_logits[th] = static_cast<float>(r.max_logits);
  });
}

// params validated with stand-ins for the outputs the f64 forms do not write, resolved.
Status validated_for_f64(const SparseMlaParams& params, SparseMlaParams* resolved) {
  alignas(256) static float unused_output[1];
  SparseMlaParams checked = params;
  if (checked.out == nullptr) checked.out = unused_output;
  if (checked.lse == nullptr) checked.lse = unused_output;
  FP8DSA_RETURN_IF_ERROR(validate(checked));
  *resolved = checked.resolved();
  return Status::ok();
}

// p: resolved; the compute() results into the f64 vectors (each may be null).
Status compute_f64(const SparseMlaParams& p, std::vector<double>* out, std::vector<double>* lse,
                   std::vector<double>* max_logits, SparseMlaScoreSpread* spread) {
  const size_t rows = static_cast<size_t>(p.num_tokens * p.num_heads);
  const size_t d_v = static_cast<size_t>(p.d_v);
  if (out != nullptr) out->assign(rows * d_v, 0.0);
  if (lse != nullptr) lse->assign(rows, kInf);
  if (max_logits != nullptr) max_logits->assign(rows, -kInf);
  if (spread != nullptr) {
    spread->std.assign(rows, 0.0);
    spread->max_abs.assign(rows, 0.0);
  }
  return compute(p, [&](int64_t th, const RowResult& r) {
    const size_t i = static_cast<size_t>(th);
    if (out != nullptr) std::copy(r.out, r.out + d_v, out->begin() + static_cast<std::ptrdiff_t>(i * d_v));
    if (lse != nullptr) (*lse)[i] = r.lse;
    if (max_logits != nullptr) (*max_logits)[i] = r.max_logits;
    if (spread != nullptr) {
      spread->std[i] = r.score_std;
      spread->max_abs[i] = r.max_abs_score;
    }
  });
}

Status sparse_mla_cpu_f64_unguarded(const SparseMlaParams& params, std::vector<double>* out,
                                    std::vector<double>* lse, std::vector<double>* max_logits,
                                    SparseMlaScoreSpread* spread) {
  SparseMlaParams p;
  FP8DSA_RETURN_IF_ERROR(validated_for_f64(params, &p));
  return compute_f64(p, out, lse, max_logits, spread);
}

Status sparse_mla_cpu_f64_unrounded_unguarded(const SparseMlaParams& params, const float* q_unrounded,
                                              const float* kv_unrounded, std::vector<double>* out,
                                              std::vector<double>* lse, std::vector<double>* max_logits) {
  SparseMlaParams p;
  FP8DSA_RETURN_IF_ERROR(validated_for_f64(params, &p));
  if (q_unrounded == nullptr || kv_unrounded == nullptr) {
    return invalid_argument(std::string(kOp) + ": the unrounded q and kv must not be null");
  }
  // The same problem over f32 values: q in q's element layout, kv rows of d_qk f32, no scales.
  p.q = q_unrounded;
  p.q_dtype = DType::kF32;
  p.q_scale = 1.0f;
  p.kv = kv_unrounded;
  p.kv_dtype = DType::kF32;
  p.kv_format = KvFormat::kE4m3;
  p.kv_row_stride = p.d_qk * static_cast<int64_t>(sizeof(float));
  p.kv_scale = 1.0f;
  return compute_f64(p, out, lse, max_logits, nullptr);
}

}  // namespace

Status sparse_mla_cpu(const SparseMlaParams& params) {
  return detail::no_throw(kOp, [&] { return sparse_mla_cpu_unguarded(params); });
}

Status sparse_mla_cpu_f64(const SparseMlaParams& params, std::vector<double>* out,
                          std::vector<double>* lse, std::vector<double>* max_logits,
                          SparseMlaScoreSpread* spread) {
  return detail::no_throw(kOp, [&] {
    return sparse_mla_cpu_f64_unguarded(params, out, lse, max_logits, spread);
  });
}

Status sparse_mla_cpu_f64_unrounded(const SparseMlaParams& params, const float* q_unrounded,
                                    const float* kv_unrounded, std::vector<double>* out,
                                    std::vector<double>* lse, std::vector<double>* max_logits) {
  return detail::no_throw(kOp, [&] {
    return sparse_mla_cpu_f64_unrounded_unguarded(params, q_unrounded, kv_unrounded, out, lse, max_logits);
  });
}

}  // namespace fp8dsa::reference
