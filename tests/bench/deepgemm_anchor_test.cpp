// The DeepGEMM anchor's output as the indexer benchmark reads it (bench/deepgemm_anchor.h): its
// table's mqa_ms column and its --dump files, from text and files written here (no GPU).
#include "deepgemm_anchor.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace fp8dsa::bench {
namespace {

// Rows as the anchor prints them ("%-4d %-7d %-5d %-7d %-12lld | %-9.4f %-8.1f %-9.4f %-9.4f | ...").
const char* const kTable =
    "device: NVIDIA H200, sm_90, 132 SMs, max clock 1980 MHz, L2 60 MB, runtime 13000, driver 13000\n"
    "launch H=64 D=128: template <H=64, D=128, ...>, grid 132, block 512\n"
    "H    N       T     stride  pairs        | mqa_ms    TFLOPS   min_ms    max_ms    | clean_ms  TFLOPS   | total\n"
    "64   8192    4096  8192    25163776     | 0.4040    1020.4   0.4010    0.4100    | -         -        | -\n"
    "64   65536   4096  65536   260046848    | 4.3150    987.7    4.3000    4.4000    | -         -        | -\n"
    "32   65536   4096  65536   260046848    | 2.3170    919.8    2.3100    2.3300    | -         -        | -\n";

TEST(DeepgemmAnchor, ReadsTheDumpedCasesTime) {
  const char* out =
      "wrote /tmp/d (H=64 N=32768 T=4096)\n"
      "dump_case_time H=64 N=8192 T=4096 mqa_ms_median 0.1 min 0.09 max 0.2 TFLOPS 500\n"
      "dump_case_time H=64 N=32768 T=4096 mqa_ms_median 0.321 min 0.3 max 0.4 TFLOPS 700\n";
  double ms = 0.0;
  ASSERT_TRUE(parse_deepgemm_dump_time(out, 64, 32768, 4096, &ms));
  EXPECT_DOUBLE_EQ(ms, 0.321);
  ASSERT_TRUE(parse_deepgemm_dump_time(out, 64, 8192, 4096, &ms));
  EXPECT_DOUBLE_EQ(ms, 0.1);
  EXPECT_FALSE(parse_deepgemm_dump_time(out, 32, 32768, 4096, &ms));
  EXPECT_FALSE(parse_deepgemm_dump_time(out, 64, 3276, 4096, &ms));  // N=32768 is not N=3276
  EXPECT_FALSE(parse_deepgemm_dump_time("dump_case_time H=64 N=8192 T=4096 mqa_ms_median nan\n", 64, 8192, 4096, &ms));
  EXPECT_FALSE(parse_deepgemm_dump_time("", 64, 8192, 4096, &ms));
}

TEST(DeepgemmAnchor, ReadsTheCasesMqaMs) {
  double ms = 0.0;
  ASSERT_TRUE(parse_deepgemm_mqa_ms(kTable, 64, 65536, 4096, &ms));
  EXPECT_DOUBLE_EQ(ms, 4.315);
  ASSERT_TRUE(parse_deepgemm_mqa_ms(kTable, 32, 65536, 4096, &ms));
  EXPECT_DOUBLE_EQ(ms, 2.317);
  ASSERT_TRUE(parse_deepgemm_mqa_ms(kTable, 64, 8192, 4096, &ms));
  EXPECT_DOUBLE_EQ(ms, 0.404);
  // A case the table does not hold, and the header / launch lines, match nothing.
  EXPECT_FALSE(parse_deepgemm_mqa_ms(kTable, 64, 131072, 4096, &ms));
  EXPECT_FALSE(parse_deepgemm_mqa_ms(kTable, 32, 8192, 4096, &ms));
  EXPECT_FALSE(parse_deepgemm_mqa_ms("", 64, 8192, 4096, &ms));
  // The columns before the bar may come in another order.
  EXPECT_TRUE(parse_deepgemm_mqa_ms("4096 8192 64 | 0.5 1.0\n", 64, 8192, 4096, &ms));
  EXPECT_DOUBLE_EQ(ms, 0.5);
  // A row without a time ("-") is no match.
  EXPECT_FALSE(parse_deepgemm_mqa_ms("64 8192 4096 | - -\n", 64, 8192, 4096, &ms));
}

class DeepgemmDumpFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/fp8dsa_deepgemm_dump_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::system(("rm -rf '" + dir_ + "'").c_str()); }

  template <typename T>
  void write(const char* name, const std::vector<T>& v) {
    std::ofstream f(dir_ + "/" + name, std::ios::binary);
    f.write(reinterpret_cast<const char*>(v.data()), static_cast<std::streamsize>(v.size() * sizeof(T)));
  }
  void write_text(const char* name, const std::string& text) { std::ofstream(dir_ + "/" + name) << text; }

  // T = 2 tokens, N = 8 keys, H = 1, stride 12; k_scale padded to 16 values.
  void write_case(size_t logits_count = 2 * 12) {
    std::vector<uint8_t> q(2 * 1 * 128), k(8 * 128);
    for (size_t i = 0; i < q.size(); ++i) q[i] = static_cast<uint8_t>(i);
    for (size_t i = 0; i < k.size(); ++i) k[i] = static_cast<uint8_t>(3 * i);
    std::vector<float> k_scale(16, 0.0f), w = {0.5f, -0.25f}, logits(logits_count, -INFINITY);
    for (int i = 0; i < 8; ++i) k_scale[static_cast<size_t>(i)] = 1.0f + static_cast<float>(i);
    logits[0] = 7.0f;
    logits[12 + 5] = -3.0f;
    write("q.e4m3", q);
    write("k.e4m3", k);
    write("k_scale.f32", k_scale);
    write("w.f32", w);
    write("ks.i32", std::vector<int32_t>{0, 2});
    write("ke.i32", std::vector<int32_t>{7, 8});
    write("logits.f32", logits);
    write_text("stride.txt", "# logits.f32 is float32 [T, stride] row-major\nstride 12\nkernel_stride 256\n");
  }

  std::string dir_;
};

