// lse_merge's argument checks: each bad field gets a clear invalid_argument, and valid params pass.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "fp8dsa/lse_merge.h"

namespace fp8dsa {
namespace {

struct Buffers {
  alignas(16) uint16_t parts[2 * 2 * 3 * 512] = {};
  alignas(16) uint16_t out[2 * 3 * 512] = {};
  float lse_parts[2 * 6] = {}, max_parts[2 * 6] = {}, lse[6] = {}, max_logits[6] = {};
};

LseMergeParams valid(Buffers& b) {
  LseMergeParams p;
  p.num_tokens = 2;
  p.num_heads = 3;
  p.num_parts = 2;
  p.out_parts = b.parts;
  p.lse_parts = b.lse_parts;
  p.max_logits_parts = b.max_parts;
  p.out = b.out;
  p.lse = b.lse;
  p.max_logits = b.max_logits;
  return p;
}

void expect_invalid(const LseMergeParams& p, const std::string& text) {
  const Status s = validate(p);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << text;
  EXPECT_NE(s.to_string().find(text), std::string::npos) << s.to_string();
}

TEST(LseMergeValidate, AcceptsValidParams) {
  Buffers b;
  EXPECT_TRUE(validate(valid(b)).is_ok());
  LseMergeParams none = valid(b);
  none.num_tokens = 0;
  none.out_parts = nullptr;
  none.out = nullptr;
  none.lse_parts = nullptr;
  none.lse = nullptr;
  none.max_logits = nullptr;
  none.max_logits_parts = nullptr;
  EXPECT_TRUE(validate(none).is_ok());
}

TEST(LseMergeValidate, RejectsBadFields) {
  Buffers b;
  LseMergeParams p = valid(b);
  p.num_parts = 0;
  expect_invalid(p, "num_parts");
  p = valid(b);
  p.d_v = 256;
  expect_invalid(p, "d_v");
  p = valid(b);
  p.num_heads = 0;
  expect_invalid(p, "num_heads");
  p = valid(b);
  p.out_parts_dtype = DType::kF32;
  expect_invalid(p, "out_parts");
  p = valid(b);
  p.head_stride = 500;
  expect_invalid(p, "head_stride");
  p = valid(b);
  p.token_stride = 1028;
  expect_invalid(p, "token_stride");
  p = valid(b);
  p.part_stride = 8;
  expect_invalid(p, "part_stride");
  p = valid(b);
  p.out_head_stride = 516;
  expect_invalid(p, "out_head_stride");
  p = valid(b);
  p.lse = nullptr;
  expect_invalid(p, "lse must not be null");
  p = valid(b);
  p.max_logits_parts = nullptr;
  expect_invalid(p, "max_logits_parts must not be null");
  p = valid(b);
  p.out = reinterpret_cast<uint8_t*>(b.out) + 8;
  expect_invalid(p, "16-byte aligned");
  p = valid(b);
  p.num_tokens = -1;
  expect_invalid(p, "num_tokens");
}

// Strides whose products overflow int64 are refused, not wrapped.
TEST(LseMergeValidate, RejectsOverflowingExtents) {
  Buffers b;
  LseMergeParams p = valid(b);
  p.head_stride = int64_t{1} << 60;
  expect_invalid(p, "overflows int64");
  p = valid(b);
  p.num_tokens = 1 << 30;
  p.token_stride = int64_t{1} << 40;
  expect_invalid(p, "overflows int64");
  p = valid(b);
  p.num_parts = 1000;
  p.part_stride = int64_t{1} << 53;
  expect_invalid(p, "overflows int64");
}

}  // namespace
}  // namespace fp8dsa
