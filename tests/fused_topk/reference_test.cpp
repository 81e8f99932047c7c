// reference::fused_topk_cpu against the two stage references run on the whole batch: the same
// indices bit for bit, across its 64-row blocks, sorted and not, with a page table (each row its
// own sequence, or row_seq / row_pos_base given) and indices_stride > k.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "tools/random_inputs.h"
#include "fp8dsa/fused_topk.h"

namespace fp8dsa {
namespace {

struct Batch {
  int64_t T = 150, N = 701;
  int H = 8, D = 64;
  std::vector<uint8_t> q, k;
  std::vector<float> w, k_scale;
  tools::KeyRanges ranges;
  std::vector<int32_t> table, row_seq, row_pos_base;
  int page = 16, pages = 0;

  Batch() {
    q = tools::random_e4m3(static_cast<size_t>(T * H * D), 1, -3.0f, 3.0f);
    k = tools::random_e4m3(static_cast<size_t>(N * D), 2, -3.0f, 3.0f);
    w = tools::random_f32(static_cast<size_t>(T * H), 3);
    k_scale = tools::random_f32(static_cast<size_t>(N), 4, 0.05f, 2.0f);
    ranges = tools::random_key_ranges(T, N, 5, 0.1, 0.1);
    pages = static_cast<int>((N + page - 1) / page);
    tools::Random rng(6);
    table.resize(static_cast<size_t>(T * pages));
    for (auto& e : table) e = rng.bernoulli(0.1) ? -1 : static_cast<int32_t>(rng.uniform_int(0, 5000));
    for (int64_t t = 0; t < T; ++t) {
      row_seq.push_back(static_cast<int32_t>((t * 7) % T));
      row_pos_base.push_back(static_cast<int32_t>(t % 3));
    }
  }

  IndexerParams scores() const {
    IndexerParams p;
    p.num_tokens = T;
    p.num_keys = N;
    p.num_heads = H;
    p.head_dim = D;
    p.q = q.data();
    p.w = w.data();
    p.k = k.data();
    p.k_scale = k_scale.data();
    p.ks = ranges.ks.data();
    p.ke = ranges.ke.data();
    return p;
  }
};

enum class Paging { kNone, kRowIsSequence, kRowSeqAndBase };

void set_paging(const Batch& b, Paging paging, TopkParams* t) {
  if (paging == Paging::kNone) return;
  t->page_table = b.table.data();
  t->pages_per_seq = b.pages;
  t->page_size = b.page;
  if (paging == Paging::kRowSeqAndBase) {
    t->row_seq = b.row_seq.data();
    t->row_pos_base = b.row_pos_base.data();
  }
}

TEST(FusedTopkReference, EqualsTheTwoStageReferences) {
  const Batch b;
  for (Paging paging : {Paging::kNone, Paging::kRowIsSequence, Paging::kRowSeqAndBase}) {
    for (bool sorted : {false, true}) {
      for (int k : {1, 100, 2048}) {
        SCOPED_TRACE("paging " + std::to_string(static_cast<int>(paging)) + " sorted " + std::to_string(sorted) +
                     " k " + std::to_string(k));
        const int64_t ld = k + 3;
        // The unfused references on the whole batch.
        const int64_t logits_stride = min_logits_stride(b.N);
        std::vector<float> logits(static_cast<size_t>(b.T * logits_stride));
        IndexerParams s = b.scores();
        s.logits = logits.data();
        s.logits_stride = logits_stride;
        ASSERT_TRUE(reference::indexer_logits_cpu(s).is_ok());
        std::vector<int32_t> want(static_cast<size_t>(b.T * ld), -777);
        TopkParams t;
        t.num_rows = b.T;
        t.num_keys = b.N;
        t.logits = logits.data();
        t.logits_stride = logits_stride;
        t.ks = s.ks;
        t.ke = s.ke;
        t.k = k;
        t.indices = want.data();
        t.indices_stride = ld;
        t.sorted = sorted;
        set_paging(b, paging, &t);
        ASSERT_TRUE(reference::topk_cpu(t).is_ok());

        std::vector<int32_t> got(static_cast<size_t>(b.T * ld), -777);
        FusedTopkParams f;
        f.scores = b.scores();
        f.select.k = k;
        f.select.indices = got.data();
        f.select.indices_stride = ld;
        f.select.sorted = sorted;
        set_paging(b, paging, &f.select);
        const Status st = reference::fused_topk_cpu(f);
        ASSERT_TRUE(st.is_ok()) << st.to_string();
        EXPECT_EQ(got, want);
      }
    }
  }
}

TEST(FusedTopkReference, RejectsInvalidParams) {
  FusedTopkParams f;
  f.scores.num_tokens = 4;
  f.scores.num_keys = 8;
  const Status s = reference::fused_topk_cpu(f);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message().rfind("fused_topk: ", 0), 0u) << s.message();
}

}  // namespace
}  // namespace fp8dsa
