// The sparse MLA CPU reference against hand-computed softmax cases and an independent online-softmax
// formula (the SPEC 6 check and the sampled reference of tools/: tests/tools).
#include <gtest/gtest.h>

#include <climits>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <ostream>
#include <vector>

#include "common/memory_limit.h"
#include "common/mla_host_problem.h"
#include "tools/metrics.h"
#include "tools/random_inputs.h"
#include "tools/sampled_mla_reference.h"
#include "fp8dsa/fp8.h"
#include "fp8dsa/sparse_mla.h"
#include "sparse_mla/reference_cpu.h"

namespace fp8dsa {
namespace {

using namespace mla_host;

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

// A NaN score (q of token 0, head 3) makes that row's out, lse and max_logits NaN, never the
// no-valid-key marker; the other rows are unchanged.
TEST(SparseMlaReference, NanScoreMakesItsRowNan) {
  Problem pr = hand_problem({{0, 1, 2}, {0, 1, 2}});
  pr.q[(0 * kHandHeads + 3) * kDqk + 7] = 0x7f;  // e4m3 NaN
  ASSERT_TRUE(reference::sparse_mla_cpu(pr.params).is_ok());
  EXPECT_TRUE(std::isnan(pr.lse[3]));
  EXPECT_TRUE(std::isnan(pr.max_logits[3]));
  for (int c = 0; c < kDv; ++c) ASSERT_TRUE(std::isnan(pr.out_at(0, 3, c))) << c;
  for (int64_t t = 0; t < 2; ++t)
    for (int h = 0; h < kHandHeads; ++h)
      if (t != 0 || h != 3) expect_row(pr, t, h, 0.5 * 10 / 7, 0.5 * 13 / 7, 0.5 * -3.25 / 7, std::log(7.0), 2 * kL);
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

}  // namespace
}  // namespace fp8dsa
