// validate(FusedTopkParams) and the workspace query: the scorer's and the selection's own rules
// (named with the fused op), the scorer choice, and sizes that answer without a GPU.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "common/validation.h"
#include "fp8dsa/fused_topk.h"
#include "fused_topk/candidate_layout.h"

namespace fp8dsa {
namespace {

using testing::at;

void expect_rejected(const FusedTopkParams& p, StatusCode code, const std::string& needle) {
  testing::expect_rejected(p, code, needle, "fused_topk: ");
}

FusedTopkParams good_params() {
  FusedTopkParams p;
  p.scores.num_tokens = 37;
  p.scores.num_keys = 5001;  // no logits rows, so no multiple-of-4 rule for N
  p.scores.q = at<const void>(0);
  p.scores.w = at<const float>(256);
  p.scores.k = at<const void>(512);
  p.scores.k_scale = at<const float>(768);
  p.scores.ks = at<const int32_t>(1024);
  p.scores.ke = at<const int32_t>(1280);
  p.select.k = 2048;
  p.select.indices = at<int32_t>(1536);
  return p;
}

TEST(FusedTopkValidate, AcceptsGoodParams) {
  EXPECT_TRUE(validate(good_params()).is_ok()) << validate(good_params()).to_string();
  FusedTopkParams p = good_params();
  p.scores.kernel = IndexerKernel::kQResident;
  p.select.sorted = true;
  p.scores.logits = nullptr;  // ignored
  p.scores.logits_stride = 3;           // ignored
  EXPECT_TRUE(validate(p).is_ok()) << validate(p).to_string();
}

TEST(FusedTopkValidate, RejectsEachBadArgument) {
  FusedTopkParams p = good_params();
  p.scores.kernel = IndexerKernel::kKResident;
  expect_rejected(p, StatusCode::kInvalidArgument, "Q-resident");
  p = good_params();
  p.scores.num_heads = 12;
  expect_rejected(p, StatusCode::kInvalidArgument, "num_heads");
  p = good_params();
  p.scores.q = nullptr;
  expect_rejected(p, StatusCode::kInvalidArgument, "q must not be null");
  p = good_params();
  p.select.k = 0;
  expect_rejected(p, StatusCode::kInvalidArgument, "k (0)");
  p = good_params();
  p.select.k = 2049;
  expect_rejected(p, StatusCode::kInvalidArgument, "k (2049)");
  p = good_params();
  p.select.indices = nullptr;
  expect_rejected(p, StatusCode::kInvalidArgument, "indices must not be null");
  p = good_params();
  p.select.indices_stride = 100;
  expect_rejected(p, StatusCode::kInvalidArgument, "indices_stride");
  p = good_params();
  p.select.row_seq = at<const int32_t>(2048);
  expect_rejected(p, StatusCode::kInvalidArgument, "row_seq is given but page_table is null");
}

TEST(FusedTopkWorkspace, CandidateBuffersNotLogits) {
  // Without a GPU the query plans one key split: T slots of max(2k, k + 512) entries of 8 bytes.
  FusedTopkParams p = good_params();
  const size_t bytes = fused_topk_workspace_bytes(p);
  EXPECT_GE(bytes, size_t{37} * 4096 * 8);
  EXPECT_EQ(bytes % kWorkspaceAlignment, 0u);
  EXPECT_EQ(detail::fused_topk::candidate_capacity(16), 768);
  EXPECT_EQ(detail::fused_topk::candidate_capacity(512), 1024);
  EXPECT_EQ(detail::fused_topk::candidate_capacity(2048), 4096);
  p.scores.num_tokens = 0;
  EXPECT_EQ(fused_topk_workspace_bytes(p), 0u);
  // Rejected shapes: a Status naming the field, SIZE_MAX from the plain form.
  struct Bad {
    const char* field;
    void (*apply)(FusedTopkParams*);
  };
  const Bad bad[] = {{"select.k", [](FusedTopkParams* q) { q->select.k = 0; }},
                     {"select.k", [](FusedTopkParams* q) { q->select.k = 4096; }},
                     {"scores.num_tokens", [](FusedTopkParams* q) { q->scores.num_tokens = -5; }},
                     {"scores.num_keys", [](FusedTopkParams* q) { q->scores.num_keys = INT64_MAX; }},
                     {"scores.num_heads", [](FusedTopkParams* q) { q->scores.num_heads = 12; }}};
  for (const Bad& b : bad) {
    p = good_params();
    b.apply(&p);
    size_t got = 7;
    const Status s = fused_topk_workspace_bytes(p, &got);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << b.field;
    EXPECT_NE(s.message().find(b.field), std::string::npos) << s.message();
    EXPECT_EQ(got, 7u);
    EXPECT_EQ(fused_topk_workspace_bytes(p), SIZE_MAX) << b.field;
  }
  EXPECT_EQ(fused_topk_workspace_bytes(good_params(), nullptr).code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace fp8dsa
