#include "tools/mla_workload.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <stdexcept>
#include <unordered_map>
#include <utility>

#include "core/parallel_for.h"
#include "fp8dsa/fp8.h"
#include "tools/counter_draws.h"

namespace fp8dsa::tools {
namespace {

constexpr int kDqk = 576;
constexpr int kSampleRows = 96;  // (token, head) rows the statistics and the calibration use

enum Stream : uint64_t { kMixing = 1, kKeyFactor, kTokenStep, kHeadFactor, kKeyNoise, kQueryNoise, kUniformPick };

struct Factors {
  int rank = 0;
  std::vector<float> mixing;  // A [576][rank]
  std::vector<float> key;     // u [N][rank]
  std::vector<float> token;   // v [T][rank], unit length
  std::vector<float> head;    // per-head perturbation [h][rank]
};

Factors make_factors(const MlaWorkloadSpec& s) {
  Factors f;
  const int r = f.rank = s.rank;
  f.mixing.resize(static_cast<size_t>(kDqk) * r);
  for (size_t i = 0; i < f.mixing.size(); ++i) f.mixing[i] = normal(s.seed, kMixing, i);
  f.key.resize(static_cast<size_t>(s.num_kv) * r);
  parallel_for(0, s.num_kv, [&](int64_t j) {
    for (int i = 0; i < r; ++i) f.key[j * r + i] = normal(s.seed, kKeyFactor, static_cast<uint64_t>(j * r + i));
  });
  f.token.resize(static_cast<size_t>(s.num_tokens) * r);
  std::vector<double> v(static_cast<size_t>(r));
  for (int64_t t = 0; t < s.num_tokens; ++t) {
    double norm = 0.0;
    for (int i = 0; i < r; ++i) {
      const double step = normal(s.seed, kTokenStep, static_cast<uint64_t>(t * r + i));
      v[i] = t == 0 ? step : v[i] + s.drift * std::sqrt(static_cast<double>(r)) * step;
      norm += v[i] * v[i];
    }
    norm = std::sqrt(norm);
    for (int i = 0; i < r; ++i) {
      v[i] /= norm;
      f.token[t * r + i] = static_cast<float>(v[i]);
    }
  }
  f.head.resize(static_cast<size_t>(s.num_heads) * r);
  for (size_t i = 0; i < f.head.size(); ++i) {
    f.head[i] = 0.7f * normal(s.seed, kHeadFactor, i) / std::sqrt(static_cast<float>(r));
  }
  return f;
}

float dot(const float* a, const float* b, int n) {
  float acc = 0.0f;
  for (int i = 0; i < n; ++i) acc += a[i] * b[i];
  return acc;
}

// Token t's uniform selection: min(topk, visible) distinct visible keys in the order drawn (a
// partial Fisher-Yates shuffle of [0, visible), its swaps kept in a map).
void select_uniform_keys(const MlaWorkloadSpec& s, int64_t t, int64_t visible, int64_t take, int32_t* row) {
  std::unordered_map<int64_t, int64_t> moved;
  const auto at = [&](int64_t i) {
    const auto it = moved.find(i);
    return it == moved.end() ? i : it->second;
  };
  for (int64_t i = 0; i < take; ++i) {
    const int64_t j = i + static_cast<int64_t>(draw(s.seed, kUniformPick, static_cast<uint64_t>(t * s.topk + i)) %
                                               static_cast<uint64_t>(visible - i));
    const int64_t picked = at(j);
    moved[j] = at(i);
    row[i] = static_cast<int32_t>(picked);
  }
  std::fill(row + take, row + s.topk, -1);
}

// Token t's selection: the min(topk, visible) visible keys of highest |u_j . v_t| + recency bonus
// (uniform selections: select_uniform_keys).
void select_keys(const MlaWorkloadSpec& s, const Factors& f, int64_t t, int32_t* row) {
  const int64_t position = s.num_kv - s.num_tokens + t;
  const int64_t visible = position + 1;
  const int64_t take = std::min<int64_t>(s.topk, visible);
  if (s.selection == MlaSelection::kUniform) return select_uniform_keys(s, t, visible, take, row);
  std::vector<std::pair<float, int32_t>> cand(static_cast<size_t>(visible));
  const float* v = f.token.data() + t * f.rank;
  for (int64_t j = 0; j < visible; ++j) {
    const float relevance = std::abs(dot(f.key.data() + j * f.rank, v, f.rank));
    const float bonus = position - j < s.local_window ? 3.0f : 0.0f;
    cand[static_cast<size_t>(j)] = {relevance + bonus, static_cast<int32_t>(j)};
  }
  const auto higher = [](const auto& a, const auto& b) {
    return a.first > b.first || (a.first == b.first && a.second < b.second);
  };
  std::nth_element(cand.begin(), cand.begin() + (take - 1), cand.end(), higher);
  std::sort(cand.begin(), cand.begin() + take, higher);
  for (int64_t i = 0; i < take; ++i) row[i] = cand[static_cast<size_t>(i)].second;
  std::fill(row + take, row + s.topk, -1);
}

// Row (t, h)'s query before quantisation, at scale 1: 0.8 A w_th + 0.6 noise, w_th = v_t + head_h.
void query_row(const MlaWorkloadSpec& s, const Factors& f, int64_t t, int h, float* out) {
  const int r = f.rank;
  std::vector<float> w(static_cast<size_t>(r));
  for (int i = 0; i < r; ++i) w[i] = f.token[t * r + i] + f.head[h * r + i];
  const uint64_t row = static_cast<uint64_t>(t * s.num_heads + h);
  for (int d = 0; d < kDqk; ++d) {
    out[d] = 0.8f * dot(f.mixing.data() + d * r, w.data(), r) +
             0.6f * normal(s.seed, kQueryNoise, row * kDqk + static_cast<uint64_t>(d));
  }
}

// Row (t, h)'s query before quantisation and scaling, by the spec's kind of values.
void unscaled_query_row(const MlaWorkloadSpec& s, const Factors& f, int64_t t, int h, float* out) {
  if (s.values == MlaValues::kRealistic) return query_row(s, f, t, h, out);
  const uint64_t row = static_cast<uint64_t>(t * s.num_heads + h);
  for (int d = 0; d < kDqk; ++d) {
    out[d] = s.values == MlaValues::kZeros ? 0.0f : normal(s.seed, kQueryNoise, row * kDqk + static_cast<uint64_t>(d));
  }
}

// Column d of kv row j before quantisation.
float kv_value(const MlaWorkloadSpec& s, const Factors& f, int64_t j, int d) {
  if (s.values == MlaValues::kZeros) return 0.0f;
  const float noise = normal(s.seed, kKeyNoise, static_cast<uint64_t>(j * kDqk + d));
  if (s.values == MlaValues::kRandom) return noise;
  const float scale = 1.0f / std::sqrt(static_cast<float>(f.rank));
  return 0.8f * scale * dot(f.mixing.data() + d * f.rank, f.key.data() + j * f.rank, f.rank) + 0.6f * noise;
}

struct RowStats {
  double std = 0.0, mean = 0.0, max_prob = 0.0;
};

// The scores of one row over its selected keys: q (dequantised or not) against the e4m3 kv rows.
RowStats row_stats(const MlaWorkloadSpec& s, const std::vector<uint8_t>& kv, const std::vector<int32_t>& indices,
                   int64_t t, const float* q) {
  static const std::vector<double> decode = [] {
    std::vector<double> table(256);
    for (int b = 0; b < 256; ++b) table[b] = e4m3_to_float(static_cast<uint8_t>(b));
    return table;
  }();
  std::vector<double> scores;
  for (int i = 0; i < s.topk; ++i) {
    const int32_t j = indices[static_cast<size_t>(t * s.topk + i)];
    if (j < 0) break;
    const uint8_t* row = kv.data() + static_cast<size_t>(j) * kDqk;
    double acc = 0.0;
    for (int d = 0; d < kDqk; ++d) acc += double{q[d]} * decode[row[d]];
    scores.push_back(acc * s.sm_scale);
  }
  RowStats st;
  if (scores.empty()) return st;
  const double n = static_cast<double>(scores.size());
  st.mean = std::accumulate(scores.begin(), scores.end(), 0.0) / n;
  double var = 0.0, mx = -INFINITY, sum = 0.0;
  for (double x : scores) {
    var += (x - st.mean) * (x - st.mean);
    mx = std::max(mx, x);
  }
  for (double x : scores) sum += std::exp(x - mx);
  st.std = std::sqrt(var / n);
  st.max_prob = 1.0 / sum;
  return st;
}

}  // namespace

std::string MlaWorkload::describe() const {
  char buf[160];
  std::snprintf(buf, sizeof(buf), "score std %.2f (mean %.2f), mean max prob %.2f, neighbour overlap %.2f", score_std,
                score_mean, mean_max_prob, neighbour_overlap);
  return buf;
}

const char* mla_values_name(MlaValues values) {
  switch (values) {
    case MlaValues::kRealistic: return "realistic";
    case MlaValues::kRandom: return "random";
    case MlaValues::kZeros: return "zeros";
  }
  return "?";
}

const char* mla_selection_name(MlaSelection selection) {
  switch (selection) {
    case MlaSelection::kRealistic: return "realistic";
    case MlaSelection::kUniform: return "uniform";
  }
  return "?";
}

MlaWorkload make_mla_workload(const MlaWorkloadSpec& s) {
  if (s.num_tokens < 1 || s.num_kv < s.num_tokens || s.num_heads < 1 || s.topk < 1 || s.rank < 1 ||
      !(s.score_std > 0.0) || !(s.sm_scale > 0.0f) || s.unrounded_every < 0) {
    throw std::invalid_argument(
        "make_mla_workload: need 1 <= T <= N, h, topk, rank >= 1, score_std and sm_scale > 0, unrounded_every >= 0");
  }
  const int64_t every = s.unrounded_every;
  const Factors f = make_factors(s);
  MlaWorkload w;
  w.spec = s;
  const int r = f.rank;

  w.kv.resize(static_cast<size_t>(s.num_kv) * kDqk);
  if (every > 0) w.kv_unrounded.resize(w.kv.size());
  parallel_for(0, s.num_kv, [&](int64_t j) {
    for (int d = 0; d < kDqk; ++d) {
      const float x = kv_value(s, f, j, d);
      const size_t i = static_cast<size_t>(j * kDqk + d);
      w.kv[i] = float_to_e4m3(x);
      if (every > 0) w.kv_unrounded[i] = x;
    }
  });
  w.indices.resize(static_cast<size_t>(s.num_tokens) * s.topk);
  parallel_for(0, s.num_tokens, [&](int64_t t) { select_keys(s, f, t, w.indices.data() + t * s.topk); });
  for (int32_t j : w.indices) w.valid_pairs += j >= 0;

  // The sample rows: tokens spread over the sequence, heads in turn.
  std::vector<std::pair<int64_t, int>> sample;
  for (int i = 0; i < kSampleRows; ++i) {
    sample.emplace_back(std::min<int64_t>(s.num_tokens - 1, (2 * i + 1) * s.num_tokens / (2 * kSampleRows)),
                        static_cast<int>((i * 7) % s.num_heads));
  }
  // Calibrate the query scale on unquantised rows (e4m3 rounding is nearly scale-free), then quantise.
  double std_at_unit = 0.0;
  for (const auto& [t, h] : sample) {
    std::vector<float> q(kDqk);
    unscaled_query_row(s, f, t, h, q.data());
    std_at_unit += row_stats(s, w.kv, w.indices, t, q.data()).std / kSampleRows;
  }
  const float q_scale = std_at_unit > 0.0 ? static_cast<float>(s.score_std / std_at_unit) : 0.0f;  // 0: zeros
  w.q.resize(static_cast<size_t>(s.num_tokens) * s.num_heads * kDqk);
  if (every > 0) w.q_unrounded.resize(static_cast<size_t>((s.num_tokens + every - 1) / every) * s.num_heads * kDqk);
  parallel_for(0, s.num_tokens * s.num_heads, [&](int64_t th) {
    std::vector<float> q(kDqk);
    const int64_t t = th / s.num_heads;
    unscaled_query_row(s, f, t, static_cast<int>(th % s.num_heads), q.data());
    for (int d = 0; d < kDqk; ++d) {
      const float x = q_scale * q[d];
      w.q[static_cast<size_t>(th * kDqk + d)] = float_to_e4m3(x);
      if (every > 0 && t % every == 0) {
        w.q_unrounded[static_cast<size_t>(((t / every) * s.num_heads + th % s.num_heads) * kDqk + d)] = x;
      }
    }
  });

  for (const auto& [t, h] : sample) {
    std::vector<float> q(kDqk);
    for (int d = 0; d < kDqk; ++d) q[d] = e4m3_to_float(w.q[static_cast<size_t>((t * s.num_heads + h) * kDqk + d)]);
    const RowStats st = row_stats(s, w.kv, w.indices, t, q.data());
    w.score_std += st.std / kSampleRows;
    w.score_mean += st.mean / kSampleRows;
    w.mean_max_prob += st.max_prob / kSampleRows;
    if (t + 1 < s.num_tokens) {
      const int32_t* a = w.indices.data() + t * s.topk;
      const int32_t* b = a + s.topk;
      std::vector<int32_t> next(b, b + s.topk);
      std::sort(next.begin(), next.end());
      int shared = 0, count = 0;
      for (int i = 0; i < s.topk && a[i] >= 0; ++i, ++count) {
        shared += std::binary_search(next.begin(), next.end(), a[i]);
      }
      w.neighbour_overlap += count > 0 ? static_cast<double>(shared) / count / kSampleRows : 0.0;
    }
  }
  return w;
}

SparseMlaParams mla_params(const MlaWorkload& w, int h) {
  if (h < 1 || h > w.spec.num_heads) throw std::invalid_argument("mla_params: need 1 <= h <= the workload's heads");
  SparseMlaParams p;
  p.num_tokens = w.spec.num_tokens;
  p.num_kv = w.spec.num_kv;
  p.num_heads = h;
  p.q = w.q.data();
  p.q_token_stride = int64_t{w.spec.num_heads} * kDqk;
  p.kv = w.kv.data();
  p.indices = w.indices.data();
  p.topk = w.spec.topk;
  p.sm_scale = w.spec.sm_scale;
  return p;
}

}  // namespace fp8dsa::tools
