// Host problems of the sparse MLA CPU tests: e4m3 inputs and sentinel-filled outputs bound into a
// SparseMlaParams, the hand-computed case and random cases (tests/sparse_mla/reference_test.cpp,
// tests/tools/sampled_mla_reference_test.cpp).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <ostream>
#include <vector>

#include "fp8dsa/fp8.h"
#include "fp8dsa/sparse_mla.h"
#include "tools/random_inputs.h"

namespace fp8dsa::mla_host {

constexpr int kDqk = 576;
constexpr int kDv = 512;
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr uint16_t kOutSentinel = 0x1234;  // bf16 bits the reference must not write
constexpr float kLseSentinel = -999.0f;

// Host buffers of one problem; `params` points into them.
struct Problem {
  std::vector<uint8_t> q, kv;
  std::vector<int32_t> indices, topk_length;
  std::vector<float> sink, lse, max_logits;
  std::vector<uint16_t> out;
  SparseMlaParams params;

  void bind() {
    params.q = q.data();
    params.kv = kv.data();
    params.indices = indices.data();
    params.topk_length = topk_length.empty() ? nullptr : topk_length.data();
    params.attn_sink = sink.empty() ? nullptr : sink.data();
    params.out = out.data();
    params.lse = lse.data();
    params.max_logits = max_logits.data();
  }
  // Output buffers sized for the (possibly padded) strides, filled with sentinels.
  void reset_outputs() {
    const SparseMlaParams r = params.resolved();
    out.assign(static_cast<size_t>(r.num_tokens * r.out_token_stride), kOutSentinel);
    lse.assign(static_cast<size_t>(r.num_tokens * r.num_heads), kLseSentinel);
    max_logits.assign(static_cast<size_t>(r.num_tokens * r.num_heads), kLseSentinel);
    bind();
  }
  double out_at(int64_t t, int h, int c) const {
    const SparseMlaParams r = params.resolved();
    return bf16_to_float(out[t * r.out_token_stride + h * r.out_head_stride + c]);
  }
};

// Hand case: h = 8, N = 4, topk = 64, sm_scale = L = f32(ln 2), q_scale = 2, kv_scale = 0.5, so
// s_j = L * dot and exp(s_j) ~= 2^dot.
//   q[t, h, 0] = 1 for every head; heads 4..7 also have q[t, h, 575] = 1 (rope column).
//   kv[j, 0] = j (V column 0 too), kv[j, 575] = 1, kv[j, 1] = {1, -2, 4, 0.5}[j],
//   kv[j, 511] = {0.25, 0.25, -1, 8}[j]; every other column 0.
// Keys {0, 1, 2}: weights 1 : 2 : 4 of 7; lse = ln 7 (+ L on heads 4..7, whose rope adds 1 to each
// dot); out = 0.5 * (sum_j w_j v_j) / 7: column 0 = 0.5 * 10/7, column 1 = 0.5 * 13/7,
// column 511 = 0.5 * -3.25/7.
constexpr int kHandHeads = 8;
constexpr int kHandTopk = 64;
inline const float kL = static_cast<float>(std::log(2.0));

inline Problem hand_problem(const std::vector<std::vector<int32_t>>& rows) {
  Problem pr;
  const int64_t T = static_cast<int64_t>(rows.size());
  std::vector<float> qf(static_cast<size_t>(T * kHandHeads * kDqk), 0.0f);
  for (int64_t t = 0; t < T; ++t) {
    for (int h = 0; h < kHandHeads; ++h) {
      qf[(t * kHandHeads + h) * kDqk + 0] = 1.0f;
      if (h >= 4) qf[(t * kHandHeads + h) * kDqk + 575] = 1.0f;
    }
  }
  std::vector<float> kvf(4 * kDqk, 0.0f);
  const float v1[4] = {1.0f, -2.0f, 4.0f, 0.5f};
  const float v511[4] = {0.25f, 0.25f, -1.0f, 8.0f};
  for (int j = 0; j < 4; ++j) {
    kvf[j * kDqk + 0] = static_cast<float>(j);
    kvf[j * kDqk + 1] = v1[j];
    kvf[j * kDqk + 511] = v511[j];
    kvf[j * kDqk + 575] = 1.0f;
  }
  pr.q.resize(qf.size());
  pr.kv.resize(kvf.size());
  floats_to_e4m3(qf.data(), pr.q.data(), qf.size());
  floats_to_e4m3(kvf.data(), pr.kv.data(), kvf.size());
  pr.indices.assign(static_cast<size_t>(T * kHandTopk), -1);
  for (int64_t t = 0; t < T; ++t) {
    std::copy(rows[t].begin(), rows[t].end(), pr.indices.begin() + t * kHandTopk);
  }
  SparseMlaParams& p = pr.params;
  p.num_tokens = T;
  p.num_kv = 4;
  p.num_heads = kHandHeads;
  p.topk = kHandTopk;
  p.sm_scale = kL;
  p.q_scale = 2.0f;
  p.kv_scale = 0.5f;
  pr.reset_outputs();
  return pr;
}

struct Case {
  int h;
  int64_t N;
  int topk;
  int64_t T;
  bool sink;
  bool scaled;   // q_scale / kv_scale != 1
  bool lengths;  // topk_length given
};

// Readable test names in ctest ("h=8 N=95 topk=128 T=3 sink scaled lengths"), not the struct's bytes.
inline void PrintTo(const Case& c, std::ostream* os) {
  *os << "h=" << c.h << " N=" << c.N << " topk=" << c.topk << " T=" << c.T << (c.sink ? " sink" : "")
      << (c.scaled ? " scaled" : "") << (c.lengths ? " lengths" : "");
}

inline Problem random_problem(const Case& c, uint64_t seed) {
  Problem pr;
  pr.q = tools::random_e4m3(static_cast<size_t>(c.T * c.h * kDqk), seed, -2.0f, 2.0f);
  pr.kv = tools::random_e4m3(static_cast<size_t>(c.N * kDqk), seed + 1, -2.0f, 2.0f);
  // Distinct keys where they fit; otherwise (topk > N) duplicates, as FlashMLA allows.
  pr.indices = tools::random_indices(c.T, c.topk, c.N, seed + 2, 0.15, c.topk <= c.N);
  if (c.lengths) {
    tools::Random rng(seed + 3);
    for (int64_t t = 0; t < c.T; ++t) {
      pr.topk_length.push_back(t == 0 ? c.topk : static_cast<int32_t>(rng.uniform_int(0, c.topk)));
    }
  }
  if (c.sink) {
    pr.sink = tools::random_f32(static_cast<size_t>(c.h), seed + 4, -3.0f, 3.0f);
    pr.sink[0] = -INFINITY;
    pr.sink[1] = INFINITY;
  }
  SparseMlaParams& p = pr.params;
  p.num_tokens = c.T;
  p.num_kv = c.N;
  p.num_heads = c.h;
  p.topk = c.topk;
  p.sm_scale = 1.0f / std::sqrt(192.0f);
  p.q_scale = c.scaled ? 1.5f : 1.0f;
  p.kv_scale = c.scaled ? 0.75f : 1.0f;
  pr.reset_outputs();
  return pr;
}

}  // namespace fp8dsa::mla_host
