// The sparse MLA CPU reference against hand-computed softmax cases and an independent online-softmax
// formula, plus the shared SPEC 6 check.
#include <gtest/gtest.h>

#include <climits>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <ostream>
#include <vector>

#include "common/memory_limit.h"
#include "tools/metrics.h"
#include "tools/random_inputs.h"
#include "tools/sampled_mla_reference.h"
#include "fp8dsa/fp8.h"
#include "fp8dsa/sparse_mla.h"
#include "sparse_mla/reference_cpu.h"

namespace fp8dsa {
namespace {

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
const float kL = static_cast<float>(std::log(2.0));

Problem hand_problem(const std::vector<std::vector<int32_t>>& rows) {
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

// Tolerances: f32(ln 2) differs from ln 2 by ~1e-8 relative; bf16 keeps 8 significant bits.
constexpr double kHandTol = 1e-6;
constexpr double kBf16Tol = 1.0 / 256;

void expect_row(const Problem& pr, int64_t t, int h, double c0, double c1, double c511, double lse,
                double max_logit) {
  const double scale = h >= 4 ? kL : 0.0;  // heads 4..7: every dot is 1 larger
  EXPECT_NEAR(pr.out_at(t, h, 0), c0, kBf16Tol * std::abs(c0) + 1e-30) << t << ", " << h;
  EXPECT_NEAR(pr.out_at(t, h, 1), c1, kBf16Tol * std::abs(c1) + 1e-30) << t << ", " << h;
  EXPECT_NEAR(pr.out_at(t, h, 511), c511, kBf16Tol * std::abs(c511) + 1e-30) << t << ", " << h;
  EXPECT_EQ(pr.out_at(t, h, 2), 0.0);
  EXPECT_EQ(pr.out_at(t, h, 510), 0.0);
  EXPECT_NEAR(pr.lse[t * kHandHeads + h], lse + scale, kHandTol) << t << ", " << h;
  EXPECT_NEAR(pr.max_logits[t * kHandHeads + h], max_logit + scale, kHandTol) << t << ", " << h;
}

TEST(SparseMlaReference, HandComputedSoftmax) {
  // t0: keys 0, 1, 2 among every kind of invalid entry. t1: nothing valid. t2: key 1 twice.
  Problem pr = hand_problem({{0, -1, 1, INT_MIN, 2, 4, INT_MAX}, {-1, INT_MIN, 4, INT_MAX, 5}, {1, 1, 2}});
  ASSERT_TRUE(reference::sparse_mla_cpu(pr.params).is_ok());
  for (int h = 0; h < kHandHeads; ++h) {
    expect_row(pr, 0, h, 0.5 * 10 / 7, 0.5 * 13 / 7, 0.5 * -3.25 / 7, std::log(7.0), 2 * kL);
    // No valid key: out 0, lse +inf, max_logits -inf.
    for (int c = 0; c < kDv; ++c) EXPECT_EQ(pr.out[(1 * kHandHeads + h) * kDv + c], 0) << h << ", " << c;
    EXPECT_EQ(pr.lse[1 * kHandHeads + h], INFINITY);
    EXPECT_EQ(pr.max_logits[1 * kHandHeads + h], -INFINITY);
    // Duplicates count per appearance: weights 2 : 2 : 4 of 8 over keys 1, 1, 2.
    expect_row(pr, 2, h, 0.5 * 12 / 8, 0.5 * 8 / 8, 0.5 * -3 / 8, std::log(8.0), 2 * kL);
  }
}

TEST(SparseMlaReference, TopkLength) {
  // The same row {0, 1, 2, 3} with topk_length 2 (partial), 0, 64 (full) and 4.
  Problem pr = hand_problem({{0, 1, 2, 3}, {0, 1, 2, 3}, {0, 1, 2, 3}, {0, 1, 2, 3}});
  pr.topk_length = {2, 0, 64, 3};
  pr.bind();
  ASSERT_TRUE(reference::sparse_mla_cpu(pr.params).is_ok());
  for (int h = 0; h < kHandHeads; ++h) {
    expect_row(pr, 0, h, 0.5 * 2 / 3, 0.5 * -3 / 3, 0.5 * 0.75 / 3, std::log(3.0), kL);
    EXPECT_EQ(pr.lse[1 * kHandHeads + h], INFINITY);
    EXPECT_EQ(pr.max_logits[1 * kHandHeads + h], -INFINITY);
    EXPECT_EQ(pr.out_at(1, h, 0), 0.0);
    // Keys 0..3: weights 1 : 2 : 4 : 8 of 15.
    expect_row(pr, 2, h, 0.5 * 34 / 15, 0.5 * 17 / 15, 0.5 * 60.75 / 15, std::log(15.0), 3 * kL);
    expect_row(pr, 3, h, 0.5 * 10 / 7, 0.5 * 13 / 7, 0.5 * -3.25 / 7, std::log(7.0), 2 * kL);
  }
}

TEST(SparseMlaReference, TopkLengthOutsideZeroToTopkIsClamped) {
  // topk_length is not validated (on the GPU it lives in device memory): a negative length counts
  // as 0, one above topk as topk (sparse_mla.h).
  Problem pr = hand_problem({{0, 1, 2, 3}, {0, 1, 2, 3}, {0, 1, 2, 3}});
  pr.topk_length = {-5, kHandTopk + 1000, INT_MIN};
  pr.bind();
  ASSERT_TRUE(reference::sparse_mla_cpu(pr.params).is_ok());
  for (int h = 0; h < kHandHeads; ++h) {
    for (int t : {0, 2}) {
      EXPECT_EQ(pr.lse[t * kHandHeads + h], INFINITY) << t;
      EXPECT_EQ(pr.max_logits[t * kHandHeads + h], -INFINITY) << t;
      EXPECT_EQ(pr.out_at(t, h, 0), 0.0) << t;
    }
    expect_row(pr, 1, h, 0.5 * 34 / 15, 0.5 * 17 / 15, 0.5 * 60.75 / 15, std::log(15.0), 3 * kL);
  }
}

TEST(SparseMlaReference, RejectsAScaleProductOutsideF32) {
  // Each scale is finite, their product is not an f32: every score would be +-inf, and lse = +inf
  // is the "no valid key" marker.
  Problem pr = hand_problem({{0, 1, 2}});
  pr.params.sm_scale = 1e20f;
  pr.params.q_scale = 1e20f;
  const Status s = reference::sparse_mla_cpu(pr.params);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.to_string();
  EXPECT_NE(s.message().find("q_scale * kv_scale * sm_scale"), std::string::npos) << s.to_string();
  EXPECT_EQ(pr.lse[0], kLseSentinel);
}

TEST(SparseMlaReference, ReadsOnlyTheSelectedKvRows) {
  // One token selecting 64 of 262144 kv rows (151 MB of e4m3): the reference must not dequantise the
  // whole cache (1.2 GB of f64). The child's address space allows the inputs plus 320 MB.
  if (!testing::address_space_limit_supported()) GTEST_SKIP() << "no address-space cap under a sanitizer";
  constexpr int64_t kRows = 262144;
  Problem pr = hand_problem({{0, 1, 2}});
  pr.kv.assign(static_cast<size_t>(kRows * kDqk), 0);
  for (int j = 0; j < kHandTopk; ++j) pr.indices[j] = static_cast<int32_t>(j * 4099 % kRows);
  pr.params.num_kv = kRows;
  pr.bind();
  const testing::ChildResult child = testing::run_with_address_space_limit(size_t{320} << 20, [&] {
    return reference::sparse_mla_cpu(pr.params).is_ok() ? 0 : 1;
  });
  EXPECT_TRUE(child.exited && child.code == 0) << child.describe();
}

TEST(SparseMlaReference, OutOfMemoryIsAStatus) {
  // T = INT32_MAX tokens: the per-token key lists alone exceed the child's 64 MB of headroom. The
  // bad_alloc comes back as OutOfMemory (before the fix it escaped: the child aborted). The inputs
  // are never read: the allocation fails first.
  if (!testing::address_space_limit_supported()) GTEST_SKIP() << "no address-space cap under a sanitizer";
  Problem pr = hand_problem({{0, 1, 2}});
  pr.params.num_tokens = std::numeric_limits<int32_t>::max();
  const testing::ChildResult child = testing::run_with_address_space_limit(size_t{64} << 20, [&] {
    const Status public_call = reference::sparse_mla_cpu(pr.params);
    if (public_call.code() != StatusCode::kOutOfMemory) return 1;
    if (public_call.message() != "sparse_mla reference: out of host memory") return 2;
    std::vector<double> out;
    const Status f64_form = reference::sparse_mla_cpu_f64(pr.params, &out, nullptr, nullptr);
    return f64_form.code() == StatusCode::kOutOfMemory ? 0 : 3;
  });
  EXPECT_TRUE(child.exited && child.code == 0) << child.describe();
}

TEST(SparseMlaReference, AttentionSink) {
  // Heads 0..3 (no rope shift, lse = ln 7 on t0): sinks -inf (factor 1), +inf (factor 0),
  // 0 (factor 7 / (7 + 1)) and 3L (factor 7 / (7 + 8)). Heads 4..7: sink 0, lse = ln 7 + L
  // (factor 14 / 15). lse and max_logits do not change; t1 stays 0 / +inf / -inf.
  Problem pr = hand_problem({{0, 1, 2}, {-1}});
  pr.sink = {-INFINITY, INFINITY, 0.0f, 3 * kL, 0.0f, 0.0f, 0.0f, 0.0f};
  pr.bind();
  ASSERT_TRUE(reference::sparse_mla_cpu(pr.params).is_ok());
  const double factors[8] = {1.0, 0.0, 7.0 / 8, 7.0 / 15, 14.0 / 15, 14.0 / 15, 14.0 / 15, 14.0 / 15};
  for (int h = 0; h < kHandHeads; ++h) {
    const double f = factors[h];
    expect_row(pr, 0, h, f * 0.5 * 10 / 7, f * 0.5 * 13 / 7, f * 0.5 * -3.25 / 7, std::log(7.0), 2 * kL);
    EXPECT_EQ(pr.lse[1 * kHandHeads + h], INFINITY);
    EXPECT_EQ(pr.max_logits[1 * kHandHeads + h], -INFINITY);
    EXPECT_EQ(pr.out_at(1, h, 0), 0.0);
  }
  std::vector<double> out, lse, max_logits;
  ASSERT_TRUE(reference::sparse_mla_cpu_f64(pr.params, &out, &lse, &max_logits).is_ok());
  EXPECT_EQ(out[1 * kDv + 0], 0.0);  // +inf sink: exactly zero
  EXPECT_NEAR(out[2 * kDv + 0], 7.0 / 8 * 0.5 * 10 / 7, kHandTol);
  EXPECT_NEAR(lse[1], std::log(7.0), kHandTol);
}

TEST(SparseMlaReference, F64EntryPoint) {
  Problem pr = hand_problem({{0, 1, 2}, {}});
  std::vector<double> out, lse, max_logits;
  pr.params.out = nullptr;  // the f64 entry needs no f32 / bf16 outputs
  pr.params.lse = nullptr;
  ASSERT_TRUE(reference::sparse_mla_cpu_f64(pr.params, &out, &lse, &max_logits).is_ok());
  ASSERT_EQ(out.size(), size_t{2} * kHandHeads * kDv);
  ASSERT_EQ(lse.size(), size_t{2} * kHandHeads);
  EXPECT_NEAR(out[0], 0.5 * 10 / 7, kHandTol);
  EXPECT_NEAR(out[1], 0.5 * 13 / 7, kHandTol);
  EXPECT_NEAR(out[511], 0.5 * -3.25 / 7, kHandTol);
  EXPECT_NEAR(lse[0], std::log(7.0), kHandTol);
  EXPECT_NEAR(max_logits[0], 2 * kL, 1e-12);
  EXPECT_EQ(lse[kHandHeads], kInf);
  EXPECT_EQ(max_logits[kHandHeads], -kInf);
  EXPECT_TRUE(reference::sparse_mla_cpu_f64(pr.params, nullptr, &lse, nullptr).is_ok());
}

TEST(SparseMlaReference, RejectsInvalidParams) {
  Problem pr = hand_problem({{0, 1, 2}});
  pr.params.topk = 100;
  Status s = reference::sparse_mla_cpu(pr.params);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("topk"), std::string::npos) << s.to_string();
  EXPECT_EQ(pr.lse[0], kLseSentinel);
  pr.params.topk = kHandTopk;
  pr.params.sm_scale = 0.0f;
  EXPECT_FALSE(reference::sparse_mla_cpu(pr.params).is_ok());
  std::vector<double> lse;
  EXPECT_FALSE(reference::sparse_mla_cpu_f64(pr.params, nullptr, &lse, nullptr).is_ok());
}

// SPEC 4 restated with an online (one-pass) softmax on the strided e4m3 inputs: shares no code with
// the reference. Returns out[d_v], lse, max_logits for one (token, head).
struct NaiveRow {
  std::vector<double> out;
  double lse, max_logit;
};

NaiveRow naive_row(const SparseMlaParams& p, int64_t t, int h) {
  const SparseMlaParams r = p.resolved();
  const auto* q = static_cast<const uint8_t*>(r.q) + t * r.q_token_stride + h * r.q_head_stride;
  const auto* kv = static_cast<const uint8_t*>(r.kv);
  const int32_t* idx = r.indices + t * r.indices_stride;
  const int64_t length = r.topk_length ? std::min<int64_t>(std::max(r.topk_length[t], 0), r.topk) : r.topk;
  NaiveRow row{std::vector<double>(r.d_v, 0.0), -kInf, -kInf};
  double running_max = -kInf, running_sum = 0.0;
  for (int64_t j = 0; j < length; ++j) {
    if (idx[j] < 0 || idx[j] >= r.num_kv) continue;
    const uint8_t* key = kv + int64_t{idx[j]} * r.kv_row_stride;
    double dot = 0.0;
    for (int c = 0; c < r.d_qk; ++c) dot += double{e4m3_to_float(q[c])} * double{e4m3_to_float(key[c])};
    const double s = dot * r.q_scale * r.kv_scale * r.sm_scale;
    const double new_max = std::max(running_max, s);
    const double rescale = std::exp(running_max - new_max);
    const double weight = std::exp(s - new_max);
    running_sum = running_sum * rescale + weight;
    for (int c = 0; c < r.d_v; ++c) row.out[c] = row.out[c] * rescale + weight * e4m3_to_float(key[c]);
    running_max = new_max;
  }
  if (running_sum == 0.0) {
    row.lse = kInf;
    return row;
  }
  row.lse = running_max + std::log(running_sum);
  row.max_logit = running_max;
  double factor = r.kv_scale / running_sum;
  if (r.attn_sink) factor *= std::exp(row.lse) / (std::exp(row.lse) + std::exp(double{r.attn_sink[h]}));
  for (double& x : row.out) x *= factor;
  return row;
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
void PrintTo(const Case& c, std::ostream* os) {
  *os << "h=" << c.h << " N=" << c.N << " topk=" << c.topk << " T=" << c.T << (c.sink ? " sink" : "")
      << (c.scaled ? " scaled" : "") << (c.lengths ? " lengths" : "");
}

Problem random_problem(const Case& c, uint64_t seed) {
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

class SparseMlaReferenceShapes : public ::testing::TestWithParam<Case> {};

TEST_P(SparseMlaReferenceShapes, MatchesNaiveFormula) {
  const Case c = GetParam();
  const uint64_t seed = static_cast<uint64_t>(c.h * 7919 + c.N * 31 + c.topk + c.T);
  Problem pr = random_problem(c, seed);
  ASSERT_TRUE(reference::sparse_mla_cpu(pr.params).is_ok());
  std::vector<double> out, lse, max_logits;
  ASSERT_TRUE(reference::sparse_mla_cpu_f64(pr.params, &out, &lse, &max_logits).is_ok());

  // The public output is the rounding of the f64 one.
  for (size_t i = 0; i < out.size(); ++i) {
    ASSERT_EQ(pr.out[i], float_to_bf16(static_cast<float>(out[i]))) << i;
  }
  for (size_t i = 0; i < lse.size(); ++i) {
    ASSERT_EQ(pr.lse[i], static_cast<float>(lse[i])) << i;
    ASSERT_EQ(pr.max_logits[i], static_cast<float>(max_logits[i])) << i;
  }

  // Independent formula on a sample of heads (all of them when h is small).
  const int head_step = c.h <= 16 ? 1 : c.h / 8;
  for (int64_t t = 0; t < c.T; ++t) {
    for (int h = 0; h < c.h; h += head_step) {
      const NaiveRow row = naive_row(pr.params, t, h);
      const int64_t th = t * c.h + h;
      ASSERT_EQ(std::isinf(row.lse), std::isinf(lse[th])) << t << ", " << h;
      if (std::isinf(row.lse)) {
        EXPECT_EQ(max_logits[th], -kInf);
      } else {
        EXPECT_NEAR(lse[th], row.lse, 1e-9 * std::max(1.0, std::abs(row.lse))) << t << ", " << h;
        EXPECT_NEAR(max_logits[th], row.max_logit, 1e-9 * std::max(1.0, std::abs(row.max_logit)));
      }
      double err = 0.0, norm = 0.0;
      for (int d = 0; d < kDv; ++d) {
        err = std::max(err, std::abs(out[th * kDv + d] - row.out[d]));
        norm = std::max(norm, std::abs(row.out[d]));
      }
      EXPECT_LE(err, 1e-9 * std::max(norm, 1e-30)) << t << ", " << h;
    }
  }

  // And the bf16 output passes the SPEC 6 check against f64 (bf16 rounding only).
  tools::SparseMlaOutputs got;
  got.out = pr.out.data();
  got.lse = pr.lse.data();
  got.max_logits = pr.max_logits.data();
  const tools::SparseMlaCheck check = tools::check_sparse_mla(got, out, lse, max_logits, c.T, c.h, kDv);
  EXPECT_TRUE(check.passed) << check.description;
  EXPECT_LT(check.rel_l2, 5e-3) << check.description;
}

// SPEC 8 heads x (N, topk) at T in {1, 3}, with sinks, scales and topk_length mixed in.
INSTANTIATE_TEST_SUITE_P(
    Spec8, SparseMlaReferenceShapes,
    ::testing::Values(Case{8, 128, 128, 1, false, false, false}, Case{8, 95, 128, 3, true, true, true},
                      Case{8, 153, 256, 3, false, false, true}, Case{8, 32, 2048, 1, true, false, false},
                      Case{16, 128, 128, 3, true, true, false}, Case{16, 95, 128, 1, false, false, true},
                      Case{16, 153, 256, 1, true, false, false}, Case{16, 32, 2048, 3, false, true, true},
                      Case{64, 128, 128, 1, false, true, true}, Case{64, 95, 128, 3, false, false, false},
                      Case{64, 153, 256, 3, true, true, true}, Case{64, 32, 2048, 1, false, false, false},
                      Case{128, 128, 128, 3, true, false, true}, Case{128, 95, 128, 1, true, true, false},
                      Case{128, 153, 256, 1, false, false, false}, Case{128, 32, 2048, 3, true, true, true}));

TEST(SparseMlaReference, StridesDoNotChangeResults) {
  const Case c{16, 153, 256, 3, true, true, true};
  Problem packed = random_problem(c, 42);
  ASSERT_TRUE(reference::sparse_mla_cpu(packed.params).is_ok());

  // The same values in padded layouts: q_head_stride 640 > d_qk, kv rows of 592, index rows of
  // topk + 5, out heads of 520 and token rows 8 elements longer.
  constexpr int64_t kQHead = 640, kKvRow = 592, kOutHead = 520;
  const int64_t q_token = c.h * kQHead + 32, idx_stride = c.topk + 5, out_token = c.h * kOutHead + 8;
  Problem strided = packed;
  strided.q.assign(static_cast<size_t>(c.T * q_token), 0x7f);  // e4m3 NaN in the gaps: must not be read
  strided.kv.assign(static_cast<size_t>(c.N * kKvRow), 0x7f);
  strided.indices.assign(static_cast<size_t>(c.T * idx_stride), 0);  // valid index 0 in the gaps
  for (int64_t t = 0; t < c.T; ++t) {
    for (int h = 0; h < c.h; ++h) {
      std::copy_n(packed.q.begin() + (t * c.h + h) * kDqk, kDqk, strided.q.begin() + t * q_token + h * kQHead);
    }
    std::copy_n(packed.indices.begin() + t * c.topk, c.topk, strided.indices.begin() + t * idx_stride);
  }
  for (int64_t n = 0; n < c.N; ++n) {
    std::copy_n(packed.kv.begin() + n * kDqk, kDqk, strided.kv.begin() + n * kKvRow);
  }
  SparseMlaParams& p = strided.params;
  p.q_head_stride = kQHead;
  p.q_token_stride = q_token;
  p.kv_row_stride = kKvRow;
  p.indices_stride = idx_stride;
  p.out_head_stride = kOutHead;
  p.out_token_stride = out_token;
  strided.reset_outputs();
  ASSERT_TRUE(reference::sparse_mla_cpu(p).is_ok());

  for (int64_t t = 0; t < c.T; ++t) {
    for (int h = 0; h < c.h; ++h) {
      for (int64_t d = 0; d < kOutHead; ++d) {
        const uint16_t got = strided.out[t * out_token + h * kOutHead + d];
        if (d < kDv) {
          ASSERT_EQ(got, packed.out[(t * c.h + h) * kDv + d]) << t << ", " << h << ", " << d;
        } else {
          ASSERT_EQ(got, kOutSentinel) << "head padding written at " << t << ", " << h << ", " << d;
        }
      }
    }
    for (int64_t d = c.h * kOutHead; d < out_token; ++d) ASSERT_EQ(strided.out[t * out_token + d], kOutSentinel);
  }
  EXPECT_EQ(strided.lse, packed.lse);
  EXPECT_EQ(strided.max_logits, packed.max_logits);
}

TEST(SparseMlaReference, MaxLogitsOptional) {
  Problem pr = hand_problem({{0, 1, 2}});
  pr.params.max_logits = nullptr;
  ASSERT_TRUE(reference::sparse_mla_cpu(pr.params).is_ok());
  EXPECT_NEAR(pr.lse[0], std::log(7.0), kHandTol);
  EXPECT_EQ(pr.max_logits[0], kLseSentinel);
}

// DeepSeek-V3.2 rows. Each test builds a kDeepSeekV32 problem whose dequantised values are those of
// an e4m3-format problem (with power-of-two block scales, every product is again an e4m3 value),
// so the two must give bitwise the same outputs: the V3.2 reading is checked against the e4m3 one.
using BlockScale = std::function<float(int64_t row, int block)>;
constexpr int kBlocks = kDv / kV32ScaleBlock;

// pr (e4m3 format) with nope block b of kv row n multiplied by scale(n, b).
Problem scaled_columns(const Problem& pr, const BlockScale& scale) {
  Problem scaled = pr;
  const SparseMlaParams r = pr.params.resolved();
  for (int64_t n = 0; n < r.num_kv; ++n) {
    for (int c = 0; c < kDv; ++c) {
      uint8_t& bits = scaled.kv[n * r.kv_row_stride + c];
      const float x = e4m3_to_float(bits) * scale(n, c / kV32ScaleBlock);
      bits = float_to_e4m3(x);
      EXPECT_EQ(e4m3_to_float(bits), x) << "the test's scale leaves e4m3 at row " << n << ", column " << c;
    }
  }
  scaled.bind();
  return scaled;
}

// The kDeepSeekV32 form of pr (e4m3 format): q as bf16, each kv row's nope bytes with block scales
// scale(n, b), its rope as bf16, at kv_row_stride bytes (padding NaN in every type). Its dequantised
// kv is scaled_columns(pr, scale)'s.
Problem v32_form(const Problem& pr, const BlockScale& scale, int64_t kv_row_stride = kV32RowBytes) {
  Problem v = pr;
  const SparseMlaParams r = pr.params.resolved();
  SparseMlaParams& p = v.params;
  p.kv_format = KvFormat::kDeepSeekV32;
  p.q_dtype = DType::kBF16;
  p.kv_row_stride = kv_row_stride;
  std::vector<uint16_t> q(pr.q.size());  // every e4m3 value is a bf16 value; same element strides
  for (size_t i = 0; i < q.size(); ++i) q[i] = float_to_bf16(e4m3_to_float(pr.q[i]));
  v.q.resize(q.size() * sizeof(uint16_t));
  std::memcpy(v.q.data(), q.data(), v.q.size());
  v.kv.assign(static_cast<size_t>(r.num_kv * kv_row_stride), 0xFF);
  for (int64_t n = 0; n < r.num_kv; ++n) {
    const uint8_t* from = pr.kv.data() + n * r.kv_row_stride;
    uint8_t* row = v.kv.data() + n * kv_row_stride;
    std::copy_n(from, kDv, row);
    for (int b = 0; b < kBlocks; ++b) {
      const float s = scale(n, b);
      std::memcpy(row + kV32ScaleOffset + 4 * b, &s, 4);
    }
    for (int c = kDv; c < kDqk; ++c) {
      const uint16_t rope = float_to_bf16(e4m3_to_float(from[c]));
      std::memcpy(row + kV32RopeOffset + 2 * (c - kDv), &rope, 2);
    }
  }
  v.reset_outputs();
  return v;
}

// Both problems' public outputs and f64 results, bitwise.
void expect_same_results(Problem& a, Problem& b) {
  ASSERT_TRUE(reference::sparse_mla_cpu(a.params).is_ok());
  ASSERT_TRUE(reference::sparse_mla_cpu(b.params).is_ok());
  EXPECT_EQ(a.out, b.out);
  EXPECT_EQ(std::memcmp(a.lse.data(), b.lse.data(), a.lse.size() * sizeof(float)), 0);
  EXPECT_EQ(std::memcmp(a.max_logits.data(), b.max_logits.data(), a.max_logits.size() * sizeof(float)), 0);
  std::vector<double> out_a, out_b, lse_a, lse_b;
  ASSERT_TRUE(reference::sparse_mla_cpu_f64(a.params, &out_a, &lse_a, nullptr).is_ok());
  ASSERT_TRUE(reference::sparse_mla_cpu_f64(b.params, &out_b, &lse_b, nullptr).is_ok());
  EXPECT_TRUE(out_a == out_b);
  EXPECT_TRUE(lse_a == lse_b);
}

TEST(SparseMlaReferenceV32, UnitScalesMatchTheE4m3Format) {
  for (const Case& c : {Case{16, 153, 256, 3, true, true, true}, Case{128, 95, 128, 1, true, false, false}}) {
    Problem e4m3 = random_problem(c, 91);
    const BlockScale unit = [](int64_t, int) { return 1.0f; };
    Problem packed = v32_form(e4m3, unit);
    expect_same_results(e4m3, packed);
    Problem strided = v32_form(e4m3, unit, kV32RowBytes + 64);  // padding NaN: must not be read
    expect_same_results(e4m3, strided);
  }
}

TEST(SparseMlaReferenceV32, BlockScalesApplyToTheirColumns) {
  // Row n: scale 2 on block n % 4, 4 on block (n + 2) % 4, 1 on the other two.
  const Case c{16, 153, 256, 3, true, false, true};
  Problem e4m3 = random_problem(c, 92);
  const BlockScale scale = [](int64_t n, int b) {
    if (b == n % 4) return 2.0f;
    if (b == (n + 2) % 4) return 4.0f;
    return 1.0f;
  };
  Problem expected = scaled_columns(e4m3, scale);
  Problem v32 = v32_form(e4m3, scale);
  expect_same_results(expected, v32);
  Problem unscaled = v32_form(e4m3, [](int64_t, int) { return 1.0f; });
  ASSERT_TRUE(reference::sparse_mla_cpu(unscaled.params).is_ok());
  EXPECT_NE(unscaled.out, v32.out);  // the scales matter
}

TEST(SparseMlaReferenceV32, ZeroScaleBlocks) {
  // Scale 0 zeroes its block whatever the e4m3 bytes hold; row 7 has every nope block zero.
  const Case c{16, 153, 256, 3, false, false, false};
  Problem e4m3 = random_problem(c, 93);
  const BlockScale scale = [](int64_t n, int b) { return n == 7 || (n * 4 + b) % 5 == 0 ? 0.0f : 1.0f; };
  Problem expected = scaled_columns(e4m3, scale);
  Problem v32 = v32_form(e4m3, scale);
  expect_same_results(expected, v32);
}

TEST(SparseMlaReferenceV32, RopeKeepsBf16Precision) {
  // One token over keys 0 and 1. Non-zero are only q's first rope column (1 + 2^-6), the keys'
  // first rope values (1 + 2^-7 and 1) and column 0 of the V rows (+1 and -1). 1 + 2^-6 and
  // 1 + 2^-7 are bf16 values but not e4m3 ones (3 mantissa bits): rounded to e4m3, both scores would
  // be 1 and out 0.
  constexpr int h = 8;
  const double q_rope = 1.0 + std::ldexp(1.0, -6), key_rope = 1.0 + std::ldexp(1.0, -7);
  Problem pr;
  std::vector<uint16_t> q(h * kDqk, 0);
  for (int head = 0; head < h; ++head) q[head * kDqk + kDv] = float_to_bf16(static_cast<float>(q_rope));
  pr.q.resize(q.size() * 2);
  std::memcpy(pr.q.data(), q.data(), pr.q.size());
  pr.kv.assign(2 * kV32RowBytes, 0);
  const float one = 1.0f;
  for (int n = 0; n < 2; ++n) {
    uint8_t* row = pr.kv.data() + n * kV32RowBytes;
    row[0] = float_to_e4m3(n == 0 ? 1.0f : -1.0f);
    for (int b = 0; b < kBlocks; ++b) std::memcpy(row + kV32ScaleOffset + 4 * b, &one, 4);
    const uint16_t rope = float_to_bf16(static_cast<float>(n == 0 ? key_rope : 1.0));
    std::memcpy(row + kV32RopeOffset, &rope, 2);
  }
  pr.indices.assign(64, -1);
  pr.indices[0] = 0;
  pr.indices[1] = 1;
  SparseMlaParams& p = pr.params;
  p.kv_format = KvFormat::kDeepSeekV32;
  p.q_dtype = DType::kBF16;
  p.num_tokens = 1;
  p.num_kv = 2;
  p.num_heads = h;
  p.topk = 64;
  p.sm_scale = 1.0f;
  pr.reset_outputs();

  std::vector<double> out, lse, max_logits;
  ASSERT_TRUE(reference::sparse_mla_cpu_f64(p, &out, &lse, &max_logits).is_ok());
  const double s0 = q_rope * key_rope, s1 = q_rope;
  for (int head = 0; head < h; ++head) {
    EXPECT_EQ(max_logits[head], s0);  // exact: a 14-bit product
    EXPECT_NEAR(lse[head], std::log(std::exp(s0) + std::exp(s1)), 1e-12);
    EXPECT_NEAR(out[head * kDv], std::tanh((s0 - s1) / 2), 1e-12);  // (e^s0 - e^s1) / (e^s0 + e^s1)
    EXPECT_EQ(out[head * kDv + 1], 0.0);
  }
  ASSERT_TRUE(reference::sparse_mla_cpu(p).is_ok());
  EXPECT_EQ(pr.max_logits[0], static_cast<float>(s0));
  EXPECT_NEAR(pr.out_at(0, 0, 0), std::tanh((s0 - s1) / 2), kBf16Tol * std::tanh((s0 - s1) / 2));
}

// The shared check must catch what it claims to catch.
TEST(SparseMlaCheck, DetectsEachFailure) {
  Problem pr = hand_problem({{0, 1, 2}, {-1}});
  ASSERT_TRUE(reference::sparse_mla_cpu(pr.params).is_ok());
  std::vector<double> out, lse, max_logits;
  ASSERT_TRUE(reference::sparse_mla_cpu_f64(pr.params, &out, &lse, &max_logits).is_ok());
  auto check = [&](const Problem& p) {
    tools::SparseMlaOutputs got;
    got.out = p.out.data();
    got.lse = p.lse.data();
    got.max_logits = p.max_logits.data();
    return tools::check_sparse_mla(got, out, lse, max_logits, 2, kHandHeads, kDv);
  };
  const tools::SparseMlaCheck good = check(pr);
  EXPECT_TRUE(good.passed) << good.description;
  EXPECT_EQ(good.empty_rows, kHandHeads);

  Problem bad = pr;
  bad.out[1] = float_to_bf16(bf16_to_float(bad.out[1]) * 1.5f);  // 50% off in one of three non-zeros
  EXPECT_FALSE(check(bad).passed);
  bad = pr;
  bad.lse[3] += 0.01f;
  EXPECT_EQ(check(bad).lse_failures, 1);
  bad = pr;
  bad.lse[kHandHeads] = 0.0f;  // an empty row must report +inf
  EXPECT_EQ(check(bad).convention_mismatches, 1);
  bad = pr;
  bad.out[kHandHeads * kDv + 7] = float_to_bf16(1e-3f);  // an empty row must be exactly 0
  EXPECT_EQ(check(bad).convention_mismatches, 1);
  bad = pr;
  bad.out[5] = 0x7fc0;  // NaN
  EXPECT_EQ(check(bad).non_finite_out, 1);
}

// The sampled-token reference checks exactly the tokens t % every == 0, in the run's out layout,
// with their own topk_length.
TEST(SampledMlaReference, ChecksTheSampledTokensOnly) {
  const Case c{16, 153, 256, 10, true, true, true};
  Problem pr = random_problem(c, 77);
  pr.params.out_token_stride = int64_t{c.h} * kDv + 8;
  pr.reset_outputs();
  ASSERT_TRUE(reference::sparse_mla_cpu(pr.params).is_ok());
  tools::SampledMlaReference ref;
  ASSERT_TRUE(ref.build(pr.params, 3).is_ok());
  EXPECT_EQ(ref.sampled_tokens(), 4);  // tokens 0, 3, 6, 9
  const auto check = [&](const Problem& p) { return ref.check(p.out.data(), p.lse.data(), p.max_logits.data()); };
  const tools::SparseMlaCheck good = check(pr);
  EXPECT_TRUE(good.passed) << good.description;
  EXPECT_LT(good.rel_l2, 5e-3) << good.description;

  const int64_t out_token = pr.params.out_token_stride;
  Problem bad = pr;
  bad.lse[1 * c.h + 2] += 1.0f;  // token 1 is not sampled
  for (int d = 0; d < kDv; ++d) bad.out[4 * out_token + d] = float_to_bf16(100.0f);
  EXPECT_TRUE(check(bad).passed);
  bad = pr;
  bad.lse[3 * c.h + 2] += 0.01f;  // token 3 is
  EXPECT_EQ(check(bad).lse_failures, 1);
  bad = pr;
  bad.max_logits[9 * c.h + 5] -= 0.01f;
  EXPECT_EQ(check(bad).lse_failures, 1);
  bad = pr;
  for (int d = 0; d < kDv; ++d) bad.out[6 * out_token + 2 * kDv + d] = float_to_bf16(100.0f);
  EXPECT_FALSE(check(bad).passed);
  EXPECT_FALSE(tools::SampledMlaReference().build(pr.params, 0).is_ok());
}

}  // namespace
}  // namespace fp8dsa
