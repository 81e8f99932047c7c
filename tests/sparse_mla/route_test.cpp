// Which kernel kAuto takes, without a GPU: the native FP8 kernel for every SPEC head count, the
// reference kernel only for inputs the FP8 kernel cannot take; explicit choices stand.
#include <gtest/gtest.h>

#include "fp8dsa/sparse_mla.h"

namespace fp8dsa {
namespace {

TEST(SparseMlaRoute, AutoTakesTheFp8KernelWhereItExists) {
  SparseMlaParams p;
  for (int h : {8, 16, 32, 64, 128}) {
    p.num_heads = h;
    EXPECT_EQ(sparse_mla_route(p), SparseMlaKernel::kFp8) << "h=" << h;
  }
  p.num_heads = 64;
  p.kernel = SparseMlaKernel::kReference;
  EXPECT_EQ(sparse_mla_route(p), SparseMlaKernel::kReference);
  p.kernel = SparseMlaKernel::kAuto;
  p.kv_dtype = DType::kBF16;
  EXPECT_EQ(sparse_mla_route(p), SparseMlaKernel::kReference);
}

}  // namespace
}  // namespace fp8dsa
