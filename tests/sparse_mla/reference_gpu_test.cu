// The sparse MLA GPU reference against the f64 CPU reference (SPEC 4 / 6 / 8): the SPEC shape list,
// every head count, invalid indices, all-invalid tokens, topk_length, sinks, strides and scales;
// on poisoned outputs with every-element-written checks and bitwise reruns; plus the public
// entry point's kReference path.
#include <gtest/gtest.h>

#include <climits>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "common/gpu_test.h"
#include "tools/metrics.h"
#include "common/poison.h"
#include "tools/random_inputs.h"
#include "common/rerun.h"
#include "fp8dsa/fp8.h"
#include "fp8dsa/sparse_mla.h"
#include "mla_problem.h"
#include "sparse_mla/reference_cpu.h"

namespace fp8dsa {
namespace {

using mla_test::kDqk;
using mla_test::kDv;
using mla_test::MlaCase;
using mla_test::MlaProblem;
using mla_test::expect_same_outputs;
using mla_test::out_cells;
using mla_test::place_at_pool_end;
using mla_test::PoolPlacement;
using mla_test::rerun_outputs;
using tools::DeviceBuffer;


// The reference kernel's cases: mla_test::MlaCase with the kernel set to kReference.
void make_reference_problem(MlaCase c, uint64_t seed, MlaProblem* pr) {
  c.kernel = SparseMlaKernel::kReference;
  mla_test::make_problem(c, seed, pr);
}

void run_case(const MlaCase& c, uint64_t seed) {
  SCOPED_TRACE(c.name());
  MlaProblem pr;
  make_reference_problem(c, seed, &pr);
  std::vector<double> ref_out, ref_lse, ref_max;
  FP8DSA_ASSERT_STATUS_OK(reference::sparse_mla_cpu_f64(pr.host, &ref_out, &ref_lse, &ref_max));

  if (!c.max_logits) testing::poison(pr.d_max_logits);  // not an output here: must stay poison
  ASSERT_TRUE(testing::reruns_bitwise_equal([&] { return reference::sparse_mla_gpu(pr.device); },
                                            rerun_outputs(pr)));
  const std::vector<uint16_t> out = pr.d_out.download();
  const std::vector<float> lse = pr.d_lse.download();
  const std::vector<float> max_logits = pr.d_max_logits.download();
  const auto owned = out_cells(pr.host);
  const auto everything = [](size_t) { return true; };
  EXPECT_TRUE(testing::all_written(out, owned, "out"));
  EXPECT_TRUE(testing::untouched_outside(out, owned, "out"));
  EXPECT_TRUE(testing::all_written(lse, everything, "lse"));
  if (c.max_logits) {
    EXPECT_TRUE(testing::all_written(max_logits, everything, "max_logits"));
  } else {
    EXPECT_TRUE(testing::untouched_outside(max_logits, [](size_t) { return false; }, "max_logits"));
  }

  tools::SparseMlaOutputs got;
  got.out = out.data();
  got.out_token_stride = pr.host.out_token_stride;
  got.out_head_stride = pr.host.out_head_stride;
  got.lse = lse.data();
  got.max_logits = c.max_logits ? max_logits.data() : nullptr;
  const tools::SparseMlaCheck check =
      tools::check_sparse_mla(got, ref_out, ref_lse, ref_max, c.num_tokens, c.num_heads, kDv);
  EXPECT_TRUE(check.passed) << check.description;
  if (c.num_tokens > 1) EXPECT_GE(check.empty_rows, c.num_heads);  // the all-invalid token
}

TEST(SparseMlaReferenceGpu, SpecShapesAgainstCpuReference) {
  FP8DSA_SKIP_WITHOUT_GPU();
  const std::vector<MlaCase> cases = {
      {128, 128, 8, 213},
      {256, 256, 16, 62, true, false, true},
      {592, 128, 32, 213, false, true},
      {1840, 256, 64, 62, true, true, false, 1.0f, 1.0f, false},
      {1521, 512, 128, 62, false, false, true},
      {95, 128, 8, 1, true, true},
      {153, 256, 16, 213, true, true, true},
      {32, 2048, 32, 62, false, true, false, 0.5f, 2.0f},
      {64, 8192, 128, 1},
      {64, 8192, 8, 62, true, true, true},
  };
  uint64_t seed = 10000;
  for (const MlaCase& c : cases) run_case(c, seed += 10);
}

TEST(SparseMlaReferenceGpu, EveryHeadCount) {
  FP8DSA_SKIP_WITHOUT_GPU();
  uint64_t seed = 20000;
  for (int h : {8, 16, 32, 64, 128}) {
    MlaCase c{700, 256, h, 40, h != 32, h != 16, h == 64};
    c.q_scale = h == 128 ? 0.25f : 1.0f;
    c.kv_scale = h == 128 ? 3.0f : 1.0f;
    run_case(c, seed += 10);
  }
}

// The same cases over DeepSeek-V3.2 rows: bf16 q, 656-byte rows with per-block scales.
MlaCase v32(MlaCase c) {
  c.kv_format = KvFormat::kDeepSeekV32;
  return c;
}

TEST(SparseMlaReferenceGpu, DeepSeekV32AgainstCpuReference) {
  FP8DSA_SKIP_WITHOUT_GPU();
  MlaCase realistic{2048, 512, 64, 48, true, true};
  realistic.score_std = 3.0;
  const std::vector<MlaCase> cases = {
      v32({128, 128, 8, 213}),
      v32({256, 256, 16, 62, true, false, true}),
      v32({592, 128, 32, 213, false, true}),
      v32({1840, 256, 64, 62, true, true, false, 1.0f, 1.0f, false}),
      v32({1521, 512, 128, 62, false, false, true}),
      v32({153, 256, 16, 213, true, true, true}),
      v32({700, 256, 128, 40, true, true, true, 0.25f, 3.0f}),
      v32({64, 8192, 128, 1}),
      v32({0, 64, 16, 5, true, true}),  // N = 0: every index is invalid
      v32(realistic),
  };
  uint64_t seed = 60000;
  for (const MlaCase& c : cases) run_case(c, seed += 10);
}

// Row offsets past 2^31 bytes: a pool of 3.4M V3.2 rows (2.2 GB) whose selected rows are its last
// 4096. The results equal those of the same rows in a pool of their own, bitwise.
TEST(SparseMlaReferenceGpu, DeepSeekV32RowOffsetsPast2GiB) {
  FP8DSA_SKIP_WITHOUT_GPU();
  constexpr int64_t kPoolRows = 3400000, kRows = 4096;
  static_assert((kPoolRows - kRows) * kV32RowBytes > (int64_t{1} << 31), "the selected rows start past 2^31 bytes");
  MlaProblem pr;
  make_reference_problem(v32({kRows, 512, 16, 24, true, true}), 70000, &pr);
  run_case(v32({kRows, 512, 16, 24, true, true}), 70000);  // the small pool against the CPU reference
  ASSERT_TRUE(testing::reruns_bitwise_equal([&] { return reference::sparse_mla_gpu(pr.device); },
                                            rerun_outputs(pr)));
  const std::vector<uint16_t> expected_out = pr.d_out.download();
  const std::vector<float> expected_lse = pr.d_lse.download();
  const std::vector<float> expected_max = pr.d_max_logits.download();

  PoolPlacement big;
  place_at_pool_end(pr, kPoolRows, &big);
  if (::testing::Test::HasFatalFailure()) return;
  expect_same_outputs(pr, [&] { return reference::sparse_mla_gpu(big.device); }, expected_out, expected_lse,
                      expected_max);
}

// One valid key gives softmax 1: out = kv_scale * V row, lse = max_logits = the score. The same key
// listed twice doubles the sum: lse = score + log 2, out unchanged.
TEST(SparseMlaReferenceGpu, SingleAndDuplicateKeyHandComputed) {
  FP8DSA_SKIP_WITHOUT_GPU();
  MlaCase c{16, 64, 8, 2};
  c.kv_scale = 1.5f;
  MlaProblem pr;
  make_reference_problem(c, 30000, &pr);
  std::fill(pr.indices.begin(), pr.indices.end(), -1);
  pr.indices[5] = 7;                        // token 0: key 7 once
  pr.indices[pr.host.indices_stride + 0] = 7;  // token 1: key 7 twice
  pr.indices[pr.host.indices_stride + 63] = 7;
  FP8DSA_ASSERT_STATUS_OK(pr.d_indices.upload(pr.indices));
  ASSERT_TRUE(testing::reruns_bitwise_equal([&] { return reference::sparse_mla_gpu(pr.device); },
                                            rerun_outputs(pr)));
  const std::vector<uint16_t> out = pr.d_out.download();
  const std::vector<float> lse = pr.d_lse.download();
  const std::vector<float> max_logits = pr.d_max_logits.download();
  const SparseMlaParams& p = pr.host;
  for (int64_t t = 0; t < 2; ++t) {
    for (int head = 0; head < c.num_heads; ++head) {
      double dot = 0.0;
      for (int d = 0; d < kDqk; ++d) {
        dot += double{e4m3_to_float(pr.q[t * p.q_token_stride + head * p.q_head_stride + d])} *
               double{e4m3_to_float(pr.kv[7 * p.kv_row_stride + d])};
      }
      const double score = dot * p.q_scale * p.kv_scale * p.sm_scale;
      const int64_t row = t * c.num_heads + head;
      EXPECT_NEAR(max_logits[row], score, 1e-4 * (1 + std::abs(score)));
      EXPECT_NEAR(lse[row], score + (t == 1 ? std::log(2.0) : 0.0), 1e-4 * (1 + std::abs(score)));
      for (int d = 0; d < kDv; ++d) {
        const float expected = c.kv_scale * e4m3_to_float(pr.kv[7 * p.kv_row_stride + d]);
        const float value = bf16_to_float(out[t * p.out_token_stride + head * p.out_head_stride + d]);
        ASSERT_NEAR(value, expected, 4e-3 * std::abs(expected) + 1e-6) << "t=" << t << " head=" << head << " d=" << d;
      }
    }
  }
}

TEST(SparseMlaReferenceGpu, EmptyCacheAndZeroTokens) {
  FP8DSA_SKIP_WITHOUT_GPU();
  run_case(MlaCase{0, 64, 16, 5, true, true}, 40000);  // N = 0: every index is invalid
  MlaProblem pr;
  make_reference_problem(MlaCase{64, 64, 8, 1}, 40010, &pr);
  SparseMlaParams none = pr.device;
  none.num_tokens = 0;
  FP8DSA_ASSERT_STATUS_OK(reference::sparse_mla_gpu(none));
}

// The public entry point with kernel = kReference runs this kernel; bad arguments are refused by
// both entry points with InvalidArgument.
void check_dispatcher(KvFormat format) {
  SCOPED_TRACE(kv_format_name(format));
  MlaCase c{300, 128, 16, 20, true, true, true};
  c.kv_format = format;
  MlaProblem pr;
  make_reference_problem(c, 50000, &pr);
  ASSERT_TRUE(testing::reruns_bitwise_equal([&] { return reference::sparse_mla_gpu(pr.device); },
                                            rerun_outputs(pr)));
  const std::vector<uint16_t> expected_out = pr.d_out.download();
  const std::vector<float> expected_lse = pr.d_lse.download();

  SparseMlaParams via_dispatcher = pr.device;
  via_dispatcher.kernel = SparseMlaKernel::kReference;
  ASSERT_TRUE(testing::reruns_bitwise_equal([&] { return sparse_mla_prefill(via_dispatcher); },
                                            rerun_outputs(pr)));
  EXPECT_TRUE(pr.d_out.download() == expected_out);
  const std::vector<float> lse = pr.d_lse.download();
  EXPECT_EQ(0, std::memcmp(lse.data(), expected_lse.data(), lse.size() * sizeof(float)));

  SparseMlaParams bad = pr.device;
  bad.topk = 100;
  EXPECT_EQ(reference::sparse_mla_gpu(bad).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(sparse_mla_prefill(bad).code(), StatusCode::kInvalidArgument);
  bad = pr.device;
  bad.sm_scale = 0.0f;
  EXPECT_EQ(reference::sparse_mla_gpu(bad).code(), StatusCode::kInvalidArgument);
}

TEST(SparseMlaReferenceGpu, DispatcherRunsReferenceAndRejectsBadArguments) {
  FP8DSA_SKIP_WITHOUT_GPU();
  check_dispatcher(KvFormat::kE4m3);
  check_dispatcher(KvFormat::kDeepSeekV32);
}

}  // namespace
}  // namespace fp8dsa
