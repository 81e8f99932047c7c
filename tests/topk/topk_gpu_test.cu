// fp8dsa::topk (SPEC 2 / 8) against the exact CPU reference, on every launch path: the public entry
// point, the one-CTA-per-row kernel with the row fully / partly / not cached in shared memory, the
// filter kernel, the register kernel (rows of N <= its cap; its unsorted output checked slot by
// slot against the order it promises), and the split path with several chunk counts. Every run
// writes into poisoned outputs (every slot of [0, k) written, the columns past k untouched); reruns
// are bitwise identical; the split, filter and register paths run inside a captured CUDA graph.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "common/gpu_test.h"
#include "common/topk_order_key.h"
#include "tools/metrics.h"
#include "common/poison.h"
#include "tools/random_inputs.h"
#include "common/rerun.h"
#include "fp8dsa/topk.h"
#include "topk/config.h"
#include "topk/launch.h"
#include "topk/reference_cpu.h"

namespace fp8dsa {
namespace {

using tools::DeviceBuffer;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

using testing::topk_order_key;

// One top-k problem on the host.
struct Problem {
  int64_t num_keys = 0;
  int64_t logits_stride = 0;
  int k = 2048;
  int64_t indices_stride = 0;
  bool sorted = false;
  std::vector<float> logits;  // [rows, logits_stride]
  std::vector<int32_t> ks, ke;
  // Page table (empty: no transform).
  std::vector<int32_t> page_table, row_seq, row_pos_base;
  int64_t page_table_stride = 0;
  int pages_per_seq = 0, page_size = 0;

  Problem(int64_t rows, int64_t n, int64_t row_stride, int k_, uint64_t seed)
      : num_keys(n), logits_stride(row_stride), k(k_) {
    indices_stride = k + 5;
    logits = tools::random_f32(static_cast<size_t>(rows * logits_stride), seed, -6.0f, 6.0f);
    ks.assign(static_cast<size_t>(rows), 0);
    ke.assign(static_cast<size_t>(rows), static_cast<int32_t>(n));
  }
  int64_t rows() const { return static_cast<int64_t>(ks.size()); }
  float* row(int64_t t) { return logits.data() + t * logits_stride; }
  void set_range(int64_t t, int64_t lo, int64_t hi) {
    ks[t] = static_cast<int32_t>(lo);
    ke[t] = static_cast<int32_t>(hi);
  }
  bool paged() const { return !page_table.empty(); }

  // Params over the given pointers (host or device copies of the fields above).
  TopkParams params(const float* l, const int32_t* s, const int32_t* e, int32_t* out, const int32_t* table,
                    const int32_t* seq, const int32_t* base) const {
    TopkParams p;
    p.num_rows = rows();
    p.num_keys = num_keys;
    p.logits = l;
    p.logits_stride = logits_stride;
    p.ks = s;
    p.ke = e;
    p.k = k;
    p.indices = out;
    p.indices_stride = indices_stride;
    p.sorted = sorted;
    if (paged()) {
      p.page_table = table;
      p.page_table_stride = page_table_stride;
      p.pages_per_seq = pages_per_seq;
      p.page_size = page_size;
      p.row_seq = row_seq.empty() ? nullptr : seq;
      p.row_pos_base = row_pos_base.empty() ? nullptr : base;
    }
    return p;
  }
  TopkParams host_params(std::vector<int32_t>* out) const {
    out->assign(static_cast<size_t>(rows() * indices_stride), -7);
    return params(logits.data(), ks.data(), ke.data(), out->data(), page_table.data(), row_seq.data(),
                  row_pos_base.data());
  }
};

// A launch path: the public entry point or a forced detail::topk configuration.
struct Path {
  std::string name;
  bool public_api = true;
  detail::topk::LaunchConfig config;
};

std::vector<Path> paths_for(const Problem& pb) {
  std::vector<Path> paths{{"topk()", true, {}}};
  auto row = [](int threads, int64_t cache) {
    detail::topk::LaunchConfig c;
    c.threads = threads;
    c.cache_keys = cache;
    return c;
  };
  for (int threads : {512, 1024}) {
    const std::string t = "row t" + std::to_string(threads);
    paths.push_back({t + " cached", false, row(threads, -1)});
    paths.push_back({t + " uncached", false, row(threads, 0)});
    paths.push_back({t + " cache 1000 keys", false, row(threads, 1000)});
  }
  for (int threads : {256, 512}) {
    detail::topk::LaunchConfig c;
    c.filter = true;
    c.threads = threads;
    paths.push_back({"filter t" + std::to_string(threads), false, c});
  }
  for (const detail::topk::LaunchConfig& c : detail::topk::register_launch_configs(pb.num_keys)) {
    paths.push_back({detail::topk::register_config_name(c), false, c});
  }
  if (pb.rows() <= detail::topk::kSplitMaxRows) {
    for (int chunks : {1, 3, 37}) {
      detail::topk::LaunchConfig c;
      c.split = true;
      c.chunks = chunks;
      paths.push_back({"split x" + std::to_string(chunks), false, c});
    }
  }
  return paths;
}

// The problem's device copies; run() poisons the output, launches one path and returns the whole
// [rows, indices_stride] output after checking the poison (slots [0, k) written, the rest untouched).
struct DeviceProblem {
  const Problem& pb;
  DeviceBuffer<float> logits;
  DeviceBuffer<int32_t> ks, ke, out, table, seq, base;
  DeviceBuffer<uint8_t> workspace;

