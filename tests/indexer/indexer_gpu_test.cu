// The tensor-core indexer scorers (Q-resident and K-resident) and the kAuto router: SPEC 6
// accuracy against the f64 CPU reference on the SPEC 8 shapes, every head count and both head
// dims, causal / cache-prefix / ragged bounds, against the GPU reference on large shapes; poisoned
// outputs (every cell in [ks, ke) written, nothing outside unless fill_masked), bitwise reruns,
// and clear errors for bad arguments.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

#include "common/gpu_test.h"
#include "tools/metrics.h"
#include "common/poison.h"
#include "tools/random_inputs.h"
#include "common/rerun.h"
#include "fp8dsa/indexer.h"
#include "indexer/reference_cpu.h"
#include "indexer/scorers.h"
#include "indexer_problem.h"
#include "hopper/smem_descriptor.h"

namespace fp8dsa {
namespace {

using tools::DeviceBuffer;

constexpr IndexerKernel kFastKernels[] = {IndexerKernel::kQResident, IndexerKernel::kKResident};

using Shape = indexer_test::ProblemShape;  // this file's defaults: q and k in [-3, 3), scales from 0.05
using Problem = indexer_test::IndexerProblem;
using indexer_test::clamped;
using indexer_test::owned_cells;
using indexer_test::make_problem;

// Runs `kernel` twice on poisoned logits (bitwise equal), checks the written set and, when `ref`
// is given, SPEC 6 accuracy; returns the logits. `split`: IndexerParams::split_epilogue.
std::vector<float> run_and_check(Problem& pr, IndexerKernel kernel, bool fill_masked,
                                 const std::vector<double>* ref, bool split = false) {
  IndexerParams d = pr.device;
  d.kernel = kernel;
  d.fill_masked = fill_masked;
  d.split_epilogue = split;
  SCOPED_TRACE(std::string("kernel ") + indexer_kernel_name(kernel) + (fill_masked ? " fill_masked" : "") +
               (split ? " split_epilogue" : ""));
  EXPECT_TRUE(testing::reruns_bitwise_equal([&] { return indexer_logits(d); },
                                            {testing::rerun_output(pr.d_logits, "logits")}));
  std::vector<float> got = pr.d_logits.download();
  const auto owned = owned_cells(pr, fill_masked);
  EXPECT_TRUE(testing::all_written(got, owned, "logits"));
  EXPECT_TRUE(testing::untouched_outside(got, owned, "logits"));
  if (fill_masked) {
    int64_t wrong = 0;
    const int64_t N = pr.host.num_keys;
    for (int64_t t = 0; t < pr.host.num_tokens; ++t) {
      const int64_t lo = clamped(pr.ks[t], N), hi = std::max(lo, clamped(pr.ke[t], N));
      for (int64_t s = 0; s < N; ++s) {
        const float v = got[t * pr.host.logits_stride + s];
        if ((s < lo || s >= hi) && !(std::isinf(v) && v < 0)) ++wrong;
      }
    }
    EXPECT_EQ(wrong, 0) << "masked cells must hold -inf";
  }
  if (ref != nullptr) {
    const tools::IndexerCheck check =
        tools::check_indexer_logits(got.data(), pr.host.logits_stride, ref->data(), pr.host.num_tokens,
                                      pr.host.num_keys, pr.ks.data(), pr.ke.data());
    EXPECT_TRUE(check.passed) << check.description;
    if (check.cells > 0) EXPECT_GT(check.max_abs_ref, 0.0);
  }
  return got;
}

// Both fast kernels and kAuto against the f64 CPU reference.
void check_all_kernels(const Shape& s, std::vector<int32_t> ks, std::vector<int32_t> ke, uint64_t seed,
                       bool with_fill = true) {
  SCOPED_TRACE("T=" + std::to_string(s.num_tokens) + " N=" + std::to_string(s.num_keys) +
               " H=" + std::to_string(s.num_heads) + " D=" + std::to_string(s.head_dim) +
               (s.padded_strides ? " padded" : ""));
  Problem pr;
  make_problem(s, std::move(ks), std::move(ke), seed, &pr);
  std::vector<double> ref;
  FP8DSA_ASSERT_STATUS_OK(reference::indexer_logits_cpu_f64(pr.host, &ref));
  for (IndexerKernel kernel : kFastKernels) run_and_check(pr, kernel, false, &ref);
  run_and_check(pr, IndexerKernel::kAuto, false, &ref);
  // The split epilogue (H = 64) within SPEC 6's bound too on these random inputs.
  if (s.num_heads == 64) run_and_check(pr, IndexerKernel::kQResident, false, &ref, true);
  if (with_fill) {
    for (IndexerKernel kernel : kFastKernels) run_and_check(pr, kernel, true, &ref);
  }
}

TEST(IndexerFastGpu, SpecShapesEveryHeadCount) {
  FP8DSA_SKIP_WITHOUT_GPU();
  const int64_t shapes[][2] = {{1, 1}, {2, 32}, {128, 128}, {501, 501}, {722, 722}, {32, 64}, {128, 256}};
  uint64_t seed = 71000;
  for (const auto& shape : shapes) {
    for (int h : {4, 8, 16, 32, 64}) {
      Shape s{shape[0], shape[1], h};
      s.padded_strides = (h == 8 || h == 64) && shape[1] > 1;
      const tools::KeyRanges r = tools::random_key_ranges(s.num_tokens, s.num_keys, seed + 7, 0.1, 0.1);
      check_all_kernels(s, r.ks, r.ke, seed += 10, /*with_fill=*/h == 16 || h == 64);
    }
  }
}

TEST(IndexerFastGpu, HeadDim64EveryHeadCount) {
  FP8DSA_SKIP_WITHOUT_GPU();
  uint64_t seed = 72000;
  for (int h : {4, 8, 16, 32, 64}) {
    Shape s{133, 517, h, 64};
    s.padded_strides = h == 32;
    const tools::KeyRanges r = tools::random_key_ranges(s.num_tokens, s.num_keys, seed + 7, 0.1, 0.1);
    check_all_kernels(s, r.ks, r.ke, seed += 10, h == 4);
  }
}

// The Q-resident scorer's split epilogue (IndexerParams::split_epilogue, H = 64) takes
// sum_h w relu(x) as (sum w x + sum w |x|) / 2, the first half on the tensor cores from
// q~ = sum_h w q. Where relu cuts a head the exact halves cancel but the tensor cores' error in its
// x does not, so the hard case is the one where relu cuts most heads: here every key is positive and
// 7 heads in 8 negative (their dot products below zero), with w spread over six decades of both
// signs. Measured on the H200: the split errs by 2.3e-3 of max |ref| at D = 128 (4.7e-4 at D = 64),
// the plain epilogue by 2.4e-4 (SPEC 6's bound for random inputs, which the other tests check, is
// 1e-3); this construction is held to 4e-3 and calc_diff < 1e-5, the default (exact) epilogue of
// every kernel to SPEC 6. The errors are printed.
TEST(IndexerFastGpu, SplitEpilogueWhereReluCutsMostHeads) {
  FP8DSA_SKIP_WITHOUT_GPU();
  uint64_t seed = 73000;
  for (int h : {32, 64}) {
    for (int d : {128, 64}) {
      Shape s{257, 1500, h, d};
      const tools::KeyRanges r = tools::random_key_ranges(s.num_tokens, s.num_keys, seed + 7, 0.1, 0.1);
      Problem pr;
      indexer_test::make_problem(s, r.ks, r.ke, seed += 10, &pr);
      for (uint8_t& b : pr.k) b &= 0x7Fu;  // |k|
      const int64_t q_stride = pr.host.q_token_stride;
      for (int64_t t = 0; t < s.num_tokens; ++t) {
        for (int head = 0; head < h; ++head) {
          if (head % 8 == 3) continue;  // one head in 8 keeps its signs
          uint8_t* row = pr.q.data() + t * q_stride + int64_t{head} * d;
          for (int i = 0; i < d; ++i) row[i] = (row[i] & 0x7Fu) == 0 ? row[i] : static_cast<uint8_t>(row[i] | 0x80u);
        }
      }
      for (size_t i = 0; i < pr.w.size(); ++i) {
        const double u = static_cast<double>((i * 2654435761u) % 6000) / 1000.0 - 3.0;  // [-3, 3)
        pr.w[i] = static_cast<float>((i % 3 == 0 ? -1.0 : 1.0) * std::pow(10.0, u));
      }
      pr.d_q = DeviceBuffer<uint8_t>(pr.q);
      pr.d_k = DeviceBuffer<uint8_t>(pr.k);
      pr.d_w = DeviceBuffer<float>(pr.w);
      pr.device.q = pr.d_q.get();
      pr.device.k = pr.d_k.get();
      pr.device.w = pr.d_w.get();
      std::vector<double> ref;
      FP8DSA_ASSERT_STATUS_OK(reference::indexer_logits_cpu_f64(pr.host, &ref));
      SCOPED_TRACE("H=" + std::to_string(h) + " D=" + std::to_string(d));
      // The exact epilogue of every kernel against SPEC 6 (run_and_check), the split one (the
      // Q-resident scorer at H = 64) against its own bound.
      for (int run = 0; run <= static_cast<int>(std::size(kFastKernels)); ++run) {
        const bool split = run == static_cast<int>(std::size(kFastKernels));
        if (split && h != 64) continue;
        const IndexerKernel kernel = split ? IndexerKernel::kQResident : kFastKernels[run];
        const std::vector<float> got = run_and_check(pr, kernel, false, split ? nullptr : &ref, split);
        const tools::IndexerCheck check = tools::check_indexer_logits(
            got.data(), pr.host.logits_stride, ref.data(), s.num_tokens, s.num_keys, pr.ks.data(), pr.ke.data());
        const double rel = check.max_abs_error / std::max(check.max_abs_ref, 1e-300);
        std::printf("  H=%d D=%d %-10s%s max abs error / max |ref| = %.2e, diff = %.2e\n", h, d,
                    indexer_kernel_name(kernel), split ? " split" : "", rel, check.diff);
        if (split) {
          EXPECT_EQ(check.non_finite_mismatches, 0);
          EXPECT_LT(check.diff, 1e-5);
          EXPECT_LE(rel, 4e-3);
        }
      }
    }
  }
}

TEST(IndexerFastGpu, FullRangesAndEmptyRows) {
  FP8DSA_SKIP_WITHOUT_GPU();
  uint64_t seed = 73000;
  for (int h : {4, 32, 64}) {
    Shape s{77, 1000, h};
    tools::KeyRanges r = tools::full_key_ranges(s.num_tokens, s.num_keys);
    for (int64_t t = 0; t < s.num_tokens; t += 5) r.ke[t] = r.ks[t] = static_cast<int32_t>((t * 37) % 1000);
    check_all_kernels(s, r.ks, r.ke, seed += 10, false);
  }
  // Every row empty: nothing is written (and with fill_masked everything is -inf).
  Shape s{40, 300, 64};
  std::vector<int32_t> ks(40, 100), ke(40, 50);
  check_all_kernels(s, ks, ke, seed + 100, true);
}

TEST(IndexerFastGpu, CausalWithCachePrefix) {
  FP8DSA_SKIP_WITHOUT_GPU();
  const std::vector<SequenceLayout> one = {{179, 896}};
  int64_t T = 0, N = 0;
  std::vector<int32_t> ks(179), ke(179);
  FP8DSA_ASSERT_STATUS_OK(build_causal_bounds(one, ks.data(), ke.data(), &T, &N));
  uint64_t seed = 74000;
  for (int h : {4, 16, 64}) check_all_kernels(Shape{T, N, h}, ks, ke, seed += 10, h == 64);

  // A ragged batch of three sequences with different prefixes.
  const std::vector<SequenceLayout> batch = {{37, 300}, {100, 0}, {5, 1200}};
  std::vector<int32_t> bks(142), bke(142);
  FP8DSA_ASSERT_STATUS_OK(build_causal_bounds(batch, bks.data(), bke.data(), &T, &N));
  ASSERT_EQ(T, 142);
  for (int h : {8, 32}) check_all_kernels(Shape{T, N, h}, bks, bke, seed += 10, false);
}

// Compares f32 logits of a fast kernel with the GPU reference's f32 logits over each row's range
// (SPEC 6 metrics with the reference in place of f64), streaming to keep host memory small.
::testing::AssertionResult close_to_gpu_reference(const std::vector<float>& got, const std::vector<float>& ref,
                                                  const Problem& pr) {
  double sxy = 0, sxx = 0, max_err = 0, max_ref = 0;
  int64_t non_finite = 0, cells = 0;
  const int64_t N = pr.host.num_keys;
  for (int64_t t = 0; t < pr.host.num_tokens; ++t) {
    const int64_t lo = clamped(pr.ks[t], N), hi = std::max(lo, clamped(pr.ke[t], N));
    for (int64_t s = lo; s < hi; ++s) {
      const double g = got[t * pr.host.logits_stride + s], r = ref[t * pr.host.logits_stride + s];
      if (!std::isfinite(g) || !std::isfinite(r)) {
        ++non_finite;
        continue;
      }
      sxy += g * r;
      sxx += g * g + r * r;
      max_err = std::max(max_err, std::abs(g - r));
      max_ref = std::max(max_ref, std::abs(r));
      ++cells;
    }
  }
  const double diff = sxx > 0 ? 1.0 - 2.0 * sxy / sxx : 0.0;
  if (non_finite == 0 && diff < 1e-5 && max_err <= 1e-3 * max_ref && cells > 0) {
    return ::testing::AssertionSuccess() << cells << " cells, diff " << diff;
  }
  return ::testing::AssertionFailure() << cells << " cells: diff " << diff << ", max abs error " << max_err
                                       << " vs max|ref| " << max_ref << ", non-finite " << non_finite;
}

void check_against_gpu_reference(const Shape& s, std::vector<int32_t> ks, std::vector<int32_t> ke,
                                 uint64_t seed, std::initializer_list<IndexerKernel> kernels,
                                 bool fill_masked = false) {
  SCOPED_TRACE("T=" + std::to_string(s.num_tokens) + " N=" + std::to_string(s.num_keys) +
               " H=" + std::to_string(s.num_heads));
  Problem pr;
  make_problem(s, std::move(ks), std::move(ke), seed, &pr);
  IndexerParams d = pr.device;
  d.kernel = IndexerKernel::kReference;
  FP8DSA_ASSERT_STATUS_OK(indexer_logits(d));
  const std::vector<float> ref = pr.d_logits.download();
  for (IndexerKernel kernel : kernels) {
    const std::vector<float> got = run_and_check(pr, kernel, fill_masked, nullptr);
    EXPECT_TRUE(close_to_gpu_reference(got, ref, pr)) << indexer_kernel_name(kernel);
  }
}

// SPEC 8: 4 x 512 new tokens over 76000 / 60000 / 45000 / 30000 cached keys.
TEST(IndexerFastGpu, LargeRaggedCachePrefixBatchAgainstGpuReference) {
  FP8DSA_SKIP_WITHOUT_GPU();
  const std::vector<SequenceLayout> batch = {{512, 76000}, {512, 60000}, {512, 45000}, {512, 30000}};
  int64_t T = 0, N = 0;
  std::vector<int32_t> ks(2048), ke(2048);
  FP8DSA_ASSERT_STATUS_OK(build_causal_bounds(batch, ks.data(), ke.data(), &T, &N));
  check_against_gpu_reference(Shape{T, N, 16}, ks, ke, 75000,
                              {IndexerKernel::kQResident, IndexerKernel::kKResident});
}

// The benchmark shape: T = 4096 causal over N = 65536 (61440 cached), H = 64.
TEST(IndexerFastGpu, LargeCausalAgainstGpuReference) {
  FP8DSA_SKIP_WITHOUT_GPU();
  const tools::KeyRanges r = tools::causal_key_ranges(4096, 65536);
  check_against_gpu_reference(Shape{4096, 65536, 64}, r.ks, r.ke, 76000, {IndexerKernel::kQResident});
}

// fill_masked at the shapes where the fill runs beside the scorer's last wave (T = 4096 causal:
// several waves of scorer CTAs, 4096 rows of masked cells): every masked cell -inf, every valid
// one the scorer's, both kernels (the K-resident scorer does not let the fill start early).
TEST(IndexerFastGpu, MaskedFillBesideTheScorer) {
  FP8DSA_SKIP_WITHOUT_GPU();
  const tools::KeyRanges r = tools::causal_key_ranges(4096, 8192);
  for (int heads : {64, 32}) {
    check_against_gpu_reference(Shape{4096, 8192, heads}, r.ks, r.ke, 77000 + heads,
                                {IndexerKernel::kQResident, IndexerKernel::kKResident}, true);
  }
  // N = 32K, H = 32: on 132 SMs the plan cuts the scorer's last wave finer (key_splits.h) and runs
  // the fill after it.
  const tools::KeyRanges r32k = tools::causal_key_ranges(4096, 32768);
  if (device_sm_count() == 132) {
    Problem pr;
    make_problem(Shape{4096, 32768, 32}, r32k.ks, r32k.ke, 77100, &pr);
    IndexerParams p = pr.device;
    p.fill_masked = true;  // the cut weighs the fill (choose_tail_splits)
    detail::indexer::QResidentPlan plan;
    FP8DSA_ASSERT_STATUS_OK(detail::indexer::plan_q_resident(p.resolved(), {}, &plan));
    EXPECT_GT(plan.tail_blocks, 0);
    EXPECT_EQ(plan.fill, detail::indexer::FillLaunch::kSerial);
    FP8DSA_ASSERT_STATUS_OK(detail::indexer::run_q_resident(p.resolved(), {}, &plan));
    FP8DSA_ASSERT_CUDA(cudaDeviceSynchronize());
  }
  check_against_gpu_reference(Shape{4096, 32768, 32}, r32k.ks, r32k.ke, 77100, {IndexerKernel::kQResident}, true);
}

TEST(IndexerFastGpu, BadArgumentsAreRefused) {
  FP8DSA_SKIP_WITHOUT_GPU();
  Problem pr;
  const tools::KeyRanges r = tools::full_key_ranges(16, 256);
  make_problem(Shape{16, 256, 32}, r.ks, r.ke, 77000, &pr);
  for (IndexerKernel kernel : {IndexerKernel::kQResident, IndexerKernel::kKResident, IndexerKernel::kAuto}) {
    SCOPED_TRACE(indexer_kernel_name(kernel));
    IndexerParams ok = pr.device;
    ok.kernel = kernel;
    FP8DSA_ASSERT_STATUS_OK(indexer_logits(ok));
    FP8DSA_ASSERT_CUDA(cudaDeviceSynchronize());

    auto expect_invalid = [&](IndexerParams bad, const char* needle) {
      const Status st = indexer_logits(bad);
      EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.to_string();
      EXPECT_NE(st.message().find(needle), std::string::npos) << st.to_string();
    };
    IndexerParams bad = ok;
    bad.num_heads = 12;
    expect_invalid(bad, "num_heads");
    bad = ok;
    bad.head_dim = 96;
    expect_invalid(bad, "head_dim");
    bad = ok;
    bad.q = nullptr;
    expect_invalid(bad, "q");
    bad = ok;
    bad.k_row_stride = 136;  // not a multiple of 16
    expect_invalid(bad, "k_row_stride");
    bad = ok;
    bad.logits_stride = 255;
    expect_invalid(bad, "logits_stride");
    bad = ok;
    bad.q_dtype = DType::kBF16;
    expect_invalid(bad, "q");
    bad = ok;
    bad.kernel = static_cast<IndexerKernel>(17);
    expect_invalid(bad, "kernel");
  }
  // Empty problems are a successful no-op.
  IndexerParams empty = pr.device;
  empty.num_tokens = 0;
  empty.kernel = IndexerKernel::kQResident;
  FP8DSA_ASSERT_STATUS_OK(indexer_logits(empty));
}

// The Q-resident scorer builds each operand descriptor once and advances it by byte offsets; that
// must equal rebuilding it from the offset address for every stage / K step the kernels use
// (runs on the CPU).
TEST(IndexerFastGpu, AdvancedDescriptorsEqualRebuiltOnes) {
  using namespace fp8dsa::hopper;
  for (Swizzle sw : {Swizzle::k128B, Swizzle::k64B}) {
    const uint32_t width = swizzle_width_bytes(sw);
    for (uint32_t rows : {64u, 128u, 256u}) {
      for (uint32_t base = 0; base < (1u << 18) - 64 * 1024; base += 1024) {
        const uint64_t d0 = kmajor_descriptor(base, sw, rows, 0);
        for (uint32_t off = 0; off < 64 * 1024 && base + off < (1u << 18); off += 4096) {
          for (uint32_t k = 0; k < width; k += 32) {
            ASSERT_EQ(advance_descriptor(d0, off + k), kmajor_descriptor(base + off, sw, rows, k))
                << "base " << base << " off " << off << " k " << k;
          }
        }
      }
    }
  }
}

// The measured table (bench/journal/2026-11-29.md, the router grid): K-resident for few tokens,
// Q-resident for prefill.
TEST(IndexerFastGpu, RouterFollowsTheMeasuredTable) {
  IndexerParams p;
  auto route = [&](int64_t t, int64_t n, int h) {
    p.num_tokens = t;
    p.num_keys = n;
    p.num_heads = h;
    return indexer_route(p);
  };
  EXPECT_EQ(route(1, 131072, 64), IndexerKernel::kKResident);
  EXPECT_EQ(route(4, 131072, 64), IndexerKernel::kQResident);
  EXPECT_EQ(route(16, 4096, 64), IndexerKernel::kKResident);
  EXPECT_EQ(route(64, 4096, 64), IndexerKernel::kQResident);
  EXPECT_EQ(route(4096, 65536, 64), IndexerKernel::kQResident);
  EXPECT_EQ(route(256, 4096, 8), IndexerKernel::kKResident);
  EXPECT_EQ(route(1024, 4096, 8), IndexerKernel::kQResident);
  EXPECT_EQ(route(4, 32768, 32), IndexerKernel::kKResident);
  EXPECT_EQ(route(16, 32768, 32), IndexerKernel::kQResident);
  EXPECT_EQ(route(16, 131072, 4), IndexerKernel::kKResident);
  EXPECT_EQ(route(4096, 131072, 4), IndexerKernel::kQResident);
}

// Every Q-resident variant (shared / split key tiles, 256 / 128 columns, ping-pong on and off,
// explicit key splits) against the f64 reference; ping-pong only reorders MMA issue, so its
// results must be bitwise identical.
TEST(IndexerFastGpu, QResidentVariants) {
  FP8DSA_SKIP_WITHOUT_GPU();
  using detail::indexer::QResidentShape;
  uint64_t seed = 78000;
  for (int h : {64, 32, 8}) {
    const tools::KeyRanges r = tools::random_key_ranges(67, 1500, seed + 7, 0.1, 0.1);
    Problem pr;
    make_problem(Shape{67, 1500, h}, r.ks, r.ke, seed += 10, &pr);
    std::vector<double> ref;
    FP8DSA_ASSERT_STATUS_OK(reference::indexer_logits_cpu_f64(pr.host, &ref));
    std::vector<QResidentShape> shapes = {QResidentShape::kNarrowShared};
    if (h >= 32) {
      shapes = {QResidentShape::kWideShared};
#if defined(FP8DSA_TUNING)  // the variants the timing driver compares (narrow-shared ships below 32 heads only)
      shapes.push_back(QResidentShape::kNarrowShared);
      shapes.push_back(QResidentShape::kWide);
      shapes.push_back(QResidentShape::kNarrow);
#endif
    }
    for (QResidentShape shape : shapes) {
      std::vector<float> first;
      // 0: automatic, 1: no ping-pong, 2: 3 key splits, 3: the last block in 7 parts, 4: 3 key
      // splits and the last 2 blocks in 4 parts, 5: every block a tail block in 2 parts.
      for (int variant = 0; variant < 6; ++variant) {
        SCOPED_TRACE("H=" + std::to_string(h) + " shape " + std::to_string(static_cast<int>(shape)) +
                     " variant " + std::to_string(variant));
        detail::indexer::QResidentTuning tuning;
        tuning.shape = shape;
        tuning.ping_pong = variant != 1;
        tuning.key_splits = variant == 2 || variant == 4 ? 3 : 0;
        tuning.tail_blocks = variant == 3 ? 1 : variant == 4 ? 2 : 0;
        tuning.tail_splits = variant == 3 ? 7 : variant == 4 ? 4 : 0;
        if (variant == 5) {
          const int columns = shape == QResidentShape::kWideShared ? 2 * 256
                              : shape == QResidentShape::kNarrowShared ? 3 * 128
                              : shape == QResidentShape::kWide ? 256 : 128;
          const int block_tokens = columns / h;
          tuning.tail_blocks = (67 + block_tokens - 1) / block_tokens;
          tuning.tail_splits = 2;
        }
        const IndexerParams d = pr.device;
        detail::indexer::QResidentPlan plan;
        FP8DSA_ASSERT_STATUS_OK(detail::indexer::plan_q_resident(d, tuning, &plan));
        EXPECT_EQ(tuning.tail_blocks, plan.tail_blocks) << "the plan makes the cut asked for";
        ASSERT_TRUE(testing::reruns_bitwise_equal([&] { return detail::indexer::run_q_resident(d, tuning, &plan); },
                                                  {testing::rerun_output(pr.d_logits, "logits")}));
        const std::vector<float> got = pr.d_logits.download();
        const auto owned = owned_cells(pr, false);
        EXPECT_TRUE(testing::all_written(got, owned, "logits"));
        EXPECT_TRUE(testing::untouched_outside(got, owned, "logits"));
        const tools::IndexerCheck check = tools::check_indexer_logits(
            got.data(), pr.host.logits_stride, ref.data(), pr.host.num_tokens, pr.host.num_keys, pr.ks.data(),
            pr.ke.data());
        EXPECT_TRUE(check.passed) << check.description;
        if (variant == 0) first = got;
        else EXPECT_EQ(0, std::memcmp(first.data(), got.data(), got.size() * sizeof(float)));
      }
      // Tail cuts the launch refuses: more blocks than the grid has, no parts, a negative count
      // other than -1 (automatic).
      for (const auto& [blocks, splits] : {std::pair{1000, 2}, std::pair{1, 0}, std::pair{-2, 2}}) {
        detail::indexer::QResidentTuning bad;
        bad.shape = shape;
        bad.tail_blocks = blocks;
        bad.tail_splits = splits;
        EXPECT_EQ(StatusCode::kInvalidArgument, detail::indexer::run_q_resident(pr.device, bad).code())
            << "tail " << blocks << " x " << splits;
      }
    }
  }
}

}  // namespace
}  // namespace fp8dsa