TEST_F(DeepgemmDumpFiles, ReadsEveryTensorOfTheCase) {
  write_case();
  DeepgemmCase c;
  ASSERT_TRUE(read_deepgemm_case(dir_, 2, 8, 1, &c).is_ok());
  EXPECT_EQ(c.stride, 12);
  ASSERT_EQ(c.q.size(), 256u);
  EXPECT_EQ(c.q[255], 255);
  ASSERT_EQ(c.k.size(), 1024u);
  EXPECT_EQ(c.k[5], 15);
  ASSERT_EQ(c.k_scale.size(), 8u);  // the padding is not taken
  EXPECT_FLOAT_EQ(c.k_scale[7], 8.0f);
  EXPECT_EQ(c.w, (std::vector<float>{0.5f, -0.25f}));
  EXPECT_EQ(c.ks, (std::vector<int32_t>{0, 2}));
  EXPECT_EQ(c.ke, (std::vector<int32_t>{7, 8}));
  ASSERT_EQ(c.logits.size(), 24u);
  EXPECT_FLOAT_EQ(c.logits[0], 7.0f);
  EXPECT_FLOAT_EQ(c.logits[17], -3.0f);
}

TEST_F(DeepgemmDumpFiles, ReadsTheStrideAloneOrFromMeta) {
  write_case();
  DeepgemmCase c;
  write_text("stride.txt", "12\n");  // the number alone
  ASSERT_TRUE(read_deepgemm_case(dir_, 2, 8, 1, &c).is_ok());
  EXPECT_EQ(c.stride, 12);
  std::remove((dir_ + "/stride.txt").c_str());  // only meta.txt's line
  write_text("meta.txt", "T 2\nN 8\nkernel_stride 256\nstride 12\n");
  ASSERT_TRUE(read_deepgemm_case(dir_, 2, 8, 1, &c).is_ok());
  EXPECT_EQ(c.stride, 12);
}

TEST_F(DeepgemmDumpFiles, RefusesWhatDoesNotFitTheCase) {
  write_case();
  DeepgemmCase c;
  // More heads than q holds.
  Status s = read_deepgemm_case(dir_, 2, 8, 2, &c);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("q.e4m3 holds 256 bytes, the case needs 512"), std::string::npos) << s.message();
  // A row stride below N.
  s = read_deepgemm_case(dir_, 2, 16, 1, &c);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("no row stride >= N = 16"), std::string::npos) << s.message();
  // logits.f32 not exactly T x stride.
  write_case(2 * 12 + 1);
  s = read_deepgemm_case(dir_, 2, 8, 1, &c);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("logits.f32 holds 100 bytes, the case needs 96"), std::string::npos) << s.message();
  // A missing file.
  std::remove((dir_ + "/ke.i32").c_str());
  s = read_deepgemm_case(dir_, 2, 8, 1, &c);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("has no " + dir_ + "/ke.i32"), std::string::npos) << s.message();
  // An anchor that is not there.
  s = dump_deepgemm_case(dir_ + "/no_such_anchor", dir_ + "/out", 2, 8, 1, &c);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("the DeepGEMM anchor failed"), std::string::npos) << s.message();
  double ms = 0.0;
  s = time_deepgemm_case(dir_ + "/no_such_anchor", 4096, 8192, 64, 10, &ms);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("the DeepGEMM anchor failed"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace fp8dsa::bench
