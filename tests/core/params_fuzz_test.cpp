// Every public parameter struct's size, stride and count fields set to extreme values (0, -1, the
// int32 and int64 limits, 2^31, 2^61, odd and misaligned values), one field at a time and in pairs,
// starting from a valid problem; and every pointer moved off its alignment. validate() must either
// refuse (InvalidArgument or NotImplemented, never a crash, a throw or, under FP8DSA_SANITIZE,
// undefined behaviour) or accept a problem every tensor of which, as the resolved params describe it,
// ends inside int64 bytes: the extents the kernels and references compute in int64 are exact.
#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "common/valid_params.h"
#include "common/validation.h"
#include "fp8dsa/indexer.h"
#include "fp8dsa/lse_merge.h"
#include "fp8dsa/sparse_mla.h"
#include "fp8dsa/topk.h"

namespace fp8dsa {
namespace {

using testing::at;
using i128 = __int128;

constexpr int64_t kI64Max = std::numeric_limits<int64_t>::max();
constexpr int64_t kI64Min = std::numeric_limits<int64_t>::min();
constexpr int64_t kI32Max = std::numeric_limits<int32_t>::max();
constexpr int64_t kI32Min = std::numeric_limits<int32_t>::min();

constexpr int64_t kExtremes[] = {0,           -1,          1,           7,          17,         kI32Max,
                                 kI32Min,     kI32Max + 1, int64_t{1} << 31, int64_t{1} << 61, kI64Max,
                                 kI64Max - 15, kI64Min,    4096};
// The values the pairs take (all pairs of all extremes would be slow for little more).
constexpr int64_t kPairExtremes[] = {0, -1, kI32Max, int64_t{1} << 61, kI64Max - 15};

// One tensor a call touches: `rows` rows `stride` elements apart, each `row_elements` long, of
// `element_bytes`. Its last byte is ((rows - 1) * stride + row_elements) * element_bytes past the base.
// All in 128 bits: the products of an accepted problem must fit in int64, which is what is checked.
struct Extent {
  const char* name;
  i128 rows, stride, row_elements, element_bytes;
};

constexpr i128 I(int64_t x) { return x; }

template <class P>
struct Field {
  const char* name;
  std::function<void(P&, int64_t)> set;
};

template <class P>
struct Pointer {
  const char* name;
  std::function<void(P&)> misalign;  // one byte past its valid place
};

// The field setter for an int or int64 member (int members take the value's low 32 bits, as a
// caller's narrowing would).
template <class P, class T>
std::function<void(P&, int64_t)> setter(T P::*member) {
  return [member](P& p, int64_t v) { p.*member = static_cast<T>(v); };
}

template <class P, class T>
std::function<void(P&)> misaligner(T* P::*member) {
  return [member](P& p) {
    p.*member = reinterpret_cast<T*>(reinterpret_cast<uintptr_t>(p.*member) + 1);
  };
}

// The last byte of each extent fits in int64.
void expect_extents_fit(const std::vector<Extent>& extents, const std::string& what) {
  for (const Extent& e : extents) {
    if (e.rows <= 0 || e.row_elements <= 0) continue;
    EXPECT_TRUE(e.stride >= 0 && e.element_bytes >= 1) << what << ": " << e.name;
    const i128 end = ((e.rows - 1) * e.stride + e.row_elements) * e.element_bytes;
    EXPECT_TRUE(end <= static_cast<i128>(kI64Max))
        << what << ": " << e.name << " ends " << static_cast<long double>(end) << " bytes past its base";
  }
}

template <class P>
void fuzz(const P& good, const std::vector<Field<P>>& fields, const std::vector<Pointer<P>>& pointers,
          const std::function<std::vector<Extent>(const P&)>& extents) {
  ASSERT_TRUE(validate(good).is_ok()) << validate(good).to_string();
  int accepted = 0, refused = 0;
  const auto check = [&](const P& p, const std::string& what) {
    const Status s = validate(p);
    if (s.is_ok()) {
      ++accepted;
      expect_extents_fit(extents(p.resolved()), what);
      return;
    }
    ++refused;
    EXPECT_TRUE(s.code() == StatusCode::kInvalidArgument || s.code() == StatusCode::kNotImplemented)
        << what << ": " << s.to_string();
    EXPECT_FALSE(s.message().empty()) << what;
  };
  for (const Field<P>& f : fields) {
    for (int64_t v : kExtremes) {
      P p = good;
      f.set(p, v);
      check(p, std::string(f.name) + "=" + std::to_string(v));
    }
  }
  for (size_t i = 0; i < fields.size(); ++i) {
    for (size_t j = i + 1; j < fields.size(); ++j) {
      for (int64_t a : kPairExtremes) {
        for (int64_t b : kPairExtremes) {
          P p = good;
          fields[i].set(p, a);
          fields[j].set(p, b);
          check(p, std::string(fields[i].name) + "=" + std::to_string(a) + " " + fields[j].name + "=" +
                       std::to_string(b));
        }
      }
    }
  }
  for (const Pointer<P>& ptr : pointers) {
    P p = good;
    ptr.misalign(p);
    check(p, std::string(ptr.name) + " misaligned");
  }
  EXPECT_GT(refused, 0);
  EXPECT_GT(accepted, 0);
}

TEST(ParamsFuzz, Indexer) {
  const IndexerParams good = testing::valid_indexer_params();
  using P = IndexerParams;
  const std::vector<Field<P>> fields = {
      {"num_tokens", setter(&P::num_tokens)},         {"num_keys", setter(&P::num_keys)},
      {"num_heads", setter(&P::num_heads)},           {"head_dim", setter(&P::head_dim)},
      {"q_token_stride", setter(&P::q_token_stride)}, {"w_token_stride", setter(&P::w_token_stride)},
      {"k_row_stride", setter(&P::k_row_stride)},     {"logits_stride", setter(&P::logits_stride)},
  };
  const std::vector<Pointer<P>> pointers = {
      {"q", misaligner(&P::q)},   {"w", misaligner(&P::w)},   {"k", misaligner(&P::k)},
      {"k_scale", misaligner(&P::k_scale)}, {"ks", misaligner(&P::ks)}, {"ke", misaligner(&P::ke)},
      {"logits", misaligner(&P::logits)},
  };
  fuzz<P>(good, fields, pointers, [](const P& r) {
    return std::vector<Extent>{{"q", I(r.num_tokens), I(r.q_token_stride), I(r.num_heads) * r.head_dim, 1},
                               {"w", I(r.num_tokens), I(r.w_token_stride), I(r.num_heads), 4},
                               {"k", I(r.num_keys), I(r.k_row_stride), I(r.head_dim), 1},
                               {"k_scale", I(r.num_keys), 1, 1, 4},
                               {"ks / ke", I(r.num_tokens), 1, 1, 4},
                               {"logits", I(r.num_tokens), I(r.logits_stride), I(r.num_keys), 4}};
  });
}

TEST(ParamsFuzz, Topk) {
  TopkParams good = testing::valid_topk_params();
  good.page_table = at<const int32_t>(1024);
  good.page_size = 64;
  good.pages_per_seq = 40;
  good.num_seqs = 37;
  using P = TopkParams;
  const std::vector<Field<P>> fields = {
      {"num_rows", setter(&P::num_rows)},
      {"num_keys", setter(&P::num_keys)},
      {"logits_stride", setter(&P::logits_stride)},
      {"k", setter(&P::k)},
      {"indices_stride", setter(&P::indices_stride)},
      {"page_table_stride", setter(&P::page_table_stride)},
      {"num_seqs", setter(&P::num_seqs)},
      {"pages_per_seq", setter(&P::pages_per_seq)},
      {"page_size", setter(&P::page_size)},
  };
  const std::vector<Pointer<P>> pointers = {
      {"logits", misaligner(&P::logits)}, {"ks", misaligner(&P::ks)}, {"ke", misaligner(&P::ke)},
      {"indices", misaligner(&P::indices)}, {"page_table", misaligner(&P::page_table)},
  };
  fuzz<P>(good, fields, pointers, [](const P& r) {
    return std::vector<Extent>{{"logits", I(r.num_rows), I(r.logits_stride), I(r.num_keys), 4},
                               {"ks / ke", I(r.num_rows), 1, 1, 4},
                               {"indices", I(r.num_rows), I(r.indices_stride), I(r.k), 4},
                               {"page_table", I(r.num_seqs), I(r.page_table_stride), I(r.pages_per_seq), 4}};
  });
}

TEST(ParamsFuzz, SparseMla) {
  for (KvFormat format : {KvFormat::kE4m3, KvFormat::kDeepSeekV32}) {
    SCOPED_TRACE(kv_format_name(format));
    SparseMlaParams good = testing::valid_sparse_mla_params();
    good.kv_format = format;
    good.q_dtype = format == KvFormat::kDeepSeekV32 ? DType::kBF16 : DType::kE4M3;
    using P = SparseMlaParams;
    const std::vector<Field<P>> fields = {
        {"num_tokens", setter(&P::num_tokens)},
        {"num_kv", setter(&P::num_kv)},
        {"num_heads", setter(&P::num_heads)},
        {"d_qk", setter(&P::d_qk)},
        {"d_v", setter(&P::d_v)},
        {"q_token_stride", setter(&P::q_token_stride)},
        {"q_head_stride", setter(&P::q_head_stride)},
        {"kv_row_stride", setter(&P::kv_row_stride)},
        {"topk", setter(&P::topk)},
        {"indices_stride", setter(&P::indices_stride)},
        {"out_token_stride", setter(&P::out_token_stride)},
        {"out_head_stride", setter(&P::out_head_stride)},
    };
    const std::vector<Pointer<P>> pointers = {
        {"q", misaligner(&P::q)},     {"kv", misaligner(&P::kv)},   {"indices", misaligner(&P::indices)},
        {"out", misaligner(&P::out)}, {"lse", misaligner(&P::lse)},
    };
    fuzz<P>(good, fields, pointers, [](const P& r) {
      const i128 q_bytes = r.q_dtype == DType::kBF16 ? 2 : 1;
      const i128 row_bytes = r.kv_format == KvFormat::kDeepSeekV32 ? I(kV32RowBytes) : I(r.d_qk);
      const i128 h = r.num_heads;
      return std::vector<Extent>{
          {"q", I(r.num_tokens), I(r.q_token_stride), (h - 1) * r.q_head_stride + r.d_qk, q_bytes},
          {"kv", I(r.num_kv), I(r.kv_row_stride), row_bytes, 1},
          {"indices", I(r.num_tokens), I(r.indices_stride), I(r.topk), 4},
          {"out", I(r.num_tokens), I(r.out_token_stride), (h - 1) * r.out_head_stride + r.d_v, 2},
          {"lse", I(r.num_tokens), h, h, 4}};
    });
  }
}

TEST(ParamsFuzz, LseMerge) {
  LseMergeParams good;
  good.num_tokens = 2;
  good.num_heads = 3;
  good.num_parts = 2;
  good.out_parts = at<const void>(0);
  good.lse_parts = at<const float>(256);
  good.out = at<void>(512);
  good.lse = at<float>(768);
  using P = LseMergeParams;
  const std::vector<Field<P>> fields = {
      {"num_tokens", setter(&P::num_tokens)},
      {"num_heads", setter(&P::num_heads)},
      {"d_v", setter(&P::d_v)},
      {"num_parts", setter(&P::num_parts)},
      {"part_stride", setter(&P::part_stride)},
      {"token_stride", setter(&P::token_stride)},
      {"head_stride", setter(&P::head_stride)},
      {"out_token_stride", setter(&P::out_token_stride)},
      {"out_head_stride", setter(&P::out_head_stride)},
  };
  const std::vector<Pointer<P>> pointers = {
      {"out_parts", misaligner(&P::out_parts)}, {"lse_parts", misaligner(&P::lse_parts)},
      {"out", misaligner(&P::out)},             {"lse", misaligner(&P::lse)},
  };
  fuzz<P>(good, fields, pointers, [](const P& r) {
    const i128 h = r.num_heads;
    const i128 part = (I(r.num_tokens) - 1) * r.token_stride + (h - 1) * r.head_stride + r.d_v;
    return std::vector<Extent>{
        {"out_parts", I(r.num_parts), I(r.part_stride), r.num_tokens > 0 ? part : 0, 2},
        {"lse_parts", I(r.num_parts) * r.num_tokens, h, h, 4},
        {"out", I(r.num_tokens), I(r.out_token_stride), (h - 1) * r.out_head_stride + r.d_v, 2},
        {"lse", I(r.num_tokens), h, h, 4}};
  });
}

}  // namespace
}  // namespace fp8dsa
