// The launch-path choice (topk.cu) and the register kernel's own row-length check, on the host:
// choose_launch reads the device only past the register kernel's rows (the SM count: 0 without a
// GPU), and a register launch refuses a row longer than it holds before any CUDA call.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "common/valid_params.h"
#include "fp8dsa/topk.h"
#include "topk/config.h"
#include "topk/launch.h"

namespace fp8dsa {
namespace {

using namespace detail::topk;

TopkParams shape(int64_t rows, int64_t keys) {
  TopkParams p = testing::valid_topk_params();
  p.num_rows = rows;
  p.num_keys = keys;
  return p.resolved();
}

TEST(TopkLaunchChoice, RegisterKernelWithTheFewestThreadsThatHoldTheRow) {
  for (int64_t rows : {int64_t{1}, int64_t{4096}}) {
    for (int64_t n : {1, 5001, 8191, 8192, 8193, 16384, 16385, 32767, 32768}) {
      const LaunchConfig c = choose_launch(shape(rows, n));
      ASSERT_TRUE(c.registers) << "T " << rows << ", N " << n;
      EXPECT_FALSE(c.split || c.filter);
      EXPECT_GE(register_cap_keys(c.threads), n);
      if (c.threads > 256) EXPECT_LT(register_cap_keys(c.threads / 2), n) << "N " << n << ", " << c.threads << " threads";
    }
  }
  EXPECT_EQ(kRegisterMaxKeys, 32768);
}

TEST(TopkLaunchChoice, LongerRowsTakeTheOtherPaths) {
  for (int64_t n : {kRegisterMaxKeys + 1, int64_t{131072}, int64_t{1} << 20}) {
    EXPECT_FALSE(choose_launch(shape(4096, n)).registers) << "N " << n;
  }
  EXPECT_TRUE(choose_launch(shape(4096, kRegisterMaxKeys + 1)).filter);
}

TEST(TopkLaunchChoice, RegisterKernelRefusesLongerRows) {
  LaunchConfig c;
  c.registers = true;
  for (int threads : {256, 512, 1024}) {
    c.threads = threads;
    const Status st = launch(shape(8, register_cap_keys(threads) + 1), c);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.to_string();
    EXPECT_NE(st.message().find("num_keys is " + std::to_string(register_cap_keys(threads) + 1)), std::string::npos)
        << st.message();
  }
  c.threads = 128;
  EXPECT_EQ(launch(shape(8, 100), c).code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace fp8dsa
