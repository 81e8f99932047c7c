// prefill_workspace_bytes() and the checks prefill() runs before it touches the device: workspace
// size (with both numbers in the message), alignment, and the fused path's plan (indices and the
// fused candidates, no logits). All of them answer without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>

#include "common/validation.h"
#include "fp8dsa/fused_topk.h"
#include "fp8dsa/pipeline.h"
#include "pipeline/params.h"

namespace fp8dsa {
namespace {

using testing::at;

size_t align256(size_t bytes) { return (bytes + 255) / 256 * 256; }

// 179 new tokens over 896 cached keys: N = 1075, so the logits rows pad to 1076 floats.
PrefillParams small_params() {
  PrefillParams p;
  p.indexer.num_tokens = 179;
  p.indexer.num_keys = 1075;
  p.indexer.q = at<const void>(0);
  p.indexer.w = at<const float>(256);
  p.indexer.k = at<const void>(512);
  p.indexer.k_scale = at<const float>(768);
  p.indexer.ks = at<const int32_t>(1024);
  p.indexer.ke = at<const int32_t>(1280);
  p.attention.num_tokens = 179;
  p.attention.num_kv = 1075;
  p.attention.num_heads = 64;
  p.attention.q = at<const void>(1536);
  p.attention.kv = at<const void>(1792);
  p.attention.sm_scale = 0.0721688f;
  p.attention.out = at<void>(2048);
  p.attention.lse = at<float>(2304);
  p.topk = 512;
  return p;
}

// What the unfused path must hold: logits [T, 1076] f32, indices [T, topk] i32, and the top-k's own
// workspace for that call, each on a 256-byte boundary.
size_t expected_unfused_bytes(const PrefillParams& p) {
  TopkParams topk;
  topk.num_rows = p.indexer.num_tokens;
  topk.num_keys = p.indexer.num_keys;
  topk.logits_stride = 1076;
  topk.k = p.topk;
  topk.indices_stride = p.topk;
  return align256(179 * 1076 * 4) + align256(size_t{179} * p.topk * 4) + align256(topk_workspace_bytes(topk));
}

TEST(PrefillWorkspace, HoldsLogitsIndicesAndTopkWorkspace) {
  const PrefillParams p = small_params();
  EXPECT_EQ(prefill_workspace_bytes(p), expected_unfused_bytes(p));
  EXPECT_GE(prefill_workspace_bytes(p), size_t{179} * 1076 * 4 + size_t{179} * 512 * 4);
}

TEST(PrefillWorkspace, FusedPathHasNoLogitsBuffer) {
  PrefillParams p = small_params();
  p.fused = true;
  FusedTopkParams f;
  f.scores = p.indexer;
  f.select.k = p.topk;
  EXPECT_EQ(prefill_workspace_bytes(p), align256(size_t{179} * 512 * 4) + align256(fused_topk_workspace_bytes(f)));
  EXPECT_LT(prefill_workspace_bytes(p), expected_unfused_bytes(small_params()) + fused_topk_workspace_bytes(f));
}

TEST(PrefillWorkspace, GrowsWithTopk) {
  PrefillParams p = small_params();
  p.topk = 2048;
  EXPECT_EQ(prefill_workspace_bytes(p), expected_unfused_bytes(p));
  EXPECT_GT(prefill_workspace_bytes(p), prefill_workspace_bytes(small_params()));
}

TEST(PrefillWorkspace, EmptyBatchNeedsOnlyTheTopkWorkspace) {
  PrefillParams p = small_params();
  p.indexer.num_tokens = 0;
  p.attention.num_tokens = 0;
  TopkParams topk;
  topk.num_rows = 0;
  topk.num_keys = 1075;
  topk.logits_stride = 1076;
  topk.k = 512;
  topk.indices_stride = 512;
  EXPECT_EQ(prefill_workspace_bytes(p), align256(topk_workspace_bytes(topk)));
}

TEST(PrefillWorkspace, SaturatesInsteadOfOverflowing) {
  // The largest valid shape: T * logits_stride * 4 = (2^31 - 1) * 2^31 * 4 plus the indices exceeds 64 bits.
  // The number saturates, the Status form says why; neither wraps.
  PrefillParams p = small_params();
  p.indexer.num_tokens = std::numeric_limits<int32_t>::max();
  p.indexer.num_keys = std::numeric_limits<int32_t>::max();
  EXPECT_EQ(prefill_workspace_bytes(p), std::numeric_limits<size_t>::max());
  size_t bytes = 7;
  const Status s = prefill_workspace_bytes(p, &bytes);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.to_string();
  EXPECT_NE(s.message().find("does not fit in size_t"), std::string::npos) << s.message();
  EXPECT_EQ(bytes, 7u);
}

TEST(PrefillWorkspace, RejectsSizesValidateRejects) {
  // num_keys = INT64_MAX used to overflow (N + 3, undefined behaviour; 36864 bytes in Release).
  PrefillParams p = small_params();
  p.indexer.num_keys = std::numeric_limits<int64_t>::max();
  EXPECT_EQ(prefill_workspace_bytes(p), std::numeric_limits<size_t>::max());
  size_t bytes = 0;
  Status s = prefill_workspace_bytes(p, &bytes);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.to_string();
  EXPECT_NE(s.message().find("prefill: indexer: num_keys (9223372036854775807) must be in [0, 2147483647]"),
            std::string::npos)
      << s.message();
  EXPECT_EQ(validate(p).message(), s.message());

  p = small_params();
  p.indexer.num_tokens = -1;
  EXPECT_EQ(prefill_workspace_bytes(p), std::numeric_limits<size_t>::max());
  EXPECT_NE(prefill_workspace_bytes(p, &bytes).message().find("num_tokens (-1)"), std::string::npos);
}

TEST(PrefillWorkspace, RejectsTopkValidateRejects) {
  for (int topk : {-64, 0, 100, 4096}) {
    PrefillParams p = small_params();
    p.topk = topk;
    EXPECT_EQ(prefill_workspace_bytes(p), std::numeric_limits<size_t>::max()) << topk;
    size_t bytes = 0;
    const Status s = prefill_workspace_bytes(p, &bytes);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.to_string();
    EXPECT_NE(s.message().find("prefill: topk (" + std::to_string(topk) + ")"), std::string::npos) << s.message();
    EXPECT_EQ(validate(p).message(), s.message());
  }
  size_t bytes = 0;
  EXPECT_TRUE(prefill_workspace_bytes(small_params(), &bytes).is_ok());
  EXPECT_EQ(bytes, prefill_workspace_bytes(small_params()));
  EXPECT_EQ(prefill_workspace_bytes(small_params(), nullptr).code(), StatusCode::kInvalidArgument);
}

TEST(TopkWorkspace, RejectsShapesValidateRejects) {
  TopkParams p;
  p.num_rows = 16;
  p.num_keys = 131072;
  p.k = 2048;
  size_t bytes = 0;
  ASSERT_TRUE(topk_workspace_bytes(p, &bytes).is_ok());
  EXPECT_EQ(bytes, topk_workspace_bytes(p));
  for (int k : {-64, 0, 2049}) {
    p.k = k;
    EXPECT_EQ(topk_workspace_bytes(p), std::numeric_limits<size_t>::max()) << k;
    const Status s = topk_workspace_bytes(p, &bytes);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.to_string();
    EXPECT_NE(s.message().find("topk: k (" + std::to_string(k) + ") must be in [1, 2048]"), std::string::npos)
        << s.message();
  }
  p.k = 64;
  p.num_rows = -1;
  EXPECT_EQ(topk_workspace_bytes(p), std::numeric_limits<size_t>::max());
  p.num_rows = 4;
  p.num_keys = std::numeric_limits<int64_t>::max();
  EXPECT_EQ(topk_workspace_bytes(p), std::numeric_limits<size_t>::max());
}

TEST(Prefill, RejectsWorkspaceTooSmallWithBothSizes) {
  PrefillParams p = small_params();
  const size_t need = prefill_workspace_bytes(p);
  PrefillParams f = p;
  f.fused = true;
  const size_t fused_need = prefill_workspace_bytes(f);
  p.workspace = testing::stand_in_arena();
  p.workspace_bytes = std::min(need, fused_need) - 1;  // fits neither path
  const Status s = prefill(p);
  EXPECT_EQ(s.code(), StatusCode::kWorkspaceTooSmall) << s.to_string();
  EXPECT_NE(s.message().find(std::to_string(p.workspace_bytes)), std::string::npos) << s.message();
  EXPECT_NE(s.message().find(std::to_string(need)), std::string::npos) << s.message();
  EXPECT_NE(s.message().find(std::to_string(fused_need) + " with fused = true"), std::string::npos) << s.message();
}

// fused = false takes the unfused path (faster at every shape measured) where the workspace holds its
// logits, and the fused one where it holds only the fused path's needs.
TEST(Prefill, SelectsTheFusedPathWhereOnlyItsWorkspaceFits) {
  PrefillParams p = small_params();
  p.indexer.num_tokens = p.attention.num_tokens = 64;
  p.indexer.num_keys = p.attention.num_kv = int64_t{1} << 20;  // 256 MB of logits
  ASSERT_TRUE(validate(p).is_ok()) << validate(p).to_string();
  const size_t unfused = prefill_workspace_bytes(p);
  PrefillParams f = p;
  f.fused = true;
  const size_t fused = prefill_workspace_bytes(f);
  ASSERT_LT(fused, unfused);
  p.workspace_bytes = unfused;
  EXPECT_FALSE(detail::pipeline::runs_fused(p));
  p.workspace_bytes = fused;
  EXPECT_TRUE(detail::pipeline::runs_fused(p));
  p.workspace_bytes = fused - 1;
  EXPECT_FALSE(detail::pipeline::runs_fused(p));
  f.workspace_bytes = unfused;
  EXPECT_TRUE(detail::pipeline::runs_fused(f));  // forced
  p.workspace_bytes = fused;
  p.indexer.kernel = IndexerKernel::kKResident;  // the fused path runs the Q-resident scorer only
  EXPECT_FALSE(detail::pipeline::runs_fused(p));
}

// selection_chunk_tokens = C: the logits of C tokens at a time, and the top-k's workspace for C rows.
TEST(PrefillWorkspace, ChunkedSelectionHoldsOneChunksLogits) {
  PrefillParams p = small_params();
  p.selection_chunk_tokens = 50;
  TopkParams topk;
  topk.num_rows = 50;
  topk.num_keys = 1075;
  topk.logits_stride = 1076;
  topk.k = p.topk;
  topk.indices_stride = p.topk;
  TopkParams last = topk;  // 179 = 3 x 50 + 29
  last.num_rows = 29;
  const size_t topk_bytes = std::max(topk_workspace_bytes(topk), topk_workspace_bytes(last));
  EXPECT_EQ(prefill_workspace_bytes(p),
            align256(50 * 1076 * 4) + align256(size_t{179} * p.topk * 4) + align256(topk_bytes));
  for (int64_t whole : {179, 180, 1 << 20}) {  // a chunk of at least T tokens is the whole batch
    p.selection_chunk_tokens = whole;
    EXPECT_EQ(prefill_workspace_bytes(p), prefill_workspace_bytes(small_params())) << whole;
  }
  p.selection_chunk_tokens = -1;
  size_t bytes = 0;
  const Status s = prefill_workspace_bytes(p, &bytes);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.to_string();
  EXPECT_NE(s.message().find("selection_chunk_tokens (-1) must be >= 0"), std::string::npos) << s.message();
  EXPECT_EQ(validate(p).message(), s.message());
}

// fused = false with a workspace between the unfused path's whole need and the fused path's: the
// unfused path in the largest chunk (a multiple of kSelectionChunkStep, at least
// kMinSelectionChunkTokens) whose plan fits; an explicit chunk as asked.
TEST(Prefill, ChunksTheUnfusedSelectionToTheWorkspace) {
  PrefillParams p = small_params();
  p.indexer.num_tokens = p.attention.num_tokens = 4096;
  p.indexer.num_keys = p.attention.num_kv = 32768;
  p.topk = 2048;
  ASSERT_TRUE(validate(p).is_ok()) << validate(p).to_string();
  const auto need = [&](int64_t chunk) {
    PrefillParams c = p;
    c.selection_chunk_tokens = chunk;
    return prefill_workspace_bytes(c);
  };
  p.workspace_bytes = prefill_workspace_bytes(p);
  EXPECT_EQ(detail::pipeline::selection_chunk(p), 4096);
  p.workspace_bytes = need(1000);
  EXPECT_EQ(detail::pipeline::selection_chunk(p), 960);
  EXPECT_FALSE(detail::pipeline::runs_fused(p));
  p.workspace_bytes = need(kMinSelectionChunkTokens);
  EXPECT_EQ(detail::pipeline::selection_chunk(p), kMinSelectionChunkTokens);
  p.workspace_bytes = need(kMinSelectionChunkTokens) - 1;
  EXPECT_NE(detail::pipeline::selection_chunk(p), kMinSelectionChunkTokens);
  p.selection_chunk_tokens = 100;  // explicit: any chunk, whatever the workspace
  p.workspace_bytes = prefill_workspace_bytes(p);
  EXPECT_EQ(detail::pipeline::selection_chunk(p), 100);
  PrefillParams f = p;
  f.fused = true;
  EXPECT_TRUE(detail::pipeline::runs_fused(f));
  EXPECT_EQ(detail::pipeline::selection_chunk(f), 0);
}

TEST(Prefill, RejectsWorkspaceTooSmallNamingTheSmallestChunk) {
  PrefillParams p = small_params();
  p.indexer.num_tokens = p.attention.num_tokens = 4096;
  p.indexer.num_keys = p.attention.num_kv = 32768;
  PrefillParams c = p;
  c.selection_chunk_tokens = kMinSelectionChunkTokens;
  const size_t chunk_need = prefill_workspace_bytes(c);
  p.workspace = testing::stand_in_arena();
  p.workspace_bytes = 1024;
  const Status s = prefill(p);
  EXPECT_EQ(s.code(), StatusCode::kWorkspaceTooSmall) << s.to_string();
  EXPECT_NE(s.message().find(std::to_string(chunk_need) + " for the unfused path in chunks of " +
                             std::to_string(kMinSelectionChunkTokens) + " tokens"),
            std::string::npos)
      << s.message();
}

TEST(Prefill, RejectsMissingOrMisalignedWorkspace) {
  PrefillParams p = small_params();
  p.workspace = nullptr;
  p.workspace_bytes = prefill_workspace_bytes(p);
  Status s = prefill(p);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.to_string();
  EXPECT_NE(s.message().find("workspace"), std::string::npos) << s.message();

  p.workspace = testing::stand_in_arena() + 16;
  s = prefill(p);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.to_string();
  EXPECT_NE(s.message().find("256-byte aligned"), std::string::npos) << s.message();
}

TEST(Prefill, FusedRefusesAnotherScorer) {
  PrefillParams p = small_params();
  p.fused = true;
  p.indexer.kernel = IndexerKernel::kKResident;
  const Status s = validate(p);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.to_string();
  EXPECT_NE(s.message().find("Q-resident"), std::string::npos) << s.message();
}

TEST(Prefill, ValidatesBeforeAnythingElse) {
  PrefillParams p = small_params();
  p.topk = 100;  // not a multiple of 64
  const Status s = prefill(p);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.to_string();
  EXPECT_NE(s.message().find("topk"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace fp8dsa
