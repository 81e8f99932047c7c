// validate(PrefillParams): the stages' own checks (minus the fields the pipeline fills itself) and
// the cross-stage rules. Pointers are never dereferenced.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "common/validation.h"
#include "fp8dsa/pipeline.h"

namespace fp8dsa {
namespace {

using testing::at;

void expect_rejected(const PrefillParams& p, StatusCode code, const std::string& needle) {
  testing::expect_rejected(p, code, needle, "prefill: ");
}

// 179 new tokens over 896 cached keys: N = 1075, which is not a multiple of 4.
PrefillParams good_params() {
  PrefillParams p;
  IndexerParams& ix = p.indexer;
  ix.num_tokens = 179;
  ix.num_keys = 1075;
  ix.q = at<const void>(0);
  ix.w = at<const float>(256);
  ix.k = at<const void>(512);
  ix.k_scale = at<const float>(768);
  ix.ks = at<const int32_t>(1024);
  ix.ke = at<const int32_t>(1280);
  SparseMlaParams& at_ = p.attention;
  at_.num_tokens = 179;
  at_.num_kv = 1075;
  at_.num_heads = 64;
  at_.q = at<const void>(1536);
  at_.kv = at<const void>(1792);
  at_.sm_scale = 0.0721688f;
  at_.out = at<void>(2048);
  at_.lse = at<float>(2304);
  p.topk = 2048;
  return p;
}

TEST(PrefillValidate, AcceptsGoodParams) {
  EXPECT_TRUE(validate(good_params()).is_ok()) << validate(good_params()).to_string();
  for (int topk : {64, 512, 1984}) {
    PrefillParams p = good_params();
    p.topk = topk;
    p.fused = true;
    EXPECT_TRUE(validate(p).is_ok()) << validate(p).to_string();
  }
  PrefillParams p = good_params();  // an empty batch
  p.indexer.num_tokens = 0;
  p.attention.num_tokens = 0;
  EXPECT_TRUE(validate(p).is_ok()) << validate(p).to_string();
}

TEST(PrefillValidate, IgnoresFieldsThePipelineFills) {
  PrefillParams p = good_params();
  p.indexer.logits = nullptr;
  p.indexer.logits_stride = 3;                // would fail validate(IndexerParams)
  p.attention.indices = nullptr;
  p.attention.indices_stride = 5;   // would fail validate(SparseMlaParams)
  p.attention.topk = 100;           // would fail validate(SparseMlaParams)
  EXPECT_TRUE(validate(p).is_ok()) << validate(p).to_string();
}

TEST(PrefillValidate, DoesNotCheckWorkspace) {
  PrefillParams p = good_params();
  p.workspace = nullptr;
  p.workspace_bytes = 1;
  EXPECT_TRUE(validate(p).is_ok());
}

TEST(PrefillValidate, RejectsBadTopk) {
  PrefillParams p = good_params();
  p.topk = 100;
  expect_rejected(p, StatusCode::kInvalidArgument, "topk (100) must be a multiple of 64");
  for (int topk : {0, -64, 2112, 4096}) {
    p.topk = topk;
    expect_rejected(p, StatusCode::kInvalidArgument, "topk (" + std::to_string(topk) + ")");
  }
}

TEST(PrefillValidate, RejectsTopkLength) {
  // prefill sets each token's count itself (min(topk, ke - ks)); a caller's topk_length would be
  // applied after an unsorted top-k, keeping an arbitrary subset on the GPU.
  PrefillParams p = good_params();
  p.attention.topk_length = at<const int32_t>(2560);
  expect_rejected(p, StatusCode::kInvalidArgument, "attention.topk_length must be null");
}

TEST(PrefillValidate, RejectsAScaleProductOutsideF32) {
  PrefillParams p = good_params();
  p.attention.sm_scale = 1e20f;
  p.attention.q_scale = 1e20f;
  expect_rejected(p, StatusCode::kInvalidArgument, "sparse_mla: q_scale * kv_scale * sm_scale");
}

TEST(PrefillValidate, RejectsMismatchedStages) {
  PrefillParams p = good_params();
  p.attention.num_tokens = 178;
  expect_rejected(p, StatusCode::kInvalidArgument,
                  "attention.num_tokens (178) must equal indexer.num_tokens (179)");
  p = good_params();
  p.attention.num_kv = 1076;
  expect_rejected(p, StatusCode::kInvalidArgument,
                  "attention.num_kv (1076) must equal indexer.num_keys (1075)");
}

TEST(PrefillValidate, PropagatesIndexerErrors) {
  PrefillParams p = good_params();
  p.indexer.num_heads = 12;
  expect_rejected(p, StatusCode::kInvalidArgument, "indexer: num_heads (12)");
  p = good_params();
  p.indexer.ks = nullptr;
  expect_rejected(p, StatusCode::kInvalidArgument, "indexer: ks must not be null");
  p = good_params();
  p.indexer.q_dtype = DType::kBF16;
  expect_rejected(p, StatusCode::kInvalidArgument, "indexer: q dtype must be e4m3");
}

TEST(PrefillValidate, PropagatesAttentionErrors) {
  PrefillParams p = good_params();
  p.attention.lse = nullptr;
  expect_rejected(p, StatusCode::kInvalidArgument, "sparse_mla: lse must not be null");
  p = good_params();
  p.attention.sm_scale = 0.0f;
  expect_rejected(p, StatusCode::kInvalidArgument, "sparse_mla: sm_scale (0)");
  p = good_params();
  p.attention.d_qk = 512;  // the code of the stage's answer is kept
  expect_rejected(p, StatusCode::kNotImplemented, "sparse_mla: d_qk (512)");
}

}  // namespace
}  // namespace fp8dsa
