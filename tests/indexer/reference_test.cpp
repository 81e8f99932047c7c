// The indexer CPU reference against hand-computed logits and an independent naive formula.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <ostream>
#include <vector>

#include "common/memory_limit.h"
#include "tools/metrics.h"
#include "tools/random_inputs.h"
#include "fp8dsa/cancel.h"
#include "fp8dsa/fp8.h"
#include "fp8dsa/indexer.h"
#include "indexer/reference_cpu.h"

namespace fp8dsa {
namespace {

constexpr float kSentinel = 12345.0f;  // cells the reference must leave alone
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// SPEC 1 restated directly on the strided inputs, f32 dequant, f64 sums, no shared code.
double naive_logit(const IndexerParams& p, int64_t t, int64_t s) {
  const int64_t q_stride = p.q_token_stride ? p.q_token_stride : int64_t{p.num_heads} * p.head_dim;
  const int64_t w_stride = p.w_token_stride ? p.w_token_stride : p.num_heads;
  const int64_t k_stride = p.k_row_stride ? p.k_row_stride : p.head_dim;
  const auto* q = static_cast<const uint8_t*>(p.q);
  const auto* k = static_cast<const uint8_t*>(p.k);
  double sum = 0.0;
  for (int h = 0; h < p.num_heads; ++h) {
    double dot = 0.0;
    for (int i = 0; i < p.head_dim; ++i) {
      dot += double{e4m3_to_float(q[t * q_stride + h * p.head_dim + i])} *
             double{e4m3_to_float(k[s * k_stride + i])};
    }
    if (dot > 0) sum += double{p.w[t * w_stride + h]} * dot;
  }
  return double{p.k_scale[s]} * sum;
}

// Host buffers of one indexer problem with random inputs.
struct Problem {
  std::vector<uint8_t> q, k;
  std::vector<float> w, k_scale, logits;
  tools::KeyRanges ranges;
  IndexerParams params;
};

Problem make_problem(int64_t T, int64_t N, int H, int D, tools::KeyRanges ranges, uint64_t seed,
                     int64_t q_pad = 0, int64_t w_pad = 0, int64_t k_pad = 0, int64_t ldl_pad = 0) {
  Problem pr;
  const int64_t q_stride = int64_t{H} * D + q_pad;
  const int64_t w_stride = H + w_pad;
  const int64_t k_stride = D + k_pad;
  // Logit rows must be 16-byte aligned (validate), so odd N always gets a padded logits_stride.
  const int64_t logits_stride = min_logits_stride(N) + ldl_pad;
  pr.q = tools::random_e4m3(static_cast<size_t>(T * q_stride), seed, -4.0f, 4.0f);
  pr.k = tools::random_e4m3(static_cast<size_t>(N * k_stride), seed + 1, -4.0f, 4.0f);
  pr.w = tools::random_f32(static_cast<size_t>(T * w_stride), seed + 2, -1.0f, 1.0f);
  pr.k_scale = tools::random_f32(static_cast<size_t>(N), seed + 3, 0.01f, 2.0f);
  pr.logits.assign(static_cast<size_t>(T * logits_stride), kSentinel);
  pr.ranges = std::move(ranges);
  IndexerParams& p = pr.params;
  p.num_tokens = T;
  p.num_keys = N;
  p.num_heads = H;
  p.head_dim = D;
  p.q = pr.q.data();
  p.q_token_stride = q_pad ? q_stride : 0;
  p.w = pr.w.data();
  p.w_token_stride = w_pad ? w_stride : 0;
  p.k = pr.k.data();
  p.k_row_stride = k_pad ? k_stride : 0;
  p.k_scale = pr.k_scale.data();
  p.ks = pr.ranges.ks.data();
  p.ke = pr.ranges.ke.data();
  p.logits = pr.logits.data();
  p.logits_stride = logits_stride == N ? 0 : logits_stride;
  return pr;
}

// Hand-computed: H = 4, D = 64, three keys, e4m3-exact inputs.
//   q[0, 0] = 1, q[0, 1] = 0.5, q[0, 2] = -2 everywhere; q[0, 3] = 1 on the first 32 columns, 0 after.
//   k[0] = 1, k[1] = 0.5 (first 32) / -0.5 (last 32), k[2] = -1.
//   dots (h = 0..3):  key 0: 64, 32, -128, 32   key 1: 0, 0, 0, 16   key 2: -64, -32, 128, -32
//   token 0, w = {1, 2, 0.5, -1}:    key 0: 64 + 64 - 32 = 96, key 1: -16, key 2: 0.5 * 128 = 64
//   token 1 = token 0's q, w = 0.5:  key 1: 8, key 2: 64
//   k_scale = {0.25, 2, 1}: logits token 0 = {24, -32, 64}; token 1 over [1, 3) = {16, 64}.
struct HandCase {
  std::vector<uint8_t> q, k;
  std::vector<float> w = {1.0f, 2.0f, 0.5f, -1.0f, 0.5f, 0.5f, 0.5f, 0.5f};
  std::vector<float> k_scale = {0.25f, 2.0f, 1.0f};
  std::vector<int32_t> ks = {0, 1};
  std::vector<int32_t> ke = {3, 3};
  std::vector<float> logits = std::vector<float>(2 * 4, kSentinel);  // logits_stride 4
  IndexerParams params;

