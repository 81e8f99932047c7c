// One stage's params from its arrays, shared by the stage's own call and by prefill(), which takes
// the indexer's and the attention's arrays together.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>

#include "array_checks.h"
#include "fp8dsa/indexer.h"
#include "fp8dsa/topk.h"
#include "fp8dsa/sparse_mla.h"

namespace fp8dsa::python {

// An extent as the int a params field holds; fails above INT32_MAX.
int narrow_extent(const ArrayChecker& arrays, const ArrayView& view, int dim);

// The indexer's arrays as messages name them: prefill() has a q of each stage.
struct IndexerArrayNames {
  const char* q;
  const char* k;
  const char* k_scale;
};
inline constexpr IndexerArrayNames kIndexerArrayNames{"q", "k", "k_scale"};
inline constexpr IndexerArrayNames kPrefillIndexerArrayNames{"index_q", "index_k", "index_k_scale"};

// DeepGEMM's fp8_mqa_logits layouts: q [T, H, D] e4m3 with packed heads, k [N, D] e4m3,
// k_scale [N] f32, weights [T, H] f32, ks / ke [T] i32. Everything of IndexerParams but logits.
IndexerParams indexer_params(ArrayChecker& arrays, const IndexerArrayNames& names, const InputArray& q,
                             const InputArray& k, const InputArray& k_scale,
                             const InputArray& weights, const InputArray& ks, const InputArray& ke);

// The top-k's page-table transform (shared by topk() and fused_topk()): page_table [B, P] i32,
// row_seq / row_pos_base [T] i32 (T = p->num_rows, named in messages as rows_from), into *p.
void set_page_table(ArrayChecker& arrays, const std::optional<InputArray>& page_table, int page_size,
                    const std::optional<InputArray>& row_seq, const std::optional<InputArray>& row_pos_base,
                    const char* rows_from, TopkParams* p);

// FlashMLA's flash_mla_sparse_fwd layouts: q [T, h, d_qk], kv [N, d_qk] or [N, 1, d_qk], attn_sink
// [h] f32, out [T, h, d_v] bf16, max_logits / lse [T, h] f32. Everything of SparseMlaParams but
// the indices, topk and topk_length. With kDeepSeekV32: q bf16 and kv rows of 656 bytes ([N, 656]
// or [N, 1, 656], uint8 or float8_e4m3fn), whatever q's d_qk.
struct AttentionArrays {
  KvFormat kv_format = KvFormat::kE4m3;
  ArrayView q, kv, out, max_logits, lse;
};
// Outputs not given (null) are planned ones ([T, h, d_v], [T, h]): the checks made before the
// caller allocates them.
AttentionArrays attention_arrays(ArrayChecker& arrays, const InputArray& q, const InputArray& kv,
                                 const OutputArray* out, const OutputArray* max_logits,
                                 const OutputArray* lse, int d_v, KvFormat kv_format = KvFormat::kE4m3);
SparseMlaParams attention_params(ArrayChecker& arrays, const AttentionArrays& views, float sm_scale,
                                 int d_v, const std::optional<InputArray>& attn_sink, float q_scale,
                                 float kv_scale);
// After validate() has accepted d_v: out's last extent.
void check_attention_out(const ArrayChecker& arrays, const AttentionArrays& views,
                         const SparseMlaParams& params);

// The workspaces of topk() and prefill() start kWorkspaceAlignment-byte aligned (fp8dsa/types.h). The
// Python layer allocates a uint8 array of kWorkspaceAlignment spare bytes; the workspace starts at
// its first aligned byte.
struct Workspace {
  void* data = nullptr;
  size_t bytes = 0;
};
Workspace aligned_workspace(ArrayChecker& arrays, const std::optional<OutputArray>& array);

}  // namespace fp8dsa::python
