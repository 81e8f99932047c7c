// The native FP8 sparse MLA kernels (sparse_mla_prefill, kernel kAuto, and each tuning through
// launch_sparse_mla_fp8) against the f64 CPU reference on the SPEC 8 shapes and edge cases (invalid
// indices, all-invalid tokens, topk_length, sinks, strides, scales, duplicate keys) and on realistic
// scores, on poisoned outputs with every-element-written checks and bitwise reruns; SPEC 8's large
// cases on sampled tokens; argument errors; keys split over parts merged by lse (both row formats).
// DeepSeek-V3.2's 656-byte rows: v32_gpu_test.cu; the shared runner: fp8_run.h.
#include <gtest/gtest.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "common/gpu_test.h"
#include "tools/metrics.h"
#include "common/poison.h"
#include "tools/random_inputs.h"
#include "common/rerun.h"
#include "tools/sampled_mla_reference.h"
#include "fp8dsa/fp8.h"
#include "fp8dsa/lse_merge.h"
#include "fp8dsa/sparse_mla.h"
#include "fp8_run.h"
#include "mla_problem.h"
#include "sparse_mla/launch.h"
#include "sparse_mla/reference_cpu.h"

namespace fp8dsa {
namespace {

using mla_test::kDqk;
using mla_test::kDv;
using mla_test::MlaCase;
using mla_test::MlaProblem;
using mla_test::AccuracyVerdict;
using mla_test::build_reference;
using mla_test::judge_accuracy;
using mla_test::run_and_check_coverage;
using mla_test::run_case;
using mla_test::run_large;

TEST(SparseMlaFp8, SpecShapesH64) {
  FP8DSA_SKIP_WITHOUT_GPU();
  const std::vector<MlaCase> cases = {
      {128, 128, 64, 62},
      {256, 256, 64, 62, true, false, true},
      {592, 128, 64, 213, false, true},
      {1840, 256, 64, 62, true, true, false},
      {1521, 512, 64, 62, false, false, true},
      {95, 128, 64, 1, true, true},
      {153, 256, 64, 62, true, true, true},
      {32, 2048, 64, 4, false, true, false, 0.5f, 2.0f},
      {64, 8192, 64, 1},
  };
  uint64_t seed = 110000;
  for (const MlaCase& c : cases) run_case(c, seed += 10);
}

TEST(SparseMlaFp8, SpecShapesH128) {
  FP8DSA_SKIP_WITHOUT_GPU();
  const std::vector<MlaCase> cases = {
      {128, 128, 128, 213, true},
      {256, 256, 128, 62, false, true, true},
      {1840, 256, 128, 62, true, true, true, 0.25f, 3.0f},
      {1521, 512, 128, 20, true, false, false},
      {153, 256, 128, 1},
      {64, 8192, 128, 1, false, true, true},
  };
  uint64_t seed = 120000;
  for (const MlaCase& c : cases) run_case(c, seed += 10);
}

// Peaked softmax (large scores), repeated keys, many invalid indices, unusual scales.
TEST(SparseMlaFp8, HardNumerics) {
  FP8DSA_SKIP_WITHOUT_GPU();
  MlaCase peaked{4000, 1024, 64, 16, false, true};  // scores up to ~7 (a YaRN-scaled sm_scale)
  peaked.q_range = 3.0f;
  peaked.sm_scale = 0.09f;
  run_case(peaked, 130000);
  MlaCase duplicates{300, 512, 128, 16, true};
  duplicates.distinct = false;
  run_case(duplicates, 130010);
  MlaCase mostly_invalid{5000, 640, 64, 24, false, true, true};
  mostly_invalid.invalid_fraction = 0.9;
  run_case(mostly_invalid, 130020);
  MlaCase scaled{2000, 384, 64, 16};
  scaled.q_scale = 0.03125f;
  scaled.kv_scale = 8.0f;
  scaled.sm_scale = 0.5f;
  run_case(scaled, 130030);
}

// h < 64: the transposed kernel (h = 8, 16; two tokens a CTA, so odd T leaves the last CTA one) or
// the 64-head kernel with rows past h zero (h = 32).
TEST(SparseMlaFp8, SmallHeadCounts) {
  FP8DSA_SKIP_WITHOUT_GPU();
  uint64_t seed = 140000;
  for (int h : {8, 16, 32}) {
    MlaCase c{700, 256, h, 30, true, true, h == 16};
    run_case(c, seed += 10);
    MlaCase strided{1500, 512, h, 17, true, true, true};
    run_case(strided, seed += 10);
    // One token: the transposed kernel's CTA takes two, the second absent.
    run_case(MlaCase{300, 128, h, 1, true, true}, seed += 10);
  }
}

// topk_length is device memory, so it is clamped, not validated (sparse_mla.h): a length below 0
// gives the same outputs as 0 and one above topk the same as topk, bitwise, on both kernels.
TEST(SparseMlaFp8, TopkLengthOutsideRangeIsClamped) {
  FP8DSA_SKIP_WITHOUT_GPU();
  for (SparseMlaKernel kernel : {SparseMlaKernel::kFp8, SparseMlaKernel::kReference}) {
    SCOPED_TRACE(sparse_mla_kernel_name(kernel));
    MlaCase c{700, 256, 64, 4};
    c.kernel = kernel;
    MlaProblem pr;
    mla_test::make_problem(c, 155000, &pr);
    const std::vector<int32_t> outside = {-3, c.topk + 100, INT_MIN, INT_MAX};
    const std::vector<int32_t> clamped = {0, c.topk, 0, c.topk};
    std::vector<uint16_t> out[2];
    std::vector<float> lse[2], max_logits[2];
    for (int run = 0; run < 2; ++run) {
      pr.d_topk_length = tools::DeviceBuffer<int32_t>(run == 0 ? outside : clamped);
      pr.device.topk_length = pr.d_topk_length.get();
      run_and_check_coverage(pr, &out[run], &lse[run], &max_logits[run]);
      if (::testing::Test::HasFatalFailure()) return;
    }
    EXPECT_EQ(out[0], out[1]);
    EXPECT_EQ(0, std::memcmp(lse[0].data(), lse[1].data(), lse[0].size() * sizeof(float)));
    EXPECT_EQ(0, std::memcmp(max_logits[0].data(), max_logits[1].data(), max_logits[0].size() * sizeof(float)));
    for (int h = 0; h < c.num_heads; ++h) EXPECT_EQ(lse[0][h], INFINITY) << h;  // token 0: no key
  }
}

TEST(SparseMlaFp8, EmptyCacheAndZeroTokens) {
  FP8DSA_SKIP_WITHOUT_GPU();
  run_case(MlaCase{0, 128, 64, 5, true, true}, 150000);  // N = 0: every index is invalid
  MlaProblem pr;
  mla_test::make_problem(MlaCase{64, 64, 128, 1}, 150010, &pr);
  SparseMlaParams none = pr.device;
  none.num_tokens = 0;
  FP8DSA_ASSERT_STATUS_OK(sparse_mla_prefill(none));
  FP8DSA_ASSERT_CUDA(cudaDeviceSynchronize());
}

// One valid key: out = kv_scale * V row, lse = max_logits = the score.
TEST(SparseMlaFp8, SingleKeyHandComputed) {
  FP8DSA_SKIP_WITHOUT_GPU();
  MlaCase c{16, 128, 64, 2};
  c.kv_scale = 1.5f;
  MlaProblem pr;
  mla_test::make_problem(c, 160000, &pr);
  std::fill(pr.indices.begin(), pr.indices.end(), -1);
  pr.indices[70] = 7;                               // token 0: key 7, in the second tile
  pr.indices[pr.host.indices_stride + 3] = 11;      // token 1: key 11, in the first tile
  FP8DSA_ASSERT_STATUS_OK(pr.d_indices.upload(pr.indices));
  std::vector<uint16_t> out;
  std::vector<float> lse, max_logits;
  run_and_check_coverage(pr, &out, &lse, &max_logits);
  if (::testing::Test::HasFatalFailure()) return;
  const SparseMlaParams& p = pr.host;
  for (int64_t t = 0; t < 2; ++t) {
    const int64_t key = t == 0 ? 7 : 11;
    for (int head = 0; head < c.num_heads; ++head) {
      double dot = 0.0;
      for (int d = 0; d < kDqk; ++d) {
        dot += double{e4m3_to_float(pr.q[t * p.q_token_stride + head * p.q_head_stride + d])} *
               double{e4m3_to_float(pr.kv[key * p.kv_row_stride + d])};
      }
      const double score = dot * p.q_scale * p.kv_scale * p.sm_scale;
      const int64_t row = t * c.num_heads + head;
      // SPEC 6's lse tolerance: the e4m3 wgmma accumulator (13 mantissa bits) rounds the score.
      EXPECT_NEAR(max_logits[row], score, 2e-3);
      EXPECT_NEAR(lse[row], score, 2e-3);
      for (int d = 0; d < kDv; ++d) {
        const float expected = c.kv_scale * e4m3_to_float(pr.kv[key * p.kv_row_stride + d]);
        const float value = bf16_to_float(out[t * p.out_token_stride + head * p.out_head_stride + d]);
        ASSERT_NEAR(value, expected, 4e-3 * std::abs(expected) + 1e-6) << "t=" << t << " head=" << head << " d=" << d;
      }
    }
  }
}

// A NaN in q reaches every score of its (token, head) row: that row's out, lse and max_logits are
// NaN (header), in the CPU reference as in each kernel (64-head seesaw at h = 128 and 64, the
// small-head kernel at 16 and 8), and every other row is finite and as the reference computes it.
TEST(SparseMlaFp8, NanScoreMakesItsRowNan) {
  FP8DSA_SKIP_WITHOUT_GPU();
  for (int h : {128, 64, 16, 8}) {
    SCOPED_TRACE("h=" + std::to_string(h));
    MlaCase c{512, 256, h, 4};
    MlaProblem pr;
    mla_test::make_problem(c, 180000 + h, &pr);
    const SparseMlaParams& p = pr.host;
    // The NaN goes to a token with a valid key (make_problem may leave a token none).
    int64_t nan_token = -1;
    for (int64_t t = 0; t < c.num_tokens && nan_token < 0; ++t)
      for (int j = 0; j < c.topk; ++j) {
        const int32_t idx = pr.indices[t * p.indices_stride + j];
        if (idx >= 0 && idx < c.num_kv) {
          nan_token = t;
          break;
        }
      }
    ASSERT_GE(nan_token, 0);
    const int64_t nan_head = h / 2 + 1, nan_row = nan_token * h + nan_head;
    pr.q[nan_token * p.q_token_stride + nan_head * p.q_head_stride + 5] = 0x7f;  // e4m3 NaN
    FP8DSA_ASSERT_STATUS_OK(pr.d_q.upload(pr.q));
    FP8DSA_ASSERT_STATUS_OK(sparse_mla_prefill(pr.device));
    const std::vector<uint16_t> out = pr.d_out.download();
    const std::vector<float> lse = pr.d_lse.download(), max_logits = pr.d_max_logits.download();
    std::vector<double> ref_out, ref_lse, ref_max;
    FP8DSA_ASSERT_STATUS_OK(reference::sparse_mla_cpu_f64(p, &ref_out, &ref_lse, &ref_max));
    for (int64_t t = 0; t < c.num_tokens; ++t) {
      for (int64_t head = 0; head < h; ++head) {
        const int64_t row = t * h + head;
        const uint16_t* o = out.data() + t * p.out_token_stride + head * p.out_head_stride;
        if (row == nan_row) {
          EXPECT_TRUE(std::isnan(ref_lse[row]) && std::isnan(ref_max[row]) && std::isnan(ref_out[row * kDv]));
          EXPECT_TRUE(std::isnan(lse[row])) << lse[row];
          EXPECT_TRUE(std::isnan(max_logits[row])) << max_logits[row];
          for (int d = 0; d < kDv; ++d) ASSERT_TRUE(std::isnan(bf16_to_float(o[d]))) << "d=" << d;
          continue;
        }
        if (!std::isfinite(ref_lse[row])) {  // a token whose keys are all invalid: the marker, exactly
          EXPECT_EQ(lse[row], INFINITY) << "row " << row;
          continue;
        }
        EXPECT_NEAR(lse[row], ref_lse[row], 5e-3) << "row " << row;
        EXPECT_NEAR(max_logits[row], ref_max[row], 5e-3) << "row " << row;
        for (int d = 0; d < kDv; ++d) ASSERT_TRUE(std::isfinite(bf16_to_float(o[d]))) << "row " << row << " d=" << d;
      }
    }
  }
}

// Realistic inputs (tools/mla_workload.h): selections in relevance order that overlap between
// neighbouring tokens, scores with a std across keys of about 1, 3 and 10 (10: peaked, mean max
// probability ~0.5), against the f64 reference with SPEC 6's bound for each row's spread.
TEST(SparseMlaFp8, RealisticScoresSmall) {
  FP8DSA_SKIP_WITHOUT_GPU();
  uint64_t seed = 145000;
  for (int h : {128, 64, 32, 16}) {
    for (double score_std : {1.0, 3.0, 10.0}) {
      MlaCase c{4096, 512, h, 40, h == 64, h == 128, h == 16};
      c.score_std = score_std;
      run_case(c, seed += 10);
    }
    if (h >= 64) {  // random values: scores unrelated to the selection order
      MlaCase c{4096, 512, h, 40, h == 64, h == 128};
      c.score_std = 3.5;
      c.values = tools::MlaValues::kRandom;
      run_case(c, seed += 10);
    }
  }
}

// SPEC 8's large case, T = 4096, N = 65536, topk = 2048, on realistic scores and on the uniform data
// of the earlier tests, every 16th token against the f64 reference.
TEST(SparseMlaFp8, LargeH128) {
  FP8DSA_SKIP_WITHOUT_GPU();
  MlaCase c{65536, 2048, 128, 4096, true, true};
  c.score_std = 3.0;
  run_large(c, 170000, 16);
}

TEST(SparseMlaFp8, LargeH64) {
  FP8DSA_SKIP_WITHOUT_GPU();
  MlaCase c{65536, 2048, 64, 4096, true, true};
  c.invalid_fraction = 0.02;
  run_large(c, 170010, 16);
  c.score_std = 10.0;
  run_large(c, 170015, 16);
}

TEST(SparseMlaFp8, LargeH16) {
  FP8DSA_SKIP_WITHOUT_GPU();
  MlaCase c{65536, 2048, 16, 4096, true, true};
  c.score_std = 3.0;
  run_large(c, 170020, 16);
}

// The 64-head kernel's last wave in key parts merged by lse (tail_split.h): never split, the
// planner's choice, and forced splits into 2, 3 (the last part short), 4 and 16 parts, on ragged
// lengths (parts with no valid key) and sinks, at h = 128 and 64 with T = 140 (a last wave of 16 and
// 8 CTAs on 132 SMs), every other token against the f64 reference; the same rules as the large
// cases (every output written, bitwise reruns).
TEST(SparseMlaFp8, TailSplitParts) {
  FP8DSA_SKIP_WITHOUT_GPU();
  std::vector<detail::sparse_mla::Fp8Tuning> tunings;
  for (int parts : {1, 0, 2, 3, 4, 16}) {
    detail::sparse_mla::Fp8Tuning t;
    t.tail_parts = parts;
    tunings.push_back(t);
  }
  for (int h : {128, 64}) {
    MlaCase c{8192, 2048, h, 140, true, true};
    c.score_std = 3.0;
    run_large(c, 171000 + h, 2, tunings);
    MlaCase u{3000, 640, h, 140, true, true};  // uniform data, 640 positions: parts of 128 / 256 / 384
    run_large(u, 171500 + h, 2, tunings);
  }
}

// Both h < 64 paths on one problem each: the transposed kernel (h = 8, 16) and the 64-head kernel
// with its rows past h zero (kept as the yardstick the transposed kernel is measured against).
TEST(SparseMlaFp8, SmallHeadsTransposedAndPadded) {
  FP8DSA_SKIP_WITHOUT_GPU();
  for (int h : {8, 16}) {
    MlaCase c{8192, 2048, h, 512, true, true};
    c.score_std = 3.0;
    run_large(c, 170030 + h, 4,
              {{detail::sparse_mla::kDefaultQkChains, detail::sparse_mla::SmallHeads::kTransposed},
               {detail::sparse_mla::kDefaultQkChains, detail::sparse_mla::SmallHeads::kPadded}});
  }
}

// The e4m3 wgmma accumulator keeps ~13 mantissa bits, so QK^T runs as kDefaultQkChains chains
// added in f32. SPEC 6 judges that error against the e4m3 rounding of the inputs themselves: on
// realistic values (flat, std 3; peaked, std 10) and random-valued ones whose scores do not follow
// the selection order (std 3.5), T = 512 over N = 32K, every 4th token against both f64 references.
// Prints every instantiated chain count (the tradeoff behind the default) and requires the bound of
// the default.
TEST(SparseMlaFp8, AccuracyAgainstRounding) {
  FP8DSA_SKIP_WITHOUT_GPU();
  std::vector<detail::sparse_mla::Fp8Tuning> tunings;
  for (int chains : detail::sparse_mla::kSeesawQkChainChoices) tunings.push_back({chains, detail::sparse_mla::SmallHeads::kDefault});
  for (int h : {128, 64}) {
    for (const auto& [values, score_std] : {std::pair{tools::MlaValues::kRealistic, 3.0},
                                            std::pair{tools::MlaValues::kRealistic, 10.0},
                                            std::pair{tools::MlaValues::kRandom, 3.5}}) {
      MlaCase c{32768, 2048, h, 512};
      c.score_std = score_std;
      c.values = values;
      run_large(c, 175000 + h + static_cast<uint64_t>(score_std), 4, tunings);
    }
  }
}

// Context parallel on one GPU: the keys split into R parts (row % R == r), each part through the
// FP8 kernel without the sink into one stacked buffer, merged by lse_merge with the sink: SPEC 6
// against the f64 reference of the whole problem (both row formats).
TEST(SparseMlaFp8, KeySplitMergedByLse) {
  FP8DSA_SKIP_WITHOUT_GPU();
  for (KvFormat format : {KvFormat::kE4m3, KvFormat::kDeepSeekV32}) {
    MlaCase c{4096, 512, 128, 40, true, true};
    c.score_std = 3.0;
    c.kv_format = format;
    MlaProblem pr;
    mla_test::make_problem(c, 196000, &pr);
    tools::SampledMlaReference ref;
    FP8DSA_ASSERT_STATUS_OK(build_reference(pr, 1, &ref));
    const int64_t rows = pr.host.num_tokens * pr.host.num_heads;
    for (int parts : {2, 4}) {
      SCOPED_TRACE(c.name() + " parts=" + std::to_string(parts));
      tools::DeviceBuffer<uint16_t> out_parts(static_cast<size_t>(parts * rows * kDv));
      tools::DeviceBuffer<float> lse_parts(static_cast<size_t>(parts * rows)), max_parts(lse_parts.size());
      for (int r = 0; r < parts; ++r) {
        std::vector<int32_t> indices = pr.indices;
        for (int32_t& i : indices) {
          if (i >= 0 && i < pr.host.num_kv && i % parts != r) i = -1;
        }
        tools::DeviceBuffer<int32_t> d_indices(indices);
        SparseMlaParams p = pr.device;
        p.indices = d_indices.get();
        p.attn_sink = nullptr;
        p.out = out_parts.get() + r * rows * kDv;
        p.out_token_stride = 0;
        p.out_head_stride = 0;
        p.lse = lse_parts.get() + r * rows;
        p.max_logits = max_parts.get() + r * rows;
        FP8DSA_ASSERT_STATUS_OK(sparse_mla_prefill(p));
        FP8DSA_ASSERT_CUDA(cudaDeviceSynchronize());  // d_indices goes out of scope
      }
      LseMergeParams m;
      m.num_tokens = pr.host.num_tokens;
      m.num_heads = pr.host.num_heads;
      m.num_parts = parts;
      m.out_parts = out_parts.get();
      m.lse_parts = lse_parts.get();
      m.max_logits_parts = max_parts.get();
      m.attn_sink = pr.device.attn_sink;
      m.out = pr.d_out.get();
      m.out_token_stride = pr.device.out_token_stride;
      m.out_head_stride = pr.device.out_head_stride;
      m.lse = pr.d_lse.get();
      m.max_logits = pr.d_max_logits.get();
      FP8DSA_ASSERT_STATUS_OK(lse_merge(m));
      const std::vector<uint16_t> out = pr.d_out.download();
      const std::vector<float> lse = pr.d_lse.download(), max_logits = pr.d_max_logits.download();
      const AccuracyVerdict verdict = judge_accuracy(c, pr, ref, out, lse, max_logits,
                                                     c.name() + " merged from " + std::to_string(parts) + " key parts");
      EXPECT_TRUE(verdict.passed) << verdict.description;
    }
  }
}

TEST(SparseMlaFp8, RejectsBadArguments) {
  FP8DSA_SKIP_WITHOUT_GPU();
  MlaProblem pr;
  mla_test::make_problem(MlaCase{300, 128, 64, 4}, 180000, &pr);
  SparseMlaParams bad = pr.device;
  bad.topk = 100;
  EXPECT_EQ(sparse_mla_prefill(bad).code(), StatusCode::kInvalidArgument);
  bad = pr.device;
  bad.lse = nullptr;
  EXPECT_EQ(sparse_mla_prefill(bad).code(), StatusCode::kInvalidArgument);
  bad = pr.device;
  bad.kv_row_stride = 584;  // not a multiple of 16
  EXPECT_EQ(sparse_mla_prefill(bad).code(), StatusCode::kInvalidArgument);
  bad = pr.device;
  bad.num_heads = 48;  // not a SPEC head count
  bad.q_token_stride = 0;
  bad.out_token_stride = 0;
  EXPECT_EQ(sparse_mla_prefill(bad).code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace fp8dsa
