#include "stage_params.h"

#include <cstdint>
#include <limits>
#include <string>

namespace fp8dsa::python {

int narrow_extent(const ArrayChecker& arrays, const ArrayView& view, int dim) {
  const int64_t extent = view.shape[dim];
  if (extent > std::numeric_limits<int32_t>::max()) {
    arrays.fail(std::string(view.name) + " dimension " + std::to_string(dim) + " (" +
                std::to_string(extent) + ") exceeds INT32_MAX");
  }
  return static_cast<int>(extent);
}

IndexerParams indexer_params(ArrayChecker& arrays, const IndexerArrayNames& names, const InputArray& q,
                             const InputArray& k, const InputArray& k_scale,
                             const InputArray& weights, const InputArray& ks, const InputArray& ke) {
  const ArrayView q_view = arrays.input(names.q, q, {3}, "[T, H, D]", Element::kE4M3);
  const ArrayView k_view = arrays.input(names.k, k, {2}, "[N, D]", Element::kE4M3);
  const ArrayView k_scale_view = arrays.input(names.k_scale, k_scale, {1}, "[N]", Element::kF32);
  const ArrayView weights_view = arrays.input("weights", weights, {2}, "[T, H]", Element::kF32);
  const ArrayView ks_view = arrays.input("ks", ks, {1}, "[T]", Element::kI32);
  const ArrayView ke_view = arrays.input("ke", ke, {1}, "[T]", Element::kI32);

  IndexerParams p;
  p.num_tokens = q_view.shape[0];
  p.num_heads = narrow_extent(arrays, q_view, 1);
  p.head_dim = narrow_extent(arrays, q_view, 2);
  p.num_keys = k_view.shape[0];
  // IndexerParams has a token stride only: the heads of a token must be packed.
  if (!q_view.empty && q_view.shape[1] > 1 && q_view.strides[1] != q_view.shape[2]) {
    arrays.fail(std::string(names.q) + " must have packed heads (stride " +
                std::to_string(q_view.strides[1]) + " between heads, D = " +
                std::to_string(q_view.shape[2]) + " needed)");
  }
  const std::string q_name = names.q;
  arrays.expect_extent(k_view, 1, p.head_dim, q_name + "'s D");
  arrays.expect_extent(k_scale_view, 0, p.num_keys, std::string(names.k) + "'s N");
  arrays.expect_extent(weights_view, 0, p.num_tokens, q_name + "'s T");
  arrays.expect_extent(weights_view, 1, p.num_heads, q_name + "'s H");
  arrays.expect_extent(ks_view, 0, p.num_tokens, q_name + "'s T");
  arrays.expect_extent(ke_view, 0, p.num_tokens, q_name + "'s T");
  arrays.expect_packed(k_scale_view);
  arrays.expect_packed(ks_view);
  arrays.expect_packed(ke_view);

  p.q = q_view.data;
  p.q_dtype = q_view.dtype;
  p.q_token_stride = q_view.field_stride(0);
  p.k = k_view.data;
  p.k_dtype = k_view.dtype;
  p.k_row_stride = k_view.field_stride(0);
  p.k_scale = static_cast<const float*>(k_scale_view.data);
  p.w = static_cast<const float*>(weights_view.data);
  p.w_token_stride = weights_view.field_stride(0);
  p.ks = static_cast<const int32_t*>(ks_view.data);
  p.ke = static_cast<const int32_t*>(ke_view.data);
  return p;
}

AttentionArrays attention_arrays(ArrayChecker& arrays, const InputArray& q, const InputArray& kv,
                                 const OutputArray* out, const OutputArray* max_logits,
                                 const OutputArray* lse, int d_v, KvFormat kv_format) {
  AttentionArrays v;
  v.kv_format = kv_format;
  const bool v32 = kv_format == KvFormat::kDeepSeekV32;
  v.q = arrays.input("q", q, {3}, "[T, h, d_qk]", v32 ? Element::kBF16 : Element::kE4M3OrBF16);
  if (v32) {
    v.kv = arrays.input("kv", kv, {2, 3}, "[N, 656] or [N, 1, 656]", Element::kE4M3);
  } else {
    v.kv = arrays.input("kv", kv, {2, 3}, "[N, d_qk] or [N, 1, d_qk]", Element::kE4M3OrBF16);
  }
  const int64_t num_tokens = v.q.shape[0];
  const int64_t num_heads = v.q.shape[1];
  v.out = out ? arrays.output("out", *out, {3}, "[T, h, d_v]", Element::kBF16)
              : arrays.planned_output("out", {num_tokens, num_heads, d_v}, Element::kBF16);
  const auto stats = [&](const char* name, const OutputArray* array) {
    return array ? arrays.output(name, *array, {2}, "[T, h]", Element::kF32)
                 : arrays.planned_output(name, {num_tokens, num_heads}, Element::kF32);
  };
  v.max_logits = stats("max_logits", max_logits);
  v.lse = stats("lse", lse);

  if (v.kv.ndim == 3) arrays.expect_extent(v.kv, 1, 1, "one latent KV head");
  if (v32) {
    arrays.expect_extent(v.kv, v.kv.ndim - 1, kV32RowBytes, "the deepseek_v32 row");
  } else {
    arrays.expect_extent(v.kv, v.kv.ndim - 1, v.q.shape[2], "q's d_qk");
  }
  arrays.expect_extent(v.out, 0, num_tokens, "q's T");
  arrays.expect_extent(v.out, 1, num_heads, "q's h");
  for (const ArrayView* stats : {&v.max_logits, &v.lse}) {
    arrays.expect_extent(*stats, 0, num_tokens, "q's T");
    arrays.expect_extent(*stats, 1, num_heads, "q's h");
    arrays.expect_packed(*stats);
  }
  return v;
}

SparseMlaParams attention_params(ArrayChecker& arrays, const AttentionArrays& v, float sm_scale,
                                 int d_v, const std::optional<InputArray>& attn_sink, float q_scale,
                                 float kv_scale) {
  SparseMlaParams p;
  p.kv_format = v.kv_format;
  p.num_tokens = v.q.shape[0];
  p.num_heads = narrow_extent(arrays, v.q, 1);
  p.d_qk = narrow_extent(arrays, v.q, 2);
  p.d_v = d_v;
  p.num_kv = v.kv.shape[0];
  p.q = v.q.data;
  p.q_dtype = v.q.dtype;
  p.q_token_stride = v.q.field_stride(0);
  p.q_head_stride = v.q.field_stride(1);
  p.kv = v.kv.data;
  p.kv_dtype = v.kv.dtype;
  p.kv_row_stride = v.kv.field_stride(0);
  p.sm_scale = sm_scale;
  p.q_scale = q_scale;
  p.kv_scale = kv_scale;
  p.out = v.out.data;
  p.out_token_stride = v.out.field_stride(0);
  p.out_head_stride = v.out.field_stride(1);
  p.max_logits = static_cast<float*>(v.max_logits.data);
  p.lse = static_cast<float*>(v.lse.data);
  if (attn_sink) {
    p.attn_sink = static_cast<const float*>(
        arrays.vector("attn_sink", *attn_sink, "[h]", Element::kF32, p.num_heads, "q's h").data);
  }
  return p;
}

void check_attention_out(const ArrayChecker& arrays, const AttentionArrays& v, const SparseMlaParams& p) {
  arrays.expect_extent(v.out, 2, p.d_v, "d_v");
}

namespace {

const int32_t* optional_row_array(ArrayChecker& arrays, const char* name,
                                  const std::optional<InputArray>& array, int64_t num_rows, const char* rows_from) {
  if (!array) return nullptr;
  return static_cast<const int32_t*>(arrays.vector(name, *array, "[T]", Element::kI32, num_rows, rows_from).data);
}

}  // namespace

void set_page_table(ArrayChecker& arrays, const std::optional<InputArray>& page_table, int page_size,
                    const std::optional<InputArray>& row_seq, const std::optional<InputArray>& row_pos_base,
                    const char* rows_from, TopkParams* p) {
  if (page_table) {
    const ArrayView table = arrays.input("page_table", *page_table, {2}, "[B, P]", Element::kI32);
    p->page_table = static_cast<const int32_t*>(table.data);
    p->pages_per_seq = narrow_extent(arrays, table, 1);
    p->page_table_stride = table.field_stride(0);
    // A row_seq past the table then maps to -1, never reads past it. num_seqs = 0 would tell the
    // library "not bounded" (topk.h): a table without rows is refused while there are rows to map.
    if (table.shape[0] == 0 && p->num_rows > 0) {
      arrays.fail("page_table has no rows ([0, P]): every row's sequence must be a row of the table");
    }
    p->num_seqs = table.shape[0];
  }
  p->page_size = page_size;
  p->row_seq = optional_row_array(arrays, "row_seq", row_seq, p->num_rows, rows_from);
  p->row_pos_base = optional_row_array(arrays, "row_pos_base", row_pos_base, p->num_rows, rows_from);
}

Workspace aligned_workspace(ArrayChecker& arrays, const std::optional<OutputArray>& array) {
  constexpr uintptr_t align = kWorkspaceAlignment;
  if (!array) return {};
  const ArrayView bytes = arrays.output("workspace", *array, {1}, "[bytes]", Element::kBytes);
  const uintptr_t start = reinterpret_cast<uintptr_t>(bytes.data);
  const uintptr_t skipped = (align - start % align) % align;
  const size_t size = static_cast<size_t>(bytes.shape[0]);
  return {reinterpret_cast<void*>(start + skipped), size > skipped ? size - skipped : 0};
}

}  // namespace fp8dsa::python
