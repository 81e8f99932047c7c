// float <-> e4m3 / bf16 host conversions against the CUDA toolkit's own host conversions, bit for
// bit, plus hand-computed values.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include <cuda_bf16.h>
#include <cuda_fp8.h>

#include "fp8dsa/fp8.h"

namespace fp8dsa {
namespace {

uint8_t toolkit_e4m3(float x) {
  return static_cast<uint8_t>(__nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3));
}

float toolkit_e4m3_decode(uint8_t code) {
  __nv_fp8_e4m3 v;
  v.__x = code;
  return static_cast<float>(v);
}

uint16_t toolkit_bf16(float x) {
  return static_cast<__nv_bfloat16_raw>(__float2bfloat16(x)).x;
}

uint32_t bits_of(float x) { return std::bit_cast<uint32_t>(x); }
float from_bits(uint32_t b) { return std::bit_cast<float>(b); }

bool is_e4m3_nan(uint8_t code) { return (code & 0x7F) == 0x7F; }

TEST(Fp8, DecodeAllCodesMatchesToolkit) {
  for (int c = 0; c < 256; ++c) {
    const uint8_t code = static_cast<uint8_t>(c);
    EXPECT_EQ(bits_of(e4m3_to_float(code)), bits_of(toolkit_e4m3_decode(code)))
        << "code 0x" << std::hex << c;
  }
}

TEST(Fp8, EncodeDecodeRoundTripsEveryNonNanCode) {
  for (int c = 0; c < 256; ++c) {
    const uint8_t code = static_cast<uint8_t>(c);
    if (is_e4m3_nan(code)) continue;
    EXPECT_EQ(float_to_e4m3(e4m3_to_float(code)), code) << "code 0x" << std::hex << c;
  }
}

TEST(Fp8, DecodeHandValues) {
  EXPECT_EQ(e4m3_to_float(0x38), 1.0f);
  EXPECT_EQ(e4m3_to_float(0x7E), 448.0f);
  EXPECT_EQ(e4m3_to_float(0xFE), -448.0f);
  EXPECT_EQ(e4m3_to_float(0x01), 0.001953125f);  // 2^-9, smallest subnormal
  EXPECT_EQ(e4m3_to_float(0x07), 7.0f / 512.0f);  // largest subnormal
  EXPECT_EQ(e4m3_to_float(0x08), 0.015625f);      // 2^-6, smallest normal
  EXPECT_EQ(e4m3_to_float(0x3B), 1.375f);
  EXPECT_EQ(bits_of(e4m3_to_float(0x80)), 0x80000000u);  // -0
  EXPECT_TRUE(std::isnan(e4m3_to_float(0x7F)));
  EXPECT_TRUE(std::isnan(e4m3_to_float(0xFF)));
}

TEST(Fp8, EncodeHandValues) {
  EXPECT_EQ(float_to_e4m3(1.0f), 0x38);
  EXPECT_EQ(float_to_e4m3(-1.0f), 0xB8);
  EXPECT_EQ(float_to_e4m3(448.0f), 0x7E);
  EXPECT_EQ(float_to_e4m3(0.001953125f), 0x01);
  EXPECT_EQ(float_to_e4m3(500.0f), 0x7E);  // saturates
  EXPECT_EQ(float_to_e4m3(-500.0f), 0xFE);
  EXPECT_EQ(float_to_e4m3(464.0f), 0x7E);  // 448 + half ulp: tie to the even mantissa of 448
  EXPECT_EQ(float_to_e4m3(1e30f), 0x7E);
  // Ties between neighbours go to the even code.
  EXPECT_EQ(float_to_e4m3(1.0625f), 0x38);  // 1.0 (0x38) | 1.125 (0x39)
  EXPECT_EQ(float_to_e4m3(1.1875f), 0x3A);  // 1.125 (0x39) | 1.25 (0x3A)
  EXPECT_EQ(float_to_e4m3(232.0f), 0x76);   // 224 (0x76) | 240 (0x77)
  EXPECT_EQ(float_to_e4m3(248.0f), 0x78);   // 240 (0x77) | 256 (0x78)
  EXPECT_EQ(float_to_e4m3(3.0f / 1024.0f), 0x02);     // subnormal tie 0x01 | 0x02
  EXPECT_EQ(float_to_e4m3(5.0f / 1024.0f), 0x02);     // subnormal tie 0x02 | 0x03
  EXPECT_EQ(float_to_e4m3(15.0f / 1024.0f), 0x08);    // 0x07 | 0x08 (first normal)
  EXPECT_EQ(float_to_e4m3(1.0f / 1024.0f), 0x00);     // half the smallest subnormal: to 0
  EXPECT_EQ(float_to_e4m3(-1.0f / 1024.0f), 0x80);
  EXPECT_EQ(float_to_e4m3(std::nextafter(1.0f / 1024.0f, 1.0f)), 0x01);
  EXPECT_EQ(float_to_e4m3(std::nextafter(1.0625f, 2.0f)), 0x39);
  // Specials, as the toolkit maps them: inf saturates, NaN of either sign is 0x7F.
  EXPECT_EQ(float_to_e4m3(0.0f), 0x00);
  EXPECT_EQ(float_to_e4m3(-0.0f), 0x80);
  EXPECT_EQ(float_to_e4m3(std::numeric_limits<float>::infinity()), 0x7E);
  EXPECT_EQ(float_to_e4m3(-std::numeric_limits<float>::infinity()), 0xFE);
  EXPECT_EQ(float_to_e4m3(std::numeric_limits<float>::quiet_NaN()), 0x7F);
  EXPECT_EQ(float_to_e4m3(-std::numeric_limits<float>::quiet_NaN()), 0x7F);
  EXPECT_EQ(float_to_e4m3(std::numeric_limits<float>::denorm_min()), 0x00);
  EXPECT_EQ(float_to_e4m3(-std::numeric_limits<float>::denorm_min()), 0x80);
}

// Inputs covering every branch of the conversion: random bit patterns, each magnitude band,
// exact ties between neighbouring e4m3 values and their f32 neighbours, and the special values.
std::vector<float> encode_inputs() {
  std::mt19937 rng(20240611);
  std::vector<float> xs;
  xs.reserve(1'300'000);
  auto sign = [&](float x) { return (rng() & 1u) ? -x : x; };
  auto log_uniform = [&](float lo, float hi) {
    std::uniform_real_distribution<double> e(std::log2(lo), std::log2(hi));
    return static_cast<float>(std::exp2(e(rng)));
  };
  for (int i = 0; i < 300'000; ++i) xs.push_back(from_bits(rng()));       // any f32, NaNs too
  for (int i = 0; i < 200'000; ++i) xs.push_back(sign(log_uniform(1e-5f, 0.015625f)));  // subnormal
  for (int i = 0; i < 300'000; ++i) xs.push_back(sign(log_uniform(0.015625f, 448.0f)));  // normal
  for (int i = 0; i < 100'000; ++i) xs.push_back(sign(log_uniform(448.0f, 1e6f)));       // above
  for (int i = 0; i < 50'000; ++i) {
    std::uniform_real_distribution<float> near(440.0f, 470.0f);  // the saturation edge
    xs.push_back(sign(near(rng)));
  }
  for (int i = 0; i < 50'000; ++i) {  // f32 subnormals and tiny normals
    xs.push_back(from_bits((rng() & 0x807FFFFFu)));
    xs.push_back(sign(log_uniform(1e-38f, 1e-5f)));
  }
  // Midpoints between every pair of neighbouring finite e4m3 magnitudes, and one f32 ulp either
  // side, both signs. 464 (448 + half ulp) is included as the last midpoint.
  for (int c = 0; c <= 0x7E; ++c) {
    const float lo = e4m3_to_float(static_cast<uint8_t>(c));
    const float hi = c < 0x7E ? e4m3_to_float(static_cast<uint8_t>(c + 1)) : 480.0f;
    const float mid = 0.5f * (lo + hi);  // exact: both have <= 4 significant bits
    for (float m : {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 1e9f), lo, hi}) {
      for (int rep = 0; rep < 100; ++rep) {
        xs.push_back(m);
        xs.push_back(-m);
      }
    }
  }
  const float inf = std::numeric_limits<float>::infinity();
  for (float s : {0.0f, -0.0f, inf, -inf, std::numeric_limits<float>::quiet_NaN(),
                  -std::numeric_limits<float>::quiet_NaN(), from_bits(0x7F800001u),
                  from_bits(0xFFBADBADu), std::numeric_limits<float>::max(),
                  -std::numeric_limits<float>::max(), std::numeric_limits<float>::min(),
                  std::numeric_limits<float>::denorm_min()}) {
    xs.push_back(s);
  }
  return xs;
}

TEST(Fp8, EncodeMatchesToolkitOnMillionsOfInputs) {
  const std::vector<float> xs = encode_inputs();
  ASSERT_GE(xs.size(), 1'000'000u);
  size_t mismatches = 0;
  size_t ties_seen = 0;
  for (float x : xs) {
    const uint8_t ours = float_to_e4m3(x);
    const uint8_t theirs = toolkit_e4m3(x);
    // The class constructor is the conversion users call; it must agree with the free function.
    ASSERT_EQ(__nv_fp8_e4m3(x).__x, theirs);
    if (ours != theirs && ++mismatches <= 10) {
      ADD_FAILURE() << "x = " << x << " (bits 0x" << std::hex << bits_of(x) << "): ours 0x"
                    << int{ours} << ", toolkit 0x" << int{theirs};
    }
    if (std::isfinite(x) && std::fabs(x) < 464.0f && x != 0.0f) {
      const float back = e4m3_to_float(ours);
      const float other = e4m3_to_float(static_cast<uint8_t>(ours ^ 1u));
      if (std::fabs(back - x) == std::fabs(other - x)) ++ties_seen;
    }
  }
  EXPECT_EQ(mismatches, 0u) << "of " << xs.size();
  EXPECT_GT(ties_seen, 10'000u);  // the tie inputs really were ties
}

TEST(Fp8, EncodeIsNearestAndSaturates) {
  // Independent of the toolkit: every finite input within range maps to a nearest e4m3 value.
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-460.0f, 460.0f);
  for (int i = 0; i < 100'000; ++i) {
    const float x = u(rng);
    const float y = e4m3_to_float(float_to_e4m3(x));
    float best = std::numeric_limits<float>::infinity();
    for (int c = 0; c < 256; ++c) {
      if (is_e4m3_nan(static_cast<uint8_t>(c))) continue;
      best = std::fmin(best, std::fabs(e4m3_to_float(static_cast<uint8_t>(c)) - x));
    }
    ASSERT_EQ(std::fabs(y - x), best) << "x = " << x;
  }
}

TEST(Fp8, BulkFormsMatchScalar) {
  std::mt19937 rng(11);
  std::normal_distribution<float> n(0.0f, 50.0f);
  std::vector<float> in(4099);
  for (float& x : in) x = n(rng);
  std::vector<uint8_t> codes(in.size());
  floats_to_e4m3(in.data(), codes.data(), in.size());
  std::vector<float> back(in.size());
  e4m3_to_floats(codes.data(), back.data(), codes.size());
  for (size_t i = 0; i < in.size(); ++i) {
    ASSERT_EQ(codes[i], float_to_e4m3(in[i])) << i;
    ASSERT_EQ(bits_of(back[i]), bits_of(e4m3_to_float(codes[i]))) << i;
  }
}

TEST(Bf16, HandValuesAndTies) {
  EXPECT_EQ(float_to_bf16(1.0f), 0x3F80);
  EXPECT_EQ(float_to_bf16(-2.5f), 0xC020);
  EXPECT_EQ(float_to_bf16(0.0f), 0x0000);
  EXPECT_EQ(float_to_bf16(-0.0f), 0x8000);
  const float ulp = 1.0f / 128.0f;  // bf16 ulp at 1.0
  EXPECT_EQ(float_to_bf16(1.0f + 0.5f * ulp), 0x3F80);  // tie -> even 0x3F80
  EXPECT_EQ(float_to_bf16(1.0f + 1.5f * ulp), 0x3F82);  // tie -> even 0x3F82
  EXPECT_EQ(float_to_bf16(std::nextafter(1.0f + 0.5f * ulp, 2.0f)), 0x3F81);
  EXPECT_EQ(float_to_bf16(std::nextafter(1.0f + 1.5f * ulp, 0.0f)), 0x3F81);
  EXPECT_EQ(float_to_bf16(-(1.0f + 1.5f * ulp)), 0xBF82);
  EXPECT_EQ(float_to_bf16(std::numeric_limits<float>::max()), 0x7F80);  // rounds up to inf
  EXPECT_EQ(float_to_bf16(std::numeric_limits<float>::infinity()), 0x7F80);
  EXPECT_EQ(float_to_bf16(-std::numeric_limits<float>::infinity()), 0xFF80);
  EXPECT_EQ(float_to_bf16(from_bits(0x7F7F7FFFu)), 0x7F7F);  // largest finite bf16 stays
  const uint16_t nan = float_to_bf16(std::numeric_limits<float>::quiet_NaN());
  EXPECT_TRUE(std::isnan(bf16_to_float(nan)));
  // A NaN whose payload sits only in the low 16 bits must not truncate to inf.
  EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(from_bits(0x7F800001u)))));
  EXPECT_EQ(bf16_to_float(0x3F80), 1.0f);
  EXPECT_EQ(bf16_to_float(0xC020), -2.5f);
}

TEST(Bf16, RoundTripsEveryCode) {
  for (uint32_t c = 0; c < 65536; ++c) {
    const float x = bf16_to_float(static_cast<uint16_t>(c));
    if (std::isnan(x)) continue;
    ASSERT_EQ(float_to_bf16(x), c) << std::hex << c;
  }
}

TEST(Bf16, MatchesToolkit) {
  std::mt19937 rng(3);
  for (int i = 0; i < 1'000'000; ++i) {
    uint32_t b = rng();
    if (i % 4 == 0) b = (b & 0xFFFF0000u) | 0x8000u;  // exact ties
    const float x = from_bits(b);
    ASSERT_EQ(float_to_bf16(x), toolkit_bf16(x)) << "bits 0x" << std::hex << b;
  }
}

}  // namespace
}  // namespace fp8dsa
