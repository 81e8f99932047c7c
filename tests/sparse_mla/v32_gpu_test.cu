// The native FP8 sparse MLA kernel on DeepSeek-V3.2's 656-byte rows with bf16 q (v32_kernel.cuh),
// through the shared runner (fp8_run.h): the SPEC 8 shapes and edge cases, hard numerics, realistic
// scores, the large case, SPEC 6 against the rounding of the rows, both q precisions, and row
// offsets past 2^31 bytes.
#include <gtest/gtest.h>

#include <cstdint>
#include <utility>
#include <vector>

#include "common/gpu_test.h"
#include "fp8_run.h"
#include "fp8dsa/sparse_mla.h"
#include "mla_problem.h"
#include "sparse_mla/launch.h"
#include "tools/mla_workload.h"

namespace fp8dsa {
namespace {

using mla_test::MlaCase;
using mla_test::MlaProblem;
using mla_test::run_and_check_coverage;
using mla_test::run_case;
using mla_test::run_large;

// DeepSeek-V3.2's 656-byte rows with bf16 q (the V3.2-row kernel, v32_kernel.cuh): the same cases.
MlaCase v32(MlaCase c) {
  c.kv_format = KvFormat::kDeepSeekV32;
  return c;
}

TEST(SparseMlaFp8V32, SpecShapes) {
  FP8DSA_SKIP_WITHOUT_GPU();
  const std::vector<MlaCase> cases = {
      v32({128, 128, 64, 62}),
      v32({256, 256, 128, 62, true, false, true}),
      v32({592, 128, 64, 213, false, true}),
      v32({1840, 256, 128, 62, true, true, false}),
      v32({1521, 512, 64, 62, false, false, true}),
      v32({95, 128, 128, 1, true, true}),
      v32({153, 256, 64, 62, true, true, true}),
      v32({32, 2048, 128, 4, false, true, false, 0.5f, 2.0f}),
      v32({64, 8192, 64, 1}),
      v32({700, 256, 32, 30, true, true, true}),
      v32({700, 256, 16, 30, true, true, false}),
      v32({1500, 512, 8, 17, true, true, true}),
  };
  uint64_t seed = 190000;
  for (const MlaCase& c : cases) run_case(c, seed += 10);
}

TEST(SparseMlaFp8V32, HardNumerics) {
  FP8DSA_SKIP_WITHOUT_GPU();
  MlaCase peaked = v32({4000, 1024, 64, 16, false, true});
  peaked.q_range = 3.0f;
  peaked.sm_scale = 0.09f;
  run_case(peaked, 191000);
  MlaCase duplicates = v32({300, 512, 128, 16, true});
  duplicates.distinct = false;
  run_case(duplicates, 191010);
  MlaCase mostly_invalid = v32({5000, 640, 64, 24, false, true, true});
  mostly_invalid.invalid_fraction = 0.9;
  run_case(mostly_invalid, 191020);
  MlaCase scaled = v32({2000, 384, 128, 16});
  scaled.q_scale = 0.03125f;
  scaled.kv_scale = 8.0f;
  scaled.sm_scale = 0.5f;
  run_case(scaled, 191030);
  run_case(v32({0, 128, 64, 5, true, true}), 191040);  // N = 0: every index is invalid
}

TEST(SparseMlaFp8V32, RealisticScores) {
  FP8DSA_SKIP_WITHOUT_GPU();
  uint64_t seed = 192000;
  for (int h : {128, 64, 16}) {
    for (double score_std : {1.0, 3.0, 10.0}) {
      MlaCase c = v32({4096, 512, h, 40, h == 64, h == 128, h == 16});
      c.score_std = score_std;
      run_case(c, seed += 10);
    }
  }
}

TEST(SparseMlaFp8V32, LargeH128) {
  FP8DSA_SKIP_WITHOUT_GPU();
  MlaCase c = v32({65536, 2048, 128, 4096, true, true});
  c.score_std = 3.0;
  run_large(c, 193000, 16);
  c.score_std = 10.0;
  run_large(c, 193010, 16);
}

// SPEC 6 against the rounding of the inputs for DeepSeek-V3.2 rows (issue 22, deliverable 1): bf16 q
// and rows quantised per 128-column block from continuous values, on flat and peaked realistic
// scores and on random values whose scores do not follow the selection order, T = 512 over N = 32K,
// every 4th token against both f64 references.
TEST(SparseMlaFp8V32, AccuracyAgainstRounding) {
  FP8DSA_SKIP_WITHOUT_GPU();
  for (int h : {128, 64}) {
    for (const auto& [values, score_std] : {std::pair{tools::MlaValues::kRealistic, 3.0},
                                            std::pair{tools::MlaValues::kRealistic, 10.0},
                                            std::pair{tools::MlaValues::kRandom, 3.5}}) {
      MlaCase c = v32({32768, 2048, h, 512});
      c.score_std = score_std;
      c.values = values;
      c.v32_against_rounding = true;
      run_large(c, 196000 + h + static_cast<uint64_t>(score_std), 4);
    }
  }
}

// bf16 q as one or two e4m3 terms (SparseMlaParams::q_terms), on flat and peaked realistic scores:
// each within its bound (meets_accuracy).
TEST(SparseMlaFp8V32, QTermsAccuracy) {
  FP8DSA_SKIP_WITHOUT_GPU();
  for (double score_std : {1.0, 3.0, 10.0}) {
    MlaCase c = v32({16384, 2048, 128, 256});
    c.score_std = score_std;
    run_large(c, 195000 + static_cast<uint64_t>(score_std), 1, {{}}, {1, 2});
  }
}

// Row offsets past 2^31 bytes: the selected rows are the last ones of a 2.2 GB pool, and the
// results equal those of the same rows in a pool of their own, bitwise.
TEST(SparseMlaFp8V32, RowOffsetsPast2GiB) {
  FP8DSA_SKIP_WITHOUT_GPU();
  constexpr int64_t kPoolRows = 3400000, kRows = 4096;
  static_assert((kPoolRows - kRows) * kV32RowBytes > (int64_t{1} << 31), "the selected rows start past 2^31 bytes");
  MlaProblem pr;
  mla_test::make_problem(v32({kRows, 512, 128, 24, true, true}), 194000, &pr);
  std::vector<uint16_t> expected_out;
  std::vector<float> expected_lse, expected_max;
  run_and_check_coverage(pr, &expected_out, &expected_lse, &expected_max);
  if (::testing::Test::HasFatalFailure()) return;
  mla_test::PoolPlacement big;
  mla_test::place_at_pool_end(pr, kPoolRows, &big);
  if (::testing::Test::HasFatalFailure()) return;
  mla_test::expect_same_outputs(pr, [&] { return sparse_mla_prefill(big.device); }, expected_out, expected_lse,
                                expected_max);
}

}  // namespace
}  // namespace fp8dsa
