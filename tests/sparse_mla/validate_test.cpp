// validate(SparseMlaParams): every rule accepts the good case and rejects each bad variant with the
// right code and a message naming the argument. Pointers are never dereferenced.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

#include "common/valid_params.h"
#include "common/validation.h"
#include "fp8dsa/sparse_mla.h"

namespace fp8dsa {
namespace {

using testing::at;

void expect_rejected(const SparseMlaParams& p, StatusCode code, const std::string& needle) {
  testing::expect_rejected(p, code, needle, "sparse_mla: ");
}

SparseMlaParams good_params() {
  return testing::valid_sparse_mla_params();
}

TEST(SparseMlaValidate, AcceptsGoodParams) {
  EXPECT_TRUE(validate(good_params()).is_ok()) << validate(good_params()).to_string();
  for (int h : {8, 16, 32, 64, 128}) {
    SparseMlaParams p = good_params();
    p.num_heads = h;
    EXPECT_TRUE(validate(p).is_ok()) << validate(p).to_string();
  }
  for (int topk : {64, 128, 2048, 8192, 16384}) {
    SparseMlaParams p = good_params();
    p.topk = topk;
    EXPECT_TRUE(validate(p).is_ok()) << validate(p).to_string();
  }
  SparseMlaParams p = good_params();  // optional inputs and padded strides
  p.topk_length = at<const int32_t>(1280);
  p.attn_sink = at<const float>(1536);
  p.max_logits = at<float>(1792);
  p.q_head_stride = 592;
  p.q_token_stride = 128 * 592 + 16;
  p.kv_row_stride = 656;
  p.indices_stride = 257;
  p.out_head_stride = 520;
  p.out_token_stride = 128 * 520 + 8;
  p.q_scale = 0.5f;
  p.kv_scale = 3.0f;
  EXPECT_TRUE(validate(p).is_ok()) << validate(p).to_string();
}

TEST(SparseMlaValidate, ResolvedFillsPackedStrides) {
  SparseMlaParams p = good_params();
  p.num_heads = 16;
  SparseMlaParams r = p.resolved();
  EXPECT_EQ(r.q_head_stride, 576);
  EXPECT_EQ(r.q_token_stride, 16 * 576);
  EXPECT_EQ(r.kv_row_stride, 576);
  EXPECT_EQ(r.indices_stride, 256);
  EXPECT_EQ(r.out_head_stride, 512);
  EXPECT_EQ(r.out_token_stride, 16 * 512);
  p.q_head_stride = 640;  // the token stride follows the given head stride
  p.out_head_stride = 528;
  r = p.resolved();
  EXPECT_EQ(r.q_token_stride, 16 * 640);
  EXPECT_EQ(r.out_token_stride, 16 * 528);
}

TEST(SparseMlaValidate, EmptyCases) {
  SparseMlaParams p;
  p.num_tokens = 0;
  p.sm_scale = 0.1f;
  EXPECT_TRUE(validate(p).is_ok()) << validate(p).to_string();
  SparseMlaParams q = good_params();  // no kv rows: every index is invalid, kv may be null
  q.num_kv = 0;
  q.kv = nullptr;
  EXPECT_TRUE(validate(q).is_ok()) << validate(q).to_string();
}

TEST(SparseMlaValidate, RejectsBadSizes) {
  SparseMlaParams p = good_params();
  p.num_tokens = -1;
  expect_rejected(p, StatusCode::kInvalidArgument, "num_tokens (-1)");
  p = good_params();
  p.num_kv = int64_t{1} << 33;
  expect_rejected(p, StatusCode::kInvalidArgument, "num_kv (8589934592)");
}

TEST(SparseMlaValidate, RejectsBadHeads) {
  for (int h : {0, 4, 24, 256}) {
    SparseMlaParams p = good_params();
    p.num_heads = h;
    expect_rejected(p, StatusCode::kInvalidArgument, "num_heads (" + std::to_string(h) + ")");
  }
}

TEST(SparseMlaValidate, HeadDims) {
  SparseMlaParams p = good_params();
  p.d_qk = 512;
  expect_rejected(p, StatusCode::kNotImplemented, "d_qk (512)");
  EXPECT_NE(validate(p).message().find("later stage"), std::string::npos);
  p.d_qk = 320;
  expect_rejected(p, StatusCode::kInvalidArgument, "d_qk (320)");
  p = good_params();
  p.d_v = 256;
  expect_rejected(p, StatusCode::kInvalidArgument, "d_v (256)");
}

TEST(SparseMlaValidate, RejectsBadTopk) {
  SparseMlaParams p = good_params();
  p.topk = 100;
  expect_rejected(p, StatusCode::kInvalidArgument, "topk (100) must be a multiple of 64");
  EXPECT_EQ(validate(p).to_string(), "InvalidArgument: sparse_mla: topk (100) must be a multiple of 64");
  for (int topk : {0, -64, 16448}) {
    p.topk = topk;
    p.indices_stride = 20000;
    expect_rejected(p, StatusCode::kInvalidArgument, "topk (" + std::to_string(topk) + ")");
  }
  p = good_params();
  p.indices_stride = 255;
  expect_rejected(p, StatusCode::kInvalidArgument, "indices_stride (255) must be >= topk (256)");
}

TEST(SparseMlaValidate, Dtypes) {
  SparseMlaParams p = good_params();
  p.q_dtype = DType::kBF16;
  expect_rejected(p, StatusCode::kNotImplemented, "q dtype bf16");
  EXPECT_NE(validate(p).message().find("the BF16/dequant path is a later stage"), std::string::npos);
  p = good_params();
  p.kv_dtype = DType::kBF16;
  expect_rejected(p, StatusCode::kNotImplemented, "kv dtype bf16");
  p = good_params();
  p.q_dtype = DType::kF32;
  expect_rejected(p, StatusCode::kInvalidArgument, "q dtype must be e4m3 (given f32)");
  p = good_params();
  p.kv_dtype = DType::kI32;
  expect_rejected(p, StatusCode::kInvalidArgument, "kv dtype must be e4m3 (given i32)");
  p = good_params();
  p.out_dtype = DType::kF32;
  expect_rejected(p, StatusCode::kInvalidArgument, "out dtype must be bf16 (given f32)");
}

TEST(SparseMlaValidate, RejectsBadQStrides) {
  SparseMlaParams p = good_params();
  p.q_head_stride = 560;
  expect_rejected(p, StatusCode::kInvalidArgument, "q_head_stride (560) must be >= d_qk (576)");
  p.q_head_stride = 584;
  expect_rejected(p, StatusCode::kInvalidArgument, "q_head_stride (584) must be a multiple of 16");
  p = good_params();
  p.q_token_stride = 127 * 576;
  expect_rejected(p, StatusCode::kInvalidArgument, "q_token_stride (73152) must be >= num_heads * q_head_stride (73728)");
  p.q_token_stride = 128 * 576 + 4;
  expect_rejected(p, StatusCode::kInvalidArgument, "q_token_stride (73732) must be a multiple of 16");
}

TEST(SparseMlaValidate, RejectsBadKvStride) {
  SparseMlaParams p = good_params();
  p.kv_row_stride = 512;
  expect_rejected(p, StatusCode::kInvalidArgument, "kv_row_stride (512) must be >= d_qk (576)");
  p.kv_row_stride = 580;
  expect_rejected(p, StatusCode::kInvalidArgument, "kv_row_stride (580) must be a multiple of 16");
}

TEST(SparseMlaValidate, RejectsBadOutStrides) {
  SparseMlaParams p = good_params();
  p.out_head_stride = 500;
  expect_rejected(p, StatusCode::kInvalidArgument, "out_head_stride (500) must be >= d_v (512)");
  p.out_head_stride = 516;
  expect_rejected(p, StatusCode::kInvalidArgument, "out_head_stride (516) must be a multiple of 8");
  p = good_params();
  p.out_token_stride = 128 * 512 - 8;
  expect_rejected(p, StatusCode::kInvalidArgument, "out_token_stride (65528) must be >=");
  p.out_token_stride = 128 * 512 + 4;
  expect_rejected(p, StatusCode::kInvalidArgument, "out_token_stride (65540) must be a multiple of 8");
}

TEST(SparseMlaValidate, RejectsMisalignedPointers) {
  SparseMlaParams p = good_params();
  p.q = testing::stand_in_arena() + 8;
  expect_rejected(p, StatusCode::kInvalidArgument, "q (0x");
  p = good_params();
  p.kv = testing::stand_in_arena() + 256 + 4;
  expect_rejected(p, StatusCode::kInvalidArgument, "kv (0x");
  p = good_params();
  p.out = testing::stand_in_arena() + 768 + 2;
  expect_rejected(p, StatusCode::kInvalidArgument, "out (0x");
  p = good_params();
  p.lse = reinterpret_cast<float*>(testing::stand_in_arena() + 1025);
  expect_rejected(p, StatusCode::kInvalidArgument, "lse (0x");
}

TEST(SparseMlaValidate, RequiredAndOptionalPointers) {
  SparseMlaParams p = good_params();
  p.lse = nullptr;
  expect_rejected(p, StatusCode::kInvalidArgument, "lse must not be null");
  p = good_params();
  p.q = nullptr;
  expect_rejected(p, StatusCode::kInvalidArgument, "q must not be null");
  p = good_params();
  p.kv = nullptr;
  expect_rejected(p, StatusCode::kInvalidArgument, "kv must not be null");
  p = good_params();
  p.indices = nullptr;
  expect_rejected(p, StatusCode::kInvalidArgument, "indices must not be null");
  p = good_params();
  p.out = nullptr;
  expect_rejected(p, StatusCode::kInvalidArgument, "out must not be null");
  p = good_params();
  p.max_logits = nullptr;
  p.attn_sink = nullptr;
  p.topk_length = nullptr;
  EXPECT_TRUE(validate(p).is_ok());
}

TEST(SparseMlaValidate, RejectsBadScales) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (float bad : {0.0f, -0.125f, inf, -inf, nan}) {
    SparseMlaParams p = good_params();
    p.sm_scale = bad;
    expect_rejected(p, StatusCode::kInvalidArgument, "sm_scale");
    p = good_params();
    p.q_scale = bad;
    expect_rejected(p, StatusCode::kInvalidArgument, "q_scale");
    p = good_params();
    p.kv_scale = bad;
    expect_rejected(p, StatusCode::kInvalidArgument, "kv_scale");
  }
  SparseMlaParams p;  // sm_scale defaults to 0: the caller must set it
  p.sm_scale = 0.0f;
  expect_rejected(p, StatusCode::kInvalidArgument, "sm_scale (0) must be finite and > 0");
}

TEST(SparseMlaValidate, RejectsAScaleProductOutsideF32) {
  // Each scale finite and positive, the product (times log2 e, as the kernels use it) not an f32.
  SparseMlaParams p = good_params();
  p.sm_scale = 1e20f;
  p.q_scale = 1e20f;
  expect_rejected(p, StatusCode::kInvalidArgument, "q_scale * kv_scale * sm_scale (1e+20 * 1 * 1e+20 = 1e+40)");
  p = good_params();
  p.sm_scale = 1e-30f;
  p.kv_scale = 1e-30f;
  expect_rejected(p, StatusCode::kInvalidArgument, "must be a finite positive f32");
  p = good_params();
  p.sm_scale = 1e18f;
  p.q_scale = 1e18f;  // 1.4e36: still an f32
  EXPECT_TRUE(validate(p).is_ok()) << validate(p).to_string();
}

TEST(SparseMlaValidate, RejectsExtentOverflow) {
  SparseMlaParams p = good_params();
  p.kv_row_stride = int64_t{1} << 60;
  expect_rejected(p, StatusCode::kInvalidArgument, "kv extent");
  p = good_params();
  p.out_token_stride = int64_t{1} << 60;
  expect_rejected(p, StatusCode::kInvalidArgument, "out extent");
}

// A head stride whose product with num_heads overflows, token strides left to their default (which
// once wrapped, so that validate() passed and the reference wrote through wild addresses).
TEST(SparseMlaValidate, RejectsHeadStridesWhoseTokenOverflows) {
  for (const int64_t stride : {int64_t{1} << 61, int64_t{1} << 60, std::numeric_limits<int64_t>::max() - 15}) {
    for (const int h : {8, 128}) {
      SparseMlaParams p = good_params();
      p.num_tokens = 2;
      p.num_heads = h;
      p.q_head_stride = stride;
      expect_rejected(p, StatusCode::kInvalidArgument, "q token extent");
      p = good_params();
      p.num_tokens = 2;
      p.num_heads = h;
      p.out_head_stride = stride - stride % 8;
      expect_rejected(p, StatusCode::kInvalidArgument, "out token extent");
      EXPECT_EQ(reference::sparse_mla_cpu(p).code(), StatusCode::kInvalidArgument);
    }
  }
  // resolved() saturates instead of wrapping.
  SparseMlaParams p = good_params();
  p.q_head_stride = int64_t{1} << 61;
  EXPECT_EQ(p.resolved().q_token_stride, std::numeric_limits<int64_t>::max());
}

SparseMlaParams good_v32_params() {
  SparseMlaParams p = good_params();
  p.kv_format = KvFormat::kDeepSeekV32;
  p.q_dtype = DType::kBF16;
  return p;
}

TEST(SparseMlaValidate, DeepSeekV32AcceptsGoodParams) {
  EXPECT_TRUE(validate(good_v32_params()).is_ok()) << validate(good_v32_params()).to_string();
  SparseMlaParams r = good_v32_params().resolved();
  EXPECT_EQ(r.kv_row_stride, 656);  // bytes: the row, not d_qk
  EXPECT_EQ(r.q_head_stride, 576);  // elements
  EXPECT_EQ(r.q_token_stride, 128 * 576);
  SparseMlaParams p = good_v32_params();  // bf16 rows need 8-element (16-byte) multiples only
  p.q_head_stride = 584;
  p.q_token_stride = 128 * 584 + 8;
  p.kv_row_stride = 672;
  p.topk_length = at<const int32_t>(1280);
  p.attn_sink = at<const float>(1536);
  p.max_logits = at<float>(1792);
  EXPECT_TRUE(validate(p).is_ok()) << validate(p).to_string();
  p = good_v32_params();  // a wide pool whose rows hold more than the V3.2 row
  p.kv_row_stride = 656 * 1024;
  p.num_kv = 4000000;  // 2.6e12 bytes: row offsets past 2^31, well inside int64
  EXPECT_TRUE(validate(p).is_ok()) << validate(p).to_string();
}

TEST(SparseMlaValidate, DeepSeekV32Dtypes) {
  SparseMlaParams p = good_v32_params();
  p.q_dtype = DType::kE4M3;
  expect_rejected(p, StatusCode::kInvalidArgument, "q dtype must be bf16 with kv_format deepseek_v32 (given e4m3)");
  p.q_dtype = DType::kF32;
  expect_rejected(p, StatusCode::kInvalidArgument, "q dtype must be bf16 with kv_format deepseek_v32 (given f32)");
  p = good_v32_params();
  p.kv_dtype = DType::kBF16;
  expect_rejected(p, StatusCode::kInvalidArgument, "kv dtype must be e4m3 (given bf16)");
  p = good_v32_params();
  p.out_dtype = DType::kF32;
  expect_rejected(p, StatusCode::kInvalidArgument, "out dtype must be bf16 (given f32)");
  p = good_params();  // bf16 q with the e4m3 rows is still the later BF16 path
  p.q_dtype = DType::kBF16;
  expect_rejected(p, StatusCode::kNotImplemented, "the BF16/dequant path is a later stage");
}

TEST(SparseMlaValidate, DeepSeekV32HeadDims) {
  SparseMlaParams p = good_v32_params();
  p.d_qk = 512;
  expect_rejected(p, StatusCode::kInvalidArgument,
                  "kv_format deepseek_v32 needs d_qk 576 and d_v 512 (given 512 and 512)");
  p = good_v32_params();
  p.d_v = 256;
  expect_rejected(p, StatusCode::kInvalidArgument, "needs d_qk 576 and d_v 512 (given 576 and 256)");
}

TEST(SparseMlaValidate, DeepSeekV32Strides) {
  SparseMlaParams p = good_v32_params();
  p.kv_row_stride = 576;
  expect_rejected(p, StatusCode::kInvalidArgument, "kv_row_stride (576) must be >= the deepseek_v32 row bytes (656)");
  p.kv_row_stride = 648;
  expect_rejected(p, StatusCode::kInvalidArgument, "kv_row_stride (648) must be >=");
  p.kv_row_stride = 664;
  expect_rejected(p, StatusCode::kInvalidArgument, "kv_row_stride (664) must be a multiple of 16");
  p = good_v32_params();
  p.q_head_stride = 580;
  expect_rejected(p, StatusCode::kInvalidArgument,
                  "q_head_stride (580) must be a multiple of 8 (16-byte row alignment)");
  p.q_head_stride = 568;
  expect_rejected(p, StatusCode::kInvalidArgument, "q_head_stride (568) must be >= d_qk (576)");
  p = good_v32_params();
  p.q_token_stride = 128 * 576 + 4;
  expect_rejected(p, StatusCode::kInvalidArgument, "q_token_stride (73732) must be a multiple of 8");
}

TEST(SparseMlaValidate, DeepSeekV32ExtentOverflow) {
  // The q extent counts 2 bytes per element: a token stride that fits int64 as elements need not
  // as bytes.
  SparseMlaParams p = good_v32_params();
  p.num_tokens = 1 << 30;
  p.q_token_stride = int64_t{1} << 32;  // 2^62 elements, 2^63 bytes
  expect_rejected(p, StatusCode::kInvalidArgument, "q extent (1073741824 rows x stride 4294967296 x 2 bytes)");
  p.q_token_stride = int64_t{1} << 31;  // 2^62 bytes
  EXPECT_TRUE(validate(p).is_ok()) << validate(p).to_string();
  p = good_v32_params();
  p.num_kv = 1 << 30;
  p.kv_row_stride = int64_t{1} << 33;  // in bytes: 2^63
  expect_rejected(p, StatusCode::kInvalidArgument, "kv extent (1073741824 rows x stride 8589934592 x 1 bytes)");
}

TEST(SparseMlaValidate, UnknownKvFormat) {
  SparseMlaParams p = good_params();
  p.kv_format = static_cast<KvFormat>(5);
  expect_rejected(p, StatusCode::kInvalidArgument, "kv_format (5) must be one of {0, 1}");
  EXPECT_STREQ(kv_format_name(KvFormat::kE4m3), "e4m3");
  EXPECT_STREQ(kv_format_name(KvFormat::kDeepSeekV32), "deepseek_v32");
  EXPECT_STREQ(kv_format_name(static_cast<KvFormat>(5)), "unknown");
}

TEST(SparseMlaValidate, KernelNamesAndUnknownKernel) {
  EXPECT_STREQ(sparse_mla_kernel_name(SparseMlaKernel::kAuto), "auto");
  EXPECT_STREQ(sparse_mla_kernel_name(SparseMlaKernel::kFp8), "fp8");
  EXPECT_STREQ(sparse_mla_kernel_name(SparseMlaKernel::kReference), "reference");
  EXPECT_STREQ(sparse_mla_kernel_name(static_cast<SparseMlaKernel>(7)), "unknown");
  SparseMlaParams p = good_params();
  p.kernel = static_cast<SparseMlaKernel>(7);
  expect_rejected(p, StatusCode::kInvalidArgument, "kernel (7)");
}

}  // namespace
}  // namespace fp8dsa
