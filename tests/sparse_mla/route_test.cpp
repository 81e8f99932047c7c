// Which kernel kAuto takes, without a GPU: the native FP8 kernel for h = 64 and 128, the reference
// kernel for h in {8, 16, 32} (no FP8 kernel for them yet) and for non-e4m3 inputs; explicit
// choices stand.
#include <gtest/gtest.h>

#include "fp8dsa/sparse_mla.h"

namespace fp8dsa {
namespace {

TEST(SparseMlaRoute, AutoTakesTheFp8KernelWhereItExists) {
  SparseMlaParams p;
  for (int h : {64, 128}) {
    p.num_heads = h;
    EXPECT_EQ(sparse_mla_route(p), SparseMlaKernel::kFp8) << "h=" << h;
  }
  for (int h : {8, 16, 32}) {
    p.num_heads = h;
    EXPECT_EQ(sparse_mla_route(p), SparseMlaKernel::kReference) << "h=" << h;
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
