// fp8dsa::fused_topk (SPEC 3 / 8) against the unfused path on the same inputs: the Q-resident
// scorer's logits (bit for bit the values the fused scorer sees) then the exact top-k. The index
// sets must be the exact top-k of those logits (ties only between bitwise-equal scores), in
// ascending rows or by descending score, and within SPEC 6 of the f64 reference where it is cheap
// to compute. Shapes: SPEC 8's indexer shapes and head counts, causal rows with cached prefixes
// (buffers compacted many times), adversarial rows (all equal, rising with the key, NaN, +/-inf),
// the page table, poisoned outputs, bitwise reruns and a captured graph.
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
#include "fp8dsa/fused_topk.h"
#include "fp8dsa/indexer.h"
#include "fp8dsa/topk.h"
#include "fused_topk/candidate_layout.h"
#include "fused_topk/launch.h"
#include "indexer/reference_cpu.h"

namespace fp8dsa {
namespace {

using tools::DeviceBuffer;

// How the scores of a problem are shaped.
enum class Scores {
  kRandom,   // q, k uniform in [-3, 3), w in [-1, 1), k_scale in [0.05, 2)
  kEqual,    // w = 0: every score is 0
  kRising,   // positive q, k, w; k_scale rising with the key row: scores grow along the row
  kSpecial,  // random, with NaN, +inf and -inf scores mixed in through k_scale and w signs
  kSampleBait,  // random, with k_scale x 8 on every bait_period-th key (the prefloor's sample stride)
};

struct Inputs {
  int64_t T = 0, N = 0;
  int H = 64, D = 128;
  bool split_epilogue = false;  // IndexerParams::split_epilogue, for the fused and the unfused scorer
  std::vector<uint8_t> q, k;
  std::vector<float> w, k_scale;
  std::vector<int32_t> ks, ke;
};

Inputs make_inputs(int64_t T, int64_t N, int H, int D, tools::KeyRanges ranges, Scores kind, uint64_t seed,
                   int bait_period = 0) {
  Inputs in;
  in.T = T;
  in.N = N;
  in.H = H;
  in.D = D;
  const bool positive = kind == Scores::kRising;
  in.q = tools::random_e4m3(static_cast<size_t>(T * H * D), seed, positive ? 0.25f : -3.0f, 3.0f);
  in.k = tools::random_e4m3(static_cast<size_t>(N * D), seed + 1, positive ? 0.25f : -3.0f, 3.0f);
  in.w = tools::random_f32(static_cast<size_t>(T * H), seed + 2, positive ? 0.1f : -1.0f, 1.0f);
  in.k_scale = tools::random_f32(static_cast<size_t>(N), seed + 3, 0.05f, 2.0f);
  if (kind == Scores::kEqual) std::fill(in.w.begin(), in.w.end(), 0.0f);
  if (kind == Scores::kRising) {
    for (int64_t s = 0; s < N; ++s) in.k_scale[s] = 1.0f + 0.01f * static_cast<float>(s);
  }
  if (kind == Scores::kSampleBait) {
    for (int64_t s = 0; s < N; s += bait_period) in.k_scale[s] *= 8.0f;
  }
  if (kind == Scores::kSpecial) {
    tools::Random rng(seed + 4);
    for (int64_t s = 0; s < N; ++s) {
      const double u = rng.uniform(0.0, 1.0);
      if (u < 0.05) in.k_scale[s] = std::numeric_limits<float>::quiet_NaN();
      else if (u < 0.10) in.k_scale[s] = std::numeric_limits<float>::infinity();  // +/-inf (or NaN at 0)
    }
  }
  in.ks = std::move(ranges.ks);
  in.ke = std::move(ranges.ke);
  return in;
}

IndexerParams scorer_params(const Inputs& in, const void* q, const float* w, const void* k, const float* k_scale,
                            const int32_t* ks, const int32_t* ke) {
  IndexerParams p;
  p.num_tokens = in.T;
  p.num_keys = in.N;
  p.num_heads = in.H;
  p.head_dim = in.D;
  p.q = q;
  p.w = w;
  p.k = k;
  p.k_scale = k_scale;
  p.ks = ks;
  p.ke = ke;
  return p;
}

struct DeviceInputs {
  DeviceBuffer<uint8_t> q, k;
  DeviceBuffer<float> w, k_scale;
  DeviceBuffer<int32_t> ks, ke;
  explicit DeviceInputs(const Inputs& in)
      : q(in.q), k(in.k), w(in.w), k_scale(in.k_scale), ks(in.ks), ke(in.ke) {}
  IndexerParams params(const Inputs& in) const {
    IndexerParams p = scorer_params(in, q.get(), w.get(), k.get(), k_scale.get(), ks.get(), ke.get());
    p.split_epilogue = in.split_epilogue;
    return p;
  }
};

struct Selection {
  int k = 2048;
  bool sorted = false;
  int64_t ld_extra = 3;  // indices_stride = k + ld_extra; the extra columns must stay untouched
};

// The fused call's indices [T, k + ld_extra] (poisoned first; reruns bitwise equal).
std::vector<int32_t> run_fused(const Inputs& in, const DeviceInputs& d, const Selection& sel,
                               cudaStream_t stream = nullptr) {
  FusedTopkParams f;
  f.scores = d.params(in);
  f.select.k = sel.k;
  f.select.sorted = sel.sorted;
  f.select.indices_stride = sel.k + sel.ld_extra;
  DeviceBuffer<int32_t> indices(static_cast<size_t>(in.T * f.select.indices_stride));
  f.select.indices = indices.get();
  const size_t bytes = fused_topk_workspace_bytes(f);
  DeviceBuffer<uint8_t> workspace(bytes);
  f.workspace = workspace.get();
  f.workspace_bytes = bytes;
  f.stream = stream;
  EXPECT_TRUE(testing::reruns_bitwise_equal([&] { return fused_topk(f); },
                                            {testing::rerun_output(indices, "indices")}));
  std::vector<int32_t> got = indices.download();
  int64_t touched = 0;
  for (int64_t t = 0; t < in.T; ++t) {
    const int32_t* row = got.data() + t * f.select.indices_stride;
    for (int64_t c = sel.k; c < f.select.indices_stride; ++c) touched += !testing::is_poison(row[c]);
  }
  EXPECT_EQ(touched, 0) << "columns past k were written";
  return got;
}

// The Q-resident scorer's logits [T, logits_stride] (the values the fused scorer ranks).
std::vector<float> unfused_logits(const Inputs& in, const DeviceInputs& d, int64_t* logits_stride) {
  *logits_stride = min_logits_stride(in.N);
  DeviceBuffer<float> logits(static_cast<size_t>(std::max<int64_t>(1, in.T * *logits_stride)));
  IndexerParams p = d.params(in);
  p.kernel = IndexerKernel::kQResident;
  p.logits = logits.get();
  p.logits_stride = *logits_stride;
  p.fill_masked = true;
  EXPECT_TRUE(indexer_logits(p).is_ok());
  return logits.download();
}

// Exact check against the unfused logits: the selection is the top-k of exactly those scores.
void expect_exact_topk(const Inputs& in, const std::vector<int32_t>& got, const Selection& sel,
                       const std::vector<float>& logits, int64_t logits_stride) {
  tools::TopkCheckOptions o;
  o.rel_tol = 0.0;  // ties only between equal scores
  o.sorted = sel.sorted;
  const tools::TopkCheck c = tools::check_topk(got.data(), sel.k + sel.ld_extra, sel.k, logits.data(), logits_stride,
                                                   in.T, in.N, in.ks.data(), in.ke.data(), o);
  EXPECT_TRUE(c.passed) << c.description;
}

// Unsorted output comes in ascending key rows.
void expect_ascending_rows(const Inputs& in, const std::vector<int32_t>& got, const Selection& sel) {
  int64_t bad = 0;
  const int64_t ld = sel.k + sel.ld_extra;
  for (int64_t t = 0; t < in.T; ++t) {
    for (int c = 1; c < sel.k; ++c) {
      const int32_t a = got[t * ld + c - 1], b = got[t * ld + c];
      if (b >= 0 && a >= b) ++bad;
    }
  }
  EXPECT_EQ(bad, 0) << "unsorted rows are not in ascending key order";
}

void check_against_unfused(const Inputs& in, const Selection& sel, bool with_f64) {
  SCOPED_TRACE("T " + std::to_string(in.T) + " N " + std::to_string(in.N) + " H " + std::to_string(in.H) + " D " +
               std::to_string(in.D) + " k " + std::to_string(sel.k) + (sel.sorted ? " sorted" : "") +
               (in.split_epilogue ? " split_epilogue" : ""));
  const DeviceInputs d(in);
  const std::vector<int32_t> got = run_fused(in, d, sel);
  int64_t logits_stride = 0;
  const std::vector<float> logits = unfused_logits(in, d, &logits_stride);
  expect_exact_topk(in, got, sel, logits, logits_stride);
  if (!sel.sorted) expect_ascending_rows(in, got, sel);
  if (with_f64) {
    IndexerParams h = scorer_params(in, in.q.data(), in.w.data(), in.k.data(), in.k_scale.data(), in.ks.data(),
                                    in.ke.data());
    std::vector<double> ref;
    ASSERT_TRUE(reference::indexer_logits_cpu_f64(h, &ref).is_ok());
    // Against f64 the scorer's f32 sums carry the indexer's SPEC 6 error (max abs error 1e-3 of
    // max |ref|), so keys within that of the boundary may swap; the order was checked exactly above.
    double max_abs = 0.0;
    for (double x : ref) {
      if (std::isfinite(x)) max_abs = std::max(max_abs, std::abs(x));
    }
    tools::TopkCheckOptions o;
    o.abs_tol = 2e-3 * max_abs;
    const tools::TopkCheck c = tools::check_topk(got.data(), sel.k + sel.ld_extra, sel.k, ref.data(), in.N,
                                                     in.T, in.N, in.ks.data(), in.ke.data(), o);
    EXPECT_TRUE(c.passed) << c.description;
  }
}

// SPEC 8's indexer shapes, every head count, both head dims, a few k.
TEST(FusedTopkGpu, SpecShapesEveryHeadCount) {
  FP8DSA_SKIP_WITHOUT_GPU();
  const std::pair<int64_t, int64_t> shapes[] = {{1, 1}, {2, 32}, {128, 128}, {501, 501}, {722, 722}, {32, 64}, {128, 256}};
  uint64_t seed = 100;
  for (const auto& [T, N] : shapes) {
    for (int H : {4, 8, 16, 32, 64}) {
      for (int D : {128, 64}) {
        if (D == 64 && H != 64 && H != 8) continue;
        const Inputs in = make_inputs(T, N, H, D, tools::random_key_ranges(T, N, seed, 0.1, 0.1), Scores::kRandom,
                                      seed);
        for (int k : {16, 512}) check_against_unfused(in, {k, (seed & 1) != 0}, N <= 256);
        if (H == 64) {  // the split epilogue: the fused scorer ranks the split logits exactly too
          Inputs split = in;
          split.split_epilogue = true;
          check_against_unfused(split, {512, (seed & 1) != 0}, N <= 256);
        }
        seed += 7;
      }
    }
  }
}

// k = 1 and k = 2048, sorted and not, rows shorter and longer than k.
TEST(FusedTopkGpu, EveryK) {
  FP8DSA_SKIP_WITHOUT_GPU();
  const Inputs in = make_inputs(96, 6000, 64, 128, tools::random_key_ranges(96, 6000, 5, 0.1, 0.1), Scores::kRandom, 5);
  for (int k : {1, 16, 512, 2048}) {
    for (bool sorted : {false, true}) check_against_unfused(in, {k, sorted}, false);
  }
}

// Rows longer than the select kernel's bitmap of survivor rows (131072 rows): ascending rows then
// come from its radix sort instead; a row of fewer rows ends the batch, which uses the bitmap.
TEST(FusedTopkGpu, RowsLongerThanTheBitmap) {
  FP8DSA_SKIP_WITHOUT_GPU();
  tools::KeyRanges ranges = tools::full_key_ranges(6, 140000);
  ranges.ks.back() = 140000 - 131072;  // exactly the bitmap's reach
  const Inputs in = make_inputs(6, 140000, 64, 128, std::move(ranges), Scores::kRandom, 11);
  for (int k : {16, 2048}) {
    for (bool sorted : {false, true}) check_against_unfused(in, {k, sorted}, false);
  }
}

// Causal rows over cached prefixes: the buffers fill and compact many times per row.
TEST(FusedTopkGpu, CausalWithCachedPrefixes) {
  FP8DSA_SKIP_WITHOUT_GPU();
  const std::vector<std::vector<SequenceLayout>> batches = {
      {{179, 896}}, {{512, 76000}, {512, 60000}, {512, 45000}, {512, 30000}}};
  uint64_t seed = 300;
  for (const auto& batch : batches) {
    int64_t total_tokens = 0;
    for (const auto& s : batch) total_tokens += s.new_tokens;
    tools::KeyRanges r;
    r.ks.resize(static_cast<size_t>(total_tokens));
    r.ke.resize(static_cast<size_t>(total_tokens));
    int64_t T = 0, N = 0;
    ASSERT_TRUE(build_causal_bounds(batch, r.ks.data(), r.ke.data(), &T, &N).is_ok());
    for (int H : {64, 32}) {
      const Inputs in = make_inputs(T, N, H, 128, r, Scores::kRandom, seed++);
      check_against_unfused(in, {2048, false}, false);
      if (H == 64) check_against_unfused(in, {2048, true}, false);
    }
  }
}

// Rows that never let the threshold settle or are all ties: slower, still exact.
TEST(FusedTopkGpu, AdversarialRows) {
  FP8DSA_SKIP_WITHOUT_GPU();
  const int64_t T = 40, N = 20000;
  for (Scores kind : {Scores::kEqual, Scores::kRising, Scores::kSpecial}) {
    SCOPED_TRACE("scores kind " + std::to_string(static_cast<int>(kind)));
    const Inputs in = make_inputs(T, N, 64, 128, tools::random_key_ranges(T, N, 9, 0.1, 0.1), kind, 9);
    for (bool sorted : {false, true}) check_against_unfused(in, {2048, sorted}, false);
    if (kind == Scores::kEqual) {
      // Every score is 0: the lowest k rows of each range win, in ascending order.
      const DeviceInputs d(in);
      const Selection sel{2048, false};
      const std::vector<int32_t> got = run_fused(in, d, sel);
      int64_t wrong = 0;
      for (int64_t t = 0; t < T; ++t) {
        const int64_t lo = std::clamp<int64_t>(in.ks[t], 0, N), hi = std::max(lo, std::clamp<int64_t>(in.ke[t], 0, N));
        for (int c = 0; c < sel.k; ++c) {
          const int32_t want = c < hi - lo ? static_cast<int32_t>(lo + c) : -1;
          wrong += got[t * (sel.k + sel.ld_extra) + c] != want;
        }
      }
      EXPECT_EQ(wrong, 0);
    }
  }
}

// Rows whose sample (every sample_stride-th key of each split) scores far above the rest: the
// sampled floor lets fewer than k keys in, so the redo launch must score those rows again. 40
// tokens get 16 key splits of 200000 keys, ranges long enough to sample. The control rows (random
// scores) take the same shape without the bait.
TEST(FusedTopkGpu, MisleadingSample) {
  FP8DSA_SKIP_WITHOUT_GPU();
  const int64_t T = 40, N = 200000;
  for (int k : {16, 2048}) {
    IndexerParams shape;
    shape.num_tokens = T;
    shape.num_keys = N;
    shape.num_heads = 64;
    const int stride = detail::fused_topk::sample_stride(N, detail::fused_topk::choose_key_splits(shape),
                                                      detail::fused_topk::candidate_capacity(k));
    ASSERT_GT(stride, 0) << "the shape must take a sample";
    for (Scores kind : {Scores::kSampleBait, Scores::kRandom}) {
      SCOPED_TRACE("scores kind " + std::to_string(static_cast<int>(kind)) + " sample stride " + std::to_string(stride));
      const Inputs in =
          make_inputs(T, N, 64, 128, tools::random_key_ranges(T, N, 13, 0.1, 0.1), kind, 13, stride);
      check_against_unfused(in, {k, false}, false);
      if (k == 2048) check_against_unfused(in, {k, true}, false);
    }
  }
}

// Long rows that take a sample, with scores that keep beating the floor or are all ties: the
// sampled launch compacts between key tiles, at every head count's block shape (H = 64 and 32
// two consumers, H = 16 and 8 three). Exact either way.
TEST(FusedTopkGpu, AdversarialSampledRows) {
  FP8DSA_SKIP_WITHOUT_GPU();
  const int64_t T = 40, N = 200000;
  for (int H : {64, 32, 16, 8}) {
    for (Scores kind : {Scores::kEqual, Scores::kRising, Scores::kSpecial}) {
      SCOPED_TRACE("H " + std::to_string(H) + " scores kind " + std::to_string(static_cast<int>(kind)));
      const Inputs in =
          make_inputs(T, N, H, 128, tools::random_key_ranges(T, N, 17, 0.1, 0.1), kind, 17 + static_cast<uint64_t>(H));
      check_against_unfused(in, {2048, H == 64}, false);
    }
  }
  // And a sampled launch of the D = 64 kernels.
  const Inputs in = make_inputs(T, N, 64, 64, tools::random_key_ranges(T, N, 18, 0.1, 0.1), Scores::kRandom, 18);
  check_against_unfused(in, {2048, false}, false);
}

// The page-table transform, in the same kernel: the fused output equals the transform of the
// unfused selection row by row (the same sets, so the same physical rows).
TEST(FusedTopkGpu, PageTable) {
  FP8DSA_SKIP_WITHOUT_GPU();
  const int64_t T = 64, N = 5000;
  const int page = 64, pages = (N + page - 1) / page;
  const Inputs in = make_inputs(T, N, 32, 128, tools::full_key_ranges(T, N), Scores::kRandom, 21);
  std::vector<int32_t> table(static_cast<size_t>(T * pages));
  tools::Random rng(22);
  for (auto& e : table) e = rng.bernoulli(0.05) ? -1 : static_cast<int32_t>(rng.uniform_int(0, 100000));
  const DeviceInputs d(in);
  DeviceBuffer<int32_t> d_table(table);
  const int k = 512;
  FusedTopkParams f;
  f.scores = d.params(in);
  f.select.k = k;
  f.select.sorted = true;
  f.select.page_table = d_table.get();
  f.select.pages_per_seq = pages;
  f.select.page_size = page;
  DeviceBuffer<int32_t> paged(static_cast<size_t>(T * k));
  f.select.indices = paged.get();
  DeviceBuffer<uint8_t> workspace(fused_topk_workspace_bytes(f));
  f.workspace = workspace.get();
  f.workspace_bytes = workspace.size();
  FP8DSA_ASSERT_STATUS_OK(fused_topk(f));
  const std::vector<int32_t> got_paged = paged.download();
  const std::vector<int32_t> got = run_fused(in, d, {k, true, 0});
  int64_t wrong = 0;
  for (int64_t t = 0; t < T; ++t) {
    for (int c = 0; c < k; ++c) {
      const int32_t idx = got[t * k + c];
      int32_t want = -1;
      if (idx >= 0) {
        const int32_t e = table[t * pages + idx / page];
        want = e < 0 ? -1 : e * page + idx % page;
      }
      wrong += got_paged[t * k + c] != want;
    }
  }
  EXPECT_EQ(wrong, 0);
}

// Scorer then select, captured in a graph on a non-default stream: the same indices.
TEST(FusedTopkGpu, GraphCapture) {
  FP8DSA_SKIP_WITHOUT_GPU();
  const Inputs in = make_inputs(300, 9000, 64, 128, tools::random_key_ranges(300, 9000, 31, 0.1, 0.0),
                                Scores::kRandom, 31);
  const DeviceInputs d(in);
  const std::vector<int32_t> eager = run_fused(in, d, {2048, false, 0});
  FusedTopkParams f;
  f.scores = d.params(in);
  f.select.k = 2048;
  DeviceBuffer<int32_t> indices(static_cast<size_t>(in.T * 2048));
  f.select.indices = indices.get();
  DeviceBuffer<uint8_t> workspace(fused_topk_workspace_bytes(f));
  f.workspace = workspace.get();
  f.workspace_bytes = workspace.size();
  cudaStream_t stream;
  FP8DSA_ASSERT_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  f.stream = stream;
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  FP8DSA_ASSERT_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
  const Status s = fused_topk(f);
  FP8DSA_ASSERT_CUDA(cudaStreamEndCapture(stream, &graph));
  FP8DSA_ASSERT_STATUS_OK(s);
  FP8DSA_ASSERT_CUDA(cudaGraphInstantiate(&exec, graph, 0));
  FP8DSA_ASSERT_CUDA(cudaGraphLaunch(exec, stream));
  FP8DSA_ASSERT_CUDA(cudaStreamSynchronize(stream));
  EXPECT_EQ(indices.download(), eager);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
}

// The DeepSeek-V3.2 prefill shape: 4096 new tokens over 65536 keys, causal, k = 2048, on a sample
// of rows of the unfused logits.
TEST(FusedTopkGpu, LargeCausal) {
  FP8DSA_SKIP_WITHOUT_GPU();
  const int64_t T = 4096, N = 65536;
  const Inputs in = make_inputs(T, N, 64, 128, tools::causal_key_ranges(T, N), Scores::kRandom, 41);
  const DeviceInputs d(in);
  const Selection sel{2048, false, 0};
  FusedTopkParams f;
  f.scores = d.params(in);
  EXPECT_LT(fused_topk_workspace_bytes(f), static_cast<size_t>(T) * N * sizeof(float) / 2)
      << "the candidates must take far less than the logits they replace";
  const std::vector<int32_t> got = run_fused(in, d, sel);
  int64_t logits_stride = 0;
  const std::vector<float> logits = unfused_logits(in, d, &logits_stride);
  // Every 37th row and the last through the exact check.
  Inputs sample;
  sample.N = N;
  std::vector<int32_t> rows_got;
  std::vector<float> rows_logits;
  std::vector<int64_t> rows;
  for (int64_t t = 0; t < T; t += 37) rows.push_back(t);
  rows.push_back(T - 1);
  for (int64_t t : rows) {
    sample.ks.push_back(in.ks[t]);
    sample.ke.push_back(in.ke[t]);
    rows_got.insert(rows_got.end(), got.begin() + t * sel.k, got.begin() + (t + 1) * sel.k);
    rows_logits.insert(rows_logits.end(), logits.begin() + t * logits_stride, logits.begin() + (t + 1) * logits_stride);
  }
  sample.T = static_cast<int64_t>(sample.ks.size());
  expect_exact_topk(sample, rows_got, sel, rows_logits, logits_stride);
  expect_ascending_rows(sample, rows_got, sel);
}

TEST(FusedTopkGpu, RejectsSmallWorkspace) {
  FP8DSA_SKIP_WITHOUT_GPU();
  const Inputs in = make_inputs(16, 4096, 64, 128, tools::full_key_ranges(16, 4096), Scores::kRandom, 51);
  const DeviceInputs d(in);
  FusedTopkParams f;
  f.scores = d.params(in);
  DeviceBuffer<int32_t> indices(static_cast<size_t>(16 * 2048));
  f.select.indices = indices.get();
  DeviceBuffer<uint8_t> workspace(fused_topk_workspace_bytes(f));
  f.workspace = workspace.get();
  f.workspace_bytes = workspace.size() - 1;
  const Status s = fused_topk(f);
  EXPECT_EQ(s.code(), StatusCode::kWorkspaceTooSmall) << s.to_string();
  f.workspace_bytes = workspace.size();
  f.workspace = static_cast<uint8_t*>(workspace.get()) + 16;
  EXPECT_EQ(fused_topk(f).code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace fp8dsa
