#include <gtest/gtest.h>

#include "fp8dsa/status.h"
#include "fp8dsa/types.h"

namespace fp8dsa {
namespace {

TEST(Status, OkByDefault) {
  Status s;
  EXPECT_TRUE(s.is_ok());
  EXPECT_EQ(s.to_string(), "Ok");
}

TEST(Status, CarriesCodeAndMessage) {
  Status s = invalid_argument("topk: k (0) must be in [1, 2048]");
  EXPECT_FALSE(s.is_ok());
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.to_string(), "InvalidArgument: topk: k (0) must be in [1, 2048]");
}

Status fails_then_unreachable(bool* reached) {
  FP8DSA_RETURN_IF_ERROR(not_implemented("x"));
  *reached = true;
  return Status::ok();
}

TEST(Status, ReturnIfErrorPropagates) {
  bool reached = false;
  Status s = fails_then_unreachable(&reached);
  EXPECT_EQ(s.code(), StatusCode::kNotImplemented);
  EXPECT_FALSE(reached);
}

TEST(DType, NamesAndSizes) {
  EXPECT_STREQ(dtype_name(DType::kE4M3), "e4m3");
  EXPECT_EQ(dtype_bytes(DType::kE4M3), 1);
  EXPECT_EQ(dtype_bytes(DType::kBF16), 2);
  EXPECT_EQ(dtype_bytes(DType::kF32), 4);
  EXPECT_EQ(dtype_bytes(DType::kI32), 4);
}

}  // namespace
}  // namespace fp8dsa
