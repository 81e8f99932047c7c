// tools::MlaDeviceOutputs: the buffers it attaches to a SparseMlaParams, its whole and per-token
// downloads, and its refusals.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include <cuda_runtime_api.h>

#include "common/gpu_test.h"
#include "tools/mla_device_outputs.h"

namespace fp8dsa {
namespace {

TEST(MlaDeviceOutputs, AttachesAndDownloadsRowsOfTokens) {
  FP8DSA_SKIP_WITHOUT_GPU();
  constexpr int64_t kTokens = 5;
  constexpr int kHeads = 3;
  constexpr int kDv = tools::MlaDeviceOutputs::kDv;
  tools::MlaDeviceOutputs o;
  FP8DSA_ASSERT_STATUS_OK(o.allocate(kTokens, kHeads));
  SparseMlaParams p;
  o.attach(&p);
  EXPECT_EQ(p.out, o.out.get());
  EXPECT_EQ(p.lse, o.lse.get());
  EXPECT_EQ(p.max_logits, o.max_logits.get());

  // Row t of every output holds t (out's bf16 bits, lse), -t (max_logits).
  std::vector<uint16_t> out(static_cast<size_t>(kTokens) * kHeads * kDv);
  std::vector<float> lse(static_cast<size_t>(kTokens) * kHeads), max_logits(lse.size());
  for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<uint16_t>(i / (kHeads * kDv));
  for (size_t i = 0; i < lse.size(); ++i) {
    lse[i] = static_cast<float>(i / kHeads);
    max_logits[i] = -lse[i];
  }
  FP8DSA_ASSERT_STATUS_OK(o.out.upload(out));
  FP8DSA_ASSERT_STATUS_OK(o.lse.upload(lse));
  FP8DSA_ASSERT_STATUS_OK(o.max_logits.upload(max_logits));

  std::vector<uint16_t> got_out;
  std::vector<float> got_lse, got_max;
  FP8DSA_ASSERT_STATUS_OK(o.download(&got_out, &got_lse, &got_max));
  EXPECT_EQ(got_out, out);
  EXPECT_EQ(got_lse, lse);
  EXPECT_EQ(got_max, max_logits);

  FP8DSA_ASSERT_STATUS_OK(o.download_tokens({4, 0, 2}, &got_out, &got_lse, &got_max));
  ASSERT_EQ(got_out.size(), 3u * kHeads * kDv);
  ASSERT_EQ(got_lse.size(), 3u * kHeads);
  const int64_t order[3] = {4, 0, 2};
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(got_out[static_cast<size_t>(i) * kHeads * kDv + 7], order[i]);
    EXPECT_EQ(got_lse[static_cast<size_t>(i) * kHeads + 1], static_cast<float>(order[i]));
    EXPECT_EQ(got_max[static_cast<size_t>(i) * kHeads + 2], -static_cast<float>(order[i]));
  }

  for (int64_t bad : {int64_t{-1}, kTokens}) {
    const Status s = o.download_tokens({0, bad}, &got_out, &got_lse, &got_max);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.to_string();
  }
  EXPECT_EQ(o.allocate(4, 0).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(o.allocate(-1, 8).code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace fp8dsa
