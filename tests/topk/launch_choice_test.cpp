// The launch-path choice (topk.cu) and the register kernel's own row-length check, on the host:
// choose_launch reads the SM count (0 without a GPU, taken as 1) for rows past 16K keys and past the
// register kernel's rows, and a register launch refuses a row longer than it holds before any CUDA
// call.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <iterator>
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

TEST(TopkLaunchChoice, RegisterKernelOfTheSmallestShapeThatHoldsTheRow) {
  struct Want {
    int64_t max_keys;
    int threads, vecs, smem_vecs;
  };
  const Want shapes[] = {{8192, 256, kRegisterVecsPerThread, 0},
                         {16384, 512, kRegisterVecsPerThread, 0},
                         {32768, kRegisterLongThreads, kRegisterLongVecs, kRegisterLongSmemVecs}};
  for (int64_t rows : {int64_t{1}, int64_t{4096}}) {
    for (int64_t n : {1, 5001, 8191, 8192, 8193, 16384, 16385, 32767, 32768}) {
      const LaunchConfig c = choose_launch(shape(rows, n));
      ASSERT_TRUE(c.registers) << "T " << rows << ", N " << n;
      EXPECT_FALSE(c.split || c.filter);
      // One row has an SM to itself with or without a GPU: past 16K keys it takes 1024 threads.
      const Want few_rows{32768, 1024, kRegisterVecsPerThread, 0};
      const Want& want =
          rows == 1 && n > 16384
              ? few_rows
              : *std::find_if(std::begin(shapes), std::end(shapes), [&](const Want& w) { return n <= w.max_keys; });
      EXPECT_EQ(c.threads, want.threads) << "N " << n;
      EXPECT_EQ(c.register_vecs, want.vecs) << "N " << n;
      EXPECT_EQ(c.register_smem_vecs, want.smem_vecs) << "N " << n;
      EXPECT_EQ(register_cap_keys(c.threads, c.register_vecs, c.register_smem_vecs), want.max_keys);
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
  struct Shape {
    int threads, vecs, smem_vecs;
  };
  for (const Shape& sh : {Shape{256, kRegisterVecsPerThread, 0}, Shape{512, kRegisterVecsPerThread, 0},
                          Shape{1024, kRegisterVecsPerThread, 0},
                          Shape{kRegisterLongThreads, kRegisterLongVecs, kRegisterLongSmemVecs}}) {
    LaunchConfig c;
    c.registers = true;
    c.threads = sh.threads;
    c.register_vecs = sh.vecs;
    c.register_smem_vecs = sh.smem_vecs;
    const int64_t cap = register_cap_keys(sh.threads, sh.vecs, sh.smem_vecs);
    const Status st = launch(shape(8, cap + 1), c);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.to_string();
    EXPECT_NE(st.message().find("num_keys is " + std::to_string(cap + 1)), std::string::npos) << st.message();
  }
  LaunchConfig c;
  c.registers = true;
  c.threads = 128;  // no such instance
  EXPECT_EQ(launch(shape(8, 100), c).code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace fp8dsa
