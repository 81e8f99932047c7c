// The prefill CPU reference: a hand-computed chain, and the chain of the three stage references
// (run by hand here) on random inputs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <vector>

#include "common/memory_limit.h"
#include "tools/metrics.h"
#include "tools/random_inputs.h"
#include "fp8dsa/fp8.h"
#include "fp8dsa/pipeline.h"
#include "indexer/reference_cpu.h"
#include "sparse_mla/reference_cpu.h"

namespace fp8dsa {
namespace {

constexpr int kDqk = 576;
constexpr int kDv = 512;

// Host buffers of one prefill; `params` points into them.
struct Prefill {
  std::vector<uint8_t> iq, ik, q, kv;
  std::vector<float> w, k_scale, lse, max_logits;
  std::vector<int32_t> ks, ke;
  std::vector<uint16_t> out;
  PrefillParams params;

  void bind(int64_t T, int64_t N, int H, int D, int h, int topk) {
    IndexerParams& i = params.indexer;
    i.num_tokens = T;
    i.num_keys = N;
    i.num_heads = H;
    i.head_dim = D;
    i.q = iq.data();
    i.w = w.data();
    i.k = ik.data();
    i.k_scale = k_scale.data();
    i.ks = ks.data();
    i.ke = ke.data();
    SparseMlaParams& a = params.attention;
    a.num_tokens = T;
    a.num_kv = N;
    a.num_heads = h;
    a.q = q.data();
    a.kv = kv.data();
    a.sm_scale = 1.0f / std::sqrt(192.0f);
    out.assign(static_cast<size_t>(T * h * kDv), 0x1234);
    lse.assign(static_cast<size_t>(T * h), -999.0f);
    max_logits.assign(static_cast<size_t>(T * h), -999.0f);
    a.out = out.data();
    a.lse = lse.data();
    a.max_logits = max_logits.data();
    params.topk = topk;
  }
};

// Hand case: 70 keys, topk 64. Indexer (H = 4, D = 64): q[t, h, 0] = 1, k[s, 0] = 1, w = 1, so
// logit(s) = 4 * k_scale[s] with k_scale[s] = s + 1: the top 64 of all 70 keys are 6..69.
// Attention: q[t, h, 0] = 1 and kv[s, 0] = 0, so every score is 0 and the softmax is uniform over the
// selected keys; V column 1 is 1 on keys >= 6 and 448 on keys 0..5 (a wrong selection shows).
//   token 0 sees all 70 keys: out[1] = 1, lse = ln 64, max_logits = 0.
//   token 1 sees keys [0, 10): all ten, out[1] = (6 * 448 + 4) / 10 = 269.2, lse = ln 10.
//   token 2 sees nothing: out 0, lse +inf, max_logits -inf.
TEST(PrefillReference, HandComputed) {
  constexpr int64_t kT = 3, kN = 70;
  constexpr int kH = 4, kD = 64, kHeads = 8;
  Prefill p;
  std::vector<float> iq(kT * kH * kD, 0.0f), ik(kN * kD, 0.0f), q(kT * kHeads * kDqk, 0.0f),
      kv(kN * kDqk, 0.0f);
  for (int64_t i = 0; i < kT * kH; ++i) iq[i * kD] = 1.0f;
  for (int64_t s = 0; s < kN; ++s) {
    ik[s * kD] = 1.0f;
    kv[s * kDqk + 1] = s >= 6 ? 1.0f : 448.0f;
  }
  for (int64_t i = 0; i < kT * kHeads; ++i) q[i * kDqk] = 1.0f;
  p.iq.resize(iq.size());
  p.ik.resize(ik.size());
  p.q.resize(q.size());
  p.kv.resize(kv.size());
  floats_to_e4m3(iq.data(), p.iq.data(), iq.size());
  floats_to_e4m3(ik.data(), p.ik.data(), ik.size());
  floats_to_e4m3(q.data(), p.q.data(), q.size());
  floats_to_e4m3(kv.data(), p.kv.data(), kv.size());
  p.w.assign(kT * kH, 1.0f);
  p.k_scale.resize(kN);
  std::iota(p.k_scale.begin(), p.k_scale.end(), 1.0f);
  p.ks = {0, 0, 5};
  p.ke = {70, 10, 5};
  p.bind(kT, kN, kH, kD, kHeads, 64);
  ASSERT_TRUE(reference::prefill_cpu(p.params).is_ok());
  for (int h = 0; h < kHeads; ++h) {
    const uint16_t* o0 = p.out.data() + (0 * kHeads + h) * kDv;
    const uint16_t* o1 = p.out.data() + (1 * kHeads + h) * kDv;
    const uint16_t* o2 = p.out.data() + (2 * kHeads + h) * kDv;
    EXPECT_EQ(bf16_to_float(o0[0]), 0.0f);
    EXPECT_EQ(bf16_to_float(o0[1]), 1.0f) << h;
    EXPECT_NEAR(p.lse[0 * kHeads + h], std::log(64.0), 1e-6);
    EXPECT_EQ(p.max_logits[0 * kHeads + h], 0.0f);
    EXPECT_NEAR(bf16_to_float(o1[1]), 269.2, 269.2 / 256) << h;
    EXPECT_NEAR(p.lse[1 * kHeads + h], std::log(10.0), 1e-6);
    for (int c = 0; c < kDv; ++c) ASSERT_EQ(o2[c], 0) << h << ", " << c;
    EXPECT_EQ(p.lse[2 * kHeads + h], INFINITY);
    EXPECT_EQ(p.max_logits[2 * kHeads + h], -INFINITY);
  }
}

// Random inputs: the reference equals running the three stage references one after another, and
// (up to bf16 rounding and threshold ties) an f64 chain built here with its own top-k by full sort.
TEST(PrefillReference, MatchesStageChain) {
  constexpr int64_t kT = 7, kN = 301;  // N not a multiple of 4: padded logits rows
  constexpr int kH = 8, kD = 128, kHeads = 16, kTopk = 128;
  Prefill p;
  p.iq = tools::random_e4m3(kT * kH * kD, 1, -3.0f, 3.0f);
  p.ik = tools::random_e4m3(kN * kD, 2, -3.0f, 3.0f);
  p.w = tools::random_f32(kT * kH, 3, -1.0f, 1.0f);
  p.k_scale = tools::random_f32(kN, 4, 0.1f, 1.0f);
  p.q = tools::random_e4m3(kT * kHeads * kDqk, 5, -2.0f, 2.0f);
  p.kv = tools::random_e4m3(kN * kDqk, 6, -2.0f, 2.0f);
  // Causal over a 294-key cache, plus a short row (all keys taken) and an empty one.
  tools::KeyRanges r = tools::causal_key_ranges(kT, kN);
  r.ks[1] = 200;
  r.ke[1] = 250;
  r.ks[4] = r.ke[4] = 17;
  p.ks = r.ks;
  p.ke = r.ke;
  p.bind(kT, kN, kH, kD, kHeads, kTopk);
  const std::vector<float> sink = tools::random_f32(kHeads, 7, -2.0f, 2.0f);
  p.params.attention.attn_sink = sink.data();
  p.params.attention.q_scale = 1.25f;
  ASSERT_TRUE(reference::prefill_cpu(p.params).is_ok());

  // 1. The same three references, run here.
  std::vector<float> logits(kT * 304);
  IndexerParams ip = p.params.indexer;
  ip.logits = logits.data();
  ip.logits_stride = 304;
  ASSERT_TRUE(reference::indexer_logits_cpu(ip).is_ok());
  std::vector<int32_t> indices(kT * kTopk);
  TopkParams tp;
  tp.num_rows = kT;
  tp.num_keys = kN;
  tp.logits = logits.data();
  tp.logits_stride = 304;
  tp.ks = p.ks.data();
  tp.ke = p.ke.data();
  tp.k = kTopk;
  tp.indices = indices.data();
  ASSERT_TRUE(reference::topk_cpu(tp).is_ok());
  Prefill chain = p;
  chain.bind(kT, kN, kH, kD, kHeads, kTopk);
  SparseMlaParams ap = chain.params.attention;
  ap.attn_sink = sink.data();
  ap.q_scale = 1.25f;
  ap.indices = indices.data();
  ap.topk = kTopk;
  ASSERT_TRUE(reference::sparse_mla_cpu(ap).is_ok());
  EXPECT_EQ(p.out, chain.out);
  EXPECT_EQ(p.lse, chain.lse);
  EXPECT_EQ(p.max_logits, chain.max_logits);

  // 2. An f64 chain: f64 logits, top-k by a full sort, f64 attention.
  std::vector<double> ref_logits;
  ASSERT_TRUE(reference::indexer_logits_cpu_f64(p.params.indexer, &ref_logits).is_ok());
  std::vector<int32_t> ref_indices(kT * kTopk, -1);
  for (int64_t t = 0; t < kT; ++t) {
    std::vector<int32_t> keys;
    for (int32_t s = std::max(0, p.ks[t]); s < std::min<int64_t>(kN, p.ke[t]); ++s) keys.push_back(s);
    std::sort(keys.begin(), keys.end(),
              [&](int32_t a, int32_t b) { return ref_logits[t * kN + a] > ref_logits[t * kN + b]; });
    keys.resize(std::min<size_t>(keys.size(), kTopk));
    std::copy(keys.begin(), keys.end(), ref_indices.begin() + t * kTopk);
  }
  const tools::TopkCheck topk_check = tools::check_topk(indices.data(), kTopk, kTopk, ref_logits.data(), kN,
                                                            kT, kN, p.ks.data(), p.ke.data());
  EXPECT_TRUE(topk_check.passed) << topk_check.description;
  SparseMlaParams fp = ap;
  fp.indices = ref_indices.data();
  std::vector<double> out, lse, max_logits;
  ASSERT_TRUE(reference::sparse_mla_cpu_f64(fp, &out, &lse, &max_logits).is_ok());
  tools::SparseMlaOutputs got;
  got.out = p.out.data();
  got.lse = p.lse.data();
  got.max_logits = p.max_logits.data();
  const tools::SparseMlaCheck check = tools::check_sparse_mla(got, out, lse, max_logits, kT, kHeads, kDv);
  EXPECT_TRUE(check.passed) << check.description;
  EXPECT_LT(check.rel_l2, 5e-3) << check.description;
  EXPECT_EQ(check.empty_rows, kHeads);  // token 4
}

TEST(PrefillReference, RejectsInvalidParams) {
  Prefill p;
  p.iq = tools::random_e4m3(4 * 128, 1);
  p.ik = tools::random_e4m3(8 * 128, 2);
  p.w = tools::random_f32(4, 3);
  p.k_scale = tools::random_f32(8, 4, 0.5f, 1.0f);
  p.q = tools::random_e4m3(8 * kDqk, 5);
  p.kv = tools::random_e4m3(8 * kDqk, 6);
  p.ks = {0};
  p.ke = {8};
  p.bind(1, 8, 4, 128, 8, 64);
  ASSERT_TRUE(reference::prefill_cpu(p.params).is_ok());
  p.params.attention.num_kv = 7;
  Status s = reference::prefill_cpu(p.params);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("num_kv"), std::string::npos) << s.to_string();
  p.params.attention.num_kv = 8;
  p.params.topk = 100;
  EXPECT_FALSE(reference::prefill_cpu(p.params).is_ok());
  p.params.topk = 64;
  const int32_t lengths[1] = {8};
  p.params.attention.topk_length = lengths;
  s = reference::prefill_cpu(p.params);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("attention.topk_length must be null"), std::string::npos) << s.to_string();
}

