// validate(TopkParams): every rule accepts the good case and rejects each bad variant with the
// right code and a message naming the argument. Pointers are never dereferenced.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>

#include "common/valid_params.h"
#include "common/validation.h"
#include "fp8dsa/topk.h"

namespace fp8dsa {
namespace {

using testing::at;

void expect_rejected(const TopkParams& p, StatusCode code, const std::string& needle) {
  testing::expect_rejected(p, code, needle, "topk: ");
}

TopkParams good_params() {
  return testing::valid_topk_params();
}

TopkParams with_page_table(TopkParams p) {
  p.page_table = at<const int32_t>(1024);
  p.page_size = 64;
  p.pages_per_seq = 40;
  return p;
}

TEST(TopkValidate, AcceptsGoodParams) {
  EXPECT_TRUE(validate(good_params()).is_ok());
  TopkParams p = good_params();
  p.logits_stride = 5001;  // any row stride >= N: f32 rows need no extra alignment here
  p.indices_stride = 2049;
  p.k = 1;
  EXPECT_TRUE(validate(p).is_ok()) << validate(p).to_string();
  p.sorted = true;
  EXPECT_TRUE(validate(p).is_ok());
  EXPECT_TRUE(validate(with_page_table(good_params())).is_ok());
  TopkParams q = with_page_table(good_params());
  q.row_seq = at<const int32_t>(1280);
  q.row_pos_base = at<const int32_t>(1536);
  q.page_table_stride = 48;
  EXPECT_TRUE(validate(q).is_ok()) << validate(q).to_string();
}

TEST(TopkValidate, DoesNotCheckWorkspace) {
  TopkParams p = good_params();
  p.workspace = nullptr;
  p.workspace_bytes = 0;
  EXPECT_TRUE(validate(p).is_ok());
}

TEST(TopkValidate, ResolvedFillsPackedStrides) {
  TopkParams p = with_page_table(good_params());
  p.k = 512;
  const TopkParams r = p.resolved();
  EXPECT_EQ(r.logits_stride, 5000);
  EXPECT_EQ(r.indices_stride, 512);
  EXPECT_EQ(r.page_table_stride, 40);
  p.logits_stride = 6000;
  EXPECT_EQ(p.resolved().logits_stride, 6000);
}

TEST(TopkValidate, EmptyRowsNeedNoPointers) {
  TopkParams p;
  p.num_rows = 0;
  p.num_keys = 100;
  EXPECT_TRUE(validate(p).is_ok()) << validate(p).to_string();
  TopkParams q = good_params();  // rows but no keys: logits has no cells, indices still written
  q.num_keys = 0;
  q.logits = nullptr;
  EXPECT_TRUE(validate(q).is_ok()) << validate(q).to_string();
}

TEST(TopkValidate, RejectsBadSizes) {
  TopkParams p = good_params();
  p.num_rows = -2;
  expect_rejected(p, StatusCode::kInvalidArgument, "num_rows (-2)");
  p = good_params();
  p.num_keys = int64_t{std::numeric_limits<int32_t>::max()} + 1;
  expect_rejected(p, StatusCode::kInvalidArgument, "num_keys (2147483648)");
}

TEST(TopkValidate, RejectsBadK) {
  for (int k : {0, -1, 2049, 4096}) {
    TopkParams p = good_params();
    p.k = k;
    p.indices_stride = 4096;
    expect_rejected(p, StatusCode::kInvalidArgument, "k (" + std::to_string(k) + ") must be in [1, 2048]");
  }
}

TEST(TopkValidate, RejectsBadStrides) {
  TopkParams p = good_params();
  p.indices_stride = 2047;
  expect_rejected(p, StatusCode::kInvalidArgument, "indices_stride (2047) must be >= k (2048)");
  p = good_params();
  p.logits_stride = 4999;
  expect_rejected(p, StatusCode::kInvalidArgument, "logits_stride (4999) must be >= num_keys (5000)");
  p = good_params();
  p.logits_stride = int64_t{1} << 60;
  expect_rejected(p, StatusCode::kInvalidArgument, "logits extent");
  p = good_params();
  p.indices_stride = int64_t{1} << 60;
  expect_rejected(p, StatusCode::kInvalidArgument, "indices extent");
}

TEST(TopkValidate, RejectsMisalignedPointers) {
  TopkParams p = good_params();
  p.logits = reinterpret_cast<const float*>(testing::stand_in_arena() + 2);
  expect_rejected(p, StatusCode::kInvalidArgument, "logits (0x");
  p = good_params();
  p.indices = reinterpret_cast<int32_t*>(testing::stand_in_arena() + 769);
  expect_rejected(p, StatusCode::kInvalidArgument, "indices (0x");
}

TEST(TopkValidate, RejectsNullPointers) {
  TopkParams p = good_params();
  p.logits = nullptr;
  expect_rejected(p, StatusCode::kInvalidArgument, "logits must not be null");
  p = good_params();
  p.ks = nullptr;
  expect_rejected(p, StatusCode::kInvalidArgument, "ks must not be null");
  p = good_params();
  p.ke = nullptr;
  expect_rejected(p, StatusCode::kInvalidArgument, "ke must not be null");
  p = good_params();
  p.indices = nullptr;
  expect_rejected(p, StatusCode::kInvalidArgument, "indices must not be null");
}

TEST(TopkValidate, RejectsBadPageTable) {
  TopkParams p = with_page_table(good_params());
  p.page_size = 0;
  expect_rejected(p, StatusCode::kInvalidArgument, "page_size (0)");
  p = with_page_table(good_params());
  p.page_size = -64;
  expect_rejected(p, StatusCode::kInvalidArgument, "page_size (-64)");
  p = with_page_table(good_params());
  p.pages_per_seq = 0;
  expect_rejected(p, StatusCode::kInvalidArgument, "pages_per_seq (0)");
  p = with_page_table(good_params());
  p.page_table_stride = 39;
  expect_rejected(p, StatusCode::kInvalidArgument,
                  "page_table_stride (39) must be >= pages_per_seq (40)");
  p = with_page_table(good_params());
  p.page_table = reinterpret_cast<const int32_t*>(testing::stand_in_arena() + 1026);
  expect_rejected(p, StatusCode::kInvalidArgument, "page_table (0x");
  p = with_page_table(good_params());
  p.num_seqs = -1;
  expect_rejected(p, StatusCode::kInvalidArgument, "num_seqs (-1)");
  p = with_page_table(good_params());
  p.num_seqs = int64_t{1} << 30;
  p.page_table_stride = int64_t{1} << 40;
  expect_rejected(p, StatusCode::kInvalidArgument, "page_table extent");
  p = with_page_table(good_params());
  p.num_seqs = 3;
  EXPECT_TRUE(validate(p).is_ok()) << validate(p).to_string();
}

TEST(TopkValidate, RejectsRowMapsWithoutPageTable) {
  TopkParams p = good_params();
  p.row_seq = at<const int32_t>(1280);
  expect_rejected(p, StatusCode::kInvalidArgument, "row_seq is given but page_table is null");
  p = good_params();
  p.row_pos_base = at<const int32_t>(1536);
  expect_rejected(p, StatusCode::kInvalidArgument, "row_pos_base is given but page_table is null");
  p = good_params();
  p.page_size = 64;
  expect_rejected(p, StatusCode::kInvalidArgument, "page_size (64) is given but page_table is null");
  p = good_params();
  p.page_size = -1;
  expect_rejected(p, StatusCode::kInvalidArgument, "page_size (-1) is given but page_table is null");
}

}  // namespace
}  // namespace fp8dsa