  HandCase() {
    constexpr int kH = 4, kD = 64;
    std::vector<float> qf(2 * kH * kD), kf(3 * kD);
    for (int t = 0; t < 2; ++t) {
      for (int i = 0; i < kD; ++i) {
        qf[(t * kH + 0) * kD + i] = 1.0f;
        qf[(t * kH + 1) * kD + i] = 0.5f;
        qf[(t * kH + 2) * kD + i] = -2.0f;
        qf[(t * kH + 3) * kD + i] = i < 32 ? 1.0f : 0.0f;
      }
    }
    for (int i = 0; i < kD; ++i) {
      kf[0 * kD + i] = 1.0f;
      kf[1 * kD + i] = i < 32 ? 0.5f : -0.5f;
      kf[2 * kD + i] = -1.0f;
    }
    q.resize(qf.size());
    k.resize(kf.size());
    floats_to_e4m3(qf.data(), q.data(), qf.size());
    floats_to_e4m3(kf.data(), k.data(), kf.size());
    params.num_tokens = 2;
    params.num_keys = 3;
    params.num_heads = kH;
    params.head_dim = kD;
    params.q = q.data();
    params.w = w.data();
    params.k = k.data();
    params.k_scale = k_scale.data();
    params.ks = ks.data();
    params.ke = ke.data();
    params.logits = logits.data();
    params.logits_stride = 4;
  }
};

TEST(IndexerReference, HandComputed) {
  HandCase c;
  ASSERT_TRUE(reference::indexer_logits_cpu(c.params).is_ok());
  EXPECT_EQ(c.logits[0], 24.0f);
  EXPECT_EQ(c.logits[1], -32.0f);
  EXPECT_EQ(c.logits[2], 64.0f);
  EXPECT_EQ(c.logits[3], kSentinel);  // row padding
  EXPECT_EQ(c.logits[4], kSentinel);  // outside token 1's range
  EXPECT_EQ(c.logits[5], 16.0f);
  EXPECT_EQ(c.logits[6], 64.0f);
  EXPECT_EQ(c.logits[7], kSentinel);
}

TEST(IndexerReference, HandComputedFillMasked) {
  HandCase c;
  c.params.fill_masked = true;
  ASSERT_TRUE(reference::indexer_logits_cpu(c.params).is_ok());
  EXPECT_EQ(c.logits[2], 64.0f);
  EXPECT_EQ(c.logits[3], kSentinel);  // padding past N is never written
  EXPECT_EQ(c.logits[4], kNegInf);
  EXPECT_EQ(c.logits[5], 16.0f);
  EXPECT_EQ(c.logits[7], kSentinel);
}

TEST(IndexerReference, HandComputedF64) {
  HandCase c;
  std::vector<double> ref;
  ASSERT_TRUE(reference::indexer_logits_cpu_f64(c.params, &ref).is_ok());
  ASSERT_EQ(ref.size(), 6u);
  EXPECT_EQ(ref[0], 24.0);
  EXPECT_EQ(ref[1], -32.0);
  EXPECT_EQ(ref[2], 64.0);
  EXPECT_EQ(ref[3], -std::numeric_limits<double>::infinity());
  EXPECT_EQ(ref[4], 16.0);
  EXPECT_EQ(ref[5], 64.0);
  // The f64 entry neither needs nor touches the f32 output.
  EXPECT_EQ(c.logits[0], kSentinel);
  c.params.logits = nullptr;
  EXPECT_TRUE(reference::indexer_logits_cpu_f64(c.params, &ref).is_ok());
}

TEST(IndexerReference, BoundsAreClamped) {
  HandCase c;
  c.ks = {-5, 2};
  c.ke = {1, 100};
  c.params.ks = c.ks.data();
  c.params.ke = c.ke.data();
  c.params.fill_masked = true;
  ASSERT_TRUE(reference::indexer_logits_cpu(c.params).is_ok());
  EXPECT_EQ(c.logits[0], 24.0f);
  EXPECT_EQ(c.logits[1], kNegInf);
  EXPECT_EQ(c.logits[2], kNegInf);
  EXPECT_EQ(c.logits[4], kNegInf);
  EXPECT_EQ(c.logits[5], kNegInf);
  EXPECT_EQ(c.logits[6], 64.0f);
  EXPECT_EQ(c.logits[3], kSentinel);
  EXPECT_EQ(c.logits[7], kSentinel);
}

TEST(IndexerReference, RejectsInvalidParams) {
  HandCase c;
  c.params.num_heads = 5;
  Status s = reference::indexer_logits_cpu(c.params);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("num_heads"), std::string::npos) << s.to_string();
  std::vector<double> ref;
  EXPECT_FALSE(reference::indexer_logits_cpu_f64(c.params, &ref).is_ok());
  EXPECT_EQ(c.logits[0], kSentinel);
}

enum class Ranges { kFull, kCausal, kRandom, kRandomOutOfRange, kEmpty };

struct Shape {
  int64_t T, N;
  int H, D;
  Ranges ranges;
  bool fill_masked;
  bool padded;  // non-packed strides everywhere
};

// Readable test names in ctest ("T=2 N=32 H=8 D=64 causal fill padded"), not the struct's bytes.
void PrintTo(const Shape& s, std::ostream* os) {
  constexpr const char* kRanges[] = {"full", "causal", "random", "random_out_of_range", "empty"};
  *os << "T=" << s.T << " N=" << s.N << " H=" << s.H << " D=" << s.D << " " << kRanges[static_cast<int>(s.ranges)]
      << (s.fill_masked ? " fill" : "") << (s.padded ? " padded" : "");
}

tools::KeyRanges make_ranges(const Shape& s, uint64_t seed) {
  switch (s.ranges) {
    case Ranges::kFull: return tools::full_key_ranges(s.T, s.N);
    case Ranges::kCausal: return tools::causal_key_ranges(s.T, s.N);
    case Ranges::kRandom: return tools::random_key_ranges(s.T, s.N, seed, 0.1);
    case Ranges::kRandomOutOfRange: return tools::random_key_ranges(s.T, s.N, seed, 0.1, 0.3);
    case Ranges::kEmpty: return tools::random_key_ranges(s.T, s.N, seed, 1.0);  // every ks == ke
  }
  return {};
}

class IndexerReferenceShapes : public ::testing::TestWithParam<Shape> {};

TEST_P(IndexerReferenceShapes, MatchesNaiveFormula) {
  const Shape s = GetParam();
  const uint64_t seed = static_cast<uint64_t>(s.T * 1000003 + s.N * 101 + s.H);
  Problem pr = s.padded ? make_problem(s.T, s.N, s.H, s.D, make_ranges(s, seed), seed, 32, 3, 16, 8)
                        : make_problem(s.T, s.N, s.H, s.D, make_ranges(s, seed), seed);
  pr.params.fill_masked = s.fill_masked;
  ASSERT_TRUE(reference::indexer_logits_cpu(pr.params).is_ok());
  std::vector<double> ref;
  ASSERT_TRUE(reference::indexer_logits_cpu_f64(pr.params, &ref).is_ok());

  const int64_t logits_stride = pr.params.logits_stride ? pr.params.logits_stride : s.N;
  // The naive formula is single-threaded and slow: on the big shapes, cross-check a sample of rows.
  const int64_t naive_row_step = std::max<int64_t>(1, s.T * s.N * s.H * s.D / 20'000'000);
  int64_t in_range = 0;
  for (int64_t t = 0; t < s.T; ++t) {
    const int64_t lo = std::clamp<int64_t>(pr.ranges.ks[t], 0, s.N);
    const int64_t hi = std::max(lo, std::clamp<int64_t>(pr.ranges.ke[t], 0, s.N));
    for (int64_t c = 0; c < logits_stride; ++c) {
      const float got = pr.logits[t * logits_stride + c];
      if (c >= lo && c < hi) {
        ++in_range;
        if (t % naive_row_step == 0) {
          const double naive = naive_logit(pr.params, t, c);
          // Same exact products and f64 sums: equal up to the order of the head sum.
          ASSERT_NEAR(ref[t * s.N + c], naive, 1e-12 * std::max(1.0, std::abs(naive))) << t << ", " << c;
        }
        ASSERT_EQ(got, static_cast<float>(ref[t * s.N + c])) << t << ", " << c;
      } else if (c < s.N) {
        ASSERT_EQ(ref[t * s.N + c], -std::numeric_limits<double>::infinity());
        ASSERT_EQ(got, s.fill_masked ? kNegInf : kSentinel) << t << ", " << c;
      } else {
        ASSERT_EQ(got, kSentinel) << "row padding written at " << t << ", " << c;
      }
    }
  }
  if (s.ranges != Ranges::kEmpty && s.T * s.N > 1) {
    EXPECT_GT(in_range, 0);
  }

  // The f32 output passes the SPEC 6 check against the f64 reference (it is its rounding).
  const tools::IndexerCheck check = tools::check_indexer_logits(
      pr.logits.data(), logits_stride, ref.data(), s.T, s.N, pr.ranges.ks.data(), pr.ranges.ke.data());
  EXPECT_TRUE(check.passed) << check.description;
  EXPECT_EQ(check.cells, in_range);
}

// SPEC 8 shapes at CPU size, every H and both D, each range kind, fill_masked on and off.
INSTANTIATE_TEST_SUITE_P(
    Spec8, IndexerReferenceShapes,
    ::testing::Values(Shape{1, 1, 4, 128, Ranges::kFull, false, false},
                      Shape{1, 1, 64, 128, Ranges::kFull, true, true},
                      Shape{2, 32, 8, 64, Ranges::kCausal, true, false},
                      Shape{2, 32, 32, 128, Ranges::kRandomOutOfRange, false, true},
                      Shape{128, 128, 16, 128, Ranges::kCausal, false, false},
                      Shape{128, 128, 4, 64, Ranges::kEmpty, true, false},
                      Shape{128, 128, 8, 128, Ranges::kEmpty, false, true},
                      Shape{501, 501, 4, 128, Ranges::kCausal, true, false},
                      Shape{501, 501, 32, 64, Ranges::kRandom, false, true},
                      Shape{32, 64, 64, 128, Ranges::kFull, false, false},
                      Shape{32, 64, 16, 64, Ranges::kRandom, true, true},
                      Shape{128, 256, 64, 128, Ranges::kCausal, true, false},
                      Shape{128, 256, 8, 128, Ranges::kRandomOutOfRange, true, true}));

TEST(IndexerReference, EmptyProblems) {
  // T = 0 and N = 0 are valid; nothing is written.
  Problem pr = make_problem(3, 0, 4, 128, tools::KeyRanges{{0, 0, 0}, {0, 5, 0}}, 7);
  pr.params.fill_masked = true;
  EXPECT_TRUE(reference::indexer_logits_cpu(pr.params).is_ok());
  IndexerParams none;
  none.num_heads = 4;
  EXPECT_TRUE(reference::indexer_logits_cpu(none).is_ok());
}

TEST(IndexerReference, DequantisesOnlyATileAtATime) {
  // One token over 524288 keys (64 MB of e4m3 k): the reference must not copy k to f64 (512 MB).
  // The child's address space allows the inputs plus 192 MB.
  if (!testing::address_space_limit_supported()) GTEST_SKIP() << "no address-space cap under a sanitizer";
  constexpr int64_t kKeys = 524288;
  constexpr int kHeads = 4, kDim = 128;
  std::vector<uint8_t> q(kHeads * kDim, float_to_e4m3(1.0f)), k(static_cast<size_t>(kKeys * kDim), 0);
  for (int64_t s = 0; s < kKeys; s += 4099) k[static_cast<size_t>(s * kDim)] = float_to_e4m3(2.0f);
  std::vector<float> w(kHeads, 1.0f), k_scale(kKeys, 0.5f), logits(kKeys, kSentinel);
  std::vector<int32_t> ks = {0}, ke = {static_cast<int32_t>(kKeys)};
  IndexerParams p;
  p.num_tokens = 1;
  p.num_keys = kKeys;
  p.num_heads = kHeads;
  p.head_dim = kDim;
  p.q = q.data();
  p.w = w.data();
  p.k = k.data();
  p.k_scale = k_scale.data();
  p.ks = ks.data();
  p.ke = ke.data();
  p.logits = logits.data();
  const testing::ChildResult child = testing::run_with_address_space_limit(size_t{192} << 20, [&] {
    if (!reference::indexer_logits_cpu(p).is_ok()) return 1;
    // Key 4099 * 2: dot 2 per head, 4 heads, k_scale 0.5 -> 4; key 1: 0.
    return logits[2 * 4099] == 4.0f && logits[1] == 0.0f ? 0 : 2;
  });
  EXPECT_TRUE(child.exited && child.code == 0) << child.describe();
}

TEST(IndexerReference, OutOfMemoryIsAStatus) {
  // The f64 form returns [T, N] doubles: at T = 2^31 - 1, N = 2^30 - 4096 (valid: the f32 logits'
  // extent fits in int64) that is more than a vector can hold. The std::length_error comes back as
  // OutOfMemory (before the fix it escaped). Nothing is read: the allocation comes first.
  Problem pr = make_problem(1, 4, 4, 128, tools::KeyRanges{{0}, {4}}, 11);
  pr.params.num_tokens = std::numeric_limits<int32_t>::max();
  pr.params.num_keys = (int64_t{1} << 30) - 4096;
  pr.params.logits_stride = 0;
  std::vector<double> logits;
  const Status s = reference::indexer_logits_cpu_f64(pr.params, &logits);
  EXPECT_EQ(s.code(), StatusCode::kOutOfMemory) << s.to_string();
  EXPECT_NE(s.message().find("indexer reference"), std::string::npos) << s.to_string();
}

TEST(IndexerReference, CancelledByTheCallersCheck) {
  // 2048 x 4096 pairs at H = 64, D = 128: seconds of work, stopped at the first check (50 ms in).
  const int64_t T = 2048, N = 4096;
  Problem pr = make_problem(T, N, 64, 128, tools::full_key_ranges(T, N), 12);
  int calls = 0;
  const auto stop = [](void* context) { return ++*static_cast<int*>(context) > 0; };
  reference::ScopedCancelCheck cancel(stop, &calls);
  const Status s = reference::indexer_logits_cpu(pr.params);
  EXPECT_EQ(s.code(), StatusCode::kCancelled) << s.to_string();
  EXPECT_EQ(s.message(), "indexer reference: stopped by the cancel check");
  EXPECT_EQ(calls, 1);
}

}  // namespace
}  // namespace fp8dsa
