// validate(IndexerParams): every rule accepts the good case and rejects each bad variant with the
// right code and a message naming the argument. validate() never dereferences, so the pointers
// are aligned addresses into a small static arena.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>

#include "common/valid_params.h"
#include "common/validation.h"
#include "fp8dsa/indexer.h"
#include "indexer/scorers.h"

namespace fp8dsa {
namespace {

const unsigned char* at(int offset) { return testing::stand_in_arena() + offset; }

void expect_rejected(const IndexerParams& p, StatusCode code, const std::string& needle) {
  testing::expect_rejected(p, code, needle, "indexer: ");
}

IndexerParams good_params() {
  return testing::valid_indexer_params();
}

TEST(IndexerValidate, AcceptsGoodParams) {
  EXPECT_TRUE(validate(good_params()).is_ok());
  for (int h : {4, 8, 16, 32, 64}) {
    for (int d : {64, 128}) {
      IndexerParams p = good_params();
      p.num_heads = h;
      p.head_dim = d;
      EXPECT_TRUE(validate(p).is_ok()) << validate(p).to_string();
    }
  }
  IndexerParams p = good_params();  // explicit, padded strides
  p.q_token_stride = 64 * 128 + 16;
  p.w_token_stride = 65;
  p.k_row_stride = 144;
  p.logits_stride = 304;
  EXPECT_TRUE(validate(p).is_ok()) << validate(p).to_string();
}

TEST(IndexerValidate, ResolvedFillsPackedStrides) {
  IndexerParams p = good_params();
  p.num_heads = 16;
  p.head_dim = 64;
  const IndexerParams r = p.resolved();
  EXPECT_EQ(r.q_token_stride, 16 * 64);
  EXPECT_EQ(r.w_token_stride, 16);
  EXPECT_EQ(r.k_row_stride, 64);
  EXPECT_EQ(r.logits_stride, 300);
  p.logits_stride = 512;
  p.k_row_stride = 80;
  EXPECT_EQ(p.resolved().logits_stride, 512);  // non-zero strides are kept
  EXPECT_EQ(p.resolved().k_row_stride, 80);
}

TEST(IndexerValidate, EmptyBatchNeedsNoPointers) {
  IndexerParams p;
  p.num_tokens = 0;
  p.num_keys = 0;
  EXPECT_TRUE(validate(p).is_ok()) << validate(p).to_string();
  p.num_keys = 1000;  // keys but no tokens: k and k_scale still describe a non-empty tensor
  expect_rejected(p, StatusCode::kInvalidArgument, "k must not be null");
  // Tokens but no keys: every range is empty; q, w, ks, ke are still required, logits is not.
  IndexerParams q = good_params();
  q.num_keys = 0;
  q.k = nullptr;
  q.k_scale = nullptr;
  q.logits = nullptr;
  EXPECT_TRUE(validate(q).is_ok()) << validate(q).to_string();
}

TEST(IndexerValidate, RejectsBadSizes) {
  IndexerParams p = good_params();
  p.num_tokens = -1;
  expect_rejected(p, StatusCode::kInvalidArgument, "num_tokens (-1)");
  p = good_params();
  p.num_tokens = int64_t{std::numeric_limits<int32_t>::max()} + 1;
  expect_rejected(p, StatusCode::kInvalidArgument, "num_tokens (2147483648)");
  p = good_params();
  p.num_keys = -5;
  expect_rejected(p, StatusCode::kInvalidArgument, "num_keys (-5)");
  p = good_params();
  p.num_keys = int64_t{1} << 40;
  p.logits_stride = 0;
  expect_rejected(p, StatusCode::kInvalidArgument, "num_keys");
}

TEST(IndexerValidate, RejectsBadHeadsAndDim) {
  for (int h : {0, 1, 2, 12, 128, -8}) {
    IndexerParams p = good_params();
    p.num_heads = h;
    expect_rejected(p, StatusCode::kInvalidArgument, "num_heads (" + std::to_string(h) + ")");
  }
  for (int d : {0, 32, 96, 256}) {
    IndexerParams p = good_params();
    p.head_dim = d;
    expect_rejected(p, StatusCode::kInvalidArgument, "head_dim (" + std::to_string(d) + ")");
  }
}

TEST(IndexerValidate, RejectsWrongDtypes) {
  IndexerParams p = good_params();
  p.q_dtype = DType::kBF16;
  expect_rejected(p, StatusCode::kInvalidArgument, "q dtype must be e4m3 (given bf16)");
  p = good_params();
  p.k_dtype = DType::kF32;
  expect_rejected(p, StatusCode::kInvalidArgument, "k dtype must be e4m3 (given f32)");
}

TEST(IndexerValidate, RejectsBadQStride) {
  IndexerParams p = good_params();
  p.q_token_stride = 64 * 128 - 16;  // heads would overlap
  expect_rejected(p, StatusCode::kInvalidArgument, "q_token_stride (8176)");
  p.q_token_stride = 64 * 128 + 8;  // not 16-byte aligned rows
  expect_rejected(p, StatusCode::kInvalidArgument, "q_token_stride (8200) must be a multiple of 16");
  p.q_token_stride = -16;
  expect_rejected(p, StatusCode::kInvalidArgument, "q_token_stride (-16)");
}

TEST(IndexerValidate, RejectsBadWStride) {
  IndexerParams p = good_params();
  p.w_token_stride = 63;
  expect_rejected(p, StatusCode::kInvalidArgument, "w_token_stride (63) must be >= num_heads (64)");
}

TEST(IndexerValidate, RejectsBadKStride) {
  IndexerParams p = good_params();
  p.k_row_stride = 112;
  expect_rejected(p, StatusCode::kInvalidArgument, "k_row_stride (112) must be >= head_dim (128)");
  p.k_row_stride = 132;
  expect_rejected(p, StatusCode::kInvalidArgument, "k_row_stride (132) must be a multiple of 16");
}

TEST(IndexerValidate, RejectsBadLdl) {
  IndexerParams p = good_params();
  p.logits_stride = 299;
  expect_rejected(p, StatusCode::kInvalidArgument, "logits_stride (299) must be >= num_keys (300)");
  p.logits_stride = 302;
  expect_rejected(p, StatusCode::kInvalidArgument, "logits_stride (302) must be a multiple of 4");
  expect_rejected(p, StatusCode::kInvalidArgument, "pass logits_stride = 304");
}

TEST(IndexerValidate, PackedLdlMessageSaysWhatWasPassedAndWhatToPass) {
  // logits_stride = 0 means packed; with N % 4 != 0 a packed row is not 16-byte aligned. The message names
  // the 0 the caller passed, not the resolved N.
  IndexerParams p = good_params();
  p.num_keys = 301;
  p.logits_stride = 0;
  expect_rejected(p, StatusCode::kInvalidArgument, "logits_stride (0, i.e. packed = num_keys = 301) must be a multiple of 4");
  expect_rejected(p, StatusCode::kInvalidArgument, "pass logits_stride = 304 (num_keys rounded up to a multiple of 4)");
  p.logits_stride = 304;
  EXPECT_TRUE(validate(p).is_ok()) << validate(p).to_string();
}

TEST(IndexerValidate, HugeLdlIsRejectedWithoutOverflow) {
  IndexerParams p = good_params();
  p.logits_stride = std::numeric_limits<int64_t>::max();
  expect_rejected(p, StatusCode::kInvalidArgument, "must be a multiple of 4");
}

TEST(IndexerValidate, RejectsMisalignedPointers) {
  IndexerParams p = good_params();
  p.q = at(8);
  expect_rejected(p, StatusCode::kInvalidArgument, "q (0x");
  p = good_params();
  p.k = at(513);
  expect_rejected(p, StatusCode::kInvalidArgument, "k (0x");
  p = good_params();
  p.logits = reinterpret_cast<float*>(const_cast<unsigned char*>(at(1540)));
  expect_rejected(p, StatusCode::kInvalidArgument, "logits (0x");
  p = good_params();
  p.w = reinterpret_cast<const float*>(at(258));
  expect_rejected(p, StatusCode::kInvalidArgument, "w (0x");
  p = good_params();
  p.w = reinterpret_cast<const float*>(at(260));  // 4-byte alignment is enough for w
  EXPECT_TRUE(validate(p).is_ok()) << validate(p).to_string();
}

TEST(IndexerValidate, RejectsNullPointers) {
  struct Case {
    const char* name;
    void (*clear)(IndexerParams&);
  };
  const Case cases[] = {
      {"q must not be null", [](IndexerParams& p) { p.q = nullptr; }},
      {"w must not be null", [](IndexerParams& p) { p.w = nullptr; }},
      {"k must not be null", [](IndexerParams& p) { p.k = nullptr; }},
      {"k_scale must not be null", [](IndexerParams& p) { p.k_scale = nullptr; }},
      {"ks must not be null", [](IndexerParams& p) { p.ks = nullptr; }},
      {"ke must not be null", [](IndexerParams& p) { p.ke = nullptr; }},
      {"logits must not be null", [](IndexerParams& p) { p.logits = nullptr; }},
  };
  for (const Case& c : cases) {
    IndexerParams p = good_params();
    c.clear(p);
    expect_rejected(p, StatusCode::kInvalidArgument, c.name);
  }
}

TEST(IndexerValidate, RejectsExtentOverflow) {
  IndexerParams p = good_params();
  p.num_tokens = 1'000'000;
  p.q_token_stride = int64_t{1} << 50;  // 2^50 * 10^6 overflows int64
  expect_rejected(p, StatusCode::kInvalidArgument, "q extent");
  p = good_params();
  p.num_tokens = 1'000'000;
  p.logits_stride = int64_t{1} << 42;  // 10^6 * 2^42 * 4 bytes overflows int64
  expect_rejected(p, StatusCode::kInvalidArgument, "logits extent");
}

TEST(IndexerValidate, RejectsUnknownKernel) {
  IndexerParams p = good_params();
  p.kernel = static_cast<IndexerKernel>(17);
  expect_rejected(p, StatusCode::kInvalidArgument, "kernel (17)");
  for (IndexerKernel k : {IndexerKernel::kAuto, IndexerKernel::kQResident,
                          IndexerKernel::kKResident, IndexerKernel::kReference}) {
    p.kernel = k;
    EXPECT_TRUE(validate(p).is_ok());
  }
}

TEST(IndexerValidate, KernelNames) {
  EXPECT_STREQ(indexer_kernel_name(IndexerKernel::kAuto), "auto");
  EXPECT_STREQ(indexer_kernel_name(IndexerKernel::kQResident), "q_resident");
  EXPECT_STREQ(indexer_kernel_name(IndexerKernel::kKResident), "k_resident");
  EXPECT_STREQ(indexer_kernel_name(IndexerKernel::kReference), "reference");
  EXPECT_STREQ(indexer_kernel_name(static_cast<IndexerKernel>(99)), "unknown");
}

// The scorer's timing-only variant (no epilogue) is a tuning variant: a default build refuses it
// before any CUDA call.
TEST(IndexerTuning, MmaOnlyIsATuningVariant) {
#if defined(FP8DSA_TUNING)
  GTEST_SKIP() << "an FP8DSA_TUNING build has it";
#else
  detail::indexer::QResidentTuning tuning;
  tuning.mma_only = true;
  const Status s = detail::indexer::run_q_resident(testing::valid_indexer_params(), tuning);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.to_string();
  EXPECT_NE(s.message().find("built only with FP8DSA_TUNING"), std::string::npos) << s.message();
#endif
}

}  // namespace
}  // namespace fp8dsa
