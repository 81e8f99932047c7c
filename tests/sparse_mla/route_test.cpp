// Which kernel kAuto takes, without a GPU: the native FP8 kernel for every SPEC head count, the
// reference kernel only for inputs the FP8 kernel cannot take; explicit choices stand.
#include <gtest/gtest.h>

#include "common/validation.h"
#include "fp8dsa/sparse_mla.h"
#include "sparse_mla/launch.h"
#include "sparse_mla/tail_split.h"

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

// A valid e4m3 problem of 4 tokens whose pointers are placeholders: for the launcher's refusals,
// which come before any CUDA call.
SparseMlaParams launchable_params() {
  SparseMlaParams p;
  p.num_tokens = 4;
  p.num_kv = 100;
  p.topk = 64;
  p.sm_scale = 0.07f;
  p.q = testing::at<uint8_t>(0);
  p.kv = testing::at<uint8_t>(256);
  p.indices = testing::at<int32_t>(512);
  p.out = testing::at<uint16_t>(1024);
  p.lse = testing::at<float>(2048);
  return p;
}

// A QK^T chain count other than the default (instantiated in FP8DSA_TUNING builds only).
int other_qk_chains() { return detail::sparse_mla::kDefaultQkChains == 5 ? 3 : 5; }

// Which FP8 variant runs each head count, and the launcher's refusals that come before any CUDA
// call (so they are checked here, without a GPU): a QK^T chain count that is not instantiated, and
// a non-default one for the transposed small-head kernel (built for the default only).
TEST(SparseMlaRoute, Fp8VariantsAndUninstantiatedChoices) {
  for (int h : {8, 16}) EXPECT_TRUE(detail::sparse_mla::has_transposed_kernel(h)) << h;
  for (int h : {32, 64, 128}) EXPECT_FALSE(detail::sparse_mla::has_transposed_kernel(h)) << h;
  for (int h : {8, 16}) EXPECT_TRUE(detail::sparse_mla::transposed_by_default(h)) << h;
  for (int h : {32, 64, 128}) EXPECT_FALSE(detail::sparse_mla::transposed_by_default(h)) << h;
  EXPECT_TRUE(detail::sparse_mla::is_instantiated_qk_chains(detail::sparse_mla::kDefaultQkChains));
  EXPECT_FALSE(detail::sparse_mla::is_instantiated_qk_chains(7));

  SparseMlaParams p = launchable_params();
  for (int h : {16, 64}) {
    p.num_heads = h;
    ASSERT_TRUE(validate(p).is_ok()) << validate(p).to_string();
    const Status s = detail::sparse_mla::launch_sparse_mla_fp8(p, {7, detail::sparse_mla::SmallHeads::kDefault});
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.to_string();
    EXPECT_NE(s.message().find("qk_chains 7 is not instantiated ("), std::string::npos) << s.message();
    // The message lists every count the 64-head kernel is built for.
    for (int c : detail::sparse_mla::kSeesawQkChainChoices)
      EXPECT_NE(s.message().find(std::to_string(c)), std::string::npos) << c << ": " << s.message();
  }
  // A count besides the default: refused for h < 64, or not instantiated (a build without
  // FP8DSA_TUNING has the default alone).
  p.num_heads = 16;
  const Status s = detail::sparse_mla::launch_sparse_mla_fp8(p, {other_qk_chains(), detail::sparse_mla::SmallHeads::kDefault});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.to_string();
  EXPECT_NE(s.message().find(detail::sparse_mla::is_instantiated_qk_chains(other_qk_chains()) ? "h < 64" : "not instantiated"),
            std::string::npos)
      << s.message();
}

// The last-wave split's forced part count: 0 to kMaxTailParts, refused before any CUDA call.
TEST(SparseMlaRoute, TailPartsOutsideTheirRangeAreRefused) {
  SparseMlaParams p = launchable_params();
  p.num_heads = 64;
  ASSERT_TRUE(validate(p).is_ok()) << validate(p).to_string();
  for (int parts : {-1, detail::sparse_mla::kMaxTailParts + 1}) {
    detail::sparse_mla::Fp8Tuning tuning;
    tuning.tail_parts = parts;
    const Status s = detail::sparse_mla::launch_sparse_mla_fp8(p, tuning);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.to_string();
    EXPECT_NE(s.message().find("tail_parts takes 0 (the planner's choice), 1 (never split) or up to 16 key parts (got " +
                               std::to_string(parts) + ")"),
              std::string::npos)
        << s.message();
  }
}

// The V3.2-row kernel: kAuto takes it for bf16 q over 656-byte rows; a q-term count other than 1 or 2
// is refused by validate(), and a QK^T chain count it is not built for by its launcher, before any
// CUDA call (with no tokens too).
TEST(SparseMlaRoute, V32KernelAndItsTuningRefusals) {
  SparseMlaParams p = launchable_params();
  p.kv_format = KvFormat::kDeepSeekV32;
  p.q_dtype = DType::kBF16;
  p.q = testing::at<uint16_t>(0);
  for (int h : {16, 128}) {
    p.num_heads = h;
    ASSERT_TRUE(validate(p).is_ok()) << validate(p).to_string();
    EXPECT_EQ(sparse_mla_route(p), SparseMlaKernel::kFp8) << h;
  }
  for (int64_t tokens : {4, 0}) {
    p.num_tokens = tokens;
    for (int q_terms : {0, 3}) {
      p.q_terms = q_terms;
      const Status s = sparse_mla_prefill(p);
      EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.to_string();
      EXPECT_NE(s.message().find("q_terms"), std::string::npos) << s.message();
    }
    p.q_terms = 1;
    EXPECT_TRUE(validate(p).is_ok()) << validate(p).to_string();
    p.q_terms = 2;
    detail::sparse_mla::Fp8Tuning tuning;
    tuning.qk_chains = other_qk_chains();
    Status s = detail::sparse_mla::launch_sparse_mla_fp8(p, tuning);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.to_string();
    EXPECT_NE(s.message().find(detail::sparse_mla::is_instantiated_qk_chains(tuning.qk_chains)
                                   ? "V3.2-row kernels take no qk_chains choice"
                                   : "not instantiated"),
              std::string::npos)
        << s.message();
  }
  p.q_dtype = DType::kE4M3;  // e4m3 q over V3.2 rows: no kernel (validate() refuses it too)
  EXPECT_FALSE(detail::sparse_mla::fp8_kernel_supports(p));
}

}  // namespace
}  // namespace fp8dsa
