// tools/v32_rows.h: the V3.2 row quantiser against the e4m3 / bf16 rounding bounds, and the
// realistic V3.2-format workload (its layout, its spread of block scales, the sampled reference on it).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "fp8dsa/fp8.h"
#include "fp8dsa/sparse_mla.h"
#include "sparse_mla/reference_cpu.h"
#include "tools/mla_workload.h"
#include "tools/random_inputs.h"
#include "tools/sampled_mla_reference.h"
#include "tools/v32_rows.h"
#include "reference_run.h"

namespace fp8dsa {
namespace {

constexpr int kDqk = 576, kNope = 512, kBlocks = 4;

float scale_of(const uint8_t* row, int block) {
  float s;
  std::memcpy(&s, row + kV32ScaleOffset + 4 * block, 4);
  return s;
}

TEST(V32Rows, RoundTripWithinTheRoundingBounds) {
  // Blocks of very different magnitudes, one with a single non-zero value, and a rope of its own.
  const float magnitudes[kBlocks] = {1e-3f, 1.0f, 37.0f, 2e4f};
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    std::vector<float> values = tools::random_f32(kDqk, seed, -1.0f, 1.0f);
    for (int c = 0; c < kNope; ++c) values[c] *= magnitudes[c / kV32ScaleBlock];
    if (seed % 4 == 0) std::fill(values.begin() + 128, values.begin() + 255, 0.0f);
    for (int c = kNope; c < kDqk; ++c) values[c] *= 3.0f;
    std::vector<uint8_t> row(kV32RowBytes);
    std::vector<float> back(kDqk);
    tools::quantize_v32_row(values.data(), row.data());
    tools::dequantize_v32_row(row.data(), back.data());
    for (int b = 0; b < kBlocks; ++b) {
      float amax = 0.0f;
      for (int c = b * 128; c < (b + 1) * 128; ++c) amax = std::max(amax, std::abs(values[c]));
      const float scale = scale_of(row.data(), b);
      EXPECT_EQ(scale, amax / 448.0f) << b;
      for (int c = b * 128; c < (b + 1) * 128; ++c) {
        // e4m3 RNE: half an ulp of 3 mantissa bits (2^-4 relative) for normals, half the subnormal
        // step 2^-9 below 2^-6, both in units of the scale; then the f32 product's rounding.
        const double bound = std::ldexp(std::abs(values[c]), -4) + std::ldexp(double{scale}, -10) +
                             1e-7 * std::abs(values[c]);
        ASSERT_LE(std::abs(double{back[c]} - values[c]), bound) << "seed " << seed << ", column " << c;
        if (std::abs(values[c]) == amax) EXPECT_NEAR(back[c], values[c], 1e-6 * amax);  // 448 exactly
      }
    }
    for (int c = kNope; c < kDqk; ++c) {
      EXPECT_EQ(back[c], bf16_to_float(float_to_bf16(values[c])));
      EXPECT_LE(std::abs(back[c] - values[c]), std::ldexp(std::abs(values[c]), -8));
    }
  }
}

TEST(V32Rows, ZeroAndUnderflowingBlocksGetScaleZero) {
  std::vector<float> values(kDqk, 0.5f);
  std::fill(values.begin(), values.begin() + 128, 0.0f);
  std::fill(values.begin() + 128, values.begin() + 256, 1e-44f);  // f32 subnormal: amax / 448 is 0
  values[300] = -1e30f;                                             // saturation: the block max is 448
  std::vector<uint8_t> row(kV32RowBytes, 0xAA);
  std::vector<float> back(kDqk);
  tools::quantize_v32_row(values.data(), row.data());
  tools::dequantize_v32_row(row.data(), back.data());
  for (int b = 0; b < 2; ++b) {
    EXPECT_EQ(scale_of(row.data(), b), 0.0f);
    for (int c = b * 128; c < (b + 1) * 128; ++c) {
      EXPECT_EQ(row[c], 0) << c;
      EXPECT_EQ(back[c], 0.0f) << c;
    }
  }
  EXPECT_EQ(row[300], 0xFE);  // -448
  EXPECT_NEAR(back[300], -1e30f, 1e24f);
  EXPECT_EQ(back[301], 0.0f);  // 0.5 is far below half the smallest subnormal step of 1e30 / 448
}

TEST(V32Rows, WorkloadInTheV32Format) {
  tools::MlaWorkloadSpec spec;
  spec.num_tokens = 24;
  spec.num_kv = 600;
  spec.num_heads = 16;
  spec.topk = 128;
  const tools::MlaWorkload w = tools::make_mla_workload(spec);
  const tools::V32Workload v = tools::make_v32_workload(w, 7);
  ASSERT_EQ(v.kv.size(), size_t{600} * kV32RowBytes);
  ASSERT_EQ(v.kv_dequant_bf16.size(), size_t{600} * kDqk);
  ASSERT_EQ(v.q_bf16.size(), w.q.size());

  // Each block's dequantised values are the e4m3 workload's times one factor (up to the e4m3 rounding
  // of the requantisation); the log factors have about block_sigma's std.
  double sum = 0.0, sum_sq = 0.0;
  int blocks = 0;
  std::vector<float> values(kDqk);
  for (int64_t n = 0; n < spec.num_kv; ++n) {
    const uint8_t* row = v.kv.data() + n * kV32RowBytes;
    tools::dequantize_v32_row(row, values.data());
    for (int c = 0; c < kDqk; ++c) {
      ASSERT_EQ(v.kv_dequant_bf16[n * kDqk + c], float_to_bf16(values[c])) << n << ", " << c;
    }
    for (int b = 0; b < kBlocks; ++b) {
      float amax = 0.0f;  // of the e4m3 workload's block
      for (int c = b * 128; c < (b + 1) * 128; ++c) amax = std::max(amax, std::abs(e4m3_to_float(w.kv[n * kDqk + c])));
      const double log_factor = std::log(448.0 * scale_of(row, b) / amax);
      sum += log_factor;
      sum_sq += log_factor * log_factor;
      ++blocks;
    }
  }
  const double mean = sum / blocks, std = std::sqrt(sum_sq / blocks - mean * mean);
  EXPECT_NEAR(mean, 0.0, 0.1);
  EXPECT_NEAR(std, 0.5, 0.1);
  for (size_t i = 0; i < w.q.size(); ++i) {
    const float q = e4m3_to_float(w.q[i]);
    ASSERT_LE(std::abs(bf16_to_float(v.q_bf16[i]) - q), 0.05f * std::abs(q)) << i;
  }

  // The params validate, and the sampled reference runs on them as on the e4m3 format.
  SparseMlaParams p = tools::v32_mla_params(w, v, 8);
  EXPECT_EQ(p.kv_format, KvFormat::kDeepSeekV32);
  std::vector<uint16_t> out(size_t{24} * 8 * 512);
  std::vector<float> lse(24 * 8), max_logits(24 * 8);
  p.out = out.data();
  p.lse = lse.data();
  p.max_logits = max_logits.data();
  ASSERT_TRUE(reference::sparse_mla_cpu(p).is_ok()) << reference::sparse_mla_cpu(p).to_string();
  tools::SampledMlaReference ref;
  ASSERT_TRUE(ref.build(p, 5).is_ok());
  const tools::SparseMlaCheck check = ref.check(out.data(), lse.data(), max_logits.data());
  EXPECT_TRUE(check.passed) << check.description;
  EXPECT_THROW(tools::v32_mla_params(w, tools::V32Workload{}, 8), std::invalid_argument);
}

// From a workload with its unrounded values, the V3.2 form keeps its own (the values its bf16 q and
// quantised rows round), and the CPU reference's output passes the check against that rounding.
TEST(V32Rows, UnroundedValuesAndTheRoundingCheck) {
  tools::MlaWorkloadSpec spec;
  spec.num_tokens = 12;
  spec.num_kv = 384;
  spec.num_heads = 8;
  spec.topk = 128;
  spec.score_std = 3.0;
  spec.unrounded_every = 1;
  const tools::MlaWorkload w = tools::make_mla_workload(spec);
  const tools::V32Workload v = tools::make_v32_workload(w, 5);
  ASSERT_EQ(v.q_unrounded.size(), v.q_bf16.size());
  ASSERT_EQ(v.kv_unrounded.size(), w.kv.size());
  for (size_t i = 0; i < v.q_bf16.size(); ++i) ASSERT_EQ(float_to_bf16(v.q_unrounded[i]), v.q_bf16[i]) << i;
  std::vector<uint8_t> row(kV32RowBytes);
  for (int64_t n = 0; n < spec.num_kv; ++n) {
    tools::quantize_v32_row(v.kv_unrounded.data() + n * kDqk, row.data());
    ASSERT_EQ(0, std::memcmp(row.data(), v.kv.data() + n * kV32RowBytes, kV32RowBytes)) << n;
  }
  EXPECT_TRUE(tools::make_v32_workload(tools::make_mla_workload([&] {
                auto s = spec;
                s.unrounded_every = 0;
                return s;
              }()), 5).q_unrounded.empty());

  tools_test::ReferenceRun run;
  tools_test::run_reference(tools::v32_mla_params(w, v, spec.num_heads), v.q_unrounded.data(), v.kv_unrounded.data(),
                            &run);
  if (::testing::Test::HasFatalFailure()) return;
  const tools::RoundingCheck c = run.check();
  EXPECT_TRUE(c.passed) << c.description;
  EXPECT_GT(c.rounding_max_lse_error, 1e-3) << c.description;  // bf16 q and the V3.2 quantisation
  EXPECT_LT(c.kernel.max_lse_error, 1e-5) << c.description;
}

}  // namespace
}  // namespace fp8dsa
