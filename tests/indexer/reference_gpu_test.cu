// The indexer GPU reference kernel against the f64 CPU reference (SPEC 6), on poisoned outputs with
// every-cell-written checks and bitwise reruns; plus the public entry point's kReference path.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "common/gpu_test.h"
#include "tools/metrics.h"
#include "common/poison.h"
#include "tools/random_inputs.h"
#include "common/rerun.h"
#include "fp8dsa/indexer.h"
#include "indexer/reference_cpu.h"
#include "indexer_problem.h"

namespace fp8dsa {
namespace {

using tools::DeviceBuffer;

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

using indexer_test::IndexerProblem;
using indexer_test::clamped;

// This file's inputs: q and k in [-4, 4), key scales from 0.01, its own stride padding.
indexer_test::ProblemShape shape_of(const IndexerCase& c) {
  indexer_test::ProblemShape s{c.num_tokens, c.num_keys, c.num_heads, c.head_dim, c.padded_strides};
  s.q_pad = 32;
  s.w_pad = 3;
  s.k_pad = 16;
  s.ldl_pad = 8;  // validate: 16-byte rows
  s.qk_range = 4.0f;
  s.k_scale_min = 0.01f;
  return s;
}

// Causal or random key ranges (with empty and out-of-range rows), fill_masked as the case says.
void make_problem(const IndexerCase& c, uint64_t seed, IndexerProblem* pr) {
  tools::KeyRanges ranges = c.causal ? tools::causal_key_ranges(c.num_tokens, c.num_keys)
                                       : tools::random_key_ranges(c.num_tokens, c.num_keys, seed + 4, 0.1, 0.1);
  indexer_test::make_problem(shape_of(c), std::move(ranges.ks), std::move(ranges.ke), seed, pr);
  for (IndexerParams* p : {&pr->host, &pr->device}) {
    p->fill_masked = c.fill_masked;
    p->kernel = IndexerKernel::kReference;
  }
}

// Runs the reference kernel twice on poisoned logits (bitwise equal), checks that it wrote exactly
// the cells it owns (the clamped [ks, ke) of each row, or all N columns with fill_masked), and
// returns the logits in *got.
void run_and_check_coverage(IndexerProblem& pr, std::vector<float>* got) {
  ASSERT_TRUE(testing::reruns_bitwise_equal(
      [&] { return reference::indexer_logits_gpu(pr.device); },
      {testing::rerun_output(pr.d_logits, "logits")}));
  *got = pr.d_logits.download();
  const auto owned = indexer_test::owned_cells(pr, pr.host.fill_masked);
  EXPECT_TRUE(testing::all_written(*got, owned, "logits"));
  EXPECT_TRUE(testing::untouched_outside(*got, owned, "logits"));
}

void run_case(const IndexerCase& c, uint64_t seed) {
  SCOPED_TRACE(c.name + " T=" + std::to_string(c.num_tokens) + " N=" + std::to_string(c.num_keys) +
               " H=" + std::to_string(c.num_heads) + " D=" + std::to_string(c.head_dim));
  IndexerProblem pr;
  make_problem(c, seed, &pr);

  std::vector<double> ref;
  FP8DSA_ASSERT_STATUS_OK(reference::indexer_logits_cpu_f64(pr.host, &ref));

  std::vector<float> got;
  run_and_check_coverage(pr, &got);
  if (::testing::Test::HasFatalFailure()) return;

  const tools::IndexerCheck check = tools::check_indexer_logits(
      got.data(), pr.host.logits_stride, ref.data(), c.num_tokens, c.num_keys, pr.ks.data(),
      pr.ke.data());
  EXPECT_TRUE(check.passed) << check.description;
  if (c.num_tokens > 0 && c.num_keys > 0 && check.cells > 0) EXPECT_GT(check.max_abs_ref, 0.0);

  if (c.fill_masked) {
    int64_t wrong = 0;
    for (int64_t t = 0; t < c.num_tokens; ++t) {
      const int64_t lo = clamped(pr.ks[t], c.num_keys);
      const int64_t hi = std::max(lo, clamped(pr.ke[t], c.num_keys));
      for (int64_t s = 0; s < c.num_keys; ++s) {
        const float v = got[t * pr.host.logits_stride + s];
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

  IndexerProblem pr;
  indexer_test::make_problem(shape_of(IndexerCase{"cache_prefix", T, N, 32}), ks, ke, 4000, &pr);

  std::vector<float> got;
  run_and_check_coverage(pr, &got);
  if (::testing::Test::HasFatalFailure()) return;

  for (int64_t t0 : {int64_t{0}, int64_t{63}, int64_t{64}, int64_t{100}, T - 16, T - 1}) {
    IndexerParams sample = pr.host;
    sample.num_tokens = 1;
    sample.q = pr.q.data() + t0 * sample.q_token_stride;
    sample.w = pr.w.data() + t0 * sample.w_token_stride;
    sample.ks = pr.ks.data() + t0;
    sample.ke = pr.ke.data() + t0;
    std::vector<double> ref;
    FP8DSA_ASSERT_STATUS_OK(reference::indexer_logits_cpu_f64(sample, &ref));
    const tools::IndexerCheck check = tools::check_indexer_logits(
        got.data() + t0 * pr.host.logits_stride, pr.host.logits_stride, ref.data(), 1, N, sample.ks, sample.ke);
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
  bad.logits_stride = pr.host.num_keys - 1;
  EXPECT_EQ(reference::indexer_logits_gpu(bad).code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace fp8dsa