TEST(PrefillReference, OutOfMemoryIsAStatus) {
  // One token over 2^30 keys (an empty key range, so no input row is read): its logits row (4 GB)
  // does not fit the child's 64 MB of headroom. The bad_alloc comes back as OutOfMemory (before
  // the fix it escaped: the child aborted).
  if (!testing::address_space_limit_supported()) GTEST_SKIP() << "no address-space cap under a sanitizer";
  Prefill p;
  p.iq = tools::random_e4m3(4 * 128, 1);
  p.ik = tools::random_e4m3(8 * 128, 2);
  p.w = tools::random_f32(4, 3);
  p.k_scale = tools::random_f32(8, 4, 0.5f, 1.0f);
  p.q = tools::random_e4m3(8 * kDqk, 5);
  p.kv = tools::random_e4m3(8 * kDqk, 6);
  p.ks = {0};
  p.ke = {0};
  p.bind(1, int64_t{1} << 30, 4, 128, 8, 64);
  const testing::ChildResult child = testing::run_with_address_space_limit(size_t{64} << 20, [&] {
    const Status s = reference::prefill_cpu(p.params);
    if (s.code() != StatusCode::kOutOfMemory) return 1;
    return s.message() == "prefill reference: out of host memory" ? 0 : 2;
  });
  EXPECT_TRUE(child.exited && child.code == 0) << child.describe();
}

