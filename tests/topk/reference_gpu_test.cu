// The top-k GPU reference against the exact CPU reference (SPEC 2 / 8): row lengths around k and
// up to 1M keys, every k of the test matrix, NaN / -inf / all-equal / heavily tied rows, the
// page-table transform; on poisoned outputs with every-slot-written checks and bitwise reruns.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "common/gpu_test.h"
#include "tools/metrics.h"
#include "common/poison.h"
#include "tools/random_inputs.h"
#include "common/rerun.h"
#include "fp8dsa/topk.h"
#include "topk/reference_cpu.h"

namespace fp8dsa {
namespace {

using tools::DeviceBuffer;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

// Host rows of one top-k problem: [num_rows, logits_stride] logits and the per-row ranges.
struct TopkProblem {
  int64_t num_keys = 0;
  int64_t logits_stride = 0;
  std::vector<float> logits;
  std::vector<int32_t> ks, ke;

  TopkProblem(int64_t n, uint64_t seed, int64_t num_rows) : num_keys(n), logits_stride(n + 4) {
    logits = tools::random_f32(static_cast<size_t>(num_rows * logits_stride), seed, -8.0f, 8.0f);
    ks.assign(static_cast<size_t>(num_rows), 0);
    ke.assign(static_cast<size_t>(num_rows), 0);
  }
  int64_t rows() const { return static_cast<int64_t>(ks.size()); }
  float* row(int64_t t) { return logits.data() + t * logits_stride; }
  void set_range(int64_t t, int64_t lo, int64_t hi) {
    ks[t] = static_cast<int32_t>(lo);
    ke[t] = static_cast<int32_t>(hi);
  }
};

TopkParams host_params(TopkProblem& pb, int k, bool sorted, std::vector<int32_t>* indices) {
  TopkParams p;
  p.num_rows = pb.rows();
  p.num_keys = pb.num_keys;
  p.logits = pb.logits.data();
  p.logits_stride = pb.logits_stride;
  p.ks = pb.ks.data();
  p.ke = pb.ke.data();
  p.k = k;
  p.indices_stride = k + 3;
  p.sorted = sorted;
  indices->assign(static_cast<size_t>(pb.rows() * p.indices_stride), -7);
  p.indices = indices->data();
  return p;
}

// Runs the GPU reference on `pb` (poisoned output, rerun bitwise) and returns its indices.
std::vector<int32_t> run_gpu(const TopkParams& host, TopkProblem& pb) {
  DeviceBuffer<float> d_logits(pb.logits);
  DeviceBuffer<int32_t> d_ks(pb.ks), d_ke(pb.ke);
  DeviceBuffer<int32_t> d_indices(static_cast<size_t>(host.num_rows * host.indices_stride));
  TopkParams d = host;
  d.logits = d_logits.get();
  d.ks = d_ks.get();
  d.ke = d_ke.get();
  d.indices = d_indices.get();
  EXPECT_TRUE(testing::reruns_bitwise_equal([&] { return reference::topk_gpu(d); },
                                            {testing::rerun_output(d_indices, "indices")}));
  std::vector<int32_t> got = d_indices.download();
  const auto owned = testing::matrix_cells(host.num_rows, host.indices_stride, host.k);
  EXPECT_TRUE(testing::all_written(got, owned, "indices"));
  EXPECT_TRUE(testing::untouched_outside(got, owned, "indices"));
  return got;
}

// Exact f32 top-k check, then agreement with the CPU reference: in sorted mode both order ties by
// ascending key, so the rows must be identical; unsorted, the sets must be.
void check_against_cpu(TopkProblem& pb, int k, bool sorted, const std::string& what) {
  SCOPED_TRACE(what + " k=" + std::to_string(k) + (sorted ? " sorted" : " unsorted"));
  std::vector<int32_t> cpu;
  const TopkParams host = host_params(pb, k, sorted, &cpu);
  FP8DSA_ASSERT_STATUS_OK(reference::topk_cpu(host));
  const std::vector<int32_t> got = run_gpu(host, pb);

  tools::TopkCheckOptions options;
  options.rel_tol = 0.0;  // the same f32 scores: only exact ties may swap
  options.sorted = sorted;
  const tools::TopkCheck check =
      tools::check_topk(got.data(), host.indices_stride, k, pb.logits.data(), pb.logits_stride, pb.rows(),
                          pb.num_keys, pb.ks.data(), pb.ke.data(), options);
  EXPECT_TRUE(check.passed) << check.description;

  int64_t mismatched_rows = 0;
  for (int64_t t = 0; t < pb.rows(); ++t) {
    std::vector<int32_t> a(got.begin() + t * host.indices_stride, got.begin() + t * host.indices_stride + k);
    std::vector<int32_t> b(cpu.begin() + t * host.indices_stride, cpu.begin() + t * host.indices_stride + k);
    if (!sorted) {
      std::sort(a.begin(), a.end());
      std::sort(b.begin(), b.end());
    }
    if (a != b) {
      if (mismatched_rows < 3) ADD_FAILURE() << "row " << t << " differs from topk_cpu";
      ++mismatched_rows;
    }
  }
  EXPECT_EQ(mismatched_rows, 0);
}

TEST(TopkReferenceGpu, RowLengthsAroundKForEveryK) {
  FP8DSA_SKIP_WITHOUT_GPU();
  uint64_t seed = 100;
  for (int k : {1, 16, 512, 2048}) {
    const std::vector<int64_t> lengths = {0, 1, k - 1, k, k + 1, 4096, 32768};
    TopkProblem pb(32768 + 40, seed += 10, static_cast<int64_t>(lengths.size()) + 3);
    tools::Random rng(seed);
    for (size_t i = 0; i < lengths.size(); ++i) {
      const int64_t lo = rng.uniform_int(0, pb.num_keys - lengths[i]);
      pb.set_range(static_cast<int64_t>(i), lo, lo + lengths[i]);
    }
    const int64_t extra = static_cast<int64_t>(lengths.size());
    pb.set_range(extra, -50, 3000);                      // clamped below
    pb.set_range(extra + 1, 30000, pb.num_keys + 999);   // clamped above
    pb.set_range(extra + 2, 700, 300);                   // ke < ks: empty
    check_against_cpu(pb, k, false, "lengths");
    check_against_cpu(pb, k, true, "lengths");
  }
}

TEST(TopkReferenceGpu, LongRows131072And1M) {
  FP8DSA_SKIP_WITHOUT_GPU();
  {
    TopkProblem pb(131072, 200, 2);
    pb.set_range(0, 0, 131072);
    pb.set_range(1, 1000, 131072);
    check_against_cpu(pb, 2048, false, "131072");
    check_against_cpu(pb, 512, true, "131072");
  }
  {
    // Row 0: 5000 distinct values over 1M keys (~210 copies each), so the top 2048 span about ten
    // values and the threshold value has more copies than slots left. Row 1: continuous scores.
    TopkProblem pb(1 << 20, 210, 2);
    tools::Random rng(211);
    for (int64_t s = 0; s < pb.num_keys; ++s) pb.row(0)[s] = 0.37f * static_cast<float>(rng.uniform_int(0, 4999));
    pb.set_range(0, 0, 1 << 20);
    pb.set_range(1, 0, 1 << 20);
    check_against_cpu(pb, 2048, false, "1M");
    check_against_cpu(pb, 2048, true, "1M");
  }
}

TEST(TopkReferenceGpu, NanInfAllEqualAndTiedRows) {
  FP8DSA_SKIP_WITHOUT_GPU();
  constexpr int64_t kLen = 4096;
  TopkProblem pb(kLen + 64, 300, 9);
  tools::Random rng(301);
  for (int64_t t = 0; t < pb.rows(); ++t) pb.set_range(t, 32, 32 + kLen);
  for (int64_t s = 0; s < pb.num_keys; ++s) {
    pb.row(0)[s] = 0.5f;                                                    // all equal
    pb.row(1)[s] = kNaN;                                                    // all NaN
    pb.row(2)[s] = -kInf;                                                   // all -inf
    if (rng.bernoulli(0.6)) pb.row(3)[s] = kNaN;                            // NaN-heavy
    if (rng.bernoulli(0.3)) pb.row(4)[s] = rng.bernoulli(0.5) ? -kInf : kNaN;  // mixed specials
    pb.row(5)[s] = static_cast<float>(rng.uniform_int(-3, 3));               // 7 distinct values
    pb.row(6)[s] = rng.bernoulli(0.5) ? 0.0f : -0.0f;                        // +-0 compare equal
    if (rng.bernoulli(0.01)) pb.row(7)[s] = kInf;                            // a few +inf
  }
  // Row 8: fewer finite scores than k, so the selection must reach into the NaN keys.
  for (int64_t s = 0; s < pb.num_keys; ++s) pb.row(8)[s] = s % 4 == 0 ? pb.row(8)[s] : kNaN;
  for (int k : {16, 512, 2048}) {
    check_against_cpu(pb, k, false, "specials");
    check_against_cpu(pb, k, true, "specials");
  }
}

TEST(TopkReferenceGpu, PageTableTransform) {
  FP8DSA_SKIP_WITHOUT_GPU();
  constexpr int kPageSize = 64, kPagesPerSeq = 20, kTableStride = 25;
  TopkProblem pb(2048, 400, 8);
  tools::Random rng(401);
  for (int64_t t = 0; t < pb.rows(); ++t) {
    const int64_t lo = rng.uniform_int(0, 500);
    pb.set_range(t, lo, lo + rng.uniform_int(100, 1500));
  }
  // One table row per top-k row: without row_seq, row t reads sequence t.
  std::vector<int32_t> page_table(pb.rows() * kTableStride);
  for (auto& entry : page_table) entry = rng.bernoulli(0.1) ? -1 : static_cast<int32_t>(rng.uniform_int(0, 5000));
  std::vector<int32_t> row_seq(pb.rows()), row_pos_base(pb.rows());
  for (int64_t t = 0; t < pb.rows(); ++t) {
    row_seq[t] = static_cast<int32_t>(t % 3);  // rows sharing a sequence
    // Some bases above ks give pos < 0 (-> -1); some below reach past pages_per_seq (-> -1).
    row_pos_base[t] = pb.ks[t] + static_cast<int32_t>(rng.uniform_int(-600, 40));
  }
  DeviceBuffer<int32_t> d_table(page_table), d_row_seq(row_seq), d_row_pos_base(row_pos_base);

  for (bool with_rows : {false, true}) {
    for (bool sorted : {false, true}) {
      SCOPED_TRACE(std::string(with_rows ? "row_seq/row_pos_base" : "defaults") +
                   (sorted ? " sorted" : " unsorted"));
      std::vector<int32_t> unused;
      TopkParams plain = host_params(pb, 256, sorted, &unused);
      const std::vector<int32_t> keys = run_gpu(plain, pb);

      TopkParams paged = plain;
      paged.page_table = d_table.get();
      paged.page_table_stride = kTableStride;
      paged.pages_per_seq = kPagesPerSeq;
      paged.page_size = kPageSize;
      paged.row_seq = with_rows ? d_row_seq.get() : nullptr;
      paged.row_pos_base = with_rows ? d_row_pos_base.get() : nullptr;
      const std::vector<int32_t> got = run_gpu(paged, pb);

      // The expected value per slot: the CPU transform of the untransformed GPU selection.
      TopkParams host_paged = paged;
      host_paged.page_table = page_table.data();
      host_paged.row_seq = with_rows ? row_seq.data() : nullptr;
      host_paged.row_pos_base = with_rows ? row_pos_base.data() : nullptr;
      const TopkParams resolved = host_paged.resolved();
      int64_t wrong = 0, negative = 0, positive = 0;
      for (int64_t t = 0; t < pb.rows(); ++t) {
        for (int slot = 0; slot < paged.k; ++slot) {
          const int64_t i = t * paged.indices_stride + slot;
          const int32_t expected = reference::topk_page_transform(resolved, t, keys[i]);
          wrong += got[i] != expected;
          (expected < 0 ? negative : positive) += keys[i] >= 0;
        }
      }
      EXPECT_EQ(wrong, 0);
      EXPECT_GT(positive, 0);
      EXPECT_GT(negative, 0);
    }
  }
}

TEST(TopkReferenceGpu, RejectsBadArguments) {
  FP8DSA_SKIP_WITHOUT_GPU();
  TopkProblem pb(128, 500, 2);
  std::vector<int32_t> indices;
  TopkParams p = host_params(pb, 16, false, &indices);
  p.k = 0;
  EXPECT_EQ(reference::topk_gpu(p).code(), StatusCode::kInvalidArgument);
  p.k = 2049;
  EXPECT_EQ(reference::topk_gpu(p).code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace fp8dsa
