// The indexer GPU reference kernel against the f64 CPU reference (SPEC 6), on poisoned outputs with
// every-cell-written checks and bitwise reruns; plus the public entry point's kReference path.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "common/gpu_test.h"
#include "common/metrics.h"
#include "common/poison.h"
#include "common/random_inputs.h"
#include "common/rerun.h"
#include "fp8dsa/indexer.h"
#include "indexer/reference_cpu.h"

namespace fp8dsa {
namespace {

using testing::DeviceBuffer;

struct IndexerCase {
  std::string name;
  int64_t num_tokens;
  int64_t num_keys;
  int num_heads;
  int head_dim = 128;
  bool fill_masked = false;
  bool padded_strides = false;  // q / w / k / logits rows wider than packed
  bool causal = false;          // else random ranges with empty and out-of-range rows
};

// Host inputs plus their device copies; `host` and `device` are the same problem.
struct IndexerProblem {
  std::vector<uint8_t> q, k;
  std::vector<float> w, k_scale;
  testing::KeyRanges ranges;
  IndexerParams host;
  IndexerParams device;
  DeviceBuffer<uint8_t> d_q, d_k;
  DeviceBuffer<float> d_w, d_k_scale, d_logits;
  DeviceBuffer<int32_t> d_ks, d_ke;
};

void make_problem(const IndexerCase& c, uint64_t seed, IndexerProblem* pr) {
  const int64_t T = c.num_tokens, N = c.num_keys;
  const int H = c.num_heads, D = c.head_dim;
  const int64_t q_stride = int64_t{H} * D + (c.padded_strides ? 32 : 0);
  const int64_t w_stride = H + (c.padded_strides ? 3 : 0);
  const int64_t k_stride = D + (c.padded_strides ? 16 : 0);
  const int64_t ldl = (N + 3) / 4 * 4 + (c.padded_strides ? 8 : 0);  // validate: 16-byte rows
  pr->q = testing::random_e4m3(static_cast<size_t>(T * q_stride), seed, -4.0f, 4.0f);
  pr->k = testing::random_e4m3(static_cast<size_t>(N * k_stride), seed + 1, -4.0f, 4.0f);
  pr->w = testing::random_f32(static_cast<size_t>(T * w_stride), seed + 2, -1.0f, 1.0f);
  pr->k_scale = testing::random_f32(static_cast<size_t>(N), seed + 3, 0.01f, 2.0f);
  pr->ranges = c.causal ? testing::causal_key_ranges(T, N)
                        : testing::random_key_ranges(T, N, seed + 4, 0.1, 0.1);

  IndexerParams& p = pr->host;
  p.num_tokens = T;
  p.num_keys = N;
  p.num_heads = H;
  p.head_dim = D;
  p.q = pr->q.data();
  p.q_token_stride = q_stride;
  p.w = pr->w.data();
  p.w_token_stride = w_stride;
  p.k = pr->k.data();
  p.k_row_stride = k_stride;
  p.k_scale = pr->k_scale.data();
  p.ks = pr->ranges.ks.data();
  p.ke = pr->ranges.ke.data();
  p.ldl = ldl;
  p.fill_masked = c.fill_masked;
  p.kernel = IndexerKernel::kReference;

  pr->d_q = DeviceBuffer<uint8_t>(pr->q);
  pr->d_k = DeviceBuffer<uint8_t>(pr->k);
  pr->d_w = DeviceBuffer<float>(pr->w);
  pr->d_k_scale = DeviceBuffer<float>(pr->k_scale);
  pr->d_ks = DeviceBuffer<int32_t>(pr->ranges.ks);
  pr->d_ke = DeviceBuffer<int32_t>(pr->ranges.ke);
  pr->d_logits = DeviceBuffer<float>(static_cast<size_t>(T * ldl));
  IndexerParams& d = pr->device;
  d = p;
  d.q = pr->d_q.get();
  d.w = pr->d_w.get();
  d.k = pr->d_k.get();
  d.k_scale = pr->d_k_scale.get();
  d.ks = pr->d_ks.get();
  d.ke = pr->d_ke.get();
  d.logits = pr->d_logits.get();
}

int64_t clamped(int32_t bound, int64_t n) { return std::clamp<int64_t>(bound, 0, n); }

// The cells the kernel owns: the clamped [ks, ke) of each row, or all N columns with fill_masked.
std::function<bool(size_t)> owned_cells(const IndexerProblem& pr) {
  const IndexerParams& p = pr.host;
  return [&pr, p](size_t i) {
    const int64_t t = static_cast<int64_t>(i) / p.ldl, s = static_cast<int64_t>(i) % p.ldl;
    if (t >= p.num_tokens || s >= p.num_keys) return false;
    if (p.fill_masked) return true;
    const int64_t lo = clamped(pr.ranges.ks[t], p.num_keys);
    return s >= lo && s < std::max(lo, clamped(pr.ranges.ke[t], p.num_keys));
  };
}

void run_case(const IndexerCase& c, uint64_t seed) {
  SCOPED_TRACE(c.name + " T=" + std::to_string(c.num_tokens) + " N=" + std::to_string(c.num_keys) +
               " H=" + std::to_string(c.num_heads) + " D=" + std::to_string(c.head_dim));
  IndexerProblem pr;
  make_problem(c, seed, &pr);

  std::vector<double> ref;
  FP8DSA_ASSERT_STATUS_OK(reference::indexer_logits_cpu_f64(pr.host, &ref));

  ASSERT_TRUE(testing::reruns_bitwise_equal(
      [&] { return reference::indexer_logits_gpu(pr.device); },
      {testing::rerun_output(pr.d_logits, "logits")}));
  const std::vector<float> got = pr.d_logits.download();

  const auto owned = owned_cells(pr);
  EXPECT_TRUE(testing::all_written(got, owned, "logits"));
  EXPECT_TRUE(testing::untouched_outside(got, owned, "logits"));

  const testing::IndexerCheck check = testing::check_indexer_logits(
      got.data(), pr.host.ldl, ref.data(), c.num_tokens, c.num_keys, pr.ranges.ks.data(),
      pr.ranges.ke.data());
  EXPECT_TRUE(check.passed) << check.description;
  if (c.num_tokens > 0 && c.num_keys > 0 && check.cells > 0) EXPECT_GT(check.max_abs_ref, 0.0);

  if (c.fill_masked) {
    int64_t wrong = 0;
    for (int64_t t = 0; t < c.num_tokens; ++t) {
      const int64_t lo = clamped(pr.ranges.ks[t], c.num_keys);
      const int64_t hi = std::max(lo, clamped(pr.ranges.ke[t], c.num_keys));
      for (int64_t s = 0; s < c.num_keys; ++s) {
        const float v = got[t * pr.host.ldl + s];
        if ((s < lo || s >= hi) && !(std::isinf(v) && v < 0)) ++wrong;
      }
    }
    EXPECT_EQ(wrong, 0) << "masked cells not -inf";
  }
}

TEST(IndexerReferenceGpu, SpecShapesAgainstCpuReference) {
  FP8DSA_SKIP_WITHOUT_GPU();
  const int64_t shapes[][2] = {{1, 1}, {2, 32}, {128, 128}, {501, 501}, {722, 722}, {32, 64}, {128, 256}};
  const int heads[] = {4, 8, 16, 32, 64};
  uint64_t seed = 1000;
  int i = 0;
  for (const auto& shape : shapes) {
    IndexerCase c{"spec", shape[0], shape[1], heads[i % 5]};
    c.fill_masked = i % 2 == 1;
    c.padded_strides = i % 3 == 2;
    c.head_dim = i == 3 ? 64 : 128;
    run_case(c, seed += 10);
    ++i;
  }
}

TEST(IndexerReferenceGpu, EveryHeadCountBothHeadDims) {
  FP8DSA_SKIP_WITHOUT_GPU();
  uint64_t seed = 2000;
  for (int h : {4, 8, 16, 32, 64}) {
    for (int d : {64, 128}) {
      IndexerCase c{"heads", 37, 300, h, d};
      c.padded_strides = h == 16;
      run_case(c, seed += 10);
    }
  }
}

TEST(IndexerReferenceGpu, CausalAndFillMasked) {
  FP8DSA_SKIP_WITHOUT_GPU();
  IndexerCase causal{"causal", 179, 179 + 896, 64};
  causal.causal = true;
  run_case(causal, 3000);
  causal.fill_masked = true;
  causal.padded_strides = true;
  run_case(causal, 3010);
}

// build_causal_bounds output for a multi-sequence cache-prefix batch; the f64 reference is run on
// a sample of tokens (pointer offsets) so the host side stays cheap for a 60K-key problem.
TEST(IndexerReferenceGpu, CachePrefixBatchSampledTokens) {
  FP8DSA_SKIP_WITHOUT_GPU();
  const std::vector<SequenceLayout> sequences = {{64, 30000}, {48, 17000}, {32, 9000}, {16, 0}};
  int64_t T = 0, N = 0;
  for (const auto& s : sequences) T += s.new_tokens;
  std::vector<int32_t> ks(T), ke(T);
  FP8DSA_ASSERT_STATUS_OK(build_causal_bounds(sequences, ks.data(), ke.data(), &T, &N));

  IndexerCase c{"cache_prefix", T, N, 32};
  IndexerProblem pr;
  make_problem(c, 4000, &pr);
  pr.ranges.ks = ks;
  pr.ranges.ke = ke;
  pr.host.ks = pr.ranges.ks.data();
  pr.host.ke = pr.ranges.ke.data();
  pr.d_ks.upload(ks);
  pr.d_ke.upload(ke);

  ASSERT_TRUE(testing::reruns_bitwise_equal(
      [&] { return reference::indexer_logits_gpu(pr.device); },
      {testing::rerun_output(pr.d_logits, "logits")}));
  const std::vector<float> got = pr.d_logits.download();
  const auto owned = owned_cells(pr);
  EXPECT_TRUE(testing::all_written(got, owned, "logits"));
  EXPECT_TRUE(testing::untouched_outside(got, owned, "logits"));

  for (int64_t t0 : {int64_t{0}, int64_t{63}, int64_t{64}, int64_t{100}, T - 16, T - 1}) {
    IndexerParams sample = pr.host;
    sample.num_tokens = 1;
    sample.q = pr.q.data() + t0 * sample.q_token_stride;
    sample.w = pr.w.data() + t0 * sample.w_token_stride;
    sample.ks = pr.ranges.ks.data() + t0;
    sample.ke = pr.ranges.ke.data() + t0;
    std::vector<double> ref;
    FP8DSA_ASSERT_STATUS_OK(reference::indexer_logits_cpu_f64(sample, &ref));
    const testing::IndexerCheck check = testing::check_indexer_logits(
        got.data() + t0 * pr.host.ldl, pr.host.ldl, ref.data(), 1, N, sample.ks, sample.ke);
    EXPECT_TRUE(check.passed) << "token " << t0 << ": " << check.description;
    EXPECT_EQ(check.cells, ke[t0] - ks[t0]);
  }
}

// The public entry point with kernel = kReference runs this kernel; bad arguments are refused by
// both entry points with InvalidArgument before anything is launched.
TEST(IndexerReferenceGpu, DispatcherRunsReferenceAndRejectsBadArguments) {
  FP8DSA_SKIP_WITHOUT_GPU();
  IndexerProblem pr;
  make_problem(IndexerCase{"dispatch", 64, 200, 16}, 5000, &pr);
  ASSERT_TRUE(testing::reruns_bitwise_equal(
      [&] { return reference::indexer_logits_gpu(pr.device); },
      {testing::rerun_output(pr.d_logits, "logits")}));
  const std::vector<float> expected = pr.d_logits.download();

  IndexerParams via_dispatcher = pr.device;
  via_dispatcher.kernel = IndexerKernel::kReference;
  ASSERT_TRUE(testing::reruns_bitwise_equal([&] { return indexer_logits(via_dispatcher); },
                                            {testing::rerun_output(pr.d_logits, "logits")}));
  const std::vector<float> got = pr.d_logits.download();
  EXPECT_EQ(0, std::memcmp(got.data(), expected.data(), got.size() * sizeof(float)));

  IndexerParams bad = pr.device;
  bad.num_heads = 3;
  EXPECT_EQ(reference::indexer_logits_gpu(bad).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(indexer_logits(bad).code(), StatusCode::kInvalidArgument);
  bad = pr.device;
  bad.ldl = pr.host.num_keys - 1;
  EXPECT_EQ(reference::indexer_logits_gpu(bad).code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace fp8dsa