TEST(PrefillReference, BlocksOfTokensGiveTheSameResult) {
  // 200 tokens over 90000 keys: the logits go through in blocks of 186 tokens (2^24 floats), so
  // the second block starts mid-batch. Stages run by hand on all tokens at once must agree bitwise.
  constexpr int64_t kT = 200, kN = 90000;
  constexpr int kH = 4, kD = 64, kHeads = 8, kTopk = 64;
  // The large inputs from a cheap hash: e4m3 bytes with the exponent below 0111 (|x| < 1, never NaN).
  auto hashed_e4m3 = [](size_t n, uint32_t seed) {
    std::vector<uint8_t> bytes(n);
    for (size_t i = 0; i < n; ++i) bytes[i] = static_cast<uint8_t>(((i + seed) * 2654435761u) >> 24) & 0xB7;
    return bytes;
  };
  Prefill p;
  p.iq = tools::random_e4m3(kT * kH * kD, 11);
  p.ik = hashed_e4m3(kN * kD, 12);
  p.w = tools::random_f32(kT * kH, 13);
  p.k_scale = tools::random_f32(kN, 14, 0.5f, 1.0f);
  p.q = tools::random_e4m3(kT * kHeads * kDqk, 15);
  p.kv = hashed_e4m3(kN * kDqk, 16);
  for (int64_t t = 0; t < kT; ++t) {
    p.ks.push_back(static_cast<int32_t>(t * 400));  // short ranges keep the reference fast
    p.ke.push_back(static_cast<int32_t>(t * 400 + 100 + t));
  }
  p.bind(kT, kN, kH, kD, kHeads, kTopk);
  ASSERT_TRUE(reference::prefill_cpu(p.params).is_ok());

  std::vector<float> logits(static_cast<size_t>(kT * kN));
  IndexerParams ix = p.params.indexer;
  ix.logits = logits.data();
  ASSERT_TRUE(reference::indexer_logits_cpu(ix).is_ok());
  std::vector<int32_t> indices(static_cast<size_t>(kT * kTopk));
  TopkParams tk;
  tk.num_rows = kT;
  tk.num_keys = kN;
  tk.logits = logits.data();
  tk.ks = p.ks.data();
  tk.ke = p.ke.data();
  tk.k = kTopk;
  tk.indices = indices.data();
  ASSERT_TRUE(reference::topk_cpu(tk).is_ok());
  std::vector<uint16_t> out(p.out.size());
  std::vector<float> lse(p.lse.size());
  SparseMlaParams at = p.params.attention;
  at.indices = indices.data();
  at.topk = kTopk;
  at.out = out.data();
  at.lse = lse.data();
  at.max_logits = nullptr;
  ASSERT_TRUE(reference::sparse_mla_cpu(at).is_ok());
  EXPECT_EQ(out, p.out);
  EXPECT_EQ(0, std::memcmp(lse.data(), p.lse.data(), lse.size() * sizeof(float)));
}

}  // namespace
}  // namespace fp8dsa
