// lse_merge on the GPU against its CPU reference (random parts, parts with no valid key, sinks,
// padded strides), on poisoned outputs with every element written and bitwise reruns.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "common/gpu_test.h"
#include "common/poison.h"
#include "common/rerun.h"
#include "fp8dsa/fp8.h"
#include "fp8dsa/lse_merge.h"
#include "tools/device_buffer.h"
#include "tools/random_inputs.h"

namespace fp8dsa {
namespace {

using tools::DeviceBuffer;

void run_case(int64_t tokens, int heads, int parts, bool padded, bool sink, uint64_t seed) {
  SCOPED_TRACE(::testing::Message() << "T=" << tokens << " h=" << heads << " R=" << parts << " padded=" << padded);
  const int64_t head_stride = padded ? 520 : 512;
  const int64_t token_stride = heads * head_stride + (padded ? 8 : 0);
  const int64_t part_stride = tokens * token_stride + (padded ? 16 : 0);
  const int64_t rows = tokens * heads;
  std::vector<uint16_t> host_parts = tools::random_bf16(static_cast<size_t>(parts * part_stride), seed, -2.0f, 2.0f);
  std::vector<float> lse = tools::random_f32(static_cast<size_t>(parts * rows), seed + 1, -5.0f, 12.0f);
  std::vector<float> maxes = tools::random_f32(lse.size(), seed + 2, -5.0f, 12.0f);
  for (size_t i = 0; i < lse.size(); i += 7) {
    lse[i] = INFINITY;  // that part has no valid key for that row
    maxes[i] = -INFINITY;
  }
  for (int r = 0; r < parts; ++r) {
    lse[r * rows + 3] = INFINITY;  // row 3: no valid key anywhere
    maxes[r * rows + 3] = -INFINITY;
  }
  std::vector<float> sinks = tools::random_f32(static_cast<size_t>(heads), seed + 3, -3.0f, 3.0f);
  sinks[0] = INFINITY;

  LseMergeParams host;
  host.num_tokens = tokens;
  host.num_heads = heads;
  host.num_parts = parts;
  host.head_stride = head_stride;
  host.token_stride = token_stride;
  host.part_stride = part_stride;
  host.out_parts = host_parts.data();
  host.lse_parts = lse.data();
  host.max_logits_parts = maxes.data();
  host.attn_sink = sink ? sinks.data() : nullptr;
  std::vector<uint16_t> ref_out(static_cast<size_t>(rows) * 512);
  std::vector<float> ref_lse(rows), ref_max(rows);
  host.out = ref_out.data();
  host.lse = ref_lse.data();
  host.max_logits = ref_max.data();
  FP8DSA_ASSERT_STATUS_OK(reference::lse_merge_cpu(host));

  DeviceBuffer<uint16_t> d_parts(host_parts), d_out(ref_out.size());
  DeviceBuffer<float> d_lse_parts(lse), d_max_parts(maxes), d_sink(sinks), d_lse(rows), d_max(rows);
  LseMergeParams device = host;
  device.out_parts = d_parts.get();
  device.lse_parts = d_lse_parts.get();
  device.max_logits_parts = d_max_parts.get();
  device.attn_sink = sink ? d_sink.get() : nullptr;
  device.out = d_out.get();
  device.lse = d_lse.get();
  device.max_logits = d_max.get();
  ASSERT_TRUE(testing::reruns_bitwise_equal([&] { return lse_merge(device); },
                                            {testing::rerun_output(d_out, "out"), testing::rerun_output(d_lse, "lse"),
                                             testing::rerun_output(d_max, "max_logits")}));
  const std::vector<uint16_t> out = d_out.download();
  const std::vector<float> got_lse = d_lse.download(), got_max = d_max.download();
  for (int64_t row = 0; row < rows; ++row) {
    if (std::isinf(ref_lse[row])) {
      ASSERT_EQ(got_lse[row], ref_lse[row]) << row;
    } else {
      ASSERT_NEAR(got_lse[row], ref_lse[row], 2e-6 * (1.0 + std::abs(ref_lse[row]))) << row;
    }
    ASSERT_EQ(got_max[row], ref_max[row]) << row;
    for (int c = 0; c < 512; ++c) {
      const float a = bf16_to_float(out[row * 512 + c]), b = bf16_to_float(ref_out[row * 512 + c]);
      ASSERT_NEAR(a, b, 1e-2f * std::abs(b) + 1e-6f) << row << " " << c;  // f32 against f64, one bf16 step
    }
  }
}

TEST(LseMergeGpu, MatchesTheReference) {
  FP8DSA_SKIP_WITHOUT_GPU();
  run_case(5, 16, 2, false, true, 600);
  run_case(33, 128, 4, true, true, 610);
  run_case(7, 8, 1, false, false, 620);
  run_case(1, 64, 9, true, false, 630);
}

TEST(LseMergeGpu, ZeroTokensAndBadArguments) {
  FP8DSA_SKIP_WITHOUT_GPU();
  LseMergeParams p;
  p.num_heads = 16;
  p.num_parts = 2;
  FP8DSA_ASSERT_STATUS_OK(lse_merge(p));  // no rows: nothing to do
  p.num_tokens = 1;
  EXPECT_EQ(lse_merge(p).code(), StatusCode::kInvalidArgument);  // null tensors
}

}  // namespace
}  // namespace fp8dsa
