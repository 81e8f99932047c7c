// tools/: the shared SPEC 6 check (tools::check_sparse_mla) and the sampled-token reference
// (tools::SampledMlaReference), on CPU reference runs.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "common/mla_host_problem.h"
#include "tools/metrics.h"
#include "tools/sampled_mla_reference.h"
#include "fp8dsa/fp8.h"
#include "fp8dsa/sparse_mla.h"
#include "sparse_mla/reference_cpu.h"

namespace fp8dsa {
namespace {

using namespace mla_host;

// The shared check must catch what it claims to catch.
TEST(SparseMlaCheck, DetectsEachFailure) {
  Problem pr = hand_problem({{0, 1, 2}, {-1}});
  ASSERT_TRUE(reference::sparse_mla_cpu(pr.params).is_ok());
  std::vector<double> out, lse, max_logits;
  ASSERT_TRUE(reference::sparse_mla_cpu_f64(pr.params, &out, &lse, &max_logits).is_ok());
  auto check = [&](const Problem& p) {
    tools::SparseMlaOutputs got;
    got.out = p.out.data();
    got.lse = p.lse.data();
    got.max_logits = p.max_logits.data();
    return tools::check_sparse_mla(got, out, lse, max_logits, 2, kHandHeads, kDv);
  };
  const tools::SparseMlaCheck good = check(pr);
  EXPECT_TRUE(good.passed) << good.description;
  EXPECT_EQ(good.empty_rows, kHandHeads);

  Problem bad = pr;
  bad.out[1] = float_to_bf16(bf16_to_float(bad.out[1]) * 1.5f);  // 50% off in one of three non-zeros
  EXPECT_FALSE(check(bad).passed);
  bad = pr;
  bad.lse[3] += 0.01f;
  EXPECT_EQ(check(bad).lse_failures, 1);
  bad = pr;
  bad.lse[kHandHeads] = 0.0f;  // an empty row must report +inf
  EXPECT_EQ(check(bad).convention_mismatches, 1);
  bad = pr;
  bad.out[kHandHeads * kDv + 7] = float_to_bf16(1e-3f);  // an empty row must be exactly 0
  EXPECT_EQ(check(bad).convention_mismatches, 1);
  bad = pr;
  bad.out[5] = 0x7fc0;  // NaN
  EXPECT_EQ(check(bad).non_finite_out, 1);
}

// The sampled-token reference checks exactly the tokens t % every == 0, in the run's out layout,
// with their own topk_length.
TEST(SampledMlaReference, ChecksTheSampledTokensOnly) {
  const Case c{16, 153, 256, 10, true, true, true};
  Problem pr = random_problem(c, 77);
  pr.params.out_token_stride = int64_t{c.h} * kDv + 8;
  pr.reset_outputs();
  ASSERT_TRUE(reference::sparse_mla_cpu(pr.params).is_ok());
  tools::SampledMlaReference ref;
  ASSERT_TRUE(ref.build(pr.params, 3).is_ok());
  EXPECT_EQ(ref.sampled_tokens(), 4);  // tokens 0, 3, 6, 9
  const auto check = [&](const Problem& p) { return ref.check(p.out.data(), p.lse.data(), p.max_logits.data()); };
  const tools::SparseMlaCheck good = check(pr);
  EXPECT_TRUE(good.passed) << good.description;
  EXPECT_LT(good.rel_l2, 5e-3) << good.description;

  const int64_t out_token = pr.params.out_token_stride;
  Problem bad = pr;
  bad.lse[1 * c.h + 2] += 1.0f;  // token 1 is not sampled
  for (int d = 0; d < kDv; ++d) bad.out[4 * out_token + d] = float_to_bf16(100.0f);
  EXPECT_TRUE(check(bad).passed);
  bad = pr;
  bad.lse[3 * c.h + 2] += 0.01f;  // token 3 is
  EXPECT_EQ(check(bad).lse_failures, 1);
  bad = pr;
  bad.max_logits[9 * c.h + 5] -= 0.01f;
  EXPECT_EQ(check(bad).lse_failures, 1);
  bad = pr;
  for (int d = 0; d < kDv; ++d) bad.out[6 * out_token + 2 * kDv + d] = float_to_bf16(100.0f);
  EXPECT_FALSE(check(bad).passed);
  EXPECT_FALSE(tools::SampledMlaReference().build(pr.params, 0).is_ok());
}

}  // namespace
}  // namespace fp8dsa