  explicit DeviceProblem(const Problem& p)
      : pb(p), logits(p.logits), ks(p.ks), ke(p.ke), out(static_cast<size_t>(p.rows() * p.indices_stride)),
        table(p.page_table.empty() ? std::vector<int32_t>{0} : p.page_table),
        seq(p.row_seq.empty() ? std::vector<int32_t>{0} : p.row_seq),
        base(p.row_pos_base.empty() ? std::vector<int32_t>{0} : p.row_pos_base),
        workspace(std::max<size_t>(
            topk_workspace_bytes(p.params(nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr)), 256)) {}

  TopkParams params(bool paged, cudaStream_t stream = nullptr) const {
    TopkParams p = pb.params(logits.get(), ks.get(), ke.get(), out.get(), table.get(), seq.get(), base.get());
    if (!paged) {  // every page-table field back to its default: without a table they are refused
      p.page_table = nullptr;
      p.page_table_stride = 0;
      p.num_seqs = 0;
      p.pages_per_seq = 0;
      p.page_size = 0;
      p.row_seq = nullptr;
      p.row_pos_base = nullptr;
    }
    p.workspace = workspace.get();
    p.workspace_bytes = workspace.size();
    p.stream = stream;
    return p;
  }

  Status launch(const Path& path, bool paged, cudaStream_t stream = nullptr) const {
    const TopkParams p = params(paged, stream);
    if (path.public_api) return topk(p);
    return detail::topk::launch(p.resolved(), path.config);
  }

