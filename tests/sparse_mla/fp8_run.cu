// The FP8 sparse MLA GPU tests' runner (fp8_run.h).
#include "fp8_run.h"

#include <gtest/gtest.h>

#include <cstdio>

#include "common/gpu_test.h"
#include "common/poison.h"
#include "common/rerun.h"
#include "fp8dsa/sparse_mla.h"
#include "tools/metrics.h"

namespace fp8dsa::mla_test {
namespace {

void print_check(const std::string& what, const tools::SparseMlaCheck& check) {
  std::printf("  [%s] rel L2 %.3e cosine %.6f max lse err %.2e max max_logits err %.2e worst err/limit %.2f\n",
              what.c_str(), check.rel_l2, check.cosine, check.max_lse_error, check.max_max_logits_error,
              check.worst_bound_ratio);
}

// DeepSeek-V3.2 rows come with bf16 q, which the kernel quantises to e4m3 (two terms: ~8
// significant bits, those of bf16 itself; v32_config.h): its scores then err against the f64
// reference by a few times SPEC 6's lse / max_logits bound, as those of the engines' path do
// (dequantise to bf16 + FlashMLA BF16: worst error / bound 4.5-6.2 on the bench's V3.2 inputs, ours
// 3.4-5.9; bench/journal/2026-12-01.md, the 656-byte rows). out keeps SPEC 6's bounds.
constexpr double kV32ScoreBoundFactor = 8.0;
// One term rounds q to e4m3's 4 significant bits, 2^4 times the two terms' error: 16x that factor
// (measured worst 107 at score std 3, bench/journal/2026-12-01.md).
constexpr double kV32OneTermScoreBoundFactor = 16.0 * kV32ScoreBoundFactor;

bool meets_accuracy(const MlaCase& c, const tools::SparseMlaCheck& check) {
  if (c.kv_format != KvFormat::kDeepSeekV32) return check.passed;
  const double factor = c.q_terms == 1 ? kV32OneTermScoreBoundFactor : kV32ScoreBoundFactor;
  return check.rel_l2 <= 2.5e-2 && check.cosine >= 0.999 && check.convention_mismatches == 0 &&
         check.non_finite_out == 0 && check.worst_bound_ratio <= factor;
}

std::string tuning_label(const detail::sparse_mla::Fp8Tuning& tuning) {
  return "qk_chains=" + std::to_string(tuning.qk_chains) +
         (tuning.tail_parts != 0 ? " tail_parts=" + std::to_string(tuning.tail_parts) : std::string()) +
         (tuning.small_heads == detail::sparse_mla::SmallHeads::kTransposed ? " transposed"
          : tuning.small_heads == detail::sparse_mla::SmallHeads::kPadded   ? " padded"
                                                                     : "");
}

}  // namespace

void run_and_check_coverage(MlaProblem& pr, std::vector<uint16_t>* out, std::vector<float>* lse,
                            std::vector<float>* max_logits, std::function<Status()> launch) {
  if (!launch) launch = [&] { return sparse_mla_prefill(pr.device); };
  ASSERT_TRUE(testing::reruns_bitwise_equal(launch, mla_test::rerun_outputs(pr)));
  *out = pr.d_out.download();
  *lse = pr.d_lse.download();
  *max_logits = pr.d_max_logits.download();
  const auto owned = mla_test::out_cells(pr.host);
  const auto everything = [](size_t) { return true; };
  EXPECT_TRUE(testing::all_written(*out, owned, "out"));
  EXPECT_TRUE(testing::untouched_outside(*out, owned, "out"));
  EXPECT_TRUE(testing::all_written(*lse, everything, "lse"));
  EXPECT_TRUE(testing::all_written(*max_logits, everything, "max_logits"));
}

Status build_reference(const MlaProblem& pr, int64_t every, tools::SampledMlaReference* ref) {
  if (pr.q_unrounded.empty()) return ref->build(pr.host, every);
  return ref->build(pr.host, every, pr.q_unrounded.data(), pr.host.resolved().q_token_stride * every,
                    pr.kv_unrounded.data());
}

AccuracyVerdict judge_accuracy(const MlaCase& c, const MlaProblem& pr, const tools::SampledMlaReference& ref,
                               const std::vector<uint16_t>& out, const std::vector<float>& lse,
                               const std::vector<float>& max_logits, const std::string& label) {
  const tools::SparseMlaCheck check = ref.check(out.data(), lse.data(), max_logits.data());
  const std::string what = label + (pr.workload.empty() ? "" : ", " + pr.workload);
  if (pr.q_unrounded.empty()) {
    print_check(what, check);
    return {meets_accuracy(c, check), check.description};
  }
  const tools::RoundingCheck rc = ref.check_against_rounding(out.data(), lse.data(), max_logits.data());
  std::printf("  [%s] out err %.3fx the rounding's (rel L2 %.3e, rounding %.3e) cosine %.6f, lse err %.2e "
              "(limit %.2e), max_logits err %.2e (limit %.2e)%s\n",
              what.c_str(), rc.out_error_ratio, rc.kernel.rel_l2, rc.rounding_rel_l2, rc.kernel.cosine,
              rc.kernel.max_lse_error, rc.lse_limit, rc.kernel.max_max_logits_error, rc.max_logits_limit,
              rc.passed ? "" : " (fails its bound)");
  return {rc.passed, rc.description};
}

void run_case(const MlaCase& c, uint64_t seed) {
  SCOPED_TRACE(c.name());
  MlaProblem pr;
  mla_test::make_problem(c, seed, &pr);
  std::vector<uint16_t> out;
  std::vector<float> lse, max_logits;
  run_and_check_coverage(pr, &out, &lse, &max_logits);
  if (::testing::Test::HasFatalFailure()) return;
  tools::SampledMlaReference ref;  // every token
  FP8DSA_ASSERT_STATUS_OK(build_reference(pr, 1, &ref));
  const AccuracyVerdict verdict = judge_accuracy(c, pr, ref, out, lse, max_logits, c.name());
  EXPECT_TRUE(verdict.passed) << verdict.description;
  if (c.num_tokens > 1) {
    EXPECT_GE(ref.check(out.data(), lse.data(), max_logits.data()).empty_rows, c.num_heads);  // the all-invalid token
  }
}

void run_large(const MlaCase& c, uint64_t seed, int64_t every,
               const std::vector<detail::sparse_mla::Fp8Tuning>& tunings, const std::vector<int>& q_terms) {
  MlaProblem pr;
  mla_test::make_problem(c, seed, &pr);
  tools::SampledMlaReference ref;
  FP8DSA_ASSERT_STATUS_OK(build_reference(pr, every, &ref));
  for (const int terms : q_terms.empty() ? std::vector<int>{c.q_terms} : q_terms) {
    MlaCase run = c;
    run.q_terms = terms;
    pr.device.q_terms = terms;
    for (const detail::sparse_mla::Fp8Tuning& tuning : tunings) {
      const std::string label = run.name() + " " + tuning_label(tuning);
      SCOPED_TRACE(label);
      std::vector<uint16_t> out;
      std::vector<float> lse, max_logits;
      run_and_check_coverage(pr, &out, &lse, &max_logits,
                             [&] { return detail::sparse_mla::launch_sparse_mla_fp8(pr.device, tuning); });
      if (::testing::Test::HasFatalFailure()) return;
      const AccuracyVerdict verdict = judge_accuracy(run, pr, ref, out, lse, max_logits, label);
      if (tuning.qk_chains == detail::sparse_mla::kDefaultQkChains) EXPECT_TRUE(verdict.passed) << verdict.description;
    }
  }
}


}  // namespace fp8dsa::mla_test
