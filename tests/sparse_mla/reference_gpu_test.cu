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
#include "common/metrics.h"
#include "common/poison.h"
#include "common/random_inputs.h"
#include "common/rerun.h"
#include "fp8dsa/fp8.h"
#include "fp8dsa/sparse_mla.h"
#include "sparse_mla/reference_cpu.h"

namespace fp8dsa {
namespace {

using testing::DeviceBuffer;

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr int kDqk = 576, kDv = 512;

struct MlaCase {
  int64_t num_kv;
  int topk;
  int num_heads;
  int64_t num_tokens;
  bool topk_length = false;
  bool sink = false;
  bool padded_strides = false;
  bool max_logits = true;
  float q_scale = 1.0f, kv_scale = 1.0f;

  std::string name() const {
    return "N=" + std::to_string(num_kv) + " topk=" + std::to_string(topk) + " h=" +
           std::to_string(num_heads) + " T=" + std::to_string(num_tokens) +
           (topk_length ? " +topk_length" : "") + (sink ? " +sink" : "") +
           (padded_strides ? " +strides" : "");
  }
};

// Host inputs and their device copies for one case; `host` and `device` describe the same problem.
struct MlaProblem {
  std::vector<uint8_t> q, kv;
  std::vector<int32_t> indices, topk_length;
  std::vector<float> sink;
  SparseMlaParams host;
  SparseMlaParams device;
  DeviceBuffer<uint8_t> d_q, d_kv;
  DeviceBuffer<int32_t> d_indices, d_topk_length;
  DeviceBuffer<float> d_sink, d_lse, d_max_logits;
  DeviceBuffer<uint16_t> d_out;
};

void make_problem(const MlaCase& c, uint64_t seed, MlaProblem* pr) {
  const int64_t T = c.num_tokens, N = c.num_kv;
  const int h = c.num_heads;
  SparseMlaParams& p = pr->host;
  p.num_tokens = T;
  p.num_kv = N;
  p.num_heads = h;
  p.topk = c.topk;
  p.q_head_stride = kDqk + (c.padded_strides ? 16 : 0);
  p.q_token_stride = h * p.q_head_stride + (c.padded_strides ? 32 : 0);
  p.kv_row_stride = c.padded_strides ? 656 : kDqk;
  p.indices_stride = c.topk + (c.padded_strides ? 5 : 0);
  p.out_head_stride = kDv + (c.padded_strides ? 8 : 0);
  p.out_token_stride = h * p.out_head_stride + (c.padded_strides ? 16 : 0);
  p.sm_scale = 1.0f / std::sqrt(192.0f);
  p.q_scale = c.q_scale;
  p.kv_scale = c.kv_scale;
  p.kernel = SparseMlaKernel::kReference;

  pr->q = testing::random_e4m3(static_cast<size_t>(T * p.q_token_stride), seed, -3.0f, 3.0f);
  pr->kv = testing::random_e4m3(static_cast<size_t>(std::max<int64_t>(N, 1) * p.kv_row_stride), seed + 1);

  // Random rows (10% of the SPEC's invalid values mixed in), laid out with the row stride.
  const std::vector<int32_t> packed = testing::random_indices(T, c.topk, N, seed + 2, 0.1, true);
  pr->indices.assign(static_cast<size_t>(T * p.indices_stride), INT_MIN);
  for (int64_t t = 0; t < T; ++t)
    std::copy_n(packed.begin() + t * c.topk, c.topk, pr->indices.begin() + t * p.indices_stride);
  if (T > 1) {  // one token with no valid key at all
    const std::vector<int32_t> invalid = testing::invalid_index_values(N);
    for (int j = 0; j < c.topk; ++j) pr->indices[(T / 2) * p.indices_stride + j] = invalid[j % invalid.size()];
  }

  testing::Random rng(seed + 3);
  if (c.topk_length) {
    pr->topk_length.resize(static_cast<size_t>(T));
    for (int64_t t = 0; t < T; ++t) {
      switch (t % 5) {
        case 0: pr->topk_length[t] = c.topk; break;                                  // full
        case 1: pr->topk_length[t] = 0; break;                                       // none
        case 2: pr->topk_length[t] = static_cast<int32_t>(rng.uniform_int(1, c.topk - 1)); break;
        case 3: pr->topk_length[t] = -3; break;                                      // clamps to 0
        default: pr->topk_length[t] = c.topk + 100; break;                           // clamps to topk
      }
    }
  }
  if (c.sink) {
    pr->sink = testing::random_f32(static_cast<size_t>(h), seed + 4, -2.0f, 4.0f);
    pr->sink[0] = kInf;                  // the whole head's output vanishes
    if (h > 2) pr->sink[1] = -kInf;      // no effect
  }

  pr->d_q = DeviceBuffer<uint8_t>(pr->q);
  pr->d_kv = DeviceBuffer<uint8_t>(pr->kv);
  pr->d_indices = DeviceBuffer<int32_t>(pr->indices);
  pr->d_out = DeviceBuffer<uint16_t>(static_cast<size_t>(T * p.out_token_stride));
  pr->d_lse = DeviceBuffer<float>(static_cast<size_t>(T * h));
  pr->d_max_logits = DeviceBuffer<float>(static_cast<size_t>(T * h));
  p.q = pr->q.data();
  p.kv = N > 0 ? pr->kv.data() : nullptr;
  p.indices = pr->indices.data();
  SparseMlaParams& d = pr->device;
  d = p;
  d.q = pr->d_q.get();
  d.kv = N > 0 ? pr->d_kv.get() : nullptr;
  d.indices = pr->d_indices.get();
  d.out = pr->d_out.get();
  d.lse = pr->d_lse.get();
  d.max_logits = c.max_logits ? pr->d_max_logits.get() : nullptr;
  if (c.topk_length) {
    pr->d_topk_length = DeviceBuffer<int32_t>(pr->topk_length);
    p.topk_length = pr->topk_length.data();
    d.topk_length = pr->d_topk_length.get();
  }
  if (c.sink) {
    pr->d_sink = DeviceBuffer<float>(pr->sink);
    p.attn_sink = pr->sink.data();
    d.attn_sink = pr->d_sink.get();
  }
}

// The out elements a kernel owns: d_v columns of each (token, head) row.
std::function<bool(size_t)> out_cells(const SparseMlaParams& p) {
  return [p](size_t i) {
    const int64_t t = static_cast<int64_t>(i) / p.out_token_stride;
    const int64_t rest = static_cast<int64_t>(i) % p.out_token_stride;
    return t < p.num_tokens && rest / p.out_head_stride < p.num_heads && rest % p.out_head_stride < p.d_v;
  };
}

std::vector<testing::RerunOutput> rerun_outputs(MlaProblem& pr) {
  std::vector<testing::RerunOutput> outputs = {testing::rerun_output(pr.d_out, "out"),
                                               testing::rerun_output(pr.d_lse, "lse")};
  if (pr.device.max_logits) outputs.push_back(testing::rerun_output(pr.d_max_logits, "max_logits"));
  return outputs;
}

void run_case(const MlaCase& c, uint64_t seed) {
  SCOPED_TRACE(c.name());
  MlaProblem pr;
  make_problem(c, seed, &pr);
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

  testing::SparseMlaOutputs got;
  got.out = out.data();
  got.out_token_stride = pr.host.out_token_stride;
  got.out_head_stride = pr.host.out_head_stride;
  got.lse = lse.data();
  got.max_logits = c.max_logits ? max_logits.data() : nullptr;
  const testing::SparseMlaCheck check =
      testing::check_sparse_mla(got, ref_out, ref_lse, ref_max, c.num_tokens, c.num_heads, kDv);
  EXPECT_TRUE(check.passed) << check.description;
  if (c.num_tokens > 1) EXPECT_GE(check.empty_rows, c.num_heads);  // the all-invalid token
}

TEST(SparseMlaReferenceGpu, SpecShapesAgainstCpuReference) {
  FP8DSA_SKIP_WITHOUT_GPU();
  const std::vector<MlaCase> cases = {
      {128, 128, 8, 213},
      {256, 256, 16, 62, true, false, true},
      {592, 128, 32, 213, false, true},
      {1840, 256, 64, 62, true, true, false, false},
      {1521, 512, 128, 62, false, false, true},
      {95, 128, 8, 1, true, true},
      {153, 256, 16, 213, true, true, true},
      {32, 2048, 32, 62, false, true, false, true, 0.5f, 2.0f},
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

// One valid key gives softmax 1: out = kv_scale * V row, lse = max_logits = the score. The same key
// listed twice doubles the sum: lse = score + log 2, out unchanged.
TEST(SparseMlaReferenceGpu, SingleAndDuplicateKeyHandComputed) {
  FP8DSA_SKIP_WITHOUT_GPU();
  MlaCase c{16, 64, 8, 2};
  c.kv_scale = 1.5f;
  MlaProblem pr;
  make_problem(c, 30000, &pr);
  std::fill(pr.indices.begin(), pr.indices.end(), -1);
  pr.indices[5] = 7;                        // token 0: key 7 once
  pr.indices[pr.host.indices_stride + 0] = 7;  // token 1: key 7 twice
  pr.indices[pr.host.indices_stride + 63] = 7;
  pr.d_indices.upload(pr.indices);
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
  make_problem(MlaCase{64, 64, 8, 1}, 40010, &pr);
  SparseMlaParams none = pr.device;
  none.num_tokens = 0;
  FP8DSA_ASSERT_STATUS_OK(reference::sparse_mla_gpu(none));
}

// The public entry point with kernel = kReference runs this kernel; bad arguments are refused by
// both entry points with InvalidArgument.
TEST(SparseMlaReferenceGpu, DispatcherRunsReferenceAndRejectsBadArguments) {
  FP8DSA_SKIP_WITHOUT_GPU();
  MlaProblem pr;
  make_problem(MlaCase{300, 128, 16, 20, true, true, true}, 50000, &pr);
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

}  // namespace
}  // namespace fp8dsa