  std::vector<int32_t> run(const Path& path, bool paged) {
    testing::poison(out);
    const Status st = launch(path, paged);
    EXPECT_TRUE(st.is_ok()) << path.name << ": " << st.to_string();
    std::vector<int32_t> host = out.download();
    const auto cells = testing::matrix_cells(pb.rows(), pb.indices_stride, pb.k);
    EXPECT_TRUE(testing::all_written(host, cells, "indices")) << path.name;
    EXPECT_TRUE(testing::untouched_outside(host, cells, "indices")) << path.name;
    return host;
  }
};

// Per row: the same selection as the reference up to ties at the threshold — identical sets of the
// keys scoring above the reference's lowest selected score, and as many keys at that score.
void expect_same_selection(const Problem& pb, const std::vector<int32_t>& got, const std::vector<int32_t>& ref,
                           const std::string& what) {
  int reported = 0;
  for (int64_t t = 0; t < pb.rows(); ++t) {
    const float* row = pb.logits.data() + t * pb.logits_stride;
    std::vector<int32_t> g, r;
    for (int j = 0; j < pb.k; ++j) {
      const int32_t a = got[t * pb.indices_stride + j], b = ref[t * pb.indices_stride + j];
      if (a >= 0 && a < pb.num_keys) g.push_back(a);
      if (b >= 0) r.push_back(b);
    }
    bool ok = g.size() == r.size();
    if (ok && !r.empty()) {
      uint32_t threshold = ~0u;
      for (int32_t i : r) threshold = std::min(threshold, topk_order_key(row[i]));
      std::vector<int32_t> g_above, r_above;
      size_t g_ties = 0, r_ties = 0;
      for (int32_t i : g) {
        if (topk_order_key(row[i]) > threshold) g_above.push_back(i);
        if (topk_order_key(row[i]) == threshold) ++g_ties;
      }
      for (int32_t i : r) {
        if (topk_order_key(row[i]) > threshold) r_above.push_back(i);
        if (topk_order_key(row[i]) == threshold) ++r_ties;
      }
      std::sort(g_above.begin(), g_above.end());
      std::sort(r_above.begin(), r_above.end());
      ok = g_above == r_above && g_ties == r_ties;
    }
    if (!ok && reported++ < 3) {
      ADD_FAILURE() << what << ": row " << t << " selects " << g.size() << " keys, reference " << r.size()
                    << " (ks " << pb.ks[t] << ", ke " << pb.ke[t] << ")";
    }
  }
}

// The register kernel's unsorted output (topk_register_kernel.cu): the selected keys in ascending key
// order, those equal to the k-th largest taken from the row's start; a row of at most k keys whole.
std::vector<int32_t> ascending_selection(const Problem& pb, int64_t t) {
  const int64_t lo = std::clamp<int64_t>(pb.ks[t], 0, pb.num_keys);
  const int64_t hi = std::max(lo, std::clamp<int64_t>(pb.ke[t], 0, pb.num_keys));
  const float* row = pb.logits.data() + t * pb.logits_stride;
  std::vector<int32_t> out;
  if (hi - lo <= pb.k) {
    for (int64_t i = lo; i < hi; ++i) out.push_back(static_cast<int32_t>(i));
  } else {
    std::vector<uint32_t> keys;
    for (int64_t i = lo; i < hi; ++i) keys.push_back(topk_order_key(row[i]));
    std::nth_element(keys.begin(), keys.begin() + (pb.k - 1), keys.end(), std::greater<>());
    const uint32_t tau = keys[static_cast<size_t>(pb.k - 1)];
    int64_t ties = pb.k;
    for (int64_t i = lo; i < hi; ++i) ties -= topk_order_key(row[i]) > tau;
    for (int64_t i = lo; i < hi; ++i) {
      const uint32_t key = topk_order_key(row[i]);
      if (key > tau || (key == tau && ties-- > 0)) out.push_back(static_cast<int32_t>(i));
    }
  }
  out.resize(static_cast<size_t>(pb.k), -1);
  return out;
}

void expect_ascending_selection(const Problem& pb, const std::vector<int32_t>& got, const std::string& what) {
  int reported = 0;
  for (int64_t t = 0; t < pb.rows(); ++t) {
    const std::vector<int32_t> want = ascending_selection(pb, t);
    const std::vector<int32_t> row(got.begin() + t * pb.indices_stride, got.begin() + t * pb.indices_stride + pb.k);
    if (row != want && reported++ < 3) {
      const auto diff = std::mismatch(row.begin(), row.end(), want.begin());
      ADD_FAILURE() << what << ": row " << t << " slot " << (diff.first - row.begin()) << " holds " << *diff.first
                    << ", the ascending selection " << *diff.second << " (ks " << pb.ks[t] << ", ke " << pb.ke[t]
                    << ")";
    }
  }
}

// Runs every path on the problem and checks each against the CPU reference and the shared check.
void check_all_paths(const Problem& pb, const std::string& name) {
  std::vector<int32_t> unused;
  const TopkParams hp = pb.host_params(&unused);  // host view of the page-table fields
  Problem plain = pb;
  plain.page_table.clear();
  plain.row_seq.clear();
  plain.row_pos_base.clear();
  std::vector<int32_t> ref_plain;
  const TopkParams hp_plain = plain.host_params(&ref_plain);
  ASSERT_TRUE(reference::topk_cpu(hp_plain).is_ok());

  DeviceProblem dev(pb);
  tools::TopkCheckOptions options;
  options.rel_tol = 0.0;  // the kernel sees the same f32 scores: only exact ties may differ
  options.sorted = pb.sorted;
  for (const Path& path : paths_for(pb)) {
    SCOPED_TRACE(name + " / " + path.name + (pb.sorted ? " / sorted" : ""));
    const std::vector<int32_t> got = dev.run(path, false);
    const tools::TopkCheck c = tools::check_topk(got.data(), pb.indices_stride, pb.k, pb.logits.data(), pb.logits_stride,
                                                     pb.rows(), pb.num_keys, pb.ks.data(), pb.ke.data(), options);
    EXPECT_TRUE(c.passed) << c.description;
    expect_same_selection(pb, got, ref_plain, name + " / " + path.name);
    if (path.config.registers && !pb.sorted) expect_ascending_selection(pb, got, name + " / " + path.name);
    if (!pb.paged()) continue;
    // The transform is applied on the same selection: slot by slot it must be the reference
    // transform of the unpaged run.
    const std::vector<int32_t> paged = dev.run(path, true);
    int64_t mismatches = 0;
    for (int64_t t = 0; t < pb.rows(); ++t) {
      for (int j = 0; j < pb.k; ++j) {
        const int32_t want = reference::topk_page_transform(hp, t, got[t * pb.indices_stride + j]);
        mismatches += paged[t * pb.indices_stride + j] != want;
      }
    }
    EXPECT_EQ(mismatches, 0) << "page-table transform differs from the reference transform";
  }
}

// SPEC 8: row lengths 0, 1, k-1, k, k+1, 4096, 32768, 131072 for every k; misaligned row starts
// (logits_stride odd, random ks).
void spec_lengths_case(int k, bool sorted) {
  const std::vector<int64_t> lengths{0, 1, k - 1, k, k + 1, 4096, 32768, 131072};
  const int64_t n = 131072 + 45;
  Problem pb(static_cast<int64_t>(lengths.size()), n, n + 3, k, 1000 + k + sorted);
  pb.sorted = sorted;
  tools::Random rng(77 + k);
  for (size_t i = 0; i < lengths.size(); ++i) {
    const int64_t len = std::max<int64_t>(lengths[i], 0);
    const int64_t lo = rng.uniform_int(0, n - len);
    pb.set_range(static_cast<int64_t>(i), lo, lo + len);
  }
  check_all_paths(pb, "lengths k=" + std::to_string(k));
}

TEST(TopkGpu, SpecRowLengthsEveryK) {
  FP8DSA_SKIP_WITHOUT_GPU();
  for (int k : {1, 16, 512, 2048}) spec_lengths_case(k, false);
}

TEST(TopkGpu, SpecRowLengthsEveryKSorted) {
  FP8DSA_SKIP_WITHOUT_GPU();
  for (int k : {1, 16, 512, 2048}) spec_lengths_case(k, true);
}

// Adversarial rows: ties everywhere, ordered rows, non-finite mixes, a threshold bucket larger than
// the candidate list, keys equal in all but the last radix digit, degenerate ranges, exactly k keys
// in the top radix bucket (level 0) or in the top bucket of the second digit (level 1). n = 50000
// suits every path but the register kernel's; n <= 32768 adds it.
Problem adversarial_problem(int k, bool sorted, int64_t n = 50000) {
  const int rows = 22;
  Problem pb(rows, n, n + 1, k, 4242 + k);
  pb.sorted = sorted;
  tools::Random rng(99 + k);
  auto fill = [&](int t, auto value) {
    for (int64_t i = 0; i < n; ++i) pb.row(t)[i] = value(i);
  };
  fill(0, [](int64_t) { return 0.75f; });                                         // all equal
  fill(1, [&](int64_t) { return static_cast<float>(rng.uniform_int(1, 3)); });    // three values
  fill(2, [](int64_t i) { return static_cast<float>(i) * 1e-3f; });               // ascending
  fill(3, [](int64_t i) { return -static_cast<float>(i) * 1e-3f; });              // descending
  fill(4, [&](int64_t) {                                                          // NaN / -inf / finite
    const int64_t r = rng.uniform_int(0, 9);
    return r < 3 ? kNaN : (r < 6 ? -kInf : static_cast<float>(rng.uniform(-1, 1)));
  });
  fill(5, [](int64_t) { return kNaN; });                                          // all NaN
  fill(6, [](int64_t) { return -kInf; });                                         // all -inf
  fill(7, [&](int64_t i) {  // fewer finite keys than k, the rest NaN and -inf
    return i % 97 == 0 ? static_cast<float>(rng.uniform(-1, 1)) : (i % 2 ? kNaN : -kInf);
  });
  fill(8, [&](int64_t) { return rng.bernoulli(0.5) ? 0.0f : -0.0f; });            // signed zeros
  fill(9, [&](int64_t) { return static_cast<float>(rng.uniform(1.0, 1.25)); });   // one top-11-bit bucket
  fill(10, [&](int64_t) {  // equal in the top 22 bits: only the last digit separates them
    const uint32_t bits = 0x3F800000u + static_cast<uint32_t>(rng.uniform_int(0, 1023));
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
  });
  fill(11, [&](int64_t i) { return i % 5 == 0 ? kInf : (i % 5 == 1 ? kNaN : static_cast<float>(rng.uniform(-1, 1))); });
  fill(12, [&](int64_t) { return static_cast<float>(rng.uniform(-1e-40, 1e-40)); });  // denormals
  pb.set_range(13, 17, 18);        // a single valid key
  pb.set_range(14, 500, 500);      // ks == ke
  pb.set_range(15, 900, 100);      // ks > ke: empty
  pb.set_range(16, -1000, 300);    // clamped ks
  pb.set_range(17, n - 700, n + 5000);  // clamped ke
  pb.set_range(18, -5, n + 5);     // the whole row
  fill(19, [&](int64_t i) { return i < 3000 ? 2.0f : static_cast<float>(rng.uniform(-1, 1)); });  // many ties at the top
  auto bits = [](uint32_t b) {
    float f;
    std::memcpy(&f, &b, 4);
    return f;
  };
  // k keys spread over the row (`top`): values in [2, 2.5), one top-11-bit bucket; the rest in
  // [1, 1.25), the bucket below. Then the same in the second digit: k keys 0x3F900000 + [0, 1024),
  // the rest 0x3F800000 + [0, 1024) (the same top 11 bits, a lower second digit).
  const int64_t stride = n / (k + 1);
  auto top = [&](int64_t i) { return i % stride == 0 && i / stride < k; };
  fill(20, [&](int64_t i) { return static_cast<float>(top(i) ? rng.uniform(2.0, 2.5) : rng.uniform(1.0, 1.25)); });
  fill(21, [&](int64_t i) {
    return bits((top(i) ? 0x3F900000u : 0x3F800000u) + static_cast<uint32_t>(rng.uniform_int(0, 1023)));
  });
  return pb;
}

TEST(TopkGpu, AdversarialRows) {
  FP8DSA_SKIP_WITHOUT_GPU();
  for (int k : {16, 2048}) check_all_paths(adversarial_problem(k, false), "adversarial k=" + std::to_string(k));
}

TEST(TopkGpu, AdversarialRowsSorted) {
  FP8DSA_SKIP_WITHOUT_GPU();
  for (int k : {1, 2048}) check_all_paths(adversarial_problem(k, true), "adversarial sorted k=" + std::to_string(k));
}

// The same rows at the register kernels' row lengths (every path that holds them).
TEST(TopkGpu, AdversarialRowsInRegisters) {
  FP8DSA_SKIP_WITHOUT_GPU();
  for (int64_t n : {int64_t{8192}, int64_t{32768}}) {
    for (bool sorted : {false, true}) {
      for (int k : {1, 16, 2048}) {
        check_all_paths(adversarial_problem(k, sorted, n),
                        "adversarial n=" + std::to_string(n) + " k=" + std::to_string(k) + (sorted ? " sorted" : ""));
      }
    }
  }
}

// Row lengths around the register kernels' caps (N = 8192, 16384, 32768), a warp's keys (1024 in
// registers, or 896 in registers then 1152 in shared memory), a vector's 4 and k, at every
// misalignment of the row start: the rows of length N start at rows t = 0..3 of a row stride of
// N + 1, so at t mod 4; the others at random.
void register_lengths_case(int64_t n, int k, bool sorted) {
  std::vector<int64_t> lengths{0,    1,    2,    3,    4,    5,    7,    31,    32,    33,       127,   128,
                               129,  895,  896,  897,  1023, 1024, 1025, 1027,  2047,  2048,     2049,  4095,
                               4096, 4097, k - 1, k,   k + 1, k + 2, n - 1025, n - 4, n - 3, n - 1};
  std::erase_if(lengths, [&](int64_t len) { return len < 0 || len > n; });
  const size_t full_rows = 4;
  Problem pb(static_cast<int64_t>(lengths.size() + full_rows), n, n + 1, k, 7000 + n + k + sorted);
  pb.sorted = sorted;
  tools::Random rng(13 + n + k);
  for (size_t t = 0; t < full_rows; ++t) pb.set_range(static_cast<int64_t>(t), 0, n);
  for (size_t i = 0; i < lengths.size(); ++i) {
    const int64_t lo = rng.uniform_int(0, n - lengths[i]);
    pb.set_range(static_cast<int64_t>(full_rows + i), lo, lo + lengths[i]);
  }
  // A few ties and non-finite keys among the random ones.
  for (int64_t t = 0; t < pb.rows(); ++t) {
    for (int64_t i = t % 13; i < n; i += 97) pb.row(t)[i] = t % 3 == 0 ? kNaN : (t % 3 == 1 ? kInf : 0.5f);
  }
  check_all_paths(pb, "register lengths n=" + std::to_string(n) + " k=" + std::to_string(k));
}

TEST(TopkGpu, RegisterKernelRowLengths) {
  FP8DSA_SKIP_WITHOUT_GPU();
  for (int64_t n : {int64_t{8192}, int64_t{16384}, int64_t{32768}}) {
    for (int k : {1, 100, 2048}) register_lengths_case(n, k, false);
  }
}

TEST(TopkGpu, RegisterKernelRowLengthsSorted) {
  FP8DSA_SKIP_WITHOUT_GPU();
  for (int64_t n : {int64_t{8192}, int64_t{32768}}) {
    for (int k : {16, 2048}) register_lengths_case(n, k, true);
  }
}

// Rows built against the filter path's sample (config.h): the sampled keys far above the rest (the
// row then holds fewer than k keys at or above the threshold), far below it (more candidates than
// the list holds), every 32nd key large, and heavy ties at the top. Each takes the whole-row select
// or the filter and must be exact either way.
TEST(TopkGpu, RowsThatMisleadTheFilterSample) {
  FP8DSA_SKIP_WITHOUT_GPU();
  for (int k : {16, 2048}) {
    const int64_t n = 32768;
    Problem pb(6, n, n + 1, k, 777 + k);
    tools::Random rng(31 + k);
    const uint32_t len = static_cast<uint32_t>(n);
    const uint32_t samples = detail::topk::filter_samples(len, static_cast<uint32_t>(k));
    std::vector<bool> sampled(static_cast<size_t>(n), false);
    const int log2 = detail::topk::filter_samples_log2(len, static_cast<uint32_t>(k));
    for (uint32_t i = 0; i < samples; ++i) sampled[detail::topk::filter_sample_offset(i, log2, len)] = true;
    for (int64_t i = 0; i < n; ++i) {
      const float noise = static_cast<float>(rng.uniform(-1, 1));
      pb.row(0)[i] = sampled[i] ? 10.0f + noise : noise;                   // too few candidates
      pb.row(1)[i] = sampled[i] ? -10.0f + noise : 1.0f + 0.01f * noise;   // too many candidates
      pb.row(2)[i] = i % 32 == 5 ? 5.0f + noise : noise;                   // a period of 32
      pb.row(3)[i] = sampled[i] ? kNaN : noise;                            // the sample is all NaN
      pb.row(4)[i] = i % 3 == 0 ? 4.0f : noise;                            // ties at the top
      pb.row(5)[i] = noise;                                                // plain
    }
    check_all_paths(pb, "misleading samples k=" + std::to_string(k));
  }
}

// A million-key row: exact on every path (no candidate buffer that truncates), also when the
// threshold bucket holds most of the row.
TEST(TopkGpu, MillionKeyRows) {
  FP8DSA_SKIP_WITHOUT_GPU();
  const int64_t n = 1 << 20;
  Problem pb(2, n, n, 2048, 31337);
  tools::Random rng(5);
  for (int64_t i = 0; i < n; ++i) pb.row(1)[i] = static_cast<float>(rng.uniform(1.0, 1.25));
  check_all_paths(pb, "1M keys");
}

TEST(TopkGpu, PageTableTransform) {
  FP8DSA_SKIP_WITHOUT_GPU();
  // 64: the shift of a power-of-two page; 48: the division of any other (topk/page_table.h).
  for (int page_size : {64, 48}) {
    SCOPED_TRACE("page_size " + std::to_string(page_size));
    const int64_t n = 20000;
    Problem pb(6, n, n + 2, 512, 2024);
    tools::Random rng(8);
    pb.page_size = page_size;
    pb.pages_per_seq = 200;  // positions past 200 pages map to -1
    pb.page_table_stride = 203;
    const int num_seqs = 4;
    pb.page_table.resize(static_cast<size_t>(num_seqs * pb.page_table_stride));
    for (auto& e : pb.page_table) e = rng.bernoulli(0.1) ? -1 : static_cast<int32_t>(rng.uniform_int(0, 5000));
    pb.row_seq = {0, 1, 2, 3, -1, 1};
    pb.row_pos_base = {0, 100, 3000, -50, 0, 19000};
    pb.set_range(0, 0, n);
    pb.set_range(1, 100, 13000);
    pb.set_range(2, 3000, 3300);  // fewer keys than k
    pb.set_range(3, 0, n);
    pb.set_range(4, 10, 9000);    // negative sequence: all -1
    pb.set_range(5, 18000, n);
    check_all_paths(pb, "paged");
    pb.sorted = true;
    pb.row_seq.clear();           // row t is sequence t... only 4 sequences: keep rows < 4 valid
    pb.ks.resize(4);
    pb.ke.resize(4);
    pb.row_pos_base.clear();      // base = ks
    pb.logits.resize(static_cast<size_t>(4 * pb.logits_stride));
    check_all_paths(pb, "paged sorted");
  }
}

TEST(TopkGpu, BitwiseReruns) {
  FP8DSA_SKIP_WITHOUT_GPU();
  for (const auto& [sorted, n] : {std::pair{false, int64_t{50000}}, std::pair{true, int64_t{50000}},
                                  std::pair{false, int64_t{8192}}, std::pair{true, int64_t{8192}}}) {
    Problem pb = adversarial_problem(2048, sorted, n);
    DeviceProblem dev(pb);
    for (const Path& path : paths_for(pb)) {
      EXPECT_TRUE(testing::reruns_bitwise_equal([&] { return dev.launch(path, false); },
                                                {testing::rerun_output(dev.out, "indices")}))
          << path.name << (sorted ? " sorted" : "") << " n=" << n;
    }
  }
}

// The paths inside a captured graph (memset + kernels): same output as eager launches.
TEST(TopkGpu, GraphCapture) {
  FP8DSA_SKIP_WITHOUT_GPU();
  for (int64_t rows : {int64_t{3}, int64_t{200}, int64_t{300}}) {
    // 3 rows of 300000 keys take the split path (memset + chained kernels), 200 rows of 70000 the
    // filter kernel, 300 rows of 8000 the register kernel.
    const int64_t n = rows == 3 ? 300000 : (rows == 200 ? 70000 : 8000);
    Problem pb(rows, n, n + 1, 2048, 555 + rows);
    pb.sorted = rows == 3;
    DeviceProblem dev(pb);
    const std::vector<int32_t> eager = dev.run(Path{"topk()", true, {}}, false);
    cudaStream_t stream;
    FP8DSA_ASSERT_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    testing::poison(dev.out);
    FP8DSA_ASSERT_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
    const Status st = dev.launch(Path{"topk()", true, {}}, false, stream);
    FP8DSA_ASSERT_CUDA(cudaStreamEndCapture(stream, &graph));
    FP8DSA_ASSERT_STATUS_OK(st);
    FP8DSA_ASSERT_CUDA(cudaGraphInstantiate(&exec, graph, 0));
    FP8DSA_ASSERT_CUDA(cudaGraphLaunch(exec, stream));
    FP8DSA_ASSERT_CUDA(cudaStreamSynchronize(stream));
    EXPECT_EQ(dev.out.download(), eager) << "rows " << rows;
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
    cudaStreamDestroy(stream);
  }
}

TEST(TopkGpu, RejectsSmallWorkspaceAndBadArguments) {
  FP8DSA_SKIP_WITHOUT_GPU();
  Problem pb(4, 30000, 30000, 2048, 9);
  DeviceProblem dev(pb);
  TopkParams p = dev.params(false);
  ASSERT_GT(topk_workspace_bytes(p), 0u);
  p.workspace_bytes = topk_workspace_bytes(p) - 1;
  Status st = topk(p);
  EXPECT_EQ(st.code(), StatusCode::kWorkspaceTooSmall) << st.to_string();
  EXPECT_NE(st.message().find(std::to_string(topk_workspace_bytes(p))), std::string::npos) << st.message();
  p = dev.params(false);
  p.k = 0;
  EXPECT_EQ(topk(p).code(), StatusCode::kInvalidArgument);
  p = dev.params(false);
  p.num_rows = 0;  // nothing to do
  EXPECT_TRUE(topk(p).is_ok());
}

// Small shapes for compute-sanitizer (misaligned rows, every path, sorted and paged).
TEST(TopkGpuSmall, EveryPathSmallRows) {
  FP8DSA_SKIP_WITHOUT_GPU();
  Problem pb(7, 5001, 5003, 64, 321);
  pb.set_range(0, 1, 5001);
  pb.set_range(1, 3, 70);
  pb.set_range(2, 2, 66);
  pb.set_range(3, 7, 7);
  pb.set_range(4, 4990, 5001);
  pb.set_range(5, 0, 4999);
  pb.set_range(6, 1234, 1234 + 65);
  for (int64_t i = 0; i < 5001; ++i) pb.row(5)[i] = i % 3 == 0 ? kNaN : (i % 3 == 1 ? 1.0f : -kInf);
  check_all_paths(pb, "small");
  pb.sorted = true;
  pb.page_size = 16;
  pb.pages_per_seq = 300;
  pb.page_table_stride = 300;
  tools::Random rng(1);
  pb.page_table.resize(7 * 300);
  for (auto& e : pb.page_table) e = static_cast<int32_t>(rng.uniform_int(-1, 900));
  check_all_paths(pb, "small sorted paged");
}

}  // namespace
}  // namespace fp8dsa
