// Which kernel kAuto takes, without a GPU: the native FP8 kernel is off by default in this
// revision (sparse_mla_fp8_enabled), so kAuto takes the reference kernel; explicit choices stand.
#include <gtest/gtest.h>

#include <cstdlib>

#include "fp8dsa/sparse_mla.h"

namespace fp8dsa {
namespace {

TEST(SparseMlaRoute, AutoTakesTheReferenceWhileTheFp8KernelIsDisabled) {
  if (std::getenv("FP8DSA_ENABLE_UNVERIFIED_SPARSE_MLA_FP8") != nullptr) GTEST_SKIP() << "gate set by the environment";
  EXPECT_FALSE(sparse_mla_fp8_enabled());
  SparseMlaParams p;
  for (int h : {8, 16, 32, 64, 128}) {
    p.num_heads = h;
    EXPECT_EQ(sparse_mla_route(p), SparseMlaKernel::kReference) << "h=" << h;
  }
  p.kernel = SparseMlaKernel::kFp8;
  EXPECT_EQ(sparse_mla_route(p), SparseMlaKernel::kFp8);
  EXPECT_STREQ(sparse_mla_kernel_name(SparseMlaKernel::kReference), sparse_mla_kernel_name(sparse_mla_route(SparseMlaParams{})));
}

}  // namespace
}  // namespace fp8dsa
