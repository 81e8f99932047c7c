#include <gtest/gtest.h>

#include "core/cuda_check.h"

namespace fp8dsa {
namespace {

TEST(Device, IsHopperOrReportsWhy) {
  Status s = check_device();
  if (s.code() == StatusCode::kNoDevice) GTEST_SKIP() << s.to_string();
  ASSERT_TRUE(s.is_ok()) << s.to_string();
  EXPECT_GT(device_sm_count(), 0);
}

}  // namespace
}  // namespace fp8dsa
